/* rt_model_cases.c — case_mlp_block and case_head_chain (rt_cases.h):
 * pieces of a decoder run through the sharding's transitions, embedding and
 * loss, against single-rank references in double precision. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

/* case_mlp_block's reference, full and in double: the inputs (x, the
 * output gradient R, the weights W1, W2 and the norm weight g), the
 * activations and every gradient. */
typedef struct mlp_ref {
  double *x, *R, *W1, *W2, *g, *n, *u, *y, *du, *dn, *dx, *dW1, *dW2, *dg;
} mlp_ref;

static void mlp_ref_compute(mlp_ref *r, int64_t BT, int64_t H, int64_t I) {
  double *x = r->x = malloc((size_t)(BT * H) * sizeof *x);
  double *R = r->R = malloc((size_t)(BT * H) * sizeof *R);
  double *W1 = r->W1 = malloc((size_t)(I * H) * sizeof *W1);
  double *W2 = r->W2 = malloc((size_t)(H * I) * sizeof *W2);
  double *g = r->g = malloc((size_t)H * sizeof *g);
  double *n = r->n = calloc((size_t)(BT * H), sizeof *n);
  double *u = r->u = calloc((size_t)(BT * I), sizeof *u);
  double *y = r->y = calloc((size_t)(BT * H), sizeof *y);
  double *du = r->du = calloc((size_t)(BT * I), sizeof *du);
  double *dn = r->dn = calloc((size_t)(BT * H), sizeof *dn);
  double *dx = r->dx = calloc((size_t)(BT * H), sizeof *dx);
  double *dW1 = r->dW1 = calloc((size_t)(I * H), sizeof *dW1);
  double *dW2 = r->dW2 = calloc((size_t)(H * I), sizeof *dW2);
  double *dg = r->dg = calloc((size_t)H, sizeof *dg);
  for (int64_t i = 0; i < BT * H; i++)
    x[i] = rtu_rval(i, 1), R[i] = rtu_rval(i, 2);
  for (int64_t i = 0; i < I * H; i++)
    W1[i] = rtu_rval(i, 3), W2[i] = rtu_rval(i, 4);
  for (int64_t i = 0; i < H; i++) g[i] = 1.0 + rtu_rval(i, 5);
  for (int64_t t = 0; t < BT; t++) {
    for (int64_t h = 0; h < H; h++) n[t * H + h] = x[t * H + h] * g[h];
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t h = 0; h < H; h++) s += n[t * H + h] * W1[i * H + h];
      u[t * I + i] = s;
    }
    for (int64_t h = 0; h < H; h++) {
      double s = x[t * H + h];
      for (int64_t i = 0; i < I; i++) s += u[t * I + i] * W2[h * I + i];
      y[t * H + h] = s;
    }
    /* backward: dy = R */
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t h = 0; h < H; h++) s += R[t * H + h] * W2[h * I + i];
      du[t * I + i] = s;
    }
    for (int64_t h = 0; h < H; h++) {
      double s = 0;
      for (int64_t i = 0; i < I; i++) s += du[t * I + i] * W1[i * H + h];
      dn[t * H + h] = s;
      dx[t * H + h] = R[t * H + h] + s * g[h];
      dg[h] += s * x[t * H + h];
    }
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < I; i++) {
        dW2[h * I + i] += R[t * H + h] * u[t * I + i];
        dW1[i * H + h] += du[t * I + i] * n[t * H + h];
      }
  }
}

static void mlp_ref_free(mlp_ref *r) {
  free(r->x), free(r->R), free(r->W1), free(r->W2), free(r->g), free(r->n);
  free(r->u), free(r->y), free(r->du), free(r->dn), free(r->dx);
  free(r->dW1), free(r->dW2), free(r->dg);
}

/* case_head_chain's reference, full and in double: token ids and targets
 * (one ignored), embedding E, lm_head W, norm weight g, the mean loss and
 * the gradients. */
typedef struct head_ref {
  int64_t *ids, *tg;
  double *E, *W, *g, *dE, *dW, *dg, *z;
  double loss;
} head_ref;

