/* model/source_check.c — tpx_model_check_param_sources: the stored sources
 * of each parameter (fold_sources.c) tile it exactly, no two boxes
 * overlapping and none of it left out. Run by the plugin host after a
 * skeleton declared sources, and by builders. Boxes are compared after a
 * sort on their dim-0 start, so the usual case (one or two sources per
 * expert row) costs n log n, not n^2. A box reaching past its parameter
 * (a part of a bigger stored tensor) counts by what it covers of the
 * parameter; the parts of each such tensor tile it (split_sources.c). */
#include <stdlib.h>
#include <string.h>

#include "model/expert_fold.h"
#include "model/model_impl.h"

static int by_start(const void *a, const void *b, void *ctx) {
  const tpx_slice *s = ctx;
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  int64_t u = s[x].offset[0], v = s[y].offset[0];
  return (u > v) - (u < v);
}

/* qsort_r is not C11: a small merge sort of indices by dim-0 start. */
static void sort_idx(size_t *idx, size_t *tmp, size_t n, const tpx_slice *s) {
  if (n < 2)
    return;
  size_t h = n / 2;
  sort_idx(idx, tmp, h, s);
  sort_idx(idx + h, tmp, n - h, s);
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n)
    tmp[k++] = by_start(&idx[j], &idx[i], (void *)s) < 0 ? idx[j++] : idx[i++];
  while (i < h) tmp[k++] = idx[i++];
  while (j < n) tmp[k++] = idx[j++];
  memcpy(idx, tmp, n * sizeof *idx);
}

static int overlap(const tpx_slice *a, const tpx_slice *b) {
  for (int d = 0; d < a->ndim; d++)
    if (a->offset[d] >= b->offset[d] + b->length[d] ||
        b->offset[d] >= a->offset[d] + a->length[d])
      return 0;
  return 1;
}

static tpx_status check_one(const tpx_model *model,
                            const struct tpx__fold_param *fp, size_t *idx,
                            size_t *tmp, tpx_slice *clip, tpx_error *err) {
  const struct tpx__fold_src *s = model->fold_srcs + fp->first;
  const tpx__param *p = &model->params[fp->param];
  size_t n = fp->count;
  int64_t covered = 0, numel = tpx__shape_numel(model->dims + p->dims, p->ndim);
  for (size_t i = 0; i < n; i++) {
    tpx_slice in_stored;
    idx[i] = i;
    tpx__fold_source_part(model, &s[i], &clip[i], &in_stored);
  }
  sort_idx(idx, tmp, n, clip);
  for (size_t i = 0; i < n; i++) {
    const tpx_slice *a = &clip[idx[i]];
    for (size_t j = i + 1;
         j < n && clip[idx[j]].offset[0] < a->offset[0] + a->length[0]; j++)
      if (overlap(a, &clip[idx[j]])) {
        char x[200], y[200];
        return tpx_error_set(
            err, TPX_VALIDATION,
            "parameter '%s': its sources '%s' %s and '%s' %s overlap", p->fqn,
            s[idx[i]].name, tpx__fold_box_text(x, sizeof x, &s[idx[i]].box),
            s[idx[j]].name, tpx__fold_box_text(y, sizeof y, &s[idx[j]].box));
      }
  }
  /* Inside the parameter and disjoint: the sum cannot overflow. */
  for (size_t i = 0; i < n; i++) covered += tpx_slice_numel(&clip[i]);
  if (covered != numel) {
    char sh[200];
    return tpx_error_set(
        err, TPX_VALIDATION,
        "parameter '%s' %s: its %zu sources (the first '%s') "
        "cover %lld of its %lld elements; they must cover it "
        "whole",
        p->fqn,
        tpx__format_shape(sh, sizeof sh, model->dims + p->dims, p->ndim), n,
        s[0].name, (long long)covered, (long long)numel);
  }
  return TPX_OK;
}

tpx_status tpx_model_check_param_sources(const tpx_model *model,
                                         tpx_error *err) {
  if (model == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_check_param_sources: NULL model");
  size_t most = 0;
  for (size_t i = 0; i < model->num_fold_params; i++)
    if (model->fold_params[i].count > most)
      most = model->fold_params[i].count;
  if (most == 0)
    return TPX_OK;
  size_t *idx = malloc(2 * most * sizeof *idx);
  tpx_slice *clip = malloc(most * sizeof *clip);
  tpx_status st =
      idx && clip ? TPX_OK : tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < model->num_fold_params && st == TPX_OK; i++)
    st = check_one(model, &model->fold_params[i], idx, idx + most, clip, err);
  free(idx);
  free(clip);
  if (st == TPX_OK)
    st = tpx__fold_check_stored(model, err);
  return st;
}
