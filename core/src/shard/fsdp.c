/* fsdp.c — the FSDP2 side of a sharding (docs/SEMANTICS.md "FSDP2"):
 * which modules become units, their
 * reshard-after-forward flags and prefetch lists, the dp placements of every
 * parameter, and the per-parameter mixed-precision dtypes.
 *
 * Units follow Automodel's apply_fsdp2_sharding_recursively: from the root,
 * non-container modules are descended into; a module list (a container whose
 * children are all named by digits) contributes each non-list child as a
 * unit, after recursing into its nested lists first; units are not descended
 * into. Then, as NeMo Automodel 0.7.0 does, untied input and output
 * embeddings become units of their own (embedding_units); at ep > 1 the
 * routed experts and the inner model get theirs (ep.c). The root is the
 * last unit. Bytes are computed in bytes.c. */
#include <stdlib.h>
#include <string.h>

#include "base/fqn.h"
#include "base/grow.h"
#include "model/model_view.h"
#include "shard/shard_internal.h"

/* A ModuleList in our tree: a container whose children are all named by
 * digits (at least one child). */
static int is_module_list(const tpx_model *model, int64_t m) {
  if (m <= 0 || tpx_model_module_kind(model, m) != TPX_MODULE_CONTAINER)
    return 0;
  size_t n = tpx_model_module_num_children(model, m);
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    int64_t c = tpx_model_module_child(model, m, i);
    if (c < 0 ||
        !tpx__fqn_is_digits(tpx__fqn_last_atom(tpx_model_module_fqn(model, c))))
      return 0;
  }
  return 1;
}

typedef struct {
  tpx__fsdp_unit_rec *units;
  size_t n, cap;
  int64_t groups;
} unit_vec;

static int push_unit(unit_vec *v, int64_t module, int64_t group, int reshard) {
  if (TPX_GROW(v->units, v->cap, v->n + 1, 16))
    return -1;
  tpx__fsdp_unit_rec *r = &v->units[v->n++];
  memset(r, 0, sizeof *r);
  r->module = module;
  r->group = group;
  r->reshard = reshard;
  return 0;
}

/* tpx__ep_units' way in (the unit vector is private to this file). */
static int push_ep_unit(void *vec, int64_t module, int64_t group, int reshard,
                        int on_moe) {
  unit_vec *v = vec;
  if (push_unit(v, module, group, reshard) != 0)
    return -1;
  v->units[v->n - 1].on_moe = on_moe;
  return 0;
}

static int set_prefetch(tpx__fsdp_unit_rec *u, size_t first, size_t n,
                        int fwd_depth, int bwd_depth) {
  for (size_t i = 0; i < n; i++) {
    tpx__fsdp_unit_rec *r = &u[first + i];
    if (fwd_depth > 0 && i + 1 < n) {
      size_t k = n - 1 - i < (size_t)fwd_depth ? n - 1 - i : (size_t)fwd_depth;
      r->fwd = malloc(k * sizeof *r->fwd);
      if (!r->fwd)
        return -1;
      for (size_t j = 0; j < k; j++) r->fwd[j] = (int64_t)(first + i + 1 + j);
      r->num_fwd = k;
    }
    if (bwd_depth > 0 && i >= 1) {
      size_t k = i < (size_t)bwd_depth ? i : (size_t)bwd_depth;
      r->bwd = malloc(k * sizeof *r->bwd);
      if (!r->bwd)
        return -1;
      for (size_t j = 0; j < k; j++) r->bwd[j] = (int64_t)(first + i - 1 - j);
      r->num_bwd = k;
    }
  }
  return 0;
}

static int visit(const tpx_sharding *sh, unit_vec *v, int64_t m, int depth);

static int visit_list(const tpx_sharding *sh, unit_vec *v, int64_t list,
                      int depth) {
  const tpx_model *model = sh->model;
  size_t nc = tpx_model_module_num_children(model, list);
  if (depth > 256)
    return 0;
  /* Nested lists first, as Automodel recurses before wrapping. */
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(model, list, i);
    if (is_module_list(model, c) && visit_list(sh, v, c, depth + 1) != 0)
      return -1;
  }
  size_t first = v->n, count = 0;
  int64_t group = v->groups++;
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(model, list, i);
    if (is_module_list(model, c))
      continue;
    count++;
  }
  size_t k = 0;
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(model, list, i);
    if (is_module_list(model, c))
      continue;
    int r = sh->opts.reshard_after_forward >= 0
                ? (sh->opts.reshard_after_forward != 0)
                : (k + 1 < count);
    if (push_unit(v, c, group, r) != 0)
      return -1;
    k++;
  }
  if (sh->opts.reshard_after_forward != 0 && count > 0 &&
      set_prefetch(v->units, first, count, sh->opts.fwd_prefetch_depth,
                   sh->opts.bwd_prefetch_depth) != 0)
    return -1;
  return 0;
}

