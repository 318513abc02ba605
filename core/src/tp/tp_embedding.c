/* tp_embedding.c — embedding forward / backward under the style the
 * sharding applied (tpx/runtime_tp.h; docs/SEMANTICS.md "Vocab-parallel
 * embedding and loss"):
 *  - weight Shard(0) over tp: ids outside this rank's rows are masked, the
 *    rest looked up at id - offset, masked rows zero (a Partial sum);
 *    backward scatter-adds the gradient rows of in-range ids only;
 *  - weight Shard(1): a local lookup of this rank's columns (Shard(-1));
 *  - replicated weight: a plain lookup.
 * The output (and its gradient) then goes through the module's output
 * transition. Row ranges come from the layout (torch.chunk, as DTensor's
 * MaskPartial), never from Automodel's divmod fix-up.
 * Buffers (ids, weight, output, gradients) live in the mesh comm's memory
 * space; the lookup, the scatter-add and the id range check are its
 * kernels (device/memspace.h), so device memory works.
 * Not here: the transitions themselves (tp_transition.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "device/kernels.h"
#include "tp/tp_internal.h"
#include "shard/sharding_view.h"

typedef struct emb_plan {
  int64_t param;            /* the weight (storage: a tied alias's target) */
  int64_t V, H;             /* global weight shape */
  tpx_placement wpl;        /* weight placement on tp (normalised) */
  int64_t woff[2], wlen[2]; /* this rank's TP-local box of the weight */
  int has_tr;               /* the module has an output 0 transition */
  int gndim;                /* ids ndim + 1 */
  int64_t gshape[TPX_MAX_TENSOR_DIMS];    /* logical output shape [.., H] */
  int64_t nat_local[TPX_MAX_TENSOR_DIMS]; /* lookup result, local */
  int64_t out_local[TPX_MAX_TENSOR_DIMS]; /* after the transition */
  int64_t bwd_local[TPX_MAX_TENSOR_DIMS]; /* grad after the dual */
  char ctx[256];
} emb_plan;

