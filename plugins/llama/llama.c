/* llama.c — the tpx_llama family plugin: NeMo Automodel's Llama plan
 * (_parallelize_llama, also get_llama_nemotron_super_tp_plan), the
 * DeciLM / Nemotron-NAS plan (get_decilm_nemotron_tp_plan, with
 * _parallelize_decilm_nemotron's model_type refusal) and the named plan
 * "llama_nemotron_super_tp_plan" (docs/SEMANTICS.md "Family plans";
 * docs/SEMANTICS.md "Plan selection"), and skeletons for Llama and for DeciLM's
 * heterogeneous block_configs. Not: the validate_tp_mesh / Nemotron-NAS
 * diagnostics and the Nemotron-Flash lm_head post-processing (docs/SEMANTICS.md
 * "Plan selection"): the host runs both for every plan source, and get_plan,
 * like upstream's plan functions, never looks at tp or the head counts. The
 * Nemotron-Flash skeleton (hybrid blocks) is in nemotron_flash_skeleton.c. */
#include <stdio.h>
#include <string.h>

#include "nemotron_flash.h"
#include "tpxp_common.h"

#define SUPER_PLAN "llama_nemotron_super_tp_plan"

static const char *const k_archs[] = {
    "transformers.models.llama.modeling_llama.LlamaForCausalLM",
    "nemo_automodel.components.models.llama.model.LlamaForCausalLM",
    "LlamaForCausalLM",
    "NemotronFlashForCausalLM",
    "DeciLMForCausalLM",
    NULL};
static const char *const k_plans[] = {SUPER_PLAN, NULL};
/* _is_nemotron_flash_config: after selection, whatever the plan's source,
 * upstream drops an lm_head whose output is not sharded for these models. */
/* The family facts (docs/PLUGIN_ABI.md "Traits"): DeciLM's per-layer
 * block_configs; the Llama-based VLMs' layer lists (NeMo Automodel 0.7.0's
 * layer table), head counts in text_config and the inner model of their
 * Hugging Face tp plan; the retrieval wrappers around a Llama; GPT-2. */
#define LLAVA_LANG "model.language_model.layers,language_model.model.layers"
#define LLAVA_VIS                                                              \
  "model.vision_tower.vision_model.encoder.layers,"                            \
  "model.vision_tower.encoder.layers,vision_tower.vision_model.encoder.layers"
#define LLAVA(cls)                                                             \
  "layers=" cls ":language:" LLAVA_LANG, "layers=" cls ":vision:" LLAVA_VIS,   \
      "text_config_heads=" cls, "hf_prefix=" cls ":model.language_model"
