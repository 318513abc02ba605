/* apply.c — what torch's parallelize_module does to parameters
 * (spec/torch-semantics.md §2): the TP placement of every parameter, plus the
 * diagnostics of application: unsupported module kinds, tied parameters that
 * end with two placements, uneven shards, and parameters replicated by
 * omission.
 *
 * Placements only; the module transitions are transitions.c, the FSDP dims
 * fsdp.c. At tp == 1 Automodel skips parallelize_module, so nothing here
 * shards (the TP column stays Replicate) but matching still reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_view.h"
#include "shard/shard_internal.h"
#include "tpx/match.h"

typedef enum {
  FAM_NONE = 0,
  FAM_COLWISE,
  FAM_ROWWISE,
  FAM_SEQUENCE,
  FAM_PREPARE,
} family_t;

static family_t family_of(tpx_style_kind k) {
  switch (k) {
  case TPX_STYLE_COLWISE:
    return FAM_COLWISE;
  case TPX_STYLE_ROWWISE:
  case TPX_STYLE_VOCAB_PARALLEL_EMBEDDING:
  case TPX_STYLE_GEMMA4_VOCAB_PARALLEL_EMBEDDING:
  case TPX_STYLE_GEMMA4_ROWWISE_PARALLEL:
    return FAM_ROWWISE;
  case TPX_STYLE_SEQUENCE_PARALLEL:
  case TPX_STYLE_ROTARY_EMBED_PARALLEL:
  case TPX_STYLE_QK_NORM_SEQUENCE_PARALLEL:
  case TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION:
    return FAM_SEQUENCE;
  case TPX_STYLE_PREPARE_MODULE_INPUT:
  case TPX_STYLE_PREPARE_MODULE_OUTPUT:
    return FAM_PREPARE;
  default:
    return FAM_NONE;
  }
}

/* Per-entry key and style come from sh->entry_keys / entry_styles, read
 * from the plan once (tpx_plan_get copies a whole style: too slow per
 * parameter for a million of them). */
static const char *entry_key(const tpx_sharding *sh, int64_t e) {
  if (e < 0 || (size_t)e >= sh->num_entries) return NULL;
  return sh->entry_keys[e];
}

static const tpx_style *entry_style(const tpx_sharding *sh, int64_t e) {
  if (e < 0 || (size_t)e >= sh->num_entries) return NULL;
  return &sh->entry_styles[e];
}

static tpx_status diag_oom(tpx_status st, tpx_error *err) {
  if (st == TPX_OK) return TPX_OK;
  return tpx_error_set(err, st, "out of memory adding a diagnostic");
}

tpx_placement tpx__tp_placement(const tpx_sharding *sh, int64_t p, int ndim) {
  if (sh->tp_dim < 0) return tpx_placement_replicate();
  tpx_placement pl = sh->placements[p * sh->ndim + sh->tp_dim];
  tpx_placement norm;
  if (tpx_placement_normalize(pl, ndim, &norm, NULL) == TPX_OK) return norm;
  return pl;
}

/* Depth-first: module_cover[m] = nearest ancestor-or-self with a
 * distribute_module style (colwise / rowwise / sequence families). Nested
 * styled modules are reported: torch distributes the inner one twice.
 * keyed[m] = 1 when module m or an ancestor is matched by any plan key
 * (prepare_module_* included): such parameters are not "omitted" by the
 * plan, as in matching (tpx/match.h). */
static tpx_status cover_one(tpx_sharding *sh, int64_t m, uint8_t *keyed,
                            int *nested_reported, tpx_error *err) {
  const tpx_model *model = sh->model;
  int64_t parent = tpx__mv_parent(model, m);
  int64_t inherited = parent >= 0 ? sh->module_cover[parent] : -1;
  /* keyed, in the same pass (parents come first either way). */
  keyed[m] = sh->module_entry[m] >= 0 || (parent >= 0 && keyed[parent]);
  int64_t own = -1;
  if (sh->module_entry[m] >= 0) {
    const tpx_style *s = entry_style(sh, sh->module_entry[m]);
    family_t f = s ? family_of(s->kind) : FAM_NONE;
    if (f == FAM_COLWISE || f == FAM_ROWWISE || f == FAM_SEQUENCE) own = m;
  }
  sh->module_cover[m] = own >= 0 ? own : inherited;
  if (own < 0 || inherited < 0 || !sh->tp_applied || *nested_reported)
    return TPX_OK;
  *nested_reported = 1;
  return diag_oom(
      tpx_diag_add(sh->diags, TPX_DIAG_ERROR, "nested-styles",
                   tpx_model_module_fqn(model, m),
                   "style either the parent or its submodules, not both",
                   "module '%s' (key '%s') lies inside module '%s' (key "
                   "'%s'), which is already styled; torch's distribute_module "
                   "would redistribute its parameters a second time",
                   tpx_model_module_fqn(model, m),
                   entry_key(sh, sh->module_entry[m]),
                   tpx_model_module_fqn(model, inherited),
                   entry_key(sh, sh->module_entry[inherited])),
      err);
}

