/* model/split_sources.c — stored tensors bigger than their parameters: one
 * checkpoint tensor cut into several parameters (transformers' Split, e.g.
 * lara_mini's linear_attn.in_proj -> in_proj_qkv / _z / _b / _a). Each
 * parameter records the tensor as a source whose box, in the parameter's
 * coordinates, reaches past the parameter (fold_sources.c: the box is the
 * whole stored tensor placed so that the parameter's part of it lands on
 * the parameter); the sources of one tensor are chained by `next`
 * (fold_sources.c shares them). Here: tpx_model_add_split_source, where a
 * source's part lies in its tensor, and the check that the parts of each
 * tensor tile it. Not the boxes of one parameter (source_check.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/expert_fold.h"
#include "model/model_impl.h"

int tpx__fold_source_part(const tpx_model *model,
                          const struct tpx__fold_src *src, tpx_slice *in_param,
                          tpx_slice *in_stored) {
  const tpx__param *p = &model->params[src->param];
  const int64_t *shape = model->dims + p->dims;
  int64_t st[TPX_MAX_TENSOR_DIMS];
  int sn = tpx__fold_source_shape(&src->box, src->transpose, st);
  int drop = src->box.ndim - sn;
  memset(in_param, 0, sizeof *in_param);
  memset(in_stored, 0, sizeof *in_stored);
  in_param->ndim = src->box.ndim;
  in_stored->ndim = sn;
  int64_t numel = 1;
  for (int d = 0; d < src->box.ndim; d++) {
    int64_t a = src->box.offset[d] > 0 ? src->box.offset[d] : 0;
    int64_t e = src->box.offset[d] + src->box.length[d];
    int64_t b = e < shape[d] ? e : shape[d];
    int64_t len = b > a ? b - a : 0;
    in_param->offset[d] = a;
    in_param->length[d] = len;
    numel *= len;
    if (d < drop)
      continue;
    int sd = d - drop;
    if (src->transpose && sd >= sn - 2)
      sd = sd == sn - 2 ? sn - 1 : sn - 2;
    in_stored->offset[sd] = a - src->box.offset[d];
    in_stored->length[sd] = len;
  }
  return numel > 0;
}

const char *tpx__fold_parts_text(const tpx_model *model, int64_t first, int max,
                                 char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  int k = 0;
  for (int64_t i = first; i >= 0 && used < size;
       i = model->fold_srcs[i].next, k++) {
    tpx_slice in_p, in_s;
    char b[200];
    if (k == max) {
      snprintf(buf + used, size - used, ", ...");
      break;
    }
    tpx__fold_source_part(model, &model->fold_srcs[i], &in_p, &in_s);
    used +=
        (size_t)snprintf(buf + used, size - used, "%s'%s' %s", k ? ", " : "",
                         model->params[model->fold_srcs[i].param].fqn,
                         tpx__fold_box_text(b, sizeof b, &in_s));
  }
  return buf;
}

/* The parts of the stored tensor whose first source is `first` tile it:
 * none overlapping, none of it left out. */
static tpx_status check_tensor(const tpx_model *model, int64_t first,
                               tpx_error *err) {
  const struct tpx__fold_src *s0 = &model->fold_srcs[first];
  int64_t shape[TPX_MAX_TENSOR_DIMS], covered = 0;
  int sn = tpx__fold_source_shape(&s0->box, s0->transpose, shape);
  int64_t numel = tpx__shape_numel(shape, sn);
  char sh[200], list[600];
  for (int64_t i = first; i >= 0; i = model->fold_srcs[i].next) {
    tpx_slice pi, si, pj, sj;
    tpx__fold_source_part(model, &model->fold_srcs[i], &pi, &si);
    covered += tpx_slice_numel(&si);
    for (int64_t j = model->fold_srcs[i].next; j >= 0;
         j = model->fold_srcs[j].next) {
      tpx__fold_source_part(model, &model->fold_srcs[j], &pj, &sj);
      int meet = 1;
      for (int d = 0; d < sn && meet; d++)
        meet = si.offset[d] < sj.offset[d] + sj.length[d] &&
               sj.offset[d] < si.offset[d] + si.length[d];
      if (!meet)
        continue;
      char a[200], b[200];
      return tpx_error_set(
          err, TPX_VALIDATION,
          "stored tensor '%s' %s: its parts '%s' %s and '%s' %s overlap",
          s0->name, tpx__format_shape(sh, sizeof sh, shape, sn),
          model->params[model->fold_srcs[i].param].fqn,
          tpx__fold_box_text(a, sizeof a, &si),
          model->params[model->fold_srcs[j].param].fqn,
          tpx__fold_box_text(b, sizeof b, &sj));
    }
  }
  if (covered != numel)
    return tpx_error_set(
        err, TPX_VALIDATION,
        "stored tensor '%s' %s: its parts (%s) cover %lld of its %lld "
        "elements; the parameters cut from it must tile it",
        s0->name, tpx__format_shape(sh, sizeof sh, shape, sn),
        tpx__fold_parts_text(model, first, 6, list, sizeof list),
        (long long)covered, (long long)numel);
  return TPX_OK;
}

