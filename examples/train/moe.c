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

/* act[c, I] = silu(gate) * up, gate and up the halves of h[c, 2I]'s rows
 * (transformers' chunk(2, -1): gate first). */
static void swiglu_rows(const float *h, float *act, int64_t c, int64_t I) {
  TR_PARALLEL_FOR(c * I)
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < I; j++) {
      float g = h[i * 2 * I + j], u = h[i * 2 * I + I + j];
      float s = 1.0f / (1.0f + expf(-g));
      act[i * I + j] = g * s * u;
    }
}

static void swiglu_rows_bwd(const float *h, const float *dact, float *dh,
                            int64_t c, int64_t I) {
  TR_PARALLEL_FOR(c * I)
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < I; j++) {
      float g = h[i * 2 * I + j], u = h[i * 2 * I + I + j];
      float s = 1.0f / (1.0f + expf(-g)), dm = dact[i * I + j];
      dh[i * 2 * I + I + j] = dm * g * s;
      dh[i * 2 * I + j] = dm * u * s * (1.0f + g * (1.0f - s));
    }
}

/* Expert e's FFN on its c rows x[c, H]: h = x GU (Automodel's GU [H, 2I];
 * transformers' [2I, H] transposed), act, y = act DN (DN [I, H]; [H, I]
 * transposed). */
static void expert_fwd(const shape *s, int hf, const float *gu, const float *dn,
                       const float *x, float *h, float *act, float *y,
                       int64_t c) {
  int64_t H = s->H, I = s->I;
  if (hf)
    tr_sgemm(0, 1, c, 2 * I, H, 1.0f, x, H, gu, H, 0.0f, h, 2 * I);
  else
    tr_sgemm(0, 0, c, 2 * I, H, 1.0f, x, H, gu, 2 * I, 0.0f, h, 2 * I);
  swiglu_rows(h, act, c, I);
  if (hf)
    tr_sgemm(0, 1, c, H, I, 1.0f, act, I, dn, I, 0.0f, y, H);
  else
    tr_sgemm(0, 0, c, H, I, 1.0f, act, I, dn, H, 0.0f, y, H);
}

/* Its backward: dy[c, H] -> dx[c, H]; the weights' gradients added into
 * ggu, gdn; dact[c, I] and dh[c, 2I] scratch. */
static void expert_bwd(const shape *s, int hf, const float *gu, const float *dn,
                       const float *x, const float *h, const float *act,
                       const float *dy, float *dx, float *ggu, float *gdn,
                       float *dact, float *dh, int64_t c) {
  int64_t H = s->H, I = s->I;
  if (hf) {
    tr_sgemm(0, 0, c, I, H, 1.0f, dy, H, dn, I, 0.0f, dact, I);
    tr_sgemm(1, 0, H, I, c, 1.0f, dy, H, act, I, 1.0f, gdn, I);
  } else {
    tr_sgemm(0, 1, c, I, H, 1.0f, dy, H, dn, H, 0.0f, dact, I);
    tr_sgemm(1, 0, I, H, c, 1.0f, act, I, dy, H, 1.0f, gdn, H);
  }
  swiglu_rows_bwd(h, dact, dh, c, I);
  if (hf) {
    tr_sgemm(0, 0, c, H, 2 * I, 1.0f, dh, 2 * I, gu, H, 0.0f, dx, H);
    tr_sgemm(1, 0, 2 * I, H, c, 1.0f, dh, 2 * I, x, H, 1.0f, ggu, H);
  } else {
    tr_sgemm(0, 1, c, H, 2 * I, 1.0f, dh, 2 * I, gu, 2 * I, 0.0f, dx, H);
    tr_sgemm(1, 0, H, 2 * I, c, 1.0f, x, H, dh, 2 * I, 1.0f, ggu, 2 * I);
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
  float *logits;
  const float *rows;
  const int64_t *off;
  tr_moe_acts_release(a);
  a->n = s.n;
  CK(take(ar, &logits, s.n * s.E, err));
  CK(take(ar, &a->probs, s.n * s.E, err));
  CK(take(ar, (float **)&a->choice, s.n * s.k, err));
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
  const float *gu = tr_param_w(r, L->gate_up), *dn = tr_param_w(r, L->down);
  for (int64_t e = 0; e < s.El; e++) {
    int64_t r0 = off[e], c = off[e + 1] - off[e];
    if (c > 0)
      expert_fwd(&s, L->hf_experts, gu + e * s.H * 2 * s.I, dn + e * s.I * s.H,
                 rows + r0 * s.H, a->h + r0 * 2 * s.I, a->act + r0 * s.I,
                 a->y + r0 * s.H, c);
  }
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
  int64_t gsz = s->H * 2 * s->I, dsz = s->I * s->H;
  for (int64_t e = 0; e < s->El; e++) {
    int64_t r0 = off[e], c = off[e + 1] - off[e];
    if (c > 0)
      expert_bwd(s, L->hf_experts, gu + e * gsz, dn + e * dsz, rows + r0 * s->H,
                 a->h + r0 * 2 * s->I, a->act + r0 * s->I, dyr + r0 * s->H,
                 dxr + r0 * s->H, ggu + e * gsz, gdn + e * dsz,
                 dact + r0 * s->I, dh + r0 * 2 * s->I, c);
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
