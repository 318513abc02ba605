/* fp8.c — FP8 block-quantized checkpoints (DeepSeek-V3, Qwen3-*-FP8, ...):
 * Linear weights stored F8_E4M3 with a companion `<w>_scale_inv` (F32 or
 * F8_E8M0, one value per 128 x 128 block), config.json declaring
 * `quantization_config`. NeMo Automodel 0.7.0 dequantizes them as it
 * loads (each block times its scale, into the model's dtype) and drops the
 * scales, so the model tpx plans holds the weights in that dtype and the
 * scales are no parameters. This file pairs and checks them on the headers
 * (tpx__fp8_mark, called by tpx_model_add_safetensors), finds them
 * (tpx__fp8_find: tpx shard cuts such a weight as stored, its scale whole;
 * the reader dequantizes it into floats, checkpoint/dequant.c) and refuses
 * to read one the model does not pair (tpx__fp8_refuse_read). Not the
 * header parser (safetensors.c). */
#include <stdio.h>
#include <string.h>

#include "base/grow.h"
#include "model/fp8_view.h"
#include "model/model_impl.h"
#include "model/model_view.h"

#define SCALE_SUFFIX "_scale_inv"
/* The value of an activation scale's name in model->quant_names. */
#define ACTIVATION ((int64_t)-2)
/* What NeMo Automodel 0.7.0 dequantizes in, whatever the config says. */
#define UPSTREAM_BLOCK 128

static int is_f8(tpx_dtype d) {
  return d == TPX_DTYPE_F8_E4M3 || d == TPX_DTYPE_F8_E5M2;
}

static int ends(const char *s, size_t n, const char *suffix) {
  size_t m = strlen(suffix);
  return n > m && memcmp(s + n - m, suffix, m) == 0;
}

static int64_t find(const tpx__st_load *l, const char *name, size_t len) {
  int64_t i = -1;
  return tpx__strmap_find(&l->names, name, len, &i) ? i : -1;
}

static const char *path_of(const tpx__st_load *l, const tpx__st_tensor *t) {
  return l->files[t->file].path;
}

/* The dtype upstream dequantizes into: the parameter's when the model has
 * it (the skeleton's), else the config's torch_dtype, else bf16 (Automodel
 * builds its models in torch_dtype, bf16 when unset). */
static tpx_dtype train_dtype(const tpx_model *model, const char *name) {
  int64_t pi = tpx_model_find_param(model, name);
  if (pi >= 0)
    return (tpx_dtype)model->params[pi].dtype;
  tpx_dtype d;
  return tpx__model_config_dtype(model, 1, &d) ? d : TPX_DTYPE_BF16;
}

/* The block form [.., ceil(rows/b), ceil(cols/b)] of a weight of >= 2 dims
 * into want; its ndim. */
static int block_shape(const tpx__st_tensor *w, int64_t *want) {
  for (int d = 0; d < w->ndim; d++) want[d] = w->shape[d];
  for (int d = w->ndim - 2; d >= 0 && d < w->ndim; d++)
    want[d] = (w->shape[d] + UPSTREAM_BLOCK - 1) / UPSTREAM_BLOCK;
  return w->ndim;
}

/* 1: 128 x 128 blocks; 2: one scale for the tensor, or per expert ([E] or
 * [E, 1, 1] of a [E, ., .] weight); 0: neither. */
static int scale_form(const tpx__st_tensor *w, const tpx__st_tensor *s) {
  int64_t want[TPX_MAX_TENSOR_DIMS];
  if (w->ndim >= 2 && s->ndim == block_shape(w, want) &&
      memcmp(want, s->shape, (size_t)s->ndim * sizeof *want) == 0)
    return 1;
  int64_t n = tpx__shape_numel(s->shape, s->ndim);
  if (n == 1)
    return 2;
  if (w->ndim == 3 && s->ndim >= 1 && s->shape[0] == w->shape[0] &&
      n == w->shape[0])
    return 2;
  return 0;
}

/* quantization_config: its quant_method (NULL when absent) and a block
 * size other than upstream's refused. */
