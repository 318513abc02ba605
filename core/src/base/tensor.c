/* tensor.c — the tpx_tensor value (tpx/tensor.h): construction, element
 * counts, argument checks and shape text for error messages.
 * Not here: anything that reads or writes the data. */
#include "tpx/tensor.h"

#include <stdio.h>
#include <string.h>

tpx_tensor tpx_tensor_make(void *data, tpx_dtype dtype, int ndim,
                           const int64_t *shape) {
  tpx_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  if (ndim < 0)
    ndim = 0;
  if (ndim > TPX_MAX_TENSOR_DIMS)
    ndim = TPX_MAX_TENSOR_DIMS;
  t.ndim = shape ? ndim : 0;
  for (int i = 0; i < t.ndim; i++) t.shape[i] = shape[i];
  return t;
}

int64_t tpx_tensor_numel(const tpx_tensor *t) {
  if (!t || t->ndim < 0 || t->ndim > TPX_MAX_TENSOR_DIMS)
    return -1;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0)
      return -1;
    if (t->shape[i] != 0 && n > INT64_MAX / t->shape[i])
      return -1;
    n *= t->shape[i];
  }
  return n;
}

int64_t tpx_tensor_nbytes(const tpx_tensor *t) {
  int64_t n = tpx_tensor_numel(t);
  size_t es = t ? tpx_dtype_size(t->dtype) : 0;
  if (n < 0 || es == 0)
    return -1;
  if (n > INT64_MAX / (int64_t)es)
    return -1;
  return n * (int64_t)es;
}

int tpx_tensor_format_shape(const tpx_tensor *t, char *buf, size_t size) {
  if (!t)
    return snprintf(buf, size, "(null)");
  char tmp[256];
  size_t n = 0;
  tmp[n++] = '[';
  tmp[n] = '\0';
  int nd = t->ndim < 0 ? 0 : t->ndim;
  if (nd > TPX_MAX_TENSOR_DIMS)
    nd = TPX_MAX_TENSOR_DIMS;
  for (int i = 0; i < nd && n < sizeof tmp; i++)
    n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%s%lld", i ? ", " : "",
                          (long long)t->shape[i]);
  if (n < sizeof tmp)
    snprintf(tmp + n, sizeof tmp - n, "] %s", tpx_dtype_short_name(t->dtype));
  return snprintf(buf, size, "%s", tmp);
}

tpx_status tpx_tensor_check(const tpx_tensor *t, const char *what,
                            tpx_error *err) {
  if (!what)
    what = "tensor";
  if (!t)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: NULL tensor", what);
  if (t->ndim < 0 || t->ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: ndim %d outside 0..%d",
                         what, t->ndim, TPX_MAX_TENSOR_DIMS);
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: dim %d has negative size %lld", what, i,
                           (long long)t->shape[i]);
  if (tpx_dtype_size(t->dtype) == 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: invalid dtype %d",
                         what, (int)t->dtype);
  int64_t n = tpx_tensor_numel(t);
  if (n < 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: element count overflows", what);
  if (n > 0 && !t->data)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: data is NULL for %lld elements", what,
                         (long long)n);
  return TPX_OK;
}
