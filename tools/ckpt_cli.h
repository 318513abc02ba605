/* ckpt_cli.h — shared by `tpx shard` and `tpx merge`: size parsing and a
 * terminal progress line fed by the library's progress callback. The
 * tpx-shard/1 format itself is the library's (tpx/checkpoint_shard.h). */
#ifndef TPX_TOOLS_CKPT_CLI_H
#define TPX_TOOLS_CKPT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/checkpoint_shard.h"
#include "tpx/tpx.h"

/* "5GB" (10^9), "500MiB" (2^20), "123" bytes; 0 ok, -1 bad. */
int tpx_cli_parse_bytes(const char *text, int64_t *out);

/* Progress on stderr when it is a terminal; quiet otherwise. */
typedef struct tpx_cli_progress {
  int tty, started;
  const char *what;
  double start, last;
  int64_t total_bytes, total_items;
  int64_t items, bytes; /* last reported */
} tpx_cli_progress;

void tpx_cli_progress_start(tpx_cli_progress *p, const char *what,
                            int64_t total_items, int64_t total_bytes);
void tpx_cli_progress_update(tpx_cli_progress *p, int64_t items,
                             int64_t bytes, int final);

/* A tpx_shard_progress_fn: `user` is a tpx_cli_progress whose `what` is
 * set; starts it on the first call (the totals), then updates it. */
void tpx_cli_progress_cb(const tpx_shard_progress *sp, void *user);

#endif
