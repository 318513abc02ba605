/* split.c — a test plugin ("tpxtest-split") serving
 * TpxTestSplitForCausalLM: a tiny Llama-like decoder whose checkpoint
 * stores fused tensors that the model holds cut into several parameters
 * (host->skeleton_add_split_source, as transformers' Split cuts them):
 * self_attn.qkv_proj.weight [(heads + 2 kv) hd, H] into q_proj / k_proj /
 * v_proj (dim 0, uneven parts), mlp.gate_up_proj.weight [2I, H] into
 * gate_proj / up_proj (dim 0) and mlp.down_proj.weight [H, I] into
 * down_lo [H, I/2 + 1] / down_hi (dim 1). Its plan: q/k/v, gate, up
 * colwise; o_proj, down_lo, down_hi rowwise. The config key
 * "tpxtest_bad_split": "gap" leaves the last row of qkv_proj to no
 * parameter (refused by the host, named). Not a family plugin. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TPX_PLUGIN_DECLARE_ENTRY_POINTS
#include "tpx/plugin.h"

#include "../test_plugin.h"

static const char *const architectures[] = {"TpxTestSplitForCausalLM", NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return tpxtest_register(host, info, "tpxtest-split",
                          "tpx test plugin: fused checkpoint tensors cut into "
                          "parameters (tests/unit/checkpoint/split_plugin)",
                          architectures);
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  static const char *const entries[] = {
      "{\"module\":\"model.layers.*.self_attn.q_proj\",\"style\":\"colwise\"}",
      "{\"module\":\"model.layers.*.self_attn.k_proj\",\"style\":\"colwise\"}",
      "{\"module\":\"model.layers.*.self_attn.v_proj\",\"style\":\"colwise\"}",
      "{\"module\":\"model.layers.*.self_attn.o_proj\",\"style\":\"rowwise\"}",
      "{\"module\":\"model.layers.*.mlp.gate_proj\",\"style\":\"colwise\"}",
      "{\"module\":\"model.layers.*.mlp.up_proj\",\"style\":\"colwise\"}",
      "{\"module\":\"model.layers.*.mlp.down_lo\",\"style\":\"rowwise\"}",
      "{\"module\":\"model.layers.*.mlp.down_hi\",\"style\":\"rowwise\"}"};
  (void)req;
  int rc = h->plan_set_function(ctx, "tpxtest_split_plan");
  for (size_t i = 0; i < sizeof entries / sizeof *entries && rc == 0; i++)
    rc = h->plan_add_json(ctx, entries[i]);
  return rc;
}

typedef struct split_cfg {
  int64_t H, I, L, V, heads, kv, hd;
  const char *bad;
} split_cfg;

static int read_cfg(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                    split_cfg *c) {
  if (h->config_get_int(ctx, "hidden_size", &c->H) ||
      h->config_get_int(ctx, "intermediate_size", &c->I) ||
      h->config_get_int(ctx, "num_hidden_layers", &c->L) ||
      h->config_get_int(ctx, "vocab_size", &c->V) ||
      h->config_get_int(ctx, "num_attention_heads", &c->heads) ||
      c->heads <= 0 || c->H % c->heads || c->L < 0 || c->L > 64 || c->I < 2) {
    h->set_error(ctx, "config lacks hidden_size, intermediate_size, "
                      "num_hidden_layers, vocab_size or num_attention_heads, "
                      "or they are implausible");
    return TPX_PLUGIN_REFUSED;
  }
  if (h->config_get_int(ctx, "num_key_value_heads", &c->kv))
    c->kv = c->heads;
  c->hd = c->H / c->heads;
  c->bad = NULL;
  if (h->config_get_string(ctx, "tpxtest_bad_split", &c->bad))
    c->bad = NULL;
  return TPX_PLUGIN_OK;
}

static int param(const tpx_plugin_host *h, tpx_plugin_ctx *ctx, const char *mod,
                 const char *kind, int64_t a, int64_t b, int ndim) {
  return tpxtest_param(h, ctx, mod, kind, "weight", a, b, 0, ndim);
}

/* Layer l: its parameters and the stored tensors cut into them. */
static int layer(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                 const split_cfg *c, int64_t l) {
  char p[96], m[160], n[3][176], src[176];
  snprintf(p, sizeof p, "model.layers.%lld", (long long)l);
  int rc = 0;
  static const char *const norms[] = {"input_layernorm",
                                      "post_attention_layernorm"};
  for (int k = 0; k < 2; k++) {
    snprintf(m, sizeof m, "%s.%s", p, norms[k]);
    rc |= param(h, ctx, m, "norm", c->H, 0, 1);
  }
  static const char *const qkv[] = {"q_proj", "k_proj", "v_proj"};
  const int64_t rows[] = {c->heads * c->hd, c->kv * c->hd, c->kv * c->hd};
  for (int k = 0; k < 3; k++) {
    snprintf(m, sizeof m, "%s.self_attn.%s", p, qkv[k]);
    rc |= param(h, ctx, m, "linear", rows[k], c->H, 2);
    snprintf(n[k], sizeof n[k], "%s.weight", m);
  }
  const char *names[3] = {n[0], n[1], n[2]};
  /* "gap": k and v one row further on, row heads*hd left to nobody */
  const int64_t gap[3] = {0, rows[0] + 1, rows[0] + rows[1] + 1};
  snprintf(src, sizeof src, "%s.self_attn.qkv_proj.weight", p);
  rc |= h->skeleton_add_split_source(
      ctx, src, 0, names, c->bad && !strcmp(c->bad, "gap") ? gap : NULL, 3);
  snprintf(m, sizeof m, "%s.self_attn.o_proj", p);
  rc |= param(h, ctx, m, "linear", c->H, c->heads * c->hd, 2);
  static const char *const gu[] = {"gate_proj", "up_proj"};
  for (int k = 0; k < 2; k++) {
    snprintf(m, sizeof m, "%s.mlp.%s", p, gu[k]);
    rc |= param(h, ctx, m, "linear", c->I, c->H, 2);
    snprintf(n[k], sizeof n[k], "%s.weight", m);
  }
  snprintf(src, sizeof src, "%s.mlp.gate_up_proj.weight", p);
  rc |= h->skeleton_add_split_source(ctx, src, 0, names, NULL, 2);
  static const char *const dn[] = {"down_lo", "down_hi"};
  const int64_t cols[] = {c->I / 2 + 1, c->I - (c->I / 2 + 1)};
  for (int k = 0; k < 2; k++) {
    snprintf(m, sizeof m, "%s.mlp.%s", p, dn[k]);
    rc |= param(h, ctx, m, "linear", c->H, cols[k], 2);
    snprintf(n[k], sizeof n[k], "%s.weight", m);
  }
  snprintf(src, sizeof src, "%s.mlp.down_proj.weight", p);
  rc |= h->skeleton_add_split_source(ctx, src, 1, names, NULL, 2);
  return rc;
}

TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *h,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture) {
  split_cfg c;
  int rc = read_cfg(h, ctx, &c);
  (void)architecture;
  if (rc != TPX_PLUGIN_OK)
    return rc;
  if (h->struct_size <= offsetof(tpx_plugin_host, skeleton_add_split_source) ||
      h->skeleton_add_split_source == NULL) {
    h->set_error(ctx, "the host cannot take split sources "
                      "(skeleton_add_split_source)");
    return TPX_PLUGIN_REFUSED;
  }
  rc |= param(h, ctx, "model.embed_tokens", "embedding", c.V, c.H, 2);
  for (int64_t l = 0; l < c.L && rc == 0; l++) rc |= layer(h, ctx, &c, l);
  rc |= param(h, ctx, "model.norm", "norm", c.H, 0, 1);
  rc |= param(h, ctx, "lm_head", "linear", c.V, c.H, 2);
  if (rc) {
    h->set_error(ctx, "the host refused part of the skeleton");
    return TPX_PLUGIN_ERROR;
  }
  return TPX_PLUGIN_OK;
}
