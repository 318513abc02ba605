/* phi.c — the tpx_phi family plugin: NeMo Automodel's _parallelize_phi
 * (Phi-2, spec/plans.md §3.9) and _parallelize_phi3 (Phi-3, §3.10), with
 * skeletons for both (Phi-2: biases everywhere, LayerNorms, one shared
 * input_layernorm per parallel block; Phi-3: fused qkv_proj / gate_up_proj). */
#include <string.h>

#include "tpxp_common.h"


static const char *const k_archs[] = {
    "transformers.models.phi.modeling_phi.PhiForCausalLM",
    "transformers.models.phi3.modeling_phi3.Phi3ForCausalLM", "PhiForCausalLM",
    "Phi3ForCausalLM", NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "phi",
      .version = "1.0.0",
      .description =
          "Phi family: PhiForCausalLM (Phi-2: dense/fc1/fc2, shared "
          "input_layernorm) and Phi3ForCausalLM (fused qkv_proj kept "
          "numerically replicated, only the MLP sharded; sequence parallel "
          "ignored)",
      .architectures = k_archs,
      .plans = NULL,
  };
  return tpxp_register(host, info, &desc);
}

/* _parallelize_phi, sp off. */
static const tpxp_rule k_phi_sp0[] = {
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R),
    TPXP_COL("model.layers.*.self_attn.q_proj"),
    TPXP_COL("model.layers.*.self_attn.k_proj"),
    TPXP_COL("model.layers.*.self_attn.v_proj"),
    TPXP_ROW("model.layers.*.self_attn.dense"),
    TPXP_COL("model.layers.*.mlp.fc1"),
    TPXP_ROW("model.layers.*.mlp.fc2"),
    TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
};
/* sp on: a dict update of the above. */
static const tpxp_rule k_phi_sp1[] = {
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R, .out = TPXP_S1, .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.self_attn.dense", .out = TPXP_S1, .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.mlp.fc2", .out = TPXP_S1, .local = TPXP_KEEP_DTENSOR),
    TPXP_COL("lm_head", .in = TPXP_S1, .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ("model.final_layernorm"),
    TPXP_SEQ("model.layers.*.input_layernorm"),
};

/* _parallelize_phi3 (sp ignored). Phi-3's fused qkv_proj is split in the
 * forward by fixed sizes, so it cannot be head-sharded: qkv_proj is rowwise
 * on a replicated input (partial sums, all-reduced) and o_proj colwise with a
 * replicated (all-gathered) output, i.e. attention stays numerically
 * replicated and the head counts are not rewritten. Only the MLP is really
 * sharded. */
static const tpxp_rule k_phi3[] = {
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R, .out = TPXP_R),
    TPXP_ROW("model.layers.*.self_attn.qkv_proj", .in = TPXP_R, .out = TPXP_R),
    TPXP_COL("model.layers.*.self_attn.o_proj", .in = TPXP_R, .out = TPXP_R),
    TPXP_COL("model.layers.*.mlp.gate_up_proj", .in = TPXP_R, .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.mlp.down_proj", .in = TPXP_SM1, .out = TPXP_R),
    TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
};

int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  int st;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "phi plugin: bad plan request");
  if (req->plan_name != NULL)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "phi plugin: no named plan '%s'", req->plan_name);
  /* Like upstream's plan functions, get_plan never looks at tp or the head
   * counts: validate_tp_mesh (spec/plans.md §4.5) asserts on them for both
   * classes, and the host runs it before selection for every plan source
   * (heads-not-divisible). */
  if (tpxp_arch_is(req->architecture, "Phi3ForCausalLM")) {
    st = tpxp_add_rules(host, ctx, "", k_phi3, TPXP_N_OF(k_phi3));
    if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
      host->plan_set_function(ctx, "phi3");
    return st;
  }
  if (!tpxp_arch_is(req->architecture, "PhiForCausalLM"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "phi plugin: architecture '%s' is not served",
                     req->architecture != NULL ? req->architecture : "(null)");
  st = tpxp_add_rules(host, ctx, "", k_phi_sp0, TPXP_N_OF(k_phi_sp0));
  if (st == TPX_PLUGIN_OK && req->sequence_parallel)
    st = tpxp_add_rules(host, ctx, "", k_phi_sp1, TPXP_N_OF(k_phi_sp1));
  if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
    host->plan_set_function(ctx, "phi");
  return st;
}

