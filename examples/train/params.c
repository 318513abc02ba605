/* params.c — the trainer's parameter struct (tr_params, train.h): every
 * parameter of the decoder found once in the model by one table, each
 * checked against the shape config.json gives it, and nothing left over.
 * A checkpoint of another model is refused here, with the same verdict as
 * `tpx plan --weights` ("describe different models"), instead of being
 * trained with the config's sizes (or fewer layers) and exit 0. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* A dimension of a parameter, as config.json sizes it. */
typedef enum dim {
  NONE,
  HIDDEN,
  Q_OUT,
  KV_OUT,
  HEAD,
  INTER,
  VOCAB,
  EXPERTS,      /* E: routed experts */
  MOE_INTER,    /* I: a routed expert's width */
  MOE_INTER2,   /* 2I: gate and up fused */
  SHARED_INTER, /* the shared experts' width */
} dim;

static int64_t dim_size(const tr_config *c, dim d) {
  switch (d) {
  case HIDDEN: return c->hidden;
  case Q_OUT: return c->heads * c->head_dim;
  case KV_OUT: return c->kv_heads * c->head_dim;
  case HEAD: return c->head_dim;
  case INTER: return c->inter;
  case VOCAB: return c->vocab;
  case EXPERTS: return c->mc.router.experts;
  case MOE_INTER: return c->mc.inter;
  case MOE_INTER2: return 2 * c->mc.inter;
  case SHARED_INTER: return c->mc.shared_inter;
  default: return 0;
  }
}

/* Which modules of a decoder layer exist: always, with q/k norms (Qwen3),
 * in a dense layer, in an MoE layer with shared experts; q/k/v_proj have a
 * bias with qkv_bias (Qwen2). */
enum { ALWAYS, QK_NORM, DENSE, MOE, SHARED };

static const struct {
  const char *name; /* under model.layers.N. */
  size_t offset;    /* of its tr_module in tr_layer */
  int when;
  int bias;       /* has a .bias [rows] with qkv_bias */
  dim rows, cols; /* of .weight; cols NONE: 1-D */
} layer_modules[] = {
    {"input_layernorm", offsetof(tr_layer, input_layernorm), ALWAYS, 0, HIDDEN,
     NONE},
    {"self_attn.q_proj", offsetof(tr_layer, q_proj), ALWAYS, 1, Q_OUT, HIDDEN},
    {"self_attn.k_proj", offsetof(tr_layer, k_proj), ALWAYS, 1, KV_OUT, HIDDEN},
    {"self_attn.v_proj", offsetof(tr_layer, v_proj), ALWAYS, 1, KV_OUT, HIDDEN},
    {"self_attn.q_norm", offsetof(tr_layer, q_norm), QK_NORM, 0, HEAD, NONE},
    {"self_attn.k_norm", offsetof(tr_layer, k_norm), QK_NORM, 0, HEAD, NONE},
    {"self_attn.o_proj", offsetof(tr_layer, o_proj), ALWAYS, 0, HIDDEN, Q_OUT},
    {"post_attention_layernorm", offsetof(tr_layer, post_attention_layernorm),
     ALWAYS, 0, HIDDEN, NONE},
    {"mlp.gate_proj", offsetof(tr_layer, mlp.gate_proj), DENSE, 0, INTER,
     HIDDEN},
    {"mlp.up_proj", offsetof(tr_layer, mlp.up_proj), DENSE, 0, INTER, HIDDEN},
    {"mlp.down_proj", offsetof(tr_layer, mlp.down_proj), DENSE, 0, HIDDEN,
     INTER},
    {"mlp.gate", offsetof(tr_layer, router), MOE, 0, EXPERTS, HIDDEN},
    {"mlp.shared_experts.gate_proj", offsetof(tr_layer, shared.gate_proj),
     SHARED, 0, SHARED_INTER, HIDDEN},
    {"mlp.shared_experts.up_proj", offsetof(tr_layer, shared.up_proj), SHARED,
     0, SHARED_INTER, HIDDEN},
    {"mlp.shared_experts.down_proj", offsetof(tr_layer, shared.down_proj),
     SHARED, 0, HIDDEN, SHARED_INTER},
};

/* The checking state: which parameters were claimed, and the first
 * parameter whose shape disagrees with the config. */
typedef struct finder {
  const tpx_model *model;
  const tr_config *cfg;
  unsigned char *used; /* [num params] */
  size_t checked, differ;
  char first[512];
} finder;

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t size) {
  size_t o = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < ndim && o < size; d++)
    o += (size_t)snprintf(buf + o, size - o, "%s%lld", d ? ", " : "",
                          (long long)shape[d]);
  if (o < size)
    snprintf(buf + o, size - o, "]");
}

