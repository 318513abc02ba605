/* qwen.c — the tpx_qwen family plugin: NeMo Automodel's _parallelize_qwen
 * (Qwen2/Qwen3 CausalLM), _parallelize_qwen_classification
 * (Qwen3ForSequenceClassification) and _parallelize_qwen3_5_vlm (Qwen3.5:
 * the plan get_hf_tp_shard_plan derives from the HF tp plans), see
 * docs/SEMANTICS.md "Family plans" and docs/SEMANTICS.md "Plans and matching",
 * their skeletons, and the fp32 parameters the Qwen3.5 strategy keeps. Also
 * Qwen3_5MoeForConditionalGeneration through its Hugging Face class: upstream
 * has no plan function or strategy for it, so get_plan refuses and the host
 * takes upstream's path (HF plan untranslatable, default base plan); the plugin
 * gives its skeleton (the Qwen3.5 stack with a sparse MoE block: router, fused
 * experts, shared expert and its gate). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

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

/* NeMo Automodel 0.7.0's Qwen plan styles q_norm / k_norm
 * ReplicatedWithGradAllReduce and its recipe syncs tp replicas' gradients
 * before clipping (synchronize_tp_replica_gradients): the partial gradients
 * this plugin's plans leave on them (see k_qwen_sp0) are summed upstream,
 * so the host notes them in one info line instead of warning. Not Qwen3.5,
 * whose HF-derived plan drops that style. */
/* The family facts of the Qwen VLMs (docs/PLUGIN_ABI.md "Traits"): layer
 * lists (NeMo Automodel 0.7.0's layer table), head counts in text_config
 * and the inner model of their Hugging Face tp plan; Bagel's Qwen2. */
#define QWEN2VL(cls)                                                           \
  "layers=" cls ":language:model.language_model.layers,model.layers",          \
      "layers=" cls ":vision:model.visual.blocks,visual.blocks",               \
      "text_config_heads=" cls, "hf_prefix=" cls ":model.language_model"
#define QWEN3VL(cls)                                                           \
  "layers=" cls ":language:model.language_model.layers",                       \
      "layers=" cls ":vision:model.visual.blocks"
static const char *const k_traits[] = {
    "tp_grad_sync=Qwen3ForCausalLM",
    "tp_grad_sync=Qwen3ForSequenceClassification",
    QWEN2VL("Qwen2VLForConditionalGeneration"),
    QWEN2VL("Qwen2_5_VLForConditionalGeneration"),
    QWEN3VL("Qwen3_5ForConditionalGeneration"),
    "hf_prefix=Qwen3_5ForConditionalGeneration:model.language_model",
    QWEN3VL("Qwen3_5MoeForConditionalGeneration"),
    QWEN3VL("Qwen3VLMoeForConditionalGeneration"),
    "layers=BagelForUnifiedMultimodal:language:"
    "model.language_model.model.layers",
    "layers=BagelForUnifiedMultimodal:vision:"
    "model.vit_model.vision_model.encoder.layers",
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
      .traits = k_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* ---- plans ---- */

/* _parallelize_qwen, sp off. The two sp cases are separate dicts upstream.
 * qkv_proj / gate_up_proj exist only in fused variants (optional).
 * q_norm / k_norm get no key, as in the upstream snapshot the golden plans
 * follow (the Automodel commit docs/SEMANTICS.md "Family plans" describes):
 * they act on head-sharded activations, so their weights stay replicated
 * and their gradients are partial over tp. NeMo Automodel 0.7.0's Qwen plan
 * styles them ReplicatedWithGradAllReduce instead and its recipe syncs those
 * gradients over tp before clipping (synchronize_tp_replica_gradients), so
 * the replicas do not drift there; the numbers equal this plan plus that
 * sum, which tpx's runtime does (docs/SEMANTICS.md "The training step"). */
static const tpxp_rule k_qwen_sp0[] = {
    TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R),
    TPXP_COL("model.layers.*.self_attn.q_proj"),
    TPXP_COL("model.layers.*.self_attn.k_proj"),
    TPXP_COL("model.layers.*.self_attn.v_proj"),
    TPXP_COL("model.layers.*.self_attn.qkv_proj", .optional = 1),
    TPXP_ROW("model.layers.*.self_attn.o_proj"),
    TPXP_COL("model.layers.*.mlp.up_proj"),
    TPXP_COL("model.layers.*.mlp.gate_proj"),
    TPXP_COL("model.layers.*.mlp.gate_up_proj", .optional = 1),
    TPXP_ROW("model.layers.*.mlp.down_proj"),
};
/* sp on. The embedding output stays a DTensor so HF code sees the global
 * sequence length. */
