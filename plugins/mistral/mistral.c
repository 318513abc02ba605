/* mistral.c — the tpx_mistral family plugin: NeMo Automodel's
 * _parallelize_ministral3 (Ministral3ForCausalLM; docs/SEMANTICS.md "Family
 * plans") and _parallelize_mistral3_vlm (Mistral3ForConditionalGeneration and
 * the NeMo Mistral3FP8VLMForConditionalGeneration), with skeletons: a
 * Mistral-style decoder, and for the VLM the Pixtral vision tower and the
 * multi-modal projector (both left replicated by the plan). Also
 * MuseGlimmerForConditionalGeneration (_parallelize_muse_glimmer: the
 * Ministral3 sp0 set plus the attention output gate; its skeleton and
 * strategy check are in muse_glimmer.c). */
#include <string.h>

#include "muse_glimmer.h"
#include "tpxp_common.h"

static const char *const k_archs[] = {
    "nemo_automodel.components.models.mistral3.model.Ministral3ForCausalLM",
    "transformers.models.mistral3.modeling_mistral3."
    "Mistral3ForConditionalGeneration",
    "nemo_automodel.components.models.mistral3_vlm.model."
    "Mistral3FP8VLMForConditionalGeneration",
    "Ministral3ForCausalLM",
    "Mistral3ForConditionalGeneration",
    "Mistral3FP8VLMForConditionalGeneration",
    "nemo_automodel.components.models.muse_glimmer.model."
    "MuseGlimmerForConditionalGeneration",
    "MuseGlimmerForConditionalGeneration",
    NULL};

/* MuseGlimmer's skeleton uses NeMo Automodel's native names; these are the
 * transformers-5 checkpoint names of its vision tower, language model and
 * vision adapter as Automodel's state-dict adapter maps them
 * (muse_glimmer.c), checked name by name against transformers' own class
 * (tests/data/families/mistral/tf5_names.py). The first rule that matches
 * applies: the renamed vision-layer modules come before their layer's. */
#define MG "name_alias=MuseGlimmerForConditionalGeneration:"
#define MG_LAYER "model.language_model.layers.*."
#define MG_VT "model.vision_tower."
#define MG_VE "model.vision_encoder."
#define MISTRAL3_VLM(cls)                                                      \
  "layers=" cls ":language:model.language_model.layers",                       \
      "layers=" cls ":vision:model.vision_tower.encoder.layers,"               \
      "model.vision_tower.vision_model.encoder.layers,"                        \
      "model.vision_tower.transformer.layers"
static const char *const k_traits[] = {
    MG MG_VT "patch_embedder.patch_embedding=" MG_VE "conv1_linear",
    MG MG_VT "patch_embedder.position_embedding_table.weight=" MG_VE
             "positional_embedding_vlm",
    MG MG_VT "layers.*.attn.proj=" MG_VE "transformer.*.attn.o_proj",
    MG MG_VT "layers.*.mlp.fc1=" MG_VE "transformer.*.mlp.c_fc",
    MG MG_VT "layers.*.mlp.fc2=" MG_VE "transformer.*.mlp.c_proj",
    MG MG_VT "layers.*.norm1=" MG_VE "transformer.*.ln_1",
    MG MG_VT "layers.*.norm2=" MG_VE "transformer.*.ln_2",
    MG MG_VT "layers=" MG_VE "transformer",
    MG "model.vision_tower=model.vision_encoder",
    MG MG_LAYER "self_attn.gate_proj=model.layers.*.self_attn.output_gate_proj",
    MG MG_LAYER "post_attention_layernorm=model.layers.*.post_attn_norm",
    MG MG_LAYER "pre_feedforward_layernorm=model.layers.*."
                "post_attention_layernorm",
    MG MG_LAYER "post_feedforward_layernorm=model.layers.*.post_ffn_norm",
    MG "model.language_model=model",
    MG "model.vision_adapter.fc1=model.vision_adapter.c_fc",
    MG "model.vision_adapter.fc2=model.vision_adapter.c_proj",
    /* The family facts (docs/PLUGIN_ABI.md "Traits"): the VLMs' layer
     * lists (NeMo Automodel 0.7.0's layer table), head counts in
     * text_config and the inner model of their Hugging Face tp plan. */
    MISTRAL3_VLM("Mistral3ForConditionalGeneration"),
    "text_config_heads=Mistral3ForConditionalGeneration",
    "hf_prefix=Mistral3ForConditionalGeneration:model.language_model",
    MISTRAL3_VLM("Mistral3FP8VLMForConditionalGeneration"),
    "layers=Ministral3BidirectionalModel:language:layers", NULL};
