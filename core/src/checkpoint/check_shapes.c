/* check_shapes.c — tpx_checkpoint_check_shapes: do a config's model and
 * a checkpoint describe the same model? A tensor both name with different
 * shapes means they do not (a config of one model, the checkpoint of
 * another): `tpx plan --config C --weights W` makes that an error, not a
 * skeleton to drop. Tensors only one side has, or dtypes that differ, are
 * left to the caller (a checkpoint variant, an f32 export). Not the
 * loading itself (tpx_model_add_safetensors) nor the strict check of a
 * read (tpx_checkpoint_check_model, fold.c). */
#include <stdio.h>
#include <string.h>

#include "tpx/checkpoint.h"
#include "tpx/model.h"

#include "model/expert_fold.h"
#include "model/model_view.h"

static void shape_text(const tpx_param_info *p, char *buf, size_t size) {
  size_t o = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < p->ndim && o < size; d++)
    o += (size_t)snprintf(buf + o, size - o, "%s%lld", d ? ", " : "",
                          (long long)p->shape[d]);
  if (o < size)
    snprintf(buf + o, size - o, "]");
}

/* The stored sources the model declares (tpx_model_add_param_source)
 * against the weights' headers: a source the weights hold with another
 * shape than its box asks (swapped when transposed) differs. */
static void sources_differ(const tpx_model *model, const char *weights,
                           size_t *shared, size_t *differ, char *first,
                           size_t size) {
  tpx_checkpoint_reader *rd = NULL;
  size_t np = tpx_model_num_params(model), any = 0;
  for (size_t i = 0; i < np && !any; i++)
    any = tpx_model_num_param_sources(model, (int64_t)i);
  if (!any || tpx_checkpoint_reader_create(weights, NULL, &rd, NULL) != TPX_OK)
    return;
  for (size_t i = 0; i < np; i++) {
    size_t n = tpx_model_num_param_sources(model, (int64_t)i);
    for (size_t k = 0; k < n; k++) {
      const char *name = NULL;
      tpx_slice box;
      int tr = 0;
      tpx_checkpoint_tensor t;
      int64_t ti = -1;
      if (tpx_model_param_source(model, (int64_t)i, k, &name, &box, &tr,
                                 NULL) == TPX_OK)
        ti = tpx_checkpoint_find(rd, name);
      if (ti < 0 ||
          tpx_checkpoint_tensor_info(rd, (size_t)ti, &t, NULL) != TPX_OK)
        continue;
      ++*shared;
      if (tpx__fold_source_fits(&box, tr, t.shape, t.ndim))
        continue;
      if ((*differ)++ == 0) {
        int64_t want[TPX_MAX_TENSOR_DIMS];
        int wn = tpx__fold_source_shape(&box, tr, want);
        char a[128], b[128], c[128];
        snprintf(first, size,
                 "tensor '%s' is %s in the weights but %s from the config "
                 "(the part %s of '%s'%s)",
                 name, tpx__format_shape(a, sizeof a, t.shape, t.ndim),
                 tpx__format_shape(b, sizeof b, want, wn),
                 tpx__fold_box_text(c, sizeof c, &box),
                 tpx__mv_param(model, (int64_t)i)->fqn,
                 tr ? ", stored transposed" : "");
      }
    }
  }
  tpx_checkpoint_reader_destroy(rd);
}

tpx_status tpx_checkpoint_check_shapes(const tpx_model *model,
                                       const char *weights, size_t *differ_out,
                                       tpx_error *err) {
  if (differ_out)
    *differ_out = 0;
  if (model == NULL || weights == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_check_shapes: NULL argument");
  tpx_model *w = NULL;
  tpx_status st = tpx_model_create(&w, err);
  if (st == TPX_OK)
    st = tpx_model_add_safetensors(w, weights, err);
  if (st != TPX_OK) {
    tpx_model_destroy(w);
    return st;
  }
  size_t shared = 0, differ = 0;
  char first[1024] = "";
  for (size_t i = 0; i < tpx_model_num_params(w); i++) {
    tpx_param_info wp, mp;
    if (tpx_model_param(w, (int64_t)i, &wp, NULL) != TPX_OK)
      continue;
    int64_t j = tpx__mv_find_param_aliased(model, wp.fqn);
    if (j < 0 || tpx_model_param(model, j, &mp, NULL) != TPX_OK)
      continue;
    shared++;
    if (wp.ndim == mp.ndim &&
        memcmp(wp.shape, mp.shape, (size_t)wp.ndim * sizeof wp.shape[0]) == 0)
      continue;
    if (differ++ == 0) {
      char a[128], b[128];
      shape_text(&wp, a, sizeof a);
      shape_text(&mp, b, sizeof b);
      snprintf(first, sizeof first,
               "tensor '%s' is %s in the weights but %s from the config",
               wp.fqn, a, b);
    }
  }
  tpx_model_destroy(w);
  sources_differ(model, weights, &shared, &differ, first, sizeof first);
  if (differ_out)
    *differ_out = differ;
  if (!differ)
    return TPX_OK;
  return tpx_error_set(err, TPX_VALIDATION,
                       "the config and --weights %s describe different "
                       "models: %s (%zu of the %zu tensors both name "
                       "disagree in shape); pass the config.json that came "
                       "with the weights",
                       weights, first, differ, shared);
}