static tpx_status compute_cover(tpx_sharding *sh, uint8_t *keyed,
                                tpx_error *err) {
  const tpx_model *model = sh->model;
  size_t n = sh->num_modules;
  int nested_reported = 0;
  tpx_status st = TPX_OK;
  if (sh->topo_modules) { /* parents first: one sequential pass */
    for (size_t m = 0; m < n && st == TPX_OK; m++)
      st = cover_one(sh, (int64_t)m, keyed, &nested_reported, err);
    return st;
  }
  int64_t *stack = malloc((n ? n : 1) * sizeof *stack);
  if (!stack) return tpx__shard_oom(err, "module stack");
  size_t top = 0;
  stack[top++] = 0;
  while (top && st == TPX_OK) {
    int64_t m = stack[--top];
    st = cover_one(sh, m, keyed, &nested_reported, err);
    size_t nc = tpx_model_module_num_children(model, m);
    for (size_t i = nc; i-- > 0;) {
      int64_t c = tpx_model_module_child(model, m, i);
      if (c >= 0 && (size_t)c < n && top < n) stack[top++] = c;
    }
  }
  free(stack);
  return st;
}

/* Error for a colwise/rowwise style on a module that is neither Linear nor
 * Embedding, once per entry; and entry_kinds. */
static tpx_status check_kinds(tpx_sharding *sh, tpx_error *err) {
  uint8_t *seen = calloc(sh->num_entries ? sh->num_entries : 1, 1);
  if (!seen) return tpx__shard_oom(err, "entry flags");
  tpx_status st = TPX_OK;
  for (size_t m = 0; m < sh->num_modules && st == TPX_OK; m++) {
    int64_t e = sh->module_entry[m];
    if (e < 0) continue;
    tpx_module_kind k =
        tpx__mv_kind(sh->model, (int64_t)m);
    /* Which module classes carry the entry, for its transitions. */
    sh->entry_kinds[e] |= k == TPX_MODULE_EMBEDDING ? 2 : 1;
    if (seen[e]) continue;
    const tpx_style *s = entry_style(sh, e);
    family_t f = s ? family_of(s->kind) : FAM_NONE;
    if (f != FAM_COLWISE && f != FAM_ROWWISE) continue;
    if (k == TPX_MODULE_LINEAR || k == TPX_MODULE_EMBEDDING) continue;
    seen[e] = 1;
    st = diag_oom(
        tpx_diag_add(sh->diags, TPX_DIAG_ERROR, "style-unsupported-module",
                     entry_key(sh, e),
                     "narrow the key to the Linear/Embedding submodules, or "
                     "use a sequence_parallel / prepare_module_* style",
                     "plan key '%s' applies %s to module '%s' of kind %s; "
                     "torch's ColwiseParallel/RowwiseParallel support only "
                     "nn.Linear and nn.Embedding (NotImplementedError)",
                     entry_key(sh, e), tpx_style_kind_name(s->kind),
                     tpx_model_module_fqn(sh->model, (int64_t)m),
                     tpx_module_kind_name(k)),
        err);
  }
  free(seen);
  return st;
}

/* Records, per entry, the first parameter held below a styled module whose
 * partition function cannot take it (torch registers dotted names / reads a
 * missing .weight). One diagnostic per entry. */
typedef struct {
  uint8_t *flag;
} once_t;

