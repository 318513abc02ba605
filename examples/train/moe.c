/* moe.c — an MoE layer's routed experts, forward and backward, through
 * tpx/runtime_moe.h: the router logits x W_gate^T (f32), tpx_moe_route,
 * the dispatch of the tokens over the ep group, each local expert's SwiGLU
 * FFN on the rows it is given (cblas on the fused [E/ep, ...] parameters,
 * Automodel's layout or transformers'), and the combine back; backward
 * through combine, the experts, the dispatch and the router to W_gate and
 * x. Buffers come from the arena; the dispatch handle (the library's) lives
 * from the forward to the end of the backward. Not the shared experts (a
 * plain MLP, model.c) nor tensor parallelism (MoE layers run at tp 1). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train.h"

#define CK(x)                                                                  \
  do {                                                                         \
    if ((st = (x)) != TPX_OK)                                                  \
      return st;                                                               \
  } while (0)

/* The sizes of one MoE layer on this rank. */
typedef struct shape {
  int64_t n, H, E, k, El, I;
} shape;

static shape shape_of(tr_rank *r, const tr_net *net, const tr_layer *L,
                      int64_t n) {
  shape s = {n,
             net->cfg.hidden,
             net->cfg.mc.router.experts,
             net->cfg.mc.router.top_k,
             tr_param_dim(r, L->gate_up, 0),
             0};
  s.I = tr_param_dim(r, L->gate_up, L->hf_experts ? 1 : 2) / 2;
  return s;
}

static tpx_status take(tr_arena *ar, float **p, int64_t n, tpx_error *err) {
  *p = tr_arena_floats(ar, n, 0, err);
  return *p ? TPX_OK : TPX_NO_MEMORY;
}

/* The experts run as one parallel region of the rank's team (tr_threads)
 * per pass, each thread's products on its own thread (tr_sgemm1): the
 * rows of all local experts, grouped by expert, cut in as many contiguous
 * parts as threads, each thread running every expert its part touches on
 * those rows; the weights' gradients (sums over an expert's rows) cut by
 * their own rows instead, every expert's alike. Either cut leaves each
 * element's sum in the order one thread gives it, so the results do not
 * depend on the thread count, and a layer's experts cost three regions
 * where one per product and expert had the team wait at a barrier
 * hundreds of times a step (docs/TRAIN.md "What it implements"). */

/* act[c, I] = silu(gate) * up, gate and up the halves of h[c, 2I]'s rows
 * (transformers' chunk(2, -1): gate first). */
static void swiglu_rows(const float *h, float *act, int64_t c, int64_t I) {
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < I; j++) {
      float g = h[i * 2 * I + j], u = h[i * 2 * I + I + j];
      float s = 1.0f / (1.0f + expf(-g));
      act[i * I + j] = g * s * u;
    }
}

static void swiglu_rows_bwd(const float *h, const float *dact, float *dh,
                            int64_t c, int64_t I) {
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < I; j++) {
      float g = h[i * 2 * I + j], u = h[i * 2 * I + I + j];
      float s = 1.0f / (1.0f + expf(-g)), dm = dact[i * I + j];
      dh[i * 2 * I + I + j] = dm * g * s;
      dh[i * 2 * I + j] = dm * u * s * (1.0f + g * (1.0f - s));
    }
}

/* The team for one pass over the m dispatched rows: threads by the
 * multiply-adds of the experts' forward. */
static int team(const shape *s, int64_t m) {
  return tr_threads(m * 3 * s->I * s->H);
}

/* Of the rows of expert e (off[e] .. off[e+1] - 1), those in thread t's
 * part of the m rows (nt contiguous parts): [*r0, *r1), maybe empty. */
static void part(const int64_t *off, int64_t e, int64_t m, int t, int nt,
                 int64_t *r0, int64_t *r1) {
  int64_t lo = m * t / nt, hi = m * (t + 1) / nt;
  *r0 = off[e] > lo ? off[e] : lo;
  *r1 = off[e + 1] < hi ? off[e + 1] : hi;
}