static void head_ref_compute(head_ref *r, int64_t BT, int64_t V, int64_t H) {
  int64_t *ids = r->ids = malloc((size_t)BT * sizeof *ids);
  int64_t *tg = r->tg = malloc((size_t)BT * sizeof *tg);
  for (int64_t i = 0; i < BT; i++) {
    ids[i] = (i * 389 + 3) % V;
    tg[i] = i == 4 ? -100 : (i * 613 + 11) % V;
  }
  double *E = r->E = malloc((size_t)(V * H) * sizeof *E);
  double *W = r->W = malloc((size_t)(V * H) * sizeof *W);
  double *g = r->g = malloc((size_t)H * sizeof *g);
  for (int64_t i = 0; i < V * H; i++)
    E[i] = (double)(float)rtu_rval(i, 31),
    W[i] = (double)(float)rtu_rval(i, 32);
  for (int64_t i = 0; i < H; i++) g[i] = (double)(float)(1.0 + rtu_rval(i, 33));
  double *dE = r->dE = calloc((size_t)(V * H), sizeof *dE);
  double *dW = r->dW = calloc((size_t)(V * H), sizeof *dW);
  double *dg = r->dg = calloc((size_t)H, sizeof *dg);
  double *z = r->z = malloc((size_t)V * sizeof *z);
  r->loss = 0;
  int64_t cnt = 0;
  for (int64_t t = 0; t < BT; t++) cnt += tg[t] >= 0;
  for (int64_t t = 0; t < BT; t++) {
    const double *h = E + ids[t] * H;
    double mx = -INFINITY, s = 0;
    for (int64_t v = 0; v < V; v++) {
      double acc = 0;
      for (int64_t k = 0; k < H; k++) acc += h[k] * g[k] * W[v * H + k];
      z[v] = (double)(float)acc;
      mx = fmax(mx, z[v]);
    }
    for (int64_t v = 0; v < V; v++) s += exp(z[v] - mx);
    if (tg[t] < 0)
      continue;
    r->loss += (mx + log(s) - z[tg[t]]) / (double)cnt;
    for (int64_t v = 0; v < V; v++) {
      double dz = (exp(z[v] - mx) / s - (v == tg[t])) / (double)cnt;
      for (int64_t k = 0; k < H; k++) {
        dW[v * H + k] += dz * h[k] * g[k];
        double dn = dz * W[v * H + k];
        dg[k] += dn * h[k];
        dE[ids[t] * H + k] += dn * g[k];
      }
    }
  }
}

static void head_ref_free(head_ref *r) {
  free(r->ids), free(r->tg), free(r->E), free(r->W), free(r->g);
  free(r->dE), free(r->dW), free(r->dg), free(r->z);
}

/* The norm's backward (y = x * g per channel) over n elements: dg += dy * x
 * per channel, dx = dy * g. */
static void norm_bwd(tpx_error *err, const char *what, const tpx_tensor *dy,
                     const tpx_tensor *x, const double *g, int64_t H, int64_t n,
                     tpx_tensor *dg, tpx_tensor *dx) {
  if (tpx_tensor_numel(dy) != n) {
    rtu_failed(err, "%s: norm output grad has %lld elements, x has %lld", what,
               (long long)tpx_tensor_numel(dy), (long long)n);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    float d = ((const float *)dy->data)[i];
    ((float *)dg->data)[i % H] += d * ((const float *)x->data)[i];
    ((float *)dx->data)[i] = d * (float)g[i % H];
  }
}

/* This rank's box `s` of the full double tensor (shape[ndim]), in a new
 * array (never of size 0). */
static double *box_of(const double *full, const int64_t *shape, int ndim,
                      const tpx_slice *s) {
  int64_t n = tpx_slice_numel(s);
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  rtu_box_get(full, shape, ndim, s, v);
  return v;
}

/* The same box as a new f32 tensor of the box's shape. */
static tpx_tensor box_tensor(const double *full, const int64_t *shape, int ndim,
                             const tpx_slice *s) {
  double *v = box_of(full, shape, ndim, s);
  tpx_tensor t = rtu_talloc(TPX_DTYPE_F32, ndim, s->length);
  for (int64_t i = 0; i < tpx_slice_numel(s); i++)
    ((float *)t.data)[i] = (float)v[i];
  free(v);
  return t;
}

/* A residual sum a + b (both the box sx of the activation shape[3])
 * against the reference `full`; `what` names it. */
