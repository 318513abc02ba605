/* gemma3_plan.c — the Gemma3 and Gemma4 TP plans.
 *
 * Gemma3 (docs/SEMANTICS.md "Family plans", `_parallelize_gemma3`): one dict
 * for sp off; sp on is that dict updated in place (embedding, o_proj, down_proj
 * and lm_head get sequence-sharded layouts) plus appended rotary and norm
 * entries. The plan ignores tp and the head counts, as upstream's does:
 * validate_tp_mesh, which the Default strategy asserts first, is the host's
 * diagnostic (heads-not-divisible, for every plan source).
 *
 * Gemma4 (the model-registered strategy at HEAD): at tp > 1 the
 * strategy refuses MoE text configs and head counts tp does not divide, then
 * injects `_gemma4_tp_plan`, which uses Gemma4's own embedding and rowwise
 * styles and ignores sequence parallelism. Not the v0.5.0
 * `_parallelize_gemma4` function (removed upstream). */
#include "gemma3.h"

#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"
#include "tpxp_heads.h"

#define ROT "rotary_embed_parallel"
#define G4_VOCAB "gemma4_vocab_parallel_embedding"
#define G4_ROW "gemma4_rowwise_parallel"

/* sp0 is the shared Ministral3-shaped plan (tpxp_m3_sp0 + lm_head). sp1
 * is applied on top of sp0 with dict-update semantics (existing keys keep
 * their position, new ones are appended in this order): the shared
 * sequence-sharded outputs and head, then these. */
static const tpxp_rule gemma3_sp1_tail[] = {
    TPXP_RULE(ROT, "rotary_emb", .local = TPXP_TO_LOCAL),
    /* Upstream keys it unconditionally, but only transformers < 5 has the
     * module; the v5 tree (HEAD pins 5.12.1) has one rotary_emb for both
     * layer types, so there the key matches nothing -- harmless upstream,
     * hence optional here. */
    TPXP_RULE(ROT, "rotary_emb_local", .local = TPXP_TO_LOCAL, .optional = 1),
    TPXP_SEQ("layers.*.input_layernorm"),
    TPXP_SEQ("layers.*.post_attention_layernorm"),
    TPXP_SEQ("layers.*.pre_feedforward_layernorm"),
    TPXP_SEQ("layers.*.post_feedforward_layernorm"),
    TPXP_SEQ("norm"),
};

/* Like upstream's _parallelize_gemma3, never looks at tp or the head
 * counts: validate_tp_mesh is the host's (heads-not-divisible). */
int gemma3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const tpx_plugin_plan_request *req) {
  /* isinstance(model, Gemma3ForConditionalGeneration) picks the prefix. */
  const char *prefix =
      tpxp_arch_is(req->architecture, "Gemma3ForConditionalGeneration")
          ? "model.language_model"
          : "model";
  if (host->plan_set_function != NULL)
    TPXP_CHK(host->plan_set_function(ctx, "gemma3"));
  static const tpxp_rule head[2] = TPXP_HEAD_VOCAB("lm_head");
  return tpxp_add_m3_plan(host, ctx, prefix, head, req->sequence_parallel,
                          gemma3_sp1_tail, TPXP_N_OF(gemma3_sp1_tail));
}

/* ---- Gemma4 ---- */

static const tpxp_rule gemma4_rules[] = {
    TPXP_RULE(G4_VOCAB, "embed_tokens"),
    TPXP_COL("layers.*.self_attn.q_proj"),
    TPXP_COL("layers.*.self_attn.k_proj"),
    TPXP_COL("layers.*.self_attn.v_proj"),
    TPXP_RULE(G4_ROW, "layers.*.self_attn.o_proj"),
    TPXP_COL("layers.*.mlp.up_proj"),
    TPXP_COL("layers.*.mlp.gate_proj"),
    TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR,
             .rooted = 1),
    /* assigned after the dict literal upstream, hence last */
    TPXP_RULE(G4_ROW, "layers.*.mlp.down_proj"),
};

/* Python truthiness of a config value that may be an int, a bool or null. */
static int cfg_truthy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *path, int *out) {
  int64_t iv = 0;
  double fv = 0.0;
  int bv = 0, st;
  *out = 0;
  st = host->config_get_bool(ctx, path, &bv);
  if (st == TPX_PLUGIN_OK) {
    *out = bv != 0;
    return TPX_PLUGIN_OK;
  }
  if (st == TPX_PLUGIN_NOT_FOUND)
    return TPX_PLUGIN_OK;
  if (host->config_get_int(ctx, path, &iv) == TPX_PLUGIN_OK) {
    *out = iv != 0;
    return TPX_PLUGIN_OK;
  }
  if (host->config_get_float(ctx, path, &fv) == TPX_PLUGIN_OK) {
    *out = fv != 0.0;
    return TPX_PLUGIN_OK;
  }
  return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                   "gemma4: config key '%s' is neither a boolean nor a number",
                   path);
}

