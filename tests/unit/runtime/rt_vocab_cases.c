/* rt_vocab_cases.c — case_embedding and case_loss (rt_cases.h): the
 * vocab-parallel embedding and log-probs / cross-entropy against a
 * single-rank lookup, scatter-add and softmax. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

/* ---- embedding ---------------------------------------------------------- */

tpx_status case_embedding(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK)
    return st;
  const tpx_model *m = tpx_sharding_model(sh);
  int64_t me = tpx_comm_rank(world);
  int64_t mod = tpx_model_find_module(m, "model.embed_tokens");
  int64_t p = tpx_model_find_param(m, "model.embed_tokens.weight");
  tpx_param_info pi;
  tpx_error e = {0};
  tpx_slice ws;
  if (mod < 0 || p < 0 || tpx_model_param(m, p, &pi, &e) != TPX_OK ||
      tpx_sharding_local_slice(sh, p, me, &ws, &e) != TPX_OK) {
    tpx_mesh_comm_destroy(mc);
    return rtu_failed(err, "embedding: no model.embed_tokens: %s", e.message);
  }
  const int64_t V = pi.shape[0], H = pi.shape[1], B = 2, T = a->T;
  int64_t ids_shape[2] = {B, T}, oshape[3] = {B, T, H};
  /* ids spread over the whole vocab (every rank's range), incl. 0, V-1 */
  int64_t *ids = malloc((size_t)(B * T) * sizeof *ids);
  for (int64_t i = 0; i < B * T; i++)
    ids[i] = i == 0 ? 0 : i == 1 ? V - 1 : (i * 977 + 13) % V;
  ids[B * T - 1] = ids[2]; /* a repeated id accumulates twice */
  tpx_tensor tids = tpx_tensor_make(ids, TPX_DTYPE_I64, 2, ids_shape);
  double *W = malloc((size_t)(V * H) * sizeof *W);
  for (int64_t i = 0; i < V * H; i++) W[i] = rtu_rval(i, 11);
  int64_t nw = tpx_slice_numel(&ws);
  double *wl = malloc((size_t)(nw ? nw : 1) * sizeof *wl);
  rtu_box_get(W, pi.shape, 2, &ws, wl);
  int64_t wloc[2], oloc[3];
  if (tpx_tp_embedding_shape(sh, mod, me, ids_shape, 2, oloc, wloc, &e) !=
      TPX_OK)
    rtu_lib_failed(err, "embedding shape", &e);
  if (wloc[0] != ws.length[0] || wloc[1] != ws.length[1])
    rtu_failed(err, "embedding: weight_local [%lld, %lld], slice [%lld, %lld]",
               (long long)wloc[0], (long long)wloc[1], (long long)ws.length[0],
               (long long)ws.length[1]);
  tpx_tensor tw = rtu_talloc(TPX_DTYPE_F32, 2, ws.length);
  for (int64_t i = 0; i < nw; i++) ((float *)tw.data)[i] = (float)wl[i];
  /* the layout of the output: the output transition's `to`, else full */
  const tpx_transition *tr = NULL;
  tpx_placement to = tpx_placement_replicate();
  if (tpx_sharding_module_entry(sh, mod) >= 0 &&
      tpx_tp_transition_get(sh, mod, TPX_TRANSITION_OUTPUT, 0, &tr, &e) ==
          TPX_OK &&
      tr)
    to = tr->to;
  tpx_slice os;
  rtu_act_slice(sh, me, to, oshape, 3, &os, &e);
  for (int d = 0; d < 3; d++)
    if (os.length[d] != oloc[d])
      rtu_failed(err, "embedding: output dim %d local %lld, layout says %lld",
                 d, (long long)oloc[d], (long long)os.length[d]);
  double *E = malloc((size_t)(B * T * H) * sizeof *E);
  double *G = malloc((size_t)(B * T * H) * sizeof *G);
  double *dW = calloc((size_t)(V * H), sizeof *dW);
  for (int64_t t = 0; t < B * T; t++)
    for (int64_t h = 0; h < H; h++) {
      E[t * H + h] = (double)(float)W[ids[t] * H + h];
      G[t * H + h] = rtu_rval(t * H + h, 12);
      dW[ids[t] * H + h] += (double)(float)G[t * H + h];
    }
  int64_t no = tpx_slice_numel(&os);
  double *ref = malloc((size_t)(no > nw ? no : nw) * sizeof *ref + 8);
  tpx_tensor tout = rtu_talloc(TPX_DTYPE_F32, 3, os.length);
  rtu_sim sm;
  RTU_SIM(&sm, mc, &tids, &tw, &tout);
  tpx_status cst = tpx_tp_embedding_forward(sh, mc, mod, &tids, &tw, &tout, &e);
  rtu_sim_end(&sm, me);
  if (cst != TPX_OK) {
    rtu_lib_failed(err, "embedding forward", &e);
  } else {
    rtu_box_get(E, oshape, 3, &os, ref);
    for (int64_t i = 0; i < no; i++)
      if (fabs(((float *)tout.data)[i] - ref[i]) > 1e-6) {
        rtu_failed(err, "embedding forward: element %lld = %g, want %g",
                   (long long)i, ((float *)tout.data)[i], ref[i]);
        break;
      }
  }
  /* backward: grad_out in the output layout, accumulate onto 1.0 */
  tpx_tensor tg = rtu_talloc(TPX_DTYPE_F32, 3, os.length);
  rtu_box_get(G, oshape, 3, &os, ref);
  for (int64_t i = 0; i < no; i++) ((float *)tg.data)[i] = (float)ref[i];
  tpx_tensor twg = rtu_talloc(TPX_DTYPE_F32, 2, ws.length);
  for (int64_t i = 0; i < nw; i++) ((float *)twg.data)[i] = 1.0f;
  e = (tpx_error){0};
  RTU_SIM(&sm, mc, &tids, &tg, &twg);
  cst = tpx_tp_embedding_backward(sh, mc, mod, &tids, &tg, &twg, &e);
  rtu_sim_end(&sm, me);
  if (cst != TPX_OK) {
    rtu_lib_failed(err, "embedding backward", &e);
  } else {
    rtu_box_get(dW, pi.shape, 2, &ws, ref);
    for (int64_t i = 0; i < nw; i++)
      if (fabs(((float *)twg.data)[i] - (1.0 + ref[i])) > 1e-5) {
        rtu_failed(err, "embedding backward: element %lld = %g, want %g",
                   (long long)i, ((float *)twg.data)[i], 1.0 + ref[i]);
        break;
      }
  }
  free(ids), free(W), free(wl), free(tw.data), free(E), free(G), free(dW);
  free(ref), free(tout.data), free(tg.data), free(twg.data);
  tpx_mesh_comm_destroy(mc);
  return err->status;
}

