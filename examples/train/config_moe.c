/* config_moe.c — the mixture-of-experts keys of the three MoE families
 * tpx-train implements (Qwen3-MoE, Mixtral, GLM-4-MoE as the DeepSeek-V3
 * block under Llama's attention), read from the HF config the way
 * transformers 5's config classes default them, and which decoder layers
 * are MoE layers. Refuses, naming the key, what tpx-train does not
 * implement (a router aux loss, jitter noise, sliding windows, GLM-4-MoE's
 * partial rotary or q/k norm). Not the dense keys (config.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train.h"

/* An optional integer key: dflt when absent; an error naming it when it
 * is not an integer. */
static tpx_status opt_int(const tpx_model *m, const char *key, int64_t dflt,
                          int64_t *out, tpx_error *err) {
  tpx_error e = {0};
  tpx_status st = tpx_model_config_int(m, key, out, &e);
  if (st == TPX_NOT_FOUND) {
    *out = dflt;
    return TPX_OK;
  }
  if (st)
    return tpx_error_set(err, TPX_VALIDATION, "config: %s: %s", key, e.message);
  return TPX_OK;
}

static tpx_status opt_bool(const tpx_model *m, const char *key, int dflt,
                           int *out, tpx_error *err) {
  tpx_error e = {0};
  tpx_status st = tpx_model_config_bool(m, key, out, &e);
  if (st == TPX_NOT_FOUND) {
    *out = dflt;
    return TPX_OK;
  }
  if (st)
    return tpx_error_set(err, TPX_VALIDATION, "config: %s: %s", key, e.message);
  return TPX_OK;
}

static tpx_status opt_real(const tpx_model *m, const char *key, double dflt,
                           double *out, tpx_error *err) {
  tpx_error e = {0};
  tpx_status st = tpx_model_config_float(m, key, out, &e);
  if (st == TPX_NOT_FOUND) {
    *out = dflt;
    return TPX_OK;
  }
  if (st || !isfinite(*out))
    return tpx_error_set(err, TPX_VALIDATION, "config: %s: %s", key,
                         st ? e.message : "not a finite number");
  return TPX_OK;
}

static tpx_status refuse(tpx_error *err, const char *arch, const char *what) {
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "config: %s: %s is not implemented by tpx-train", arch,
                       what);
}

/* The expert count under its family's spelling(s). */
static tpx_status read_experts(const tpx_model *m, tr_config *c,
                               tpx_error *err) {
  static const char *const keys[] = {"num_experts", "num_local_experts",
                                     "n_routed_experts"};
  int64_t e = 0;
  for (size_t i = 0; i < 3 && !e; i++)
    if (opt_int(m, keys[i], 0, &e, err))
      return err ? err->status : TPX_VALIDATION;
  if (e <= 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: %s needs num_experts (num_local_experts, "
                         "n_routed_experts) > 0",
                         c->arch);
  c->mc.router.experts = e;
  int64_t k = 0;
  if (opt_int(m, "num_experts_per_tok", 0, &k, err))
    return err ? err->status : TPX_VALIDATION;
  if (k < 1 || k > e)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: num_experts_per_tok %lld must be in 1..%lld "
                         "(the experts)",
                         (long long)k, (long long)e);
  c->mc.router.top_k = k;
  return TPX_OK;
}

/* What every family refuses: a router aux loss added to the loss
 * (output_router_logits with a coefficient), mlp_only_layers entries that
 * are not layer indices. */
static tpx_status common_refusals(const tpx_model *m, const tr_config *c,
                                  tpx_error *err) {
  int logits = 0;
  double coef = 0;
  if (opt_bool(m, "output_router_logits", 0, &logits, err) ||
      opt_real(m, "router_aux_loss_coef", 0, &coef, err))
    return err ? err->status : TPX_VALIDATION;
  if (logits && coef != 0)
    return refuse(err, c->arch,
                  "output_router_logits with router_aux_loss_coef != 0 (the "
                  "router's aux loss)");
  for (int64_t i = 0;; i++) {
    char key[64];
    int64_t v;
    tpx_error e = {0};
    snprintf(key, sizeof key, "mlp_only_layers[%lld]", (long long)i);
    tpx_status st = tpx_model_config_int(m, key, &v, &e);
    if (st == TPX_NOT_FOUND)
      return TPX_OK;
    if (st || v < 0 || v >= c->layers)
      return tpx_error_set(err, TPX_VALIDATION,
                           "config: %s must be a layer index in 0..%lld", key,
                           (long long)c->layers - 1);
  }
}

/* GLM-4-MoE: the DeepSeek-V3 router and shared experts under an
 * attention that must be Llama's. */
