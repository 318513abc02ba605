/* plugin/child.h — the one child runner: run a piece of plugin code in a
 * forked child, collect what it writes to a pipe, and say how it ended
 * (exited, killed by a signal, or killed at the timeout).
 *
 * Served to: the registry's load probe (registry.c), isolated plugin calls
 * (call.c + isolate.c) and the conformance harness (harness/). Each caller
 * phrases the outcome in its own words; the clock, the timeout policy and
 * the signal names are decided here once. */
#ifndef TPX_PLUGIN_CHILD_H
#define TPX_PLUGIN_CHILD_H

#include <stddef.h>

#include "tpx/error.h"

/* The default time a child may take when the caller names none (the
 * registry's load probe, the harness's default --timeout). */
#define TPX__CHILD_DEFAULT_TIMEOUT 10.0

/* The address space a child may add when the caller names no limit:
 * TPX_PLUGIN_MEMORY_MB in the environment (0: unlimited), else 8 GiB. */
unsigned long long tpx__child_default_memory(void);

/* Runs in the child with the write end of the result pipe; what it writes
 * there comes back to the parent. Returning ends the child with _exit(0);
 * the body may also _exit with another status itself. The child's stdout
 * is its stderr: plugin output never reaches the host's stdout. */
typedef void (*tpx__child_body)(int fd, void *arg);

typedef struct tpx__child_spec {
  tpx__child_body body;
  void *arg;
  /* Seconds from the fork until the child is killed. The child must end
   * (or close its output) by then; it gets one more second to exit. */
  double timeout;
  /* Resource limits of the child (setrlimit): bytes of address space it may
   * add to what it inherited (RLIMIT_AS), and seconds of CPU (RLIMIT_CPU).
   * 0: no limit. */
  unsigned long long max_memory;
  double max_cpu;
} tpx__child_spec;

typedef enum tpx__child_end {
  TPX__CHILD_EXITED = 0,   /* code: the exit status */
  TPX__CHILD_SIGNALED = 1, /* code: the signal that killed it */
  TPX__CHILD_TIMED_OUT = 2 /* killed by the runner at the timeout */
} tpx__child_end;

typedef struct tpx__child_result {
  tpx__child_end end;
  int code;
  char *out;     /* everything the child wrote, NUL-terminated (malloc'd) */
  size_t len;    /* without the NUL */
  int held_open; /* the child ended but something it started (a grandchild)
                    still held the pipe open */
  /* How far the child's peak resident memory rose above what the parent
   * held when it forked (bytes; 0 when unknown): the evidence for "out of
   * memory" when a child dies under a memory limit. */
  unsigned long long rss_growth;
} tpx__child_result;

/* Fork, run spec->body in the child, read its output until it closes the
 * pipe or ends (a grandchild may hold the pipe open: the child's end
 * decides) or the timeout passes, then reap it. TPX_OK whenever the child ran,
 * whatever became of it (see res->end); TPX_INTERNAL when no child could
 * be started (pipe, fork) and TPX_NO_MEMORY when its output could not be
 * kept (the child is killed), with the reason in err. */
tpx_status tpx__child_run(const tpx__child_spec *spec, tpx__child_result *res,
                          tpx_error *err);
void tpx__child_result_free(tpx__child_result *res);

/* "SIGSEGV" for the signals a plugin usually dies of; NULL for others. */
const char *tpx__signal_name(int sig);

/* Seconds on the monotonic clock. */
double tpx__child_now(void);

#endif /* TPX_PLUGIN_CHILD_H */