static tpx_status report_child_param(tpx_sharding *sh, once_t *once,
                                     int64_t e, const char *fqn,
                                     int64_t styled, const char *why) {
  if (once->flag[e]) return TPX_OK;
  once->flag[e] = 1;
  return tpx_diag_add(
      sh->diags, TPX_DIAG_ERROR, "style-unsupported-module", fqn,
      "apply the style to the leaf Linear/Embedding/norm modules instead",
      "parameter '%s' lies in a submodule of '%s' (key '%s'); %s", fqn,
      tpx_model_module_fqn(sh->model, styled), entry_key(sh, e), why);
}

/* The TP placement torch gives parameter `pi` under style `s` applied to
 * module `styled` of kind `k`. */
static tpx_placement tp_placement_for(const tpx_style *s, tpx_module_kind k,
                                      const char *name, int own,
                                      int *child_problem) {
  family_t f = family_of(s->kind);
  *child_problem = 0;
  if (f == FAM_COLWISE || (f == FAM_ROWWISE && k == TPX_MODULE_EMBEDDING)) {
    /* named_parameters() of the styled module is recursive, so a child's
     * parameter would be registered under a dotted name (KeyError). */
    if (!own) *child_problem = 1;
    if (f == FAM_COLWISE)
      return tpx_placement_shard(k == TPX_MODULE_EMBEDDING ? 1 : 0);
    return tpx_placement_shard(0);
  }
  if (f == FAM_ROWWISE) {
    /* Linear: the partition fn runs on every submodule and reads .weight. */
    if (strcmp(name, "weight") == 0) return tpx_placement_shard(1);
    return tpx_placement_replicate();
  }
  if (f == FAM_SEQUENCE && !own) *child_problem = 1;
  return tpx_placement_replicate();
}

/* ---- uneven shards, aggregated per (entry, name, dim, size) ---- */
typedef struct {
  int64_t entry;
  int64_t param;
  int dim;
  int64_t size;
  int64_t count;
  char name[64];
} uneven_t;

#define UNEVEN_MAX 256

static tpx_status emit_uneven(tpx_sharding *sh, const uneven_t *u,
                              size_t nu, tpx_error *err) {
  for (size_t i = 0; i < nu; i++) {
    tpx_param_info pi;
    if (tpx_model_param(sh->model, u[i].param, &pi, NULL) != TPX_OK) continue;
    int64_t c = (u[i].size + sh->tp - 1) / sh->tp;
    char sizes[160];
    size_t o = 0;
    sizes[0] = '\0';
    for (int64_t r = 0; r < sh->tp && o < sizeof sizes - 8; r++) {
      int64_t off = r * c < u[i].size ? r * c : u[i].size;
      int64_t len = u[i].size - off < c ? u[i].size - off : c;
      if (r == 8 && sh->tp > 9) {
        o += (size_t)snprintf(sizes + o, sizeof sizes - o, ", ...");
        break;
      }
      o += (size_t)snprintf(sizes + o, sizeof sizes - o, "%s%lld",
                            r ? "," : "", (long long)len);
    }
    char more[64] = "";
    if (u[i].count > 1)
      snprintf(more, sizeof more, " (and %lld more like it)",
               (long long)(u[i].count - 1));
    /* What one unit along the split dim is, in words. */
    const char *unit = pi.ndim == 1      ? "elements"
                       : u[i].dim == 0   ? "rows"
                       : u[i].dim == 1   ? "columns"
                                         : "slices";
    tpx_status st = tpx_diag_add(
        sh->diags, TPX_DIAG_WARNING, "uneven-shard", pi.fqn,
        "choose a tp size that divides the dim, or pad the tensor",
        "parameter '%s'%s: dim %d of size %lld is not divisible by tp=%lld; "
        "torch.chunk gives the ranks %s %s (the last ones short or empty), "
        "all-gathers pad to %lld, and from_local without a shape assumes even "
        "shards",
        pi.fqn, more, u[i].dim, (long long)u[i].size, (long long)sh->tp, sizes,
        unit, (long long)c);
    if (st != TPX_OK) return diag_oom(st, err);
  }
  return TPX_OK;
}

/* ---- replicated by omission ---- */

