/* plugin/quiet.c — keeps plugin output off the host's stdout: around every
 * in-process run of plugin code (dlopen and its constructors, register,
 * the calls, dlclose and its destructors) fd 1 is pointed at a sink (the
 * host's stderr), so a plugin's printf cannot corrupt `tpx plan --format
 * json` or any other output the host writes to stdout.
 *
 * fd 1 belongs to the whole process, so this is process-wide state, held
 * under one mutex: nested and concurrent plugin runs share one diversion
 * (the first to begin points fd 1 at the sink, the last to end restores
 * it). While any plugin code runs, everything written to fd 1 — the host's
 * own writes from other threads included — goes to the sink. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "plugin/plugin_internal.h"

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_depth;
static int g_saved = -1;
static int g_sink = STDERR_FILENO;

void tpx__quiet_sink(int fd) {
  pthread_mutex_lock(&g_mutex);
  g_sink = fd >= 0 ? fd : STDERR_FILENO;
  pthread_mutex_unlock(&g_mutex);
}

void tpx__quiet_begin(void) {
  pthread_mutex_lock(&g_mutex);
  if (g_depth++ == 0) {
    fflush(stdout); /* the host's own output goes where it was meant to */
    g_saved = dup(STDOUT_FILENO);
    if (g_saved >= 0 && dup2(g_sink, STDOUT_FILENO) < 0) {
      close(g_saved);
      g_saved = -1;
    }
  }
  pthread_mutex_unlock(&g_mutex);
}

void tpx__quiet_end(void) {
  pthread_mutex_lock(&g_mutex);
  if (g_depth > 0 && --g_depth == 0 && g_saved >= 0) {
    fflush(stdout); /* what the plugin buffered goes to the sink */
    dup2(g_saved, STDOUT_FILENO);
    close(g_saved);
    g_saved = -1;
  }
  pthread_mutex_unlock(&g_mutex);
}
