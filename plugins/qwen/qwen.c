/* qwen.c — the tpx_qwen family plugin: NeMo Automodel's _parallelize_qwen
 * (Qwen2/Qwen3 CausalLM, spec/plans.md §3.7), _parallelize_qwen_classification
 * (Qwen3ForSequenceClassification, §3.8) and _parallelize_qwen3_5_vlm
 * (Qwen3.5, §3.13: the plan get_hf_tp_shard_plan derives from the HF tp
 * plans, §4.2), their skeletons, and the fp32 parameters the Qwen3.5
 * strategy keeps. Also Qwen3_5MoeForConditionalGeneration through its
 * Hugging Face class: upstream has no plan function or strategy for it, so
 * get_plan refuses and the host takes upstream's path (HF plan
 * untranslatable, default base plan); the plugin gives its skeleton (the
 * Qwen3.5 stack with a sparse MoE block: router, fused experts, shared
 * expert and its gate). */
#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const k_archs[] = {
    "transformers.models.qwen2.modeling_qwen2.Qwen2ForCausalLM",
    "transformers.models.qwen3.modeling_qwen3.Qwen3ForCausalLM",
    "transformers.models.qwen3.modeling_qwen3.Qwen3ForSequenceClassification",
    "transformers.models.qwen3_5.modeling_qwen3_5.Qwen3_"
    "5ForConditionalGeneration",
    "nemo_automodel.components.models.qwen3_5.model.Qwen3_"
    "5ForConditionalGeneration",
    "nemo_automodel.components.models.qwen3_5.model.Qwen3_5ForCausalLM",
    "nemo_automodel.components.models.qwen2.model.Qwen2ForCausalLM",
    "nemo_automodel.components.models.qwen3.model.Qwen3ForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3ForSequenceClassification",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe.Qwen3_"
    "5MoeForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "qwen",
      .version = "1.0.0",
      .description =
          "Qwen family: Qwen2/Qwen3 CausalLM (HF and NeMo), "
          "Qwen3ForSequenceClassification (score head), Qwen3.5 (HF-derived "
          "plan; GatedDeltaNet linear attention replicated, A_log/dt_bias "
          "fp32; the VLM's lm_head replicated); "
          "Qwen3_5MoeForConditionalGeneration (skeleton with fused "
          "experts; upstream's HF-plan path to the default plan)",
      .architectures = k_archs,
      .plans = NULL,
  };
  return tpxp_register(host, info, &desc);
}

/* ---- plans ---- */

/* _parallelize_qwen, sp off. The two sp cases are separate dicts upstream.
 * qkv_proj / gate_up_proj exist only in fused variants (optional). q_norm /
 * k_norm are deliberately not planned: they act on head-sharded
 * activations. */
