/* model/buffers.c — the tensors of a checkpoint that the module tree holds
 * as buffers (tpx/model.h "buffers"): a list beside the parameters, never
 * sharded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/conversion.h"
#include "model/model_impl.h"

tpx_status tpx_model_add_buffer(tpx_model *model, const char *fqn,
                                const int64_t *shape, int ndim, tpx_dtype dtype,
                                tpx_error *err) {
  if (model == NULL || fqn == NULL || (shape == NULL && ndim > 0) || ndim < 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_buffer: NULL argument or bad ndim");
  size_t len = strlen(fqn);
  tpx_status st = tpx__model_check_fqn(fqn, len, "buffer", err);
  if (st != TPX_OK)
    return st;
  if (tpx_model_find_param(model, fqn) >= 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "buffer '%s': the model has a parameter of that name",
                         fqn);
  if (model->num_buffers == model->cap_buffers) {
    size_t cap = model->cap_buffers ? 2 * model->cap_buffers : 8;
    void *p = realloc(model->buffers, cap * sizeof *model->buffers);
    if (p == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    model->buffers = p;
    model->cap_buffers = cap;
  }
  char *name = tpx__arena_strndup(&model->arena, fqn, len);
  int64_t *dims = ndim ? (int64_t *)(void *)tpx__arena_alloc(
                             &model->arena, (size_t)ndim * sizeof *dims + 8)
                       : NULL;
  if (name == NULL || (ndim && dims == NULL))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (ndim) {
    /* the arena is 1-byte aligned: align by hand */
    dims = (int64_t *)(void *)(((uintptr_t)dims + 7) & ~(uintptr_t)7);
    memcpy(dims, shape, (size_t)ndim * sizeof *dims);
  }
  struct tpx__buffer *b = &model->buffers[model->num_buffers++];
  b->fqn = name;
  b->shape = dims;
  b->ndim = ndim;
  b->dtype = dtype;
  return TPX_OK;
}

size_t tpx_model_num_buffers(const tpx_model *model) {
  return model ? model->num_buffers : 0;
}

tpx_status tpx_model_buffer(const tpx_model *model, size_t index,
                            const char **fqn, const int64_t **shape, int *ndim,
                            tpx_dtype *dtype, tpx_error *err) {
  if (model == NULL || index >= model->num_buffers)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_model_buffer: index %zu of %zu", index,
                         model ? model->num_buffers : (size_t)0);
  const struct tpx__buffer *b = &model->buffers[index];
  if (fqn)
    *fqn = b->fqn;
  if (shape)
    *shape = b->shape;
  if (ndim)
    *ndim = b->ndim;
  if (dtype)
    *dtype = b->dtype;
  return TPX_OK;
}

int64_t tpx_model_buffer_bytes(const tpx_model *model, size_t index) {
  if (model == NULL || index >= model->num_buffers)
    return 0;
  const struct tpx__buffer *b = &model->buffers[index];
  int64_t n = tpx__shape_numel(b->shape, b->ndim);
  return n < 0 ? 0 : n * (int64_t)tpx__model_dtype_size(b->dtype);
}

const char *tpx_model_conversion_note(const tpx_model *model) {
  return model ? model->conversion_note : NULL;
}

const char *tpx_model_conversion_table_version(void) {
  return tpx__conv_version;
}
