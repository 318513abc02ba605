/* model/fold_sources.c — the checkpoint tensors a parameter is stored as
 * (model/expert_fold.h, scheme TPX__EXPERT_NAMES_RULES): recorded by
 * conversion_load.c as it fuses them, or declared by a family plugin's
 * skeleton (host->skeleton_add_source: NeMo Automodel's grouped experts,
 * whose sources are the Hugging Face per-expert tensors, transposed) and
 * by builders (tpx_model_add_param_source). Read by the checkpoint reader
 * (`tpx shard`) and written back by `tpx merge` through the shard's
 * "fold" lists. The storage, the public calls and the shape a source
 * must have; the cover check is source_check.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/expert_fold.h"
#include "model/model_impl.h"

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return p;
  size_t c = *cap ? 2 * *cap : 16;
  while (c < need) c *= 2;
  void *q = realloc(p, c * elem);
  if (q != NULL)
    *cap = c;
  return q;
}

/* The position of `param` in fold_params (binary search): its index when
 * *found, else where it goes. */
static size_t fold_param_pos(const tpx_model *model, int64_t param,
                             int *found) {
  size_t lo = 0, hi = model->num_fold_params;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (model->fold_params[mid].param < param)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = lo < model->num_fold_params && model->fold_params[lo].param == param;
  return lo;
}

tpx_status tpx__expert_fold_add_source(tpx_model *model, int64_t param,
                                       const char *name, const tpx_slice *box,
                                       int transpose, tpx_error *err) {
  if (param < 0 || (size_t)param >= model->num_params)
    return tpx_error_set(err, TPX_INTERNAL,
                         "fold source '%s': no parameter %lld", name,
                         (long long)param);
  int found = 0;
  size_t at = fold_param_pos(model, param, &found);
  struct tpx__fold_param *fp = found ? &model->fold_params[at] : NULL;
  if (fp && fp->first + fp->count != model->num_fold_srcs)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "source '%s' of parameter '%s': the parameter's "
                         "sources must be added in a run (another "
                         "parameter's came between)",
                         name, model->params[param].fqn);
  size_t len = strlen(name);
  int64_t dup = -1, last = -1;
  if (tpx__strmap_find(&model->fold_names, name, len, &dup)) {
    tpx_status st = tpx__fold_source_share(model, param, dup, box, transpose,
                                           name, &last, err);
    if (st != TPX_OK)
      return st;
  }
  void *p = grow(model->fold_srcs, &model->cap_fold_srcs,
                 model->num_fold_srcs + 1, sizeof *model->fold_srcs);
  if (p == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  model->fold_srcs = p;
  if (fp == NULL) {
    p = grow(model->fold_params, &model->cap_fold_params,
             model->num_fold_params + 1, sizeof *model->fold_params);
    if (p == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    model->fold_params = p;
    memmove(model->fold_params + at + 1, model->fold_params + at,
            (model->num_fold_params - at) * sizeof *model->fold_params);
    model->num_fold_params++;
    fp = &model->fold_params[at];
    fp->param = param;
    fp->first = model->num_fold_srcs;
    fp->count = 0;
  }
  const char *copy = last >= 0 ? model->fold_srcs[last].name
                               : tpx__arena_strndup(&model->arena, name, len);
  if (copy == NULL ||
      (last < 0 && tpx__strmap_put(&model->fold_names, copy, len,
                                   (int64_t)model->num_fold_srcs, NULL) < 0))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (last >= 0)
    model->fold_srcs[last].next = (int64_t)model->num_fold_srcs;
  struct tpx__fold_src *s = &model->fold_srcs[model->num_fold_srcs++];
  s->name = copy;
  s->next = -1;
  s->box = *box;
  s->transpose = transpose ? 1 : 0;
  s->param = param;
  fp->count++;
  return TPX_OK;
}

int64_t tpx__expert_fold_rules_find(const tpx_model *model, int64_t param,
                                    size_t *first) {
  int found = 0;
  size_t at = fold_param_pos(model, param, &found);
  if (!found)
    return 0;
  *first = model->fold_params[at].first;
  return (int64_t)model->fold_params[at].count;
}

int64_t tpx__fold_source_find(const tpx_model *model, const char *name) {
  int64_t v = -1;
  if (model->num_fold_srcs == 0 ||
      !tpx__strmap_find(&model->fold_names, name, strlen(name), &v))
    return -1;
  return v;
}

int tpx__fold_source_shape(const tpx_slice *box, int transpose,
                           int64_t *shape) {
  int keep = transpose ? 2 : 0, d0 = 0;
  while (d0 < box->ndim - keep && box->length[d0] == 1) d0++;
  int n = box->ndim - d0;
  memcpy(shape, box->length + d0, (size_t)n * sizeof *shape);
  if (transpose && n >= 2) {
    int64_t t = shape[n - 1];
    shape[n - 1] = shape[n - 2];
    shape[n - 2] = t;
  }
  return n;
}

int tpx__fold_source_fits(const tpx_slice *box, int transpose,
                          const int64_t *shape, int ndim) {
  int drop = box->ndim - ndim;
  if (drop < 0 || (transpose && ndim < 2))
    return 0;
  for (int d = 0; d < box->ndim; d++) {
    int64_t want = box->length[d];
    if (d < drop) {
      if (want != 1)
        return 0;
      continue;
    }
    int sd = d - drop;
    if (transpose && sd >= ndim - 2)
      sd = sd == ndim - 2 ? ndim - 1 : ndim - 2;
    if (shape[sd] != want)
      return 0;
  }
  return 1;
}

/* ---- the public calls ---- */

/* "[o0:e0, o1:e1]" of a box into buf. */
const char *tpx__fold_box_text(char *buf, size_t size, const tpx_slice *box) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < box->ndim && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld:%lld",
                             d ? ", " : "", (long long)box->offset[d],
                             (long long)(box->offset[d] + box->length[d]));
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