/* 1 when `fqn` lies under a module named "mtp" that is not the root's
 * child: upstream's MoE parallelizer (_iter_moe_blocks) wraps the blocks
 * of the root's mtp.layers only, so at ep > 1 an MTP head deeper in the
 * tree (MiniMax-M3's model.mtp) stays in its parent's unit. */
static int in_nested_mtp(const char *fqn) {
  for (const char *a = fqn ? strchr(fqn, '.') : NULL; a != NULL;
       a = strchr(a + 1, '.'))
    if (strncmp(a + 1, "mtp", 3) == 0 && (a[4] == '.' || a[4] == '\0'))
      return 1;
  return 0;
}

static int visit(const tpx_sharding *sh, unit_vec *v, int64_t m, int depth) {
  const tpx_model *model = sh->model;
  size_t nc = tpx_model_module_num_children(model, m);
  if (depth > 256)
    return 0;
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(model, m, i);
    if (c < 0)
      continue;
    /* ep > 1: the MoE parallelizer wraps a multimodal module whole */
    if (sh->ep > 1 && tpx__ep_multimodal_name(tpx_model_module_fqn(model, c)))
      continue;
    if (sh->ep > 1 && is_module_list(model, c) &&
        in_nested_mtp(tpx_model_module_fqn(model, c)))
      continue;
    int rc = is_module_list(model, c) ? visit_list(sh, v, c, depth + 1)
                                      : visit(sh, v, c, depth + 1);
    if (rc != 0)
      return -1;
  }
  return 0;
}

/* Multimodal tower names (docs/SEMANTICS.md "FSDP2"): an embed_tokens under one
 * of these is not the language model's input embedding. */
static int in_tower(const char *fqn) {
  static const char *const towers[] = {
      "visual",      "vision_tower",  "vision_model",
      "vit_model",   "image_encoder", "vision_encoder",
      "audio_tower", "audio_encoder", "audio_model"};
  const char *a = fqn;
  while (*a) {
    const char *dot = strchr(a, '.');
    size_t n = dot ? (size_t)(dot - a) : strlen(a);
    for (size_t k = 0; k < sizeof towers / sizeof towers[0]; k++)
      if (strlen(towers[k]) == n && memcmp(a, towers[k], n) == 0)
        return 1;
    if (!dot)
      break;
    a = dot + 1;
  }
  return 0;
}

/* 1 when module m or an ancestor is already a unit. */
static int under_unit(const tpx_model *model, const unit_vec *v, int64_t m) {
  for (; m > 0; m = tpx__mv_parent(model, m))
    for (size_t u = 0; u < v->n; u++)
      if (v->units[u].module == m)
        return 1;
  return 0;
}

/* 1 when `p` is module m's parameter or a parameter below it. */
static int param_under(const tpx_model *model, int64_t pm, int64_t m) {
  for (; pm >= 0; pm = tpx__mv_parent(model, pm))
    if (pm == m)
      return 1;
  return 0;
}

/* NeMo Automodel 0.7.0's _fully_shard_untied_input_output_embeddings, run
 * after the layer units and before the root: the input embedding (the
 * first embed_tokens outside a multimodal tower, as get_input_embeddings
 * finds it) and the output embedding (lm_head, else language_model.lm_head)
 * become units of their own, the input one resharding after forward by the
 * usual rule (the override, else True; pipeline parallelism is not
 * modelled), lm_head never. Tied tables (a tie between the two, either way)
 * stay in the root, as does a module that holds no parameter. Releases
 * before 0.7 kept both in the root. */