static const char *const k_traits[] = {
    "lm_head_sharded_only=arch:NemotronFlashForCausalLM",
    "lm_head_sharded_only=model_type:nemotron_flash",
    "lm_head_sharded_only=name_or_path:nemotron-flash",
    "block_configs=DeciLMForCausalLM:nemotron-nas",
    LLAVA("LlavaForConditionalGeneration"),
    LLAVA("LlavaNextForConditionalGeneration"),
    LLAVA("LlavaNextVideoForConditionalGeneration"),
    LLAVA("LlavaOnevisionForConditionalGeneration"),
    "layers=Llama4ForConditionalGeneration:language:"
    "language_model.model.layers",
    "layers=Llama4ForConditionalGeneration:vision:vision_model.model.layers",
    "text_config_heads=Llama4ForConditionalGeneration",
    "hf_prefix=Llama4ForConditionalGeneration:language_model.model",
    "layers=LlamaNemotronVLModel:language:language_model.layers",
    "layers=LlamaNemotronVLModel:vision:"
    "vision_model.vision_model.encoder.layers,vision_model.encoder.layers",
    "layers=SmolVLMForConditionalGeneration:language:model.text_model.layers",
    "layers=SmolVLMForConditionalGeneration:vision:"
    "model.vision_model.encoder.layers",
    "text_config_heads=SmolVLMForConditionalGeneration",
    "inner_model=BiEncoderModel:model",
    "inner_model=CrossEncoderModel:model",
    "inner_model=FSDPBiEncoderModel:model",
    "layers=GPT2LMHeadModel:language:transformer.h",
    NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "llama",
      .version = "1.0.0",
      .description =
          "Llama family: LlamaForCausalLM (HF and NeMo), "
          "NemotronFlashForCausalLM, DeciLMForCausalLM (Nemotron-NAS, "
          "heterogeneous block_configs) and the named plan "
          "llama_nemotron_super_tp_plan, as NeMo Automodel plans them",
      .architectures = k_archs,
      .plans = k_plans,
      .traits = k_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* ---- plans ---- */

/* _parallelize_llama, sp off. The fused qkv_proj / gate_up_proj keys cover
 * Nemotron-Super style fused projections and are absent in plain Llama. */
static const tpxp_rule k_llama_sp0[] = {
    TPXP_ROW("model.embed_tokens", .in = TPXP_R),
    TPXP_COL("model.layers.*.self_attn.q_proj"),
    TPXP_COL("model.layers.*.self_attn.k_proj"),
    TPXP_COL("model.layers.*.self_attn.v_proj"),
    TPXP_COL("model.layers.*.self_attn.qkv_proj", .optional = 1),
    TPXP_COL("model.layers.*.mlp.gate_up_proj", .optional = 1),
    TPXP_ROW("model.layers.*.self_attn.o_proj"),
    TPXP_COL("model.layers.*.mlp.up_proj"),
    TPXP_COL("model.layers.*.mlp.gate_proj"),
    TPXP_ROW("model.layers.*.mlp.down_proj"),
    /* Vocab-sharded DTensor logits for the vocab-parallel loss. */
    TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
};
/* sp on: a dict update of the above. */
static const tpxp_rule k_llama_sp1[] = {
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R, .out = TPXP_S1,
               .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.self_attn.o_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("model.layers.*.mlp.down_proj", .out = TPXP_S1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_COL("lm_head", .in = TPXP_S1, .out = TPXP_SM1,
             .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ("model.norm"),
    TPXP_SEQ_AG("model.layers.*.input_layernorm", .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ_AG("model.layers.*.post_attention_layernorm",
                .local = TPXP_KEEP_DTENSOR),
};

/* get_decilm_nemotron_tp_plan: a base-style plan (plain sp, replicated
 * lm_head output) because the remote-code forward handles rotary at model
 * level and dispatches per-layer block configs. */
static const tpxp_rule k_decilm_head[2] = TPXP_HEAD_REPLICATED("lm_head");

static int str_eq(const char *a, const char *b) {
  return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* config.architectures[0], guarded: absent or empty gives NULL. */
static const char *first_arch(const tpx_plugin_host *host,
                              tpx_plugin_ctx *ctx) {
  const char *a = NULL;
  if (host->config_get_string(ctx, "architectures[0]", &a) != TPX_PLUGIN_OK)
    return NULL;
  return a;
}

static const char *model_type(const tpx_plugin_host *host,
                              tpx_plugin_ctx *ctx) {
  const char *t = NULL;
  if (host->config_get_string(ctx, "model_type", &t) != TPX_PLUGIN_OK)
    return NULL;
  return t;
}

/* The rule `suffix` ends with after the plan's dict update. */
static const tpxp_rule *effective_rule(const tpxp_rule *r0, int sp) {
  for (size_t i = 0; sp && i < TPXP_N_OF(k_llama_sp1); i++)
    if (strcmp(k_llama_sp1[i].suffix, r0->suffix) == 0)
      return &k_llama_sp1[i];
  return r0;
}

/* What this get_plan is, and is not (docs/SEMANTICS.md "Plan selection"): the
 * plan function
 * (_parallelize_llama, _parallelize_decilm_nemotron, or the named plan's
 * branch), which never looks at tp or the head counts.
 * validate_tp_mesh / validate_tp_mesh_for_nemotron_nas are the host's
 * diagnostics (tpx_validate_tp_mesh, before selection, for every plan
 * source), and the Nemotron-Flash lm_head post-processing is the host's too
 * (after selection, for every source); the plugin does neither. Its only
 * refusal besides unknown requests is _parallelize_decilm_nemotron's
 * model_type check. */
int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  const char *arch, *mtype;
  int decilm, st;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "llama plugin: bad plan request");
  arch = req->architecture;
  mtype = model_type(host, ctx);
  if (req->plan_name != NULL) {
    const char *a0;
    if (strcmp(req->plan_name, SUPER_PLAN) != 0)
      return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                       "llama plugin: unknown named plan '%s' (known: %s)",
                       req->plan_name, SUPER_PLAN);
    /* DeciLM remote code with a Nemotron-NAS config gets the DeciLM plan;
     * anything else the Llama plan. */
    a0 = first_arch(host, ctx);
    decilm = str_eq(a0, "DeciLMForCausalLM") && str_eq(mtype, "nemotron-nas");
  } else if (tpxp_arch_is(arch, "DeciLMForCausalLM")) {
    /* _parallelize_decilm_nemotron's own contract: it raises unless
     * model_type is "nemotron-nas" (the host then falls back to the HF plan,
     * as upstream does when a plan function raises). */
    if (!str_eq(mtype, "nemotron-nas"))
      return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                       "DeciLMForCausalLM: the DeciLM plan is only for "
                       "Nemotron-NAS models (config model_type must be "
                       "\"nemotron-nas\", got \"%s\")",
                       mtype != NULL ? mtype : "(none)");
    decilm = 1;
  } else if (tpxp_arch_is(arch, "LlamaForCausalLM") ||
             tpxp_arch_is(arch, "NemotronFlashForCausalLM")) {
    decilm = 0;
  } else {
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "llama plugin: architecture '%s' is not served",
                     arch != NULL ? arch : "(null)");
  }
  if (decilm) {
    st = tpxp_add_m3_plan(host, ctx, "model", k_decilm_head,
                          req->sequence_parallel, tpxp_m3_norms_seq,
                          TPXP_N_OF(tpxp_m3_norms_seq));
  } else {
    st = TPXP_ADD_RULES(host, ctx, "", k_llama_sp0);
    if (st == TPX_PLUGIN_OK && req->sequence_parallel)
      st = TPXP_ADD_RULES(host, ctx, "", k_llama_sp1);
  }
  if (st != TPX_PLUGIN_OK)
    return st;
  /* Nemotron-Flash runs the Llama plan upstream, but its layers have an
   * `ffn`, not an `mlp`: the three MLP keys match nothing there (upstream
   * skips them silently). They stay in the plan, exactly as upstream, marked
   * variant-only; tpx_plugin_validate says loudly what that leaves
   * replicated. */
  if (!decilm && tpxp_arch_is(arch, "NemotronFlashForCausalLM"))
    for (size_t i = 0; i < TPXP_N_OF(k_llama_sp0) && st == TPX_PLUGIN_OK; i++)
      if (strstr(k_llama_sp0[i].suffix, ".mlp.") != NULL) {
        tpxp_rule r = *effective_rule(&k_llama_sp0[i], req->sequence_parallel);
        r.optional = 1;
        st = tpxp_add_rules(host, ctx, "", &r, 1);
      }
  if (st != TPX_PLUGIN_OK)
    return st;
  if (host->plan_set_function != NULL)
    host->plan_set_function(ctx, decilm ? "decilm_nemotron" : "llama");
  return TPX_PLUGIN_OK;
}