/* Expert e's FFN on c of its rows x[c, H]: h = x GU (Automodel's GU
 * [H, 2I]; transformers' [2I, H] transposed), act, y = act DN (DN [I, H];
 * [H, I] transposed). One thread. */
static void expert_fwd(const shape *s, int hf, const float *gu, const float *dn,
                       const float *x, float *h, float *act, float *y,
                       int64_t c) {
  int64_t H = s->H, I = s->I;
  if (hf)
    tr_sgemm1(0, 1, c, 2 * I, H, 1.0f, x, H, gu, H, 0.0f, h, 2 * I);
  else
    tr_sgemm1(0, 0, c, 2 * I, H, 1.0f, x, H, gu, 2 * I, 0.0f, h, 2 * I);
  swiglu_rows(h, act, c, I);
  if (hf)
    tr_sgemm1(0, 1, c, H, I, 1.0f, act, I, dn, I, 0.0f, y, H);
  else
    tr_sgemm1(0, 0, c, H, I, 1.0f, act, I, dn, H, 0.0f, y, H);
}

/* Every local expert's FFN on its rows, one region. */
static void experts_fwd(const shape *s, int hf, const float *gu,
                        const float *dn, const float *rows, const int64_t *off,
                        tr_moe_acts *a) {
  int64_t m = a->m, H = s->H, I = s->I;
  int nt = team(s, m);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int t = 0; t < nt; t++)
    for (int64_t e = 0; e < s->El; e++) {
      int64_t r0, r1;
      part(off, e, m, t, nt, &r0, &r1);
      if (r1 > r0)
        expert_fwd(s, hf, gu + e * H * 2 * I, dn + e * I * H, rows + r0 * H,
                   a->h + r0 * 2 * I, a->act + r0 * I, a->y + r0 * H, r1 - r0);
    }
}

/* Expert e's backward on c of its rows, all but its weights' gradients:
 * dy[c, H] -> dact[c, I], dh[c, 2I], dx[c, H]. One thread. */
static void expert_bwd_rows(const shape *s, int hf, const float *gu,
                            const float *dn, const float *h, const float *dy,
                            float *dx, float *dact, float *dh, int64_t c) {
  int64_t H = s->H, I = s->I;
  if (hf)
    tr_sgemm1(0, 0, c, I, H, 1.0f, dy, H, dn, I, 0.0f, dact, I);
  else
    tr_sgemm1(0, 1, c, I, H, 1.0f, dy, H, dn, H, 0.0f, dact, I);
  swiglu_rows_bwd(h, dact, dh, c, I);
  if (hf)
    tr_sgemm1(0, 0, c, H, 2 * I, 1.0f, dh, 2 * I, gu, H, 0.0f, dx, H);
  else
    tr_sgemm1(0, 1, c, H, 2 * I, 1.0f, dh, 2 * I, gu, 2 * I, 0.0f, dx, H);
}

/* g[R, C] += A^T B over c rows (A [c, R], B [c, C]): the rows [t R / nt,
 * (t+1) R / nt) of g, as tr_sgemm splits a product by rows. One thread. */
static void grad_part(int64_t R, int64_t C, int64_t c, const float *A,
                      const float *B, float *g, int t, int nt) {
  int64_t i0 = R * t / nt, i1 = R * (t + 1) / nt;
  tr_sgemm1(1, 0, i1 - i0, C, c, 1.0f, A + i0, R, B, C, 1.0f, g + i0 * C, C);
}

/* Expert e's weights' gradients, thread t's rows of each: gdn += dy^T act
 * (hf: [H, I]; else act^T dy, [I, H]), ggu += dh^T x (hf: [2I, H]; else
 * x^T dh, [H, 2I]). */
static void expert_grads(const shape *s, int hf, const float *x,
                         const float *act, const float *dy, const float *dh,
                         float *ggu, float *gdn, int64_t c, int t, int nt) {
  int64_t H = s->H, I = s->I;
  if (hf) {
    grad_part(H, I, c, dy, act, gdn, t, nt);
    grad_part(2 * I, H, c, dh, x, ggu, t, nt);
  } else {
    grad_part(I, H, c, act, dy, gdn, t, nt);
    grad_part(H, 2 * I, c, x, dh, ggu, t, nt);
  }
}