static tpx_status plan_embed(const tpx_sharding *sh, int64_t module,
                             int64_t rank, const int64_t *ids_shape,
                             int ids_ndim, const char *call, emb_plan *ep,
                             tpx_error *err) {
  memset(ep, 0, sizeof *ep);
  if (!sh || (!ids_shape && ids_ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: NULL argument", call);
  if (module < 0 || (size_t)module >= tpx__sv_num_modules(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: module index %lld outside 0..%zu", call,
                         (long long)module, tpx__sv_num_modules(sh) - 1);
  const char *name = tpx__tp_module_name(sh, module);
  snprintf(ep->ctx, sizeof ep->ctx, "%s of module '%s'", call, name);
  if (ids_ndim < 1 || ids_ndim + 1 > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: ids have %d dims; need 1..%d", ep->ctx, ids_ndim,
                         TPX_MAX_TENSOR_DIMS - 1);
  if (rank < 0 || rank >= tpx__sv_world(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "%s: rank %lld outside 0..%lld",
                         ep->ctx, (long long)rank,
                         (long long)tpx__sv_world(sh) - 1);
  if (tpx_model_module_kind(tpx_sharding_model(sh), module) !=
      TPX_MODULE_EMBEDDING)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: the module is a %s, not an embedding", ep->ctx,
                         tpx_module_kind_name(tpx_model_module_kind(
                             tpx_sharding_model(sh), module)));
  const char *fqn = tpx_model_module_fqn(tpx_sharding_model(sh), module);
  char pname[512];
  snprintf(pname, sizeof pname, "%s%sweight", fqn, fqn[0] ? "." : "");
  int64_t p = tpx_model_find_param(tpx_sharding_model(sh), pname);
  tpx_param_info pi;
  if (p < 0 || tpx_model_param(tpx_sharding_model(sh), p, &pi, NULL) != TPX_OK)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "%s: the model has no parameter '%s'", ep->ctx, pname);
  if (pi.tied_to >= 0) {
    p = pi.tied_to;
    TPX__TRY(tpx_model_param(tpx_sharding_model(sh), p, &pi, err));
  }
  if (pi.ndim != 2)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: weight '%s' has %d dims, expected 2 [V, H]",
                         ep->ctx, pname, pi.ndim);
  ep->param = p;
  ep->V = pi.shape[0];
  ep->H = pi.shape[1];
  int tp_dim = tpx__sv_tp_dim(sh);
  tpx_placement wp = tp_dim >= 0 ? tpx__sv_placement(sh, p, tp_dim)
                                 : tpx_placement_replicate();
  TPX__TRY(tpx_placement_normalize(wp, 2, &ep->wpl, err));
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  tpx__tp_activation_placements(sh, ep->wpl, pl);
  tpx_slice ws;
  TPX__TRY(tpx_layout_local_slice(pi.shape, 2, tpx_sharding_mesh(sh), pl, rank,
                                  &ws, err));
  for (int i = 0; i < 2; i++) {
    ep->woff[i] = ws.offset[i];
    ep->wlen[i] = ws.length[i];
  }
  ep->gndim = ids_ndim + 1;
  for (int i = 0; i < ids_ndim; i++) ep->gshape[i] = ids_shape[i];
  ep->gshape[ids_ndim] = ep->H;
  tpx_placement nat = tpx_placement_replicate();
  if (ep->wpl.kind == TPX_SHARD && ep->wpl.dim == 0)
    nat = tpx_placement_partial(TPX_REDUCE_SUM);
  else if (ep->wpl.kind == TPX_SHARD && ep->wpl.dim == 1)
    nat = tpx_placement_shard(ids_ndim);
  else if (ep->wpl.kind != TPX_REPLICATE)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "%s: weight placement on tp is not Shard(0), "
                         "Shard(1) or Replicate",
                         ep->ctx);
  TPX__TRY(tpx_tp_local_shape(sh, rank, nat, ep->gshape, ep->gndim,
                              ep->nat_local, err));
  memcpy(ep->out_local, ep->nat_local, sizeof ep->out_local);
  memcpy(ep->bwd_local, ep->nat_local, sizeof ep->bwd_local);
  if (tpx__sv_module_entry(sh, module) < 0) {
    if (nat.kind != TPX_REPLICATE)
      return tpx_error_set(err, TPX_INTERNAL,
                           "%s: sharded weight without a style", ep->ctx);
    return TPX_OK; /* unstyled: a plain lookup */
  }
  const tpx_transition *tr;
  TPX__TRY(
      tpx_tp_transition_get(sh, module, TPX_TRANSITION_OUTPUT, 0, &tr, err));
  if (!tr)
    return TPX_OK; /* tp == 1 */
  tpx_placement from;
  TPX__TRY(tpx_placement_normalize(tr->from, ep->gndim, &from, err));
  if (!tr->from_is_none && !tpx_placement_equal(from, nat)) {
    char a[32], b[32];
    tpx_placement_format(tr->from, a, sizeof a);
    tpx_placement_format(nat, b, sizeof b);
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "%s: its output transition starts from %s but the "
                         "lookup with this weight placement produces %s",
                         ep->ctx, a, b);
  }
  ep->has_tr = 1;
  TPX__TRY(tpx_tp_transition_shape(sh, module, TPX_TRANSITION_OUTPUT, 0, 0,
                                   rank, ep->gshape, ep->gndim, NULL,
                                   ep->out_local, err));
  int64_t bin[TPX_MAX_TENSOR_DIMS];
  TPX__TRY(tpx_tp_transition_shape(sh, module, TPX_TRANSITION_OUTPUT, 0, 1,
                                   rank, ep->gshape, ep->gndim, bin,
                                   ep->bwd_local, err));
  for (int i = 0; i < ep->gndim; i++)
    if (bin[i] != ep->out_local[i] || ep->bwd_local[i] != ep->nat_local[i])
      return tpx_error_set(err, TPX_INTERNAL,
                           "%s: backward layouts of the output transition "
                           "do not mirror the forward",
                           ep->ctx);
  return TPX_OK;
}