static tpx_status glm4_read(const tpx_model *m, tr_config *c, tpx_error *err) {
  tr_moe_config *mc = &c->mc;
  int qkn = 0;
  double prf = 0;
  int64_t shared = 0;
  mc->router.score = TPX_MOE_SIGMOID;
  if (opt_bool(m, "use_qk_norm", 0, &qkn, err) ||
      opt_real(m, "routed_scaling_factor", 1.0,
               &mc->router.routed_scaling_factor, err) ||
      opt_int(m, "n_group", 1, &mc->router.n_group, err) ||
      opt_int(m, "topk_group", 1, &mc->router.topk_group, err) ||
      opt_int(m, "n_shared_experts", 1, &shared, err) ||
      opt_int(m, "first_k_dense_replace", 1, &mc->first_dense, err))
    return err ? err->status : TPX_VALIDATION;
  if (qkn)
    return refuse(err, c->arch, "use_qk_norm true");
  /* transformers' Glm4MoeConfig defaults partial_rotary_factor to 0.5;
   * config.c refuses any value but 1 that is written */
  if (tpx_model_config_float(m, "partial_rotary_factor", &prf, NULL) &&
      tpx_model_config_float(m, "rope_parameters.partial_rotary_factor", &prf,
                             NULL))
    return refuse(err, c->arch,
                  "partial_rotary_factor absent (transformers' default 0.5)");
  int64_t e = mc->router.experts, g = mc->router.n_group;
  if (g < 1 || e % g || e / g < 2 || mc->router.topk_group < 1 ||
      mc->router.topk_group > g)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: n_group %lld must divide n_routed_experts "
                         "%lld into groups of 2 or more, and topk_group %lld "
                         "be in 1..n_group",
                         (long long)g, (long long)e,
                         (long long)mc->router.topk_group);
  if (!(mc->router.routed_scaling_factor > 0) || shared < 0 ||
      mc->first_dense < 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: routed_scaling_factor must be > 0, "
                         "n_shared_experts and first_k_dense_replace >= 0");
  mc->shared_inter = shared * mc->inter;
  return TPX_OK;
}

tpx_status tr_config_moe_read(const tpx_model *m, tr_config *c,
                              tpx_error *err) {
  tr_moe_config *mc = &c->mc;
  tpx_moe_router_options ro = TPX_MOE_ROUTER_OPTIONS_INIT;
  memset(mc, 0, sizeof *mc);
  mc->router = ro;
  mc->sparse_step = 1;
  if (read_experts(m, c, err) || common_refusals(m, c, err))
    return err ? err->status : TPX_VALIDATION;
  mc->inter = c->inter;
  if (c->moe != TR_MOE_MIXTRAL &&
      (opt_int(m, "moe_intermediate_size", 0, &mc->inter, err)))
    return err->status;
  if (mc->inter <= 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: %s needs moe_intermediate_size > 0", c->arch);
  if (c->moe == TR_MOE_MIXTRAL) {
    double jitter = 0, sw = 0;
    mc->router.norm_topk_prob = 1;
    if (opt_real(m, "router_jitter_noise", 0, &jitter, err))
      return err->status;
    if (jitter != 0)
      return refuse(err, c->arch, "router_jitter_noise != 0");
    if (tpx_model_config_float(m, "sliding_window", &sw, NULL) == TPX_OK)
      return refuse(err, c->arch, "sliding_window (set, not null)");
    return TPX_OK;
  }
  if (opt_bool(m, "norm_topk_prob", c->moe == TR_MOE_GLM4,
               &mc->router.norm_topk_prob, err))
    return err->status;
  if (c->moe == TR_MOE_GLM4)
    return glm4_read(m, c, err);
  int sliding = 0;
  if (opt_int(m, "decoder_sparse_step", 1, &mc->sparse_step, err) ||
      opt_bool(m, "use_sliding_window", 0, &sliding, err))
    return err->status;
  if (sliding)
    return refuse(err, c->arch, "use_sliding_window true");
  if (mc->sparse_step < 1)
    return tpx_error_set(err, TPX_VALIDATION,
                         "config: decoder_sparse_step %lld must be >= 1",
                         (long long)mc->sparse_step);
  return TPX_OK;
}

int tr_config_layer_is_moe(const tpx_model *m, const tr_config *c, int64_t l) {
  switch (c->moe) {
  case TR_MOE_MIXTRAL: return 1;
  case TR_MOE_GLM4: return l >= c->mc.first_dense;
  case TR_MOE_QWEN3:
    for (int64_t i = 0;; i++) {
      char key[64];
      int64_t v;
      snprintf(key, sizeof key, "mlp_only_layers[%lld]", (long long)i);
      if (tpx_model_config_int(m, key, &v, NULL))
        break;
      if (v == l)
        return 0;
    }
    return (l + 1) % c->mc.sparse_step == 0;
  default: return 0;
  }
}
