/* log.c — the process-wide logger: one handler (set by the embedding
 * program) and one threshold (from TPX_DEBUG, read once).
 *
 * Process-wide by design (one embedder, one log), so it is guarded:
 * pthread_once for the threshold and a mutex for the handler pair. The
 * handler is called outside the lock so that it may log or replace itself
 * without deadlocking.
 *
 * The library's process-wide state, all of it: these log settings; the
 * plugin host's registration-log slot (plugin/host.c, thread-local, set only
 * during one register call); the stdout diversion around plugin code
 * (plugin/quiet.c, fd 1 is the process's); and the MPI backend's count of
 * live worlds and whether tpx initialised MPI (comm/mpi.c). */
#include "tpx/log.h"

#include "base/log_view.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static pthread_once_t g_level_once = PTHREAD_ONCE_INIT;
static int g_level = TPX_LOG_ERROR;

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static tpx_log_fn g_fn;
static void *g_user;

static void read_level(void) {
  const char *v = getenv("TPX_DEBUG");
  if (v == NULL)
    return;
  if (strcasecmp(v, "warn") == 0 || strcasecmp(v, "warning") == 0)
    g_level = TPX_LOG_WARN;
  else if (strcasecmp(v, "info") == 0)
    g_level = TPX_LOG_INFO;
  else if (strcasecmp(v, "trace") == 0)
    g_level = TPX_LOG_TRACE;
}

int tpx_log_level(void) {
  pthread_once(&g_level_once, read_level);
  return g_level;
}

const char *tpx_log_level_name(int level) {
  switch (level) {
  case TPX_LOG_ERROR: return "error";
  case TPX_LOG_WARN: return "warn";
  case TPX_LOG_INFO: return "info";
  case TPX_LOG_TRACE: return "trace";
  default: return "unknown";
  }
}

void tpx_log_set_handler(tpx_log_fn fn, void *user) {
  pthread_mutex_lock(&g_mutex);
  g_fn = fn;
  g_user = user;
  pthread_mutex_unlock(&g_mutex);
}

int tpx__log_enabled(int level) {
  if (level > tpx_log_level())
    return 0;
  pthread_mutex_lock(&g_mutex);
  int on = g_fn != NULL;
  pthread_mutex_unlock(&g_mutex);
  return on;
}

void tpx__log(int level, const char *fmt, ...) {
  if (fmt == NULL || level > tpx_log_level())
    return;
  pthread_mutex_lock(&g_mutex);
  tpx_log_fn fn = g_fn;
  void *user = g_user;
  pthread_mutex_unlock(&g_mutex);
  if (fn == NULL)
    return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(user, level, msg);
}
