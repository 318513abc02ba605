/* apply.c — what torch's parallelize_module does to parameters
 * (docs/SEMANTICS.md "Parallel styles"): the TP placement of every parameter,
 * plus the diagnostics of application: unsupported module kinds, tied
 * parameters that end with two placements, uneven shards, and parameters
 * replicated by omission.
 *
 * Placements only; the module transitions are transitions.c, the FSDP dims
 * fsdp.c. At tp == 1 Automodel skips parallelize_module, so nothing here
 * shards (the TP column stays Replicate) but matching still reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "model/model_view.h"
#include "plan/omission_view.h"
#include "shard/shard_internal.h"
#include "tpx/match.h"

/* Per-entry key and style come from sh->entry_keys / entry_styles, read
 * from the plan once (tpx_plan_get copies a whole style: too slow per
 * parameter for a million of them). */
static const char *entry_key(const tpx_sharding *sh, int64_t e) {
  if (e < 0 || (size_t)e >= sh->num_entries)
    return NULL;
  return sh->entry_keys[e];
}

static const tpx_style *entry_style(const tpx_sharding *sh, int64_t e) {
  if (e < 0 || (size_t)e >= sh->num_entries)
    return NULL;
  return &sh->entry_styles[e];
}

static tpx_status diag_oom(tpx_status st, tpx_error *err) {
  if (st == TPX_OK)
    return TPX_OK;
  return tpx_error_set(err, st, "out of memory adding a diagnostic");
}

tpx_placement tpx__tp_placement(const tpx_sharding *sh, int64_t p, int ndim) {
  if (sh->tp_dim < 0)
    return tpx_placement_replicate();
  tpx_placement pl = sh->placements[p * sh->ndim + sh->tp_dim];
  tpx_placement norm;
  if (tpx_placement_normalize(pl, ndim, &norm, NULL) == TPX_OK)
    return norm;
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
    if (s && tpx_style_kind_traits(s->kind).distributes_params)
      own = m;
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
  if (!stack)
    return tpx__shard_oom(err, "module stack");
  size_t top = 0;
  stack[top++] = 0;
  while (top && st == TPX_OK) {
    int64_t m = stack[--top];
    st = cover_one(sh, m, keyed, &nested_reported, err);
    size_t nc = tpx_model_module_num_children(model, m);
    for (size_t i = nc; i-- > 0;) {
      int64_t c = tpx_model_module_child(model, m, i);
      if (c >= 0 && (size_t)c < n && top < n)
        stack[top++] = c;
    }
  }
  free(stack);
  return st;
}

/* Error for a colwise/rowwise style on a module that is neither Linear nor
 * Embedding, once per entry; and entry_kinds. */
