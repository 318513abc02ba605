/* glue_tp.c — the tensor-parallel half of the glue, shared by both glues:
 * every styled module's transition, the vocab-parallel embedding and
 * cross-entropy through tpx/runtime_tp.h, and the reported loss's average
 * over the data-parallel ranks. Parameters come from the glue in use
 * (tr_param_w / tr_param_g). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glue_impl.h"

tpx_status tr_tp_init(tr_tp *tp, const tr_rank_setup *su, tpx_error *err) {
  tp->model = su->model;
  tp->sh = su->sharding;
  tp->rank = su->rank;
  tp->embed = tpx_model_find_param(su->model, "model.embed_tokens.weight");
  tp->m_embed = tpx_model_find_module(su->model, "model.embed_tokens");
  tp->cpi = (tr_cp){1, 0, su->cp_layout};
  const tpx_mesh *mesh = tpx_sharding_mesh(su->sharding);
  tpx_status st = tpx_mesh_comm_create(su->world_comm, mesh, &tp->mc, err);
  /* the ranks the loss is averaged over (the mesh's dp_cp view) */
  if (!st)
    st = tpx_comm_split_mesh_dim(tpx_mesh_comm_world(tp->mc), mesh, "dp_cp",
                                 &tp->dp_cp, err);
  /* the cp group: the ranks that differ only in their cp coordinate */
  int cpd = tpx_mesh_dim_index(mesh, "cp");
  if (st || cpd < 0 || tpx_mesh_dim_size(mesh, cpd) == 1)
    return st;
  tp->cp = tpx_mesh_comm_dim(tp->mc, cpd);
  tp->cpi.size = tpx_comm_size(tp->cp);
  tp->cpi.rank = tpx_comm_rank(tp->cp);
  return TPX_OK;
}

void tr_tp_fini(tr_tp *tp) {
  tpx_comm_destroy(tp->dp_cp);
  tpx_mesh_comm_destroy(tp->mc);
  tp->mc = NULL;
  tp->cp = NULL;
}

tr_cp tr_rank_cp(const tr_rank *r) { return ((const tr_tp *)r)->cpi; }

tpx_status tr_cp_gather(tr_rank *r, const float *local, float *full, int64_t b,
                        int64_t t, int64_t f, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  int64_t ls[3] = {b, t, f}, fs[3] = {b, t * tp->cpi.size, f};
  tpx_tensor tl = tpx_tensor_make((void *)local, TPX_DTYPE_F32, 3, ls);
  tpx_tensor tf = tpx_tensor_make(full, TPX_DTYPE_F32, 3, fs);
  double t0 = tr_now();
  tpx_status st = tpx_cp_all_gather_seq(tp->cp, tp->cpi.layout, &tl, &tf, err);
  tp->comm_s += tr_now() - t0;
  tp->cp_s += tr_now() - t0;
  return st;
}

tpx_status tr_cp_reduce_scatter(tr_rank *r, const float *full, float *local,
                                int64_t b, int64_t t, int64_t f,
                                tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  int64_t ls[3] = {b, t, f}, fs[3] = {b, t * tp->cpi.size, f};
  tpx_tensor tl = tpx_tensor_make(local, TPX_DTYPE_F32, 3, ls);
  tpx_tensor tf = tpx_tensor_make((void *)full, TPX_DTYPE_F32, 3, fs);
  double t0 = tr_now();
  tpx_status st =
      tpx_cp_reduce_scatter_seq(tp->cp, tp->cpi.layout, &tf, &tl, err);
  tp->comm_s += tr_now() - t0;
  tp->cp_s += tr_now() - t0;
  return st;
}

double tr_rank_comm_seconds(const tr_rank *r) {
  return ((const tr_tp *)r)->comm_s;
}
double tr_rank_cp_seconds(const tr_rank *r) { return ((const tr_tp *)r)->cp_s; }
int tr_rank_is_root(const tr_rank *r) { return ((const tr_tp *)r)->rank == 0; }

static tpx_tensor t3(float *d, int64_t b, int64_t s, int64_t f) {
  int64_t sh[3] = {b, s, f};
  return tpx_tensor_make(d, TPX_DTYPE_F32, 3, sh);
}

/* One styled module's input / output transition: resolved once into a
 * tpx_tp_resolved (present, copy, layouts, local shapes, DTensor or not),
 * then run: two library calls per transition that communicates, one
 * otherwise. */
