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
  int64_t items, bytes, files; /* last reported */
} tpx_cli_progress;

void tpx_cli_progress_start(tpx_cli_progress *p, const char *what,
                            int64_t total_items, int64_t total_bytes);
void tpx_cli_progress_update(tpx_cli_progress *p, int64_t items, int64_t bytes,
                             int final);

/* A tpx_shard_progress_fn: `user` is a tpx_cli_progress whose `what` is
 * set; starts it on the first call (the totals), then updates it. */
void tpx_cli_progress_cb(const tpx_shard_progress *sp, void *user);

/* A tpx_shard_note_fn: prints "CMD: MESSAGE" on stderr; `user` is the
 * command name ("tpx merge"). */
void tpx_cli_note_cb(const char *message, void *user);

/* "CMD: wrote N files, X MB ..." on stderr unless stdout and stderr are
 * both terminals (where the progress line said it already). */
void tpx_cli_summary(const char *cmd, int64_t files, int64_t bytes,
                     const char *dir);

/* --out DIR, checked before any work (docs/tpx.1: an output path that
 * cannot be written is exit 2, not a failure after the planning): DIR is
 * an existing, writable directory, or is created now (the write would
 * create it anyway). Otherwise prints "CMD: --out DIR: reason" on stderr
 * and returns -1. */
int tpx_cli_check_out_dir(const char *cmd, const char *dir);

/* Runs fn(ctx) and returns its value, or -2 when a SIGBUS stopped it: the
 * checkpoint reader maps files, and a file another process truncates
 * while it is read faults instead of failing a read. What fn allocated
 * is lost (the process is about to exit). */
int tpx_cli_guard_sigbus(int (*fn)(void *), void *ctx);
/* After that -2: names the file that shrank (re-opening `path`, a
 * checkpoint file, index or directory, checks every header against the
 * file sizes) in a message on stderr. */
void tpx_cli_report_sigbus(const char *cmd, const char *path);

#endif