static int embedding_units(const tpx_sharding *sh, unit_vec *v) {
  const tpx_model *model = sh->model;
  size_t nm = tpx_model_num_modules(model), np = tpx_model_num_params(model);
  int64_t in = -1, out = -1;
  for (size_t m = 1; m < nm && in < 0; m++) {
    const char *fqn = tpx_model_module_fqn(model, (int64_t)m);
    if (fqn && strcmp(tpx__fqn_last_atom(fqn), "embed_tokens") == 0 &&
        !in_tower(fqn))
      in = (int64_t)m;
  }
  out = tpx_model_find_module(model, "lm_head");
  if (out <= 0)
    out = tpx_model_find_module(model, "language_model.lm_head");
  if (out <= 0)
    out = tpx_model_find_module(model, "model.language_model.lm_head");
  if (out <= 0)
    out = -1;
  if (in < 0 && out < 0)
    return 0;
  int has_in = 0, has_out = 0;
  for (size_t p = 0; p < np; p++) {
    const tpx__param *pi = tpx__mv_param(model, (int64_t)p);
    int pin = in >= 0 && param_under(model, pi->module, in);
    int pout = out >= 0 && param_under(model, pi->module, out);
    has_in |= pin;
    has_out |= pout;
    if (pi->tied_to >= 0 && (pin || pout)) {
      int64_t tm = tpx__mv_param(model, pi->tied_to)->module;
      if ((pin && out >= 0 && param_under(model, tm, out)) ||
          (pout && in >= 0 && param_under(model, tm, in)))
        return 0; /* tied: both stay in the root */
    }
  }
  if (in >= 0 && has_in && !under_unit(model, v, in)) {
    int r = sh->opts.reshard_after_forward >= 0
                ? sh->opts.reshard_after_forward != 0
                : 1;
    if (push_unit(v, in, -1, r) != 0)
      return -1;
  }
  if (out >= 0 && out != in && has_out && !under_unit(model, v, out) &&
      push_unit(v, out, -1, 0) != 0)
    return -1;
  return 0;
}

void tpx__fsdp_free(tpx_sharding *sh) {
  for (size_t i = 0; i < sh->num_units; i++) {
    free(sh->units[i].fwd);
    free(sh->units[i].bwd);
    free(sh->units[i].gathered);
  }
  free(sh->units);
  sh->units = NULL;
  sh->num_units = 0;
}

void tpx_fsdp_param_dtypes(const tpx_mp_policy *policy, tpx_dtype orig,
                           tpx_dtype *param_out, tpx_dtype *reduce_out) {
  tpx_dtype param = policy ? policy->param_dtype : TPX_DTYPE_INVALID;
  tpx_dtype reduce = policy ? policy->reduce_dtype : TPX_DTYPE_INVALID;
  if (!tpx_dtype_is_float(orig)) {
    if (param_out)
      *param_out = orig;
    if (reduce_out)
      *reduce_out = orig;
    return;
  }
  if (reduce == TPX_DTYPE_INVALID)
    reduce = param; /* falls back to param */
  if (reduce == param)
    reduce = TPX_DTYPE_INVALID; /* cleared */
  if (param == orig)
    param = TPX_DTYPE_INVALID; /* cleared */
  tpx_dtype compute = param != TPX_DTYPE_INVALID ? param : orig;
  if (param_out)
    *param_out = compute;
  if (reduce_out)
    *reduce_out = reduce != TPX_DTYPE_INVALID ? reduce : compute;
}

static tpx_status units_from_options(tpx_sharding *sh, unit_vec *v,
                                     tpx_error *err) {
  for (size_t i = 0; i < sh->opts.num_fsdp_units; i++) {
    const char *fqn = sh->opts.fsdp_units[i];
    int64_t m = fqn ? tpx_model_find_module(sh->model, fqn) : -1;
    if (m <= 0)
      return tpx_error_set(err, TPX_NOT_FOUND,
                           "FSDP unit %zu '%s' is not a (non-root) module of "
                           "the model",
                           i, fqn ? fqn : "(null)");
    int r = sh->opts.fsdp_unit_reshard ? sh->opts.fsdp_unit_reshard[i] != 0 : 1;
    if (sh->opts.reshard_after_forward >= 0)
      r = sh->opts.reshard_after_forward != 0;
    if (push_unit(v, m, 0, r) != 0)
      return tpx__shard_oom(err, "FSDP units");
  }
  return TPX_OK;
}

