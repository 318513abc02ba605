/* phi.c — the tpx_phi family plugin: NeMo Automodel's _parallelize_phi
 * (Phi-2) and _parallelize_phi3 (Phi-3; docs/SEMANTICS.md "Family plans"),
 * with
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
      .traits = NULL,
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
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R, .out = TPXP_S1,
               .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.self_attn.dense", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.mlp.fc2", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_COL("lm_head", .in = TPXP_S1, .out = TPXP_SM1,
             .local = TPXP_KEEP_DTENSOR),
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
    TPXP_COL("model.layers.*.mlp.gate_up_proj", .in = TPXP_R, .out = TPXP_SM1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.mlp.down_proj", .in = TPXP_SM1, .out = TPXP_R),
    TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
};

/* Like upstream's plan functions, get_plan never looks at tp or the head
 * counts: validate_tp_mesh (docs/SEMANTICS.md "Plan selection") asserts on
 * them for both classes, and the host runs it before selection for every
 * plan source (heads-not-divisible). */
static int phi_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpx_plugin_plan_request *req) {
  int st = TPXP_ADD_RULES(host, ctx, "", k_phi_sp0);
  if (st == TPX_PLUGIN_OK && req->sequence_parallel)
    st = TPXP_ADD_RULES(host, ctx, "", k_phi_sp1);
  if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
    host->plan_set_function(ctx, "phi");
  return st;
}

static int phi3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const tpx_plugin_plan_request *req) {
  int st = TPXP_ADD_RULES(host, ctx, "", k_phi3);
  if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
    host->plan_set_function(ctx, "phi3");
  return st;
}

/* The stack both skeletons share: embed_tokens, the layers container, then
 * `layer` under every model.layers.<i>, then `tail`, then lm_head (biased
 * or not, tied when the config says so). */
static int phi_stack(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const tpxp_decoder *d, const tpxp_sk_row *layer,
                     size_t n_layer, const tpxp_sk_row *tail, size_t n_tail,
                     int head_bias) {
  const tpxp_sk_row head[] = {
      TPXP_SK_EMB("model.embed_tokens", d->vocab, d->hidden),
      TPXP_SK_MOD("model.layers", "container"),
  };
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, "", head, NULL));
  TPXP_CHK(tpxp_sk_layers(host, ctx, "model", d->layers, layer, n_layer, NULL));
  TPXP_CHK(tpxp_sk_rows(host, ctx, "", tail, n_tail, NULL));
  return tpxp_sk_lm_head(host, ctx, "lm_head", d->hidden, d->vocab, head_bias,
                         d->tie, "model.embed_tokens.weight", NULL);
}

/* Phi-2 (HF PhiForCausalLM): every Linear and LayerNorm has a bias; one
 * input_layernorm feeds attention and MLP in parallel. Module order:
 * embed_tokens, layers, rotary_emb, final_layernorm; lm_head. */
static int phi_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *arch) {
  tpxp_decoder d;
  int qk_ln = 0;
  memset(&d, 0, sizeof d);
  TPXP_CHK(tpxp_decoder_read(host, ctx, "", 0, &d));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "qk_layernorm", 0, &qk_ln));
  {
    int64_t h = d.hidden, q = d.heads * d.head_dim;
    int64_t kv = d.kv_heads * d.head_dim;
    const tpxp_sk_row layer[] = {
        TPXP_SK_LIN("self_attn.q_proj", h, q, 1),
        TPXP_SK_LIN("self_attn.k_proj", h, kv, 1),
        TPXP_SK_LIN("self_attn.v_proj", h, kv, 1),
        TPXP_SK_LIN("self_attn.dense", q, h, 1),
        TPXP_SK_WHEN(qk_ln),
        TPXP_SK_NRM("self_attn.q_layernorm", d.head_dim, 1),
        TPXP_SK_WHEN(qk_ln),
        TPXP_SK_NRM("self_attn.k_layernorm", d.head_dim, 1),
        TPXP_SK_LIN("mlp.fc1", h, d.intermediate, 1),
        TPXP_SK_LIN("mlp.fc2", d.intermediate, h, 1),
        TPXP_SK_NRM("input_layernorm", h, 1),
    };
    const tpxp_sk_row tail[] = {
        TPXP_SK_MOD("model.rotary_emb", "rotary"),
        TPXP_SK_NRM("model.final_layernorm", h, 1),
    };
    return phi_stack(host, ctx, &d, layer, TPXP_N_OF(layer), tail,
                     TPXP_N_OF(tail), 1);
  }
}

/* Phi-3: qkv_proj out = (heads + 2 kv) * head_dim; gate_up_proj out =
 * 2 * intermediate; no biases; RMSNorms. Attention module order is o_proj,
 * qkv_proj as in HF. */
static int phi3_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const char *arch) {
  tpxp_decoder d;
  memset(&d, 0, sizeof d);
  TPXP_CHK(tpxp_decoder_read(host, ctx, "", 0, &d));
  {
    int64_t h = d.hidden, q = d.heads * d.head_dim;
    int64_t op = q + 2 * d.kv_heads * d.head_dim;
    const tpxp_sk_row layer[] = {
        TPXP_SK_LIN("self_attn.o_proj", q, h, 0),
        TPXP_SK_LIN("self_attn.qkv_proj", h, op, 0),
        TPXP_SK_LIN("mlp.gate_up_proj", h, 2 * d.intermediate, 0),
        TPXP_SK_LIN("mlp.down_proj", d.intermediate, h, 0),
        TPXP_SK_NRM("input_layernorm", h, 0),
        TPXP_SK_NRM("post_attention_layernorm", h, 0),
    };
    const tpxp_sk_row tail[] = {
        TPXP_SK_NRM("model.norm", h, 0),
        TPXP_SK_MOD("model.rotary_emb", "rotary"),
    };
    return phi_stack(host, ctx, &d, layer, TPXP_N_OF(layer), tail,
                     TPXP_N_OF(tail), 0);
  }
}

static const tpxp_arch_ops phi_ops[] = {
    {.bare = "Phi3ForCausalLM", .plan = phi3_plan, .skeleton = phi3_skeleton},
    {.bare = "PhiForCausalLM", .plan = phi_plan, .skeleton = phi_skeleton},
};
static const tpxp_family phi = {"phi", phi_ops, TPXP_N_OF(phi_ops)};

TPXP_EXPORT_GET_PLAN(phi)
TPXP_EXPORT_SKELETON(phi)
