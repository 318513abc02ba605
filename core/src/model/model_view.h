/* model/model_view.h — read-only inline access to a model's modules and
 * parameters, for the per-module and per-parameter loops of matching and
 * sharding. On a million-tensor model a tpx_model_param call per parameter
 * per pass (a 100-byte copy through the PLT) was a tenth of the planning
 * time; these read the records in place.
 *
 * Same facts as tpx/model.h, no checks: indices must be valid (callers loop
 * over 0..tpx_model_num_*() - 1 or follow indices the model gave). Never
 * write through these. Other areas include this header, never
 * model_impl.h. */
#ifndef TPX_MODEL_MODEL_VIEW_H
#define TPX_MODEL_MODEL_VIEW_H

#include <string.h>

#include "model/model_impl.h"

static inline const tpx__module *tpx__mv_module(const tpx_model *model,
                                                int64_t m) {
  return &model->modules[m];
}

static inline const tpx__param *tpx__mv_param(const tpx_model *model,
                                              int64_t p) {
  return &model->params[p];
}

static inline const int64_t *tpx__mv_shape(const tpx_model *model,
                                           const tpx__param *p) {
  return model->dims + p->dims;
}

/* Parent (-1 for the root) and kind of module m, from the compact copies:
 * passes over every module read these rather than the records. */
static inline int64_t tpx__mv_parent(const tpx_model *model, int64_t m) {
  return model->parents[m];
}

static inline tpx_module_kind tpx__mv_kind(const tpx_model *model, int64_t m) {
  return (tpx_module_kind)model->kinds[m];
}

/* Local name of parameter p ("weight"). */
static inline const char *tpx__mv_param_name(const tpx__param *p) {
  return p->fqn + p->name_off;
}

/* Offset of module m's last atom in its FQN (0 for children of the root). */
static inline size_t tpx__mv_name_off(const tpx_model *model, int64_t m) {
  int64_t parent = model->parents[m];
  return parent > 0 ? (size_t)model->modules[parent].fqn_len + 1 : 0;
}

/* Module m's parameters in index order (the model links them newest
 * first): their count; written to buf only when it is at most cap, so a
 * caller may ask with cap 0 first and again with room. */
static inline size_t tpx__mv_module_params(const tpx_model *model, int64_t m,
                                           int64_t *buf, size_t cap) {
  size_t n = 0;
  for (int64_t p = model->modules[m].first_param; p >= 0;
       p = model->params[p].next_param)
    n++;
  if (n > cap)
    return n;
  size_t i = n;
  for (int64_t p = model->modules[m].first_param; p >= 0;
       p = model->params[p].next_param)
    buf[--i] = p;
  return n;
}

/* Parameter `name`, or, when no parameter has that name, the one it names
 * under the model's name aliases (a checkpoint stored under the other
 * spelling); -1 when neither. */
static inline int64_t tpx__mv_find_param_aliased(const tpx_model *model,
                                                 const char *name) {
  char canon[1024];
  int64_t p = tpx_model_find_param(model, name);
  if (p < 0 && tpx_model_canonical_name(model, name, canon, sizeof canon) == 1)
    p = tpx_model_find_param(model, canon);
  return p;
}

/* tpx_model_param without the call and its checks. */
static inline void tpx__mv_param_info(const tpx_model *model, int64_t p,
                                      tpx_param_info *out) {
  const tpx__param *r = &model->params[p];
  memset(out, 0, sizeof *out);
  out->fqn = r->fqn;
  out->name = r->fqn + r->name_off;
  out->module = r->module;
  out->ndim = r->ndim;
  if (r->ndim)
    memcpy(out->shape, model->dims + r->dims, r->ndim * sizeof *out->shape);
  out->dtype = (tpx_dtype)r->dtype;
  out->tied_to = r->tied_to;
}

/* The dtype config.json declares (torch_dtype, dtype, then both under
 * text_config; with float_only the first that is a float dtype): 1 and
 * *out, or 0 when none parses (model/config.c). */
int tpx__model_config_dtype(const tpx_model *model, int float_only,
                            tpx_dtype *out);

#endif /* TPX_MODEL_MODEL_VIEW_H */