void tr_moe_acts_release(tr_moe_acts *a) {
  tpx_moe_dispatch_destroy(a->d);
  a->d = NULL;
}

tpx_status tr_moe_fwd(tr_net *net, tr_rank *r, tr_arena *ar, int64_t l,
                      const tr_act *x, tr_act *y, int keep, tpx_error *err) {
  const tr_layer *L = &net->params.layers[l];
  tr_moe_acts *a = &net->acts[l].moe;
  shape s = shape_of(r, net, L, x->b * x->s);
  tpx_status st;
  float *logits, *choice;
  const float *rows;
  const int64_t *off;
  tr_moe_acts_release(a);
  a->n = s.n;
  CK(take(ar, &logits, s.n * s.E, err));
  CK(take(ar, &a->probs, s.n * s.E, err));
  CK(take(ar, &choice, s.n * s.k, err)); /* int32, as wide as a float */
  a->choice = (int32_t *)choice;
  CK(take(ar, &a->weights, s.n * s.k, err));
  tr_linear_fwd(x->d, tr_param_w(r, L->router.w), NULL, logits, s.n, s.H, s.E);
  CK(tpx_moe_route(&net->cfg.mc.router, logits, L->score_bias, s.n, a->choice,
                   a->weights, a->probs, err));
  tpx_moe_dispatch_options o = TPX_MOE_DISPATCH_OPTIONS_INIT;
  o.ep = tr_rank_ep_comm(r);
  o.experts = s.E;
  o.top_k = s.k;
  o.hidden = s.H;
  o.kind = net->dispatcher;
  CK(tpx_moe_dispatch_create(&o, x->d, a->choice, a->weights, s.n, &a->d, err));
  rows = tpx_moe_dispatch_rows(a->d, &a->m, &off);
  CK(take(ar, &a->h, a->m * 2 * s.I, err));
  CK(take(ar, &a->act, a->m * s.I, err));
  CK(take(ar, &a->y, a->m * s.H, err));
  CK(tr_experts_hook(r, l, 0, 0, err));
  experts_fwd(&s, L->hf_experts, tr_param_w(r, L->gate_up),
              tr_param_w(r, L->down), rows, off, a);
  CK(tr_experts_hook(r, l, 0, 1, err));
  CK(tr_act_alloc(ar, y, x->b, x->s, s.H, 0, err));
  CK(tpx_moe_combine(a->d, a->y, y->d, err));
  if (!keep)
    tr_moe_acts_release(a);
  return TPX_OK;
}

/* The experts' backward: dyr[m, H] (each row's output gradient) ->
 * dxr[m, H] (its input's), with their weights' gradients, inside the
 * experts' FSDP hooks. */
static tpx_status experts_bwd(tr_net *net, tr_rank *r, tr_arena *ar, int64_t l,
                              const shape *s, const float *dyr, float *dxr,
                              tpx_error *err) {
  const tr_layer *L = &net->params.layers[l];
  tr_moe_acts *a = &net->acts[l].moe;
  tpx_status st;
  int64_t m;
  const int64_t *off;
  float *dact, *dh;
  const float *rows = tpx_moe_dispatch_rows(a->d, &m, &off);
  CK(take(ar, &dact, m * s->I, err));
  CK(take(ar, &dh, m * 2 * s->I, err));
  CK(tr_experts_hook(r, l, 1, 0, err));
  const float *gu = tr_param_w(r, L->gate_up), *dn = tr_param_w(r, L->down);
  float *ggu = tr_param_g(r, L->gate_up), *gdn = tr_param_g(r, L->down);
  int64_t H = s->H, I = s->I, gsz = H * 2 * I, dsz = I * H;
  int hf = L->hf_experts, nt = team(s, m);
  /* the rows' part first (dh is the weights' gradients' input), then the
   * weights' gradients */
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int t = 0; t < nt; t++)
    for (int64_t e = 0; e < s->El; e++) {
      int64_t r0, r1;
      part(off, e, m, t, nt, &r0, &r1);
      if (r1 > r0)
        expert_bwd_rows(s, hf, gu + e * gsz, dn + e * dsz, a->h + r0 * 2 * I,
                        dyr + r0 * H, dxr + r0 * H, dact + r0 * I,
                        dh + r0 * 2 * I, r1 - r0);
    }
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int t = 0; t < nt; t++)
    for (int64_t e = 0; e < s->El; e++) {
      int64_t r0 = off[e], c = off[e + 1] - off[e];
      if (c > 0)
        expert_grads(s, hf, rows + r0 * H, a->act + r0 * I, dyr + r0 * H,
                     dh + r0 * 2 * I, ggu + e * gsz, gdn + e * dsz, c, t, nt);
    }
  return tr_experts_hook(r, l, 1, 1, err);
}