static tpx_status check_kinds(tpx_sharding *sh, tpx_error *err) {
  uint8_t *seen = calloc(sh->num_entries ? sh->num_entries : 1, 1);
  if (!seen)
    return tpx__shard_oom(err, "entry flags");
  tpx_status st = TPX_OK;
  for (size_t m = 0; m < sh->num_modules && st == TPX_OK; m++) {
    int64_t e = sh->module_entry[m];
    if (e < 0)
      continue;
    tpx_module_kind k = tpx__mv_kind(sh->model, (int64_t)m);
    /* Which module classes carry the entry, for its transitions. */
    sh->entry_kinds[e] |= k == TPX_MODULE_EMBEDDING ? 2 : 1;
    if (seen[e])
      continue;
    const tpx_style *s = entry_style(sh, e);
    if (!s || !tpx_style_kind_traits(s->kind).shards_params)
      continue;
    if (k == TPX_MODULE_LINEAR || k == TPX_MODULE_EMBEDDING)
      continue;
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

static tpx_status report_child_param(tpx_sharding *sh, once_t *once, int64_t e,
                                     const char *fqn, int64_t styled,
                                     const char *why) {
  if (once->flag[e])
    return TPX_OK;
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
  tpx_style_family f = tpx_style_kind_traits(s->kind).family;
  *child_problem = 0;
  if (f == TPX_STYLE_FAMILY_COLWISE ||
      (f == TPX_STYLE_FAMILY_ROWWISE && k == TPX_MODULE_EMBEDDING)) {
    /* named_parameters() of the styled module is recursive, so a child's
     * parameter would be registered under a dotted name (KeyError). */
    if (!own)
      *child_problem = 1;
    if (f == TPX_STYLE_FAMILY_COLWISE)
      return tpx_placement_shard(k == TPX_MODULE_EMBEDDING ? 1 : 0);
    return tpx_placement_shard(0);
  }
  if (f == TPX_STYLE_FAMILY_ROWWISE) {
    /* Linear: the partition fn runs on every submodule and reads .weight. */
    if (strcmp(name, "weight") == 0)
      return tpx_placement_shard(1);
    return tpx_placement_replicate();
  }
  if (f == TPX_STYLE_FAMILY_SEQUENCE && !own)
    *child_problem = 1;
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

static tpx_status emit_uneven(tpx_sharding *sh, const uneven_t *u, size_t nu,
                              tpx_error *err) {
  for (size_t i = 0; i < nu; i++) {
    tpx_param_info pi;
    if (tpx_model_param(sh->model, u[i].param, &pi, NULL) != TPX_OK)
      continue;
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
      o += (size_t)snprintf(sizes + o, sizeof sizes - o, "%s%lld", r ? "," : "",
                            (long long)len);
    }
    char more[64] = "";
    if (u[i].count > 1)
      snprintf(more, sizeof more, " (and %lld more like it)",
               (long long)(u[i].count - 1));
    /* What one unit along the split dim is, in words. */
    const char *unit = pi.ndim == 1    ? "elements"
                       : u[i].dim == 0 ? "rows"
                       : u[i].dim == 1 ? "columns"
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
    if (st != TPX_OK)
      return diag_oom(st, err);
  }
  return TPX_OK;
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
        pi->fqn, ti->fqn, sb, kb ? kb : "none", pi->fqn, sb, mod ? mod : "");
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
  if (sh->tp_dim < 0)
    return TPX_OK;
  for (size_t t = 0; t < sh->num_tied; t++) {
    size_t p = (size_t)sh->tied_params[t];
    tpx_param_info pi, ti;
    if (tpx_model_param(sh->model, (int64_t)p, &pi, NULL) != TPX_OK)
      continue;
    if (pi.tied_to < 0)
      continue;
    if (tpx_model_param(sh->model, pi.tied_to, &ti, NULL) != TPX_OK)
      continue;
    tpx_placement a = tpx__tp_placement(sh, (int64_t)p, pi.ndim);
    tpx_placement b = tpx__tp_placement(sh, pi.tied_to, ti.ndim);
    int alias_styled = sh->param_styled[p] >= 0;
    int target_styled = sh->param_styled[pi.tied_to] >= 0;
    if (!tpx_placement_equal(a, b) && alias_styled != target_styled) {
      tpx_status st = tied_one_styled(sh, p, &pi, &ti, a, b);
      if (st != TPX_OK)
        return diag_oom(st, err);
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
      if (st != TPX_OK)
        return diag_oom(st, err);
    }
    /* ensure_tied_lm_head: the alias ends up holding the target's tensor. */
    sh->placements[p * sh->ndim + sh->tp_dim] =
        sh->placements[pi.tied_to * sh->ndim + sh->tp_dim];
  }
  return TPX_OK;
}

/* What the per-parameter pass collects for the diagnostics after it. */
typedef struct apply_pass {
  const uint8_t *keyed; /* [num_modules] module or an ancestor is keyed */
  once_t once;          /* one child-parameter error per entry */
  uint64_t *phash;      /* [num_params] nonzero: compared for omission */
  uneven_t *uneven;     /* [UNEVEN_MAX] */
  size_t nu;
  size_t cap_tied;
} apply_pass;

/* Count parameter p toward the uneven-shard warning of its entry. */
static void note_uneven(apply_pass *a, int64_t e, size_t p, int dim,
                        int64_t size, const char *pname) {
  size_t i;
  for (i = 0; i < a->nu; i++)
    if (a->uneven[i].entry == e && a->uneven[i].dim == dim &&
        a->uneven[i].size == size &&
        strncmp(a->uneven[i].name, pname, sizeof a->uneven[i].name) == 0)
      break;
  if (i < a->nu) {
    a->uneven[i].count++;
  } else if (a->nu < UNEVEN_MAX) {
    uneven_t *u = &a->uneven[a->nu++];
    u->entry = e;
    u->param = (int64_t)p;
    u->dim = dim;
    u->size = size;
    u->count = 1;
    snprintf(u->name, sizeof u->name, "%s", pname);
  }
}

/* The problems torch meets placing a parameter that lies in a submodule of
 * the styled module (none when `child_problem` is 0 and it is not a
 * rowwise-Linear child with a weight). */
static tpx_status check_child(tpx_sharding *sh, apply_pass *a, int64_t e,
                              const tpx__param *pi, int64_t styled,
                              const tpx_style *s, tpx_module_kind k,
                              int child_problem, tpx_error *err) {
  const tpx_model *model = sh->model;
  if (child_problem)
    return diag_oom(
        report_child_param(
            sh, &a->once, e, pi->fqn, styled,
            "its partition function iterates the module's parameters "
            "recursively and cannot register a dotted name (torch raises "
            "KeyError)"),
        err);
  if (tpx_style_kind_traits(s->kind).family != TPX_STYLE_FAMILY_ROWWISE ||
      k == TPX_MODULE_EMBEDDING || pi->module == styled)
    return TPX_OK;
  /* rowwise on a Linear runs on every submodule and reads .weight. */
  char fq[1024];
  snprintf(fq, sizeof fq, "%s%sweight", tpx_model_module_fqn(model, pi->module),
           *tpx_model_module_fqn(model, pi->module) ? "." : "");
  if (tpx_model_find_param(model, fq) >= 0)
    return TPX_OK;
  return diag_oom(
      report_child_param(sh, &a->once, e, pi->fqn, styled,
                         "its submodule has no 'weight', which rowwise's "
                         "partition function reads (torch raises "
                         "AttributeError)"),
      err);
}

/* Parameter p: its covering style, entry and TP placement, with the
 * problems torch would meet placing it. */
static tpx_status place_param(tpx_sharding *sh, apply_pass *a, size_t p,
                              tpx_error *err) {
  const tpx_model *model = sh->model;
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
   * The omission rule hashes the rest, when needed. */
  a->phash[p] =
      (pi->tied_to >= 0 || pndim < 1 || (styled < 0 && a->keyed[pi->module]))
          ? 0
          : 1;
  if (pi->tied_to >= 0) {
    if (TPX_GROW(sh->tied_params, a->cap_tied, sh->num_tied + 1, 8))
      return tpx__shard_oom(err, "tied list");
    sh->tied_params[sh->num_tied++] = (int64_t)p;
  }
  if (styled < 0)
    return TPX_OK;
  int64_t e = sh->param_entry[p];
  const tpx_style *s = entry_style(sh, e);
  if (!s)
    return TPX_OK;
  tpx_module_kind k = tpx__mv_kind(model, styled);
  if (tpx_style_kind_traits(s->kind).shards_params && k != TPX_MODULE_LINEAR &&
      k != TPX_MODULE_EMBEDDING)
    return TPX_OK; /* torch raises (reported by check_kinds): nothing applied */
  int child_problem = 0;
  tpx_placement pl =
      tp_placement_for(s, k, pname, pi->module == styled, &child_problem);
  tpx_status st = check_child(sh, a, e, pi, styled, s, k, child_problem, err);
  if (st != TPX_OK)
    return st;
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
      if (st != TPX_OK)
        return st;
      pl = tpx_placement_replicate();
    } else if (pi->tied_to < 0 && pshape[norm.dim] % sh->tp != 0) {
      note_uneven(a, e, p, norm.dim, pshape[norm.dim], pname);
    }
  }
  sh->placements[p * (size_t)sh->ndim + (size_t)sh->tp_dim] = pl;
  return TPX_OK;
}