/* Gemma4ForConditionalGeneration reads model.config.text_config; a flat
 * config (no text_config) is its own text config. */
static const char *g4_key(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          char *buf, size_t size, const char *key) {
  return tpxp_path(buf, size,
                   host->config_has(ctx, "text_config") ? "text_config" : "",
                   key);
}

/* Every distinct (num_attention_heads, num_key_value_heads) pair the layers
 * use, ascending (upstream: sorted() of a set over per_layer_config).
 * Sliding layers use num_key_value_heads; full-attention layers use
 * num_global_key_value_heads when the text config has one and sets
 * attention_k_eq_v (Gemma4's heterogeneous per-layer config). Without
 * layer_types every layer is taken as sliding, plus a full-attention kind when
 * a global count is given. */
static int gemma4_head_pairs(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                             int64_t pairs[2][2], int *n) {
  char p[TPXP_FQN_MAX];
  int64_t heads, kv, gkv, nl = 0, i;
  int st, has_global, any_full = 0, any_local = 0;
  *n = 0;
  st = tpxp_cfg_int_req(
      host, ctx, g4_key(host, ctx, p, sizeof p, "num_attention_heads"), &heads);
  if (st != TPX_PLUGIN_OK)
    return st;
  st = tpxp_cfg_int_opt(host, ctx,
                        g4_key(host, ctx, p, sizeof p, "num_key_value_heads"),
                        heads, &kv);
  if (st != TPX_PLUGIN_OK)
    return st;
  /* Full-attention layers use num_global_key_value_heads only with
   * attention_k_eq_v (transformers' Gemma4 attention); otherwise they use
   * num_key_value_heads like every other layer. */
  int k_eq_v = 0;
  st = cfg_truthy(host, ctx, g4_key(host, ctx, p, sizeof p, "attention_k_eq_v"),
                  &k_eq_v);
  if (st != TPX_PLUGIN_OK)
    return st;
  has_global =
      k_eq_v &&
      host->config_get_int(
          ctx, g4_key(host, ctx, p, sizeof p, "num_global_key_value_heads"),
          &gkv) == TPX_PLUGIN_OK;
  if (!has_global)
    gkv = kv;
  if (host->config_get_length(ctx,
                              g4_key(host, ctx, p, sizeof p, "layer_types"),
                              &nl) != TPX_PLUGIN_OK)
    nl = 0;
  for (i = 0; i < nl; i++) {
    char item[64];
    const char *t = NULL;
    snprintf(item, sizeof item, "layer_types[%lld]", (long long)i);
    if (host->config_get_string(ctx, g4_key(host, ctx, p, sizeof p, item),
                                &t) == TPX_PLUGIN_OK &&
        t != NULL && strcmp(t, "full_attention") == 0)
      any_full = 1;
    else
      any_local = 1;
  }
  if (nl == 0) {
    any_local = 1;
    any_full = has_global;
  }
  if (any_local) {
    pairs[*n][0] = heads;
    pairs[(*n)++][1] = kv;
  }
  if (any_full && (*n == 0 || gkv != kv)) {
    pairs[*n][0] = heads;
    pairs[(*n)++][1] = gkv;
  }
  if (*n == 2 && pairs[1][1] < pairs[0][1]) {
    int64_t t = pairs[0][1];
    pairs[0][1] = pairs[1][1];
    pairs[1][1] = t;
  }
  return TPX_PLUGIN_OK;
}

/* The Gemma4 strategy's checks at tp > 1 (before the Default flow): MoE
 * text configs, then per-layer head counts. On a problem fills `msg` and
 * *code and returns TPX_PLUGIN_OK; msg[0] == '\0' means none. Config
 * trouble is an error status (message set through the host). */
