/* ep.c — expert parallelism in a sharding (docs/SEMANTICS.md "Expert
 * parallelism"), as NeMo Automodel 0.7.0's MoE parallelizer places it at
 * ep > 1: the MoE mesh ("ep_shard", "ep") over the same ranks
 * (tpx_mesh_create_moe), every routed-expert parameter (the expert
 * patterns) on it with Shard(0) over ep (whole experts per EP rank) and,
 * when ep_shard > 1, Shard(1) over ep_shard, where the module holding them
 * is an FSDP unit of its own (fully_shard on the ep_shard mesh, the
 * parameters leaving their layer's unit); with ep_shard 1 (or FSDP off, as
 * upstream applies no FSDP when its dp mesh is one rank) they are in no
 * unit. A multimodal tower or projector is one unit (the lists inside it
 * none). The inner model ("model", or its text module) becomes the root
 * unit of what is left, the outer root keeping nothing, unless the
 * embeddings are tied across it.
 *
 * Not the FSDP rule itself (fsdp.c) and not bytes (bytes.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fqn.h"
#include "model/model_view.h"
#include "shard/shard_internal.h"
#include "tpx/match.h"

const tpx_placement *tpx__param_row(const tpx_sharding *sh, int64_t p) {
  if (sh->param_moe && sh->param_moe[p])
    return &sh->moe_placements[(size_t)p * (size_t)sh->moe_w];
  return &sh->placements[(size_t)p * (size_t)sh->ndim];
}

const tpx_mesh *tpx__param_mesh(const tpx_sharding *sh, int64_t p) {
  return sh->param_moe && sh->param_moe[p] ? sh->moe_mesh : sh->mesh;
}

static int is_expert(const tpx_sharding *sh, const char *fqn) {
  for (size_t k = 0; k < sh->opts.num_expert_params; k++)
    if (sh->opts.expert_params[k] &&
        tpx_match_fqn(sh->opts.expert_params[k], fqn))
      return 1;
  return 0;
}

tpx_status tpx__ep_setup(tpx_sharding *sh, tpx_error *err) {
  if (sh->ep <= 1)
    return TPX_OK;
  tpx_status st = tpx_mesh_create_moe(sh->mesh, sh->ep, &sh->moe_mesh, err);
  if (st != TPX_OK)
    return st;
  sh->ep_shard = sh->world / sh->ep;
  sh->ep_fsdp = sh->opts.fsdp && sh->dps * sh->dpr > 1 && sh->ep_shard > 1;
  sh->moe_w = sh->ndim > 2 ? sh->ndim : 2;
  size_t np = sh->num_params ? sh->num_params : 1;
  sh->param_moe = calloc(np, 1);
  sh->moe_placements =
      calloc(np * (size_t)sh->moe_w, sizeof *sh->moe_placements);
  if (!sh->param_moe || !sh->moe_placements)
    return tpx__shard_oom(err, "expert placements");
  size_t found = 0;
  for (size_t p = 0; p < sh->num_params; p++) {
    tpx_placement *row = &sh->moe_placements[p * (size_t)sh->moe_w];
    for (int d = 0; d < sh->moe_w; d++) row[d] = tpx_placement_replicate();
    tpx_param_info pi;
    if (tpx_model_param(sh->model, (int64_t)p, &pi, NULL) != TPX_OK ||
        pi.ndim < 1 || pi.tied_to >= 0 || !is_expert(sh, pi.fqn))
      continue;
    sh->param_moe[p] = 1;
    /* MoE mesh dims: 0 = ep_shard, 1 = ep. Upstream's _moe_shard_placement
     * shards dim 1 over ep_shard (there may be more shards than experts);
     * a 1-d expert parameter (none upstream has) would have no dim 1. */
    row[1] = tpx_placement_shard(0);
    if (sh->ep_fsdp && pi.ndim >= 2)
      row[0] = tpx_placement_shard(1);
    /* Its main-mesh row says nothing: Replicate everywhere. */
    tpx_placement *mrow = &sh->placements[p * (size_t)sh->ndim];
    for (int d = 0; d < sh->ndim; d++) mrow[d] = tpx_placement_replicate();
    found++;
  }
  if (found == 0 &&
      tpx_diag_add(sh->diags, TPX_DIAG_WARNING, "ep-no-experts", "",
                   "declare the routed-expert parameters (a plugin's "
                   "expert_param trait, or tpx_sharding_options."
                   "expert_params), or plan with ep 1",
                   "ep is %lld but no parameter matches an expert pattern "
                   "(%zu given): nothing lives on the MoE mesh, every "
                   "parameter is planned as at ep 1",
                   (long long)sh->ep, sh->opts.num_expert_params) != TPX_OK)
    return tpx__shard_oom(err, "diagnostics");
  return TPX_OK;
}

/* 1 when a parameter under module `a` is tied to one under module `b`, or
 * the other way round. */
