/* tpxp_skeleton.c — skeleton builders for the bundled family plugins: single
 * modules (linear, norm, embedding) and the Llama-style decoder stack that
 * Llama, Mistral, Qwen2/3 and Ministral3 share. Names and shapes follow the
 * Hugging Face checkpoints (nn.Linear weight is [out, in]). */
#include "tpxp_common.h"

/* Largest config size accepted for a dim of a skeleton tensor. */
#define TPXP_DIM_MAX ((int64_t)1 << 31)

#include <stdio.h>

int tpxp_sk_module(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *fqn, const char *kind) {
  return host->skeleton_add_module(ctx, fqn, kind);
}

int tpxp_sk_param(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *module, const char *name, int64_t dim0,
                  int64_t dim1, const char *dtype) {
  int64_t shape[2];
  shape[0] = dim0;
  shape[1] = dim1;
  return host->skeleton_add_param(ctx, module, name, shape, dim1 < 0 ? 1 : 2,
                                  dtype);
}

int tpxp_sk_linear(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *fqn, int64_t in, int64_t out, int bias,
                   const char *dtype) {
  int st = tpxp_sk_module(host, ctx, fqn, "linear");
  if (st == TPX_PLUGIN_OK)
    st = tpxp_sk_param(host, ctx, fqn, "weight", out, in, dtype);
  if (st == TPX_PLUGIN_OK && bias)
    st = tpxp_sk_param(host, ctx, fqn, "bias", out, -1, dtype);
  return st;
}

int tpxp_sk_norm(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *fqn, int64_t dim, int bias, const char *dtype) {
  int st = tpxp_sk_module(host, ctx, fqn, "norm");
  if (st == TPX_PLUGIN_OK)
    st = tpxp_sk_param(host, ctx, fqn, "weight", dim, -1, dtype);
  if (st == TPX_PLUGIN_OK && bias)
    st = tpxp_sk_param(host, ctx, fqn, "bias", dim, -1, dtype);
  return st;
}

int tpxp_sk_embedding(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *fqn, int64_t vocab, int64_t dim,
                      const char *dtype) {
  int st = tpxp_sk_module(host, ctx, fqn, "embedding");
  if (st == TPX_PLUGIN_OK)
    st = tpxp_sk_param(host, ctx, fqn, "weight", vocab, dim, dtype);
  return st;
}

int tpxp_sk_rows(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *prefix, const tpxp_sk_row *rows, size_t n,
                 const char *dtype) {
  char f[TPXP_FQN_MAX];
  size_t i;
  int st = TPX_PLUGIN_OK;
  for (i = 0; i < n && st == TPX_PLUGIN_OK; i++) {
    const tpxp_sk_row *r = &rows[i];
    const char *dt = r->dtype != NULL ? r->dtype : dtype;
    if (r->kind == TPXP_SK_WHEN) {
      i += r->a ? 0 : 1; /* skip the next row */
      continue;
    }
    if (prefix == NULL || prefix[0] == '\0')
      snprintf(f, sizeof f, "%s", r->suffix);
    else if (r->suffix[0] == '\0')
      snprintf(f, sizeof f, "%s", prefix);
    else
      snprintf(f, sizeof f, "%s.%s", prefix, r->suffix);
    switch (r->kind) {
    case TPXP_SK_LINEAR:
      st = tpxp_sk_linear(host, ctx, f, r->a, r->b, r->bias, dt);
      break;
    case TPXP_SK_NORM:
      st = tpxp_sk_norm(host, ctx, f, r->a, r->bias, dt);
      break;
    case TPXP_SK_EMBEDDING:
      st = tpxp_sk_embedding(host, ctx, f, r->a, r->b, dt);
      break;
    case TPXP_SK_MODULE: st = tpxp_sk_module(host, ctx, f, r->name); break;
    case TPXP_SK_PARAM:
      st = tpxp_sk_param(host, ctx, f, r->name, r->a, r->b, dt);
      break;
    case TPXP_SK_PARAM_ND:
      st = host->skeleton_add_param(ctx, f, r->name, r->shape, (int32_t)r->a,
                                    dt);
      break;
    default:
      st = tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "skeleton row %s: unknown kind %d", f, (int)r->kind);
    }
  }
  return st;
}

int tpxp_sk_layers(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *prefix, int64_t layers, const tpxp_sk_row *rows,
                   size_t n, const char *dtype) {
  char layer[TPXP_FQN_MAX];
  int64_t i;
  for (i = 0; i < layers; i++) {
    tpxp_fmt(layer, sizeof layer, "%s.layers.%lld", prefix, (long long)i);
    TPXP_CHK(tpxp_sk_rows(host, ctx, layer, rows, n, dtype));
  }
  return TPX_PLUGIN_OK;
}

