/* model/expert_fold.c — per-expert checkpoint tensors onto fused experts.
 *
 * transformers 5 holds the experts of an MoE layer as one module with two
 * 3-D parameters, experts.gate_up_proj [E, 2*I, H] (each expert's gate rows
 * first, then its up rows) and experts.down_proj [E, H, I]; published
 * checkpoints store one 2-D tensor per expert and projection
 * (experts.{e}.gate_proj / up_proj / down_proj.weight; Mixtral's original
 * names block_sparse_moe.experts.{e}.w1 / w3 / w2.weight and
 * block_sparse_moe.gate.weight for the router mlp.gate.weight), which
 * transformers' checkpoint conversion stacks on load. This file recognises
 * those names, checks each tensor against its slice of the fused parameter
 * and counts the slices, so a checkpoint's headers give the same module tree
 * and bytes as the config-only skeleton.
 *
 * Only names and shapes: no data is read or moved here. Not the conversion
 * of other layouts (DeepSeek's original ffn.experts.* names). */
#include "model/expert_fold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/aliases.h"
#include "model/model_impl.h"

static int ends_with(const char *s, size_t n, const char *suffix) {
  size_t m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* Which part of the fused tensors a checkpoint projection name is. */
typedef enum { PART_NONE, PART_GATE, PART_UP, PART_DOWN } part_t;

/* The projection names of each part, per naming scheme (the one table
 * both the recognition and the source listing read). */
static const struct {
  const char *name;
  part_t part;
  int scheme; /* TPX__EXPERT_NAMES_HF or TPX__EXPERT_NAMES_MIXTRAL */
} names[] = {{"gate_proj", PART_GATE, TPX__EXPERT_NAMES_HF},
             {"w1", PART_GATE, TPX__EXPERT_NAMES_MIXTRAL},
             {"up_proj", PART_UP, TPX__EXPERT_NAMES_HF},
             {"w3", PART_UP, TPX__EXPERT_NAMES_MIXTRAL},
             {"down_proj", PART_DOWN, TPX__EXPERT_NAMES_HF},
             {"w2", PART_DOWN, TPX__EXPERT_NAMES_MIXTRAL}};

static const char bsm_suffix[] = ".block_sparse_moe";
static const char router_suffix[] = ".block_sparse_moe.gate.weight";

static const char *proj_name(part_t part, int scheme) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].part == part && names[i].scheme == scheme)
      return names[i].name;
  return NULL;
}

static part_t part_of(const char *proj, size_t len) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i].name) == len && memcmp(names[i].name, proj, len) == 0)
      return names[i].part;
  return PART_NONE;
}

/* "<p>.block_sparse_moe" -> "<p>.mlp" into buf; else the prefix as is. */
static int block_prefix(char *buf, size_t size, const char *name, size_t len) {
  const char *bsm = bsm_suffix;
  int n;
  if (ends_with(name, len, bsm))
    n = snprintf(buf, size, "%.*s.mlp", (int)(len - strlen(bsm)), name);
  else
    n = snprintf(buf, size, "%.*s", (int)len, name);
  return n >= 0 && (size_t)n < size ? 0 : -1;
}

/* Count slice `slot` of the `nslots` of fused parameter pi; *dup = 1 (and
 * nothing counted) when a tensor already gave that slice. */