#undef MISTRAL3_VLM
#undef MG_VE
#undef MG_VT
#undef MG_LAYER
#undef MG

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "mistral",
      .version = "1.0.0",
      .description =
          "Mistral family: Ministral3ForCausalLM, "
          "Mistral3ForConditionalGeneration and "
          "Mistral3FP8VLMForConditionalGeneration (language model under "
          "model.language_model; vision tower and multi_modal_projector "
          "replicated; sequence parallel ignored for the VLM); "
          "MuseGlimmerForConditionalGeneration (the Ministral3 plan with "
          "the attention output_gate_proj; vision encoder replicated; sp "
          "ignored; tp must divide the KV-head count)",
      .architectures = k_archs,
      .plans = NULL,
      .traits = k_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* _parallelize_ministral3's head: vocab-sharded logits. */
static const tpxp_rule k_head[2] = TPXP_HEAD_VOCAB("lm_head");

static int is_vlm(const char *arch) {
  return tpxp_arch_is(arch, "Mistral3ForConditionalGeneration") ||
         tpxp_arch_is(arch, "Mistral3FP8VLMForConditionalGeneration");
}

int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  int st;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "mistral plugin: bad plan request");
  if (req->plan_name != NULL)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "mistral plugin: no named plan '%s'", req->plan_name);
  /* Like upstream's plan functions, get_plan never looks at tp or the head
   * counts: the head check is validate_tp_mesh, which the host runs before
   * selection for every plan source (heads-not-divisible; for the VLM from
   * text_config). */
  if (is_vlm(req->architecture)) {
    /* The Ministral3 sp0 set under model.language_model; sp is silently
     * ignored; vision_tower / multi_modal_projector get no key. */
    st =
        tpxp_add_m3_plan(host, ctx, "model.language_model", k_head, 0, NULL, 0);
    if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
      host->plan_set_function(ctx, "mistral3_vlm");
    return st;
  }
  if (muse_glimmer_is(req->architecture)) {
    /* _parallelize_muse_glimmer: the Ministral3 sp0 set with
     * output_gate_proj between v_proj and o_proj (the lm_head entry is the
     * set's own); sp warns and is ignored. */
    static const tpxp_rule gate =
        TPXP_COL("layers.*.self_attn.output_gate_proj");
    if (req->sequence_parallel)
      tpxp_log(host, ctx, TPX_PLUGIN_LOG_WARN,
               "sequence_parallel=True is not yet supported for MuseGlimmer "
               "and will be ignored");
    st = tpxp_add_rules(host, ctx, "model", tpxp_m3_sp0, 4);
    if (st == TPX_PLUGIN_OK)
      st = tpxp_add_rules(host, ctx, "model", &gate, 1);
    if (st == TPX_PLUGIN_OK)
      st =
          tpxp_add_rules(host, ctx, "model", tpxp_m3_sp0 + 4, TPXP_M3_BODY - 4);
    if (st == TPX_PLUGIN_OK)
      st = tpxp_add_rules(host, ctx, NULL, &k_head[0], 1);
    if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
      host->plan_set_function(ctx, "muse_glimmer");
    return st;
  }
  if (!tpxp_arch_is(req->architecture, "Ministral3ForCausalLM"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "mistral plugin: architecture '%s' is not served",
                     req->architecture != NULL ? req->architecture : "(null)");
  st = tpxp_add_m3_plan(host, ctx, "model", k_head, req->sequence_parallel,
                        tpxp_m3_norms_sp, TPXP_N_OF(tpxp_m3_norms_sp));
  if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
    host->plan_set_function(ctx, "ministral3");
  return st;
}

/* ---- skeletons ---- */

/* Pixtral vision tower at model.vision_tower: patch_conv (Conv2d, no bias),
 * ln_pre, transformer.layers.* {attention_norm, feed_forward {gate, up,
 * down}, attention {k, v, q, o}, ffn_norm}, patch_positional_embedding
 * (rotary, no params). Nothing has a bias. */