tpx_status tpx__fsdp_build(tpx_sharding *sh, tpx_error *err) {
  const tpx_model *model = sh->model;
  tpx_mp_policy mp = {sh->opts.param_dtype, sh->opts.reduce_dtype,
                      sh->opts.output_dtype};
  if (!sh->opts.fsdp) { /* no FSDP: compute in the held dtype */
    for (size_t p = 0; p < sh->num_params; p++) {
      sh->param_dtype[p] = sh->reduce_dtype[p] = (uint8_t)tpx__held_dtype(
          sh, (int64_t)p, (tpx_dtype)tpx__mv_param(model, (int64_t)p)->dtype);
    }
    return TPX_OK;
  }

  unit_vec v = {NULL, 0, 0, 0};
  tpx_status st = TPX_OK;
  if (sh->opts.num_fsdp_units > 0) {
    st = units_from_options(sh, &v, err);
  } else if (visit(sh, &v, 0, 0) != 0 || embedding_units(sh, &v) != 0) {
    st = tpx__shard_oom(err, "FSDP units");
  }
  if (st == TPX_OK && sh->ep > 1) {
    /* the blocks upstream's MoE path wraps: the units of module lists */
    int64_t *blocks = malloc((v.n ? v.n : 1) * sizeof *blocks);
    size_t nb = 0;
    for (size_t u = 0; blocks && u < v.n; u++)
      if (v.units[u].group >= 0)
        blocks[nb++] = v.units[u].module;
    if (!blocks || tpx__ep_units(sh, blocks, nb, &v, push_ep_unit) != 0)
      st = tpx__shard_oom(err, "FSDP units");
    free(blocks);
  }
  /* At ep > 1 upstream's MoE parallelizer wraps with its own
   * reshard_after_forward, False unless the strategy overrides it
   * (MoEParallelizerConfig): no unit reshards after forward. */
  if (st == TPX_OK && sh->ep > 1 && sh->opts.reshard_after_forward < 0)
    for (size_t u = 0; u < v.n; u++) v.units[u].reshard = 0;
  if (st == TPX_OK && push_unit(&v, 0, -1, 0) != 0)
    st = tpx__shard_oom(err, "FSDP units");
  sh->units = v.units;
  sh->num_units = v.n;
  if (st != TPX_OK)
    return st;

  /* Unit of every module: the nearest unit ancestor-or-self; the root
   * otherwise. Units are never nested below the root (except plugin-given
   * ones, where the innermost wins, as fully_shard skips owned params). */
  size_t nm = sh->num_modules;
  int64_t *unit_of = malloc((nm ? nm : 1) * sizeof *unit_of);
  int64_t *stack = malloc((nm ? nm : 1) * sizeof *stack);
  if (!unit_of || !stack) {
    free(unit_of);
    free(stack);
    return tpx__shard_oom(err, "FSDP unit map");
  }
  for (size_t m = 0; m < nm; m++) unit_of[m] = -1;
  for (size_t u = 0; u + 1 < sh->num_units; u++)
    unit_of[sh->units[u].module] = (int64_t)u;
  int64_t root_unit = (int64_t)sh->num_units - 1;
  unit_of[0] = root_unit;
  if (sh->topo_modules) { /* parents first: one sequential pass */
    for (size_t m = 1; m < nm; m++)
      if (unit_of[m] < 0)
        unit_of[m] = unit_of[tpx__mv_parent(model, (int64_t)m)];
  } else {
    size_t top = 0;
    stack[top++] = 0;
    while (top) {
      int64_t m = stack[--top];
      size_t nc = tpx_model_module_num_children(model, m);
      for (size_t i = 0; i < nc; i++) {
        int64_t c = tpx_model_module_child(model, m, i);
        if (c < 0 || (size_t)c >= nm || top >= nm)
          continue;
        if (unit_of[c] < 0)
          unit_of[c] = unit_of[m];
        stack[top++] = c;
      }
    }
  }
  free(stack);

  for (size_t p = 0; p < sh->num_params; p++) {
    /* The record in place: a copied tpx_param_info per parameter was a
     * third of this loop. */
    const tpx__param *pi = tpx__mv_param(model, (int64_t)p);
    tpx_dtype pdt = (tpx_dtype)pi->dtype;
    tpx_dtype pd, rd;
    if (sh->param_fp32[p] && tpx_dtype_is_float(pdt)) {
      /* fully_shard_by_dtype's fp32 group: held and gathered in f32. */
      tpx_mp_policy f32 = {TPX_DTYPE_F32, mp.reduce_dtype, mp.output_dtype};
      tpx_fsdp_param_dtypes(&f32, TPX_DTYPE_F32, &pd, &rd);
    } else {
      tpx_fsdp_param_dtypes(&mp, pdt, &pd, &rd);
    }
    sh->param_dtype[p] = (uint8_t)pd;
    sh->reduce_dtype[p] = (uint8_t)rd;
    int64_t u = unit_of[pi->module] >= 0 ? unit_of[pi->module] : root_unit;
    if (sh->param_moe && sh->param_moe[p]) {
      /* On the MoE mesh (ep.c): its experts unit over ep_shard, or no unit
       * at all when ep_shard is 1 (EP alone shards it). */
      if (!sh->units[u].on_moe)
        u = -1;
      else
        sh->units[u].num_params++;
      sh->param_unit[p] = u;
      continue;
    }
    if (pi->tied_to >= 0) {
      /* An alias belongs where its storage is owned: fully_shard groups a
       * Parameter object once, by the first unit that reaches it. */
      int64_t tm = tpx__mv_param(model, pi->tied_to)->module;
      int64_t tu = unit_of[tm] >= 0 ? unit_of[tm] : root_unit;
      /* bottom-up: the lower unit index wraps first */
      if (tu < u)
        u = tu;
    } else {
      sh->units[u].num_params++;
    }
    sh->param_unit[p] = u;
    tpx_placement *pl = &sh->placements[p * (size_t)sh->ndim];
    if (sh->dpr_dim >= 0)
      pl[sh->dpr_dim] = tpx_placement_replicate();
    if (sh->dps_dim >= 0) {
      tpx_placement tpp = tpx__tp_placement(sh, (int64_t)p, (int)pi->ndim);
      if ((int)pi->ndim == 0)
        pl[sh->dps_dim] = tpx_placement_replicate(); /* nothing to split */
      else if (sh->tp_applied && tpp.kind == TPX_SHARD && tpp.dim == 0)
        pl[sh->dps_dim] = tpx_placement_strided_shard(0, (int32_t)sh->tp);
      else
        pl[sh->dps_dim] = tpx_placement_shard(0);
      /* The other dims of a flattened FSDP view (cp of dp_shard_cp) join
       * the first: one split over the view's size. */
      for (int j = 1; j < sh->dps_ndims; j++)
        pl[sh->dps_dim + j] = tpx_placement_joined();
    }
  }
  free(unit_of);
  return st;
}

