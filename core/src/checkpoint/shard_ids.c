/* shard_ids.c — what ties the rank files of one `tpx shard` run together:
 * a run id (random unless the caller gives one) and a digest of the source
 * checkpoint's headers, both kept in every rank file so that a merge
 * refuses files of different runs or sources. The digest is FNV-1a 64 over
 * each source file's name and raw header (8-byte length + JSON): cheap,
 * and enough to tell checkpoints apart by accident, not by an adversary. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/shard_impl.h"

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

static int read_full(int fd, void *buf, size_t n, off_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0)
      errno = 0; /* the end of the file: no errno to report */
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

/* Folds file `path`'s name and header into *h. */
static tpx_status digest_file(const char *path, uint64_t *h, tpx_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  unsigned char len8[8], buf[65536];
  if (fd < 0 || read_full(fd, len8, 8, 0) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return tpx_error_set(err, TPX_IO, "%s: cannot read the header: %s", path,
                         fd < 0 ? strerror(e) : "the file is too short");
  }
  uint64_t len = 0;
  for (int b = 7; b >= 0; b--) len = len << 8 | len8[b];
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  *h = fnv(*h, base, strlen(base) + 1);
  *h = fnv(*h, len8, 8);
  tpx_status st = TPX_OK;
  for (uint64_t at = 0; at < len && st == TPX_OK;) {
    size_t n = len - at < sizeof buf ? (size_t)(len - at) : sizeof buf;
    if (read_full(fd, buf, n, (off_t)(8 + at)) != 0)
      st = tpx_error_set(err, TPX_IO, "%s: cannot read the header: %s", path,
                         errno ? strerror(errno) : "the file is too short");
    *h = fnv(*h, buf, n);
    at += n;
  }
  close(fd);
  return st;
}

tpx_status tpx__shard_source_digest(const tpx_checkpoint_reader *rd, char *out,
                                    size_t size, tpx_error *err) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < tpx_checkpoint_num_files(rd); i++) {
    tpx_status st = digest_file(tpx_checkpoint_file(rd, i), &h, err);
    if (st != TPX_OK)
      return st;
  }
  snprintf(out, size, "fnv1a64:%016llx", (unsigned long long)h);
  return TPX_OK;
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