static void cmp_sum(blk *b, const char *what, const tpx_tensor *x,
                    const tpx_tensor *y, const double *full,
                    const int64_t *shape, const tpx_slice *sx) {
  int64_t n = tpx_slice_numel(sx);
  if (tpx_tensor_numel(y) != n) {
    rtu_failed(b->err, "block: %s: %lld elements, the residual has %lld", what,
               (long long)tpx_tensor_numel(y), (long long)n);
    return;
  }
  double *ref = box_of(full, shape, 3, sx);
  float *sum = malloc((size_t)(n ? n : 1) * sizeof *sum);
  for (int64_t i = 0; i < n; i++)
    sum[i] = ((const float *)x->data)[i] + ((const float *)y->data)[i];
  rtu_cmp(b, what, sum, ref, n);
  free(sum);
  free(ref);
}

/* All-reduce a replicated parameter's gradient over tp (`what` names the
 * step in a failure). */
static void grad_allreduce(blk *b, const char *what, int64_t p,
                           tpx_tensor *grad) {
  tpx_error e = {0};
  rtu_sim sm;
  RTU_SIM(&sm, b->mc, grad);
  tpx_status st = tpx_tp_param_grad_allreduce(b->sh, b->mc, p, grad, &e);
  rtu_sim_end(&sm, b->me);
  if (st != TPX_OK)
    rtu_lib_failed(b->err, what, &e);
}

/* The norm's forward (y = x * g per channel), into a new tensor. */
static tpx_tensor norm_fwd(const tpx_tensor *x, const double *g, int64_t H) {
  tpx_tensor y = rtu_talloc(TPX_DTYPE_F32, 3, x->shape);
  for (int64_t i = 0; i < tpx_tensor_numel(&y); i++)
    ((float *)y.data)[i] = ((const float *)x->data)[i] * (float)g[i % H];
  return y;
}