static const tpxp_rule k_qwen_sp0[] = {
    {"lm_head", "colwise", NULL, TPXP_SM1, 0, 0, 0},
    {"model.embed_tokens", "vocab_parallel_embedding", TPXP_R, NULL, TPXP_DEF,
     0, 0},
    {"model.layers.*.self_attn.q_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.self_attn.k_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.self_attn.v_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.self_attn.qkv_proj", "colwise", NULL, NULL, TPXP_DEF, 1,
     0},
    {"model.layers.*.self_attn.o_proj", "rowwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.mlp.up_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.mlp.gate_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.mlp.gate_up_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 0},
    {"model.layers.*.mlp.down_proj", "rowwise", NULL, NULL, TPXP_DEF, 0, 0},
};
/* sp on. The embedding output stays a DTensor so HF code sees the global
 * sequence length. */
static const tpxp_rule k_qwen_sp1[] = {
    {"lm_head", "colwise", TPXP_S1, TPXP_SM1, 0, 0, 0},
    {"model.embed_tokens", "vocab_parallel_embedding", TPXP_R, TPXP_S1, 0, 0,
     0},
    {"model.norm", "sequence_parallel", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.input_layernorm", "sequence_parallel_allgather_activation",
     NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.self_attn.q_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.self_attn.k_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.self_attn.v_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.self_attn.qkv_proj", "colwise", NULL, NULL, TPXP_DEF, 1,
     0},
    {"model.layers.*.self_attn.o_proj", "rowwise", NULL, TPXP_S1, 0, 0, 0},
    {"model.layers.*.post_attention_layernorm",
     "sequence_parallel_allgather_activation", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.mlp.up_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.mlp.gate_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"model.layers.*.mlp.gate_up_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 0},
    {"model.layers.*.mlp.down_proj", "rowwise", NULL, TPXP_S1, 0, 0, 0},
};

/* Qwen3.5: what get_hf_tp_shard_plan returns (spec/plans.md §4.2), with the
 * transformers sources as read (modular_qwen3_5.py): Qwen3_5ForCausalLM
 * subclasses Qwen3ForCausalLM, whose class _tp_plan is {"lm_head":
 * "colwise_rep"}; Qwen3_5ForConditionalGeneration subclasses
 * Qwen3VLForConditionalGeneration, which declares no _tp_plan, so its
 * lm_head gets no key and stays replicated. Collection order: the class
 * plan (lm_head, turned into a vocab-sharded DTensor head "for speed"), then
 * the text config's base_model_tp_plan under the inner model's prefix (q/k/v
 * colwise; q_norm/k_norm replicated_with_grad_allreduce dropped by the
 * translator; o rowwise; mlp gate/up colwise, down rowwise), then the
 * embedding the plan lacks, added as "rowwise_rep" (plain rowwise,
 * replicated input). The wildcard self_attn keys match only the
 * full-attention layers: the GatedDeltaNet linear_attn layers get no key and
 * stay replicated. A stack shorter than full_attention_interval has no
 * self_attn at all, so those four keys are optional (upstream, a key
 * matching nothing is harmless too). */
static const tpxp_rule k_qwen35_head[] = {
    {"lm_head", "colwise", NULL, TPXP_SM1, 0, 0, 1},
};
static const tpxp_rule k_qwen35[] = {
    {"layers.*.self_attn.q_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 0},
    {"layers.*.self_attn.k_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 0},
    {"layers.*.self_attn.v_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 0},
    {"layers.*.self_attn.o_proj", "rowwise", NULL, NULL, TPXP_DEF, 1, 0},
    {"layers.*.mlp.gate_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.mlp.up_proj", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.mlp.down_proj", "rowwise", NULL, NULL, TPXP_DEF, 0, 0},
    {"embed_tokens", "rowwise", TPXP_R, NULL, TPXP_DEF, 0, 0},
};

static int is_qwen35(const char *arch) {
  return tpxp_arch_is(arch, "Qwen3_5ForConditionalGeneration") ||
         tpxp_arch_is(arch, "Qwen3_5ForCausalLM");
}

static int is_qwen35_moe(const char *arch) {
  return tpxp_arch_is(arch, "Qwen3_5MoeForConditionalGeneration");
}

/* get_hf_tp_shard_plan picks model.language_model by the class name
 * Qwen3_5ForConditionalGeneration, else model. */
static const char *qwen35_prefix(const char *arch) {
  return tpxp_arch_is(arch, "Qwen3_5ForConditionalGeneration")
             ? "model.language_model"
             : "model";
}

int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  const char *arch;
  int st;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "qwen plugin: bad plan request");
  arch = req->architecture;
  if (req->plan_name != NULL)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "qwen plugin: no named plan '%s'", req->plan_name);
  if (is_qwen35_moe(arch))
    return tpxp_refuse_to_hf_flow(
        host, ctx, "qwen", arch,
        "the class plan's lm_head 'colwise_gather_output', the experts' "
        "'packed_colwise' / 'moe_tp_experts', linear_attn "
        "'colwise_gather_output'");
  /* Like upstream's plan functions, get_plan never looks at tp or the head
   * counts: the head check is validate_tp_mesh, which the host runs before
   * selection for every plan source (heads-not-divisible). */
  if (is_qwen35(arch)) {
    /* sequence_parallel is not an input of get_hf_tp_shard_plan. */
    st = TPX_PLUGIN_OK;
    if (tpxp_arch_is(arch, "Qwen3_5ForCausalLM"))
      st = tpxp_add_rules(host, ctx, "", k_qwen35_head, N_OF(k_qwen35_head));
    if (st == TPX_PLUGIN_OK)
      st = tpxp_add_rules(host, ctx, qwen35_prefix(arch), k_qwen35,
                          N_OF(k_qwen35));
    if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
      host->plan_set_function(ctx, "qwen3_5_vlm");
    return st;
  }
  if (tpxp_arch_is(arch, "Qwen3ForSequenceClassification")) {
    /* Upstream asserts: the model has no lm_head and has a score head. */
    if (host->model_has_module(ctx, "lm_head"))
      return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                       "Qwen3ForSequenceClassification: the model has an "
                       "lm_head module; a sequence-classification model must "
                       "not (assert failed)");
    if (!host->model_has_module(ctx, "score"))
      return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                       "Qwen3ForSequenceClassification: the model has no "
                       "'score' module (assert failed)");
  } else if (!tpxp_arch_is(arch, "Qwen2ForCausalLM") &&
             !tpxp_arch_is(arch, "Qwen3ForCausalLM")) {
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "qwen plugin: architecture '%s' is not served",
                     arch != NULL ? arch : "(null)");
  }
  if (req->sequence_parallel)
    st = tpxp_add_rules(host, ctx, "", k_qwen_sp1, N_OF(k_qwen_sp1));
  else
    st = tpxp_add_rules(host, ctx, "", k_qwen_sp0, N_OF(k_qwen_sp0));
  if (st != TPX_PLUGIN_OK)
    return st;
  if (tpxp_arch_is(arch, "Qwen3ForSequenceClassification")) {
    if ((st = host->plan_remove(ctx, "lm_head")) != TPX_PLUGIN_OK)
      return st;
    /* Pooling happens in Python and needs all num_labels logits on every
     * rank: replicated output, local tensor. */
    st = tpxp_add(host, ctx, "score", "colwise", NULL, TPXP_R, TPXP_DEF, 0);
    if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
      host->plan_set_function(ctx, "qwen_classification");
    return st;
  }
  if (host->plan_set_function != NULL)
    host->plan_set_function(ctx, "qwen");
  return TPX_PLUGIN_OK;
}

