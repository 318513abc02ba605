/* model/fold_sources.c — the checkpoint tensors each parameter the
 * conversion rules fused is made of (model/expert_fold.h, scheme
 * TPX__EXPERT_NAMES_RULES): recorded by conversion_load.c as it fuses them,
 * read by the checkpoint reader (`tpx shard`) and written back by
 * `tpx merge` through the shard's "fold" lists. Any MoE or concatenation
 * the rules describe, not only the HF and Mixtral expert names. */
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

tpx_status tpx__expert_fold_add_source(tpx_model *model, int64_t param,
                                       const char *name, const tpx_slice *box,
                                       tpx_error *err) {
  size_t np = model->num_fold_params;
  struct tpx__fold_param *last = np ? &model->fold_params[np - 1] : NULL;
  if (param < 0 || (last && param < last->param))
    return tpx_error_set(err, TPX_INTERNAL,
                         "fold source '%s': parameters out of order", name);
  void *p = grow(model->fold_srcs, &model->cap_fold_srcs,
                 model->num_fold_srcs + 1, sizeof *model->fold_srcs);
  if (p == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  model->fold_srcs = p;
  if (last == NULL || last->param != param) {
    p = grow(model->fold_params, &model->cap_fold_params, np + 1,
             sizeof *model->fold_params);
    if (p == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    model->fold_params = p;
    last = &model->fold_params[model->num_fold_params++];
    last->param = param;
    last->first = model->num_fold_srcs;
    last->count = 0;
  }
  char *copy = tpx__arena_strndup(&model->arena, name, strlen(name));
  if (copy == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  struct tpx__fold_src *s = &model->fold_srcs[model->num_fold_srcs++];
  s->name = copy;
  s->box = *box;
  last->count++;
  return TPX_OK;
}

int64_t tpx__expert_fold_rules_find(const tpx_model *model, int64_t param,
                                    size_t *first) {
  size_t lo = 0, hi = model->num_fold_params;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (model->fold_params[mid].param < param)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == model->num_fold_params || model->fold_params[lo].param != param)
    return 0;
  *first = model->fold_params[lo].first;
  return (int64_t)model->fold_params[lo].count;
}
