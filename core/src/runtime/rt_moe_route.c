/* runtime/rt_moe_route.c — the MoE router (tpx/runtime_moe.h;
 * docs/RUNTIME.md "Mixture of experts"): each token's top-k experts and
 * their weights from the gate's logits, softmax (Qwen3-MoE, Mixtral) or
 * sigmoid with a correction bias and grouped top-k (DeepSeek-V3,
 * GLM-4-MoE), and the weights' gradient back to the logits. Per token in
 * double, rounded once to f32. Local: no comm. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/rt_moe_internal.h"

tpx_status tpx__moe_check_router(const tpx_moe_router_options *o, const char *w,
                                 tpx_error *err) {
  if (!o)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: options are NULL", w);
  if (o->struct_size < sizeof *o)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: options struct_size %zu (want %zu: "
                         "TPX_MOE_ROUTER_OPTIONS_INIT)",
                         w, o->struct_size, sizeof *o);
  int64_t E = o->experts, k = o->top_k;
  if (E <= 0 || E > INT32_MAX)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: experts %lld (want 1..%d: int32 indices)", w,
                         (long long)E, INT32_MAX);
  if (k < 1 || k > E)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: top_k %lld is not in 1..experts (%lld)", w,
                         (long long)k, (long long)E);
  if (o->score != TPX_MOE_SOFTMAX && o->score != TPX_MOE_SIGMOID)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: score %d is not softmax (0) or sigmoid (1)", w,
                         (int)o->score);
  double sf = o->routed_scaling_factor;
  if (!isfinite(sf) || sf < 0 || sf > FLT_MAX)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: routed_scaling_factor %g (want a finite "
                         "value >= 0 that f32 holds; 0 = 1.0)",
                         w, sf);
  if (o->score == TPX_MOE_SOFTMAX) {
    if (o->n_group > 1)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: n_group %lld: grouped top-k is for the "
                           "sigmoid score only",
                           w, (long long)o->n_group);
    if (sf != 0 && sf != 1)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: routed_scaling_factor %g is for the sigmoid "
                           "score only (softmax: 0 or 1)",
                           w, sf);
    return TPX_OK;
  }
  if (o->n_group < 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: n_group %lld (want >= 0)", w,
                         (long long)o->n_group);
  if (o->n_group <= 1)
    return TPX_OK;
  int64_t g = o->n_group, tg = o->topk_group;
  if (E % g)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: n_group %lld does not divide experts %lld", w,
                         (long long)g, (long long)E);
  if (E / g < 2)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: n_group %lld leaves %lld expert(s) per group "
                         "(a group is scored by its two best; want >= 2)",
                         w, (long long)g, (long long)(E / g));
  if (tg < 1 || tg > g)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: topk_group %lld is not in 1..n_group (%lld)", w,
                         (long long)tg, (long long)g);
  if (tg * (E / g) < k)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: top_k %lld is more than the %lld experts "
                         "eligible (topk_group %lld x %lld per group)",
                         w, (long long)k, (long long)(tg * (E / g)),
                         (long long)tg, (long long)(E / g));
  return TPX_OK;
}

/* The index of the largest c[i] (i < n, taken[i] == 0): the first on a
 * tie; -1 when none is left. -inf is never picked. */
static int64_t argmax_free(const double *c, const unsigned char *taken,
                           int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; i++)
    if (!taken[i] && c[i] > -INFINITY && (best < 0 || c[i] > c[best]))
      best = i;
  return best;
}

/* Sigmoid's grouped eligibility: choice scores c[E] of ineligible experts
 * set to -inf (upstream masks them out of the top-k). gsc[n_group] and
 * taken[max(E, n_group)] are scratch. */
static void mask_groups(const tpx_moe_router_options *o, double *c, double *gsc,
                        unsigned char *taken) {
  int64_t g = o->n_group, per = o->experts / g;
  for (int64_t q = 0; q < g; q++) {
    double a = -INFINITY, b = -INFINITY; /* the two best of the group */
    for (int64_t i = 0; i < per; i++) {
      double v = c[q * per + i];
      if (v > a) {
        b = a;
        a = v;
      } else if (v > b)
        b = v;
    }
    gsc[q] = a + b;
    taken[q] = 0;
  }
  for (int64_t s = 0; s < o->topk_group; s++) {
    int64_t q = argmax_free(gsc, taken, g);
    if (q >= 0)
      taken[q] = 1;
  }
  for (int64_t q = 0; q < g; q++)
    if (!taken[q])
      for (int64_t i = 0; i < per; i++) c[q * per + i] = -INFINITY;
}

/* The weights' constants, one definition for forward and backward: under
 * sigmoid the renormalising sum gets + 1e-20 (with norm_topk_prob) and the
 * weights are times routed_scaling_factor (0 = 1); softmax has neither. */