static tpx_status read_qconfig(const tpx_model *model, const char **method,
                               tpx_error *err) {
  *method = NULL;
  if (tpx_model_config_string(model, "quantization_config.quant_method", method,
                              NULL) != TPX_OK)
    *method = NULL;
  int64_t b[2];
  for (int i = 0; i < 2; i++) {
    char key[64];
    snprintf(key, sizeof key, "quantization_config.weight_block_size[%d]", i);
    if (tpx_model_config_int(model, key, &b[i], NULL) != TPX_OK)
      return TPX_OK; /* absent: upstream's 128 x 128 */
  }
  if (b[0] != UPSTREAM_BLOCK || b[1] != UPSTREAM_BLOCK)
    return tpx_error_set(
        err, TPX_VALIDATION,
        "config quantization_config.weight_block_size is [%lld, %lld]: NeMo "
        "Automodel 0.7.0 dequantizes FP8 weights in 128 x 128 blocks "
        "whatever the config says, so it would scale these weights wrong",
        (long long)b[0], (long long)b[1]);
  return TPX_OK;
}

static tpx_status record(tpx_model *model, const tpx__st_tensor *w,
                         const tpx__st_tensor *s, tpx_dtype train, int form,
                         tpx_error *err) {
  if (TPX_GROW(model->quant, model->cap_quant, model->num_quant + 1, 16) != 0)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx_quantized_weight q = {0};
  q.weight = tpx__arena_strndup(&model->arena, w->name, w->name_len);
  q.scale = tpx__arena_strndup(&model->arena, s->name, s->name_len);
  if (q.weight == NULL || q.scale == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  q.stored_dtype = w->dtype;
  q.scale_dtype = s->dtype;
  q.train_dtype = train;
  q.numel = tpx__shape_numel(w->shape, w->ndim);
  q.scale_numel = tpx__shape_numel(s->shape, s->ndim);
  q.block[0] = q.block[1] = form == 1 ? UPSTREAM_BLOCK : 0;
  int64_t at = (int64_t)model->num_quant;
  if (tpx__strmap_set(&model->quant_names, q.weight, w->name_len, at) != 0 ||
      tpx__strmap_set(&model->quant_names, q.scale, s->name_len, at) != 0)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  model->quant[model->num_quant++] = q;
  return TPX_OK;
}

/* One `<w>_scale_inv` at index k: its weight stored, F8, of a shape the
 * scale fits; recorded, the scale skipped, the weight given its dtype. */
static tpx_status pair_one(tpx_model *model, tpx__st_load *l, size_t k,
                           const char *method, tpx_error *err) {
  tpx__st_tensor *s = &l->t[k];
  size_t wlen = s->name_len - strlen(SCALE_SUFFIX);
  int64_t wi = find(l, s->name, wlen);
  char a[128], b[128], c[128];
  if (wi < 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' is an FP8 scale (its name ends in "
                         "_scale_inv), but its weight '%.*s' is not stored: "
                         "the checkpoint is incomplete",
                         path_of(l, s), s->name, (int)wlen, s->name);
  tpx__st_tensor *w = &l->t[wi];
  if (method == NULL)
    return tpx_error_set(
        err, TPX_VALIDATION,
        "%s: tensor '%s' is the FP8 scale of '%s', but config.json has no "
        "quantization_config.quant_method: NeMo Automodel 0.7.0 then does "
        "not dequantize and would load the stored values unscaled; add the "
        "checkpoint's quantization_config to the config",
        path_of(l, s), s->name, w->name);
  if (!is_f8(w->dtype))
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' has an FP8 scale '%s', but is "
                         "stored %s, not F8_E4M3 or F8_E5M2",
                         path_of(l, w), w->name, s->name,
                         tpx__model_dtype_st_name(w->dtype));
  int form = scale_form(w, s);
  if (form == 0) {
    int64_t want[TPX_MAX_TENSOR_DIMS];
    int wn = w->ndim >= 2 ? block_shape(w, want) : 0;
    return tpx_error_set(
        err, TPX_VALIDATION,
        "%s: FP8 scale '%s' has shape %s %s, but its weight '%s' %s %s in "
        "128 x 128 blocks needs %s (or one scale for the tensor)",
        path_of(l, s), s->name,
        tpx__format_shape(a, sizeof a, s->shape, s->ndim),
        tpx__model_dtype_st_name(s->dtype), w->name,
        tpx__format_shape(b, sizeof b, w->shape, w->ndim),
        tpx__model_dtype_st_name(w->dtype),
        wn ? tpx__format_shape(c, sizeof c, want, wn) : "[1]");
  }
  tpx_dtype train = train_dtype(model, w->name);
  tpx_status st = record(model, w, s, train, form, err);
  s->skip = 1;
  w->dtype = train;
  return st;
}

