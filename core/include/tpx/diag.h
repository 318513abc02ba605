/* tpx/diag.h — diagnostics: problems found while selecting, matching,
 * applying and validating a plan, each with a level, a stable code, the key
 * or object at fault, a message and a fix.
 *
 * Codes are stable kebab-case identifiers (README lists them), e.g.
 * "unmatched-key", "heads-not-divisible", "tied-embeddings", "uneven-shard",
 * "replicated-by-omission", "remote-code-no-plan", "hf-style-unsupported",
 * "duplicate-match", "plugin-refused", "plugin-failed". */
#ifndef TPX_DIAG_H
#define TPX_DIAG_H

#include <stddef.h>

#include "tpx/error.h"

TPX_BEGIN_DECLS

typedef enum tpx_diag_level {
  TPX_DIAG_INFO = 0,
  TPX_DIAG_WARNING = 1,
  TPX_DIAG_ERROR = 2,
} tpx_diag_level;

/* Borrowed view; strings valid while the list lives. */
typedef struct tpx_diag {
  tpx_diag_level level;
  const char *code;    /* "unmatched-key" */
  const char *subject; /* the key / parameter / file at fault; may be "" */
  const char *message; /* one sentence naming the subject */
  const char *fix;     /* how to fix it; may be "" */
} tpx_diag;

typedef struct tpx_diag_list tpx_diag_list;

TPX_API tpx_status tpx_diag_list_create(tpx_diag_list **out, tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_diag_list_destroy(tpx_diag_list *list);

/* Append a diagnostic; strings are copied; subject and fix may be NULL.
 * printf-style message. */
TPX_API tpx_status tpx_diag_add(tpx_diag_list *list, tpx_diag_level level,
                                const char *code, const char *subject,
                                const char *fix, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

TPX_API size_t tpx_diag_count(const tpx_diag_list *list);
/* Fills *out with a borrowed view; TPX_OUT_OF_RANGE past the end. */
TPX_API tpx_status tpx_diag_get(const tpx_diag_list *list, size_t index,
                                tpx_diag *out, tpx_error *err);
/* Number of diagnostics at `level` or above. */
TPX_API size_t tpx_diag_count_at_least(const tpx_diag_list *list,
                                       tpx_diag_level level);
/* "info", "warning", "error"; static. */
TPX_API const char *tpx_diag_level_name(tpx_diag_level level);

TPX_END_DECLS

#endif /* TPX_DIAG_H */