/* FQN with every all-digit atom replaced by '*'. */
static size_t generalize(const char *fqn, char *out, size_t size) {
  size_t o = 0;
  const char *p = fqn;
  while (*p && o + 2 < size) {
    const char *q = p;
    int digits = 1;
    while (*q && *q != '.') {
      if (*q < '0' || *q > '9') digits = 0;
      q++;
    }
    if (q == p) digits = 0;
    if (digits) {
      out[o++] = '*';
    } else {
      size_t len = (size_t)(q - p);
      if (o + len + 1 >= size) len = size - o - 2;
      memcpy(out + o, p, len);
      o += len;
    }
    if (*q == '.') out[o++] = '.';
    p = *q ? q + 1 : q;
  }
  out[o] = '\0';
  return o;
}

size_t tpx__shard_generalize_fqn(const char *fqn, char *out, size_t size) {
  return generalize(fqn, out, size);
}

/* Hash of (local name, ndim, shape): the prefilter for "same name and
 * shape"; equal hashes are confirmed field by field. */
static uint64_t shape_hash(const char *name, int ndim, const int64_t *shape) {
  uint64_t h = 1469598103934665603ULL;
  for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ULL;
  h = (h ^ (uint64_t)ndim) * 1099511628211ULL;
  for (int d = 0; d < ndim; d++)
    h = (h ^ (uint64_t)shape[d]) * 1099511628211ULL;
  return h ? h : 1;
}

