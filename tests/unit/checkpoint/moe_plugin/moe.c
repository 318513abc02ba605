/* moe.c — a test plugin ("tpxtest-moe") serving TpxTestMoeForCausalLM: a
 * tiny decoder whose routed experts are held as NeMo Automodel holds them
 * (experts.gate_and_up_projs [E, H, 2I], experts.down_projs [E, I, H])
 * and declared stored, transposed, as the Hugging Face checkpoint's
 * per-expert tensors (host->skeleton_add_source): [e, :, 0:I] =
 * experts.{e}.gate_proj.weight^T, [e, :, I:2I] = up_proj.weight^T,
 * down_projs[e] = down_proj.weight^T. Shapes from a Qwen3-MoE-like config
 * (hidden_size, moe_intermediate_size, num_local_experts, ...). Its plan
 * is empty (FSDP only). The config key "tpxtest_bad_source" makes the
 * skeleton misdeclare its sources ("overlap", "gap", "outside", "param",
 * "run", "shape"), for the host's refusals. Not a family plugin. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TPX_PLUGIN_DECLARE_ENTRY_POINTS
#include "tpx/plugin.h"

#include "../test_plugin.h"

static const char *const architectures[] = {"TpxTestMoeForCausalLM", NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return tpxtest_register(host, info, "tpxtest-moe",
                          "tpx test plugin: grouped experts stored transposed "
                          "(tests/unit/checkpoint/moe_plugin)",
                          architectures);
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return h->plan_set_function(ctx, "tpxtest_moe_fsdp_only");
}

typedef struct moe_cfg {
  int64_t H, I, E, L, V, heads, kv, hd;
  const char *bad;
} moe_cfg;

static int read_cfg(const tpx_plugin_host *h, tpx_plugin_ctx *ctx, moe_cfg *c) {
  if (h->config_get_int(ctx, "hidden_size", &c->H) ||
      h->config_get_int(ctx, "moe_intermediate_size", &c->I) ||
      h->config_get_int(ctx, "num_local_experts", &c->E) ||
      h->config_get_int(ctx, "num_hidden_layers", &c->L) ||
      h->config_get_int(ctx, "vocab_size", &c->V) ||
      h->config_get_int(ctx, "num_attention_heads", &c->heads) ||
      c->heads <= 0 || c->H % c->heads || c->L < 0 || c->L > 64 || c->E <= 0 ||
      c->E > 1024) {
    h->set_error(ctx, "config lacks hidden_size, moe_intermediate_size, "
                      "num_local_experts, num_hidden_layers, vocab_size or "
                      "num_attention_heads, or they are implausible");
    return TPX_PLUGIN_REFUSED;
  }
  if (h->config_get_int(ctx, "num_key_value_heads", &c->kv))
    c->kv = c->heads;
  c->hd = c->H / c->heads;
  c->bad = NULL;
  if (h->config_get_string(ctx, "tpxtest_bad_source", &c->bad))
    c->bad = NULL;
  return TPX_PLUGIN_OK;
}

static int bad(const moe_cfg *c, const char *what) {
  return c->bad && strcmp(c->bad, what) == 0;
}

/* Layer l's experts and their stored sources. */
static int experts(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                   const moe_cfg *c, int64_t l) {
  char mod[128], gu[160], dn[160], src[192];
  snprintf(mod, sizeof mod, "model.layers.%lld.mlp.experts", (long long)l);
  snprintf(gu, sizeof gu, "%s.gate_and_up_projs", mod);
  snprintf(dn, sizeof dn, "%s.down_projs", mod);
  int rc = tpxtest_param(h, ctx, mod, "other", "gate_and_up_projs", c->E, c->H,
                         2 * c->I, 3);
  int64_t shape[3] = {c->E, c->I, c->H};
  rc |= h->skeleton_add_param(ctx, mod, "down_projs", shape, 3, NULL);
  for (int64_t e = 0; e < c->E && rc == 0; e++)
    for (int part = 0; part < 2; part++) {
      int64_t start[3] = {e, 0, part * c->I}, len[3] = {1, c->H, c->I};
      if (bad(c, "overlap") && e == 1 && part == 1)
        start[2] = c->I - 1, len[2] = 1;
      if (bad(c, "gap") && e == c->E - 1 && part == 1)
        continue;
      if (bad(c, "outside") && e == c->E - 1 && part == 1)
        start[2] = c->I + 1;
      if (bad(c, "run") && part == 1 && e == 0) {
        int64_t s0[3] = {c->E - 1, 0, 0}, l0[3] = {1, c->I, c->H};
        rc |= h->skeleton_add_source(ctx, dn, "stray.weight", s0, l0, 3, 1);
      }
      snprintf(src, sizeof src, "%s.%lld.%s.weight", mod, (long long)e,
               part ? "up_proj" : "gate_proj");
      rc |= h->skeleton_add_source(ctx, bad(c, "param") ? "no.such.param" : gu,
                                   src, start, len, 3, 1);
    }
  for (int64_t e = 0; e < c->E && rc == 0; e++) {
    int64_t start[3] = {e, 0, 0}, len[3] = {1, c->I, c->H};
    snprintf(src, sizeof src, "%s.%lld.down_proj.weight", mod, (long long)e);
    rc |= h->skeleton_add_source(ctx, dn, src, start, len, 3,
                                 bad(c, "shape") ? 2 : 1);
  }
  return rc;
}

TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *h,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture) {
  moe_cfg c;
  int rc = read_cfg(h, ctx, &c);
  (void)architecture;
  if (rc != TPX_PLUGIN_OK)
    return rc;
  if (h->struct_size <= offsetof(tpx_plugin_host, skeleton_add_source) ||
      h->skeleton_add_source == NULL) {
    h->set_error(ctx, "the host cannot take stored sources "
                      "(skeleton_add_source)");
    return TPX_PLUGIN_REFUSED;
  }
  rc |= tpxtest_param(h, ctx, "model.embed_tokens", "embedding", "weight", c.V,
                      c.H, 0, 2);
  char m[128];
  for (int64_t l = 0; l < c.L && rc == 0; l++) {
    static const char *const lin[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    const int64_t rows[] = {c.heads * c.hd, c.kv * c.hd, c.kv * c.hd, c.H};
    const int64_t cols[] = {c.H, c.H, c.H, c.heads * c.hd};
    snprintf(m, sizeof m, "model.layers.%lld.input_layernorm", (long long)l);
    rc |= tpxtest_param(h, ctx, m, "norm", "weight", c.H, 0, 0, 1);
    for (int k = 0; k < 4; k++) {
      snprintf(m, sizeof m, "model.layers.%lld.self_attn.%s", (long long)l,
               lin[k]);
      rc |=
          tpxtest_param(h, ctx, m, "linear", "weight", rows[k], cols[k], 0, 2);
    }
    snprintf(m, sizeof m, "model.layers.%lld.self_attn.q_norm", (long long)l);
    rc |= tpxtest_param(h, ctx, m, "norm", "weight", c.hd, 0, 0, 1);
    snprintf(m, sizeof m, "model.layers.%lld.self_attn.k_norm", (long long)l);
    rc |= tpxtest_param(h, ctx, m, "norm", "weight", c.hd, 0, 0, 1);
    snprintf(m, sizeof m, "model.layers.%lld.post_attention_layernorm",
             (long long)l);
    rc |= tpxtest_param(h, ctx, m, "norm", "weight", c.H, 0, 0, 1);
    snprintf(m, sizeof m, "model.layers.%lld.mlp.gate", (long long)l);
    rc |= tpxtest_param(h, ctx, m, "linear", "weight", c.E, c.H, 0, 2);
    rc |= experts(h, ctx, &c, l);
  }
  rc |= tpxtest_param(h, ctx, "model.norm", "norm", "weight", c.H, 0, 0, 1);
  rc |= tpxtest_param(h, ctx, "lm_head", "linear", "weight", c.V, c.H, 0, 2);
  if (rc) {
    h->set_error(ctx, "the host refused part of the skeleton");
    return TPX_PLUGIN_ERROR;
  }
  return TPX_PLUGIN_OK;
}
