/* baichuan.c — the tpx_baichuan family plugin: NeMo Automodel's
 * _parallelize_baichuan (spec/plans.md §3.3) and the Baichuan(2)-7B style
 * skeleton (fused W_pack attention, NormHead lm_head).
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
  int st;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "baichuan plugin: bad plan request");
  if (req->plan_name != NULL)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "baichuan plugin: no named plan '%s'", req->plan_name);
  if (!tpxp_arch_is(req->architecture, "BaichuanForCausalLM"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "baichuan plugin: architecture '%s' is not served",
                     req->architecture != NULL ? req->architecture : "(null)");
  /* Like upstream's plan function, get_plan never looks at tp or the head
   * counts: validate_tp_mesh (spec/plans.md §4.5) still asserts on them
   * although no attention key is planned, and the host runs it before
   * selection for every plan source (heads-not-divisible). */
  /* sequence_parallel is ignored upstream. */
  st = tpxp_add_rules(host, ctx, "", k_baichuan, TPXP_N_OF(k_baichuan));
  if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
    host->plan_set_function(ctx, "baichuan");
  return st;
}

/* Module order as the Baichuan remote code builds it: embed_tokens, layers
 * (self_attn {W_pack, o_proj, rotary_emb}, mlp {gate_proj, down_proj,
 * up_proj}, input_layernorm, post_attention_layernorm), norm; lm_head
 * (NormHead, weight [vocab, hidden]). */
int tpx_plugin_get_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  char f[TPXP_FQN_MAX];
  tpxp_decoder d;
  int64_t i;
  int st;
  if (!tpxp_arch_is(architecture, "BaichuanForCausalLM"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "baichuan plugin: no skeleton for '%s'",
                     architecture != NULL ? architecture : "(null)");
  memset(&d, 0, sizeof d);
  if ((st = tpxp_decoder_read(host, ctx, "", 0, &d)))
    return st;
  if ((st = tpxp_sk_embedding(host, ctx, "model.embed_tokens", d.vocab,
                              d.hidden, NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.layers", "container")))
    return st;
  for (i = 0; i < d.layers; i++) {
    long long L = (long long)i;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.W_pack", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, 3 * d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.o_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.rotary_emb", L);
    if ((st = tpxp_sk_module(host, ctx, f, "rotary")))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.mlp.gate_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, d.intermediate, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.mlp.down_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.intermediate, d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.mlp.up_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, d.intermediate, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.input_layernorm", L);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.post_attention_layernorm", L);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, NULL)))
      return st;
  }
  if ((st = tpxp_sk_norm(host, ctx, "model.norm", d.hidden, 0, NULL)))
    return st;
  /* NormHead: a plain weight on a non-Linear module. */
  if ((st = tpxp_sk_module(host, ctx, "lm_head", "other")))
    return st;
  return tpxp_sk_param(host, ctx, "lm_head", "weight", d.vocab, d.hidden, NULL);
}
