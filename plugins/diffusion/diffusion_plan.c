/* diffusion_plan.c — the TP plans of the diffusion family (docs/DIFFUSION.md).
 *
 * Wan: the strategy's fixed parallelize_module calls, flattened into FQN
 * keys in upstream order. Group one, the condition embedders:
 * text_embedder and time_embedder {linear_1: colwise, linear_2: rowwise},
 * time_proj colwise on the module itself; group two: every block's
 * {ffn.net.0.proj: colwise, ffn.net.2: rowwise}, then proj_out rowwise on
 * the module itself. Torch's default layouts throughout. Upstream guards
 * each call with hasattr and each group with a try/except (best effort), so
 * every key is optional: a variant without the module is skipped silently,
 * never an error. tp_shard_plan and sequence_parallel are ignored.
 *
 * QwenImage: the class has no plan function and no Hugging Face tp plan, so
 * the Default flow falls back to the default base plan (docs/SEMANTICS.md "Family plans"); its keys
 * (model.layers.*, lm_head) match no module of the Diffusers tree and
 * parallelize_module only warns, which Automodel silences. Every key is
 * therefore optional here. Hunyuan and LTX2 have no plan at all. */
#include "diffusion.h"

int dfx_wan_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const tpx_plugin_plan_request *req) {
  static const tpxp_rule rules[] = {
    TPXP_COL("condition_embedder.text_embedder.linear_1"),
    TPXP_ROW("condition_embedder.text_embedder.linear_2"),
    TPXP_COL("condition_embedder.time_embedder.linear_1"),
    TPXP_ROW("condition_embedder.time_embedder.linear_2"),
    TPXP_COL("condition_embedder.time_proj"),
    TPXP_COL("blocks.*.ffn.net.0.proj"),
    TPXP_ROW("blocks.*.ffn.net.2"),
    TPXP_ROW("proj_out"),
};
  int st = TPX_PLUGIN_OK;
  /* a fixed set of calls at every tp, sp ignored */
  if (host->plan_set_function != NULL)
    st = host->plan_set_function(ctx, "wan (WanParallelizationStrategy)");
  if (st == TPX_PLUGIN_OK)
    st = TPXP_ADD_RULES_OPTIONAL(host, ctx, "", rules);
  return st;
}

int dfx_default_base_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const tpx_plugin_plan_request *req) {
  static const tpxp_rule base[] = {
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R),
    TPXP_COL("model.layers.*.self_attn.q_proj"),
    TPXP_COL("model.layers.*.self_attn.k_proj"),
    TPXP_COL("model.layers.*.self_attn.v_proj"),
    TPXP_COL("model.layers.*.self_attn.qkv_proj"),
    TPXP_ROW("model.layers.*.self_attn.o_proj"),
    TPXP_COL("model.layers.*.mlp.gate_up_proj"),
    TPXP_COL("model.layers.*.mlp.up_proj"),
    TPXP_COL("model.layers.*.mlp.gate_proj"),
    TPXP_ROW("model.layers.*.mlp.down_proj"),
    TPXP_COL("lm_head", .out = TPXP_R),
};
  /* The sequence-parallel overrides replace keys in place, then append the
   * plain SequenceParallel norms (the shared tables, under "model"). */
  static const tpxp_rule head[2] = TPXP_HEAD_REPLICATED("lm_head");
  int st = TPX_PLUGIN_OK;
  if (host->plan_set_function != NULL)
    st = host->plan_set_function(ctx, "default_base_plan");
  if (st == TPX_PLUGIN_OK)
    st = TPXP_ADD_RULES_OPTIONAL(host, ctx, "", base);
  if (st != TPX_PLUGIN_OK || !req->sequence_parallel)
    return st;
  TPXP_CHK(tpxp_add_rules_optional(host, ctx, "model", tpxp_m3_sp1,
                                   TPXP_M3_SP));
  TPXP_CHK(tpxp_add_rules_optional(host, ctx, NULL, &head[1], 1));
  return tpxp_add_rules_optional(host, ctx, "model", tpxp_m3_norms_seq,
                                 TPXP_N_OF(tpxp_m3_norms_seq));
}