static double weight_scale(const tpx_moe_router_options *o, double *sum) {
  if (o->score != TPX_MOE_SIGMOID)
    return 1.0;
  if (o->norm_topk_prob)
    *sum += 1e-20;
  return o->routed_scaling_factor != 0 ? o->routed_scaling_factor : 1.0;
}

/* One token: scores into p[E] (double) and probs, the choice, weights. */
static void route_one(const tpx_moe_router_options *o, const float *x,
                      const float *bias, double *p, double *c, double *gsc,
                      unsigned char *taken, int32_t *ex, float *wt,
                      float *probs) {
  int64_t E = o->experts, k = o->top_k;
  if (o->score == TPX_MOE_SOFTMAX) {
    double mx = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; e++) mx = x[e] > mx ? x[e] : mx;
    for (int64_t e = 0; e < E; e++) sum += p[e] = exp((double)x[e] - mx);
    for (int64_t e = 0; e < E; e++) c[e] = p[e] /= sum;
  } else {
    for (int64_t e = 0; e < E; e++) {
      p[e] = 1.0 / (1.0 + exp(-(double)x[e]));
      c[e] = p[e] + (bias ? (double)bias[e] : 0.0);
    }
    if (o->n_group > 1)
      mask_groups(o, c, gsc, taken);
  }
  for (int64_t e = 0; e < E; e++) {
    probs[e] = (float)p[e];
    taken[e] = 0;
  }
  double sum = 0, *w = gsc; /* gsc is free again: the k <= E weights */
  for (int64_t j = 0; j < k; j++) {
    int64_t e = argmax_free(c, taken, E);
    if (e < 0) /* NaN scores: the lowest free index */
      for (e = 0; taken[e]; e++) {
      }
    taken[e] = 1;
    ex[j] = (int32_t)e;
    sum += w[j] = p[e];
  }
  double scale = weight_scale(o, &sum);
  for (int64_t j = 0; j < k; j++)
    wt[j] = (float)((o->norm_topk_prob ? w[j] / sum : w[j]) * scale);
}

/* Non-finite logits (NaN from a diverged gate, or ±inf) have no top-k
 * that means anything: refused, naming the first, as is a non-finite
 * correction bias (sigmoid). */
static tpx_status check_finite(const tpx_moe_router_options *o,
                               const float *logits, const float *bias,
                               int64_t n, const char *w, tpx_error *err) {
  int64_t E = o->experts;
  for (int64_t i = 0; i < n * E; i++)
    if (!isfinite(logits[i]))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: logits[%lld, %lld] = %g is not finite (token "
                           "%lld, expert %lld); the router takes finite "
                           "logits",
                           w, (long long)(i / E), (long long)(i % E),
                           (double)logits[i], (long long)(i / E),
                           (long long)(i % E));
  for (int64_t e = 0; bias && o->score == TPX_MOE_SIGMOID && e < E; e++)
    if (!isfinite(bias[e]))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: bias[%lld] = %g (e_score_correction_bias of "
                           "expert %lld) is not finite",
                           w, (long long)e, (double)bias[e], (long long)e);
  return TPX_OK;
}

/* What both directions check first: the options, n >= 0, and that n x E
 * floats fit a buffer's size. */
static tpx_status check_tokens(const tpx_moe_router_options *opts, int64_t n,
                               const char *w, tpx_error *err) {
  TPX__TRY(tpx__moe_check_router(opts, w, err));
  if (n < 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: n %lld (want >= 0)", w,
                         (long long)n);
  if (n > INT64_MAX / (int64_t)sizeof(float) / opts->experts)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: n %lld tokens x %lld experts overflow a "
                         "buffer's size",
                         w, (long long)n, (long long)opts->experts);
  return TPX_OK;
}

tpx_status tpx_moe_route(const tpx_moe_router_options *opts,
                         const float *logits, const float *bias, int64_t n,
                         int32_t *experts, float *weights, float *probs,
                         tpx_error *err) {
  const char *w = "tpx_moe_route";
  TPX__TRY(check_tokens(opts, n, w, err));
  if (n > 0 && (!logits || !experts || !weights || !probs))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !logits    ? "logits"
                         : !experts ? "experts"
                         : !weights ? "weights"
                                    : "probs");
  int64_t E = opts->experts, k = opts->top_k;
  TPX__TRY(check_finite(opts, logits, bias, n, w, err));
  if (n == 0)
    return TPX_OK;
  double *p = malloc(sizeof(double) * (size_t)(3 * E));
  unsigned char *taken = malloc((size_t)E);
  if (!p || !taken) {
    free(p);
    free(taken);
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: scratch for %lld experts", w,
                         (long long)E);
  }
  for (int64_t t = 0; t < n; t++)
    route_one(opts, logits + t * E,
              opts->score == TPX_MOE_SIGMOID ? bias : NULL, p, p + E, p + 2 * E,
              taken, experts + t * k, weights + t * k, probs + t * E);
  free(p);
  free(taken);
  return TPX_OK;
}

