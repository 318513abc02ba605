/* sharding.c — tpx_sharding: creation (match -> apply -> FSDP -> bytes),
 * destruction and the per-parameter / per-module queries.
 *
 * The steps themselves live in apply.c, transitions.c, fsdp.c and bytes.c;
 * this file wires them and answers questions. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_view.h"
#include "shard/shard_internal.h"
#include "shard/selection_opts.h"
#include "tpx/select.h"

static int dim_of(const tpx_mesh *mesh, const char *name) {
  if (!name || !*name)
    return -1;
  return tpx_mesh_dim_index(mesh, name);
}

void tpx_sharding_destroy(tpx_sharding *sh) {
  if (!sh)
    return;
  tpx__fsdp_free(sh);
  tpx_plan_destroy(sh->plan);
  tpx_mesh_destroy(sh->moe_mesh);
  free(sh->param_moe);
  free(sh->moe_placements);
  free(sh->placements);
  free(sh->param_entry);
  free(sh->param_styled);
  free(sh->param_unit);
  free(sh->param_dtype);
  free(sh->reduce_dtype);
  free(sh->param_fp32);
  for (size_t i = 0; i < sh->num_fp32; i++) free(sh->fp32_patterns[i]);
  free(sh->fp32_patterns);
  free(sh->fp32_matched);
  free(sh->module_entry);
  free(sh->module_cover);
  free(sh->entry_keys);
  free(sh->entry_styles);
  free(sh->entry_kinds);
  free(sh->tied_params);
  free(sh->tsets);
  free(sh->tset_valid);
  free(sh->rank_bytes);
  free(sh->rank_peak);
  free(sh->rank_state);
  tpx_diag_list_destroy(sh->diags);
  free(sh);
}

static tpx_status alloc_arrays(tpx_sharding *sh, tpx_error *err) {
  size_t np = sh->num_params ? sh->num_params : 1;
  size_t nm = sh->num_modules ? sh->num_modules : 1;
  size_t ne = sh->num_entries ? sh->num_entries : 1;
  size_t nw = (size_t)sh->world;
  sh->placements = calloc(np * (size_t)sh->ndim, sizeof *sh->placements);
  sh->param_entry = malloc(np * sizeof *sh->param_entry);
  sh->param_styled = malloc(np * sizeof *sh->param_styled);
  sh->param_unit = malloc(np * sizeof *sh->param_unit);
  sh->param_dtype = calloc(np, 1);
  sh->reduce_dtype = calloc(np, 1);
  sh->module_entry = malloc(nm * sizeof *sh->module_entry);
  sh->module_cover = malloc(nm * sizeof *sh->module_cover);
  sh->tsets = calloc(ne * 2, sizeof *sh->tsets);
  sh->tset_valid = calloc(ne * 2, sizeof *sh->tset_valid);
  sh->rank_bytes = calloc(nw, sizeof *sh->rank_bytes);
  sh->entry_keys = calloc(ne, sizeof *sh->entry_keys);
  sh->entry_styles = calloc(ne, sizeof *sh->entry_styles);
  sh->entry_kinds = calloc(ne, 1);
  sh->rank_peak = calloc(nw, sizeof *sh->rank_peak);
  if (!sh->placements || !sh->param_entry || !sh->param_styled ||
      !sh->param_unit || !sh->param_dtype || !sh->reduce_dtype ||
      !sh->module_entry || !sh->module_cover || !sh->tsets || !sh->tset_valid ||
      !sh->rank_bytes || !sh->rank_peak || !sh->entry_keys ||
      !sh->entry_styles || !sh->entry_kinds)
    return tpx__shard_oom(err, "sharding arrays");
  for (size_t e = 0; e < sh->num_entries; e++) {
    tpx_plan_entry pe;
    tpx_status st = tpx_plan_get(sh->plan, e, &pe, err);
    if (st != TPX_OK)
      return st;
    sh->entry_keys[e] = pe.module;
    sh->entry_styles[e] = pe.style;
  }
  for (size_t p = 0; p < sh->num_params; p++) {
    sh->param_entry[p] = -1;
    sh->param_styled[p] = -1;
    sh->param_unit[p] = -1;
  }
  sh->topo_modules = 1;
  for (size_t m = 0; m < sh->num_modules; m++) {
    sh->module_entry[m] = -1;
    sh->module_cover[m] = -1;
    if (m > 0 && tpx__mv_parent(sh->model, (int64_t)m) >= (int64_t)m)
      sh->topo_modules = 0;
  }
  return TPX_OK;
}

/* Transition sets for every (entry, module class) some module uses; the
 * classes come from apply.c (entry_kinds). Transitions tell only embedding
 * from the rest, so a Linear stands for every non-embedding kind. */