static int gemma4_strategy_check(const tpx_plugin_host *host,
                                 tpx_plugin_ctx *ctx, int64_t tp, char *msg,
                                 size_t size, const char **code) {
  int64_t pairs[2][2], g = 0;
  char list[160] = "[", valid[160], p[TPXP_FQN_MAX];
  int n = 0, nbad = 0, i, st, moe = 0;
  msg[0] = '\0';
  *code = NULL;
  st = cfg_truthy(host, ctx, g4_key(host, ctx, p, sizeof p, "enable_moe_block"),
                  &moe);
  if (st != TPX_PLUGIN_OK)
    return st;
  if (moe) {
    *code = "moe-tp-unsupported";
    snprintf(msg, size,
             "Gemma4 MoE does not support tensor parallelism; use expert "
             "parallelism instead (%s is set, tp=%lld)",
             p, (long long)tp);
    return TPX_PLUGIN_OK;
  }
  st = gemma4_head_pairs(host, ctx, pairs, &n);
  if (st != TPX_PLUGIN_OK)
    return st;
  for (i = 0; i < n; i++) {
    g = tpxp_gcd(g, pairs[i][0]);
    g = tpxp_gcd(g, pairs[i][1]);
    if (pairs[i][0] % tp != 0 || pairs[i][1] % tp != 0) {
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s(%lld, %lld)",
               nbad ? ", " : "", (long long)pairs[i][0],
               (long long)pairs[i][1]);
      nbad++;
    }
  }
  if (nbad > 0) {
    strcat(list, "]");
    *code = "heads-not-divisible";
    snprintf(msg, size,
             "Gemma4 TP requires every layer attention head count to be "
             "divisible by tp_size; got incompatible_head_counts=%s, "
             "tp_size=%lld (pairs are num_attention_heads, "
             "num_key_value_heads); valid tp sizes: %s",
             list, (long long)tp,
             tpxp_valid_tp_sizes(valid, sizeof valid, g, 0));
  }
  return TPX_PLUGIN_OK;
}

/* The strategy's checks, then the Default strategy's validate_tp_mesh over
 * the text config's (num_attention_heads, num_key_value_heads). */
static int gemma4_refuse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         int64_t tp) {
  char msg[TPXP_MSG_MAX], p[TPXP_FQN_MAX];
  const char *code = NULL;
  int64_t heads = 0, kv = 0;
  int st = gemma4_strategy_check(host, ctx, tp, msg, sizeof msg, &code);
  if (st != TPX_PLUGIN_OK)
    return st;
  if (msg[0] != '\0')
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED, "%s", msg);
  st = tpxp_cfg_int_opt(host, ctx,
                        g4_key(host, ctx, p, sizeof p, "num_attention_heads"),
                        0, &heads);
  if (st == TPX_PLUGIN_OK)
    st = tpxp_cfg_int_opt(host, ctx,
                          g4_key(host, ctx, p, sizeof p, "num_key_value_heads"),
                          0, &kv);
  return st == TPX_PLUGIN_OK ? tpxp_refuse_heads(host, ctx, heads, kv, tp) : st;
}

int gemma4_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpx_plugin_plan_request *req) {
  int64_t tp_size = req->tp_size;
  char msg[TPXP_MSG_MAX];
  const char *code = NULL;
  int st;
  if (tp_size <= 1)
    return TPX_PLUGIN_OK;
  st = gemma4_strategy_check(host, ctx, tp_size, msg, sizeof msg, &code);
  if (st != TPX_PLUGIN_OK || msg[0] == '\0' || host->diagnose == NULL)
    return st;
  return host->diagnose(ctx, TPX_PLUGIN_DIAG_ERROR, code, msg);
}

int gemma4_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const tpx_plugin_plan_request *req) {
  int sequence_parallel = req->sequence_parallel;
  int64_t tp_size = req->tp_size;
  char p[TPXP_FQN_MAX];
  int st, eseries = 0;
  if (tp_size > 1 && (st = gemma4_refuse(host, ctx, tp_size)) != TPX_PLUGIN_OK)
    return st;
  if (sequence_parallel)
    tpxp_log(host, ctx, TPX_PLUGIN_LOG_WARN,
             "sequence_parallel=True is not yet supported for Gemma4 and will "
             "be ignored");
  st = cfg_truthy(host, ctx,
                  g4_key(host, ctx, p, sizeof p, "hidden_size_per_layer_input"),
                  &eseries);
  if (st != TPX_PLUGIN_OK)
    return st;
  if (host->plan_set_function != NULL &&
      (st = host->plan_set_function(ctx, "gemma4")) != TPX_PLUGIN_OK)
    return st;
  st = tpxp_add_rules(host, ctx, "model.language_model", gemma4_rules,
                      TPXP_N_OF(gemma4_rules));
  if (st == TPX_PLUGIN_OK && eseries) {
    /* E-series: lm_head is tied to the embedding and the model's forward
     * computes vocab-sharded logits itself, so the key goes; the per-layer
     * embedding table is vocab-sharded instead. */
    st = host->plan_remove(ctx, "lm_head");
    if (st == TPX_PLUGIN_OK)
      st = tpxp_add(host, ctx, "model.language_model.embed_tokens_per_layer",
                    G4_VOCAB, NULL, NULL, TPXP_DEF, 0);
  }
  return st;
}
