/* read_slice.c — tpx_checkpoint_read_slice: one box of one stored tensor
 * into the caller's buffer, converted to the dtype asked for (an FP8
 * weight read into floats dequantized by its scale, dequant.c), through
 * read.c's element reads. Beneath the per-parameter reads (read_params.c)
 * and the folds (fold.c), which call it. */
#include "checkpoint/ckpt_internal.h"

tpx_status tpx_checkpoint_read_slice(const tpx_checkpoint_reader *rd,
                                     int64_t tensor, const tpx_slice *slice,
                                     tpx_dtype dtype, void *dst,
                                     size_t dst_bytes, tpx_error *err) {
  if (rd == NULL || tensor < 0 || (size_t)tensor >= rd->load.n)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_checkpoint_read_slice: tensor %lld is out of "
                         "range",
                         (long long)tensor);
  const tpx__st_tensor *t = &rd->load.t[tensor];
  if (!tpx__ckpt_can_convert(t->dtype, dtype))
    return tpx_error_set(
        err, TPX_UNSUPPORTED, "%s: tensor '%s': cannot read %s as %s",
        rd->load.files[t->file].path, t->name, tpx_dtype_short_name(t->dtype),
        tpx_dtype_short_name(dtype));
  tpx__box_runs g;
  tpx_status st =
      tpx__box_runs_init(t->shape, t->ndim, slice, t->name, &g, err);
  if (st != TPX_OK)
    return st;
  if ((uint64_t)g.numel * tpx_dtype_size(dtype) > dst_bytes)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tensor '%s': the slice needs %lld bytes of %s, the "
                         "buffer holds %zu",
                         t->name,
                         (long long)(g.numel * (int64_t)tpx_dtype_size(dtype)),
                         tpx_dtype_short_name(dtype), dst_bytes);
  if (g.numel > 0 && dst == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tensor '%s': NULL destination", t->name);
  tpx__ckpt_dequant dq;
  st = tpx__ckpt_dequant_init(rd, t, dtype, &dq, err);
  if (st == TPX_OK)
    st = tpx__ckpt_read_elems(rd, t, &g, 0, g.numel, dtype, dst, &dq, err);
  tpx__ckpt_dequant_free(&dq);
  return st;
}
