/* mistral.c — the tpx_mistral family plugin: NeMo Automodel's
 * _parallelize_ministral3 (Ministral3ForCausalLM; docs/SEMANTICS.md "Family plans") and
 * _parallelize_mistral3_vlm (Mistral3ForConditionalGeneration and the NeMo
 * Mistral3FP8VLMForConditionalGeneration), with skeletons: a
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
    st = tpxp_add_m3_plan(host, ctx, "model.language_model", k_head, 0,
                          NULL, 0);
    if (st == TPX_PLUGIN_OK && host->plan_set_function != NULL)
      host->plan_set_function(ctx, "mistral3_vlm");
    return st;
  }
  if (muse_glimmer_is(req->architecture)) {
    /* _parallelize_muse_glimmer: the Ministral3 sp0 set with
     * output_gate_proj between v_proj and o_proj (the lm_head entry is the
     * set's own); sp warns and is ignored. */
    static const tpxp_rule gate = TPXP_COL("layers.*.self_attn.output_gate_proj");
    if (req->sequence_parallel)
      tpxp_log(host, ctx, TPX_PLUGIN_LOG_WARN,
               "sequence_parallel=True is not yet supported for MuseGlimmer "
               "and will be ignored");
    st = tpxp_add_rules(host, ctx, "model", tpxp_m3_sp0, 4);
    if (st == TPX_PLUGIN_OK)
      st = tpxp_add_rules(host, ctx, "model", &gate, 1);
    if (st == TPX_PLUGIN_OK)
      st = tpxp_add_rules(host, ctx, "model", tpxp_m3_sp0 + 4,
                          TPXP_M3_BODY - 4);
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
  char f[TPXP_FQN_MAX];
  int64_t hidden, inter, layers, patch, chans, i, shape[4];
  int st;
  if ((st =
           tpxp_cfg_int_req(host, ctx, "vision_config.hidden_size", &hidden)) ||
      (st = tpxp_cfg_int_req(host, ctx, "vision_config.intermediate_size",
                             &inter)) ||
      (st = tpxp_cfg_int_req(host, ctx, "vision_config.num_hidden_layers",
                             &layers)) ||
      (st = tpxp_cfg_int_req(host, ctx, "vision_config.patch_size", &patch)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "vision_config.num_channels", 3,
                             &chans)))
    return st;
  if ((st =
           tpxp_sk_module(host, ctx, "model.vision_tower.patch_conv", "other")))
    return st;
  shape[0] = hidden;
  shape[1] = chans;
  shape[2] = patch;
  shape[3] = patch;
  if ((st = host->skeleton_add_param(ctx, "model.vision_tower.patch_conv",
                                     "weight", shape, 4, NULL)) ||
      (st = tpxp_sk_norm(host, ctx, "model.vision_tower.ln_pre", hidden, 0,
                         NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.vision_tower.transformer.layers",
                           "container")))
    return st;
  for (i = 0; i < layers; i++) {
    long long L = (long long)i;
    static const char *const attn[] = {"k_proj", "v_proj", "q_proj", "o_proj"};
    size_t a;
#define VT "model.vision_tower.transformer.layers.%lld."
    tpxp_fmt(f, sizeof f, VT "attention_norm", L);
    if ((st = tpxp_sk_norm(host, ctx, f, hidden, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, VT "feed_forward.gate_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, hidden, inter, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, VT "feed_forward.up_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, hidden, inter, 0, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, VT "feed_forward.down_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, inter, hidden, 0, NULL)))
      return st;
    for (a = 0; a < TPXP_N_OF(attn); a++) {
      tpxp_fmt(f, sizeof f, VT "attention.%s", L, attn[a]);
      if ((st = tpxp_sk_linear(host, ctx, f, hidden, hidden, 0, NULL)))
        return st;
    }
    tpxp_fmt(f, sizeof f, VT "ffn_norm", L);
    if ((st = tpxp_sk_norm(host, ctx, f, hidden, 0, NULL)))
      return st;
#undef VT
  }
  return tpxp_sk_module(
      host, ctx, "model.vision_tower.patch_positional_embedding", "rotary");
}

/* Mistral3MultiModalProjector: norm over the vision hidden size,
 * patch_merger.merging_layer (hidden * merge^2 -> hidden, no bias), linear_1
 * (vision hidden * number of feature layers -> text hidden), linear_2 (text
 * hidden -> text hidden); biases per multimodal_projector_bias. */
static int projector(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     int64_t text_hidden) {
  int64_t vh, merge, nfeat = 1;
  int bias = 0, st;
  if ((st = tpxp_cfg_int_req(host, ctx, "vision_config.hidden_size", &vh)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "spatial_merge_size", 2, &merge)) ||
      (st =
           tpxp_cfg_bool_opt(host, ctx, "multimodal_projector_bias", 0, &bias)))
    return st;
  /* vision_feature_layer: an int (one layer) or a list of layers. */
  if (host->config_get_length(ctx, "vision_feature_layer", &nfeat) !=
      TPX_PLUGIN_OK)
    nfeat = 1;
  if ((st = tpxp_sk_norm(host, ctx, "model.multi_modal_projector.norm", vh, 0,
                         NULL)) ||
      (st = tpxp_sk_linear(host, ctx,
                           "model.multi_modal_projector.patch_merger."
                           "merging_layer",
                           vh * merge * merge, vh, 0, NULL)) ||
      (st = tpxp_sk_linear(host, ctx, "model.multi_modal_projector.linear_1",
                           vh * nfeat, text_hidden, bias, NULL)))
    return st;
  return tpxp_sk_linear(host, ctx, "model.multi_modal_projector.linear_2",
                        text_hidden, text_hidden, bias, NULL);
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
