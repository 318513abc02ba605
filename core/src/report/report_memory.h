/* report/report_memory.h — the training-memory parts of the reports (the
 * `memory` object of every tpx-report/1 per_rank item, the per-rank slice
 * fields of --rank, and the text section), kept apart from the rest of the
 * report code. Private to the report area. */
#ifndef TPX_REPORT_REPORT_MEMORY_H
#define TPX_REPORT_REPORT_MEMORY_H

#include <jansson.h>

#include "report/report_util.h"
#include "tpx/memory.h"

/* Memory of a window of ranks, refilled as ranks advance. */
typedef struct tpx__mem_window {
  tpx_memory m[512];
  int64_t first;
  size_t n;
} tpx__mem_window;

/* Appends `,"memory":{...}` for rank r (ranks asked in increasing order).
 * 0 on failure (the options were checked by tpx__report_memory_check). */
/* Appends `,"memory":{...}` with the figures of *m; with `offload` (the
 * options' CPU offload) also "device" and "host". */
void tpx__report_memory_write(tpx__sbuf *b, const tpx_memory *m,
                              const char *sep, const char *comma, int offload);
/* 1 when the options (NULL: defaults) ask for CPU offload. */
int tpx__report_memory_offload(const tpx_memory_options *mo);
int tpx__report_memory_json(const tpx_sharding *sh,
                            const tpx_memory_options *mo, tpx__mem_window *w,
                            int64_t r, const char *sep, const char *comma,
                            tpx__sbuf *b);
/* Computes rank 0's memory once so that a bad option or a config the
 * activation formula cannot read fails the report up front. */
tpx_status tpx__report_memory_check(const tpx_sharding *sh,
                                    const tpx_memory_options *mo,
                                    tpx_error *err);
/* The text section: per-rank memory by term, identical ranks grouped. */
void tpx__report_memory_text(tpx__sbuf *b, const tpx_sharding *sh,
                             const tpx_memory_options *mo);
/* With activations asked for (mo->seq > 0): 1 and the largest training
 * peak on the device over all ranks (the text table's `peak`, or its
 * `device` column with offload) in *peak, the first rank holding it in
 * *rank. 0 without seq or when it cannot be computed. */
int tpx__report_training_peak(const tpx_sharding *sh,
                              const tpx_memory_options *mo, int64_t *peak,
                              int64_t *rank);
/* {"optimizer", "batch", "seq", "activation_checkpointing", "attention",
 * "activation_dtype"} (+ "offload": true when on): what the per_rank memory
 * was computed for. New reference. */
json_t *tpx__report_memory_options_json(const tpx_sharding *sh,
                                        const tpx_memory_options *mo);
/* local_shape, global_offset and local_bytes of `rank`'s slice of
 * parameter p, added to the parameter's object `o`. */
void tpx__report_slice_json(json_t *o, const tpx_sharding *sh, int64_t p,
                            int64_t rank);

#endif /* TPX_REPORT_REPORT_MEMORY_H */