/* Nemotron-Flash: the Llama plan leaves every layer's `ffn` replicated on
 * all tp ranks (a memory cost a user should see before the GPU fills). */
int tpx_plugin_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const tpx_plugin_plan_request *req) {
  if (!tpxp_request_ok(req) || req->tp_size <= 1 || req->plan_name != NULL ||
      !tpxp_arch_is(req->architecture, "NemotronFlashForCausalLM") ||
      host->model_has_module(ctx, "model.layers.0") != 1)
    return TPX_PLUGIN_OK;
  int64_t n = host->model_count_children(ctx, "model.layers"), with_ffn = 0;
  for (int64_t i = 0; i < n; i++) {
    char fqn[64];
    snprintf(fqn, sizeof fqn, "model.layers.%lld.ffn", (long long)i);
    with_ffn += host->model_has_module(ctx, fqn) == 1;
  }
  if (with_ffn > 0) {
    char msg[TPXP_MSG_MAX];
    snprintf(
        msg, sizeof msg,
        "NemotronFlashForCausalLM uses the Llama plan (as upstream), whose "
        "model.layers.*.mlp.* keys match nothing in this model: the `ffn` "
        "of %lld of %lld layers stays replicated on every one of the %lld "
        "tp ranks; pass a custom plan (--plan) that shards "
        "model.layers.*.ffn to split it",
        (long long)with_ffn, (long long)n, (long long)req->tp_size);
    host->diagnose(ctx, TPX_PLUGIN_DIAG_WARNING, "replicated-by-omission", msg);
  }
  return TPX_PLUGIN_OK;
}

