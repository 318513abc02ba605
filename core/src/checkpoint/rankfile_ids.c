/* rankfile_ids.c — the run id that ties the rank files of one `tpx shard` run
 * together (random unless the caller gives one), kept in every rank file
 * so that a merge refuses files of different runs. The source digest
 * beside it: source_digest.c. */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/rankfile_impl.h"

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

void tpx__shard_new_run_id(char *out, size_t size) {
  unsigned char r[16];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
    /* no entropy source: time and pid still differ between runs */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t a = fnv(1469598103934665603ULL, &ts, sizeof ts);
    pid_t pid = getpid();
    uint64_t b = fnv(a, &pid, sizeof pid);
    memcpy(r, &a, 8);
    memcpy(r + 8, &b, 8);
  }
  size_t used = 0;
  for (size_t i = 0; i < sizeof r && used + 3 <= size; i++)
    used += (size_t)snprintf(out + used, size - used, "%02x", r[i]);
}

int tpx__shard_run_id_ok(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n > 64)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (id[i] < 0x21 || id[i] > 0x7e)
      return 0;
  return 1;
}