static void compute_transitions(tpx_sharding *sh) {
  if (!sh->tp_applied)
    return; /* no hooks are registered at tp == 1 */
  for (size_t e = 0; e < sh->num_entries; e++) {
    for (int emb = 0; emb < 2; emb++) {
      if (!(sh->entry_kinds[e] & (1u << emb)))
        continue;
      size_t slot = e * 2 + (size_t)emb;
      tpx_plan_entry pe;
      if (tpx_plan_get(sh->plan, e, &pe, NULL) != TPX_OK)
        continue;
      tpx__transitions_compute(&pe.style,
                               emb ? TPX_MODULE_EMBEDDING : TPX_MODULE_LINEAR,
                               &sh->tsets[slot]);
      sh->tset_valid[slot] = 1;
    }
  }
}

static tpx_status sharding_build(const tpx_model *model, const tpx_plan *plan,
                                 const tpx_mesh *mesh,
                                 const tpx_sharding_options *opts,
                                 tpx_sharding **out, tpx_error *err);

/* 1 when mesh dim d is one of the dims FSDP shards over. */
static int in_fsdp_run(const tpx_sharding *sh, int d) {
  return sh->dps_dim >= 0 && d >= sh->dps_dim &&
         d < sh->dps_dim + sh->dps_ndims;
}

/* Resolve the FSDP dim or flattened view: absent means no dp_shard (size
 * 1); a view must span consecutive mesh dims, so that the Joined
 * placements after its first dim describe it (tpx/placement.h). */
static tpx_status fsdp_dims(tpx_sharding *sh, const char *name,
                            tpx_error *err) {
  sh->dps_dim = -1;
  sh->dps_ndims = 0;
  sh->dps = 1;
  sh->fsdp_mesh[0] = '\0';
  int dims[TPX_MESH_MAX_DIMS], nd = 0;
  if (!name || !*name ||
      tpx_mesh_view_dims(sh->mesh, name, dims, &nd, NULL) != TPX_OK)
    return TPX_OK;
  for (int i = 1; i < nd; i++)
    if (dims[i] != dims[i - 1] + 1)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_sharding_create: FSDP view \"%s\" spans mesh "
                           "dims that are not consecutive (\"%s\" and "
                           "\"%s\"); flatten adjacent dims such as dp_shard "
                           "and cp",
                           name, tpx_mesh_dim_name(sh->mesh, dims[i - 1]),
                           tpx_mesh_dim_name(sh->mesh, dims[i]));
  sh->dps_dim = dims[0];
  sh->dps_ndims = nd;
  tpx_mesh_size_of(sh->mesh, name, &sh->dps, NULL);
  snprintf(sh->fsdp_mesh, sizeof sh->fsdp_mesh, "%s", name);
  return TPX_OK;
}

/* At tp 1 upstream applies no plan (parallelize_module runs only when the
 * tp mesh is larger than 1, docs/SEMANTICS.md "Plan selection"): the plan
 * is still matched for the report, but what matching finds cannot fail the
 * run, so its errors and warnings are kept as information saying so. */
static tpx_status match_not_applied(tpx_sharding *sh, tpx_error *err) {
  tpx_diag_list *kept = sh->diags, *found = NULL;
  tpx_status st = tpx_diag_list_create(&found, err);
  if (st != TPX_OK)
    return st;
  sh->diags = found;
  st = tpx__apply_tp(sh, err);
  sh->diags = kept;
  for (size_t i = 0; st == TPX_OK && i < tpx_diag_count(found); i++) {
    tpx_diag d;
    st = tpx_diag_get(found, i, &d, err);
    if (st != TPX_OK)
      break;
    if (d.level == TPX_DIAG_INFO)
      st = tpx_diag_add(kept, d.level, d.code, d.subject, d.fix, "%s",
                        d.message);
    else
      st = tpx_diag_add(kept, TPX_DIAG_INFO, d.code, d.subject, d.fix,
                        "not applied at tp 1 (upstream applies no plan "
                        "when tp is 1; this %s would matter at tp > 1): %s",
                        tpx_diag_level_name(d.level), d.message);
    if (st != TPX_OK)
      st = tpx__shard_oom(err, "diagnostics");
  }
  tpx_diag_list_destroy(found);
  return st;
}