static int tied_across(const tpx_model *model, int64_t a, int64_t b) {
  size_t np = tpx_model_num_params(model);
  for (size_t p = 0; p < np; p++) {
    const tpx__param *pi = tpx__mv_param(model, (int64_t)p);
    if (pi->tied_to < 0)
      continue;
    int64_t tm = tpx__mv_param(model, pi->tied_to)->module;
    int pa = 0, pb = 0, ta = 0, tb = 0;
    for (int64_t m = pi->module; m >= 0; m = tpx__mv_parent(model, m)) {
      pa |= m == a;
      pb |= m == b;
      if (m == 0)
        break;
    }
    for (int64_t m = tm; m >= 0; m = tpx__mv_parent(model, m)) {
      ta |= m == a;
      tb |= m == b;
      if (m == 0)
        break;
    }
    if ((pa && tb) || (pb && ta))
      return 1;
  }
  return 0;
}

/* 1 when module m is `top` or below it. */
static int under(const tpx_model *model, int64_t m, int64_t top) {
  for (; m >= 0; m = m ? tpx__mv_parent(model, m) : -1)
    if (m == top)
      return 1;
  return 0;
}

/* The dtype group of parameter p in upstream's fully_shard_by_dtype: its
 * held dtype (f32 for a kept-fp32 one), which decides its compute dtype. */
static int dtype_key(const tpx_sharding *sh, int64_t p) {
  return (int)tpx__held_dtype(sh, p,
                              (tpx_dtype)tpx__mv_param(sh->model, p)->dtype);
}

/* The key all counted parameters under module m share, -1 when they differ,
 * -2 when there are none. */
static int subtree_key(const tpx_sharding *sh, const int64_t *ps, size_t n,
                       int64_t m) {
  int key = -2;
  for (size_t i = 0; i < n; i++) {
    if (!under(sh->model, tpx__mv_param(sh->model, ps[i])->module, m))
      continue;
    int k = dtype_key(sh, ps[i]);
    if (key == -2)
      key = k;
    else if (key != k)
      return -1;
  }
  return key;
}

/* NeMo Automodel 0.7.0's MoE path wraps each block with
 * fully_shard_by_dtype, the experts ignored: with two dtype groups among
 * the block's floating-point parameters, every maximal subtree holding only
 * the smaller group's becomes a unit of its own (a kept-fp32 router gate,
 * linear attention's _fp32_params); with three or more, every maximal
 * uniform subtree. 0, or -1 out of memory. */
static int dtype_units(const tpx_sharding *sh, int64_t block, int reshard,
                       void *vec,
                       int (*push)(void *, int64_t, int64_t, int, int)) {
  const tpx_model *model = sh->model;
  int64_t *ps = malloc((sh->num_params ? sh->num_params : 1) * sizeof *ps);
  if (!ps)
    return -1;
  size_t n = 0;
  int keys[8], counts[8], nk = 0;
  for (size_t p = 0; p < sh->num_params; p++) {
    const tpx__param *pi = tpx__mv_param(model, (int64_t)p);
    if (sh->param_moe[p] || pi->tied_to >= 0 ||
        !tpx_dtype_is_float((tpx_dtype)pi->dtype) ||
        !under(model, pi->module, block))
      continue;
    ps[n++] = (int64_t)p;
    int k = dtype_key(sh, (int64_t)p), j = 0;
    while (j < nk && keys[j] != k) j++;
    if (j == nk && nk < 8) {
      keys[nk] = k;
      counts[nk++] = 0;
    }
    if (j < nk)
      counts[j]++;
  }
  int least = 0;
  for (int j = 1; j < nk; j++)
    if (counts[j] < counts[least])
      least = j;
  int rc = 0;
  for (size_t m = 1; nk >= 2 && m < sh->num_modules && rc == 0; m++) {
    int64_t parent = tpx__mv_parent(model, (int64_t)m);
    if ((int64_t)m == block || !under(model, (int64_t)m, block))
      continue;
    int k = subtree_key(sh, ps, n, (int64_t)m);
    if (k < 0 || (nk == 2 && k != keys[least]))
      continue;
    if (parent != block && subtree_key(sh, ps, n, parent) == k)
      continue; /* not maximal */
    rc = push(vec, (int64_t)m, -1, reshard, 0);
  }
  free(ps);
  return rc;
}

/* The multimodal towers and projectors by name, as Automodel 0.7.0's
 * MULTIMODAL_MODULE_NAMES (docs/SEMANTICS.md "Expert parallelism"). */
