/* model/conversion_load.c — transformers' checkpoint conversion applied to a
 * safetensors load (conversion.h), the way from_pretrained builds its module
 * tree: renamed tensors get their module names (the checkpoint's names stay
 * as name aliases, so readers find them), per-expert and other converted
 * tensors become the fused parameters their converters make, and saved
 * buffers are recorded as buffers. Only for a model whose tree comes from
 * the headers alone (no plugin skeleton): a skeleton already names the
 * tree its own way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/expert_fold.h"
#include "model/conversion_load.h"
#include "model/st_header.h"

static tpx_status oom(tpx_error *err) {
  return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
}

/* One converted tensor: its target-0 name, rule, source and index. */
typedef struct member {
  size_t tensor;
  int rule, source;
  int64_t index;
  char *target;
} member;

static int by_group(const void *a, const void *b) {
  const member *x = a, *y = b;
  int c = strcmp(x->target, y->target);
  if (c != 0)
    return c;
  if (x->rule != y->rule)
    return x->rule < y->rule ? -1 : 1;
  if (x->source != y->source)
    return x->source < y->source ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The shape converter `rule` makes for target `ti` out of members m[0..n)
 * (sorted by source, then index) into shape and *ndim; 0 when the members do
 * not fit together (the tensors then stay as they are). */
static int fused_shape(const tpx__conv *c, int rule, size_t ti,
                       const tpx__st_load *l, const member *m, size_t n,
                       int64_t *shape, int *ndim) {
  int dim, merge = -1, concat = -1, chunk = -1;
  for (size_t k = 0; k < 4; k++) {
    int op = tpx__conv_op(c, rule, k, &dim);
    if (op == TPX__CONV_MERGE)
      merge = dim;
    else if (op == TPX__CONV_CONCAT)
      concat = dim;
    else if (op == TPX__CONV_CHUNK)
      chunk = dim;
  }
  const tpx__st_tensor *t0 = &l->t[m[0].tensor];
  int nd = t0->ndim + (merge >= 0);
  if (nd > TPX_MAX_TENSOR_DIMS || (merge >= 0 && merge > t0->ndim))
    return 0;
  int64_t total = 0; /* along the concat dim */
  size_t i = 0, parts = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && m[j].source == m[i].source) j++;
    int64_t part[TPX_MAX_TENSOR_DIMS];
    const tpx__st_tensor *t = &l->t[m[i].tensor];
    if (merge < 0 && j - i != 1)
      return 0;
    for (size_t k = i; k < j; k++) {
      const tpx__st_tensor *u = &l->t[m[k].tensor];
      if (u->ndim != t->ndim || u->dtype != t0->dtype ||
          memcmp(u->shape, t->shape, (size_t)t->ndim * sizeof *t->shape))
        return 0;
      if (merge >= 0 && m[k].index != (int64_t)(k - i))
        return 0; /* experts 0..E-1, each once */
    }
    int d = 0;
    for (int k = 0; k < nd; k++)
      part[k] = merge == k ? (int64_t)(j - i) : t->shape[d++];
    if (parts == 0) {
      memcpy(shape, part, (size_t)nd * sizeof *shape);
    } else {
      for (int k = 0; k < nd; k++)
        if (k != concat && part[k] != shape[k])
          return 0;
    }
    if (concat >= 0 && concat < nd)
      total += part[concat];
    parts++;
    i = j;
  }
  if (parts > 1 && (concat < 0 || concat >= nd))
    return 0;
  if (concat >= 0 && concat < nd)
    shape[concat] = total;
  if (chunk >= 0) {
    size_t nt = tpx__conv_num_targets(c, rule);
    if (chunk >= nd || shape[chunk] % (int64_t)nt != 0)
      return 0;
    shape[chunk] /= (int64_t)nt;
  }
  (void)ti;
  *ndim = nd;
  return 1;
}

/* Records where each member of the group sits in the one parameter
 * `param` it made (model/expert_fold.h, scheme RULES), so that `tpx shard`
 * reads it from them and `tpx merge` writes them back. Only for a merge on
 * dim 0 and/or a concatenation (a chunk splits a tensor over several
 * parameters: not recorded). */