int tpx__fold_source_is_part(const tpx_model *model, size_t i) {
  const struct tpx__fold_src *s = &model->fold_srcs[i];
  const int64_t *shape = model->dims + model->params[s->param].dims;
  if (s->next >= 0)
    return 1;
  for (int d = 0; d < s->box.ndim; d++)
    if (s->box.offset[d] < 0 || s->box.offset[d] + s->box.length[d] > shape[d])
      return 1;
  return 0;
}

tpx_status tpx__fold_check_stored(const tpx_model *model, tpx_error *err) {
  for (size_t i = 0; i < model->num_fold_srcs; i++) {
    int64_t head = -1;
    tpx__strmap_find(&model->fold_names, model->fold_srcs[i].name,
                     strlen(model->fold_srcs[i].name), &head);
    if (head != (int64_t)i || !tpx__fold_source_is_part(model, i))
      continue;
    tpx_status st = check_tensor(model, (int64_t)i, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

const char *tpx__fold_split_note(const tpx_model *model, char *buf,
                                 size_t size) {
  size_t n = 0, first = 0;
  for (size_t i = 0; model && i < model->num_fold_srcs; i++) {
    int64_t head = -1;
    tpx__strmap_find(&model->fold_names, model->fold_srcs[i].name,
                     strlen(model->fold_srcs[i].name), &head);
    if (head != (int64_t)i || !tpx__fold_source_is_part(model, i))
      continue;
    if (n++ == 0)
      first = i;
  }
  if (n == 0)
    return NULL;
  const struct tpx__fold_src *s = &model->fold_srcs[first];
  int64_t shape[TPX_MAX_TENSOR_DIMS];
  int sn = tpx__fold_source_shape(&s->box, s->transpose, shape);
  char sh[200], list[600];
  snprintf(buf, size,
           "%zu checkpoint tensor%s cut into several parameters each (the "
           "first: '%s' %s -> %s): `tpx shard` reads each rank's slice of a "
           "parameter at its offset in the tensor, `tpx merge` writes the "
           "tensor back whole",
           n, n == 1 ? " is" : "s are", s->name,
           tpx__format_shape(sh, sizeof sh, shape, sn),
           tpx__fold_parts_text(model, (int64_t)first, 6, list, sizeof list));
  return buf;
}

/* ---- tpx_model_add_split_source ---- */

typedef struct split_part {
  int64_t param, off, len;
} split_part;

static int by_off(const void *a, const void *b) {
  const split_part *x = a, *y = b;
  return (x->off > y->off) - (x->off < y->off);
}

/* The parameters' lengths along `dim` lay them side by side from 0 with
 * neither gap nor overlap; *total gets the tensor's length there. */
static tpx_status check_cover(const tpx_model *model, const char *name, int dim,
                              split_part *v, size_t n, int64_t *total,
                              tpx_error *err) {
  qsort(v, n, sizeof *v, by_off);
  int64_t end = 0;
  for (size_t i = 0; i < n; i++) {
    const char *fqn = model->params[v[i].param].fqn;
    if (v[i].off > end)
      return tpx_error_set(err, TPX_VALIDATION,
                           "split of stored tensor '%s' along dim %d: no "
                           "parameter covers [%lld:%lld) (the next, '%s', "
                           "starts at %lld)",
                           name, dim, (long long)end, (long long)v[i].off, fqn,
                           (long long)v[i].off);
    if (v[i].off < end)
      return tpx_error_set(
          err, TPX_VALIDATION,
          "split of stored tensor '%s' along dim %d: '%s' [%lld:%lld) "
          "overlaps '%s', which ends at %lld",
          name, dim, fqn, (long long)v[i].off, (long long)(v[i].off + v[i].len),
          model->params[v[i - 1].param].fqn, (long long)end);
    end = v[i].off + v[i].len;
  }
  *total = end;
  return TPX_OK;
}

/* Every parameter exists, is not tied, and has the first one's ndim,
 * dtype and shape off `dim`; their lengths and offsets into v. */
static tpx_status collect_parts(const tpx_model *model, const char *name,
                                int *dim, const char *const *fqns,
                                const int64_t *offsets, size_t n, split_part *v,
                                tpx_error *err) {
  int64_t run = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t pi = fqns[i] ? tpx_model_find_param(model, fqns[i]) : -1;
    if (pi < 0)
      return tpx_error_set(err, TPX_NOT_FOUND,
                           "split of stored tensor '%s': the model has no "
                           "parameter '%s' (add the parameters first)",
                           name, fqns[i] ? fqns[i] : "(null)");
    const tpx__param *p = &model->params[pi];
    const int64_t *s = model->dims + p->dims;
    if (i == 0 && (*dim < -p->ndim || *dim >= p->ndim))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "split of stored tensor '%s': dim %d is outside "
                           "'%s' of %d dims",
                           name, *dim, p->fqn, p->ndim);
    if (i == 0 && *dim < 0)
      *dim += p->ndim;
    v[i].param = pi; /* v[0] is set from here on */
    const tpx__param *p0 = &model->params[v[0].param];
    int same = i == 0 || (p->ndim == p0->ndim && p->dtype == p0->dtype);
    for (int d = 0; same && i > 0 && d < p->ndim; d++)
      same = d == *dim || s[d] == model->dims[p0->dims + d];
    char a[200], b[200];
    if (!same)
      return tpx_error_set(
          err, TPX_VALIDATION,
          "split of stored tensor '%s' along dim %d: '%s' %s %s and '%s' %s "
          "%s differ off the split dim or in dtype",
          name, *dim, p0->fqn,
          tpx__format_shape(a, sizeof a, model->dims + p0->dims, p0->ndim),
          tpx__model_dtype_st_name((tpx_dtype)p0->dtype), p->fqn,
          tpx__format_shape(b, sizeof b, s, p->ndim),
          tpx__model_dtype_st_name((tpx_dtype)p->dtype));
    if (p->tied_to >= 0)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "split of stored tensor '%s': parameter '%s' is "
                           "tied (not stored)",
                           name, p->fqn);
    v[i].len = s[*dim];
    v[i].off = offsets ? offsets[i] : run;
    if (v[i].off < 0 || v[i].off > INT64_MAX - v[i].len)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "split of stored tensor '%s': '%s' at offset %lld",
                           name, p->fqn, (long long)v[i].off);
    run = v[i].off + v[i].len;
  }
  return TPX_OK;
}

