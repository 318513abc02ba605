/* dequant.c — reading an FP8 weight into floats, dequantized as NeMo
 * Automodel 0.7.0 does on load (docs/CHECKPOINT.md "FP8 checkpoints"):
 * each stored F8 element widened to f32, times its scale (f32; an
 * F8_E8M0 / bf16 / f16 scale widened exactly), the product rounded once
 * in f32, then rounded to nearest even into the destination dtype. The
 * scale is found beside the weight in the same reader (`<name>_scale_inv`,
 * one per 128 x 128 block of the last two dims, one per tensor or one per
 * expert); a tensor of a tpx-shard rank file is placed in its weight by
 * the file's `tpx.tensors` offsets, so its whole scale gives each element
 * the block of its global position. This file finds, checks and reads the
 * scale (tpx__ckpt_dequant_init); read.c's element reads scale each run of
 * widened elements by it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"

#define SCALE_SUFFIX "_scale_inv"
#define BLOCK 128 /* Automodel 0.7.0's, whatever the config says */

int tpx__ckpt_dequant_target(tpx_dtype d) {
  return d == TPX_DTYPE_F32 || d == TPX_DTYPE_BF16 || d == TPX_DTYPE_F16 ||
         d == TPX_DTYPE_F64;
}

void tpx__ckpt_dequant_free(tpx__ckpt_dequant *dq) {
  if (dq) {
    free(dq->scale);
    memset(dq, 0, sizeof *dq);
  }
}

/* An F8_E8M0 byte as f32: 2^(e - 127), 0xff NaN (exact; 2^-127 is an f32
 * subnormal). */
static float e8m0_to_f32(unsigned char e) {
  uint32_t u = e == 0xff ? 0x7fc00000u
               : e == 0  ? 0x00400000u
                         : (uint32_t)e << 23;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* The global shape and offsets of stored tensor t: its own shape at 0,
 * or those a tpx-shard rank file's `tpx.tensors` gives it. */
static tpx_status placement(const tpx_checkpoint_reader *rd,
                            const tpx__st_tensor *t, int64_t *gshape,
                            int64_t *off, tpx_error *err) {
  const tpx__st_file *f = &rd->load.files[t->file];
  memcpy(gshape, t->shape, sizeof t->shape);
  memset(off, 0, sizeof t->shape);
  const char *text =
      json_string_value(json_object_get(f->metadata, "tpx.tensors"));
  if (text == NULL)
    return TPX_OK;
  json_t *all = json_loads(text, 0, NULL);
  json_t *e = json_object_get(all, t->name);
  json_t *g = json_object_get(e, "global_shape");
  json_t *o = json_object_get(e, "offsets");
  int ok = json_is_array(g) && json_is_array(o) &&
           json_array_size(g) == (size_t)t->ndim &&
           json_array_size(o) == (size_t)t->ndim;
  for (int d = 0; ok && d < t->ndim; d++) {
    json_t *gv = json_array_get(g, (size_t)d),
           *ov = json_array_get(o, (size_t)d);
    ok = json_is_integer(gv) && json_is_integer(ov);
    if (ok) {
      gshape[d] = json_integer_value(gv);
      off[d] = json_integer_value(ov);
      ok = off[d] >= 0 && off[d] + t->shape[d] <= gshape[d];
    }
  }
  json_decref(all);
  if (!ok)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' is an FP8 weight in a tpx-shard "
                         "rank file, but tpx.tensors gives no valid "
                         "global_shape and offsets for it, so its scale "
                         "blocks cannot be placed",
                         f->path, t->name);
  return TPX_OK;
}

/* The scale's form against the weight's global shape g (fp8.c checks the
 * same on a model's checkpoint): 1 blocks, 2 one per tensor, 3 one per
 * expert; 0 neither. */
static int form_of(const int64_t *g, int ndim, const tpx__st_tensor *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
  if ((ndim == 2 || ndim == 3) && s->ndim == ndim) {
    int blocks = 1;
    for (int d = 0; d < ndim; d++)
      blocks &=
          s->shape[d] == (d >= ndim - 2 ? (g[d] + BLOCK - 1) / BLOCK : g[d]);
    if (blocks)
      return 1;
  }
  if (n == 1)
    return 2;
  if (ndim == 3 && s->ndim >= 1 && s->shape[0] == g[0] && n == g[0])
    return 3;
  return 0;
}