static const tpxp_rule k_qwen_sp1[] = {
    TPXP_COL("lm_head", .in = TPXP_S1, .out = TPXP_SM1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R, .out = TPXP_S1,
               .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ("model.norm"),
    TPXP_SEQ_AG("model.layers.*.input_layernorm"),
    TPXP_COL("model.layers.*.self_attn.q_proj"),
    TPXP_COL("model.layers.*.self_attn.k_proj"),
    TPXP_COL("model.layers.*.self_attn.v_proj"),
    TPXP_COL("model.layers.*.self_attn.qkv_proj", .optional = 1),
    TPXP_ROW("model.layers.*.self_attn.o_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ_AG("model.layers.*.post_attention_layernorm"),
    TPXP_COL("model.layers.*.mlp.up_proj"),
    TPXP_COL("model.layers.*.mlp.gate_proj"),
    TPXP_COL("model.layers.*.mlp.gate_up_proj", .optional = 1),
    TPXP_ROW("model.layers.*.mlp.down_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
};

/* Qwen3.5: what get_hf_tp_shard_plan returns (docs/SEMANTICS.md "Plans and
 * matching"), with the transformers sources as read (modular_qwen3_5.py):
 * Qwen3_5ForCausalLM subclasses Qwen3ForCausalLM, whose class _tp_plan is
 * {"lm_head": "colwise_rep"}; Qwen3_5ForConditionalGeneration subclasses
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
    TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR,
             .rooted = 1),
};
static const tpxp_rule k_qwen35[] = {
    TPXP_COL("layers.*.self_attn.q_proj", .optional = 1),
    TPXP_COL("layers.*.self_attn.k_proj", .optional = 1),
    TPXP_COL("layers.*.self_attn.v_proj", .optional = 1),
    TPXP_ROW("layers.*.self_attn.o_proj", .optional = 1),
    TPXP_COL("layers.*.mlp.gate_proj"),
    TPXP_COL("layers.*.mlp.up_proj"),
    TPXP_ROW("layers.*.mlp.down_proj"),
    TPXP_ROW("embed_tokens", .in = TPXP_R),
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
      st = tpxp_add_rules(host, ctx, "", k_qwen35_head,
                          TPXP_N_OF(k_qwen35_head));
    if (st == TPX_PLUGIN_OK)
      st = tpxp_add_rules(host, ctx, qwen35_prefix(arch), k_qwen35,
                          TPXP_N_OF(k_qwen35));
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
    st = tpxp_add_rules(host, ctx, "", k_qwen_sp1, TPXP_N_OF(k_qwen_sp1));
  else
    st = tpxp_add_rules(host, ctx, "", k_qwen_sp0, TPXP_N_OF(k_qwen_sp0));
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
  char m[TPXP_FQN_MAX];
  int64_t key_dim = g->k_heads * g->k_dim, value_dim = g->v_heads * g->v_dim;
  int64_t conv_dim = 2 * key_dim + value_dim;
  /* dt_bias and A_log: one value per value head (kept in fp32). */
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_PRM("", "dt_bias", g->v_heads, -1),
      TPXP_SK_PRM("", "A_log", g->v_heads, -1),
      TPXP_SK_MOD("conv1d", "other"),
  };
  const tpxp_sk_row tail[] = {
      TPXP_SK_NRM("norm", g->v_dim, 0),
      TPXP_SK_LIN("out_proj", value_dim, hidden, 0),
      TPXP_SK_LIN("in_proj_qkv", hidden, conv_dim, 0),
      TPXP_SK_LIN("in_proj_z", hidden, value_dim, 0),
      TPXP_SK_LIN("in_proj_b", hidden, g->v_heads, 0),
      TPXP_SK_LIN("in_proj_a", hidden, g->v_heads, 0),
  };
  /* Depthwise Conv1d, no bias: weight [conv_dim, 1, kernel]. */
  const int64_t conv[3] = {conv_dim, 1, g->kernel};
  char f[TPXP_FQN_MAX];
  tpxp_fmt(m, sizeof m, "%s.linear_attn", layer);
  tpxp_fmt(f, sizeof f, "%s.conv1d", m);
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, m, rows, NULL));
  TPXP_CHK(host->skeleton_add_param(ctx, f, "weight", conv, 3, NULL));
  return TPXP_SK_ROWS(host, ctx, m, tail, NULL);
}

