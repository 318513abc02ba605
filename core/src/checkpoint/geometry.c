/* geometry.c — where a box of a row-major tensor lies in its bytes: equal
 * runs of contiguous elements (see tpx__box_runs). Shared by the reader and
 * the writer. Pure arithmetic on a shape and a slice that
 * tpx_layout_local_slice produced; it does not decide any slice. */
#include <string.h>

#include "checkpoint/ckpt_internal.h"

tpx_status tpx__box_runs_init(const int64_t *shape, int ndim,
                              const tpx_slice *slice, const char *what,
                              tpx__box_runs *out, tpx_error *err) {
  memset(out, 0, sizeof *out);
  if (slice == NULL || slice->ndim != ndim)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tensor '%s': slice has %d dims, the tensor %d", what,
                         slice ? slice->ndim : -1, ndim);
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) {
    int64_t o = slice->offset[d], n = slice->length[d];
    if (o < 0 || n < 0 || o > shape[d] || n > shape[d] - o)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "tensor '%s': slice [%lld, +%lld) of dim %d is "
                           "outside its size %lld",
                           what, (long long)o, (long long)n, d,
                           (long long)shape[d]);
    numel *= n;
  }
  out->numel = numel;
  if (numel == 0)
    return TPX_OK;
  int j = ndim;
  while (j > 0 && slice->length[j - 1] == shape[j - 1]) j--;
  int64_t inner = 1;
  for (int d = ndim - 1; d >= j; d--) inner *= shape[d];
  if (j == 0) { /* the whole tensor */
    out->run_elems = numel;
    out->num_runs = 1;
    return TPX_OK;
  }
  out->run_elems = slice->length[j - 1] * inner;
  out->first = slice->offset[j - 1] * inner;
  out->outer = j - 1;
  int64_t stride = inner * shape[j - 1], runs = 1;
  for (int d = j - 2; d >= 0; d--) {
    out->stride[d] = stride;
    out->offset[d] = slice->offset[d];
    out->length[d] = slice->length[d];
    stride *= shape[d];
    runs *= slice->length[d];
  }
  out->num_runs = runs;
  return TPX_OK;
}

int64_t tpx__box_run_start(const tpx__box_runs *g, int64_t r) {
  int64_t start = g->first;
  for (int d = g->outer - 1; d >= 0; d--) {
    int64_t idx = r % g->length[d];
    r /= g->length[d];
    start += (g->offset[d] + idx) * g->stride[d];
  }
  return start;
}
