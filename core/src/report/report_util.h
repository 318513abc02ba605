/* report/report_util.h — helpers shared by the JSON and text reports: the
 * model's headline dtype, the ok flag over both diagnostic lists, and a
 * growable string buffer for the text form. Private to the report area. */
#ifndef TPX_REPORT_REPORT_UTIL_H
#define TPX_REPORT_REPORT_UTIL_H

#include <stdarg.h>
#include <stddef.h>

#include "tpx/dtype.h"
#include "tpx/report.h"
#include "tpx/validate.h"

/* The model's dtype: config torch_dtype / dtype (text_config too), else the
 * dtype holding most parameter elements; TPX_DTYPE_INVALID without params. */
tpx_dtype tpx__report_model_dtype(const tpx_model *model);

/* Whether a head-sharded plan's tp splits the heads (and kv heads) evenly:
 * otherwise the per-rank counts (torch's integer division) describe a
 * split that cannot happen (heads-not-divisible). */
int tpx__report_heads_split(const tpx_head_counts *hc, int64_t tp);

typedef struct tpx__sbuf {
  char *data;
  size_t len, cap;
  int failed; /* out of memory at some point */
} tpx__sbuf;

/* The caller's options (NULL: defaults) copied into *out up to their
 * struct_size; fields past it keep their defaults. TPX_INVALID_ARGUMENT
 * naming `fn` when struct_size ends before `indent`. */
tpx_status tpx__report_opts(const tpx_report_options *in,
                            tpx_report_options *out, const char *fn,
                            tpx_error *err);

/* The text after '=' of a "key=value" strategy line for `key`, or NULL. */
const char *tpx__report_strategy(const tpx_report_options *o, const char *key);

void tpx__sbuf_printf(tpx__sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tpx__sbuf_pad(tpx__sbuf *b, size_t col);
void tpx__sbuf_free(tpx__sbuf *b);

/* At ep > 1: `rank`'s coordinates on the MoE mesh appended to a JSON
 * coords object already holding the main mesh's, as ,"ep_shard":I,"ep":J
 * (`sep` after a key, `comma` between members). Nothing at ep 1. */
void tpx__report_moe_coords(const tpx_sharding *sh, int64_t rank,
                            const char *sep, const char *comma, tpx__sbuf *b);

#endif /* TPX_REPORT_REPORT_UTIL_H */