/* Claim parameter `name` (-1 when absent) and check its shape. */
static int64_t claim(finder *f, const char *name, dim rows, dim cols) {
  int64_t p = tpx_model_find_param(f->model, name);
  tpx_param_info pi;
  if (p < 0 || tpx_model_param(f->model, p, &pi, NULL))
    return -1;
  f->used[p] = 1;
  int64_t want[2] = {dim_size(f->cfg, rows), dim_size(f->cfg, cols)};
  int ndim = cols == NONE ? 1 : 2;
  f->checked++;
  if (pi.ndim == ndim && pi.shape[0] == want[0] &&
      (ndim == 1 || pi.shape[1] == want[1]))
    return p;
  if (f->differ++ == 0) {
    char a[64], b[64];
    shape_text(pi.shape, pi.ndim, a, sizeof a);
    shape_text(want, ndim, b, sizeof b);
    snprintf(f->first, sizeof f->first,
             "tensor '%s' is %s in the weights but %s from the config", name, a,
             b);
  }
  return p;
}

/* The module `name`: its index and its parameters (.bias only if bias). */
static tr_module find(finder *f, const char *name, int bias, dim rows,
                      dim cols) {
  char buf[300];
  tr_module mod = {tpx_model_find_module(f->model, name), -1, -1};
  snprintf(buf, sizeof buf, "%s.weight", name);
  mod.w = claim(f, buf, rows, cols);
  if (bias) {
    snprintf(buf, sizeof buf, "%s.bias", name);
    mod.b = claim(f, buf, rows, NONE);
  }
  return mod;
}

/* Claim the 3-D fused expert parameter `name` [E, a, b]; -1 when absent. */
static int64_t claim3(finder *f, const char *name, dim a, dim b) {
  int64_t p = tpx_model_find_param(f->model, name);
  tpx_param_info pi;
  if (p < 0 || tpx_model_param(f->model, p, &pi, NULL))
    return -1;
  f->used[p] = 1;
  int64_t want[3] = {dim_size(f->cfg, EXPERTS), dim_size(f->cfg, a),
                     dim_size(f->cfg, b)};
  f->checked++;
  if (pi.ndim == 3 && pi.shape[0] == want[0] && pi.shape[1] == want[1] &&
      pi.shape[2] == want[2])
    return p;
  if (f->differ++ == 0) {
    char x[64], y[64];
    shape_text(pi.shape, pi.ndim, x, sizeof x);
    shape_text(want, 3, y, sizeof y);
    snprintf(f->first, sizeof f->first,
             "tensor '%s' is %s in the weights but %s from the config", name, x,
             y);
  }
  return p;
}

/* An MoE layer's fused experts: Automodel's GroupedExperts
 * (gate_and_up_projs [E, H, 2I], down_projs [E, I, H]; Qwen3-MoE and
 * GLM-4-MoE through the automodel_moe plugin), else transformers'
 * (gate_up_proj [E, 2I, H], down_proj [E, H, I]; Mixtral). */
static tpx_status find_experts(finder *f, int64_t l, tr_layer *L,
                               tpx_error *err) {
  char m[160], a[200], b[200];
  snprintf(m, sizeof m, "model.layers.%lld.mlp.experts", (long long)l);
  L->experts = tpx_model_find_module(f->model, m);
  snprintf(a, sizeof a, "%s.gate_and_up_projs", m);
  snprintf(b, sizeof b, "%s.down_projs", m);
  L->hf_experts = tpx_model_find_param(f->model, a) < 0;
  if (!L->hf_experts) {
    L->gate_up = claim3(f, a, HIDDEN, MOE_INTER2);
    L->down = claim3(f, b, MOE_INTER, HIDDEN);
  } else {
    snprintf(a, sizeof a, "%s.gate_up_proj", m);
    snprintf(b, sizeof b, "%s.down_proj", m);
    L->gate_up = claim3(f, a, MOE_INTER2, HIDDEN);
    L->down = claim3(f, b, HIDDEN, MOE_INTER);
  }
  if (L->gate_up < 0 || L->down < 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "model: MoE layer %lld lacks its fused experts (%s or "
                         "%s)",
                         (long long)l, a, b);
  if (f->cfg->mc.router.score == TPX_MOE_SIGMOID &&
      !(L->score_bias =
            calloc((size_t)f->cfg->mc.router.experts, sizeof(float))))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return TPX_OK;
}

