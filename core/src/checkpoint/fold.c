/* fold.c — parameters read from several stored tensors: the fused 3-D
 * expert parameters of MoE models stored one tensor per expert and
 * projection, and Mixtral's renamed router. Which tensors and where they go
 * comes from model/expert_fold.h (the one place holding the naming rules);
 * this file resolves them in a checkpoint, checks them, and reads a rank's
 * box of such a parameter as the union of its boxes in the sources. Not the
 * one-to-one reads (reader.c, read.c). */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "model/expert_fold.h"
#include "model/fp8_view.h"

/* The naming scheme the checkpoint stores `param`'s sources under (some
 * source is stored; the first is looked up first), or 0. */
static int scheme_of(const tpx_checkpoint_reader *rd, const tpx_model *model,
                     int64_t param) {
  static const int schemes[] = {TPX__EXPERT_NAMES_RULES, TPX__EXPERT_NAMES_HF,
                                TPX__EXPERT_NAMES_MIXTRAL};
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
    char name[600];
    tpx_slice box;
    int64_t n = tpx__expert_fold_num_sources(model, param, schemes[i]);
    for (int64_t k = 0; k < n; k++)
      if (tpx__expert_fold_source(model, param, schemes[i], k, name,
                                  sizeof name, &box, NULL, NULL) == TPX_OK &&
          tpx__ckpt_find_param_name(rd, model, name) >= 0)
        return schemes[i];
  }
  return 0;
}

int64_t tpx_checkpoint_param_num_sources(const tpx_checkpoint_reader *rd,
                                         const tpx_model *model,
                                         int64_t param) {
  if (rd == NULL || model == NULL || param < 0 ||
      (size_t)param >= tpx_model_num_params(model))
    return 0;
  if (tpx_checkpoint_param_tensor(rd, model, param) >= 0)
    return 1;
  int scheme = scheme_of(rd, model, param);
  return scheme ? tpx__expert_fold_num_sources(model, param, scheme) : 0;
}

tpx_status tpx_checkpoint_param_source(const tpx_checkpoint_reader *rd,
                                       const tpx_model *model, int64_t param,
                                       int64_t k, tpx_checkpoint_source *out,
                                       tpx_error *err) {
  return tpx__ckpt_param_source(rd, model, param, k, out, NULL, err);
}

int tpx_checkpoint_param_source_transposed(const tpx_checkpoint_reader *rd,
                                           const tpx_model *model,
                                           int64_t param, int64_t k) {
  tpx_checkpoint_source src;
  int transpose = 0;
  if (rd == NULL || model == NULL ||
      tpx__ckpt_param_source(rd, model, param, k, &src, &transpose, NULL) !=
          TPX_OK)
    return -1;
  return transpose;
}

tpx_status tpx__ckpt_param_source(const tpx_checkpoint_reader *rd,
                                  const tpx_model *model, int64_t param,
                                  int64_t k, tpx_checkpoint_source *out,
                                  int *transpose, tpx_error *err) {
  tpx_param_info p;
  if (transpose)
    *transpose = 0;
  if (rd == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_param_source: NULL argument");
  tpx_status st = tpx_model_param(model, param, &p, err);
  if (st != TPX_OK)
    return st;
  memset(out, 0, sizeof *out);
  int64_t ti = tpx_checkpoint_param_tensor(rd, model, param);
  if (ti >= 0) {
    if (k != 0)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "parameter '%s' has one source, not %lld", p.fqn,
                           (long long)k + 1);
    out->tensor = ti;
    out->box.ndim = p.ndim;
    for (int d = 0; d < p.ndim; d++) out->box.length[d] = p.shape[d];
    return TPX_OK;
  }
  int scheme = scheme_of(rd, model, param);
  if (scheme == 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "%s: parameter '%s' is not in the checkpoint%s",
                         rd->load.num_files ? rd->load.files[0].path : "?",
                         p.fqn, p.tied_to >= 0 ? " (nor its tie target)" : "");
  char name[600];
  st = tpx__expert_fold_source(model, param, scheme, k, name, sizeof name,
                               &out->box, transpose, err);
  if (st != TPX_OK)
    return st;
  out->tensor = tpx__ckpt_find_param_name(rd, model, name);
  if (out->tensor < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "%s: tensor '%s' (part of the fused parameter '%s') "
                         "is not in the checkpoint",
                         rd->load.num_files ? rd->load.files[0].path : "?",
                         name, p.fqn);
  return TPX_OK;
}

