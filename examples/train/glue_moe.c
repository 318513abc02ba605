/* glue_moe.c — where an MoE layer meets the runtime, for both glues: the
 * ep group's comm the dispatch runs over, and the FSDP2 hooks of a layer's
 * experts module when the runtime made it a unit of its own (at ep > 1:
 * an FSDP unit over ep_shard, or a unit of the runtime's own; docs/RUNTIME.md
 * "Expert parallelism"). Without a
 * runtime (tpx-train-ref) ep is 1 and there are no units. */
#include <stdio.h>

#include "glue_impl.h"

tpx_comm *tr_rank_ep_comm(tr_rank *r) {
  tpx_runtime *rt = tr_rank_runtime(r);
  return rt ? tpx_runtime_ep_comm(rt) : NULL;
}

tpx_status tr_experts_hook(tr_rank *r, int64_t l, int backward, int post,
                           tpx_error *err) {
  tpx_runtime *rt = tr_rank_runtime(r);
  char layer[64], experts[96];
  size_t ul, ue;
  if (!rt)
    return TPX_OK;
  snprintf(layer, sizeof layer, "model.layers.%lld", (long long)l);
  snprintf(experts, sizeof experts, "%s.mlp.experts", layer);
  /* hooks on a module of the layer's own unit would reshard or reduce the
   * whole layer in its middle */
  if (tpx_runtime_module_unit(rt, layer, &ul, NULL) ||
      tpx_runtime_module_unit(rt, experts, &ue, NULL) || ul == ue)
    return TPX_OK;
  if (backward)
    return post ? tpx_runtime_post_backward(rt, experts, err)
                : tpx_runtime_pre_backward(rt, experts, err);
  return post ? tpx_runtime_post_forward(rt, experts, err)
              : tpx_runtime_pre_forward(rt, experts, err);
}