static int same_name_shape(const tpx_param_info *a, const tpx_param_info *b) {
  if (a->ndim != b->ndim || strcmp(a->name, b->name) != 0) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

static int sharded_on_tp(const tpx_sharding *sh, int64_t p) {
  tpx_placement pl = sh->placements[p * sh->ndim + sh->tp_dim];
  return pl.kind == TPX_SHARD || pl.kind == TPX_STRIDED_SHARD;
}

/* Matching (tpx/match.h) already warns about unplanned siblings of planned
 * modules; one warning per parameter is enough. */
static int already_reported(const tpx_diag_list *diags, const char *fqn,
                            const char *general) {
  char quoted[600];
  snprintf(quoted, sizeof quoted, "'%s'", fqn);
  for (size_t i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    if (tpx_diag_get(diags, i, &d, NULL) != TPX_OK ||
        strcmp(d.code, "replicated-by-omission") != 0)
      continue;
    if ((d.subject && (strcmp(d.subject, general) == 0 ||
                       strcmp(d.subject, fqn) == 0)) ||
        (d.message && strstr(d.message, quoted)))
      return 1;
  }
  return 0;
}

/* A parameter no key covers, while a same-named, same-shaped parameter at
 * the same place in another layer, or in a sibling module of the same
 * parent, is TP-sharded: likely a missing plan key. `phash` is nonzero for
 * the parameters compared (0 for aliases, scalars and key-covered ones);
 * this fills in shape_hash for the candidates. Sharded parameters are
 * hashed only when some candidate has their rank and first dim (`shapes`,
 * a one-word filter): a million sharded experts next to a few replicated
 * norms then cost a compare each. */
static int shape_bit(int ndim, const int64_t *shape) {
  uint64_t h = (uint64_t)ndim * 0x9e3779b97f4a7c15ULL ^
               (uint64_t)shape[0] * 0xc2b2ae3d27d4eb4fULL;
  return (int)(h >> 58);
}

static uint64_t param_hash(const tpx_model *model, int64_t p) {
  const tpx__param *r = tpx__mv_param(model, p);
  return shape_hash(tpx__mv_param_name(r), r->ndim, tpx__mv_shape(model, r));
}

static tpx_status omission(tpx_sharding *sh, uint64_t *phash,
                           tpx_error *err) {
  const tpx_model *model = sh->model;
  size_t np = sh->num_params;
  tpx_status st = TPX_OK;
  int64_t *cand = NULL, *next = NULL, *example = NULL, *slots = NULL;
  size_t nc = 0, nslots = 0;
  char gen_a[512], gen_b[512];
  for (size_t p = 0; p < np; p++)
    if (sh->param_styled[p] < 0 && phash[p]) nc++;
  if (nc == 0) return TPX_OK;
  nslots = 16;
  while (nslots < nc * 2) nslots *= 2;
  cand = malloc(nc * sizeof *cand);
  next = malloc(nc * sizeof *next);
  example = malloc(nc * sizeof *example);
  slots = malloc(nslots * sizeof *slots);
  if (!cand || !next || !example || !slots) {
    st = tpx__shard_oom(err, "omission candidates");
    goto done;
  }
  for (size_t i = 0; i < nslots; i++) slots[i] = -1;
  nc = 0;
  /* Candidates chained per hash slot (slots hold the chain head). */
  uint64_t shapes = 0;
  for (size_t p = 0; p < np; p++) {
    if (sh->param_styled[p] >= 0 || !phash[p]) continue;
    const tpx__param *r = tpx__mv_param(model, (int64_t)p);
    shapes |= (uint64_t)1 << shape_bit(r->ndim, tpx__mv_shape(model, r));
    phash[p] = param_hash(model, (int64_t)p);
    size_t s = (size_t)phash[p] & (nslots - 1);
    cand[nc] = (int64_t)p;
    example[nc] = -1;
    next[nc] = slots[s];
    slots[s] = (int64_t)nc;
    nc++;
  }
  for (size_t p = 0; p < np; p++) {
    if (sh->param_styled[p] < 0 || !phash[p] || !sharded_on_tp(sh, (int64_t)p))
      continue;
    const tpx__param *r = tpx__mv_param(model, (int64_t)p);
    if (!((shapes >> shape_bit(r->ndim, tpx__mv_shape(model, r))) & 1))
      continue;
    uint64_t h = param_hash(model, (int64_t)p);
    int64_t c = slots[(size_t)h & (nslots - 1)];
    if (c < 0) continue;
    tpx_param_info pi;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK) continue;
    int64_t sparent = tpx_model_module_parent(model, pi.module);
    int have_gen = 0;
    for (; c >= 0; c = next[c]) {
      if (example[c] >= 0 || phash[cand[c]] != h) continue;
      tpx_param_info ci;
      if (tpx_model_param(model, cand[c], &ci, NULL) != TPX_OK ||
          !same_name_shape(&pi, &ci))
        continue;
      int hit = ci.module != pi.module &&
                tpx_model_module_parent(model, ci.module) == sparent;
      if (!hit) {
        if (!have_gen) {
          generalize(pi.fqn, gen_a, sizeof gen_a);
          have_gen = 1;
        }
        generalize(ci.fqn, gen_b, sizeof gen_b);
        hit = strcmp(gen_a, gen_b) == 0; /* same place in another layer */
      }
      if (hit) example[c] = (int64_t)p;
    }
  }
  /* One warning per generalized name, with the count of its parameters. */
  for (size_t c = 0; c < nc && st == TPX_OK; c++) {
    if (example[c] < 0) continue;
    tpx_param_info ci, si;
    if (tpx_model_param(model, cand[c], &ci, NULL) != TPX_OK ||
        tpx_model_param(model, example[c], &si, NULL) != TPX_OK)
      continue;
    generalize(ci.fqn, gen_b, sizeof gen_b);
    int64_t count = 1;
    for (size_t k = c + 1; k < nc; k++) {
      if (example[k] < 0) continue;
      tpx_param_info ki;
      if (tpx_model_param(model, cand[k], &ki, NULL) != TPX_OK) continue;
      generalize(ki.fqn, gen_a, sizeof gen_a);
      if (strcmp(gen_a, gen_b) == 0) {
        count++;
        example[k] = -1; /* reported with this one */
      }
    }
    if (already_reported(sh->diags, ci.fqn, gen_b)) continue;
    char pl[48];
    tpx_placement_format(sh->placements[example[c] * sh->ndim + sh->tp_dim],
                         pl, sizeof pl);
    char more[64] = "";
    if (count > 1)
      snprintf(more, sizeof more, " (%lld parameters like it)",
               (long long)count);
    st = diag_oom(
        tpx_diag_add(sh->diags, TPX_DIAG_WARNING, "replicated-by-omission",
                     ci.fqn,
                     "add a plan key for its module if it should be sharded "
                     "like its siblings (or mark it intentionally replicated)",
                     "parameter '%s'%s is replicated because no plan key "
                     "covers it, while '%s' of the same name and shape is "
                     "sharded (%s on tp, key '%s')",
                     ci.fqn, more, si.fqn, pl,
                     entry_key(sh, sh->param_entry[example[c]])),
        err);
  }
done:
  free(cand);
  free(next);
  free(example);
  free(slots);
  return st;
}

