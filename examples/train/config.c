/* config.c — the decoder hyper-parameters the trainer needs, read from the
 * model's HF config through tpx_model_config_* (both spellings: transformers
 * 4 `rope_theta` / `rope_scaling` / `torch_dtype`, transformers 5
 * `rope_parameters` / `dtype`), and the RoPE inverse frequencies those
 * imply (rope types default, linear, llama3, as transformers'
 * modeling_rope_utils computes them). Refuses what the trainer does not
 * implement (other architectures, other rope types, partial rotary, biases
 * Llama/Qwen3 would need, non-SiLU). The MoE keys are config_moe.c's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train.h"

static tpx_status get_int(const tpx_model *m, const char *key, int64_t dflt,
                          int required, int64_t *out, tpx_error *err) {
  tpx_error e = {0};
  tpx_status st = tpx_model_config_int(m, key, out, &e);
  if (st == TPX_NOT_FOUND && !required) {
    *out = dflt;
    return TPX_OK;
  }
  if (st)
    return tpx_error_set(err, TPX_VALIDATION, "config: %s: %s", key, e.message);
  return TPX_OK;
}

static int get_bool(const tpx_model *m, const char *key, int dflt) {
  int v = dflt;
  if (tpx_model_config_bool(m, key, &v, NULL))
    return dflt;
  return v;
}

static int get_num(const tpx_model *m, const char *prefix, const char *key,
                   double *out) {
  char path[128];
  snprintf(path, sizeof path, "%s%s%s", prefix ? prefix : "", prefix ? "." : "",
           key);
  return tpx_model_config_float(m, path, out, NULL) == TPX_OK;
}

static tpx_status need_num(const tpx_model *m, const char *prefix,
                           const char *key, const char *type, double *out,
                           tpx_error *err) {
  if (get_num(m, prefix, key, out) && *out > 0 && isfinite(*out))
    return TPX_OK;
  return tpx_error_set(err, TPX_VALIDATION,
                       "config: rope_type '%s' needs %s.%s > 0 (finite)", type,
                       prefix, key);
}

/* An optional number: *found 0 when absent or null; an error naming the key
 * when present but not a finite number (never a silent default). */
static tpx_status opt_num(const tpx_model *m, const char *prefix,
                          const char *key, double *out, int *found,
                          tpx_error *err) {
  char path[128];
  snprintf(path, sizeof path, "%s%s%s", prefix ? prefix : "", prefix ? "." : "",
           key);
  tpx_error e = {0};
  tpx_status st = tpx_model_config_float(m, path, out, &e);
  *found = st == TPX_OK;
  if (st == TPX_NOT_FOUND)
    return TPX_OK;
  if (st)
    return tpx_error_set(err, TPX_VALIDATION, "config: %s: %s", path,
                         e.message);
  if (!isfinite(*out))
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: %s is %g, not a finite number", path, *out);
  return TPX_OK;
}

/* Rope type and its parameters. transformers 5 keeps them in
 * rope_parameters (with rope_theta), transformers 4 in rope_scaling (with
 * rope_theta at the top level); "type" is the older spelling of
 * "rope_type". */
static tpx_status rope_read(const tpx_model *m, tr_config *c, tpx_error *err) {
  c->theta = 10000.0;
  int found;
  if (opt_num(m, NULL, "rope_theta", &c->theta, &found, err) ||
      (!found &&
       opt_num(m, "rope_parameters", "rope_theta", &c->theta, &found, err)))
    return err ? err->status : TPX_VALIDATION;
  if (!(c->theta > 0))
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: rope_theta %g must be > 0", c->theta);
  const char *pre = NULL, *rt = "default";
  const char *dicts[] = {"rope_parameters", "rope_scaling"};
  const char *keys[] = {"rope_type", "type"};
  for (int i = 0; i < 4 && !pre; i++) {
    char path[64];
    const char *v = NULL;
    tpx_error e = {0};
    snprintf(path, sizeof path, "%s.%s", dicts[i / 2], keys[i % 2]);
    tpx_status st = tpx_model_config_string(m, path, &v, &e);
    if (st == TPX_OK) {
      pre = dicts[i / 2];
      rt = v;
    } else if (st != TPX_NOT_FOUND)
      return tpx_error_set(err, TPX_VALIDATION, "config: %s: %s", path,
                           e.message);
  }
  double prf = 1.0;
  if ((get_num(m, NULL, "partial_rotary_factor", &prf) ||
       (pre && get_num(m, pre, "partial_rotary_factor", &prf))) &&
      prf != 1.0)
    return tpx_error_set(
        err, TPX_UNSUPPORTED,
        "config: partial_rotary_factor %g is not implemented by tpx-train",
        prf);
  c->rope_factor = 1.0;
  if (!strcmp(rt, "default")) {
    c->rope = TR_ROPE_DEFAULT;
  } else if (!strcmp(rt, "linear")) {
    c->rope = TR_ROPE_LINEAR;
    return need_num(m, pre, "factor", rt, &c->rope_factor, err);
  } else if (!strcmp(rt, "llama3")) {
    c->rope = TR_ROPE_LLAMA3;
    if (need_num(m, pre, "factor", rt, &c->rope_factor, err) ||
        need_num(m, pre, "low_freq_factor", rt, &c->rope_low, err) ||
        need_num(m, pre, "high_freq_factor", rt, &c->rope_high, err))
      return err ? err->status : TPX_VALIDATION;
    /* as transformers' standardize_rope_params: a top-level value wins,
     * then the rope dict's, then max_position_embeddings */
    const char *ompe = "original_max_position_embeddings";
    if (opt_num(m, NULL, ompe, &c->rope_orig_max, &found, err) ||
        (!found && opt_num(m, pre, ompe, &c->rope_orig_max, &found, err)) ||
        (!found && opt_num(m, NULL, "max_position_embeddings",
                           &c->rope_orig_max, &found, err)))
      return err ? err->status : TPX_VALIDATION;
    if (!found)
      c->rope_orig_max = 0;
    if (c->rope_orig_max <= 0 || c->rope_high <= c->rope_low)
      return tpx_error_set(
          err, TPX_VALIDATION,
          "config: llama3 rope needs original_max_position_embeddings > 0 and "
          "high_freq_factor > low_freq_factor (got %g, %g, %g)",
          c->rope_orig_max, c->rope_high, c->rope_low);
  } else {
    return tpx_error_set(
        err, TPX_UNSUPPORTED,
        "config: rope_type '%s' is not implemented by tpx-train "
        "(default, linear, llama3)",
        rt);
  }
  return TPX_OK;
}