/* Phi-2 (HF PhiForCausalLM): every Linear and LayerNorm has a bias; one
 * input_layernorm feeds attention and MLP in parallel. Module order:
 * embed_tokens, layers, rotary_emb, final_layernorm; lm_head. */
static int phi_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  char f[TPXP_FQN_MAX];
  tpxp_decoder d;
  int64_t i, q, kv;
  int st, qk_ln = 0;
  memset(&d, 0, sizeof d);
  if ((st = tpxp_decoder_read(host, ctx, "", 0, &d)) ||
      (st = tpxp_cfg_bool_opt(host, ctx, "qk_layernorm", 0, &qk_ln)))
    return st;
  q = d.heads * d.head_dim;
  kv = d.kv_heads * d.head_dim;
  if ((st = tpxp_sk_embedding(host, ctx, "model.embed_tokens", d.vocab,
                              d.hidden, NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.layers", "container")))
    return st;
  for (i = 0; i < d.layers; i++) {
    long long L = (long long)i;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.q_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, q, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.k_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, kv, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.v_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, kv, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.dense", L);
    if ((st = tpxp_sk_linear(host, ctx, f, q, d.hidden, 1, NULL)))
      return st;
    if (qk_ln) {
      tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.q_layernorm", L);
      if ((st = tpxp_sk_norm(host, ctx, f, d.head_dim, 1, NULL)))
        return st;
      tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.k_layernorm", L);
      if ((st = tpxp_sk_norm(host, ctx, f, d.head_dim, 1, NULL)))
        return st;
    }
    tpxp_fmt(f, sizeof f, "model.layers.%lld.mlp.fc1", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, d.intermediate, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.mlp.fc2", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.intermediate, d.hidden, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.input_layernorm", L);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 1, NULL)))
      return st;
  }
  if ((st = tpxp_sk_module(host, ctx, "model.rotary_emb", "rotary")) ||
      (st =
           tpxp_sk_norm(host, ctx, "model.final_layernorm", d.hidden, 1, NULL)))
    return st;
  return tpxp_sk_lm_head(host, ctx, "lm_head", d.hidden, d.vocab, 1, d.tie,
                         "model.embed_tokens.weight", NULL);
}

/* Phi-3: qkv_proj out = (heads + 2 kv) * head_dim; gate_up_proj out =
 * 2 * intermediate; no biases; RMSNorms. Attention module order is o_proj,
 * qkv_proj as in HF. */
static int phi3_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  char f[TPXP_FQN_MAX];
  tpxp_decoder d;
  int64_t i, q, op;
  int st;
  memset(&d, 0, sizeof d);
  if ((st = tpxp_decoder_read(host, ctx, "", 0, &d)))
    return st;
  q = d.heads * d.head_dim;
  op = q + 2 * d.kv_heads * d.head_dim;
  if ((st = tpxp_sk_embedding(host, ctx, "model.embed_tokens", d.vocab,
                              d.hidden, NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.layers", "container")))
    return st;
  for (i = 0; i < d.layers; i++) {
    long long L = (long long)i;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.o_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, q, d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.self_attn.qkv_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, op, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.mlp.gate_up_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.hidden, 2 * d.intermediate, 0,
                             NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.mlp.down_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, d.intermediate, d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.input_layernorm", L);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.layers.%lld.post_attention_layernorm", L);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, NULL)))
      return st;
  }
  if ((st = tpxp_sk_norm(host, ctx, "model.norm", d.hidden, 0, NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.rotary_emb", "rotary")))
    return st;
  return tpxp_sk_lm_head(host, ctx, "lm_head", d.hidden, d.vocab, 0, d.tie,
                         "model.embed_tokens.weight", NULL);
}

int tpx_plugin_get_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  if (tpxp_arch_is(architecture, "Phi3ForCausalLM"))
    return phi3_skeleton(host, ctx);
  if (tpxp_arch_is(architecture, "PhiForCausalLM"))
    return phi_skeleton(host, ctx);
  return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                   "phi plugin: no skeleton for '%s'",
                   architecture != NULL ? architecture : "(null)");
}
