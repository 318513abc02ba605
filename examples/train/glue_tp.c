/* glue_tp.c — the tensor-parallel half of the glue, shared by both glues:
 * every styled module's transition, the vocab-parallel embedding and
 * cross-entropy through tpx/runtime_tp.h, context parallelism's K/V
 * collectives, and the reported loss's average over the data-parallel
 * ranks. Parameters come from the glue in use (tr_param_w / tr_param_g);
 * the mesh comm clocks every call (tpx_mesh_comm_time). */
#include "glue_impl.h"

tpx_status tr_tp_init(tr_tp *tp, const tr_rank_setup *su, tpx_error *err) {
  const tpx_mesh *mesh = tpx_sharding_mesh(su->sharding);
  *tp = (tr_tp){.model = su->model, .sh = su->sharding, .rank = su->rank};
  tp->cpi = (tr_cp){1, 0, su->cp_layout}; /* cp 1 unless the mesh has cp */
  tpx_status st = tpx_mesh_comm_create(su->world_comm, mesh, &tp->mc, err);
  if (!st) /* the ranks the loss is averaged over */
    st = tpx_mesh_comm_view(tp->mc, "dp_cp", &tp->dp_cp, err);
  /* the cp group: the ranks that differ only in their cp coordinate */
  if ((tp->cp = tpx_mesh_comm_dim(tp->mc, tpx_mesh_dim_index(mesh, "cp"))))
    tp->cpi =
        (tr_cp){tpx_comm_size(tp->cp), tpx_comm_rank(tp->cp), su->cp_layout};
  return st;
}

void tr_tp_fini(tr_tp *tp) { tpx_mesh_comm_destroy(tp->mc); }

tpx_comm_time tr_rank_comm_time(const tr_rank *r) {
  tpx_comm_time t = TPX_COMM_TIME_INIT;
  tpx_mesh_comm_time(((const tr_tp *)r)->mc, &t, NULL);
  return t;
}
int tr_rank_is_root(const tr_rank *r) { return ((const tr_tp *)r)->rank == 0; }
tr_cp tr_rank_cp(const tr_rank *r) { return ((const tr_tp *)r)->cpi; }

static tpx_tensor t3(const float *d, int64_t b, int64_t s, int64_t f) {
  int64_t sh[3] = {b, s, f};
  return tpx_tensor_make((void *)d, TPX_DTYPE_F32, 3, sh);
}

tpx_status tr_cp_gather(tr_rank *r, const float *local, float *full, int64_t b,
                        int64_t t, int64_t f, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  tpx_tensor tl = t3(local, b, t, f), tf = t3(full, b, t * tp->cpi.size, f);
  return tpx_cp_all_gather_seq(tp->cp, tp->cpi.layout, &tl, &tf, err);
}

tpx_status tr_cp_reduce_scatter(tr_rank *r, const float *full, float *local,
                                int64_t b, int64_t t, int64_t f,
                                tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  tpx_tensor tl = t3(local, b, t, f), tf = t3(full, b, t * tp->cpi.size, f);
  return tpx_cp_reduce_scatter_seq(tp->cp, tp->cpi.layout, &tf, &tl, err);
}

/* One styled module's input / output transition, resolved with the
 * DTensor state x carries (tpx_tp_transition_resolve_flow), then run when
 * it moves data: into a new buffer from the arena. */
tpx_status tr_transition(tr_rank *r, tr_arena *ar, int64_t module, int output,
                         int backward, tr_act *x, tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  int64_t shape[3] = {x->b, x->S, x->F};
  tpx_tp_resolved rs = TPX_TP_RESOLVED_INIT;
  tpx_status st = tpx_tp_transition_resolve_flow(
      tp->sh, module, output ? TPX_TRANSITION_OUTPUT : TPX_TRANSITION_INPUT, 0,
      backward, &x->flow, tp->rank, shape, 3, &rs, err);
  x->flow = st ? x->flow : rs.flow;
  if (st || rs.is_copy)
    return st; /* a copy: x is the result, its flow changed */
  tr_act y;
  const int64_t *o = rs.out_local;
  if ((st = tr_act_alloc(ar, &y, o[0], o[1], o[2], 1, err)))
    return st;
  y.S = x->S;
  y.F = x->F;
  y.flow = x->flow;
  tpx_tensor in = t3(x->d, x->b, x->s, x->f), out = t3(y.d, y.b, y.s, y.f);
  st = tpx_tp_transition_run_resolved(tp->sh, tp->mc, &rs, &in, &out, err);
  if (!st)
    *x = y;
  return st;
}

/* The vocab-parallel embedding e (forward when given the arena, which x
 * then comes from; else backward, x the output's gradient) on the
 * TP-local weight or its gradient. */
static tpx_status embed(tr_rank *r, tr_arena *ar, const tr_module *e,
                        const int32_t *ids, int64_t b, int64_t t, tr_act *x,
                        tpx_error *err) {
  tr_tp *tp = (tr_tp *)r;
  int64_t ish[2] = {b, t}, ol[3], wl[2];
  tpx_status st =
      tpx_tp_embedding_shape(tp->sh, e->m, tp->rank, ish, 2, ol, wl, err);
  if (st || (ar && (st = tr_act_alloc(ar, x, ol[0], ol[1], ol[2], 1, err))))
    return st;
  tpx_tensor ti = tpx_tensor_make((void *)ids, TPX_DTYPE_I32, 2, ish);
  tpx_tensor tw = tpx_tensor_make(
      ar ? tr_param_w(r, e->w) : tr_param_g(r, e->w), TPX_DTYPE_F32, 2, wl);
  tpx_tensor tx = t3(x->d, x->b, x->s, x->f);
  if (!ar)
    return tpx_tp_embedding_backward(tp->sh, tp->mc, e->m, &ti, &tx, &tw, err);
  x->S = t;
  x->F = e->cols;
  return tpx_tp_embedding_forward(tp->sh, tp->mc, e->m, &ti, &tw, &tx, err);
}

tpx_status tr_embed_fwd(tr_rank *r, tr_arena *ar, const tr_module *e,
                        const int32_t *ids, int64_t b, int64_t t, tr_act *out,
                        tpx_error *err) {
  return embed(r, ar, e, ids, b, t, out, err);
}
tpx_status tr_embed_bwd(tr_rank *r, const tr_module *e, const int32_t *ids,
                        int64_t b, int64_t t, tr_act *dout, tpx_error *err) {
  return embed(r, NULL, e, ids, b, t, dout, err);
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
  return tpx_comm_all_reduce(((tr_tp *)r)->dp_cp, v, v, 1, TPX_DTYPE_F64,
                             TPX_REDUCE_AVG, err);
}
