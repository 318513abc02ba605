/* tpx/runtime_moe.h — a mixture-of-experts layer at run time: the router,
 * and the token dispatch to the experts over the ep group and the combine
 * back, forward and backward (docs/RUNTIME.md "Mixture of experts").
 *
 * The trainer keeps the arithmetic of its experts: it computes the router
 * logits (a plain linear, x W_gate^T, in f32), asks tpx_moe_route for each
 * token's top-k experts and weights, hands the tokens to
 * tpx_moe_dispatch_create, runs each local expert's FFN on the rows it is
 * given (the fused [E_local, ...] parameters the runtime holds for it) and
 * hands the expert outputs to tpx_moe_combine, which weights them by the
 * routing probabilities, returns them to the ranks that own the tokens and
 * sums them per token. Shared experts are a plain MLP beside the routed
 * ones and stay the trainer's.
 *
 * Routing (tpx_moe_router_options), as the families define it:
 *  - softmax (Qwen3-MoE, Mixtral): p = softmax(logits) over all E experts;
 *    the top-k of p; weights = p of those, divided by their sum when
 *    norm_topk_prob.
 *  - sigmoid (DeepSeek-V3): s = sigmoid(logits); the choice is made on
 *    s + bias (e_score_correction_bias, which carries no gradient), in
 *    n_group groups of E / n_group experts of which the topk_group groups
 *    with the largest sum of their two best choice scores are eligible;
 *    the top-k eligible experts by choice score; weights = s of those (not
 *    s + bias), divided by their sum (+ 1e-20) when norm_topk_prob, times
 *    routed_scaling_factor.
 * Ties go to the lower expert index. The choice is not differentiated;
 * tpx_moe_route_backward carries the weights' gradient to the logits.
 *
 * Dispatch over ep: the ep group is the comm of this rank's "ep" dim of
 * the MoE mesh (tpx_sharding_moe_mesh; NULL or size 1: ep 1, every expert
 * local). Rank i of the group holds experts [i·E/ep, (i+1)·E/ep).
 *  - TPX_MOE_ALL_GATHER (Automodel's GroupedExperts default): the tokens
 *    and their routing are all-gathered over ep, each rank runs its experts
 *    on every gathered token routed to them, and the outputs are
 *    reduce-scattered back to the tokens' ranks (one row per token and
 *    choice, weighted and summed there). Backward: the output gradient
 *    is all-gathered, the input gradients reduce-scattered.
 *  - TPX_MOE_ALL_TO_ALL: each token row is sent only to the ranks holding
 *    its experts (counts exchanged first), and the outputs come back the
 *    same way; backward mirrors it.
 * Both give the same sums (each token's output is the sum of its k
 * weighted expert outputs, added in the order j = 0..k-1).
 *
 * Every call of the dispatch is collective over the ep group. Buffers are
 * f32, host memory (or the comm's memory space, tpx_comm_memspace). */
#ifndef TPX_RUNTIME_MOE_H
#define TPX_RUNTIME_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/comm.h"
#include "tpx/error.h"

TPX_BEGIN_DECLS

typedef enum tpx_moe_score {
  TPX_MOE_SOFTMAX = 0, /* Qwen3-MoE, Mixtral */
  TPX_MOE_SIGMOID = 1, /* DeepSeek-V3: with a correction bias, grouped */
} tpx_moe_score;

typedef struct tpx_moe_router_options {
  size_t struct_size;
  int64_t experts; /* E: routed experts, global (> 0) */
  int64_t top_k;   /* 1..E */
  tpx_moe_score score;
  int norm_topk_prob; /* divide the k weights by their sum */
  /* grouped top-k (sigmoid only): n_group divides E; 0 or 1 = one group */
  int64_t n_group, topk_group;
  /* multiplies the weights; 0 = 1.0 (sigmoid only) */
  double routed_scaling_factor;
} tpx_moe_router_options;

#define TPX_MOE_ROUTER_OPTIONS_INIT                                            \
  { sizeof(tpx_moe_router_options), 0, 0, TPX_MOE_SOFTMAX, 0, 0, 0, 0.0 }

/* Route n tokens: logits [n, E] (the gate's output), bias [E] (sigmoid's
 * e_score_correction_bias; NULL = none) -> experts[n, k] (int32, in the
 * order of decreasing choice score) and weights[n, k]; probs[n, E] gets
 * the scores (softmax p or sigmoid s) that backward needs.
 * TPX_INVALID_ARGUMENT naming the option at fault, or the token and expert
 * of a logit that is NaN or ±inf (never routed); a routing that succeeds
 * has k valid, distinct experts per token and finite weights. Local. */
TPX_API tpx_status tpx_moe_route(const tpx_moe_router_options *opts,
                                 const float *logits, const float *bias,
                                 int64_t n, int32_t *experts, float *weights,
                                 float *probs, tpx_error *err);