tpx_status tpx_tp_embedding_shape(const tpx_sharding *sh, int64_t module,
                                  int64_t rank, const int64_t *ids_shape,
                                  int ids_ndim, int64_t *out_local,
                                  int64_t *weight_local, tpx_error *err) {
  if (!out_local)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_embedding_shape: out_local is NULL");
  emb_plan ep;
  TPX__TRY(plan_embed(sh, module, rank, ids_shape, ids_ndim,
                      "tpx_tp_embedding_shape", &ep, err));
  memcpy(out_local, ep.out_local, (size_t)ep.gndim * sizeof *out_local);
  if (weight_local) {
    weight_local[0] = ep.wlen[0];
    weight_local[1] = ep.wlen[1];
  }
  return TPX_OK;
}

static int is_float(tpx_dtype d) {
  return d == TPX_DTYPE_F32 || d == TPX_DTYPE_BF16;
}

/* Checks shared by forward and backward: ids, the weight-shaped tensor,
 * then the range of every id (identical on all tp ranks: ids are
 * replicated). */
static tpx_status check_common(const emb_plan *ep, const tpx__memspace *ms,
                               const tpx_tensor *ids, const tpx_tensor *w,
                               const char *wname, tpx_error *err) {
  if (ids->dtype != TPX_DTYPE_I32 && ids->dtype != TPX_DTYPE_I64)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: ids must be int32 or int64, not %s", ep->ctx,
                         tpx_dtype_short_name(ids->dtype));
  if (!is_float(w->dtype))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: %s must be f32 or bf16, not %s", ep->ctx, wname,
                         tpx_dtype_short_name(w->dtype));
  TPX__TRY(tpx__tp_check_shape(w, ep->wlen, 2, wname, ep->ctx, err));
  /* The memory space's check: one verdict (the first bad position) comes
   * back to the host, the ids themselves are never read here. */
  int64_t n = tpx_tensor_numel(ids), bad[2] = {-1, 0};
  if (n > 0)
    TPX__TRY(tpx__ms_index_check(ms, ids->data, ids->dtype, (size_t)n, ep->V, 0,
                                 0, bad, err));
  if (bad[0] >= 0)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: ids[%lld] = %lld is outside the vocabulary "
                         "[0, %lld)",
                         ep->ctx, (long long)bad[0], (long long)bad[1],
                         (long long)ep->V);
  return TPX_OK;
}

/* Which local weight row an id maps to (masked outside this rank's rows
 * under Shard(0)). */
static tpx__ms_rows rows_of(const emb_plan *ep) {
  tpx__ms_rows r;
  r.masked = ep->wpl.kind == TPX_SHARD && ep->wpl.dim == 0;
  r.off = ep->woff[0];
  r.len = ep->wlen[0];
  return r;
}

static tpx_status
clocked_tp_embedding_forward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                             int64_t module, const tpx_tensor *ids,
                             const tpx_tensor *weight, tpx_tensor *out,
                             tpx_error *err) {
  const char *w = "tpx_tp_embedding_forward";
  TPX__TRY(tpx__tp_check_comm(sh, mc, w, err));
  TPX__TRY(tpx_tensor_check(ids, "ids", err));
  TPX__TRY(tpx_tensor_check(weight, "weight", err));
  TPX__TRY(tpx_tensor_check(out, "output", err));
  emb_plan ep;
  TPX__TRY(plan_embed(sh, module, tpx__tp_my_rank(mc), ids->shape, ids->ndim, w,
                      &ep, err));
  const tpx__memspace *ms = tpx__comm_ms(tpx_mesh_comm_world(mc));
  TPX__TRY(check_common(&ep, ms, ids, weight, "weight", err));
  if (out->dtype != weight->dtype)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: output dtype %s differs from the weight's %s",
                         ep.ctx, tpx_dtype_short_name(out->dtype),
                         tpx_dtype_short_name(weight->dtype));
  TPX__TRY(
      tpx__tp_check_shape(out, ep.out_local, ep.gndim, "output", ep.ctx, err));
  int64_t n = tpx_tensor_numel(ids);
  size_t es = tpx_dtype_size(weight->dtype);
  size_t row = (size_t)ep.wlen[1] * es;
  tpx_tensor nat = tpx_tensor_make(NULL, weight->dtype, ep.gndim, ep.nat_local);
  void *buf = NULL;
  if (ep.has_tr) {
    TPX__TRY(tpx__ms_alloc(ms, (size_t)n * row, 0, &buf, err));
    nat.data = buf;
  } else {
    nat.data = out->data;
  }
  tpx__ms_rows rows = rows_of(&ep);
  tpx_status st = TPX_OK;
  if (n > 0 && row > 0)
    st = tpx__ms_embed_lookup(ms, nat.data, weight->data, row, ids->data,
                              ids->dtype, (size_t)n, &rows, err);
  if (st == TPX_OK && ep.has_tr)
    st = tpx_tp_transition_run(sh, mc, module, TPX_TRANSITION_OUTPUT, 0, 0,
                               ep.gshape, &nat, out, err);
  tpx__ms_free(ms, buf);
  return st;
}