/* Every parameter placed, then the diagnostics over all of them. */
static tpx_status place_all(tpx_sharding *sh, const tpx_match *match,
                            const uint8_t *keyed, tpx_error *err) {
  apply_pass a;
  memset(&a, 0, sizeof a);
  a.keyed = keyed;
  a.once.flag = calloc(sh->num_entries ? sh->num_entries : 1, 1);
  a.phash = malloc((sh->num_params ? sh->num_params : 1) * sizeof *a.phash);
  a.uneven = malloc(UNEVEN_MAX * sizeof *a.uneven);
  tpx_status st = TPX_OK;
  if (!a.once.flag || !a.phash || !a.uneven)
    st = tpx__shard_oom(err, "application scratch");
  for (size_t p = 0; p < sh->num_params && st == TPX_OK; p++)
    st = place_param(sh, &a, p, err);
  if (st == TPX_OK)
    st = check_tied(sh, err);
  if (st == TPX_OK)
    st = emit_uneven(sh, a.uneven, a.nu, err);
  if (st == TPX_OK) {
    tpx__omission_in in = {
        .model = sh->model,
        .match = match,
        .num_params = sh->num_params,
        .param_styled = sh->param_styled,
        .param_entry = sh->param_entry,
        .entry_keys = sh->entry_keys,
        .num_entries = sh->num_entries,
        .tp_placement = sh->placements + sh->tp_dim,
        .stride = (size_t)sh->ndim,
        .compare = a.phash,
    };
    st = tpx__omission_by_placement(&in, sh->diags, err);
  }
  free(a.once.flag);
  free(a.phash);
  free(a.uneven);
  return st;
}

tpx_status tpx__apply_tp(tpx_sharding *sh, tpx_error *err) {
  tpx_match *match = NULL;
  tpx_status st = tpx_match_plan(sh->plan, sh->model, &match, sh->diags, err);
  if (st != TPX_OK)
    return st;
  for (size_t m = 0; m < sh->num_modules; m++)
    sh->module_entry[m] = tpx_match_module_entry(match, (int64_t)m);

  if (!sh->tp_applied) {
    /* parallelize_module does not run: keep the match for the report but
     * leave every parameter a plain tensor. */
    for (size_t p = 0; p < sh->num_params; p++) {
      sh->param_entry[p] = -1;
      sh->param_styled[p] = -1;
    }
    for (size_t m = 0; m < sh->num_modules; m++) sh->module_cover[m] = -1;
    tpx_match_destroy(match);
    return TPX_OK;
  }

  uint8_t *keyed = malloc(sh->num_modules ? sh->num_modules : 1);
  if (!keyed)
    st = tpx__shard_oom(err, "module flags");
  if (st == TPX_OK)
    st = compute_cover(sh, keyed, err);
  if (st == TPX_OK)
    st = check_kinds(sh, err);
  if (st == TPX_OK)
    st = place_all(sh, match, keyed, err);
  free(keyed);
  tpx_match_destroy(match);
  return st;
}