const char *tpx_sharding_fsdp_unit_dim(const tpx_sharding *sh, size_t index) {
  if (!sh || index >= sh->num_units)
    return NULL;
  return sh->units[index].on_moe ? "ep_shard" : sh->fsdp_mesh;
}

size_t tpx_sharding_num_fsdp_units(const tpx_sharding *sh) {
  return sh ? sh->num_units : 0;
}

tpx_status tpx_sharding_fsdp_unit(const tpx_sharding *sh, size_t index,
                                  tpx_fsdp_unit *out, tpx_error *err) {
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_fsdp_unit: NULL argument");
  if (index >= sh->num_units)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_sharding_fsdp_unit: unit %zu outside 0..%zu",
                         index, sh->num_units);
  const tpx__fsdp_unit_rec *r = &sh->units[index];
  *out = (tpx_fsdp_unit){
      .module = r->module,
      .fqn = tpx_model_module_fqn(sh->model, r->module),
      .is_root = r->module == 0,
      .group = r->group,
      .reshard_after_forward = r->reshard,
      .num_params = r->num_params,
      .num_fwd_prefetch = r->num_fwd,
      .fwd_prefetch = r->fwd,
      .num_bwd_prefetch = r->num_bwd,
      .bwd_prefetch = r->bwd,
  };
  return TPX_OK;
}

int64_t tpx_sharding_fsdp_unit_gathered_bytes(const tpx_sharding *sh,
                                              size_t index, int64_t rank) {
  if (!sh || index >= sh->num_units || rank < 0 || rank >= sh->world ||
      !sh->units[index].gathered)
    return -1;
  return sh->units[index].gathered[rank];
}

tpx_mp_policy tpx_sharding_mp_policy(const tpx_sharding *sh) {
  tpx_mp_policy mp = {TPX_DTYPE_INVALID, TPX_DTYPE_INVALID, TPX_DTYPE_INVALID};
  if (!sh || !sh->opts.fsdp)
    return mp;
  mp.param_dtype = sh->opts.param_dtype;
  mp.reduce_dtype = sh->opts.reduce_dtype;
  mp.output_dtype = sh->opts.output_dtype;
  return mp;
}
