/* config.c — the decoder hyper-parameters the trainer needs, read from the
 * model's HF config through tpx_model_config_* (both spellings: transformers
 * 4 `rope_theta` / `torch_dtype`, transformers 5 `rope_parameters` /
 * `dtype`). Refuses what the trainer does not implement (other
 * architectures, rope scaling, biases Llama/Qwen3 would need, non-SiLU). */
#include <string.h>

#include "train.h"

static tpx_status get_int(const tpx_model *m, const char *key, int64_t dflt, int required,
                          int64_t *out, tpx_error *err) {
  tpx_error e = {0};
  tpx_status st = tpx_model_config_int(m, key, out, &e);
  if (st == TPX_NOT_FOUND && !required) { *out = dflt; return TPX_OK; }
  if (st) return tpx_error_set(err, TPX_VALIDATION, "config: %s: %s", key, e.message);
  return TPX_OK;
}

static int get_bool(const tpx_model *m, const char *key, int dflt) {
  int v = dflt;
  if (tpx_model_config_bool(m, key, &v, NULL)) return dflt;
  return v;
}

tpx_status tr_config_read(const tpx_model *m, tr_config *c, tpx_error *err) {
  memset(c, 0, sizeof *c);
  c->arch = tpx_model_num_architectures(m) ? tpx_model_architecture(m, 0) : "";
  int llama = !strcmp(c->arch, "LlamaForCausalLM");
  int qwen2 = !strcmp(c->arch, "Qwen2ForCausalLM");
  int qwen3 = !strcmp(c->arch, "Qwen3ForCausalLM");
  if (!llama && !qwen2 && !qwen3)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "architecture '%s' is not implemented by tpx-train "
                         "(LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)",
                         c->arch[0] ? c->arch : "(none)");
  if (get_int(m, "hidden_size", 0, 1, &c->hidden, err) ||
      get_int(m, "num_attention_heads", 0, 1, &c->heads, err) ||
      get_int(m, "num_key_value_heads", c->heads, 0, &c->kv_heads, err) ||
      get_int(m, "intermediate_size", 0, 1, &c->inter, err) ||
      get_int(m, "vocab_size", 0, 1, &c->vocab, err) ||
      get_int(m, "num_hidden_layers", 0, 1, &c->layers, err))
    return err ? err->status : TPX_VALIDATION;
  if (c->heads <= 0 || c->hidden <= 0 || c->kv_heads <= 0 || c->vocab <= 0 || c->layers < 0 ||
      c->inter <= 0 || c->heads % c->kv_heads)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: bad sizes (hidden %lld, heads %lld, kv heads %lld, vocab %lld)",
                         (long long)c->hidden, (long long)c->heads, (long long)c->kv_heads,
                         (long long)c->vocab);
  if (get_int(m, "head_dim", c->hidden / c->heads, 0, &c->head_dim, err)) return err->status;
  if (c->head_dim <= 0 || c->head_dim % 2)
    return tpx_error_set(err, TPX_VALIDATION, "config: head_dim %lld must be even and > 0",
                         (long long)c->head_dim);
  c->eps = 1e-6;
  tpx_model_config_float(m, "rms_norm_eps", &c->eps, NULL);
  c->theta = 10000.0;
  if (tpx_model_config_float(m, "rope_theta", &c->theta, NULL))
    tpx_model_config_float(m, "rope_parameters.rope_theta", &c->theta, NULL);
  const char *rt = NULL;
  if (!tpx_model_config_string(m, "rope_scaling.rope_type", &rt, NULL) ||
      !tpx_model_config_string(m, "rope_scaling.type", &rt, NULL) ||
      !tpx_model_config_string(m, "rope_parameters.rope_type", &rt, NULL))
    if (strcmp(rt, "default"))
      return tpx_error_set(err, TPX_UNSUPPORTED,
                           "config: rope_type '%s' is not implemented by tpx-train", rt);
  const char *act = "silu";
  tpx_model_config_string(m, "hidden_act", &act, NULL);
  if (strcmp(act, "silu"))
    return tpx_error_set(err, TPX_UNSUPPORTED, "config: hidden_act '%s' (only silu)", act);
  c->qkv_bias = qwen2;
  c->qk_norm = qwen3;
  if (get_bool(m, "attention_bias", 0) || get_bool(m, "mlp_bias", 0))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "config: attention_bias/mlp_bias are not implemented by tpx-train");
  c->tied = get_bool(m, "tie_word_embeddings", 0);
  return TPX_OK;
}