void tr_rope_inv_freq(const tr_config *c, double *inv) {
  int64_t half = c->head_dim / 2;
  for (int64_t i = 0; i < half; i++) {
    double f = 1.0 / pow(c->theta, (double)(2 * i) / (double)c->head_dim);
    if (c->rope == TR_ROPE_LINEAR) {
      f /= c->rope_factor;
    } else if (c->rope == TR_ROPE_LLAMA3) {
      /* long wavelengths are slowed down by factor, short ones kept, and
       * the band between is interpolated (transformers'
       * _compute_llama3_parameters) */
      double wavelen = 2.0 * M_PI / f;
      double low_wl = c->rope_orig_max / c->rope_low,
             high_wl = c->rope_orig_max / c->rope_high;
      if (wavelen > low_wl) {
        f /= c->rope_factor;
      } else if (wavelen >= high_wl) {
        double s = (c->rope_orig_max / wavelen - c->rope_low) /
                   (c->rope_high - c->rope_low);
        f = (1.0 - s) * f / c->rope_factor + s * f;
      }
    }
    inv[i] = f;
  }
}

tpx_status tr_config_read(const tpx_model *m, tr_config *c, tpx_error *err) {
  memset(c, 0, sizeof *c);
  c->arch = tpx_model_num_architectures(m) ? tpx_model_architecture(m, 0) : "";
  int llama = !strcmp(c->arch, "LlamaForCausalLM");
  int qwen2 = !strcmp(c->arch, "Qwen2ForCausalLM");
  int qwen3 = !strcmp(c->arch, "Qwen3ForCausalLM");
  c->moe = !strcmp(c->arch, "Qwen3MoeForCausalLM")  ? TR_MOE_QWEN3
           : !strcmp(c->arch, "MixtralForCausalLM") ? TR_MOE_MIXTRAL
           : !strcmp(c->arch, "Glm4MoeForCausalLM") ? TR_MOE_GLM4
                                                    : TR_MOE_NONE;
  if (!llama && !qwen2 && !qwen3 && !c->moe)
    return tpx_error_set(
        err, TPX_UNSUPPORTED,
        "architecture '%s' is not implemented by tpx-train "
        "(LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
        "Qwen3MoeForCausalLM, MixtralForCausalLM, Glm4MoeForCausalLM)",
        c->arch[0] ? c->arch : "(none)");
  if (get_int(m, "hidden_size", 0, 1, &c->hidden, err) ||
      get_int(m, "num_attention_heads", 0, 1, &c->heads, err) ||
      get_int(m, "num_key_value_heads", c->heads, 0, &c->kv_heads, err) ||
      get_int(m, "intermediate_size", 0, 1, &c->inter, err) ||
      get_int(m, "vocab_size", 0, 1, &c->vocab, err) ||
      get_int(m, "num_hidden_layers", 0, 1, &c->layers, err))
    return err ? err->status : TPX_VALIDATION;
  if (c->heads <= 0 || c->hidden <= 0 || c->kv_heads <= 0 || c->vocab <= 0 ||
      c->layers < 0 || c->inter <= 0 || c->heads % c->kv_heads)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: bad sizes (hidden %lld, heads %lld, kv heads "
                         "%lld, vocab %lld)",
                         (long long)c->hidden, (long long)c->heads,
                         (long long)c->kv_heads, (long long)c->vocab);
  if (get_int(m, "head_dim", c->hidden / c->heads, 0, &c->head_dim, err))
    return err->status;
  if (c->head_dim <= 0 || c->head_dim % 2)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: head_dim %lld must be even and > 0",
                         (long long)c->head_dim);
  c->eps = 1e-6;
  int found;
  if (opt_num(m, NULL, "rms_norm_eps", &c->eps, &found, err))
    return err ? err->status : TPX_VALIDATION;
  if (c->eps < 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: rms_norm_eps %g must be >= 0", c->eps);
  tpx_status rs = rope_read(m, c, err);
  if (rs)
    return rs;
  const char *act = "silu";
  tpx_model_config_string(m, "hidden_act", &act, NULL);
  if (strcmp(act, "silu"))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "config: hidden_act '%s' (only silu)", act);
  c->qkv_bias = qwen2;
  c->qk_norm = qwen3 || c->moe == TR_MOE_QWEN3;
  if (c->moe && (rs = tr_config_moe_read(m, c, err)))
    return rs;
  if (get_bool(m, "attention_bias", 0) || get_bool(m, "mlp_bias", 0))
    return tpx_error_set(
        err, TPX_UNSUPPORTED,
        "config: attention_bias/mlp_bias are not implemented by tpx-train");
  c->tied = get_bool(m, "tie_word_embeddings", 0);
  return TPX_OK;
}
