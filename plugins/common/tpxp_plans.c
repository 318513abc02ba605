/* tpxp_plans.c — plan tables several families share: the Ministral3-shaped
 * decoder plan that _parallelize_ministral3, _parallelize_gemma3,
 * _parallelize_muse_glimmer, _parallelize_nemotron_labs_diffusion and
 * get_decilm_nemotron_tp_plan write alike, relative to a prefix; its
 * sequence-parallel update is also the default base plan's
 * (docs/SEMANTICS.md "Family plans"). */
#include "tpxp_common.h"

/* sp off, in upstream insertion order (the head comes after). */
const tpxp_rule tpxp_m3_sp0[TPXP_M3_BODY] = {
    TPXP_VOCAB("embed_tokens", .in = TPXP_R),
    TPXP_COL("layers.*.self_attn.q_proj"),
    TPXP_COL("layers.*.self_attn.k_proj"),
    TPXP_COL("layers.*.self_attn.v_proj"),
    TPXP_ROW("layers.*.self_attn.o_proj"),
    TPXP_COL("layers.*.mlp.up_proj"),
    TPXP_COL("layers.*.mlp.gate_proj"),
    TPXP_ROW("layers.*.mlp.down_proj"),
};

/* sp on: a dict update of the above (the keys keep their places). */
const tpxp_rule tpxp_m3_sp1[TPXP_M3_SP] = {
    TPXP_VOCAB("embed_tokens", .in = TPXP_R, .out = TPXP_S1,
               .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("layers.*.self_attn.o_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("layers.*.mlp.down_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
};

const tpxp_rule tpxp_m3_norms_seq[3] = {
    TPXP_SEQ("norm"),
    TPXP_SEQ("layers.*.input_layernorm"),
    TPXP_SEQ("layers.*.post_attention_layernorm"),
};

const tpxp_rule tpxp_m3_norms_sp[3] = {
    TPXP_SEQ("norm"),
    TPXP_SEQ_AG("layers.*.input_layernorm", .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ_AG("layers.*.post_attention_layernorm",
                .local = TPXP_KEEP_DTENSOR),
};

int tpxp_add_m3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *prefix, const tpxp_rule head[2], int sp,
                     const tpxp_rule *sp_tail, size_t n_tail) {
  TPXP_CHK(tpxp_add_rules(host, ctx, prefix, tpxp_m3_sp0, TPXP_M3_BODY));
  TPXP_CHK(tpxp_add_rules(host, ctx, prefix, &head[0], 1));
  if (!sp)
    return TPX_PLUGIN_OK;
  TPXP_CHK(tpxp_add_rules(host, ctx, prefix, tpxp_m3_sp1, TPXP_M3_SP));
  TPXP_CHK(tpxp_add_rules(host, ctx, prefix, &head[1], 1));
  return tpxp_add_rules(host, ctx, prefix, sp_tail, n_tail);
}
