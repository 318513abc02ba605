/* shard_fixture.h — builder-made models, meshes and plans shared by the
 * shard and report test suites (header-only; static functions).
 *
 * The tiny llama: hidden H=64, 8 heads, 8 kv heads (head_dim 8),
 * intermediate I=128, vocab V (256 by default), 2 layers:
 *   model.embed_tokens            embedding  weight [V, H]
 *   model.layers.{0,1}.self_attn.{q,k,v,o}_proj  linear weight [64, 64]
 *   model.layers.{0,1}.mlp.{gate,up}_proj        linear weight [128, 64]
 *   model.layers.{0,1}.mlp.down_proj             linear weight [64, 128]
 *   model.layers.{0,1}.{input,post_attention}_layernorm  norm weight [64]
 *   model.norm                    norm weight [64]
 *   lm_head                       linear weight [V, H] (tied or not)
 * all bf16. */
#ifndef TPX_TESTS_SHARD_FIXTURE_H
#define TPX_TESTS_SHARD_FIXTURE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/fsdp.h"
#include "tpx/match.h"
#include "tpx/sharding.h"
#include "tpx/tpx.h"
#include "tpx/validate.h"

#define FX_H 64
#define FX_I 128

typedef struct fx_opts {
  int64_t vocab;
  int tied;
  int bias; /* q/k/v/o biases */
  int layers;
  const char *config; /* JSON; NULL = a llama config */
} fx_opts;

static inline void fx_linear(tpx_model *m, const char *fqn, int64_t out,
                             int64_t in, int bias) {
  int64_t w[2] = {out, in}, b[1] = {out};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_msg(tpx_model_add_param(m, fqn, "weight", w, 2, TPX_DTYPE_BF16,
                                    NULL, &e) == TPX_OK,
                "%s", e.message);
  if (bias)
    ck_assert_int_eq(
        tpx_model_add_param(m, fqn, "bias", b, 1, TPX_DTYPE_BF16, NULL, &e),
        TPX_OK);
}

static inline void fx_norm(tpx_model *m, const char *fqn) {
  int64_t w[1] = {FX_H};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_add_module(m, fqn, TPX_MODULE_NORM, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_param(m, fqn, "weight", w, 1, TPX_DTYPE_BF16, NULL, &e),
      TPX_OK);
}

static const char fx_llama_config[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\","
    " \"hidden_size\": 64, \"num_attention_heads\": 8,"
    " \"num_key_value_heads\": 8, \"intermediate_size\": 128,"
    " \"num_hidden_layers\": 2, \"torch_dtype\": \"bfloat16\"}";

static inline tpx_model *fx_model(const fx_opts *o) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  int64_t V = o->vocab ? o->vocab : 256;
  int layers = o->layers ? o->layers : 2;
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  const char *cfg = o->config ? o->config : fx_llama_config;
  ck_assert_msg(tpx_model_set_config(m, cfg, strlen(cfg), "fixture", &e) ==
                    TPX_OK,
                "%s", e.message);
  int64_t emb[2] = {V, FX_H};
  ck_assert_int_eq(tpx_model_add_module(m, "model.embed_tokens",
                                        TPX_MODULE_EMBEDDING, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.embed_tokens", "weight", emb,
                                       2, TPX_DTYPE_BF16, NULL, &e),
                   TPX_OK);
  for (int l = 0; l < layers; l++) {
    char p[128];
    static const char *const att[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    for (int i = 0; i < 4; i++) {
      snprintf(p, sizeof p, "model.layers.%d.self_attn.%s", l, att[i]);
      fx_linear(m, p, FX_H, FX_H, o->bias);
    }
    snprintf(p, sizeof p, "model.layers.%d.mlp.gate_proj", l);
    fx_linear(m, p, FX_I, FX_H, 0);
    snprintf(p, sizeof p, "model.layers.%d.mlp.up_proj", l);
    fx_linear(m, p, FX_I, FX_H, 0);
    snprintf(p, sizeof p, "model.layers.%d.mlp.down_proj", l);
    fx_linear(m, p, FX_H, FX_I, 0);
    snprintf(p, sizeof p, "model.layers.%d.input_layernorm", l);
    fx_norm(m, p);
    snprintf(p, sizeof p, "model.layers.%d.post_attention_layernorm", l);
    fx_norm(m, p);
  }
  fx_norm(m, "model.norm");
  ck_assert_int_eq(
      tpx_model_add_module(m, "lm_head", TPX_MODULE_LINEAR, NULL, &e), TPX_OK);
  if (o->tied) {
    ck_assert_msg(tpx_model_tie(m, "lm_head.weight",
                                "model.embed_tokens.weight", &e) == TPX_OK,
                  "%s", e.message);
  } else {
    ck_assert_int_eq(tpx_model_add_param(m, "lm_head", "weight", emb, 2,
                                         TPX_DTYPE_BF16, NULL, &e),
                     TPX_OK);
  }
  return m;
}

static inline tpx_model *fx_llama(void) {
  fx_opts o = {0, 0, 0, 0, NULL};
  return fx_model(&o);
}

/* Mesh ("dp_replicate", "dp_shard", "tp"). */
static inline tpx_mesh *fx_mesh(int64_t dpr, int64_t dps, int64_t tp) {
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {dpr, dps, tp};
  tpx_mesh *mesh = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_mesh_create(names, sizes, 3, &mesh, &e) == TPX_OK, "%s",
                e.message);
  return mesh;
}