tpx_status tr_transition(tr_rank *r, tr_arena *ar, int64_t module, int output,
                         int backward, tr_act *x, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  tpx_transition_side side =
      output ? TPX_TRANSITION_OUTPUT : TPX_TRANSITION_INPUT;
  if (module < 0)
    return TPX_OK; /* no such module */
  /* an input that arrives as a DTensor (forward: this activation; backward:
   * the forward input this gradient belongs to) */
  const tpx_placement *arrived = NULL;
  if (!output && !backward && x->arr)
    arrived = &x->arrl;
  if (!output && backward && x->in_arr)
    arrived = &x->in_arrl;
  int64_t shape[3] = {x->b, x->S, x->F};
  tpx_tp_resolved rs = TPX_TP_RESOLVED_INIT;
  tpx_status st =
      tpx_tp_transition_resolve(tp->sh, module, side, 0, NULL, backward,
                                arrived, tp->rank, shape, 3, &rs, err);
  if (st)
    return st;
  if (!rs.present)
    return TPX_OK; /* unstyled, no such side, or tp == 1: no hooks */
  tr_act y = *x;
  if (!rs.is_copy) { /* a collective, into a new buffer from the arena (the
                        run checks x's local shape, naming the module) */
    const int64_t *o = rs.out_local;
    y = (tr_act){0};
    if ((st = tr_act_alloc(ar, &y, o[0], o[1], o[2], 1, err)))
      return st;
    y.S = x->S;
    y.F = x->F;
    tpx_tensor in = t3(x->d, x->b, x->s, x->f), out = t3(y.d, y.b, y.s, y.f);
    double t0 = tr_now();
    st = tpx_tp_transition_run_resolved(tp->sh, tp->mc, &rs, &in, &out, err);
    tp->comm_s += tr_now() - t0;
    if (st)
      return st;
  }
  if (!output && !backward) { /* its backward needs how x arrived */
    y.in_arr = x->arr;
    y.in_arrl = x->arrl;
    y.arr = 0;
  }
  if (output && !backward && rs.keeps_dtensor) { /* a DTensor to the next */
    y.arr = 1;
    y.arrl = rs.out_layout;
  }
  *x = y;
  return TPX_OK;
}

/* The embedding call's tensors: ids [b, t] and the TP-local weight (or its
 * gradient); ol = the local output shape. */
static tpx_status embed_args(tr_rank *r, const int32_t *ids, int64_t b,
                             int64_t t, int grad, int64_t ish[2], int64_t ol[3],
                             tpx_tensor *ti, tpx_tensor *tw, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  int64_t wl[2];
  ish[0] = b;
  ish[1] = t;
  tpx_status st = tpx_tp_embedding_shape(tp->sh, tp->m_embed, tp->rank, ish, 2,
                                         ol, wl, err);
  if (st)
    return st;
  *ti = tpx_tensor_make((void *)ids, TPX_DTYPE_I32, 2, ish);
  *tw = tpx_tensor_make(grad ? tr_param_g(r, tp->embed)
                             : tr_param_w(r, tp->embed),
                        TPX_DTYPE_F32, 2, wl);
  return TPX_OK;
}

tpx_status tr_embed_fwd(tr_rank *r, tr_arena *ar, const int32_t *ids, int64_t b,
                        int64_t t, tr_act *out, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  int64_t ish[2], ol[3];
  tpx_tensor ti, tw;
  tpx_status st = embed_args(r, ids, b, t, 0, ish, ol, &ti, &tw, err);
  if (st || (st = tr_act_alloc(ar, out, ol[0], ol[1], ol[2], 1, err)))
    return st;
  out->S = t;
  out->F = tr_param_full_dim(r, tp->embed, 1);
  tpx_tensor to = t3(out->d, ol[0], ol[1], ol[2]);
  double t0 = tr_now();
  st =
      tpx_tp_embedding_forward(tp->sh, tp->mc, tp->m_embed, &ti, &tw, &to, err);
  tp->comm_s += tr_now() - t0;
  return st;
}

tpx_status tr_embed_bwd(tr_rank *r, const int32_t *ids, int64_t b, int64_t t,
                        tr_act *dout, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  int64_t ish[2], ol[3];
  tpx_tensor ti, tw;
  tpx_status st = embed_args(r, ids, b, t, 1, ish, ol, &ti, &tw, err);
  if (st)
    return st;
  tpx_tensor tg = t3(dout->d, dout->b, dout->s, dout->f);
  double t0 = tr_now();
  st = tpx_tp_embedding_backward(tp->sh, tp->mc, tp->m_embed, &ti, &tg, &tw,
                                 err);
  tp->comm_s += tr_now() - t0;
  return st;
}

tpx_status tr_cross_entropy(tr_rank *r, const tr_act *logits,
                            const int32_t *targets, double *loss,
                            tr_act *dlogits, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  tpx_tp_loss_options lo = TPX_TP_LOSS_OPTIONS_INIT;
  lo.vocab = logits->F;
  lo.vocab_parallel = logits->f != logits->F;
  int64_t tsh[2] = {logits->b, logits->s};
  tpx_tensor tl = t3(logits->d, logits->b, logits->s, logits->f);
  tpx_tensor tt = tpx_tensor_make((void *)targets, TPX_DTYPE_I32, 2, tsh);
  tpx_tensor tg = t3(dlogits->d, dlogits->b, dlogits->s, dlogits->f);
  return tpx_tp_cross_entropy_mean(tp->sh, tp->mc, &lo, &tl, &tt, &tg, loss,
                                   err);
}

tpx_status tr_dp_mean(tr_rank *r, double *v, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  double x = *v;
  tpx_status st = tpx_comm_all_reduce(tp->dp_cp, &x, v, 1, TPX_DTYPE_F64,
                                      TPX_REDUCE_SUM, err);
  *v /= (double)tpx_comm_size(tp->dp_cp);
  return st;
}