tpx_status tpx__fold_source_share(const tpx_model *model, int64_t param,
                                  int64_t first, const tpx_slice *box,
                                  int transpose, const char *name,
                                  int64_t *last, tpx_error *err) {
  const tpx__param *p = &model->params[param];
  for (int64_t i = first; i >= 0; i = model->fold_srcs[i].next) {
    const struct tpx__fold_src *o = &model->fold_srcs[i];
    const tpx__param *q = &model->params[o->param];
    char a[200], b[200];
    if (o->param == param)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "source '%s' of parameter '%s': the tensor is "
                           "already a source of it",
                           name, p->fqn);
    if (o->box.ndim != box->ndim || o->transpose != transpose ||
        q->dtype != p->dtype ||
        memcmp(o->box.length, box->length,
               (size_t)box->ndim * sizeof *box->length) != 0)
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT,
          "source '%s' of parameter '%s' %s: the tensor is also a source of "
          "'%s' %s, with another shape, dtype or transposition (the "
          "parameters sharing a stored tensor must agree on it)",
          name, p->fqn, tpx__fold_box_text(a, sizeof a, box), q->fqn,
          tpx__fold_box_text(b, sizeof b, &o->box));
    *last = i;
  }
  return TPX_OK;
}

/* A part's box (one that may reach past its parameter: the stored tensor
 * is bigger) meets the parameter, and its end and element count fit in
 * int64. */
static tpx_status check_part_box(const tpx__param *p, const int64_t *shape,
                                 const char *name, const tpx_slice *box,
                                 tpx_error *err) {
  char b[200], s[200];
  int64_t numel = 1;
  for (int d = 0; d < box->ndim; d++) {
    int64_t o = box->offset[d], l = box->length[d];
    int ok = l > 0 && o < shape[d] && o > -l &&
             (o <= 0 || l <= INT64_MAX - o) && numel <= INT64_MAX / l;
    if (ok)
      numel *= l;
    else
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT,
          "source '%s' of parameter '%s': the box %s is empty or does not "
          "meet the parameter's shape %s (dim %d)",
          name, p->fqn,
          l <= 0 ? "(length 0 or negative)"
                 : tpx__fold_box_text(b, sizeof b, box),
          tpx__format_shape(s, sizeof s, shape, p->ndim), d);
  }
  return TPX_OK;
}

/* The box lies inside the parameter (or, for a part, meets it) and is not
 * empty; transpose needs 2 dims. */