int tpxp_sk_stack(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const tpxp_stack *s) {
  char layer[TPXP_FQN_MAX];
  int64_t i;
  const tpxp_sk_row head[] = {
      TPXP_SK_EMB(s->embed, s->vocab, s->hidden),
      TPXP_SK_MOD("layers", "container"),
  };
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, s->prefix, head, s->dtype));
  for (i = 0; i < s->layers; i++) {
    tpxp_fmt(layer, sizeof layer, "%s.layers.%lld", s->prefix, (long long)i);
    TPXP_CHK(s->layer(host, ctx, layer, i, s->user));
  }
  TPXP_CHK(tpxp_sk_rows(host, ctx, s->prefix, s->tail, s->n_tail, s->dtype));
  if (s->head == NULL)
    return TPX_PLUGIN_OK;
  tpxp_fmt(layer, sizeof layer, "%s.%s.weight", s->prefix, s->embed);
  return tpxp_sk_lm_head(host, ctx, s->head, s->hidden, s->vocab, 0, s->tie,
                         layer, s->dtype);
}

static int decoder_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *section, int tie_default, int need_inter,
                        tpxp_decoder *d) {
  char p[TPXP_FQN_MAX];
  int st, attn_bias = 0;
  d->section = section;
#define REQ(field, key)                                                        \
  st = tpxp_cfg_int_req(host, ctx, tpxp_path(p, sizeof p, section, key),       \
                        &d->field);                                            \
  if (st != TPX_PLUGIN_OK)                                                     \
    return st;
  REQ(layers, "num_hidden_layers")
  REQ(hidden, "hidden_size")
  REQ(heads, "num_attention_heads")
  if (need_inter) {
    REQ(intermediate, "intermediate_size")
  } else if ((st = tpxp_cfg_int_opt(
                  host, ctx,
                  tpxp_path(p, sizeof p, section, "intermediate_size"), 0,
                  &d->intermediate)) != TPX_PLUGIN_OK) {
    return st;
  }
  REQ(vocab, "vocab_size")
#undef REQ
  if (d->heads <= 0 || d->hidden <= 0 || d->layers < 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config: num_attention_heads (%lld), hidden_size (%lld) "
                     "and num_hidden_layers (%lld) must be positive",
                     (long long)d->heads, (long long)d->hidden,
                     (long long)d->layers);
  st = tpxp_cfg_int_opt(host, ctx,
                        tpxp_path(p, sizeof p, section, "num_key_value_heads"),
                        d->heads, &d->kv_heads);
  if (st == TPX_PLUGIN_OK)
    st =
        tpxp_cfg_int_opt(host, ctx, tpxp_path(p, sizeof p, section, "head_dim"),
                         d->hidden / d->heads, &d->head_dim);
  if (st == TPX_PLUGIN_OK)
    st = tpxp_cfg_bool_opt(host, ctx,
                           tpxp_path(p, sizeof p, section, "attention_bias"), 0,
                           &attn_bias);
  if (st == TPX_PLUGIN_OK)
    st = tpxp_cfg_bool_opt(host, ctx,
                           tpxp_path(p, sizeof p, section, "mlp_bias"), 0,
                           &d->mlp_bias);
  if (st == TPX_PLUGIN_OK)
    st = tpxp_cfg_bool_opt(
        host, ctx, tpxp_path(p, sizeof p, section, "tie_word_embeddings"),
        tie_default, &d->tie);
  d->qkv_bias = attn_bias;
  d->o_bias = attn_bias;
  /* Every shape below is a product of these; bound them so it cannot
   * overflow (no real model comes near 2^31 per dim). */
  if (st == TPX_PLUGIN_OK &&
      (d->kv_heads <= 0 || d->head_dim <= 0 || d->intermediate < 0 ||
       d->vocab <= 0 || d->heads > TPXP_DIM_MAX || d->kv_heads > TPXP_DIM_MAX ||
       d->head_dim > TPXP_DIM_MAX || d->hidden > TPXP_DIM_MAX ||
       d->intermediate > TPXP_DIM_MAX || d->vocab > TPXP_DIM_MAX ||
       d->layers > TPXP_DIM_MAX))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config: num_key_value_heads (%lld), head_dim (%lld), "
                     "intermediate_size (%lld), vocab_size (%lld) must be "
                     "positive (intermediate_size may be 0), and every size "
                     "(also hidden_size %lld, num_attention_heads %lld, "
                     "num_hidden_layers %lld) at most %lld",
                     (long long)d->kv_heads, (long long)d->head_dim,
                     (long long)d->intermediate, (long long)d->vocab,
                     (long long)d->hidden, (long long)d->heads,
                     (long long)d->layers, (long long)TPXP_DIM_MAX);
  return st;
}

