/* tpx/log.h — the one logger: a callback set by the embedding program.
 *
 * libtpx never prints. Messages at or below the threshold (tpx_log_level)
 * go to the handler set here; with no handler nothing is logged at all. The
 * threshold comes from the environment variable TPX_DEBUG=warn|info|trace,
 * read once, at the first log call, tpx_log_level() or
 * tpx_log_set_handler() call; unset, "", 0, off, none or error mean errors
 * only; 1, on, yes, true and debug mean info; 2 and all mean trace (any
 * case). Any other value means warnings, and the first handler installed
 * receives one TPX_LOG_WARN message naming the value.
 *
 * Thread safety: the handler may be set from any thread at any time; it may
 * be called from several threads at once, so it must be thread-safe itself.
 * This is the only process-wide state in libtpx. */
#ifndef TPX_LOG_H
#define TPX_LOG_H

#include "tpx/error.h"

TPX_BEGIN_DECLS

/* Lower is more severe; a message is delivered when level <= threshold. */
typedef enum tpx_log_severity {
  TPX_LOG_ERROR = 0,
  TPX_LOG_WARN = 1,
  TPX_LOG_INFO = 2,
  TPX_LOG_TRACE = 3,
} tpx_log_severity;

/* `message` is NUL-terminated, has no trailing newline and is only valid
 * during the call. `user` is the pointer given to tpx_log_set_handler. */
typedef void (*tpx_log_fn)(void *user, int level, const char *message);

/* Install `fn` (NULL removes the handler). Replaces any earlier handler. */
TPX_API void tpx_log_set_handler(tpx_log_fn fn, void *user);

/* The threshold, one of TPX_LOG_*: from TPX_DEBUG, read once. */
TPX_API int tpx_log_level(void);

/* "error", "warn", "info", "trace"; a static string ("unknown" otherwise). */
TPX_API const char *tpx_log_level_name(int level);

TPX_END_DECLS

#endif /* TPX_LOG_H */