tpx_status case_mlp_block(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  blk b = {a->sh, NULL, tpx_comm_rank(world), err, 1};
  tpx_status st =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(a->sh), &b.mc, err);
  if (st != TPX_OK)
    return st;
  const tpx_sharding *sh = a->sh;
  int64_t m_norm =
      rtu_find_module(sh, "model.layers.0.post_attention_layernorm");
  int64_t m_up = rtu_find_module(sh, "model.layers.0.mlp.up_proj");
  int64_t m_down = rtu_find_module(sh, "model.layers.0.mlp.down_proj");
  tpx_slice s_w1, s_w2, s_g;
  int64_t g_w1[2], g_w2[2], g_g[1];
  rtu_param_box(&b, "model.layers.0.mlp.up_proj.weight", &s_w1, g_w1);
  rtu_param_box(&b, "model.layers.0.mlp.down_proj.weight", &s_w2, g_w2);
  int64_t p_g = rtu_param_box(
      &b, "model.layers.0.post_attention_layernorm.weight", &s_g, g_g);
  if (!b.ok || m_norm < 0 || m_up < 0 || m_down < 0) {
    tpx_mesh_comm_destroy(b.mc);
    return rtu_failed(err, "block: model lacks the layer-0 MLP modules");
  }
  const int64_t B = 2, T = a->T, H = g_w1[1], I = g_w1[0];
  const int64_t BT = B * T;
  /* ---- reference, full, double ---- */
  mlp_ref rf;
  mlp_ref_compute(&rf, BT, H, I);
  const double *x = rf.x, *R = rf.R, *W1 = rf.W1, *W2 = rf.W2, *g = rf.g;
  const double *y = rf.y, *dx = rf.dx, *dW1 = rf.dW1, *dW2 = rf.dW2;
  /* ---- the TP run ---- */
  int64_t shapeH[3] = {B, T, H}, shapeI[3] = {B, T, I};
  const tpx_transition *ntr = NULL;
  tpx_error e = {0};
  int norm_styled = tpx_sharding_module_entry(sh, m_norm) >= 0 &&
                    tpx_tp_transition_get(sh, m_norm, TPX_TRANSITION_INPUT, 0,
                                          &ntr, &e) == TPX_OK &&
                    ntr != NULL;
  /* The residual stream: sequence-sharded DTensor under SP, else plain
   * replicated. */
  tpx_placement Lx = norm_styled ? ntr->from : tpx_placement_replicate();
  tpx_slice sx;
  rtu_act_slice(sh, b.me, Lx, shapeH, 3, &sx, &e);
  int64_t nx = tpx_slice_numel(&sx);
  tpx_tensor tx = box_tensor(x, shapeH, 3, &sx);
  /* local params */
  int64_t nl1 = tpx_slice_numel(&s_w1), nl2 = tpx_slice_numel(&s_w2);
  double *w1l = box_of(W1, g_w1, 2, &s_w1), *w2l = box_of(W2, g_w2, 2, &s_w2);
  int64_t Il = s_w1.length[0];
  if (s_w2.length[1] != Il || s_w1.length[1] != H || s_w2.length[0] != H)
    rtu_failed(err, "block: unexpected local weight boxes");
  (void)s_g;
  /* norm forward */
  tpx_tensor nin = tx, nloc, nout, upin, uout, dnin;
  if (norm_styled)
    rtu_xrun(&b, m_norm, TPX_TRANSITION_INPUT, 0, &Lx, shapeH, &tx, &nin);
  nloc = norm_fwd(&nin, g, H);
  tpx_placement n_to;
  int n_dt = 0;
  if (norm_styled) {
    rtu_xrun(&b, m_norm, TPX_TRANSITION_OUTPUT, 0, NULL, shapeH, &nloc, &nout);
    const tpx_transition *otr;
    tpx_tp_transition_get(sh, m_norm, TPX_TRANSITION_OUTPUT, 0, &otr, &e);
    n_to = otr->to;
    n_dt = tpx_tp_output_keeps_dtensor(sh, m_norm, 0);
  } else {
    nout = nloc;
  }
  /* up_proj: input transition, local matmul, output transition */
  const tpx_placement *up_arr = n_dt ? &n_to : NULL;
  rtu_xrun(&b, m_up, TPX_TRANSITION_INPUT, 0, up_arr, shapeH, &nout, &upin);
  int64_t ul_shape[3] = {B, T, Il};
  tpx_tensor ul = rtu_talloc(TPX_DTYPE_F32, 3, ul_shape);
  const float *fn = upin.data;
  if (tpx_tensor_numel(&upin) != BT * H)
    rtu_failed(err, "block: up_proj input is not the full activation");
  else
    rtu_lin_fwd(fn, w1l, BT, Il, H, ul.data);
  rtu_xrun(&b, m_up, TPX_TRANSITION_OUTPUT, 0, NULL, shapeI, &ul, &uout);
  /* down_proj */
  tpx_placement up_to;
  const tpx_transition *utr;
  tpx_tp_transition_get(sh, m_up, TPX_TRANSITION_OUTPUT, 0, &utr, &e);
  up_to = utr ? utr->to : tpx_placement_shard(-1);
  int u_dt = tpx_tp_output_keeps_dtensor(sh, m_up, 0);
  tpx_tensor din, pl, yo;
  rtu_xrun(&b, m_down, TPX_TRANSITION_INPUT, 0, u_dt ? &up_to : NULL, shapeI,
           &uout, &din);
  pl = rtu_talloc(TPX_DTYPE_F32, 3, shapeH);
  if (tpx_tensor_numel(&din) == BT * Il)
    rtu_lin_fwd(din.data, w2l, BT, H, Il, pl.data);
  rtu_xrun(&b, m_down, TPX_TRANSITION_OUTPUT, 0, NULL, shapeH, &pl, &yo);
  /* residual: y = x + out, both in Lx */
  cmp_sum(&b, "y", &tx, &yo, y, shapeH, &sx);
  /* ---- backward ---- */
  tpx_tensor tdy = box_tensor(R, shapeH, 3, &sx);
  tpx_tensor dp, du1, du2, du3;
  rtu_xrun(&b, m_down, TPX_TRANSITION_OUTPUT, 1, NULL, shapeH, &tdy, &dp);
  du1 = rtu_talloc(TPX_DTYPE_F32, 3, ul_shape);
  float *dw2 = calloc((size_t)(nl2 ? nl2 : 1), sizeof *dw2);
  if (tpx_tensor_numel(&dp) == BT * H)
    rtu_lin_bwd(dp.data, din.data, w2l, BT, H, Il, du1.data, dw2);
  else
    rtu_failed(err, "block: down_proj output grad is not the full activation");
  rtu_xrun(&b, m_down, TPX_TRANSITION_INPUT, 1, u_dt ? &up_to : NULL, shapeI,
           &du1, &du2);
  rtu_xrun(&b, m_up, TPX_TRANSITION_OUTPUT, 1, NULL, shapeI, &du2, &du3);
  tpx_tensor dnp = rtu_talloc(TPX_DTYPE_F32, 3, shapeH);
  float *dw1 = calloc((size_t)(nl1 ? nl1 : 1), sizeof *dw1);
  if (tpx_tensor_numel(&du3) == BT * Il)
    rtu_lin_bwd(du3.data, fn, w1l, BT, Il, H, dnp.data, dw1);
  tpx_tensor dn1, dnl, dxn2;
  rtu_xrun(&b, m_up, TPX_TRANSITION_INPUT, 1, up_arr, shapeH, &dnp, &dn1);
  if (norm_styled)
    rtu_xrun(&b, m_norm, TPX_TRANSITION_OUTPUT, 1, NULL, shapeH, &dn1, &dnl);
  else
    dnl = dn1;
  /* norm backward: dg (partial under SP) and dx */
  int64_t H1[1] = {H};
  tpx_tensor tdg = rtu_talloc(TPX_DTYPE_F32, 1, H1);
  tpx_tensor dxn = rtu_talloc(TPX_DTYPE_F32, 3, dnl.shape);
  norm_bwd(err, "block", &dnl, &nin, g, H, nx, &tdg, &dxn);
  dnin = dxn;
  if (norm_styled)
    rtu_xrun(&b, m_norm, TPX_TRANSITION_INPUT, 1, &Lx, shapeH, &dxn, &dxn2);
  else
    dxn2 = dxn;
  grad_allreduce(&b, "block: norm grad all-reduce", p_g, &tdg);
  (void)dnin;
  /* ---- compare ---- */
  double *ref = malloc((size_t)(BT * H + I * H) * sizeof *ref);
  cmp_sum(&b, "dx", &tdy, &dxn2, dx, shapeH, &sx);
  rtu_cmp(&b, "d norm weight", tdg.data, rf.dg, H);
  rtu_box_get(dW1, g_w1, 2, &s_w1, ref);
  rtu_cmp(&b, "d up_proj.weight", dw1, ref, nl1);
  rtu_box_get(dW2, g_w2, 2, &s_w2, ref);
  rtu_cmp(&b, "d down_proj.weight", dw2, ref, nl2);
  /* ---- free ---- */
  if (norm_styled)
    free(nin.data), free(nout.data), free(dnl.data), free(dxn2.data);
  free(nloc.data), free(upin.data), free(ul.data), free(uout.data);
  free(din.data), free(pl.data), free(yo.data), free(tdy.data);
  free(dp.data), free(du1.data), free(du2.data), free(du3.data);
  free(dnp.data), free(dn1.data), free(tdg.data), free(dxn.data);
  free(tx.data), free(dw1), free(dw2), free(ref), free(w1l), free(w2l);
  mlp_ref_free(&rf);
  tpx_mesh_comm_destroy(b.mc);
  return err->status;
}