/* ---- skeletons ---- */

/* DeciLM's _ffn_mult_to_intermediate_size: int(2 * ffn_mult * hidden / 3)
 * rounded up to a multiple of 256. */
static int64_t ffn_mult_to_intermediate(double ffn_mult, int64_t hidden) {
  int64_t n = (int64_t)(2.0 * ffn_mult * (double)hidden / 3.0);
  if (n % 256 != 0)
    n += 256 - n % 256;
  return n;
}

typedef struct block_cfg {
  int attn_no_op, attn_linear, ffn_no_op, ffn_linear;
  int64_t n_heads_in_group; /* 0 when null */
  double ffn_mult;          /* < 0 when null */
} block_cfg;

/* block_configs[i]: what its attention and FFN are. */
static int read_block(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      int64_t i, block_cfg *b) {
  char sec[64];
  const tpxp_key keys[] = {
      TPXP_KEY_B("attention.no_op", &b->attn_no_op, 0),
      TPXP_KEY_B("attention.replace_with_linear", &b->attn_linear, 0),
      TPXP_KEY_I("attention.n_heads_in_group", &b->n_heads_in_group, 0),
      TPXP_KEY_B("ffn.no_op", &b->ffn_no_op, 0),
      TPXP_KEY_B("ffn.replace_with_linear", &b->ffn_linear, 0),
      TPXP_KEY_F("ffn.ffn_mult", &b->ffn_mult, -1.0),
  };
  tpxp_fmt(sec, sizeof sec, "block_configs[%lld]", (long long)i);
  return TPXP_CFG_READ(host, ctx, sec, keys);
}

/* One DeciLM decoder layer in the remote code's module order:
 * input_layernorm, self_attn, post_attention_layernorm, mlp. An attention
 * no_op block has neither input_layernorm nor self_attn; replace_with_linear
 * makes self_attn one square linear_attn. The same for the FFN side
 * (mlp.linear_mlp). */
static int decilm_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *layer, int64_t i, const void *user) {
  const tpxp_decoder *d = user;
  int64_t h = d->hidden, q = d->heads * d->head_dim, kv = 0, inter = 0;
  block_cfg b;
  int attn, ffn;
  TPXP_CHK(read_block(host, ctx, i, &b));
  attn = !b.attn_no_op && !b.attn_linear;
  ffn = !b.ffn_no_op && !b.ffn_linear;
  if (attn && b.n_heads_in_group <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config block_configs[%lld].attention: n_heads_in_group "
                     "is missing for an attention block",
                     (long long)i);
  if (attn)
    kv = (d->heads / b.n_heads_in_group) * d->head_dim;
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_WHEN(!b.attn_no_op),
        TPXP_SK_NRM("input_layernorm", h, 0),
        TPXP_SK_WHEN(!b.attn_no_op && b.attn_linear),
        TPXP_SK_LIN("self_attn.linear_attn", h, h, 0),
        TPXP_SK_WHEN(attn),
        TPXP_SK_LIN("self_attn.q_proj", h, q, d->qkv_bias),
        TPXP_SK_WHEN(attn),
        TPXP_SK_LIN("self_attn.k_proj", h, kv, d->qkv_bias),
        TPXP_SK_WHEN(attn),
        TPXP_SK_LIN("self_attn.v_proj", h, kv, d->qkv_bias),
        TPXP_SK_WHEN(attn),
        TPXP_SK_LIN("self_attn.o_proj", q, h, d->o_bias),
        TPXP_SK_WHEN(!b.ffn_no_op),
        TPXP_SK_NRM("post_attention_layernorm", h, 0),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, layer, rows, NULL));
  }
  if (b.ffn_no_op)
    return TPX_PLUGIN_OK;
  if (ffn && b.ffn_mult <= 0.0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config block_configs[%lld].ffn: ffn_mult is missing "
                     "for an FFN block",
                     (long long)i);
  if (ffn)
    inter = ffn_mult_to_intermediate(b.ffn_mult, h);
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_WHEN(b.ffn_linear),
        TPXP_SK_LIN("mlp.linear_mlp", h, h, 0),
        TPXP_SK_WHEN(ffn),
        TPXP_SK_LIN("mlp.gate_proj", h, inter, d->mlp_bias),
        TPXP_SK_WHEN(ffn),
        TPXP_SK_LIN("mlp.up_proj", h, inter, d->mlp_bias),
        TPXP_SK_WHEN(ffn),
        TPXP_SK_LIN("mlp.down_proj", inter, h, d->mlp_bias),
    };
    return TPXP_SK_ROWS(host, ctx, layer, rows, NULL);
  }
}