static tpx_status read_scale(const tpx_checkpoint_reader *rd,
                             const tpx__st_tensor *s, int64_t n, float *out,
                             tpx_error *err) {
  tpx_slice all = {s->ndim, {0}, {0}};
  memcpy(all.length, s->shape, sizeof s->shape);
  tpx__box_runs g;
  tpx_status st = tpx__box_runs_init(s->shape, s->ndim, &all, s->name, &g, err);
  if (st != TPX_OK || s->dtype != TPX_DTYPE_F8_E8M0)
    return st != TPX_OK ? st
                        : tpx__ckpt_read_elems(rd, s, &g, 0, n, TPX_DTYPE_F32,
                                               out, NULL, err);
  unsigned char *b = malloc((size_t)(n ? n : 1));
  if (b == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory reading '%s'",
                         s->name);
  st = tpx__ckpt_read_elems(rd, s, &g, 0, n, s->dtype, b, NULL, err);
  for (int64_t i = 0; st == TPX_OK && i < n; i++) out[i] = e8m0_to_f32(b[i]);
  free(b);
  return st;
}

tpx_status tpx__ckpt_dequant_init(const tpx_checkpoint_reader *rd,
                                  const tpx__st_tensor *t, tpx_dtype dtype,
                                  tpx__ckpt_dequant *dq, tpx_error *err) {
  memset(dq, 0, sizeof *dq);
  char sname[1024];
  int64_t si = -1;
  if ((t->dtype != TPX_DTYPE_F8_E4M3 && t->dtype != TPX_DTYPE_F8_E5M2) ||
      !tpx__ckpt_dequant_target(dtype) ||
      snprintf(sname, sizeof sname, "%s" SCALE_SUFFIX, t->name) >=
          (int)sizeof sname ||
      !tpx__strmap_find(&rd->load.names, sname, strlen(sname), &si))
    return TPX_OK; /* nothing to dequantize: read as stored / converted */
  const tpx__st_tensor *s = &rd->load.t[si];
  const char *path = rd->load.files[t->file].path;
  int64_t g[TPX_MAX_TENSOR_DIMS], off[TPX_MAX_TENSOR_DIMS];
  tpx_status st = placement(rd, t, g, off, err);
  if (st != TPX_OK)
    return st;
  int form = form_of(g, t->ndim, s);
  char a[200], b[200];
  if (form == 0)
    return tpx_error_set(
        err, TPX_VALIDATION,
        "%s: FP8 scale '%s' has shape %s, which fits neither 128 x 128 "
        "blocks of its weight '%s' %s (2 or 3 dims), one scale for the "
        "tensor, nor one per expert: cannot dequantize",
        path, s->name, tpx__format_shape(a, sizeof a, s->shape, s->ndim),
        t->name, tpx__format_shape(b, sizeof b, g, t->ndim));
  if (s->dtype != TPX_DTYPE_F32 && s->dtype != TPX_DTYPE_F8_E8M0 &&
      s->dtype != TPX_DTYPE_BF16 && s->dtype != TPX_DTYPE_F16)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: FP8 scale '%s' of '%s' is stored %s, not F32, "
                         "F8_E8M0, BF16 or F16: cannot dequantize",
                         path, s->name, t->name,
                         tpx_dtype_safetensors_name(s->dtype));
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
  dq->scale = malloc((size_t)(n ? n : 1) * sizeof *dq->scale);
  if (dq->scale == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory reading '%s'",
                         s->name);
  st = read_scale(rd, s, n, dq->scale, err);
  if (st != TPX_OK) {
    tpx__ckpt_dequant_free(dq);
    return st;
  }
  int nd = t->ndim;
  dq->form = form;
  dq->cols = nd >= 1 ? t->shape[nd - 1] : 1;
  dq->rows = nd >= 2 ? t->shape[nd - 2] : 1;
  dq->off_col = nd >= 1 ? off[nd - 1] : 0;
  dq->off_row = nd >= 2 ? off[nd - 2] : 0;
  dq->off_lead = nd == 3 ? off[0] : 0;
  dq->bcols = nd >= 1 ? (g[nd - 1] + BLOCK - 1) / BLOCK : 1;
  dq->brows = nd >= 2 ? (g[nd - 2] + BLOCK - 1) / BLOCK : 1;
  dq->block = BLOCK;
  return TPX_OK;
}