/* ---- the head chain: embedding -> final norm -> lm_head -> loss --------- */

/* The embedding's forward of `ids` (shape is[2]) over this rank's table
 * te: the hidden states, in a new tensor. */
static tpx_tensor emb_forward(blk *b, int64_t m, tpx_tensor *ids,
                              tpx_tensor *te, const int64_t *is) {
  tpx_error e = {0};
  int64_t hloc[3];
  if (tpx_tp_embedding_shape(b->sh, m, b->me, is, 2, hloc, NULL, &e) != TPX_OK)
    rtu_lib_failed(b->err, "head: embedding shape", &e);
  tpx_tensor th = rtu_talloc(TPX_DTYPE_F32, 3, hloc);
  e = (tpx_error){0};
  rtu_sim sm;
  RTU_SIM(&sm, b->mc, ids, te, &th);
  tpx_status st = tpx_tp_embedding_forward(b->sh, b->mc, m, ids, te, &th, &e);
  rtu_sim_end(&sm, b->me);
  if (st != TPX_OK)
    rtu_lib_failed(b->err, "head: embedding forward", &e);
  return th;
}

tpx_status case_head_chain(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  blk b = {a->sh, NULL, tpx_comm_rank(world), err, 1};
  tpx_status st =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(a->sh), &b.mc, err);
  if (st != TPX_OK)
    return st;
  const tpx_sharding *sh = a->sh;
  int64_t m_emb = rtu_find_module(sh, "model.embed_tokens");
  int64_t m_norm = rtu_find_module(sh, "model.norm");
  int64_t m_lm = rtu_find_module(sh, "lm_head");
  tpx_slice s_e, s_w, s_g;
  int64_t g_e[2], g_w[2], g_g[1];
  rtu_param_box(&b, "model.embed_tokens.weight", &s_e, g_e);
  rtu_param_box(&b, "lm_head.weight", &s_w, g_w);
  int64_t p_g = rtu_param_box(&b, "model.norm.weight", &s_g, g_g);
  if (!b.ok) {
    tpx_mesh_comm_destroy(b.mc);
    return err->status;
  }
  const int64_t B = 2, T = a->T, H = g_e[1], V = g_e[0], BT = B * T;
  tpx_tp_loss_options o = TPX_TP_LOSS_OPTIONS_INIT;
  o.vocab = V;
  o.vocab_parallel = tpx_sharding_module_entry(sh, m_lm) >= 0;
  int64_t voff, vlen;
  tpx_error e = {0};
  tpx_tp_vocab_range(sh, b.me, &o, &voff, &vlen, &e);
  if (s_w.offset[0] != voff || s_w.length[0] != vlen)
    rtu_failed(err,
               "head: lm_head rows [%lld, +%lld) vs vocab range [%lld, +%lld)",
               (long long)s_w.offset[0], (long long)s_w.length[0],
               (long long)voff, (long long)vlen);
  /* ---- reference ---- */
  head_ref rf;
  head_ref_compute(&rf, BT, V, H);
  int64_t *ids = rf.ids, *tg = rf.tg;
  const double *E = rf.E, *W = rf.W, *g = rf.g, loss = rf.loss;
  /* ---- TP ---- */
  int64_t is[2] = {B, T}, shapeH[3] = {B, T, H}, shapeV[3] = {B, T, V};
  tpx_tensor tids = tpx_tensor_make(ids, TPX_DTYPE_I64, 2, is);
  tpx_tensor ttg = tpx_tensor_make(tg, TPX_DTYPE_I64, 2, is);
  int64_t ne = tpx_slice_numel(&s_e), nw = tpx_slice_numel(&s_w);
  double *wl = box_of(W, g_w, 2, &s_w);
  tpx_tensor te = box_tensor(E, g_e, 2, &s_e);
  tpx_tensor th = emb_forward(&b, m_emb, &tids, &te, is);
  /* h's layout and whether it is a DTensor */
  const tpx_transition *etr = NULL, *ntr = NULL;
  tpx_placement Lh = tpx_placement_replicate(), n_to = Lh;
  if (tpx_sharding_module_entry(sh, m_emb) >= 0 &&
      tpx_tp_transition_get(sh, m_emb, TPX_TRANSITION_OUTPUT, 0, &etr, &e) ==
          TPX_OK &&
      etr)
    Lh = etr->to;
  int h_dt = tpx_tp_output_keeps_dtensor(sh, m_emb, 0);
  int norm_styled = tpx_sharding_module_entry(sh, m_norm) >= 0 &&
                    tpx_tp_transition_get(sh, m_norm, TPX_TRANSITION_OUTPUT, 0,
                                          &ntr, &e) == TPX_OK &&
                    ntr;
  tpx_tensor nin = th, nout, lin, lout;
  if (norm_styled)
    rtu_xrun(&b, m_norm, TPX_TRANSITION_INPUT, 0, h_dt ? &Lh : NULL, shapeH,
             &th, &nin);
  tpx_tensor nloc = norm_fwd(&nin, g, H);
  int64_t nn = tpx_tensor_numel(&nloc);
  int n_dt = 0;
  if (norm_styled) {
    rtu_xrun(&b, m_norm, TPX_TRANSITION_OUTPUT, 0, NULL, shapeH, &nloc, &nout);
    n_to = ntr->to;
    n_dt = tpx_tp_output_keeps_dtensor(sh, m_norm, 0);
  } else {
    nout = nloc;
    n_to = Lh;
    n_dt = h_dt;
  }
  const tpx_placement *lm_arr = n_dt ? &n_to : NULL;
  rtu_xrun(&b, m_lm, TPX_TRANSITION_INPUT, 0, lm_arr, shapeH, &nout, &lin);
  int64_t zl_shape[3] = {B, T, vlen};
  tpx_tensor zl = rtu_talloc(TPX_DTYPE_F32, 3, zl_shape);
  if (tpx_tensor_numel(&lin) == BT * H)
    rtu_lin_fwd(lin.data, wl, BT, vlen, H, zl.data);
  else
    rtu_failed(err, "head: lm_head input is not the full activation");
  rtu_xrun(&b, m_lm, TPX_TRANSITION_OUTPUT, 0, NULL, shapeV, &zl, &lout);
  tpx_tensor dz = rtu_talloc(TPX_DTYPE_F32, 3, zl_shape);
  double got_loss = 0;
  e = (tpx_error){0};
  rtu_sim sm;
  RTU_SIM(&sm, b.mc, &lout, &ttg, &dz);
  tpx_status hst =
      tpx_tp_cross_entropy_mean(sh, b.mc, &o, &lout, &ttg, &dz, &got_loss, &e);
  rtu_sim_end(&sm, b.me);
  if (hst != TPX_OK)
    rtu_lib_failed(err, "head: cross entropy", &e);
  if (!(fabs(got_loss - loss) <= 1e-5 * fabs(loss)))
    rtu_failed(err, "head: loss %.9g, want %.9g", got_loss, loss);
  /* backward */
  tpx_tensor dz2, dnp, dn1, dnl, dh, dh2;
  rtu_xrun(&b, m_lm, TPX_TRANSITION_OUTPUT, 1, NULL, shapeV, &dz, &dz2);
  dnp = rtu_talloc(TPX_DTYPE_F32, 3, shapeH);
  float *dwl = calloc((size_t)(nw + 1), sizeof *dwl);
  if (tpx_tensor_numel(&lin) == BT * H)
    rtu_lin_bwd(dz2.data, lin.data, wl, BT, vlen, H, dnp.data, dwl);
  rtu_xrun(&b, m_lm, TPX_TRANSITION_INPUT, 1, lm_arr, shapeH, &dnp, &dn1);
  if (norm_styled)
    rtu_xrun(&b, m_norm, TPX_TRANSITION_OUTPUT, 1, NULL, shapeH, &dn1, &dnl);
  else
    dnl = dn1;
  int64_t H1[1] = {H};
  tpx_tensor tdg = rtu_talloc(TPX_DTYPE_F32, 1, H1);
  dh = rtu_talloc(TPX_DTYPE_F32, 3, dnl.shape);
  norm_bwd(err, "head", &dnl, &nin, g, H, nn, &tdg, &dh);
  if (norm_styled)
    rtu_xrun(&b, m_norm, TPX_TRANSITION_INPUT, 1, h_dt ? &Lh : NULL, shapeH,
             &dh, &dh2);
  else
    dh2 = dh;
  grad_allreduce(&b, "head: norm grad all-reduce", p_g, &tdg);
  tpx_tensor tde = rtu_talloc(TPX_DTYPE_F32, 2, s_e.length);
  e = (tpx_error){0};
  tpx_tensor dh2in = dh2;
  RTU_SIM(&sm, b.mc, &tids, &dh2in, &tde);
  hst = tpx_tp_embedding_backward(sh, b.mc, m_emb, &tids, &dh2in, &tde, &e);
  rtu_sim_end(&sm, b.me);
  if (hst != TPX_OK)
    rtu_lib_failed(err, "head: embedding backward", &e);
  /* compare */
  double *ref = malloc((size_t)(V * H + 1) * sizeof *ref);
  rtu_box_get(rf.dE, g_e, 2, &s_e, ref);
  rtu_cmp(&b, "d embed_tokens.weight", tde.data, ref, ne);
  rtu_box_get(rf.dW, g_w, 2, &s_w, ref);
  rtu_cmp(&b, "d lm_head.weight", dwl, ref, nw);
  rtu_cmp(&b, "d model.norm.weight", tdg.data, rf.dg, H);
  /* free */
  if (norm_styled)
    free(nin.data), free(nout.data), free(dnl.data), free(dh2.data);
  free(nloc.data), free(lin.data), free(lout.data), free(zl.data);
  free(dz.data), free(dz2.data), free(dnp.data), free(dn1.data);
  free(tdg.data), free(dh.data), free(tde.data), free(te.data), free(th.data);
  free(wl), free(dwl), free(ref);
  head_ref_free(&rf);
  tpx_mesh_comm_destroy(b.mc);
  return err->status;
}
