/* baichuan.c — the tpx_baichuan family plugin: NeMo Automodel's
 * _parallelize_baichuan (docs/SEMANTICS.md "Family plans") and the
 * Baichuan(2)-7B style skeleton (fused W_pack attention, NormHead lm_head).
 *
 * Only the MLP is sharded; attention and the head stay replicated:
 * - W_pack is one Linear whose output is [Q | K | V] concatenated (not
 *   interleaved per head), so a plain Shard(0) would hand each rank a
 *   contiguous slice mixing Q, K and V rows wrongly;
 * - lm_head is a custom NormHead (it normalises its weight rows), not an
 *   nn.Linear, and ColwiseParallel only accepts nn.Linear / nn.Embedding.
 * With no attention keys planned, no head-count update happens. */
#include <string.h>

#include "tpxp_common.h"

static const char *const k_archs[] = {
    "nemo_automodel.components.models.baichuan.model.BaichuanForCausalLM",
    "BaichuanForCausalLM", NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "baichuan",
      .version = "1.0.0",
      .description =
          "Baichuan: BaichuanForCausalLM, MLP only. Attention stays "
          "replicated because W_pack's output is [Q|K|V] concatenated (a "
          "Shard(0) slice would mix Q/K/V rows); lm_head stays replicated "
          "because NormHead is not an nn.Linear. Sequence parallel is ignored",
      .architectures = k_archs,
      .plans = NULL,
      .traits = NULL,
  };
  return tpxp_register(host, info, &desc);
}

static const tpxp_rule k_baichuan[] = {
    TPXP_COL("model.layers.*.mlp.gate_proj"),
    TPXP_COL("model.layers.*.mlp.up_proj"),
    TPXP_ROW("model.layers.*.mlp.down_proj"),
};

int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  int st = tpxp_plain_plan_request(host, ctx, req, "baichuan");
  if (st != TPX_PLUGIN_OK)
    return st;
  if (!tpxp_arch_is(req->architecture, "BaichuanForCausalLM"))
    return tpxp_not_served(host, ctx, "baichuan", req->architecture);
  /* Like upstream's plan function, get_plan never looks at tp or the head
   * counts: validate_tp_mesh (docs/SEMANTICS.md "Plan selection") still
   * asserts on them although no attention key is planned, and the host runs
   * it before selection for every plan source (heads-not-divisible). */
  /* sequence_parallel is ignored upstream. */
  st = TPXP_ADD_RULES(host, ctx, "", k_baichuan);
  if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
    host->plan_set_function(ctx, "baichuan");
  return st;
}

/* Module order as the Baichuan remote code builds it: embed_tokens, layers
 * (self_attn {W_pack, o_proj, rotary_emb}, mlp {gate_proj, down_proj,
 * up_proj}, input_layernorm, post_attention_layernorm), norm; lm_head
 * (NormHead, weight [vocab, hidden]: a plain weight on a non-Linear
 * module). */
int tpx_plugin_get_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  tpxp_decoder d;
  if (!tpxp_arch_is(architecture, "BaichuanForCausalLM"))
    return tpxp_not_served(host, ctx, "baichuan", architecture);
  memset(&d, 0, sizeof d);
  TPXP_CHK(tpxp_decoder_read(host, ctx, "", 0, &d));
  {
    int64_t h = d.hidden, in = d.intermediate;
    const tpxp_sk_row head[] = {
        TPXP_SK_EMB("model.embed_tokens", d.vocab, h),
        TPXP_SK_MOD("model.layers", "container"),
    };
    const tpxp_sk_row layer[] = {
        TPXP_SK_LIN("self_attn.W_pack", h, 3 * h, 0),
        TPXP_SK_LIN("self_attn.o_proj", h, h, 0),
        TPXP_SK_MOD("self_attn.rotary_emb", "rotary"),
        TPXP_SK_LIN("mlp.gate_proj", h, in, 0),
        TPXP_SK_LIN("mlp.down_proj", in, h, 0),
        TPXP_SK_LIN("mlp.up_proj", h, in, 0),
        TPXP_SK_NRM("input_layernorm", h, 0),
        TPXP_SK_NRM("post_attention_layernorm", h, 0),
    };
    const tpxp_sk_row tail[] = {
        TPXP_SK_NRM("model.norm", h, 0),
        TPXP_SK_MOD("lm_head", "other"),
        TPXP_SK_PRM("lm_head", "weight", d.vocab, h),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "", head, NULL));
    TPXP_CHK(TPXP_SK_LAYERS(host, ctx, "model", d.layers, layer, NULL));
    return TPXP_SK_ROWS(host, ctx, "", tail, NULL);
  }
}