int tpx__ckpt_fp8_ok(const tpx_model *model, const tpx__st_tensor *t,
                     int into) {
  int scale = 0;
  const tpx_quantized_weight *q = tpx__fp8_find(model, t->name, &scale);
  return q && !scale && q->stored_dtype == t->dtype &&
         (into == TPX__FP8_CHECK || into == TPX__FP8_FLOAT ||
          into == (int)t->dtype ||
          (into >= 0 && tpx__ckpt_dequant_target((tpx_dtype)into)));
}

tpx_status tpx__ckpt_check_sources(const tpx_checkpoint_reader *rd,
                                   const tpx_model *model, int64_t param,
                                   int into, tpx_error *err) {
  tpx_param_info p;
  tpx_status st = tpx_model_param(model, param, &p, err);
  int64_t n = tpx_checkpoint_param_num_sources(rd, model, param);
  for (int64_t k = 0; st == TPX_OK && k < n; k++) {
    tpx_checkpoint_source src;
    int tr = 0;
    st = tpx__ckpt_param_source(rd, model, param, k, &src, &tr, err);
    if (st != TPX_OK)
      break;
    const tpx__st_tensor *t = &rd->load.t[src.tensor];
    int fp8 = t->dtype != p.dtype && tpx__ckpt_fp8_ok(model, t, into);
    if ((t->dtype == p.dtype || fp8) &&
        tpx__fold_source_fits(&src.box, tr, t->shape, t->ndim))
      continue;
    if (!fp8 && (st = tpx__fp8_refuse_read(&rd->load, t, p.fqn, err)) != TPX_OK)
      break;
    char a[200], b[200], c[200], o[200];
    int64_t want[TPX_MAX_TENSOR_DIMS];
    int wn = tpx__fold_source_shape(&src.box, tr, want);
    return tpx_error_set(
        err, TPX_VALIDATION,
        "%s: tensor '%s' is %s %s, but as the part %s of the model's "
        "parameter '%s' (%s %s)%s it must be %s %s",
        rd->load.files[t->file].path, t->name,
        tpx__format_shape(a, sizeof a, t->shape, t->ndim),
        tpx_dtype_safetensors_name(t->dtype),
        tpx__fold_box_text(o, sizeof o, &src.box), p.fqn,
        tpx__format_shape(b, sizeof b, p.shape, p.ndim),
        tpx_dtype_safetensors_name(p.dtype),
        tr ? ", stored transposed (its last two dims swapped)," : "",
        tpx__format_shape(c, sizeof c, want, wn),
        tpx_dtype_safetensors_name(p.dtype));
  }
  if (st == TPX_OK && n == 0) {
    tpx_checkpoint_source none;
    st = tpx_checkpoint_param_source(rd, model, param, 0, &none, err);
  }
  return st;
}

/* Copies the dense box `src` (lengths len[], ndim dims; with `transpose`
 * stored with its last two dims swapped) into the dense buffer `dst` of
 * lengths dlen[] at offsets at[], element size sz. */
static void place(char *dst, const int64_t *dlen, const int64_t *at,
                  const char *src, const int64_t *len, int ndim, size_t sz,
                  int transpose) {
  int inner = transpose ? 2 : 1; /* dims one step copies */
  int64_t idx[TPX_MAX_TENSOR_DIMS] = {0}, steps = 1;
  for (int d = 0; d + inner < ndim; d++) steps *= len[d];
  size_t step = (size_t)len[ndim - 1] * sz;
  if (transpose)
    step *= (size_t)len[ndim - 2];
  for (int64_t r = 0; r < steps; r++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++)
      off = off * dlen[d] + at[d] + (d + inner < ndim ? idx[d] : 0);
    if (transpose) /* src [len[n-1], len[n-2]] -> dst rows of dlen[n-1] */
      tpx__ckpt_transpose(dst + (size_t)off * sz, dlen[ndim - 1],
                          src + (size_t)r * step, len[ndim - 2], len[ndim - 1],
                          len[ndim - 2], sz);
    else
      memcpy(dst + (size_t)off * sz, src + (size_t)r * step, step);
    for (int d = ndim - inner - 1; d >= 0 && ++idx[d] == len[d]; d--)
      idx[d] = 0;
  }
}