static int pixtral(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  int64_t hidden, inter, layers, patch, chans;
  tpxp_key keys[] = {
      TPXP_KEY_I("hidden_size", &hidden, 0),
      TPXP_KEY_I("intermediate_size", &inter, 0),
      TPXP_KEY_I("num_hidden_layers", &layers, 0),
      TPXP_KEY_I("patch_size", &patch, 0),
      TPXP_KEY_I("num_channels", &chans, 3),
  };
  keys[0].required = keys[1].required = keys[2].required = 1;
  keys[3].required = 1;
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  {
    const int64_t conv[4] = {hidden, chans, patch, patch};
    const tpxp_sk_row head[] = {
        TPXP_SK_MOD("patch_conv", "other"),
        TPXP_SK_PRM_ND("patch_conv", "weight", 4, conv),
        TPXP_SK_NRM("ln_pre", hidden, 0),
        TPXP_SK_MOD("transformer.layers", "container"),
    };
    const tpxp_sk_row layer[] = {
        TPXP_SK_NRM("attention_norm", hidden, 0),
        TPXP_SK_LIN("feed_forward.gate_proj", hidden, inter, 0),
        TPXP_SK_LIN("feed_forward.up_proj", hidden, inter, 0),
        TPXP_SK_LIN("feed_forward.down_proj", inter, hidden, 0),
        TPXP_SK_LIN("attention.k_proj", hidden, hidden, 0),
        TPXP_SK_LIN("attention.v_proj", hidden, hidden, 0),
        TPXP_SK_LIN("attention.q_proj", hidden, hidden, 0),
        TPXP_SK_LIN("attention.o_proj", hidden, hidden, 0),
        TPXP_SK_NRM("ffn_norm", hidden, 0),
    };
    const tpxp_sk_row tail[] = {
        TPXP_SK_MOD("patch_positional_embedding", "rotary"),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "model.vision_tower", head, NULL));
    TPXP_CHK(TPXP_SK_LAYERS(host, ctx, "model.vision_tower.transformer", layers,
                            layer, NULL));
    return TPXP_SK_ROWS(host, ctx, "model.vision_tower", tail, NULL);
  }
}

/* Mistral3MultiModalProjector: norm over the vision hidden size,
 * patch_merger.merging_layer (hidden * merge^2 -> hidden, no bias), linear_1
 * (vision hidden * number of feature layers -> text hidden), linear_2 (text
 * hidden -> text hidden); biases per multimodal_projector_bias. */
static int projector(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     int64_t text_hidden) {
  int64_t vh, merge, nfeat = 1;
  int bias = 0;
  TPXP_CHK(tpxp_cfg_int_req(host, ctx, "vision_config.hidden_size", &vh));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "spatial_merge_size", 2, &merge));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "multimodal_projector_bias", 0, &bias));
  /* vision_feature_layer: an int (one layer) or a list of layers. */
  if (host->config_get_length(ctx, "vision_feature_layer", &nfeat) !=
      TPX_PLUGIN_OK)
    nfeat = 1;
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_NRM("norm", vh, 0),
        TPXP_SK_LIN("patch_merger.merging_layer", vh * merge * merge, vh, 0),
        TPXP_SK_LIN("linear_1", vh * nfeat, text_hidden, bias),
        TPXP_SK_LIN("linear_2", text_hidden, text_hidden, bias),
    };
    return TPXP_SK_ROWS(host, ctx, "model.multi_modal_projector", rows, NULL);
  }
}

int tpx_plugin_get_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  char w[TPXP_FQN_MAX];
  tpxp_decoder d;
  int vlm = is_vlm(architecture), st, tie;
  if (muse_glimmer_is(architecture))
    return muse_glimmer_skeleton(host, ctx);
  if (!vlm && !tpxp_arch_is(architecture, "Ministral3ForCausalLM"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "mistral plugin: no skeleton for '%s'",
                     architecture != NULL ? architecture : "(null)");
  memset(&d, 0, sizeof d);
  /* Mistral configs default tie_word_embeddings to False. For the VLM the
   * decoder keys live in text_config; the tie flag may be top-level. */
  if ((st = tpxp_decoder_read(host, ctx, vlm ? "text_config" : "", 0, &d)))
    return st;
  if (vlm) {
    if ((st = tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", d.tie, &tie)))
      return st;
    d.tie = tie;
  }
  d.prefix = vlm ? "model.language_model" : "model";
  d.rotary = 1;
  if (vlm && host->config_has(ctx, "vision_config")) {
    /* HF order: vision_tower, multi_modal_projector, language_model. */
    if ((st = pixtral(host, ctx)) || (st = projector(host, ctx, d.hidden)))
      return st;
  }
  if ((st = tpxp_sk_decoder(host, ctx, &d)))
    return st;
  tpxp_fmt(w, sizeof w, "%s.embed_tokens.weight", d.prefix);
  return tpxp_sk_lm_head(host, ctx, "lm_head", d.hidden, d.vocab, 0, d.tie, w,
                         NULL);
}

/* The MuseGlimmer strategy's tp limit and sp warning; nothing for the
 * other classes. */
int tpx_plugin_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const tpx_plugin_plan_request *req) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "mistral: malformed validate request");
  if (muse_glimmer_is(req->architecture))
    return muse_glimmer_validate(host, ctx, req->sequence_parallel,
                                 req->tp_size);
  return TPX_PLUGIN_OK;
}