static tpx_status count_slice(tpx__expert_fold *f, const tpx_model *model,
                              int64_t pi, int64_t slot, int64_t nslots,
                              int *dup, tpx_error *err) {
  *dup = 0;
  if (f->counts == NULL || f->n < model->num_params) {
    int64_t *c = realloc(f->counts, model->num_params * sizeof *c);
    if (c == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    f->counts = c;
    unsigned char **s = realloc(f->seen, model->num_params * sizeof *s);
    if (s == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    f->seen = s;
    memset(c + f->n, 0, (model->num_params - f->n) * sizeof *c);
    memset(s + f->n, 0, (model->num_params - f->n) * sizeof *s);
    f->n = model->num_params;
  }
  if (f->seen[pi] == NULL) {
    f->seen[pi] = calloc((size_t)nslots, 1);
    if (f->seen[pi] == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  if (f->seen[pi][slot]) {
    *dup = 1;
    return TPX_OK;
  }
  f->seen[pi][slot] = 1;
  f->counts[pi]++;
  f->folded++;
  return TPX_OK;
}

static tpx_status mismatch(const char *file, const char *name,
                           const int64_t *shape, int ndim, tpx_dtype dtype,
                           const char *fused, const char *want,
                           tpx_error *err) {
  char a[200];
  return tpx_error_set(err, TPX_VALIDATION,
                       "%s: tensor '%s' has shape %s %s, but as one expert's "
                       "slice of the fused parameter '%s' it must be %s",
                       file, name, tpx__format_shape(a, sizeof a, shape, ndim),
                       tpx__model_dtype_st_name(dtype), fused, want);
}

/* The recorded source named `name` (or, for a header name the model's
 * aliases rewrote, under the name before that), or -1. */
static int64_t declared_source(const tpx_model *model, const char *name) {
  int64_t si = tpx__fold_source_find(model, name);
  char buf[1024];
  for (size_t r = 0; si < 0 && model->num_fold_srcs && r < model->num_aliases;
       r++)
    if (tpx__model_alias_name(model, r, name, buf, sizeof buf) == 1)
      si = tpx__fold_source_find(model, buf);
  return si;
}

/* Tensor `name` is recorded source si: its shape and dtype must fit. */
static tpx_status try_one(tpx__expert_fold *f, const tpx_model *model,
                          int64_t si, const char *name, const int64_t *shape,
                          int ndim, tpx_dtype dtype, const char *file,
                          tpx_error *err);

/* Tensor `name` is recorded source si and the sources chained after it
 * (the parameters a bigger stored tensor is cut into). */
static tpx_status try_declared(tpx__expert_fold *f, const tpx_model *model,
                               int64_t si, const char *name,
                               const int64_t *shape, int ndim, tpx_dtype dtype,
                               const char *file, tpx_error *err) {
  const struct tpx__fold_src *s0 = &model->fold_srcs[si];
  const tpx__param *p0 = &model->params[s0->param];
  if (tpx__fold_source_is_part(model, (size_t)si) &&
      (dtype != (tpx_dtype)p0->dtype ||
       !tpx__fold_source_fits(&s0->box, s0->transpose, shape, ndim))) {
    int64_t want[TPX_MAX_TENSOR_DIMS];
    int wn = tpx__fold_source_shape(&s0->box, s0->transpose, want);
    char a[200], c[200], list[600];
    return tpx_error_set(
        err, TPX_VALIDATION,
        "%s: tensor '%s' has shape %s %s, but it is cut into the model's "
        "parameters %s%s, so it must be %s %s",
        file, name, tpx__format_shape(a, sizeof a, shape, ndim),
        tpx__model_dtype_st_name(dtype),
        tpx__fold_parts_text(model, si, 8, list, sizeof list),
        s0->transpose ? " (stored transposed)" : "",
        tpx__format_shape(c, sizeof c, want, wn),
        tpx__model_dtype_st_name((tpx_dtype)p0->dtype));
  }
  tpx_status st = TPX_OK;
  for (; si >= 0 && st == TPX_OK; si = model->fold_srcs[si].next)
    st = try_one(f, model, si, name, shape, ndim, dtype, file, err);
  return st;
}

static tpx_status try_one(tpx__expert_fold *f, const tpx_model *model,
                          int64_t si, const char *name, const int64_t *shape,
                          int ndim, tpx_dtype dtype, const char *file,
                          tpx_error *err) {
  const struct tpx__fold_src *src = &model->fold_srcs[si];
  const tpx__param *p = &model->params[src->param];
  size_t first = 0;
  int64_t count = tpx__expert_fold_rules_find(model, src->param, &first);
  if (dtype != (tpx_dtype)p->dtype ||
      !tpx__fold_source_fits(&src->box, src->transpose, shape, ndim)) {
    int64_t want[TPX_MAX_TENSOR_DIMS];
    int wn = tpx__fold_source_shape(&src->box, src->transpose, want);
    char a[200], b[200], c[200];
    return tpx_error_set(
        err, TPX_VALIDATION,
        "%s: tensor '%s' has shape %s %s, but as the source of '%s' at %s "
        "(stored %s) it must be %s %s",
        file, name, tpx__format_shape(a, sizeof a, shape, ndim),
        tpx__model_dtype_st_name(dtype), p->fqn,
        tpx__fold_box_text(b, sizeof b, &src->box),
        src->transpose ? "transposed: the box's last two dims swapped"
                       : "as the box",
        tpx__format_shape(c, sizeof c, want, wn),
        tpx__model_dtype_st_name((tpx_dtype)p->dtype));
  }
  int dup = 0;
  tpx_status st = count_slice(f, model, src->param,
                              (int64_t)si - (int64_t)first, count, &dup, err);
  if (st == TPX_OK && dup)
    st = tpx_error_set(err, TPX_VALIDATION,
                       "%s: tensor '%s' (a source of '%s') is stored twice",
                       file, name, p->fqn);
  return st;
}

tpx_status tpx__expert_fold_try(tpx__expert_fold *f, const tpx_model *model,
                                const char *name, const int64_t *shape,
                                int ndim, tpx_dtype dtype, const char *file,
                                int *folded, tpx_error *err) {
  static const char experts[] = ".experts.";
  const char *router = router_suffix;
  char fused[512], want[256], b[200];
  size_t len = strlen(name);
  *folded = 0;
  int64_t si = declared_source(model, name);
  if (si >= 0) {
    tpx_status st =
        try_declared(f, model, si, name, shape, ndim, dtype, file, err);
    *folded = st == TPX_OK;
    return st;
  }
  if (!ends_with(name, len, ".weight"))
    return TPX_OK;
  if (ends_with(name, len, router)) {
    /* Mixtral's router, renamed to mlp.gate. */
    size_t plen = len - strlen(router);
    if (snprintf(fused, sizeof fused, "%.*s.mlp.gate.weight", (int)plen,
                 name) >= (int)sizeof fused)
      return TPX_OK;
    int64_t pi = tpx_model_find_param(model, fused);
    if (pi < 0)
      return TPX_OK;
    const tpx__param *p = &model->params[pi];
    if (p->ndim != ndim || p->dtype != dtype ||
        memcmp(model->dims + p->dims, shape, (size_t)ndim * sizeof *shape)) {
      snprintf(want, sizeof want, "%s %s",
               tpx__format_shape(b, sizeof b, model->dims + p->dims, p->ndim),
               tpx__model_dtype_st_name((tpx_dtype)p->dtype));
      return tpx_error_set(err, TPX_VALIDATION,
                           "%s: tensor '%s' (Mixtral's router, read as '%s') "
                           "has shape %s %s, but '%s' is %s",
                           file, name, fused,
                           tpx__format_shape(b, sizeof b, shape, ndim),
                           tpx__model_dtype_st_name(dtype), fused, want);
    }
    *folded = 1;
    f->folded++;
    return TPX_OK;
  }
  /* <prefix>.experts.<e>.<proj>.weight, <prefix> without ".experts.". */
  const char *at = NULL;
  for (const char *s = strstr(name, experts); s; s = strstr(s + 1, experts))
    at = s;
  if (at == NULL)
    return TPX_OK;
  const char *num = at + sizeof experts - 1, *q = num;
  int64_t e = 0;
  while (*q >= '0' && *q <= '9' && e < ((int64_t)1 << 40))
    e = e * 10 + (*q++ - '0');
  if (q == num || *q != '.')
    return TPX_OK;
  const char *proj = q + 1;
  size_t plen = (size_t)(name + len - (sizeof ".weight" - 1) - proj);
  part_t part = part_of(proj, plen);
  if (part == PART_NONE)
    return TPX_OK;
  char prefix[400];
  if (block_prefix(prefix, sizeof prefix, name, (size_t)(at - name)) != 0)
    return TPX_OK;
  snprintf(fused, sizeof fused, "%s.experts.%s", prefix,
           part == PART_DOWN ? "down_proj" : "gate_up_proj");
  int64_t pi = tpx_model_find_param(model, fused);
  if (pi < 0)
    return TPX_OK; /* a model with per-expert modules: nothing to fold */
  const tpx__param *p = &model->params[pi];
  const int64_t *fs = model->dims + p->dims;
  if (p->ndim != 3)
    return TPX_OK;
  int64_t rows = part == PART_DOWN ? fs[1] : fs[1] / 2;
  snprintf(want, sizeof want, "[%lld, %lld] %s (%s of expert %lld of %s %s)",
           (long long)rows, (long long)fs[2],
           tpx__model_dtype_st_name((tpx_dtype)p->dtype),
           part == PART_GATE ? "rows [0, I)"
           : part == PART_UP ? "rows [I, 2I)"
                             : "the whole",
           (long long)e, tpx__format_shape(b, sizeof b, fs, 3),
           tpx__model_dtype_st_name((tpx_dtype)p->dtype));
  if (e >= fs[0] || ndim != 2 || shape[0] != rows || shape[1] != fs[2] ||
      dtype != (tpx_dtype)p->dtype || (part != PART_DOWN && fs[1] % 2 != 0))
    return mismatch(file, name, shape, ndim, dtype, fused, want, err);
  int dup = 0;
  tpx_status st = count_slice(f, model, pi,
                              part == PART_DOWN ? e : 2 * e + (part == PART_UP),
                              part == PART_DOWN ? fs[0] : 2 * fs[0], &dup, err);
  if (st == TPX_OK && dup)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' gives %s of expert %lld of '%s' a "
                         "second time (another checkpoint tensor already "
                         "did)",
                         file, name,
                         part == PART_GATE ? "the gate_proj rows"
                         : part == PART_UP ? "the up_proj rows"
                                           : "the down_proj",
                         (long long)e, fused);
  if (st == TPX_OK)
    *folded = 1;
  return st;
}

tpx_status tpx__expert_fold_finish(const tpx__expert_fold *f,
                                   const tpx_model *model, tpx_error *err) {
  for (size_t i = 0; f->counts && i < f->n && i < model->num_params; i++) {
    if (f->counts[i] == 0)
      continue;
    const tpx__param *p = &model->params[i];
    size_t first = 0;
    int64_t declared = tpx__expert_fold_rules_find(model, (int64_t)i, &first);
    if (declared > 0) {
      int64_t k = 0;
      while (k < declared && f->seen[i][k]) k++;
      if (f->counts[i] == declared)
        continue;
      return tpx_error_set(err, TPX_VALIDATION,
                           "the checkpoint holds %lld of the %lld source "
                           "tensors of '%s'; '%s' is missing",
                           (long long)f->counts[i], (long long)declared, p->fqn,
                           model->fold_srcs[first + (size_t)k].name);
    }
    int gate_up = strcmp(p->fqn + p->name_off, "gate_up_proj") == 0;
    int64_t want = model->dims[p->dims] * (gate_up ? 2 : 1);
    if (f->counts[i] != want)
      return tpx_error_set(
          err, TPX_VALIDATION,
          "the checkpoint holds %lld per-expert tensors for '%s', which "
          "needs %lld (%s for each of its %lld experts)",
          (long long)f->counts[i], p->fqn, (long long)want,
          gate_up ? "gate_proj and up_proj" : "down_proj",
          (long long)model->dims[p->dims]);
  }
  return TPX_OK;
}

void tpx__expert_fold_free(tpx__expert_fold *f) {
  if (f == NULL)
    return;
  for (size_t i = 0; f->seen && i < f->n; i++) free(f->seen[i]);
  free(f->seen);
  free(f->counts);
  memset(f, 0, sizeof *f);
}

const char *tpx__expert_fold_note(const tpx_model *model) {
  for (size_t i = 0; model && i < model->num_params; i++) {
    const tpx__param *p = &model->params[i];
    const char *n = p->fqn;
    size_t len = strlen(n);
    if (p->ndim == 3 && (ends_with(n, len, ".experts.gate_up_proj") ||
                         ends_with(n, len, ".experts.down_proj")))
      return "experts are fused 3-D parameters (transformers 5); a "
             "checkpoint's per-expert tensors map onto them: "
             "experts.{e}.gate_proj.weight -> experts.gate_up_proj[e, 0:I], "
             "experts.{e}.up_proj.weight -> experts.gate_up_proj[e, I:2I], "
             "experts.{e}.down_proj.weight -> experts.down_proj[e] (Mixtral "
             "checkpoints: block_sparse_moe.experts.{e}.w1 / w3 / w2, and "
             "block_sparse_moe.gate -> mlp.gate); TP leaves them replicated "
             "and FSDP shards dim 0, the expert dim";
  }
  return NULL;
}

const char *tpx__fold_sources_note(const tpx_model *model) {
  for (size_t i = 0; model && i < model->num_fold_srcs; i++)
    if (model->fold_srcs[i].transpose)
      return "some parameters are stored in the checkpoint as several "
             "tensors, transposed (declared by the family plugin's "
             "skeleton; e.g. grouped experts [E, H, 2I] from per-expert "
             "[I, H] tensors: a tensor's box in the parameter holds it with "
             "its last two dims swapped): `tpx shard` reads each rank's "
             "slice from them and transposes it, `tpx merge` writes them "
             "back as they were, byte for byte";
  return NULL;
}

int64_t tpx__expert_fold_num_sources(const tpx_model *model, int64_t param,
                                     int scheme) {
  if (model == NULL || param < 0 || (size_t)param >= model->num_params)
    return 0;
  if (scheme == TPX__EXPERT_NAMES_RULES) {
    size_t first;
    return tpx__expert_fold_rules_find(model, param, &first);
  }
  const tpx__param *p = &model->params[param];
  const char *n = p->fqn;
  size_t len = strlen(n);
  const int64_t *fs = model->dims + p->dims;
  if (scheme == TPX__EXPERT_NAMES_MIXTRAL &&
      ends_with(n, len, ".mlp.gate.weight"))
    return 1;
  if (p->ndim != 3 ||
      (scheme != TPX__EXPERT_NAMES_HF && scheme != TPX__EXPERT_NAMES_MIXTRAL))
    return 0;
  if (ends_with(n, len, ".mlp.experts.gate_up_proj"))
    return fs[1] % 2 == 0 ? 2 * fs[0] : 0;
  if (ends_with(n, len, ".mlp.experts.down_proj"))
    return fs[0];
  return 0;
}

tpx_status tpx__expert_fold_source(const tpx_model *model, int64_t param,
                                   int scheme, int64_t k, char *name,
                                   size_t size, tpx_slice *box, int *transpose,
                                   tpx_error *err) {
  if (transpose)
    *transpose = 0;
  int64_t count = tpx__expert_fold_num_sources(model, param, scheme);
  if (k < 0 || k >= count)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "expert fold: source %lld of parameter %lld is out "
                         "of range",
                         (long long)k, (long long)param);
  if (scheme == TPX__EXPERT_NAMES_RULES) {
    size_t first = 0;
    tpx__expert_fold_rules_find(model, param, &first);
    const struct tpx__fold_src *src = &model->fold_srcs[first + (size_t)k];
    *box = src->box;
    if (transpose)
      *transpose = src->transpose;
    size_t nl = strlen(src->name);
    if (nl + 1 > size)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "expert fold: the source name '%s' is too long",
                           src->name);
    memcpy(name, src->name, nl + 1);
    return TPX_OK;
  }
  const tpx__param *p = &model->params[param];
  const char *n = p->fqn;
  size_t len = strlen(n);
  const int64_t *fs = model->dims + p->dims;
  memset(box, 0, sizeof *box);
  box->ndim = p->ndim;
  for (int d = 0; d < p->ndim; d++) box->length[d] = fs[d];
  int w;
  if (ends_with(n, len, ".mlp.gate.weight")) { /* Mixtral's router */
    size_t plen = len - strlen(".mlp.gate.weight");
    w = snprintf(name, size, "%.*s%s", (int)plen, n, router_suffix);
  } else {
    int gate_up = ends_with(n, len, ".mlp.experts.gate_up_proj");
    int64_t e = gate_up ? k / 2 : k;
    part_t part = !gate_up ? PART_DOWN : k % 2 == 0 ? PART_GATE : PART_UP;
    int64_t rows = gate_up ? fs[1] / 2 : fs[1];
    box->offset[0] = e;
    box->length[0] = 1;
    box->offset[1] = part == PART_UP ? rows : 0;
    box->length[1] = rows;
    /* "<p>.mlp" -> "<p>.block_sparse_moe" for Mixtral's names. */
    size_t plen = len - strlen(gate_up ? ".mlp.experts.gate_up_proj"
                                       : ".mlp.experts.down_proj");
    w = snprintf(name, size, "%.*s%s.experts.%lld.%s.weight", (int)plen, n,
                 scheme == TPX__EXPERT_NAMES_MIXTRAL ? bsm_suffix : ".mlp",
                 (long long)e, proj_name(part, scheme));
  }
  if (w < 0 || (size_t)w >= size)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "expert fold: the source name of '%s' is too long", n);
  return TPX_OK;
}
