/* tp_param.c — parameters replicated over tp whose gradient is partial
 * (tpx/runtime_tp.h): the params of modules whose style runs them on
 * sequence-sharded activations (SequenceParallel and its norm variants),
 * and the all-reduce over tp DTensor runs on their gradients
 * (docs/SEMANTICS.md "Transitions"); also unstyled per-head q / k norms beside
 * colwise projections (shard/partial_grad.c), which upstream never reduces.
 * Not here: FSDP reduction and grad norms (the runtime object). */
#include "tp/tp_internal.h"
#include "shard/sharding_view.h"
#include "comm/comm_view.h"

int tpx_tp_param_grad_needs_allreduce(const tpx_sharding *sh, int64_t param) {
  if (!sh || param < 0 || (size_t)param >= tpx__sv_num_params(sh))
    return 0;
  if (!tpx__sv_tp_applied(sh) || tpx__sv_tp_dim(sh) < 0 ||
      tpx__tp_size(sh) <= 1)
    return 0;
  tpx_param_info pi;
  if (tpx_model_param(tpx_sharding_model(sh), param, &pi, NULL) != TPX_OK)
    return 0;
  if (pi.tied_to >= 0 && (size_t)pi.tied_to < tpx__sv_num_params(sh)) {
    param = pi.tied_to;
    if (tpx_model_param(tpx_sharding_model(sh), param, &pi, NULL) != TPX_OK)
      return 0;
  }
  tpx_placement p = tpx__sv_placement(sh, param, tpx__sv_tp_dim(sh));
  if (p.kind != TPX_REPLICATE)
    return 0;
  if (tpx__param_partial_over_tp(sh, param, NULL))
    return 1; /* q/k norms */
  int64_t e = tpx__sv_param_entry(sh, param);
  if (tpx__sv_param_styled(sh, param) < 0 || e < 0)
    return 0;
  switch (tpx__sv_entry_style(sh, e)->kind) {
  case TPX_STYLE_SEQUENCE_PARALLEL:
  case TPX_STYLE_QK_NORM_SEQUENCE_PARALLEL:
  case TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION: return 1;
  default: return 0;
  }
}

static tpx_status clocked_tp_param_grad_allreduce(const tpx_sharding *sh,
                                                  tpx_mesh_comm *mc,
                                                  int64_t param,
                                                  tpx_tensor *grad,
                                                  tpx_error *err) {
  const char *w = "tpx_tp_param_grad_allreduce";
  TPX__TRY(tpx__tp_check_comm(sh, mc, w, err));
  if (param < 0 || (size_t)param >= tpx__sv_num_params(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: parameter index %lld outside 0..%zu", w,
                         (long long)param, tpx__sv_num_params(sh) - 1);
  TPX__TRY(tpx_tensor_check(grad, "gradient", err));
  if (!tpx_tp_param_grad_needs_allreduce(sh, param))
    return TPX_OK;
  int64_t n = tpx_tensor_numel(grad);
  return tpx_comm_all_reduce(tpx__tp_comm(sh, mc), grad->data, grad->data,
                             (size_t)n, grad->dtype, TPX_REDUCE_SUM, err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_tp_param_grad_allreduce(const tpx_sharding *sh,
                                       tpx_mesh_comm *mc, int64_t param,
                                       tpx_tensor *grad, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_param_grad_allreduce(sh, mc, param, grad, err));
}
