/* tpxp_plans.c — plan tables several families share: the Ministral3-shaped
 * decoder plan that _parallelize_ministral3, _parallelize_gemma3,
 * _parallelize_muse_glimmer and _parallelize_nemotron_labs_diffusion write
 * alike, relative to a prefix (docs/SEMANTICS.md "Family plans"). */
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
static const tpxp_rule m3_sp1[] = {
    TPXP_VOCAB("embed_tokens", .in = TPXP_R, .out = TPXP_S1,
               .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("layers.*.self_attn.o_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("layers.*.mlp.down_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
};

const tpxp_rule tpxp_m3_norms_sp[3] = {
    TPXP_SEQ("norm"),
    TPXP_SEQ_AG("layers.*.input_layernorm", .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ_AG("layers.*.post_attention_layernorm",
                .local = TPXP_KEEP_DTENSOR),
};

int tpxp_add_m3_head(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *head, int sp) {
  /* Vocab-sharded DTensor logits for the vocab-parallel loss. */
  const tpxp_rule r = TPXP_COL(head, .in = sp ? TPXP_S1 : NULL,
                               .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR,
                               .rooted = 1);
  return tpxp_add_rules(host, ctx, NULL, &r, 1);
}

int tpxp_add_m3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *prefix, const char *head, int sp,
                     const tpxp_rule *sp_tail, size_t n_tail) {
  TPXP_CHK(tpxp_add_rules(host, ctx, prefix, tpxp_m3_sp0, TPXP_M3_BODY));
  TPXP_CHK(tpxp_add_m3_head(host, ctx, head, 0));
  if (!sp)
    return TPX_PLUGIN_OK;
  TPXP_CHK(TPXP_ADD_RULES(host, ctx, prefix, m3_sp1));
  TPXP_CHK(tpxp_add_m3_head(host, ctx, head, 1));
  return tpxp_add_rules(host, ctx, prefix, sp_tail, n_tail);
}