static int decilm_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  tpxp_decoder d;
  int64_t nblocks = 0;
  int attn_bias = 0;
  /* DeciLM configs carry no top-level intermediate_size (it is per block),
   * so the common decoder reader does not fit; read the rest here. */
  tpxp_key dims[] = {
      TPXP_KEY_I("num_hidden_layers", &d.layers, 0),
      TPXP_KEY_I("hidden_size", &d.hidden, 0),
      TPXP_KEY_I("num_attention_heads", &d.heads, 0),
      TPXP_KEY_I("vocab_size", &d.vocab, 0),
  };
  const tpxp_key flags[] = {
      TPXP_KEY_B("attention_bias", &attn_bias, 0),
      TPXP_KEY_B("mlp_bias", &d.mlp_bias, 0),
      TPXP_KEY_B("tie_word_embeddings", &d.tie, 0),
  };
  size_t k;
  memset(&d, 0, sizeof d);
  for (k = 0; k < TPXP_N_OF(dims); k++) dims[k].required = 1;
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", dims));
  if (d.heads <= 0 || d.hidden <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config: num_attention_heads and hidden_size must be "
                     "positive");
  TPXP_CHK(
      tpxp_cfg_int_opt(host, ctx, "head_dim", d.hidden / d.heads, &d.head_dim));
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", flags));
  d.qkv_bias = d.o_bias = attn_bias;
  if (host->config_get_length(ctx, "block_configs", &nblocks) != TPX_PLUGIN_OK)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "DeciLMForCausalLM: config key 'block_configs' (a list) "
                     "is missing");
  if (nblocks < d.layers)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "DeciLMForCausalLM: num_hidden_layers (%lld) exceeds the "
                     "number of block_configs (%lld)",
                     (long long)d.layers, (long long)nblocks);
  {
    const tpxp_sk_row tail[] = {
        TPXP_SK_NRM("norm", d.hidden, 0),
        TPXP_SK_MOD("rotary_emb", "rotary"),
    };
    const tpxp_stack stack = {.prefix = "model",
                              .embed = "embed_tokens",
                              .vocab = d.vocab,
                              .hidden = d.hidden,
                              .layers = d.layers,
                              .layer = decilm_layer,
                              .user = &d,
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
  int st;
  if (tpxp_arch_is(architecture, "DeciLMForCausalLM"))
    return decilm_skeleton(host, ctx);
  if (tpxp_arch_is(architecture, "NemotronFlashForCausalLM"))
    return nemotron_flash_skeleton(host, ctx);
  if (!tpxp_arch_is(architecture, "LlamaForCausalLM"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "llama plugin: no skeleton for '%s' (only "
                     "LlamaForCausalLM, DeciLMForCausalLM and "
                     "NemotronFlashForCausalLM)",
                     architecture != NULL ? architecture : "(null)");
  memset(&d, 0, sizeof d);
  /* HF LlamaConfig defaults tie_word_embeddings to False. */
  if ((st = tpxp_decoder_read(host, ctx, "", 0, &d)) != TPX_PLUGIN_OK)
    return st;
  d.prefix = "model";
  d.rotary = 1;
  if ((st = tpxp_sk_decoder(host, ctx, &d)) != TPX_PLUGIN_OK)
    return st;
  return tpxp_sk_lm_head(host, ctx, "lm_head", d.hidden, d.vocab, 0, d.tie,
                         "model.embed_tokens.weight", NULL);
}