int tpx__ep_multimodal_name(const char *fqn) {
  static const char *const names[] = {"visual",
                                      "vision",
                                      "vision_tower",
                                      "vision_model",
                                      "vit_model",
                                      "image_encoder",
                                      "vision_encoder",
                                      "audio_tower",
                                      "audio_encoder",
                                      "audio_model",
                                      "embed_vision",
                                      "embed_audio",
                                      "mm_projector",
                                      "aligner",
                                      "multi_modal_projector",
                                      "multimodal_projector",
                                      "vision_projector",
                                      "vit_large_projector",
                                      "audio_projector"};
  const char *a = fqn != NULL ? tpx__fqn_last_atom(fqn) : NULL;
  for (size_t i = 0; a != NULL && i < sizeof names / sizeof names[0]; i++)
    if (strcmp(a, names[i]) == 0)
      return 1;
  return 0;
}

/* get_text_module(model.model): its language_model, text_model or
 * text_decoder child when it has one, else "model" itself (or -1). */
static int64_t text_module(const tpx_model *model) {
  static const char *const texts[] = {"model.language_model",
                                      "model.text_model", "model.text_decoder"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    int64_t m = tpx_model_find_module(model, texts[i]);
    if (m > 0)
      return m;
  }
  return tpx_model_find_module(model, "model");
}

/* 1 when module m has a parameter at or below it. */
static int holds_params(const tpx_model *model, int64_t m) {
  size_t np = tpx_model_num_params(model);
  for (size_t p = 0; p < np; p++)
    for (int64_t pm = tpx__mv_param(model, (int64_t)p)->module; pm >= 0;
         pm = tpx__mv_parent(model, pm))
      if (pm == m)
        return 1;
  return 0;
}

/* The maximal multimodal modules holding parameters, each a unit of its
 * own (apply_fsdp's iter_multimodal_modules, trainable). */
static int mm_units(const tpx_sharding *sh, void *vec,
                    int (*push)(void *vec, int64_t module, int64_t group,
                                int reshard, int on_moe)) {
  const tpx_model *model = sh->model;
  size_t nm = tpx_model_num_modules(model);
  for (size_t m = 1; m < nm; m++) {
    int inside = 0;
    if (!tpx__ep_multimodal_name(tpx_model_module_fqn(model, (int64_t)m)))
      continue;
    for (int64_t a = tpx__mv_parent(model, (int64_t)m); a > 0 && !inside;
         a = tpx__mv_parent(model, a))
      inside = tpx__ep_multimodal_name(tpx_model_module_fqn(model, a));
    if (inside || !holds_params(model, (int64_t)m))
      continue;
    if (push(vec, (int64_t)m, -1, 0, 0) != 0)
      return -1;
  }
  return 0;
}

int tpx__ep_units(const tpx_sharding *sh, const int64_t *blocks,
                  size_t num_blocks, void *vec,
                  int (*push)(void *vec, int64_t module, int64_t group,
                              int reshard, int on_moe)) {
  const tpx_model *model = sh->model;
  if (sh->ep <= 1)
    return 0;
  const int block_reshard = sh->opts.reshard_after_forward > 0;
  for (size_t b = 0; b < num_blocks; b++)
    if (dtype_units(sh, blocks[b], block_reshard, vec, push) != 0)
      return -1;
  if (sh->ep_fsdp) {
    int64_t last = -1;
    for (size_t p = 0; p < sh->num_params; p++) {
      if (!sh->param_moe[p])
        continue;
      int64_t m = tpx__mv_param(model, (int64_t)p)->module;
      if (m == last || m <= 0)
        continue;
      int seen = 0;
      for (size_t q = 0; q < p && !seen; q++)
        seen =
            sh->param_moe[q] && tpx__mv_param(model, (int64_t)q)->module == m;
      last = m;
      if (seen)
        continue;
      int r = sh->opts.reshard_after_forward >= 0
                  ? sh->opts.reshard_after_forward != 0
                  : 1;
      if (push(vec, m, -1, r, 1) != 0)
        return -1;
    }
  }
  if (mm_units(sh, vec, push) != 0)
    return -1;
  /* apply_fsdp's fully_shard(_model): the inner model (its text module
   * when it has one) is a unit, unless lm_head (outside it) is tied to a
   * table inside it. */
  int64_t inner = text_module(model);
  int64_t head = tpx_model_find_module(model, "lm_head");
  /* apply_fsdp's fully_shard(embed_norm): the text module's embedding norm
   * (Inkling's), which the outer forward calls before the text module. */
  if (inner > 0) {
    char fqn[512];
    const char *in = tpx_model_module_fqn(model, inner);
    int64_t en = -1;
    if (in != NULL &&
        (size_t)snprintf(fqn, sizeof fqn, "%s.embed_norm", in) < sizeof fqn)
      en = tpx_model_find_module(model, fqn);
    if (en > 0 && holds_params(model, en) && push(vec, en, -1, 0, 0) != 0)
      return -1;
  }
  if (inner > 0 && !(head > 0 && tied_across(model, inner, head)) &&
      push(vec, inner, -1, 0, 0) != 0)
    return -1;
  return 0;
}