tpx_status tpx_sharding_create(const tpx_model *model, const tpx_plan *plan,
                               const tpx_mesh *mesh,
                               const tpx_sharding_options *opts,
                               tpx_sharding **out, tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_create: NULL out");
  *out = NULL;
  if (!model || !mesh)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_create: NULL model or mesh");
  tpx_sharding_options def = TPX_SHARDING_OPTIONS_INIT;
  /* Fields were appended over time: a caller built against an older header
   * passes a shorter struct (at least up to fsdp_unit_reshard); the fields
   * it lacks keep their defaults. */
  const size_t min_size = offsetof(tpx_sharding_options, num_fp32_params);
  if (opts && opts->struct_size < min_size)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_create: options struct_size %zu is "
                         "smaller than %zu (use TPX_SHARDING_OPTIONS_INIT)",
                         opts->struct_size, min_size);
  if (opts) {
    memcpy(&def, opts,
           opts->struct_size < sizeof def ? opts->struct_size : sizeof def);
    def.struct_size = sizeof def;
  }
  /* The selection handed over whole fills what the options leave unset. */
  tpx__selection_opts from_sel = {NULL, NULL, NULL, NULL};
  tpx_status sst = tpx__selection_opts_apply(&def, &plan, &from_sel, err);
  if (sst != TPX_OK) {
    tpx__selection_opts_free(&from_sel);
    return sst;
  }
  opts = &def;
  tpx_status st;
  if (opts->fwd_prefetch_depth < 0 || opts->bwd_prefetch_depth < 0)
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_sharding_create: prefetch depths must be >= 0 "
                       "(got fwd %d, bwd %d)",
                       opts->fwd_prefetch_depth, opts->bwd_prefetch_depth);
  else if (opts->ep < 0 || (opts->num_expert_params && !opts->expert_params))
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_sharding_create: ep %lld (must be >= 0) or "
                       "num_expert_params %zu with NULL expert_params",
                       (long long)opts->ep, opts->num_expert_params);
  else if (opts->num_fsdp_units && !opts->fsdp_units)
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_sharding_create: num_fsdp_units %zu with NULL "
                       "fsdp_units",
                       opts->num_fsdp_units);
  else
    st = sharding_build(model, plan, mesh, opts, out, err);
  tpx__selection_opts_free(&from_sel);
  return st;
}

/* The selection's plan was chosen and validated (heads % tp) for its own
 * tp size: applied on a mesh with another tp it would shard without those
 * checks (e.g. 2 KV heads over tp 4, a quarter head per rank), so the
 * mismatch is refused rather than guessed at. */
static tpx_status selection_tp_matches(const tpx_sharding *sh,
                                       const tpx_sharding_options *opts,
                                       tpx_error *err) {
  int64_t want = opts->selection ? tpx_selection_tp_size(opts->selection) : 0;
  if (!opts->selection || want == sh->tp)
    return TPX_OK;
  char dim[96];
  if (sh->tp_dim >= 0)
    snprintf(dim, sizeof dim, "the mesh's tp dim \"%s\" has size %lld",
             opts->tp_dim, (long long)sh->tp);
  else
    snprintf(dim, sizeof dim, "the mesh has no tp dim \"%s\" (tp 1)",
             opts->tp_dim ? opts->tp_dim : "");
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_sharding_create: the selection was made for tp "
                       "%lld but %s; select the plan with "
                       "tpx_select_options.tp_size = %lld (the mesh's tp), or "
                       "build the mesh with tp %lld",
                       (long long)want, dim, (long long)sh->tp,
                       (long long)want);
}