/* Its backward: dweights[n, k] -> dlogits[n, E] (overwritten), from the
 * probs and experts route saved. TPX_INVALID_ARGUMENT for what route
 * cannot have given (a repeated or out-of-range expert, a score outside
 * [0, 1]) and a non-finite dweights. Local. */
TPX_API tpx_status tpx_moe_route_backward(const tpx_moe_router_options *opts,
                                          const float *probs,
                                          const int32_t *experts,
                                          const float *weights,
                                          const float *dweights, int64_t n,
                                          float *dlogits, tpx_error *err);

typedef enum tpx_moe_dispatcher {
  TPX_MOE_ALL_GATHER = 0, /* Automodel's default */
  TPX_MOE_ALL_TO_ALL = 1,
} tpx_moe_dispatcher;

/* "all-gather" / "all-to-all"; NULL for an unknown value. */
TPX_API const char *tpx_moe_dispatcher_name(tpx_moe_dispatcher kind);
/* TPX_INVALID_ARGUMENT naming the choices. */
TPX_API tpx_status tpx_moe_dispatcher_parse(const char *name,
                                            tpx_moe_dispatcher *out,
                                            tpx_error *err);

typedef struct tpx_moe_dispatch_options {
  size_t struct_size;
  tpx_comm *ep;    /* the ep group; NULL = ep 1 */
  int64_t experts; /* E, global; divisible by the group's size */
  int64_t top_k;
  int64_t hidden; /* H: the width of a token row */
  tpx_moe_dispatcher kind;
} tpx_moe_dispatch_options;

#define TPX_MOE_DISPATCH_OPTIONS_INIT                                          \
  { sizeof(tpx_moe_dispatch_options), NULL, 0, 0, 0, TPX_MOE_ALL_GATHER }

/* One MoE layer's dispatch for one step: what combine and the backward
 * need. Owns its buffers (tpx_moe_dispatch_bytes says how many). */
typedef struct tpx_moe_dispatch tpx_moe_dispatch;

/* Dispatch this rank's n tokens x[n, H] with their routing experts[n, k],
 * weights[n, k] (tpx_moe_route's). n may differ between ranks, and may be
 * 0. Collective over ep. On return the rows for this rank's local experts
 * are tpx_moe_dispatch_rows. A rank's bad input (an expert index out of
 * range, a non-finite weight, n < 0, a NULL buffer) or options that differ
 * between the ranks: TPX_INVALID_ARGUMENT on every rank of the group (the
 * rank at fault naming its input, the others naming that rank), and the
 * comm stays usable. The four collective calls are clocked as
 * tpx_comm_time's moe_seconds (tpx/comm.h). */
TPX_API tpx_status tpx_moe_dispatch_create(const tpx_moe_dispatch_options *opts,
                                           const float *x,
                                           const int32_t *experts,
                                           const float *weights, int64_t n,
                                           tpx_moe_dispatch **out,
                                           tpx_error *err);
TPX_API void tpx_moe_dispatch_destroy(tpx_moe_dispatch *d);

/* The rows [m, H] this rank's experts run on, grouped by local expert:
 * expert e (0 .. E/ep - 1, global e + rank·E/ep) takes rows
 * offsets[e] .. offsets[e+1] - 1; offsets has E/ep + 1 entries and
 * offsets[E/ep] = m. Borrowed from d. */
TPX_API const float *tpx_moe_dispatch_rows(const tpx_moe_dispatch *d,
                                           int64_t *m, const int64_t **offsets);
/* Bytes d holds (its row buffers and bookkeeping). */
TPX_API size_t tpx_moe_dispatch_bytes(const tpx_moe_dispatch *d);

/* Combine: y[m, H] (the experts' outputs, row for row of
 * tpx_moe_dispatch_rows) -> out[n, H] (overwritten) on the tokens' ranks:
 * out[t] = sum over j of weights[t, j] · y[row of (t, j)]. Collective. */
TPX_API tpx_status tpx_moe_combine(tpx_moe_dispatch *d, const float *y,
                                   float *out, tpx_error *err);
/* Combine's backward: dout[n, H] -> dy[m, H] (the gradient of each expert
 * output row) and dweights[n, k] (of the routing weights, for
 * tpx_moe_route_backward), both overwritten; y as given to combine.
 * Collective. */
TPX_API tpx_status tpx_moe_combine_backward(tpx_moe_dispatch *d,
                                            const float *dout, const float *y,
                                            float *dy, float *dweights,
                                            tpx_error *err);
/* Dispatch's backward: dx_rows[m, H] (the gradient of the rows the experts
 * ran on) -> dx[n, H] (overwritten): each token's rows summed back on its
 * rank. Collective. */
TPX_API tpx_status tpx_moe_dispatch_backward(tpx_moe_dispatch *d,
                                             const float *dx_rows, float *dx,
                                             tpx_error *err);

TPX_END_DECLS

#endif