/* Qwen3.5 gated full attention: q_proj carries the output gate (2x). */
static int qwen35_self_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *layer, const tpxp_decoder *d) {
  char m[TPXP_FQN_MAX];
  int64_t q = d->heads * d->head_dim, kv = d->kv_heads * d->head_dim;
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("q_proj", d->hidden, 2 * q, d->qkv_bias),
      TPXP_SK_LIN("k_proj", d->hidden, kv, d->qkv_bias),
      TPXP_SK_LIN("v_proj", d->hidden, kv, d->qkv_bias),
      TPXP_SK_LIN("o_proj", q, d->hidden, d->o_bias),
      TPXP_SK_NRM("q_norm", d->head_dim, 0),
      TPXP_SK_NRM("k_norm", d->head_dim, 0),
  };
  tpxp_fmt(m, sizeof m, "%s.self_attn", layer);
  return TPXP_SK_ROWS(host, ctx, m, rows, NULL);
}

/* Qwen3.5's vision config, with transformers' defaults. */
typedef struct vision_dims {
  int64_t depth, hidden, inter, patch, tpatch, chans, merge, out, npos;
} vision_dims;

static int vision_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       vision_dims *v) {
  static const struct {
    const char *key;
    int64_t dflt;
    size_t off;
  } keys[] = {
      {"vision_config.depth", 27, offsetof(vision_dims, depth)},
      {"vision_config.hidden_size", 1152, offsetof(vision_dims, hidden)},
      {"vision_config.intermediate_size", 4304, offsetof(vision_dims, inter)},
      {"vision_config.patch_size", 16, offsetof(vision_dims, patch)},
      {"vision_config.temporal_patch_size", 2, offsetof(vision_dims, tpatch)},
      {"vision_config.in_channels", 3, offsetof(vision_dims, chans)},
      {"vision_config.spatial_merge_size", 2, offsetof(vision_dims, merge)},
      {"vision_config.out_hidden_size", 3584, offsetof(vision_dims, out)},
      {"vision_config.num_position_embeddings", 2304,
       offsetof(vision_dims, npos)},
  };
  size_t i;
  for (i = 0; i < TPXP_N_OF(keys); i++)
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, keys[i].key, keys[i].dflt,
                              (int64_t *)((char *)v + keys[i].off)));
  return TPX_PLUGIN_OK;
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
  vision_dims v;
  int64_t i, m2;
  TPXP_CHK(vision_read(host, ctx, &v));
  m2 = v.hidden * v.merge * v.merge;
  {
    const int64_t patch[5] = {v.hidden, v.chans, v.tpatch, v.patch, v.patch};
    const tpxp_sk_row head[] = {
        TPXP_SK_PRM("patch_embed.proj", "bias", v.hidden, -1),
        TPXP_SK_EMB("pos_embed", v.npos, v.hidden),
        TPXP_SK_MOD("rotary_pos_emb", "rotary"),
        TPXP_SK_MOD("blocks", "container"),
    };
    const tpxp_sk_row block[] = {
        TPXP_SK_NRM("norm1", v.hidden, 1),
        TPXP_SK_NRM("norm2", v.hidden, 1),
        TPXP_SK_LIN("attn.qkv", v.hidden, 3 * v.hidden, 1),
        TPXP_SK_LIN("attn.proj", v.hidden, v.hidden, 1),
        TPXP_SK_LIN("mlp.linear_fc1", v.hidden, v.inter, 1),
        TPXP_SK_LIN("mlp.linear_fc2", v.inter, v.hidden, 1),
    };
    const tpxp_sk_row merger[] = {
        TPXP_SK_NRM("merger.norm", v.hidden, 1),
        TPXP_SK_LIN("merger.linear_fc1", m2, m2, 1),
        TPXP_SK_LIN("merger.linear_fc2", m2, v.out, 1),
    };
    TPXP_CHK(
        tpxp_sk_module(host, ctx, "model.visual.patch_embed.proj", "other"));
    TPXP_CHK(host->skeleton_add_param(ctx, "model.visual.patch_embed.proj",
                                      "weight", patch, 5, NULL));
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "model.visual", head, NULL));
    for (i = 0; i < v.depth; i++) {
      tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld", (long long)i);
      TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, block, NULL));
    }
    return TPXP_SK_ROWS(host, ctx, "model.visual", merger, NULL);
  }
}

