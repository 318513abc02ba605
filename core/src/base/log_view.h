/* base/log_view.h — how library code logs: tpx__log formats a message
 * and hands it to the embedder's handler (tpx/log.h). Never prints.
 * The two calls are all other folders see of the log; its settings stay
 * in base/log.c. */
#ifndef TPX_BASE_LOG_VIEW_H
#define TPX_BASE_LOG_VIEW_H

#include "tpx/log.h"

/* Cheap check first: callers building an expensive message may test it. */
int tpx__log_enabled(int level);

/* printf-style; dropped when level is above the threshold or no handler is
 * set. Messages longer than 1023 bytes are truncated. */
void tpx__log(int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif /* TPX_BASE_LOG_VIEW_H */