/* The part of source `src` (of stored rank `tndim`, transposed or not)
 * that box `slice` of the parameter covers: its place in the slice
 * (lo[], len[], the slice's ndim) and the box to read in the stored
 * tensor's own coordinates (*sub). 0 when they do not meet. */
static int intersect(const tpx_slice *slice, const tpx_checkpoint_source *src,
                     int tndim, int transpose, int64_t *lo, int64_t *len,
                     tpx_slice *sub) {
  int nd = slice->ndim, drop = nd - tndim;
  memset(sub, 0, sizeof *sub);
  sub->ndim = tndim;
  for (int d = 0; d < nd; d++) {
    int64_t a = slice->offset[d] > src->box.offset[d] ? slice->offset[d]
                                                      : src->box.offset[d];
    int64_t b0 = slice->offset[d] + slice->length[d];
    int64_t b1 = src->box.offset[d] + src->box.length[d];
    int64_t b = b0 < b1 ? b0 : b1;
    if (b <= a)
      return 0;
    lo[d] = a - slice->offset[d];
    len[d] = b - a;
    if (d < drop)
      continue;
    int sd = d - drop; /* the stored tensor's dim */
    if (transpose && sd >= tndim - 2)
      sd = sd == tndim - 2 ? tndim - 1 : tndim - 2;
    sub->offset[sd] = a - src->box.offset[d];
    sub->length[sd] = b - a;
  }
  return 1;
}

tpx_status tpx__ckpt_read_folded(const tpx_checkpoint_reader *rd,
                                 const tpx_model *model, int64_t param,
                                 const tpx_slice *slice, tpx_dtype dtype,
                                 void *dst, size_t dst_bytes, tpx_error *err) {
  size_t sz = tpx_dtype_size(dtype);
  int64_t numel = 1;
  for (int d = 0; d < slice->ndim; d++) numel *= slice->length[d];
  if ((uint64_t)numel * sz > dst_bytes)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "parameter %lld: the slice needs %lld bytes of %s, "
                         "the buffer holds %zu",
                         (long long)param, (long long)(numel * (int64_t)sz),
                         tpx_dtype_short_name(dtype), dst_bytes);
  if (numel == 0)
    return TPX_OK;
  if (dst == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "parameter %lld: NULL destination", (long long)param);
  int64_t n = tpx_checkpoint_param_num_sources(rd, model, param);
  tpx_status st = TPX_OK;
  void *tmp = NULL;
  size_t tmp_cap = 0;
  for (int64_t k = 0; st == TPX_OK && k < n; k++) {
    tpx_checkpoint_source src;
    int tr = 0;
    st = tpx__ckpt_param_source(rd, model, param, k, &src, &tr, err);
    if (st != TPX_OK)
      break;
    int64_t lo[TPX_MAX_TENSOR_DIMS], len[TPX_MAX_TENSOR_DIMS];
    tpx_slice sub;
    if (!intersect(slice, &src, rd->load.t[src.tensor].ndim, tr, lo, len, &sub))
      continue;
    size_t nb = (size_t)tpx_slice_numel(&sub) * sz;
    if (nb > tmp_cap) {
      free(tmp);
      tmp_cap = nb;
      tmp = malloc(tmp_cap);
      if (tmp == NULL) {
        st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
        break;
      }
    }
    st = tpx_checkpoint_read_slice(rd, src.tensor, &sub, dtype, tmp, nb, err);
    if (st == TPX_OK)
      place(dst, slice->length, lo, tmp, len, slice->ndim, sz, tr);
  }
  free(tmp);
  return st;
}
