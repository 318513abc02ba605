/* report/report_buffers.h — the model's buffers in the reports (saved
 * tensors the module tree keeps as buffers, tpx_model_buffer): listed with
 * their bytes, replicated on every rank, never sharded and not counted in
 * the per-rank parameter bytes (as upstream's per-rank parameter bytes do
 * not count them; docs/REPORT_FORMAT.md "buffers"). Private to the report
 * area. */
#ifndef TPX_REPORT_REPORT_BUFFERS_H
#define TPX_REPORT_REPORT_BUFFERS_H

#include <jansson.h>

#include "report/report_util.h"
#include "tpx/model.h"

/* Bytes of all the model's buffers (what every rank holds of them). */
int64_t tpx__report_buffer_bytes(const tpx_model *model);
/* The tpx-report/1 `buffers` object: {"placement": "replicate",
 * "total_bytes", "items": [{name, shape, dtype, bytes}, ...]}. New
 * reference, NULL on failure. */
json_t *tpx__report_buffers_json(const tpx_model *model);
/* The text section (nothing when the model has no buffers): one line per
 * buffer, buffers differing only in layer indices collapsed. */
void tpx__report_buffers_text(tpx__sbuf *b, const tpx_model *model);

#endif /* TPX_REPORT_REPORT_BUFFERS_H */