/* ---- skeletons ---- */

/* Number of labels of a classification head: num_labels, else the size of
 * id2label, else transformers' default 2. */
static int num_labels(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      int64_t *out) {
  int64_t n = 0;
  if (host->config_get_int(ctx, "num_labels", &n) == TPX_PLUGIN_OK) {
    *out = n;
    return TPX_PLUGIN_OK;
  }
  if (host->config_get_length(ctx, "id2label", &n) == TPX_PLUGIN_OK) {
    *out = n;
    return TPX_PLUGIN_OK;
  }
  *out = 2;
  return TPX_PLUGIN_OK;
}

/* Qwen3.5 layer type: layer_types[i] when listed, else full attention on
 * every full_attention_interval-th layer (default 4): (i + 1) % n == 0. */
static int qwen35_is_full(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *section, int64_t i, int64_t interval,
                          int *full) {
  char p[TPXP_FQN_MAX], key[64];
  const char *t = NULL;
  int st;
  tpxp_fmt(key, sizeof key, "layer_types[%lld]", (long long)i);
  st = host->config_get_string(ctx, tpxp_path(p, sizeof p, section, key), &t);
  if (st == TPX_PLUGIN_OK) {
    if (strcmp(t, "full_attention") == 0)
      *full = 1;
    else if (strcmp(t, "linear_attention") == 0)
      *full = 0;
    else
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "config %s: unknown layer type '%s'", p, t);
    return TPX_PLUGIN_OK;
  }
  if (st != TPX_PLUGIN_NOT_FOUND)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR, "config %s is not a string",
                     p);
  *full = interval > 0 && (i + 1) % interval == 0;
  return TPX_PLUGIN_OK;
}