static tpx_status record_sources(tpx_model *model, const tpx__conv *c,
                                 const tpx__st_load *l, const member *m,
                                 size_t n, int64_t param, int ndim,
                                 tpx_error *err) {
  int dim, merge = -1, concat = -1;
  for (size_t k = 0; k < 4; k++) {
    int op = tpx__conv_op(c, m[0].rule, k, &dim);
    if (op == TPX__CONV_MERGE)
      merge = dim;
    else if (op == TPX__CONV_CONCAT)
      concat = dim;
    else if (op == TPX__CONV_CHUNK)
      return TPX_OK;
  }
  if (merge > 0)
    return TPX_OK;
  int64_t run = 0; /* along the concat dim */
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && m[j].source == m[i].source) j++;
    int64_t part = 0;
    for (size_t k = i; k < j; k++) {
      const tpx__st_tensor *t = &l->t[m[k].tensor];
      tpx_slice box;
      memset(&box, 0, sizeof box);
      box.ndim = ndim;
      for (int dd = 0, d = 0; dd < ndim; dd++) {
        if (dd == merge) {
          box.offset[dd] = m[k].index;
          box.length[dd] = 1;
          continue;
        }
        box.length[dd] = t->shape[d++];
        if (dd == concat) {
          box.offset[dd] = run;
          part = box.length[dd];
        }
      }
      tpx_status st =
          tpx__expert_fold_add_source(model, param, t->name, &box, 0, err);
      if (st != TPX_OK)
        return st;
    }
    run += part;
    i = j;
  }
  return TPX_OK;
}

/* A Split converter (conversion.h): its dim, or -1. */
static int split_dim(const tpx__conv *c, int rule) {
  int dim;
  for (size_t k = 0; k < 4; k++)
    if (tpx__conv_op(c, rule, k, &dim) == TPX__CONV_SPLIT)
      return dim;
  return -1;
}

/* The size of each of the nt targets of Split rule `rule` along its dim
 * `dim` into sizes: the table's sizes from the config, the "rest" target
 * the source's size less the others'. 0 when they do not fit the source
 * (one tensor; sizes positive, summing to the source's). */
static int split_sizes(const tpx_model *model, const tpx__conv *c, int rule,
                       int dim, const tpx__st_tensor *t, size_t nt,
                       int64_t *sizes) {
  int64_t sum = 0;
  size_t rest = nt;
  if (dim < 0 || dim >= t->ndim)
    return 0;
  for (size_t i = 0; i < nt; i++) {
    sizes[i] = tpx__conv_split_size(c, rule, i, tpx__model_config(model));
    if (sizes[i] == -2 && rest == nt) {
      rest = i;
      continue;
    }
    if (sizes[i] <= 0)
      return 0;
    sum += sizes[i];
  }
  if (rest < nt)
    sizes[rest] = t->shape[dim] - sum;
  else if (sum != t->shape[dim])
    return 0;
  return rest == nt || sizes[rest] > 0;
}

static tpx_status add_fused(tpx_model *model, const tpx__conv *c,
                            tpx__st_load *l, const member *m, size_t n,
                            size_t *fused, size_t *made, tpx_error *err) {
  int rule = m[0].rule, src;
  int64_t idx;
  char name[1024];
  size_t nt = tpx__conv_num_targets(c, rule);
  int64_t shape[TPX_MAX_TENSOR_DIMS], sizes[16];
  int ndim, split = split_dim(c, rule);
  if (split >= 0) {
    /* one tensor into nt parameters (lara_mini's linear_attn.in_proj) */
    const tpx__st_tensor *t = &l->t[m[0].tensor];
    if (n != 1 || nt > sizeof sizes / sizeof *sizes ||
        !split_sizes(model, c, rule, split, t, nt, sizes))
      return TPX_OK; /* left as the checkpoint has it */
    ndim = t->ndim;
    memcpy(shape, t->shape, (size_t)ndim * sizeof *shape);
  } else if (!fused_shape(c, rule, 0, l, m, n, shape, &ndim)) {
    return TPX_OK; /* left as the checkpoint has them */
  }
  for (size_t ti = 0; ti < nt; ti++) {
    if (split >= 0)
      shape[split] = sizes[ti];
    if (tpx__conv_convert(c, l->t[m[0].tensor].name, ti, name, sizeof name,
                          &rule, &src, &idx) != 1)
      return tpx_error_set(err, TPX_VALIDATION,
                           "tensor '%s': its converted name is too long",
                           l->t[m[0].tensor].name);
    char *dot = strrchr(name, '.');
    const char *pname = dot ? dot + 1 : name;
    if (dot)
      *dot = '\0';
    const char *mod = dot ? name : "";
    tpx_status st = TPX_OK;
    if (tpx_model_find_module(model, mod) < 0)
      st = tpx_model_add_module(model, mod, TPX_MODULE_OTHER, NULL, err);
    if (st == TPX_OK)
      st = tpx_model_add_param(model, mod, pname, shape, ndim,
                               l->t[m[0].tensor].dtype, NULL, err);
    if (st == TPX_OK && nt == 1)
      st = record_sources(model, c, l, m, n,
                          (int64_t)tpx_model_num_params(model) - 1, ndim, err);
    if (st != TPX_OK)
      return st;
  }
  if (split >= 0) {
    /* the saved tensor, read back at each target's offset
     * (tpx_model_add_split_source) */
    const char *fqns[sizeof sizes / sizeof *sizes];
    size_t np = tpx_model_num_params(model);
    for (size_t ti = 0; ti < nt; ti++) {
      tpx_param_info pi;
      tpx_status st = tpx_model_param(model, (int64_t)(np - nt + ti), &pi, err);
      if (st != TPX_OK)
        return st;
      fqns[ti] = pi.fqn;
    }
    tpx_status st = tpx_model_add_split_source(model, l->t[m[0].tensor].name,
                                               split, fqns, NULL, nt, err);
    if (st != TPX_OK)
      return st;
  }
  for (size_t j = 0; j < n; j++) l->t[m[j].tensor].skip = 1;
  *fused += n;
  *made += nt;
  return TPX_OK;
}