int tpxp_decoder_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *section, int tie_default, tpxp_decoder *d) {
  return decoder_read(host, ctx, section, tie_default, 1, d);
}

int tpxp_decoder_read_moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *section, int tie_default,
                          tpxp_decoder *d) {
  return decoder_read(host, ctx, section, tie_default, 0, d);
}

int tpxp_sk_self_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const tpxp_decoder *d, int64_t i, int64_t kv_heads) {
  char layer[TPXP_FQN_MAX];
  int64_t q = d->heads * d->head_dim, kv = kv_heads * d->head_dim;
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("q_proj", d->hidden, q, d->qkv_bias),
      TPXP_SK_LIN("k_proj", d->hidden, kv, d->qkv_bias),
      TPXP_SK_LIN("v_proj", d->hidden, kv, d->qkv_bias),
      TPXP_SK_LIN("o_proj", q, d->hidden, d->o_bias),
      TPXP_SK_WHEN(d->qk_norm),
      TPXP_SK_NRM("q_norm", d->head_dim, 0),
      TPXP_SK_WHEN(d->qk_norm),
      TPXP_SK_NRM("k_norm", d->head_dim, 0),
  };
  tpxp_fmt(layer, sizeof layer, "%s.layers.%lld.self_attn", d->prefix,
           (long long)i);
  return TPXP_SK_ROWS(host, ctx, layer, rows, d->dtype);
}

int tpxp_sk_decoder_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const tpxp_decoder *d, int64_t i, int64_t kv_heads,
                          int64_t intermediate) {
  char layer[TPXP_FQN_MAX];
  int64_t h = d->hidden;
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("mlp.gate_proj", h, intermediate, d->mlp_bias),
      TPXP_SK_LIN("mlp.up_proj", h, intermediate, d->mlp_bias),
      TPXP_SK_LIN("mlp.down_proj", intermediate, h, d->mlp_bias),
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
  };
  TPXP_CHK(tpxp_sk_self_attn(host, ctx, d, i, kv_heads));
  tpxp_fmt(layer, sizeof layer, "%s.layers.%lld", d->prefix, (long long)i);
  return TPXP_SK_ROWS(host, ctx, layer, rows, d->dtype);
}

int tpxp_sk_decoder(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpxp_decoder *d) {
  char f[TPXP_FQN_MAX];
  int64_t i;
  int st;
  tpxp_fmt(f, sizeof f, "%s.embed_tokens", d->prefix);
  st = tpxp_sk_embedding(host, ctx, f, d->vocab, d->hidden, d->dtype);
  if (st != TPX_PLUGIN_OK)
    return st;
  tpxp_fmt(f, sizeof f, "%s.layers", d->prefix);
  if ((st = tpxp_sk_module(host, ctx, f, "container")) != TPX_PLUGIN_OK)
    return st;
  for (i = 0; i < d->layers; i++) {
    st = tpxp_sk_decoder_layer(host, ctx, d, i, d->kv_heads, d->intermediate);
    if (st != TPX_PLUGIN_OK)
      return st;
  }
  tpxp_fmt(f, sizeof f, "%s.norm", d->prefix);
  if ((st = tpxp_sk_norm(host, ctx, f, d->hidden, 0, d->dtype)) !=
      TPX_PLUGIN_OK)
    return st;
  if (d->rotary) {
    tpxp_fmt(f, sizeof f, "%s.rotary_emb", d->prefix);
    st = tpxp_sk_module(host, ctx, f, "rotary");
  }
  return st;
}

int tpxp_sk_lm_head(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *fqn, int64_t hidden, int64_t vocab, int bias,
                    int tie, const char *embed_weight_fqn, const char *dtype) {
  char w[TPXP_FQN_MAX];
  int st;
  if (!tie)
    return tpxp_sk_linear(host, ctx, fqn, hidden, vocab, bias, dtype);
  /* Tied: the module exists, its weight is the embedding's tensor (not
   * stored in the checkpoint, counted once). */
  if ((st = tpxp_sk_module(host, ctx, fqn, "linear")) != TPX_PLUGIN_OK)
    return st;
  tpxp_fmt(w, sizeof w, "%s.weight", fqn);
  st = host->skeleton_tie(ctx, w, embed_weight_fqn);
  if (st == TPX_PLUGIN_OK && bias)
    st = tpxp_sk_param(host, ctx, fqn, "bias", vocab, -1, dtype);
  return st;
}