typedef struct gdn_dims {
  int64_t k_heads, v_heads, k_dim, v_dim, kernel;
} gdn_dims;

/* Qwen3.5 GatedDeltaNet at <layer>.linear_attn, in module order. */
static int qwen35_linear_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                              const char *layer, int64_t hidden,
                              const gdn_dims *g) {
  char f[TPXP_FQN_MAX], m[TPXP_FQN_MAX];
  int64_t key_dim = g->k_heads * g->k_dim, value_dim = g->v_heads * g->v_dim;
  int64_t conv_dim = 2 * key_dim + value_dim, shape[3];
  int st;
  tpxp_fmt(m, sizeof m, "%s.linear_attn", layer);
  if ((st = tpxp_sk_module(host, ctx, m, "other")))
    return st;
  /* dt_bias and A_log: one value per value head (kept in fp32). */
  if ((st = tpxp_sk_param(host, ctx, m, "dt_bias", g->v_heads, -1, NULL)) ||
      (st = tpxp_sk_param(host, ctx, m, "A_log", g->v_heads, -1, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.conv1d", m);
  if ((st = tpxp_sk_module(host, ctx, f, "other")))
    return st;
  shape[0] = conv_dim; /* depthwise Conv1d, no bias */
  shape[1] = 1;
  shape[2] = g->kernel;
  if ((st = host->skeleton_add_param(ctx, f, "weight", shape, 3, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.norm", m);
  if ((st = tpxp_sk_norm(host, ctx, f, g->v_dim, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.out_proj", m);
  if ((st = tpxp_sk_linear(host, ctx, f, value_dim, hidden, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.in_proj_qkv", m);
  if ((st = tpxp_sk_linear(host, ctx, f, hidden, conv_dim, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.in_proj_z", m);
  if ((st = tpxp_sk_linear(host, ctx, f, hidden, value_dim, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.in_proj_b", m);
  if ((st = tpxp_sk_linear(host, ctx, f, hidden, g->v_heads, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.in_proj_a", m);
  return tpxp_sk_linear(host, ctx, f, hidden, g->v_heads, 0, NULL);
}

/* Qwen3.5 gated full attention: q_proj carries the output gate (2x). */
static int qwen35_self_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *layer, const tpxp_decoder *d) {
  char f[TPXP_FQN_MAX];
  int64_t q = d->heads * d->head_dim, kv = d->kv_heads * d->head_dim;
  int st;
  tpxp_fmt(f, sizeof f, "%s.self_attn.q_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, d->hidden, 2 * q, d->qkv_bias, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.self_attn.k_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, d->hidden, kv, d->qkv_bias, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.self_attn.v_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, d->hidden, kv, d->qkv_bias, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.self_attn.o_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, q, d->hidden, d->o_bias, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.self_attn.q_norm", layer);
  if ((st = tpxp_sk_norm(host, ctx, f, d->head_dim, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.self_attn.k_norm", layer);
  return tpxp_sk_norm(host, ctx, f, d->head_dim, 0, NULL);
}

/* Qwen3.5's vision tower (the Qwen3-VL vision model without DeepStack) at
 * model.visual: patch_embed.proj (Conv3d with bias, kernel [temporal, patch,
 * patch]), pos_embed (Embedding), rotary_pos_emb (no params), blocks.* {norm1,
 * norm2 (LayerNorms), attn {qkv, proj}, mlp {linear_fc1, linear_fc2}}, all
 * biased, and merger {norm over the hidden size, linear_fc1 (hidden *
 * merge^2 square), linear_fc2 (-> out_hidden_size)}. The plan leaves it
 * replicated (no key matches model.visual). */
static int qwen35_visual(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  char f[TPXP_FQN_MAX];
  int64_t depth, hidden, inter, patch, tpatch, chans, merge, out, npos, i;
  int64_t shape[5], m2;
  int st;
  if ((st = tpxp_cfg_int_opt(host, ctx, "vision_config.depth", 27, &depth)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.hidden_size", 1152,
                             &hidden)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.intermediate_size", 4304,
                             &inter)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.patch_size", 16,
                             &patch)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.temporal_patch_size", 2,
                             &tpatch)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.in_channels", 3,
                             &chans)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.spatial_merge_size", 2,
                             &merge)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.out_hidden_size", 3584,
                             &out)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.num_position_embeddings",
                             2304, &npos)))
    return st;
  if ((st =
           tpxp_sk_module(host, ctx, "model.visual.patch_embed.proj", "other")))
    return st;
  shape[0] = hidden;
  shape[1] = chans;
  shape[2] = tpatch;
  shape[3] = patch;
  shape[4] = patch;
  if ((st = host->skeleton_add_param(ctx, "model.visual.patch_embed.proj",
                                     "weight", shape, 5, NULL)) ||
      (st = tpxp_sk_param(host, ctx, "model.visual.patch_embed.proj", "bias",
                          hidden, -1, NULL)) ||
      (st = tpxp_sk_embedding(host, ctx, "model.visual.pos_embed", npos, hidden,
                              NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.visual.rotary_pos_emb",
                           "rotary")) ||
      (st = tpxp_sk_module(host, ctx, "model.visual.blocks", "container")))
    return st;
  for (i = 0; i < depth; i++) {
    long long L = (long long)i;
    tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld.norm1", L);
    if ((st = tpxp_sk_norm(host, ctx, f, hidden, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld.norm2", L);
    if ((st = tpxp_sk_norm(host, ctx, f, hidden, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld.attn.qkv", L);
    if ((st = tpxp_sk_linear(host, ctx, f, hidden, 3 * hidden, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld.attn.proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, hidden, hidden, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld.mlp.linear_fc1", L);
    if ((st = tpxp_sk_linear(host, ctx, f, hidden, inter, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld.mlp.linear_fc2", L);
    if ((st = tpxp_sk_linear(host, ctx, f, inter, hidden, 1, NULL)))
      return st;
  }
  m2 = hidden * merge * merge;
  if ((st = tpxp_sk_norm(host, ctx, "model.visual.merger.norm", hidden, 1,
                         NULL)) ||
      (st = tpxp_sk_linear(host, ctx, "model.visual.merger.linear_fc1", m2, m2,
                           1, NULL)))
    return st;
  return tpxp_sk_linear(host, ctx, "model.visual.merger.linear_fc2", m2, out, 1,
                        NULL);
}

/* Qwen3.5-MoE's sparse block at <layer>.mlp, in transformers' order: the
 * router gate, the fused experts, shared_expert (a gated MLP of
 * shared_expert_intermediate_size) and shared_expert_gate (hidden -> 1). */
static int qwen35_moe_mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *layer, int64_t hidden, int64_t experts,
                          int64_t inter, int64_t shared) {
  char f[TPXP_FQN_MAX];
  int st;
  tpxp_fmt(f, sizeof f, "%s.mlp", layer);
  if ((st = tpxp_sk_module(host, ctx, f, "other")))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.gate", layer);
  if ((st = tpxp_sk_router(host, ctx, f, experts, hidden, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.experts", layer);
  if ((st = tpxp_sk_fused_experts(host, ctx, f, experts, hidden, inter, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.shared_expert.gate_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, hidden, shared, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.shared_expert.up_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, hidden, shared, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.shared_expert.down_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, shared, hidden, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.shared_expert_gate", layer);
  return tpxp_sk_linear(host, ctx, f, hidden, 1, 0, NULL);
}

/* Qwen3.5's dense gated MLP at <layer>.mlp. */
static int qwen35_dense_mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *layer, int64_t hidden, int64_t inter) {
  char f[TPXP_FQN_MAX];
  int st;
  tpxp_fmt(f, sizeof f, "%s.mlp.gate_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, hidden, inter, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.up_proj", layer);
  if ((st = tpxp_sk_linear(host, ctx, f, hidden, inter, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.down_proj", layer);
  return tpxp_sk_linear(host, ctx, f, inter, hidden, 0, NULL);
}

static int qwen35_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *arch) {
  int moe = is_qwen35_moe(arch);
  int vlm = moe || tpxp_arch_is(arch, "Qwen3_5ForConditionalGeneration");
  int64_t experts = 0, moe_inter = 0, shared = 0;
  const char *sec = vlm ? "text_config" : "";
  char p[TPXP_FQN_MAX], f[TPXP_FQN_MAX], layer[TPXP_FQN_MAX];
  tpxp_decoder d;
  gdn_dims g;
  int64_t interval, i;
  int st, tie_top = 0;
  memset(&d, 0, sizeof d);
  /* Qwen3.5 defaults: head_dim 256 (not hidden / heads). The MoE text
   * config has no dense intermediate_size. */
  if ((st = moe ? tpxp_decoder_read_moe(host, ctx, sec, 0, &d)
                : tpxp_decoder_read(host, ctx, sec, 0, &d)))
    return st;
  if (moe &&
      ((st = tpxp_cfg_int_opt(host, ctx,
                              tpxp_path(p, sizeof p, sec, "num_experts"), 256,
                              &experts)) ||
       (st = tpxp_cfg_int_opt(
            host, ctx, tpxp_path(p, sizeof p, sec, "moe_intermediate_size"),
            512, &moe_inter)) ||
       (st = tpxp_cfg_int_opt(
            host, ctx,
            tpxp_path(p, sizeof p, sec, "shared_expert_intermediate_size"), 512,
            &shared))))
    return st;
  if ((st = tpxp_cfg_int_opt(host, ctx, tpxp_path(p, sizeof p, sec, "head_dim"),
                             256, &d.head_dim)))
    return st;
  if (vlm && (st = tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", d.tie,
                                     &tie_top)) == TPX_PLUGIN_OK)
    d.tie = tie_top;
  if (st)
    return st;
  if ((st = tpxp_cfg_int_opt(
           host, ctx, tpxp_path(p, sizeof p, sec, "linear_num_key_heads"), 16,
           &g.k_heads)) ||
      (st = tpxp_cfg_int_opt(
           host, ctx, tpxp_path(p, sizeof p, sec, "linear_num_value_heads"), 32,
           &g.v_heads)) ||
      (st = tpxp_cfg_int_opt(host, ctx,
                             tpxp_path(p, sizeof p, sec, "linear_key_head_dim"),
                             128, &g.k_dim)) ||
      (st = tpxp_cfg_int_opt(
           host, ctx, tpxp_path(p, sizeof p, sec, "linear_value_head_dim"), 128,
           &g.v_dim)) ||
      (st = tpxp_cfg_int_opt(
           host, ctx, tpxp_path(p, sizeof p, sec, "linear_conv_kernel_dim"), 4,
           &g.kernel)) ||
      (st = tpxp_cfg_int_opt(
           host, ctx, tpxp_path(p, sizeof p, sec, "full_attention_interval"), 4,
           &interval)))
    return st;
  d.prefix = vlm ? "model.language_model" : "model";
  /* HF order: model.visual, then model.language_model. */
  if (vlm && host->config_has(ctx, "vision_config") &&
      (st = qwen35_visual(host, ctx)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.embed_tokens", d.prefix);
  if ((st = tpxp_sk_embedding(host, ctx, f, d.vocab, d.hidden, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.layers", d.prefix);
  if ((st = tpxp_sk_module(host, ctx, f, "container")))
    return st;
  for (i = 0; i < d.layers; i++) {
    int full = 0;
    tpxp_fmt(layer, sizeof layer, "%s.layers.%lld", d.prefix, (long long)i);
    if ((st = qwen35_is_full(host, ctx, sec, i, interval, &full)))
      return st;
    st = full ? qwen35_self_attn(host, ctx, layer, &d)
              : qwen35_linear_attn(host, ctx, layer, d.hidden, &g);
    if (st)
      return st;
    st = moe ? qwen35_moe_mlp(host, ctx, layer, d.hidden, experts, moe_inter,
                              shared)
             : qwen35_dense_mlp(host, ctx, layer, d.hidden, d.intermediate);
    if (st)
      return st;
    tpxp_fmt(f, sizeof f, "%s.input_layernorm", layer);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, "%s.post_attention_layernorm", layer);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, NULL)))
      return st;
  }
  tpxp_fmt(f, sizeof f, "%s.norm", d.prefix);
  if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.rotary_emb", d.prefix);
  if ((st = tpxp_sk_module(host, ctx, f, "rotary")))
    return st;
  tpxp_fmt(p, sizeof p, "%s.embed_tokens.weight", d.prefix);
  return tpxp_sk_lm_head(host, ctx, "lm_head", d.hidden, d.vocab, 0, d.tie, p,
                         NULL);
}

int tpx_plugin_get_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  tpxp_decoder d;
  int st, qwen2 = tpxp_arch_is(architecture, "Qwen2ForCausalLM");
  int cls = tpxp_arch_is(architecture, "Qwen3ForSequenceClassification");
  if (is_qwen35(architecture) || is_qwen35_moe(architecture))
    return qwen35_skeleton(host, ctx, architecture);
  if (!qwen2 && !cls && !tpxp_arch_is(architecture, "Qwen3ForCausalLM"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "qwen plugin: no skeleton for '%s'",
                     architecture != NULL ? architecture : "(null)");
  memset(&d, 0, sizeof d);
  /* Qwen2Config / Qwen3Config default tie_word_embeddings to False. */
  if ((st = tpxp_decoder_read(host, ctx, "", 0, &d)))
    return st;
  d.prefix = "model";
  d.rotary = 1;
  if (qwen2) {
    /* Qwen2 attention: q/k/v always biased, o_proj never. */
    d.qkv_bias = 1;
    d.o_bias = 0;
  } else {
    d.qk_norm = 1; /* Qwen3: per-head RMSNorm on q and k */
  }
  if ((st = tpxp_sk_decoder(host, ctx, &d)))
    return st;
  if (cls) {
    int64_t labels;
    if ((st = num_labels(host, ctx, &labels)))
      return st;
    return tpxp_sk_linear(host, ctx, "score", d.hidden, labels, 0, NULL);
  }
  return tpxp_sk_lm_head(host, ctx, "lm_head", d.hidden, d.vocab, 0, d.tie,
                         "model.embed_tokens.weight", NULL);
}

/* Qwen3.5: the GatedDeltaNet decay parameters stay fp32 (the model computes
 * the decay in fp32 from A_log and dt_bias; the Qwen3_5 strategy shards them
 * as a separate fp32 group). */
int tpx_plugin_fp32_params(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *architecture) {
  char p[TPXP_FQN_MAX];
  const char *prefix;
  int st;
  if (!is_qwen35(architecture))
    return TPX_PLUGIN_OK;
  prefix = qwen35_prefix(architecture);
  tpxp_fmt(p, sizeof p, "%s.layers.*.linear_attn.A_log", prefix);
  if ((st = host->fp32_add(ctx, p)) != TPX_PLUGIN_OK)
    return st;
  tpxp_fmt(p, sizeof p, "%s.layers.*.linear_attn.dt_bias", prefix);
  return host->fp32_add(ctx, p);
}