/* Converters: the tensors each converter takes, grouped by the name they
 * become, are made into that parameter (added to the model); their
 * source tensors are marked skip. */
static tpx_status fuse(tpx_model *model, const tpx__conv *c, tpx__st_load *l,
                       size_t *fused, size_t *made, tpx_error *err) {
  member *m = malloc((l->n ? l->n : 1) * sizeof *m);
  size_t n = 0;
  tpx_status st = m ? TPX_OK : oom(err);
  char name[1024];
  for (size_t k = 0; k < l->n && st == TPX_OK; k++) {
    member *x = &m[n];
    int r = tpx__conv_convert(c, l->t[k].name, 0, name, sizeof name, &x->rule,
                              &x->source, &x->index);
    if (r < 0)
      st = tpx_error_set(err, TPX_VALIDATION,
                         "tensor '%s': its converted name is too long",
                         l->t[k].name);
    if (r != 1)
      continue;
    x->tensor = k;
    x->target = tpx__arena_strndup(&l->arena, name, strlen(name));
    if (x->target == NULL)
      st = oom(err);
    n++;
  }
  if (st == TPX_OK && n > 0)
    qsort(m, n, sizeof *m, by_group);
  for (size_t i = 0; i < n && st == TPX_OK;) {
    size_t j = i;
    while (j < n && m[j].rule == m[i].rule &&
           strcmp(m[j].target, m[i].target) == 0)
      j++;
    st = add_fused(model, c, l, m + i, j - i, fused, made, err);
    i = j;
  }
  free(m);
  return st;
}

static tpx_status buffers(tpx_model *model, const tpx__conv *c, tpx__st_load *l,
                          size_t *count, tpx_error *err) {
  for (size_t k = 0; k < l->n; k++) {
    tpx__st_tensor *t = &l->t[k];
    if (t->skip || !tpx__conv_is_buffer(c, t->name))
      continue;
    tpx_status st =
        tpx_model_add_buffer(model, t->name, t->shape, t->ndim, t->dtype, err);
    if (st != TPX_OK)
      return st;
    t->skip = 1;
    (*count)++;
  }
  return TPX_OK;
}

static const char *model_type(const tpx_model *model) {
  json_t *cfg = tpx__model_config(model);
  return json_string_value(tpx__config_lookup(cfg, "model_type"));
}

tpx_status tpx__conv_load_renames(tpx_model *model, const tpx__st_load *l,
                                  tpx__conv **out, tpx_error *err) {
  *out = NULL;
  if (model->num_params > 0 || model->num_buffers > 0)
    return TPX_OK; /* a skeleton (or an earlier load) named the tree */
  tpx__conv *c = NULL;
  tpx_status st = tpx__conv_open(model_type(model), NULL, &c, err);
  if (st != TPX_OK || c == NULL)
    return st;
  size_t renamed = 0;
  st = tpx__conv_add_aliases(model, c, l, &renamed, err);
  if (st != TPX_OK) {
    tpx__conv_free(c);
    return st;
  }
  *out = c;
  return TPX_OK;
}

tpx_status tpx__conv_load_convert(tpx_model *model, const tpx__conv *c,
                                  tpx__st_load *l, tpx_error *err) {
  size_t fused = 0, made = 0, nbuf = 0;
  tpx_status st = fuse(model, c, l, &fused, &made, err);
  if (st == TPX_OK)
    st = buffers(model, c, l, &nbuf, err);
  if (st != TPX_OK)
    return st;
  char note[512];
  snprintf(note, sizeof note,
           "module tree from transformers %s's conversion rules for "
           "model type '%s': %zu name alias rule%s, %zu tensor%s fused into "
           "%zu parameter%s, %zu buffer%s%s",
           tpx__conv_version, model_type(model), model->num_aliases,
           model->num_aliases == 1 ? "" : "s", fused, fused == 1 ? "" : "s",
           made, made == 1 ? "" : "s", nbuf, nbuf == 1 ? "" : "s",
           tpx__conv_num_skipped(c) ? " (some rules of this type are not "
                                      "applied: docs/CONVERSION.md)"
                                    : "");
  free(model->conversion_note);
  model->conversion_note = strdup(note);
  return model->conversion_note ? TPX_OK : oom(err);
}
