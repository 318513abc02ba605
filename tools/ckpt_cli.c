/* ckpt_cli.c — what `tpx shard` and `tpx merge` share (see ckpt_cli.h):
 * size parsing, the progress and summary lines, notes, and the SIGBUS
 * guard around reads of mapped files. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_cli.h"

int tpx_cli_parse_bytes(const char *text, int64_t *out) {
  static const struct {
    const char *suffix;
    int64_t mul;
  } units[] = {{"KiB", 1LL << 10},
               {"MiB", 1LL << 20},
               {"GiB", 1LL << 30},
               {"TiB", 1LL << 40},
               {"KB", 1000LL},
               {"MB", 1000000LL},
               {"GB", 1000000000LL},
               {"TB", 1000000000000LL},
               {"B", 1},
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

void tpx_cli_progress_update(tpx_cli_progress *p, int64_t items, int64_t bytes,
                             int final) {
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
  p->files = sp->files;
  tpx_cli_progress_update(p, sp->items, sp->bytes, 0);
}

void tpx_cli_note_cb(const char *message, void *user) {
  fprintf(stderr, "%s: %s\n", (const char *)user, message);
}

void tpx_cli_summary(const char *cmd, int64_t files, int64_t bytes,
                     const char *dir) {
  if (isatty(STDOUT_FILENO) && isatty(STDERR_FILENO))
    return;
  fprintf(stderr, "%s: wrote %lld file%s, %.1f MB of tensor data, into %s\n",
          cmd, (long long)files, files == 1 ? "" : "s", (double)bytes / 1e6,
          dir);
}

/* The guard's jump target while fn runs (one guard at a time). */
static sigjmp_buf *guard_jump;

static void on_sigbus(int sig) {
  (void)sig;
  if (guard_jump)
    siglongjmp(*guard_jump, 1);
  signal(SIGBUS, SIG_DFL);
  raise(SIGBUS);
}

int tpx_cli_guard_sigbus(int (*fn)(void *), void *ctx) {
  sigjmp_buf here;
  static struct sigaction old; /* read after the jump: not a local */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  if (sigsetjmp(here, 1) != 0) {
    guard_jump = NULL;
    sigaction(SIGBUS, &old, NULL);
    return -2;
  }
  guard_jump = &here;
  sigaction(SIGBUS, &sa, &old);
  int rc = fn(ctx);
  guard_jump = NULL;
  sigaction(SIGBUS, &old, NULL);
  return rc;
}

void tpx_cli_report_sigbus(const char *cmd, const char *path) {
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  if (tpx_checkpoint_reader_create(path, NULL, &rd, &err) != TPX_OK)
    fprintf(stderr,
            "%s: %s: a file shrank while it was being read (SIGBUS): %s; "
            "the file being written was left unfinished (no final name)\n",
            cmd, path, err.message);
  else
    fprintf(stderr,
            "%s: %s: a file changed size while it was being read (SIGBUS); "
            "the file being written was left unfinished (no final name)\n",
            cmd, path);
  tpx_checkpoint_reader_destroy(rd);
}

/* mkdir -p: every missing directory on the way to dir, then dir; EEXIST
 * is fine (a run beside this one made it first). 0, or -1 with errno. */
static int make_dirs(const char *dir) {
  size_t n = strlen(dir);
  char *path = malloc(n + 1);
  if (!path)
    return -1;
  memcpy(path, dir, n + 1);
  int rc = 0;
  for (size_t i = 1; i <= n && rc == 0; i++) {
    if (path[i] != '/' && path[i] != '\0')
      continue;
    char c = path[i];
    path[i] = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      rc = -1;
    path[i] = c;
  }
  int saved = errno;
  free(path);
  errno = saved;
  return rc;
}

int tpx_cli_check_out_dir(const char *cmd, const char *dir) {
  struct stat sb;
  const char *why = NULL;
  /* made when missing, with its missing parents (the help says "created
   * if missing") */
  if (stat(dir, &sb) != 0 && errno == ENOENT && make_dirs(dir) != 0)
    why = strerror(errno);
  else if (stat(dir, &sb) != 0)
    why = strerror(errno);
  else if (!S_ISDIR(sb.st_mode))
    why = "not a directory";
  else if (access(dir, W_OK | X_OK) != 0)
    why = strerror(errno);
  /* kept once made: removing it again could pull it from under another
   * --rank run writing into the same new directory */
  if (why)
    fprintf(stderr, "%s: --out %s: cannot write the output there: %s\n", cmd,
            dir, why);
  return why ? -1 : 0;
}