/* An activation scale (Mistral-4's `.activation_scale`,
 * `_activation_scale`): upstream drops it. */
static int is_activation_scale(const tpx__st_tensor *t) {
  return ends(t->name, t->name_len, ".activation_scale") ||
         ends(t->name, t->name_len, "_activation_scale");
}

tpx_status tpx__fp8_mark(tpx_model *model, tpx__st_load *l, tpx_error *err) {
  const char *method = NULL;
  tpx_status st = read_qconfig(model, &method, err);
  size_t first = model->num_quant;
  for (size_t k = 0; k < l->n && st == TPX_OK; k++)
    if (!l->t[k].skip && ends(l->t[k].name, l->t[k].name_len, SCALE_SUFFIX))
      st = pair_one(model, l, k, method, err);
  int quantized = method != NULL || model->num_quant > first;
  for (size_t k = 0; k < l->n && st == TPX_OK && quantized; k++) {
    tpx__st_tensor *t = &l->t[k];
    if (method != NULL && is_activation_scale(t)) {
      t->skip = 1; /* kept whole by tpx shard, as the scales (ACTIVATION) */
      const char *n = tpx__arena_strndup(&model->arena, t->name, t->name_len);
      if (n == NULL ||
          tpx__strmap_set(&model->quant_names, n, t->name_len, ACTIVATION) != 0)
        st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    } else if (is_f8(t->dtype) && !t->skip)
      st = tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' is stored %s without its scale "
                         "'%s" SCALE_SUFFIX "' in an FP8 block-quantized "
                         "checkpoint: NeMo Automodel 0.7.0 dequantizes a "
                         "weight only with its scale; the checkpoint is "
                         "incomplete",
                         path_of(l, t), t->name,
                         tpx__model_dtype_st_name(t->dtype), t->name);
  }
  return st;
}

tpx_status tpx__fp8_refuse_read(const tpx__st_load *l, const tpx__st_tensor *t,
                                const char *param, tpx_error *err) {
  char sname[1024];
  if (!is_f8(t->dtype) ||
      snprintf(sname, sizeof sname, "%s" SCALE_SUFFIX, t->name) >=
          (int)sizeof sname ||
      find(l, sname, strlen(sname)) < 0)
    return TPX_OK;
  return tpx_error_set(
      err, TPX_UNSUPPORTED,
      "tensor '%s' is stored %s with FP8 scales '%s': parameter '%s' is "
      "read from it only into f32/bf16/f16/f64 (dequantized) or as %s (the "
      "stored bytes), and only by a model that pairs them "
      "(tpx_model_add_safetensors on this checkpoint, tpx_model_quantized); "
      "%s",
      t->name, tpx__model_dtype_st_name(t->dtype), sname, param,
      tpx__model_dtype_st_name(t->dtype), path_of(l, t));
}

const tpx_quantized_weight *tpx__fp8_find(const tpx_model *model,
                                          const char *name, int *is_scale) {
  int64_t i = -1;
  if (model == NULL || model->num_quant == 0 ||
      !tpx__strmap_find(&model->quant_names, name, strlen(name), &i) || i < 0)
    return NULL;
  const tpx_quantized_weight *q = &model->quant[i];
  if (is_scale)
    *is_scale = strcmp(q->scale, name) == 0;
  return q;
}

int tpx__fp8_is_companion(const tpx_model *model, const char *name) {
  int64_t i = -1;
  if (model == NULL ||
      !tpx__strmap_find(&model->quant_names, name, strlen(name), &i))
    return 0;
  return i == ACTIVATION || strcmp(model->quant[i].scale, name) == 0;
}

size_t tpx_model_num_quantized(const tpx_model *model) {
  return model ? model->num_quant : 0;
}

tpx_status tpx_model_quantized(const tpx_model *model, size_t index,
                               tpx_quantized_weight *out, tpx_error *err) {
  if (model == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_quantized: NULL argument");
  if (index >= model->num_quant)
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "quantized weight %zu of %zu",
                         index, model->num_quant);
  *out = model->quant[index];
  return TPX_OK;
}
