/* model/fp8_view.h — FP8 block-quantized checkpoints (fp8.c), the part the
 * checkpoint area shares: the pairing tpx_model_add_safetensors runs, the
 * pair a stored name belongs to, and the one refusal text for reading an
 * F8 weight the model does not pair (docs/CHECKPOINT.md "FP8
 * checkpoints"; the reader dequantizes the ones it pairs). */
#ifndef TPX_MODEL_FP8_VIEW_H
#define TPX_MODEL_FP8_VIEW_H

#include "model/st_header.h"

/* tpx_model_add_safetensors, on the load before any rename: pair every
 * `<w>_scale_inv` with its F8 weight, check it (tpx/model.h), record it in
 * model->quant, skip the scale (and activation scales), and give the
 * weight the dtype upstream dequantizes it into. */
tpx_status tpx__fp8_mark(tpx_model *model, tpx__st_load *l, tpx_error *err);

/* The FP8 pair (tpx_model_quantized) whose weight or scale is stored
 * under `name` (the checkpoint's own name), *is_scale saying which, or
 * NULL. */
const tpx_quantized_weight *tpx__fp8_find(const tpx_model *model,
                                          const char *name, int *is_scale);

/* 1 when `name` is stored beside an FP8 weight and is no parameter: its
 * `_scale_inv` or an activation scale (tpx shard writes them whole). */
int tpx__fp8_is_companion(const tpx_model *model, const char *name);

/* TPX_UNSUPPORTED naming `t`, its scale and what to do when `t` is stored
 * F8 with a `<name>_scale_inv` in `l` (called where the model does not
 * pair them, or the read is into neither a float nor its own dtype);
 * TPX_OK otherwise. `param` names the parameter it was to be read into. */
tpx_status tpx__fp8_refuse_read(const tpx__st_load *l, const tpx__st_tensor *t,
                                const char *param, tpx_error *err);

#endif /* TPX_MODEL_FP8_VIEW_H */
