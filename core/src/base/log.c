/* log.c — the process-wide logger: one handler (set by the embedding
 * program) and one threshold (from TPX_DEBUG, read once).
 *
 * Process-wide by design (one embedder, one log), so it is guarded:
 * pthread_once for the threshold and a mutex for the handler pair. The
 * handler is called outside the lock so that it may log or replace itself
 * without deadlocking. A TPX_DEBUG value that names no level is kept (its
 * first 63 bytes) so that the first handler installed hears about it once:
 * the library never prints, the handler decides (the CLI prints it).
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
/* TPX_DEBUG when it names no level ("" when it does), and whether a
 * handler was told: set once under g_level_once, read under g_mutex. */
static char g_unknown[64];
static int g_unknown_told;

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static tpx_log_fn g_fn;
static void *g_user;

/* The spellings TPX_DEBUG accepts (case-insensitive); docs/tpx.1. */
static const struct {
  const char *name;
  int level;
} g_names[] = {
    {"", TPX_LOG_ERROR},       {"0", TPX_LOG_ERROR},
    {"off", TPX_LOG_ERROR},    {"none", TPX_LOG_ERROR},
    {"error", TPX_LOG_ERROR},  {"warn", TPX_LOG_WARN},
    {"warning", TPX_LOG_WARN}, {"1", TPX_LOG_INFO},
    {"on", TPX_LOG_INFO},      {"yes", TPX_LOG_INFO},
    {"true", TPX_LOG_INFO},    {"info", TPX_LOG_INFO},
    {"debug", TPX_LOG_INFO},   {"2", TPX_LOG_TRACE},
    {"trace", TPX_LOG_TRACE},  {"all", TPX_LOG_TRACE},
};

/* An unknown value still asked for a log: warnings, and the one warning
 * about the value itself. */
static void read_level(void) {
  const char *v = getenv("TPX_DEBUG");
  if (v == NULL)
    return;
  for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; i++)
    if (strcasecmp(v, g_names[i].name) == 0) {
      g_level = g_names[i].level;
      return;
    }
  g_level = TPX_LOG_WARN;
  snprintf(g_unknown, sizeof g_unknown, "%s", v);
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
  pthread_once(&g_level_once, read_level);
  pthread_mutex_lock(&g_mutex);
  g_fn = fn;
  g_user = user;
  int tell = fn != NULL && g_unknown[0] && !g_unknown_told;
  if (tell)
    g_unknown_told = 1;
  pthread_mutex_unlock(&g_mutex);
  if (tell) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "TPX_DEBUG='%s' is not a log level; showing warnings (use "
             "error|warn|info|trace, or 0, 1 = info, debug = info, 2 = "
             "trace)",
             g_unknown);
    fn(user, TPX_LOG_WARN, msg);
  }
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