/* One token's backward: dlogits[E] from the scores p[E] (f32 as route
 * saved them), the choice ex[k] and the weights' gradient g[k]. gp[E] is
 * scratch. */
static void backward_one(const tpx_moe_router_options *o, const float *p,
                         const int32_t *ex, const float *g, double *gp,
                         float *dl) {
  int64_t E = o->experts, k = o->top_k;
  for (int64_t e = 0; e < E; e++) gp[e] = 0;
  double sum = 0, gw = 0; /* S and sum_j g_j p_j */
  for (int64_t j = 0; j < k; j++) {
    sum += p[ex[j]];
    gw += (double)g[j] * p[ex[j]];
  }
  double scale = weight_scale(o, &sum);
  /* d w_j / d p_i = scale (delta_ij / S - p_j / S^2) under the norm */
  for (int64_t j = 0; j < k; j++)
    gp[ex[j]] += o->norm_topk_prob
                     ? scale * ((double)g[j] / sum - gw / (sum * sum))
                     : scale * (double)g[j];
  if (o->score == TPX_MOE_SOFTMAX) {
    double dot = 0; /* softmax: dl_a = p_a (gp_a - sum_b gp_b p_b) */
    for (int64_t e = 0; e < E; e++) dot += gp[e] * p[e];
    for (int64_t e = 0; e < E; e++) dl[e] = (float)(p[e] * (gp[e] - dot));
  } else {
    for (int64_t e = 0; e < E; e++)
      dl[e] = (float)(gp[e] * p[e] * (1.0 - p[e]));
  }
}

/* Token t's saved routing and the weights' gradient, as route left them:
 * expert indices in range and distinct, scores in [0, 1] (the chosen
 * ones not all 0 under softmax's renormalisation), finite gradients. */
static tpx_status check_saved(const tpx_moe_router_options *o, const float *p,
                              const int32_t *ex, const float *g, int64_t t,
                              const char *w, tpx_error *err) {
  int64_t E = o->experts, k = o->top_k;
  for (int64_t e = 0; e < E; e++)
    if (!(p[e] >= 0.0f && p[e] <= 1.0f))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: probs[%lld, %lld] = %g is not a score in "
                           "[0, 1] (tpx_moe_route's probs)",
                           w, (long long)t, (long long)e, (double)p[e]);
  double sum = 0;
  for (int64_t j = 0; j < k; j++) {
    if (ex[j] < 0 || ex[j] >= E)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: experts[%lld, %lld] = %d is not in 0..%lld", w,
                           (long long)t, (long long)j, (int)ex[j],
                           (long long)(E - 1));
    for (int64_t i = 0; i < j; i++)
      if (ex[i] == ex[j])
        return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                             "%s: experts[%lld, %lld] = %d repeats "
                             "experts[%lld, %lld] (a token's experts are "
                             "distinct)",
                             w, (long long)t, (long long)j, (int)ex[j],
                             (long long)t, (long long)i);
    if (!isfinite(g[j]))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: dweights[%lld, %lld] = %g is not finite", w,
                           (long long)t, (long long)j, (double)g[j]);
    sum += p[ex[j]];
  }
  if (o->score == TPX_MOE_SOFTMAX && o->norm_topk_prob && !(sum > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: token %lld: the probs of its experts sum to 0 "
                         "(softmax's renormalisation divides by it)",
                         w, (long long)t);
  return TPX_OK;
}

tpx_status tpx_moe_route_backward(const tpx_moe_router_options *opts,
                                  const float *probs, const int32_t *experts,
                                  const float *weights, const float *dweights,
                                  int64_t n, float *dlogits, tpx_error *err) {
  const char *w = "tpx_moe_route_backward";
  (void)weights; /* recomputed from probs, in double */
  TPX__TRY(check_tokens(opts, n, w, err));
  if (n > 0 && (!probs || !experts || !dweights || !dlogits))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !probs      ? "probs"
                         : !experts  ? "experts"
                         : !dweights ? "dweights"
                                     : "dlogits");
  int64_t E = opts->experts;
  for (int64_t t = 0; t < n; t++)
    TPX__TRY(check_saved(opts, probs + t * E, experts + t * opts->top_k,
                         dweights + t * opts->top_k, t, w, err));
  if (n == 0)
    return TPX_OK;
  double *gp = malloc(sizeof(double) * (size_t)E);
  if (!gp)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: scratch for %lld experts", w,
                         (long long)E);
  for (int64_t t = 0; t < n; t++)
    backward_one(opts, probs + t * E, experts + t * opts->top_k,
                 dweights + t * opts->top_k, gp, dlogits + t * E);
  free(gp);
  return TPX_OK;
}