/* Whether the layer has the table's row. */
static int layer_has(const tr_config *cfg, const tr_layer *L, int when) {
  switch (when) {
  case QK_NORM: return cfg->qk_norm;
  case DENSE: return !L->moe;
  case MOE: return L->moe;
  case SHARED: return L->moe && cfg->mc.shared_inter > 0;
  default: return 1;
  }
}

static tpx_status find_layer(finder *f, int64_t l, tr_layer *L,
                             tpx_error *err) {
  const tr_config *cfg = f->cfg;
  L->moe = tr_config_layer_is_moe(f->model, cfg, l);
  L->experts = L->gate_up = L->down = -1;
  for (size_t i = 0; i < sizeof layer_modules / sizeof *layer_modules; i++) {
    tr_module *mod = (tr_module *)((char *)L + layer_modules[i].offset);
    *mod = (tr_module){-1, -1, -1};
    if (!layer_has(cfg, L, layer_modules[i].when))
      continue;
    int bias = layer_modules[i].bias && cfg->qkv_bias;
    char name[200];
    snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l,
             layer_modules[i].name);
    *mod = find(f, name, bias, layer_modules[i].rows, layer_modules[i].cols);
    if (mod->w < 0 || (bias && mod->b < 0))
      return tpx_error_set(err, TPX_VALIDATION,
                           "model: layer %lld lacks a parameter %s needs "
                           "(%s.%s)",
                           (long long)l, cfg->arch, name,
                           mod->w < 0 ? "weight" : "bias");
  }
  return L->moe ? find_experts(f, l, L, err) : TPX_OK;
}

/* A parameter the config's model does not have (a tensor named .weight
 * or .bias that nothing claimed; buffers such as rotary inv_freq are not
 * parameters and pass). */
static tpx_status check_leftovers(const finder *f, tpx_error *err) {
  size_t extra = 0;
  const char *first = NULL;
  for (size_t p = 0; p < tpx_model_num_params(f->model); p++) {
    tpx_param_info pi;
    if (f->used[p] || tpx_model_param(f->model, (int64_t)p, &pi, NULL))
      continue;
    size_t n = strlen(pi.fqn);
    if ((n > 7 && !strcmp(pi.fqn + n - 7, ".weight")) ||
        (n > 5 && !strcmp(pi.fqn + n - 5, ".bias"))) {
      if (!extra++)
        first = pi.fqn;
    }
  }
  if (!extra)
    return TPX_OK;
  return tpx_error_set(err, TPX_VALIDATION,
                       "config.json and the weights describe different "
                       "models: the weights hold '%s' (%zu tensors in all) "
                       "that a %s of num_hidden_layers %lld does not have; "
                       "pass the config.json that came with the weights",
                       first, extra, f->cfg->arch, (long long)f->cfg->layers);
}

tpx_status tr_params_find(const tpx_model *model, const tr_config *cfg,
                          tr_params *P, tpx_error *err) {
  finder f = {model, cfg, NULL, 0, 0, ""};
  size_t nl = (size_t)(cfg->layers ? cfg->layers : 1);
  size_t np = tpx_model_num_params(model);
  tpx_status st = TPX_OK;
  memset(P, 0, sizeof *P);
  P->layers = calloc(nl, sizeof *P->layers);
  f.used = calloc(np ? np : 1, 1);
  if (!P->layers || !f.used) {
    free(f.used);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  P->embed_tokens = find(&f, "model.embed_tokens", 0, VOCAB, HIDDEN);
  for (int64_t l = 0; !st && l < cfg->layers; l++)
    st = find_layer(&f, l, &P->layers[l], err);
  P->norm = find(&f, "model.norm", 0, HIDDEN, NONE);
  P->lm_head = find(&f, "lm_head", 0, VOCAB, HIDDEN);
  if (!st && (P->embed_tokens.w < 0 || P->norm.w < 0 || P->lm_head.w < 0))
    st =
        tpx_error_set(err, TPX_VALIDATION,
                      "model: embed_tokens, norm or lm_head weight is missing");
  if (!st && f.differ)
    st = tpx_error_set(err, TPX_VALIDATION,
                       "config.json and the weights describe different "
                       "models: %s (%zu of the %zu tensors disagree in "
                       "shape); pass the config.json that came with the "
                       "weights",
                       f.first, f.differ, f.checked);
  if (!st)
    st = check_leftovers(&f, err);
  free(f.used);
  return st;
}

void tr_params_free(tr_params *P, int64_t layers) {
  for (int64_t l = 0; P->layers && l < layers; l++)
    free(P->layers[l].score_bias);
  free(P->layers);
  P->layers = NULL;
}