/* tpx_sharding_create past its argument checks: `opts` is complete. */
static tpx_status sharding_build(const tpx_model *model, const tpx_plan *plan,
                                 const tpx_mesh *mesh,
                                 const tpx_sharding_options *opts,
                                 tpx_sharding **out, tpx_error *err) {
  tpx_sharding *sh = calloc(1, sizeof *sh);
  if (!sh)
    return tpx__shard_oom(err, "sharding");
  sh->model = model;
  sh->mesh = mesh;
  sh->opts = *opts;
  sh->opts.selection = NULL; /* borrowed during create only */
  tpx_status st;
  if (plan)
    st = tpx_plan_clone(plan, &sh->plan, err);
  else
    st = tpx_plan_create(&sh->plan, err);
  if (st == TPX_OK)
    st = tpx_diag_list_create(&sh->diags, err);
  if (st != TPX_OK) {
    tpx_sharding_destroy(sh);
    return st;
  }
  sh->ndim = tpx_mesh_ndim(mesh);
  sh->world = tpx_mesh_world_size(mesh);
  sh->tp_dim = dim_of(mesh, opts->tp_dim);
  sh->dpr_dim = dim_of(mesh, opts->dp_replicate_dim);
  sh->cp_dim = dim_of(mesh, opts->cp_dim);
  sh->cp = sh->cp_dim >= 0 ? tpx_mesh_dim_size(mesh, sh->cp_dim) : 1;
  sh->tp = sh->tp_dim >= 0 ? tpx_mesh_dim_size(mesh, sh->tp_dim) : 1;
  st = fsdp_dims(sh, opts->dp_shard_dim, err);
  if (st != TPX_OK) {
    tpx_sharding_destroy(sh);
    return st;
  }
  sh->dpr = sh->dpr_dim >= 0 ? tpx_mesh_dim_size(mesh, sh->dpr_dim) : 1;
  st = selection_tp_matches(sh, opts, err);
  if (st != TPX_OK) {
    tpx_sharding_destroy(sh);
    return st;
  }
  sh->tp_applied = sh->tp > 1;
  sh->tp_grad_sync = tpx_selection_tp_grad_sync(opts->selection);
  sh->num_params = tpx_model_num_params(model);
  sh->num_modules = tpx_model_num_modules(model);
  sh->num_entries = tpx_plan_size(sh->plan);
  if (sh->world < 1 || sh->world > ((int64_t)1 << 24)) {
    st = tpx_error_set(err, TPX_OUT_OF_RANGE,
                       "tpx_sharding_create: mesh world size %lld is outside "
                       "1..%lld",
                       (long long)sh->world, (long long)1 << 24);
    tpx_sharding_destroy(sh);
    return st;
  }
  if ((sh->tp_dim >= 0 &&
       (in_fsdp_run(sh, sh->tp_dim) || sh->tp_dim == sh->dpr_dim)) ||
      (sh->dpr_dim >= 0 && in_fsdp_run(sh, sh->dpr_dim))) {
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_sharding_create: the tp, dp_shard and "
                       "dp_replicate dim names must name different mesh dims");
    tpx_sharding_destroy(sh);
    return st;
  }
  sh->ep = opts->ep > 1 ? opts->ep : 1;
  sh->ep_shard = 1;
  st = alloc_arrays(sh, err);
  if (st == TPX_OK)
    st = tpx__fp32_mark(sh, err);
  if (st == TPX_OK)
    st = sh->tp_applied ? tpx__apply_tp(sh, err) : match_not_applied(sh, err);
  if (st == TPX_OK)
    st = tpx__partial_grad_diags(sh, err);
  if (st == TPX_OK)
    st = tpx__qk_norm_diags(sh, err);
  if (st == TPX_OK)
    st = tpx__table_version_diags(sh, err);
  if (st == TPX_OK)
    st = tpx__ep_setup(sh, err);
  if (st == TPX_OK) {
    compute_transitions(sh);
    st = tpx__fsdp_build(sh, err);
  }
  if (st == TPX_OK)
    st = tpx__cp_diags(sh, err);
  if (st == TPX_OK)
    st = tpx__bytes_compute(sh, err);
  if (st != TPX_OK) {
    tpx_sharding_destroy(sh);
    return st;
  }
  sh->opts.tp_dim = sh->opts.dp_shard_dim = sh->opts.dp_replicate_dim = NULL;
  sh->opts.cp_dim = NULL;
  sh->opts.fsdp_units = NULL;
  sh->opts.fsdp_unit_reshard = NULL;
  sh->opts.fp32_params = NULL;    /* copied into fp32_patterns */
  sh->opts.num_expert_params = 0; /* applied: param_moe */
  sh->opts.expert_params = NULL;
  *out = sh;
  return TPX_OK;
}