tpx_status tr_moe_bwd(tr_net *net, tr_rank *r, tr_arena *ar, int64_t l,
                      const tr_act *x, const tr_act *dy, tr_act *dx,
                      tpx_error *err) {
  const tr_layer *L = &net->params.layers[l];
  tr_moe_acts *a = &net->acts[l].moe;
  shape s = shape_of(r, net, L, a->n);
  size_t mark = tr_arena_mark(ar);
  tpx_status st;
  float *dyr, *dw, *dxr, *dxt, *dlogits;
  if (!a->d)
    return tpx_error_set(err, TPX_INTERNAL,
                         "layer %lld: MoE backward without its forward",
                         (long long)l);
  CK(take(ar, &dyr, a->m * s.H, err));
  CK(take(ar, &dw, s.n * s.k, err));
  CK(take(ar, &dxr, a->m * s.H, err));
  CK(tpx_moe_combine_backward(a->d, dy->d, a->y, dyr, dw, err));
  CK(experts_bwd(net, r, ar, l, &s, dyr, dxr, err));
  CK(take(ar, &dlogits, s.n * s.E, err));
  CK(take(ar, &dxt, s.n * s.H, err));
  CK(tpx_moe_dispatch_backward(a->d, dxr, dxt, err));
  CK(tpx_moe_route_backward(&net->cfg.mc.router, a->probs, a->choice,
                            a->weights, dw, s.n, dlogits, err));
  /* the router: dx += dlogits W_gate, dW_gate += dlogits^T x */
  tr_linear_bwd(x->d, tr_param_w(r, L->router.w), dlogits, dxt,
                tr_param_g(r, L->router.w), NULL, s.n, s.H, s.E, 1);
  tr_moe_acts_release(a);
  if (dx->d) {
    int64_t n = s.n * s.H;
    TR_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; i++) dx->d[i] += dxt[i];
    tr_arena_pop(ar, mark);
    return TPX_OK;
  }
  *dx = *x;
  dx->flow = x->flow;
  dx->d = tr_arena_lower(ar, mark, dxt, s.n * s.H, err);
  return dx->d ? TPX_OK : TPX_NO_MEMORY;
}

tpx_status tr_moe_load_buffers(tr_net *net, const tpx_checkpoint_reader *rd,
                               tpx_error *err) {
  const tr_config *c = &net->cfg;
  int64_t E = c->mc.router.experts;
  if (!c->moe || c->mc.router.score != TPX_MOE_SIGMOID)
    return TPX_OK;
  for (int64_t l = 0; l < c->layers; l++) {
    tr_layer *L = &net->params.layers[l];
    char name[160];
    if (!L->moe)
      continue;
    snprintf(name, sizeof name,
             "model.layers.%lld.mlp.gate.e_score_correction_bias",
             (long long)l);
    int64_t t = tpx_checkpoint_find(rd, name);
    if (t < 0)
      return tpx_error_set(err, TPX_NOT_FOUND,
                           "the checkpoint lacks '%s' (%s's router bias)", name,
                           c->arch);
    tpx_slice box = {.ndim = 1};
    box.length[0] = E;
    tpx_status st =
        tpx_checkpoint_read_slice(rd, t, &box, TPX_DTYPE_F32, L->score_bias,
                                  sizeof(float) * (size_t)E, err);
    if (st)
      return st;
  }
  return TPX_OK;
}
