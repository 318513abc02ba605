/* diffusion_plan.c — the TP plans of the diffusion family (plans.md §4.9).
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
 * the Default flow falls back to the default base plan (§3.15); its keys
 * (model.layers.*, lm_head) match no module of the Diffusers tree and
 * parallelize_module only warns, which Automodel silences. Every key is
 * therefore optional here. Hunyuan and LTX2 have no plan at all. */
#include "diffusion.h"

int dfx_wan_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  static const tpxp_rule rules[] = {
      {"condition_embedder.text_embedder.linear_1", "colwise", NULL, NULL,
       TPXP_DEF, 1, 1},
      {"condition_embedder.text_embedder.linear_2", "rowwise", NULL, NULL,
       TPXP_DEF, 1, 1},
      {"condition_embedder.time_embedder.linear_1", "colwise", NULL, NULL,
       TPXP_DEF, 1, 1},
      {"condition_embedder.time_embedder.linear_2", "rowwise", NULL, NULL,
       TPXP_DEF, 1, 1},
      {"condition_embedder.time_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 1},
      {"blocks.*.ffn.net.0.proj", "colwise", NULL, NULL, TPXP_DEF, 1, 1},
      {"blocks.*.ffn.net.2", "rowwise", NULL, NULL, TPXP_DEF, 1, 1},
      {"proj_out", "rowwise", NULL, NULL, TPXP_DEF, 1, 1},
  };
  int st = TPX_PLUGIN_OK;
  if (host->plan_set_function != NULL)
    st = host->plan_set_function(ctx, "wan (WanParallelizationStrategy)");
  if (st == TPX_PLUGIN_OK)
    st = tpxp_add_rules(host, ctx, "", rules, sizeof rules / sizeof rules[0]);
  return st;
}

int dfx_default_base_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          int sequence_parallel) {
  static const tpxp_rule base[] = {
      {"model.embed_tokens", "vocab_parallel_embedding", TPXP_R, NULL,
       TPXP_DEF, 1, 1},
      {"model.layers.*.self_attn.q_proj", "colwise", NULL, NULL, TPXP_DEF, 1,
       1},
      {"model.layers.*.self_attn.k_proj", "colwise", NULL, NULL, TPXP_DEF, 1,
       1},
      {"model.layers.*.self_attn.v_proj", "colwise", NULL, NULL, TPXP_DEF, 1,
       1},
      {"model.layers.*.self_attn.qkv_proj", "colwise", NULL, NULL, TPXP_DEF,
       1, 1},
      {"model.layers.*.self_attn.o_proj", "rowwise", NULL, NULL, TPXP_DEF, 1,
       1},
      {"model.layers.*.mlp.gate_up_proj", "colwise", NULL, NULL, TPXP_DEF, 1,
       1},
      {"model.layers.*.mlp.up_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 1},
      {"model.layers.*.mlp.gate_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 1},
      {"model.layers.*.mlp.down_proj", "rowwise", NULL, NULL, TPXP_DEF, 1, 1},
      {"lm_head", "colwise", NULL, TPXP_R, TPXP_DEF, 1, 1},
  };
  /* The sequence-parallel overrides replace keys in place, then append the
   * plain SequenceParallel norms. */
  static const tpxp_rule sp[] = {
      {"model.embed_tokens", "vocab_parallel_embedding", TPXP_R, TPXP_S1, 0,
       1, 1},
      {"model.layers.*.self_attn.o_proj", "rowwise", NULL, TPXP_S1, 0, 1, 1},
      {"model.layers.*.mlp.down_proj", "rowwise", NULL, TPXP_S1, 0, 1, 1},
      {"lm_head", "colwise", TPXP_S1, TPXP_R, TPXP_DEF, 1, 1},
      {"model.norm", "sequence_parallel", NULL, NULL, TPXP_DEF, 1, 1},
      {"model.layers.*.input_layernorm", "sequence_parallel", NULL, NULL,
       TPXP_DEF, 1, 1},
      {"model.layers.*.post_attention_layernorm", "sequence_parallel", NULL,
       NULL, TPXP_DEF, 1, 1},
  };
  int st = TPX_PLUGIN_OK;
  if (host->plan_set_function != NULL)
    st = host->plan_set_function(ctx, "default_base_plan");
  if (st == TPX_PLUGIN_OK)
    st = tpxp_add_rules(host, ctx, "", base, sizeof base / sizeof base[0]);
  if (st == TPX_PLUGIN_OK && sequence_parallel)
    st = tpxp_add_rules(host, ctx, "", sp, sizeof sp / sizeof sp[0]);
  return st;
}