/* Qwen3.5-MoE's sparse block at <layer>.mlp, in transformers' order: the
 * router gate, the fused experts, shared_expert (a gated MLP of
 * shared_expert_intermediate_size) and shared_expert_gate (hidden -> 1). */
static int qwen35_moe_mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *layer, int64_t hidden, int64_t experts,
                          int64_t inter, int64_t shared) {
  char m[TPXP_FQN_MAX], f[TPXP_FQN_MAX];
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("shared_expert.gate_proj", hidden, shared, 0),
      TPXP_SK_LIN("shared_expert.up_proj", hidden, shared, 0),
      TPXP_SK_LIN("shared_expert.down_proj", shared, hidden, 0),
      TPXP_SK_LIN("shared_expert_gate", hidden, 1, 0),
  };
  tpxp_fmt(m, sizeof m, "%s.mlp", layer);
  TPXP_CHK(tpxp_sk_module(host, ctx, m, "other"));
  tpxp_fmt(f, sizeof f, "%s.gate", m);
  TPXP_CHK(tpxp_sk_router(host, ctx, f, experts, hidden, NULL));
  tpxp_fmt(f, sizeof f, "%s.experts", m);
  TPXP_CHK(tpxp_sk_fused_experts(host, ctx, f, experts, hidden, inter, NULL));
  return TPXP_SK_ROWS(host, ctx, m, rows, NULL);
}

/* Qwen3.5's dense gated MLP at <layer>.mlp. */
static int qwen35_dense_mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *layer, int64_t hidden, int64_t inter) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("mlp.gate_proj", hidden, inter, 0),
      TPXP_SK_LIN("mlp.up_proj", hidden, inter, 0),
      TPXP_SK_LIN("mlp.down_proj", inter, hidden, 0),
  };
  return TPXP_SK_ROWS(host, ctx, layer, rows, NULL);
}

/* Read optional integer keys of config section `sec`, each with its
 * default. */
typedef struct int_key {
  const char *key;
  int64_t dflt;
  int64_t *out;
} int_key;

static int read_ints(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *sec, const int_key *keys, size_t n) {
  char p[TPXP_FQN_MAX];
  size_t i;
  for (i = 0; i < n; i++)
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                              tpxp_path(p, sizeof p, sec, keys[i].key),
                              keys[i].dflt, keys[i].out));
  return TPX_PLUGIN_OK;
}

/* What every Qwen3.5 layer needs: the decoder sizes, the GatedDeltaNet
 * sizes, the MoE sizes (moe_dims NULL: dense MLP) and the layer schedule. */
typedef struct qwen35_cfg {
  tpxp_decoder d;
  gdn_dims g;
  const int64_t *moe_dims; /* experts, moe_intermediate, shared */
  const char *sec;
  int64_t interval;
} qwen35_cfg;

/* One Qwen3.5 decoder layer: full or linear attention, the dense or MoE
 * MLP, and the two norms. */