/* ---- tied parameters ----
 *
 * After parallelize_module, Automodel's ensure_tied_lm_head re-ties the
 * alias (lm_head.weight) to the target's (the embedding's) tensor, so the
 * alias always ends with the target's placement. Two styles that give the
 * shared weight different placements are an error: one module is left with
 * a weight in the wrong layout. When only one side is styled the re-tie is
 * what the model gets, which works only if that module's forward copes with
 * a DTensor / plain-tensor mix (Gemma4 E-series computes its vocab-sharded
 * logits itself): a warning. */
static tpx_status tied_one_styled(tpx_sharding *sh, size_t p,
                                  const tpx_param_info *pi,
                                  const tpx_param_info *ti, tpx_placement a,
                                  tpx_placement b) {
  int alias_styled = sh->param_styled[p] >= 0;
  char sa[48], sb[48];
  tpx_placement_format(a, sa, sizeof sa);
  tpx_placement_format(b, sb, sizeof sb);
  const tpx_model *model = sh->model;
  if (!alias_styled) {
    /* The target is styled: the unstyled alias inherits its DTensor. */
    const char *kb = entry_key(sh, sh->param_entry[pi->tied_to]);
    const char *mod = tpx_model_module_fqn(model, pi->module);
    return tpx_diag_add(
        sh->diags, TPX_DIAG_WARNING, "tied-embeddings", pi->fqn,
        "if the model's forward does not handle the sharded weight itself, "
        "give the tied module a TP style that shards it the same way (e.g. a "
        "colwise lm_head for a Shard(0) embedding), or untie the weights",
        "tied parameters '%s' (no TP style) and '%s' (%s on tp, key '%s') "
        "are one tensor: torch re-ties '%s' to the styled DTensor after "
        "parallelize_module, so it inherits %s; module '%s' has no TP style, "
        "so its forward gets a sharded DTensor weight with plain-tensor "
        "inputs, and torch raises on the mixed Tensor/DTensor in F.linear "
        "unless the model's forward handles it (as Gemma4 E-series does, "
        "computing vocab-sharded logits itself)",
        pi->fqn, ti->fqn, sb, kb ? kb : "none", pi->fqn, sb,
        mod ? mod : "");
  }
  /* The alias is styled, the target is not: the re-tie hands the alias the
   * target's plain tensor and undoes the alias's sharding. */
  const char *ka = entry_key(sh, sh->param_entry[p]);
  const char *mod = tpx_model_module_fqn(model, pi->module);
  return tpx_diag_add(
      sh->diags, TPX_DIAG_WARNING, "tied-embeddings", pi->fqn,
      "give the embedding a style that shards the shared weight like the "
      "tied module's (e.g. vocab_parallel_embedding, Shard(0), with a "
      "colwise lm_head), or untie the weights (tie_word_embeddings: false)",
      "tied parameters '%s' (%s on tp, key '%s') and '%s' (no TP style, %s) "
      "are one tensor: torch re-ties '%s' to the unstyled '%s' after "
      "parallelize_module, so it ends %s and the sharding of key '%s' is "
      "undone; module '%s' keeps its TP hooks, so its forward gets DTensor "
      "inputs with a plain-tensor weight, and torch raises on the mixed "
      "Tensor/DTensor in F.linear unless the model's forward handles it",
      pi->fqn, sa, ka ? ka : "none", ti->fqn, sb, pi->fqn, ti->fqn, sb,
      ka ? ka : "none", mod ? mod : "");
}