static tpx_status
clocked_tp_embedding_backward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                              int64_t module, const tpx_tensor *ids,
                              const tpx_tensor *grad_out,
                              tpx_tensor *weight_grad, tpx_error *err) {
  const char *w = "tpx_tp_embedding_backward";
  TPX__TRY(tpx__tp_check_comm(sh, mc, w, err));
  TPX__TRY(tpx_tensor_check(ids, "ids", err));
  TPX__TRY(tpx_tensor_check(grad_out, "grad_out", err));
  TPX__TRY(tpx_tensor_check(weight_grad, "weight_grad", err));
  emb_plan ep;
  TPX__TRY(plan_embed(sh, module, tpx__tp_my_rank(mc), ids->shape, ids->ndim, w,
                      &ep, err));
  const tpx__memspace *ms = tpx__comm_ms(tpx_mesh_comm_world(mc));
  TPX__TRY(check_common(&ep, ms, ids, weight_grad, "weight_grad", err));
  if (!is_float(grad_out->dtype))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: grad_out must be f32 or bf16, not %s", ep.ctx,
                         tpx_dtype_short_name(grad_out->dtype));
  TPX__TRY(tpx__tp_check_shape(grad_out, ep.out_local, ep.gndim, "grad_out",
                               ep.ctx, err));
  int64_t n = tpx_tensor_numel(ids);
  int64_t hl = ep.wlen[1];
  tpx_tensor g = *grad_out;
  void *buf = NULL;
  if (ep.has_tr) {
    size_t bytes = (size_t)(n * hl) * tpx_dtype_size(grad_out->dtype);
    TPX__TRY(tpx__ms_alloc(ms, bytes, 0, &buf, err));
    g = tpx_tensor_make(buf, grad_out->dtype, ep.gndim, ep.bwd_local);
    tpx_status st = tpx_tp_transition_run(sh, mc, module, TPX_TRANSITION_OUTPUT,
                                          0, 1, ep.gshape, grad_out, &g, err);
    if (st != TPX_OK) {
      tpx__ms_free(ms, buf);
      return st;
    }
  }
  tpx__ms_rows rows = rows_of(&ep);
  tpx_status st = TPX_OK;
  if (n > 0 && hl > 0)
    st = tpx__ms_embed_scatter_add(ms, weight_grad->data, weight_grad->dtype,
                                   g.data, g.dtype, (size_t)hl, ids->data,
                                   ids->dtype, (size_t)n, &rows, err);
  tpx__ms_free(ms, buf);
  return st;
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_tp_embedding_forward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                    int64_t module, const tpx_tensor *ids,
                                    const tpx_tensor *weight, tpx_tensor *out,
                                    tpx_error *err) {
  TPX__CLOCKED(
      tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
      clocked_tp_embedding_forward(sh, mc, module, ids, weight, out, err));
}

tpx_status tpx_tp_embedding_backward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                     int64_t module, const tpx_tensor *ids,
                                     const tpx_tensor *grad_out,
                                     tpx_tensor *weight_grad, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_embedding_backward(sh, mc, module, ids, grad_out,
                                             weight_grad, err));
}