static tpx_status check_box(const tpx_model *model, int64_t pi,
                            const char *name, const tpx_slice *box,
                            int transpose, int part, tpx_error *err) {
  const tpx__param *p = &model->params[pi];
  const int64_t *shape = model->dims + p->dims;
  char b[200], s[200];
  if (box->ndim != p->ndim)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "source '%s' of parameter '%s': the box has %d dims, "
                         "the parameter %d",
                         name, p->fqn, box->ndim, p->ndim);
  tpx_status st = part ? check_part_box(p, shape, name, box, err) : TPX_OK;
  if (st != TPX_OK)
    return st;
  for (int d = 0; d < box->ndim && !part; d++)
    if (box->offset[d] < 0 || box->length[d] <= 0 ||
        box->length[d] > shape[d] || box->offset[d] > shape[d] - box->length[d])
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT,
          "source '%s' of parameter '%s': the box %s is empty or outside the "
          "parameter's shape %s (dim %d)",
          name, p->fqn,
          box->offset[d] < 0 || box->length[d] < 0
              ? "(negative offset or length)"
              : tpx__fold_box_text(b, sizeof b, box),
          tpx__format_shape(s, sizeof s, shape, p->ndim), d);
  if (transpose && p->ndim < 2)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "source '%s' of parameter '%s': a transposed source "
                         "needs a parameter of 2 dims or more (it has %d)",
                         name, p->fqn, p->ndim);
  return TPX_OK;
}

/* tpx_model_add_param_source (part 0) and _box (part 1). */
static tpx_status add_source(tpx_model *model, const char *param_fqn,
                             const char *source_name, const tpx_slice *box,
                             int transpose, int part, tpx_error *err) {
  if (model == NULL || param_fqn == NULL || source_name == NULL || box == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_param_source%s: NULL argument",
                         part ? "_box" : "");
  int64_t pi = tpx_model_find_param(model, param_fqn);
  if (pi < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "source '%s': the model has no parameter '%s' (add "
                         "the parameter first)",
                         source_name, param_fqn);
  if (model->params[pi].tied_to >= 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "source '%s': parameter '%s' is tied (not stored)",
                         source_name, param_fqn);
  size_t len = strlen(source_name);
  tpx_status st =
      len == 0 ? tpx_error_set(err, TPX_INVALID_ARGUMENT,
                               "parameter '%s': empty source name", param_fqn)
               : tpx__model_check_fqn(source_name, len, "source tensor", err);
  if (st != TPX_OK)
    return st;
  if (tpx_model_find_param(model, source_name) >= 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "source '%s' of parameter '%s': the name is a "
                         "parameter of the model",
                         source_name, param_fqn);
  if (box->ndim < 0 || box->ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "source '%s' of parameter '%s': box ndim %d",
                         source_name, param_fqn, box->ndim);
  int64_t dup = tpx__fold_source_find(model, source_name);
  if (dup >= 0 && !part) /* parts share their tensor: _box */
    return tpx_error_set(
        err, TPX_INVALID_ARGUMENT,
        "source '%s' of parameter '%s': the tensor is already a source (of "
        "'%s')",
        source_name, param_fqn, model->params[model->fold_srcs[dup].param].fqn);
  st = check_box(model, pi, source_name, box, transpose, part, err);
  if (st == TPX_OK)
    st = tpx__expert_fold_add_source(model, pi, source_name, box, transpose,
                                     err);
  return st;
}

tpx_status tpx_model_add_param_source(tpx_model *model, const char *param_fqn,
                                      const char *source_name,
                                      const tpx_slice *box, int transpose,
                                      tpx_error *err) {
  return add_source(model, param_fqn, source_name, box, transpose, 0, err);
}

tpx_status tpx_model_add_param_source_box(tpx_model *model,
                                          const char *param_fqn,
                                          const char *source_name,
                                          const tpx_slice *box, int transpose,
                                          tpx_error *err) {
  return add_source(model, param_fqn, source_name, box, transpose, 1, err);
}

size_t tpx_model_num_param_sources(const tpx_model *model, int64_t param) {
  size_t first = 0;
  if (model == NULL || param < 0 || (size_t)param >= model->num_params)
    return 0;
  return (size_t)tpx__expert_fold_rules_find(model, param, &first);
}

tpx_status tpx_model_param_source(const tpx_model *model, int64_t param,
                                  size_t k, const char **source_name,
                                  tpx_slice *box, int *transpose,
                                  tpx_error *err) {
  size_t first = 0;
  if (model == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_param_source: NULL model");
  if (k >= tpx_model_num_param_sources(model, param))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "parameter %lld has no source %zu", (long long)param,
                         k);
  tpx__expert_fold_rules_find(model, param, &first);
  const struct tpx__fold_src *s = &model->fold_srcs[first + k];
  if (source_name)
    *source_name = s->name;
  if (box)
    *box = s->box;
  if (transpose)
    *transpose = s->transpose;
  return TPX_OK;
}