static tpx_status check_tied(tpx_sharding *sh, tpx_error *err) {
  if (sh->tp_dim < 0) return TPX_OK;
  for (size_t t = 0; t < sh->num_tied; t++) {
    size_t p = (size_t)sh->tied_params[t];
    tpx_param_info pi, ti;
    if (tpx_model_param(sh->model, (int64_t)p, &pi, NULL) != TPX_OK) continue;
    if (pi.tied_to < 0) continue;
    if (tpx_model_param(sh->model, pi.tied_to, &ti, NULL) != TPX_OK) continue;
    tpx_placement a = tpx__tp_placement(sh, (int64_t)p, pi.ndim);
    tpx_placement b = tpx__tp_placement(sh, pi.tied_to, ti.ndim);
    int alias_styled = sh->param_styled[p] >= 0;
    int target_styled = sh->param_styled[pi.tied_to] >= 0;
    if (!tpx_placement_equal(a, b) && alias_styled != target_styled) {
      tpx_status st = tied_one_styled(sh, p, &pi, &ti, a, b);
      if (st != TPX_OK) return diag_oom(st, err);
    } else if (!tpx_placement_equal(a, b)) {
      char sa[48], sb[48];
      tpx_placement_format(a, sa, sizeof sa);
      tpx_placement_format(b, sb, sizeof sb);
      const char *ka = entry_key(sh, sh->param_entry[p]);
      const char *kb = entry_key(sh, sh->param_entry[pi.tied_to]);
      tpx_status st = tpx_diag_add(
          sh->diags, TPX_DIAG_ERROR, "tied-embeddings", pi.fqn,
          "give both modules styles that shard the shared weight the same "
          "way (e.g. a rowwise / vocab_parallel_embedding embedding, Shard(0), "
          "with a colwise lm_head, Shard(0)), or untie the weights "
          "(tie_word_embeddings: false)",
          "tied parameters '%s' (%s on tp, key %s%s%s) and '%s' (%s on tp, "
          "key %s%s%s) are one tensor but get different placements; torch "
          "re-ties them after parallelize_module, leaving one module with a "
          "weight in the wrong layout",
          pi.fqn, sa, ka ? "'" : "", ka ? ka : "none", ka ? "'" : "", ti.fqn,
          sb, kb ? "'" : "", kb ? kb : "none", kb ? "'" : "");
      if (st != TPX_OK) return diag_oom(st, err);
    }
    /* ensure_tied_lm_head: the alias ends up holding the target's tensor. */
    sh->placements[p * sh->ndim + sh->tp_dim] =
        sh->placements[pi.tied_to * sh->ndim + sh->tp_dim];
  }
  return TPX_OK;
}

