/* ckpt_cli.c — size parsing and the progress line of `tpx shard` and
 * `tpx merge` (see ckpt_cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_cli.h"

int tpx_cli_parse_bytes(const char *text, int64_t *out) {
  static const struct {
    const char *suffix;
    int64_t mul;
  } units[] = {{"KiB", 1LL << 10}, {"MiB", 1LL << 20}, {"GiB", 1LL << 30},
               {"TiB", 1LL << 40}, {"KB", 1000LL},     {"MB", 1000000LL},
               {"GB", 1000000000LL}, {"TB", 1000000000000LL}, {"B", 1},
               {"", 1}};
  if (text == NULL || *text < '0' || *text > '9')
    return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || v < 1)
    return -1;
  for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
    if (strcmp(end, units[i].suffix) == 0) {
      if (v > INT64_MAX / units[i].mul)
        return -1;
      *out = (int64_t)v * units[i].mul;
      return 0;
    }
  }
  return -1;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tpx_cli_progress_start(tpx_cli_progress *p, const char *what,
                            int64_t total_items, int64_t total_bytes) {
  p->tty = isatty(STDERR_FILENO);
  p->what = what;
  p->start = p->last = now();
  p->total_items = total_items;
  p->total_bytes = total_bytes;
}

void tpx_cli_progress_update(tpx_cli_progress *p, int64_t items,
                             int64_t bytes, int final) {
  if (!p->tty)
    return;
  double t = now();
  if (!final && t - p->last < 0.1)
    return;
  p->last = t;
  double dt = t - p->start > 1e-6 ? t - p->start : 1e-6;
  fprintf(stderr, "\r%s: %lld/%lld tensors, %.1f/%.1f MB, %.1f MB/s   %s",
          p->what, (long long)items, (long long)p->total_items,
          (double)bytes / 1e6, (double)p->total_bytes / 1e6,
          (double)bytes / 1e6 / dt, final ? "\n" : "");
  fflush(stderr);
}

void tpx_cli_progress_cb(const tpx_shard_progress *sp, void *user) {
  tpx_cli_progress *p = user;
  if (!p->started) {
    tpx_cli_progress_start(p, p->what, sp->total_items, sp->total_bytes);
    p->started = 1;
  }
  p->items = sp->items;
  p->bytes = sp->bytes;
  tpx_cli_progress_update(p, sp->items, sp->bytes, 0);
}