const tpx_model *tpx_sharding_model(const tpx_sharding *sh) {
  return sh ? sh->model : NULL;
}
const tpx_mesh *tpx_sharding_mesh(const tpx_sharding *sh) {
  return sh ? sh->mesh : NULL;
}
const tpx_plan *tpx_sharding_plan(const tpx_sharding *sh) {
  return sh ? sh->plan : NULL;
}
int64_t tpx_sharding_tp_size(const tpx_sharding *sh) { return sh ? sh->tp : 0; }
int64_t tpx_sharding_cp_size(const tpx_sharding *sh) { return sh ? sh->cp : 0; }
const char *tpx_sharding_fsdp_mesh_name(const tpx_sharding *sh, int64_t *size) {
  int on = sh && sh->opts.fsdp && sh->dps_dim >= 0;
  if (size)
    *size = on ? sh->dps : 1;
  return on ? sh->fsdp_mesh : NULL;
}
const tpx_diag_list *tpx_sharding_diagnostics(const tpx_sharding *sh) {
  return sh ? sh->diags : NULL;
}
int tpx_sharding_ok(const tpx_sharding *sh) {
  return sh && tpx_diag_count_at_least(sh->diags, TPX_DIAG_ERROR) == 0;
}

tpx_status tpx_sharding_param(const tpx_sharding *sh, int64_t param,
                              tpx_param_sharding *out, tpx_error *err) {
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_param: NULL argument");
  if (param < 0 || (size_t)param >= sh->num_params)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_sharding_param: parameter index %lld outside "
                         "0..%zu",
                         (long long)param, sh->num_params);
  memset(out, 0, sizeof *out);
  out->param = param;
  out->placements = tpx__param_row(sh, param);
  out->plan_entry = sh->param_entry[param];
  out->plan_key = NULL;
  if (out->plan_entry >= 0) {
    tpx_plan_entry pe;
    if (tpx_plan_get(sh->plan, (size_t)out->plan_entry, &pe, NULL) == TPX_OK)
      out->plan_key = pe.module;
  }
  out->styled_module = sh->param_styled[param];
  out->fsdp_unit = sh->param_unit[param];
  out->param_dtype = (tpx_dtype)sh->param_dtype[param];
  out->reduce_dtype = (tpx_dtype)sh->reduce_dtype[param];
  return TPX_OK;
}

tpx_status tpx_sharding_local_slice(const tpx_sharding *sh, int64_t param,
                                    int64_t rank, tpx_slice *out,
                                    tpx_error *err) {
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_local_slice: NULL argument");
  tpx_param_info pi;
  tpx_status st = tpx_model_param(sh->model, param, &pi, err);
  if (st != TPX_OK)
    return st;
  return tpx_layout_local_slice(pi.shape, pi.ndim, tpx__param_mesh(sh, param),
                                tpx__param_row(sh, param), rank, out, err);
}

int64_t tpx_sharding_ep_size(const tpx_sharding *sh) { return sh ? sh->ep : 0; }
const tpx_mesh *tpx_sharding_moe_mesh(const tpx_sharding *sh) {
  return sh ? sh->moe_mesh : NULL;
}
const tpx_mesh *tpx_sharding_param_mesh(const tpx_sharding *sh, int64_t param) {
  if (!sh || param < 0 || (size_t)param >= sh->num_params)
    return NULL;
  return tpx__param_mesh(sh, param);
}

int64_t tpx_sharding_rank_param_bytes(const tpx_sharding *sh, int64_t rank) {
  if (!sh || rank < 0 || rank >= sh->world)
    return -1;
  return sh->rank_bytes[rank];
}

int64_t tpx_sharding_rank_peak_bytes(const tpx_sharding *sh, int64_t rank) {
  if (!sh || rank < 0 || rank >= sh->world)
    return -1;
  return sh->rank_peak[rank];
}

tpx_status tpx_sharding_module_transitions(const tpx_sharding *sh,
                                           int64_t module,
                                           const tpx_transition **out,
                                           size_t *count, tpx_error *err) {
  if (!sh || !out || !count)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_sharding_module_transitions: NULL argument");
  if (module < 0 || (size_t)module >= sh->num_modules)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_sharding_module_transitions: module index %lld "
                         "outside 0..%zu",
                         (long long)module, sh->num_modules);
  *out = NULL;
  *count = 0;
  int64_t e = sh->module_entry[module];
  if (e < 0)
    return TPX_OK;
  tpx_module_kind k = tpx_model_module_kind(sh->model, module);
  size_t slot = (size_t)e * 2 + (k == TPX_MODULE_EMBEDDING ? 1 : 0);
  if (!sh->tset_valid[slot])
    return TPX_OK;
  *out = sh->tsets[slot].views;
  *count = sh->tsets[slot].count;
  return TPX_OK;
}

int64_t tpx_sharding_module_entry(const tpx_sharding *sh, int64_t module) {
  if (!sh || module < 0 || (size_t)module >= sh->num_modules)
    return -1;
  return sh->module_entry[module];
}