static inline void fx_set(tpx_plan *p, const char *key, tpx_style_kind kind,
                          int optional) {
  tpx_style s = tpx_style_default(kind);
  tpx_error e = {0};
  ck_assert_msg(tpx_plan_set(p, key, &s, optional, &e) == TPX_OK, "%s",
                e.message);
}

static inline void fx_set_style(tpx_plan *p, const char *key,
                                const tpx_style *s) {
  tpx_error e = {0};
  ck_assert_msg(tpx_plan_set(p, key, s, 0, &e) == TPX_OK, "%s", e.message);
}

/* The Llama sp0 plan (docs/SEMANTICS.md "Family plans"; lm_head output
 * Shard(-1), DTensor). */
static inline tpx_plan *fx_llama_plan(void) {
  tpx_plan *p = NULL;
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  tpx_style row_embed = tpx_style_default(TPX_STYLE_ROWWISE);
  row_embed.input_layouts.items[0] = tpx_placement_replicate();
  fx_set_style(p, "model.embed_tokens", &row_embed);
  fx_set(p, "model.layers.*.self_attn.q_proj", TPX_STYLE_COLWISE, 0);
  fx_set(p, "model.layers.*.self_attn.k_proj", TPX_STYLE_COLWISE, 0);
  fx_set(p, "model.layers.*.self_attn.v_proj", TPX_STYLE_COLWISE, 0);
  fx_set(p, "model.layers.*.self_attn.qkv_proj", TPX_STYLE_COLWISE, 1);
  fx_set(p, "model.layers.*.mlp.gate_up_proj", TPX_STYLE_COLWISE, 1);
  fx_set(p, "model.layers.*.self_attn.o_proj", TPX_STYLE_ROWWISE, 0);
  fx_set(p, "model.layers.*.mlp.up_proj", TPX_STYLE_COLWISE, 0);
  fx_set(p, "model.layers.*.mlp.gate_proj", TPX_STYLE_COLWISE, 0);
  fx_set(p, "model.layers.*.mlp.down_proj", TPX_STYLE_ROWWISE, 0);
  tpx_style lm = tpx_style_default(TPX_STYLE_COLWISE);
  lm.use_local_output = 0;
  fx_set_style(p, "lm_head", &lm);
  return p;
}

static inline tpx_sharding *fx_shard(const tpx_model *m, const tpx_plan *p,
                                     const tpx_mesh *mesh,
                                     const tpx_sharding_options *o) {
  tpx_sharding *sh = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_sharding_create(m, p, mesh, o, &sh, &e) == TPX_OK, "%s",
                e.message);
  return sh;
}

/* How many times `needle` occurs in `hay` (overlapping occurrences count). */
static inline size_t fx_occurrences(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Text form of param `fqn`'s placement on mesh dim `dim`. */
static inline const char *fx_pl(const tpx_sharding *sh, const char *fqn,
                                int dim, char *buf, size_t size) {
  int64_t p = tpx_model_find_param(tpx_sharding_model(sh), fqn);
  ck_assert_msg(p >= 0, "no parameter %s", fqn);
  tpx_param_sharding ps;
  ck_assert_int_eq(tpx_sharding_param(sh, p, &ps, NULL), TPX_OK);
  tpx_placement_format(ps.placements[dim], buf, size);
  return buf;
}

/* Number of diagnostics with `code` at exactly `level`. */
static inline size_t fx_count(const tpx_diag_list *l, tpx_diag_level level,
                              const char *code) {
  size_t n = 0;
  for (size_t i = 0; i < tpx_diag_count(l); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(l, i, &d, NULL), TPX_OK);
    if (d.level == level && strcmp(d.code, code) == 0)
      n++;
  }
  return n;
}

/* The message of the first diagnostic with `code`, or "". */
static inline const char *fx_msg(const tpx_diag_list *l, const char *code) {
  for (size_t i = 0; i < tpx_diag_count(l); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(l, i, &d, NULL), TPX_OK);
    if (strcmp(d.code, code) == 0)
      return d.message;
  }
  return "";
}

static inline const char *fx_fix(const tpx_diag_list *l, const char *code) {
  for (size_t i = 0; i < tpx_diag_count(l); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(l, i, &d, NULL), TPX_OK);
    if (strcmp(d.code, code) == 0)
      return d.fix;
  }
  return "";
}

#define FX_MAIN(suite_fn)                                                      \
  int main(void) {                                                             \
    SRunner *sr = srunner_create(suite_fn());                                  \
    srunner_run_all(sr, CK_NORMAL);                                            \
    int failed = srunner_ntests_failed(sr);                                    \
    srunner_free(sr);                                                          \
    return failed ? 1 : 0;                                                     \
  }

#endif /* TPX_TESTS_SHARD_FIXTURE_H */