tpx_status tpx__apply_tp(tpx_sharding *sh, tpx_error *err) {
  const tpx_model *model = sh->model;
  tpx_match *match = NULL;
  tpx_status st = tpx_match_plan(sh->plan, model, &match, sh->diags, err);
  if (st != TPX_OK) return st;
  for (size_t m = 0; m < sh->num_modules; m++)
    sh->module_entry[m] = tpx_match_module_entry(match, (int64_t)m);
  tpx_match_destroy(match);

  if (!sh->tp_applied) {
    /* parallelize_module does not run: keep the match for the report but
     * leave every parameter a plain tensor. */
    for (size_t p = 0; p < sh->num_params; p++) {
      sh->param_entry[p] = -1;
      sh->param_styled[p] = -1;
    }
    for (size_t m = 0; m < sh->num_modules; m++) sh->module_cover[m] = -1;
    return TPX_OK;
  }

  uint8_t *keyed = malloc(sh->num_modules ? sh->num_modules : 1);
  if (!keyed) return tpx__shard_oom(err, "module flags");
  st = compute_cover(sh, keyed, err);
  if (st == TPX_OK) st = check_kinds(sh, err);
  if (st != TPX_OK) {
    free(keyed);
    return st;
  }

  once_t once = {calloc(sh->num_entries ? sh->num_entries : 1, 1)};
  if (!once.flag) {
    free(keyed);
    return tpx__shard_oom(err, "entry flags");
  }
  uint64_t *phash = malloc((sh->num_params ? sh->num_params : 1) *
                           sizeof *phash);
  if (!phash) {
    free(once.flag);
    free(keyed);
    return tpx__shard_oom(err, "parameter hashes");
  }
  uneven_t *uneven = malloc(UNEVEN_MAX * sizeof *uneven);
  size_t nu = 0;
  if (!uneven || !keyed) {
    free(once.flag);
    free(phash);
    free(uneven);
    free(keyed);
    return tpx__shard_oom(err, "uneven list");
  }
  size_t cap_tied = 0;
  for (size_t p = 0; p < sh->num_params && st == TPX_OK; p++) {
    /* The record in place (no tpx_param_info copy per parameter). */
    const tpx__param *pi = tpx__mv_param(model, (int64_t)p);
    const int64_t *pshape = tpx__mv_shape(model, pi);
    const char *pname = tpx__mv_param_name(pi);
    int pndim = pi->ndim;
    int64_t styled = sh->module_cover[pi->module];
    sh->param_styled[p] = styled;
    sh->param_entry[p] = styled >= 0 ? sh->module_entry[styled] : -1;
    /* 0 = not compared: aliases, scalars, and unstyled parameters that a
     * key still covers (prepare_module_* on the module or an ancestor).
     * omission() hashes the rest, when needed. */
    phash[p] = (pi->tied_to >= 0 || pndim < 1 ||
                (styled < 0 && keyed[pi->module]))
                   ? 0
                   : 1;
    if (pi->tied_to >= 0) {
      if (sh->num_tied == cap_tied) {
        size_t cap = cap_tied ? cap_tied * 2 : 8;
        int64_t *t = realloc(sh->tied_params, cap * sizeof *t);
        if (!t) {
          st = tpx__shard_oom(err, "tied list");
          break;
        }
        sh->tied_params = t;
        cap_tied = cap;
      }
      sh->tied_params[sh->num_tied++] = (int64_t)p;
    }
    if (styled < 0) continue;
    int64_t e = sh->param_entry[p];
    const tpx_style *s = entry_style(sh, e);
    if (!s) continue;
    tpx_module_kind k = tpx__mv_kind(model, styled);
    family_t fam = family_of(s->kind);
    if ((fam == FAM_COLWISE || fam == FAM_ROWWISE) &&
        k != TPX_MODULE_LINEAR && k != TPX_MODULE_EMBEDDING)
      continue; /* torch raises (reported by check_kinds): nothing applied */
    int child_problem = 0;
    tpx_placement pl =
        tp_placement_for(s, k, pname, pi->module == styled, &child_problem);
    if (child_problem) {
      st = diag_oom(
          report_child_param(
              sh, &once, e, pi->fqn, styled,
              "its partition function iterates the module's parameters "
              "recursively and cannot register a dotted name (torch raises "
              "KeyError)"),
          err);
      if (st != TPX_OK) break;
    } else if (family_of(s->kind) == FAM_ROWWISE &&
               k != TPX_MODULE_EMBEDDING && pi->module != styled) {
      /* rowwise on a Linear runs on every submodule and reads .weight. */
      int64_t w = -1;
      char fq[1024];
      snprintf(fq, sizeof fq, "%s%sweight",
               tpx_model_module_fqn(model, pi->module),
               *tpx_model_module_fqn(model, pi->module) ? "." : "");
      w = tpx_model_find_param(model, fq);
      if (w < 0) {
        st = diag_oom(report_child_param(
                          sh, &once, e, pi->fqn, styled,
                          "its submodule has no 'weight', which rowwise's "
                          "partition function reads (torch raises "
                          "AttributeError)"),
                      err);
        if (st != TPX_OK) break;
      }
    }
    if (pl.kind == TPX_SHARD) {
      tpx_placement norm;
      if (tpx_placement_normalize(pl, pndim, &norm, NULL) != TPX_OK) {
        st = diag_oom(
            tpx_diag_add(sh->diags, TPX_DIAG_ERROR, "shard-dim-out-of-range",
                         pi->fqn, "use a style that fits the tensor's rank",
                         "parameter '%s' has %d dims but key '%s' (%s) shards "
                         "its dim %d; torch's distribute_tensor rejects it",
                         pi->fqn, pndim, entry_key(sh, e),
                         tpx_style_kind_name(s->kind), (int)pl.dim),
            err);
        pl = tpx_placement_replicate();
      } else if (pi->tied_to < 0 && pshape[norm.dim] % sh->tp != 0) {
        size_t i;
        for (i = 0; i < nu; i++)
          if (uneven[i].entry == e && uneven[i].dim == norm.dim &&
              uneven[i].size == pshape[norm.dim] &&
              strncmp(uneven[i].name, pname, sizeof uneven[i].name) == 0)
            break;
        if (i < nu) {
          uneven[i].count++;
        } else if (nu < UNEVEN_MAX) {
          uneven_t *u = &uneven[nu++];
          u->entry = e;
          u->param = (int64_t)p;
          u->dim = norm.dim;
          u->size = pshape[norm.dim];
          u->count = 1;
          snprintf(u->name, sizeof u->name, "%s", pname);
        }
      }
    }
    sh->placements[p * (size_t)sh->ndim + (size_t)sh->tp_dim] = pl;
  }
  free(once.flag);
  free(keyed);
  if (st == TPX_OK) st = check_tied(sh, err);
  if (st == TPX_OK) st = emit_uneven(sh, uneven, nu, err);
  free(uneven);
  if (st == TPX_OK) st = omission(sh, phash, err);
  free(phash);
  return st;
}