static int qwen35_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *layer, int64_t i, const void *user) {
  const qwen35_cfg *q = user;
  const tpxp_decoder *d = &q->d;
  const int64_t *moe = q->moe_dims;
  int full = 0;
  const tpxp_sk_row norms[] = {
      TPXP_SK_NRM("input_layernorm", d->hidden, 0),
      TPXP_SK_NRM("post_attention_layernorm", d->hidden, 0),
  };
  TPXP_CHK(qwen35_is_full(host, ctx, q->sec, i, q->interval, &full));
  TPXP_CHK(full ? qwen35_self_attn(host, ctx, layer, d)
                : qwen35_linear_attn(host, ctx, layer, d->hidden, &q->g));
  TPXP_CHK(
      moe != NULL
          ? qwen35_moe_mlp(host, ctx, layer, d->hidden, moe[0], moe[1], moe[2])
          : qwen35_dense_mlp(host, ctx, layer, d->hidden, d->intermediate));
  return TPXP_SK_ROWS(host, ctx, layer, norms, NULL);
}

static int qwen35_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *arch) {
  int moe = is_qwen35_moe(arch);
  int vlm = moe || tpxp_arch_is(arch, "Qwen3_5ForConditionalGeneration");
  /* experts, moe_intermediate_size, shared_expert_intermediate_size */
  int64_t moe_dims[3] = {0, 0, 0}, interval;
  const char *sec = vlm ? "text_config" : "";
  tpxp_decoder d;
  gdn_dims g;
  int tie_top = 0;
  memset(&d, 0, sizeof d);
  /* Qwen3.5 defaults: head_dim 256 (not hidden / heads). The MoE text
   * config has no dense intermediate_size. */
  TPXP_CHK(moe ? tpxp_decoder_read_moe(host, ctx, sec, 0, &d)
               : tpxp_decoder_read(host, ctx, sec, 0, &d));
  {
    const int_key moe_keys[] = {
        {"num_experts", 256, &moe_dims[0]},
        {"moe_intermediate_size", 512, &moe_dims[1]},
        {"shared_expert_intermediate_size", 512, &moe_dims[2]},
    };
    const int_key keys[] = {
        {"head_dim", 256, &d.head_dim},
        {"linear_num_key_heads", 16, &g.k_heads},
        {"linear_num_value_heads", 32, &g.v_heads},
        {"linear_key_head_dim", 128, &g.k_dim},
        {"linear_value_head_dim", 128, &g.v_dim},
        {"linear_conv_kernel_dim", 4, &g.kernel},
        {"full_attention_interval", 4, &interval},
    };
    if (moe)
      TPXP_CHK(read_ints(host, ctx, sec, moe_keys, TPXP_N_OF(moe_keys)));
    TPXP_CHK(read_ints(host, ctx, sec, keys, 1));
    if (vlm) {
      TPXP_CHK(
          tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", d.tie, &tie_top));
      d.tie = tie_top;
    }
    TPXP_CHK(read_ints(host, ctx, sec, keys + 1, TPXP_N_OF(keys) - 1));
  }
  d.prefix = vlm ? "model.language_model" : "model";
  /* HF order: model.visual, then model.language_model. */
  if (vlm && host->config_has(ctx, "vision_config"))
    TPXP_CHK(qwen35_visual(host, ctx));
  {
    const tpxp_sk_row tail[] = {
        TPXP_SK_NRM("norm", d.hidden, 0),
        TPXP_SK_MOD("rotary_emb", "rotary"),
    };
    const qwen35_cfg q = {d, g, moe ? moe_dims : NULL, sec, interval};
    const tpxp_stack stack = {.prefix = d.prefix,
                              .embed = "embed_tokens",
                              .vocab = d.vocab,
                              .hidden = d.hidden,
                              .layers = d.layers,
                              .layer = qwen35_layer,
                              .user = &q,
                              .tail = tail,
                              .n_tail = TPXP_N_OF(tail),
                              .head = "lm_head",
                              .tie = d.tie};
    return tpxp_sk_stack(host, ctx, &stack);
  }
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