tpx_status tpx_model_add_split_source(tpx_model *model, const char *source_name,
                                      int dim, const char *const *param_fqns,
                                      const int64_t *offsets, size_t num_params,
                                      tpx_error *err) {
  if (model == NULL || source_name == NULL || param_fqns == NULL ||
      num_params == 0 || num_params > ((size_t)1 << 20))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_split_source: NULL argument or %zu "
                         "parameters",
                         num_params);
  split_part *v = malloc(num_params * sizeof *v);
  if (v == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  int64_t total = 0;
  tpx_status st = collect_parts(model, source_name, &dim, param_fqns, offsets,
                                num_params, v, err);
  if (st == TPX_OK)
    st = check_cover(model, source_name, dim, v, num_params, &total, err);
  for (size_t i = 0; i < num_params && st == TPX_OK; i++) {
    const tpx__param *p = &model->params[v[i].param];
    tpx_slice box;
    memset(&box, 0, sizeof box);
    box.ndim = p->ndim;
    memcpy(box.length, model->dims + p->dims,
           (size_t)p->ndim * sizeof *box.length);
    box.offset[dim] = -v[i].off;
    box.length[dim] = total;
    st = tpx_model_add_param_source_box(model, p->fqn, source_name, &box, 0,
                                        err);
  }
  free(v);
  return st;
}