static void check_grad(tpx_error *err, const char *what, const tpx_tensor *g,
                       const double *Z, const double *lse, const int64_t *tg,
                       const float *gi, double scale, int64_t N, int64_t V,
                       int64_t off, int64_t len) {
  double tol = g->dtype == TPX_DTYPE_BF16 ? 1e-2 : 1e-5;
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < len; j++) {
      int64_t gj = off + j;
      double p = exp(Z[i * V + gj] - lse[i]);
      double want = tg[i] < 0 ? 0.0
                              : scale * (gi ? (double)gi[i] : 1.0) *
                                    (p - (tg[i] == gj ? 1.0 : 0.0));
      rtu_cmpd(err, what, rtu_get(g->data, g->dtype, i * len + j), want, tol);
    }
}

tpx_status case_loss(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK)
    return st;
  int64_t me = tpx_comm_rank(world);
  const int64_t V = a->vocab, N = a->rows;
  tpx_dtype dt = rtu_dt_of(a);
  double tol = 1e-5; /* bf16 too: the reference takes the rounded logits */
  tpx_tp_loss_options o = TPX_TP_LOSS_OPTIONS_INIT;
  o.vocab = V;
  int64_t off = 0, len = 0;
  tpx_error e = {0};
  if (tpx_tp_vocab_range(sh, me, &o, &off, &len, &e) != TPX_OK) {
    tpx_mesh_comm_destroy(mc);
    return rtu_failed(err, "vocab range: %s", e.message);
  }
  /* full logits, rounded to the dtype so the reference sees the same */
  double *Z = malloc((size_t)(N * V) * sizeof *Z);
  int64_t *tg = malloc((size_t)N * sizeof *tg);
  for (int64_t i = 0; i < N * V; i++) {
    double v = 8.0 * rtu_rval(i, 21);
    float f = (float)v;
    Z[i] = dt == TPX_DTYPE_BF16 ? (double)rtu_from_bf16(rtu_to_bf16(f))
                                : (double)f;
  }
  for (int64_t i = 0; i < N; i++)
    tg[i] = i == 3 ? -100 : i == 0 ? V - 1 : (i * 131 + 7) % V;
  /* reference */
  double *lse = malloc((size_t)N * sizeof *lse), *lp = malloc((size_t)N * 8);
  double sum = 0;
  int64_t cnt = 0;
  for (int64_t i = 0; i < N; i++) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; j++) mx = fmax(mx, Z[i * V + j]);
    for (int64_t j = 0; j < V; j++) s += exp(Z[i * V + j] - mx);
    lse[i] = mx + log(s);
    lp[i] = tg[i] < 0 ? 0.0 : Z[i * V + tg[i]] - lse[i];
    if (tg[i] >= 0)
      sum -= lp[i], cnt++;
  }
  int64_t lshape[2] = {N, len}, tshape[1] = {N};
  tpx_tensor tz = rtu_talloc(dt, 2, lshape);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < len; j++)
      rtu_put(tz.data, dt, i * len + j, Z[i * V + off + j]);
  tpx_tensor tt = tpx_tensor_make(tg, TPX_DTYPE_I64, 1, tshape);
  tpx_tensor tlp = rtu_talloc(TPX_DTYPE_F32, 1, tshape);
  rtu_sim sm;
  RTU_SIM(&sm, mc, &tz, &tt, &tlp);
  tpx_status cst = tpx_tp_logprobs(sh, mc, &o, &tz, &tt, &tlp, &e);
  rtu_sim_end(&sm, me);
  if (cst != TPX_OK)
    rtu_lib_failed(err, "logprobs", &e);
  else
    for (int64_t i = 0; i < N; i++)
      rtu_cmpd(err, "logprob", ((float *)tlp.data)[i], lp[i], tol);
  /* log-prob backward with per-row upstream grads */
  tpx_tensor tgl = rtu_talloc(TPX_DTYPE_F32, 1, tshape);
  for (int64_t i = 0; i < N; i++)
    ((float *)tgl.data)[i] = (float)rtu_rval(i, 22);
  tpx_tensor tgz = rtu_talloc(dt, 2, lshape);
  e = (tpx_error){0};
  RTU_SIM(&sm, mc, &tz, &tt, &tgl, &tgz);
  cst = tpx_tp_logprobs_backward(sh, mc, &o, &tz, &tt, &tgl, &tgz, &e);
  rtu_sim_end(&sm, me);
  if (cst != TPX_OK)
    rtu_lib_failed(err, "logprobs backward", &e);
  else
    check_grad(err, "d logprob / d logit", &tgz, Z, lse, tg, tgl.data, -1.0, N,
               V, off, len);
  /* cross-entropy: sums, then the mean and its gradient */
  double ls = 0, mean = 0;
  int64_t c = 0;
  e = (tpx_error){0};
  RTU_SIM(&sm, mc, &tz, &tt, &tgz);
  cst = tpx_tp_cross_entropy(sh, mc, &o, &tz, &tt, 0.5, &tgz, &ls, &c, &e);
  rtu_sim_end(&sm, me);
  if (cst != TPX_OK) {
    rtu_lib_failed(err, "cross entropy", &e);
  } else {
    rtu_cmpd(err, "loss sum", ls, sum, tol);
    if (c != cnt)
      rtu_failed(err, "loss count %lld, want %lld", (long long)c,
                 (long long)cnt);
  }
  e = (tpx_error){0};
  RTU_SIM(&sm, mc, &tz, &tt, &tgz);
  cst = tpx_tp_cross_entropy_mean(sh, mc, &o, &tz, &tt, &tgz, &mean, &e);
  rtu_sim_end(&sm, me);
  if (cst != TPX_OK) {
    rtu_lib_failed(err, "cross entropy mean", &e);
  } else {
    rtu_cmpd(err, "mean loss", mean, sum / (double)cnt, tol);
    check_grad(err, "d mean loss / d logit", &tgz, Z, lse, tg, NULL,
               1.0 / (double)cnt, N, V, off, len);
  }
  /* finite differences of the mean loss, on small vocabularies (f32) */
  if (V <= 16 && dt == TPX_DTYPE_F32) {
    const float eps = 1e-2f;
    for (int64_t i = 0; i < N; i++)
      for (int64_t gj = 0; gj < V; gj++) {
        int mine = gj >= off && gj < off + len;
        float *zp = (float *)tz.data + i * len + (gj - off);
        float keep = mine ? *zp : 0.0f;
        double lpm[2] = {0, 0};
        for (int s = 0; s < 2; s++) {
          if (mine)
            *zp = keep + (s ? -eps : eps);
          e = (tpx_error){0};
          RTU_SIM(&sm, mc, &tz, &tt);
          cst = tpx_tp_cross_entropy_mean(sh, mc, &o, &tz, &tt, NULL, &lpm[s],
                                          &e);
          rtu_sim_end(&sm, me);
          if (cst != TPX_OK)
            rtu_lib_failed(err, "finite difference", &e);
        }
        if (mine)
          *zp = keep;
        double fd = (lpm[0] - lpm[1]) / (2.0 * eps);
        double p = exp(Z[i * V + gj] - lse[i]);
        double an =
            tg[i] < 0 ? 0.0 : (p - (tg[i] == gj ? 1.0 : 0.0)) / (double)cnt;
        if (mine) {
          char what[64];
          snprintf(what, sizeof what, "finite difference [%lld, %lld]",
                   (long long)i, (long long)gj);
          /* f32 logits: the difference quotient carries ~1e-6/eps noise */
          if (!(fabs(fd - an) <= 2e-4 + 1e-3 * fabs(an)))
            rtu_failed(err, "loss: %s = %.9g, analytic %.9g", what, fd, an);
          /* and the analytic formula is the library's gradient */
          rtu_cmpd(err, what, rtu_get(tgz.data, dt, i * len + (gj - off)), an,
                   1e-5);
        }
      }
  }
  free(Z), free(tg), free(lse), free(lp), free(tz.data), free(tlp.data);
  free(tgl.data), free(tgz.data);
  tpx_mesh_comm_destroy(mc);
  return err->status;
}
