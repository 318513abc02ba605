/* ep_cost.c — what expert parallelism costs a rank beyond the parameters
 * (docs/MEMORY.md "Expert parallelism"), as NeMo Automodel 0.7.0's grouped
 * experts run at ep > 1: every MoE layer gathers the tokens of its EP group
 * (variable-length all-gather of the hidden states, the f32 routing
 * weights, the int64 expert ids and the token mask), runs the rank's own
 * experts on them and all-reduces the combined output over ep before
 * keeping its own tokens; backward runs the duals (an all-reduce of the
 * output's gradient, a reduce-scatter of the gathered inputs' and
 * weights').
 *
 * With T = the tokens one rank holds (batch x seq / cp), H hidden, e the
 * activation dtype's bytes, k the experts per token and L the MoE layers:
 *   dispatch (one MoE layer, transient)  ep T (2 H e + 12 k + 1)
 *   saved for backward, no checkpointing L (ep - 1) T (H e + 4 k)
 *   traffic per step                     L (ep - 1) T (6 H e + 16 k + 1)
 * Not the expert parameters' bytes (bytes.c, on the MoE mesh) and not their
 * FSDP gathers (traffic.c, over ep_shard). */
#include <stdlib.h>

#include "model/model_view.h"
#include "shard/activations.h"
#include "shard/shard_internal.h"

/* The experts per token: num_experts_per_tok, else moe_k (ERNIE-4.5), else
 * 1. */
static int64_t top_k(const tpx_model *model) {
  static const char *const keys[] = {"num_experts_per_tok", "moe_k"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    int64_t v = 0;
    if (tpx_model_config_int(model, keys[i], &v, NULL) == TPX_OK && v > 0)
      return v;
  }
  return 1;
}

/* The modules holding expert parameters: one per MoE layer. */
static int64_t moe_layers(const tpx_sharding *sh) {
  int64_t n = 0;
  uint8_t *seen = calloc(sh->num_modules ? sh->num_modules : 1, 1);
  if (!seen)
    return -1;
  for (size_t p = 0; p < sh->num_params; p++) {
    if (!sh->param_moe[p])
      continue;
    int64_t m = tpx__mv_param(sh->model, (int64_t)p)->module;
    if (m >= 0 && (size_t)m < sh->num_modules && !seen[m]) {
      seen[m] = 1;
      n++;
    }
  }
  free(seen);
  return n;
}

tpx_status tpx__ep_costs(const tpx_sharding *sh, const tpx_memory_options *o,
                         int64_t *dispatch, int64_t *saved, int64_t *traffic,
                         tpx_error *err) {
  *dispatch = *saved = *traffic = 0;
  if (sh->ep <= 1 || o->seq <= 0)
    return TPX_OK;
  tpx__act_dims d;
  tpx_status st = tpx__act_dims_read(sh, o, &d, err);
  if (st != TPX_OK)
    return st;
  int64_t layers = moe_layers(sh);
  if (layers < 0)
    return tpx__shard_oom(err, "MoE layers");
  const int64_t k = top_k(sh->model), ep = sh->ep;
  const int64_t he = tpx__sat_mul(d.hidden, d.elem);
  /* per token: gathered hidden + combined output, weights (4) and ids (8)
   * per expert, the mask byte */
  int64_t per_tok =
      tpx__sat_add(tpx__sat_add(tpx__sat_mul(2, he), tpx__sat_mul(12, k)), 1);
  *dispatch = tpx__sat_mul(tpx__sat_mul(ep, d.tokens), per_tok);
  int64_t others = tpx__sat_mul(ep - 1, d.tokens);
  if (!o->activation_checkpointing)
    *saved = tpx__sat_mul(
        layers, tpx__sat_mul(others, tpx__sat_add(he, tpx__sat_mul(4, k))));
  int64_t step_tok =
      tpx__sat_add(tpx__sat_add(tpx__sat_mul(6, he), tpx__sat_mul(16, k)), 1);
  *traffic = tpx__sat_mul(layers, tpx__sat_mul(others, step_tok));
  return TPX_OK;
}
