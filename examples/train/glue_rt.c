/* glue_rt.c — where the decoder meets the tpx runtime, one object per rank:
 * parameters, FSDP2 units, gradient reduction, grad norm / clip and AdamW
 * through tpx/runtime.h; every TP transition, the vocab-parallel embedding
 * and the vocab-parallel cross-entropy through tpx/runtime_tp.h. The trainer
 * itself runs no collective except averaging the reported loss over the
 * data-parallel ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"

struct tr_rank {
  const tpx_model *model;
  const tpx_sharding *sh;
  tpx_mesh_comm *mc;
  tpx_runtime *rt;
  int64_t rank;
  int64_t embed, m_embed, m_lm_head;
  int64_t *layer_param; /* a parameter of each layer (its unit) */
  int64_t nlayers;
  size_t nunits;
  unsigned char *unsharded_fwd, *unsharded_bwd, *reduced;
  double comm_s;
};

double tr_rank_comm_seconds(const tr_rank *r) { return r->comm_s; }

/* time a collective call into r->comm_s */
#define TIMED(r, call)                                                         \
  do {                                                                         \
    double t0_ = tr_now();                                                     \
    tpx_status s_ = (call);                                                    \
    (r)->comm_s += tr_now() - t0_;                                             \
    return s_;                                                                 \
  } while (0)

static int fsdp_on(const tr_rank *r) { return tpx_runtime_fsdp_enabled(r->rt); }

tpx_status tr_rank_create(const tr_rank_setup *su, tr_rank **out, tpx_error *err) {
  *out = NULL;
  tr_rank *r = calloc(1, sizeof *r);
  if (!r) return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  r->model = su->model;
  r->sh = su->sharding;
  r->rank = su->rank;
  tpx_status st = tpx_mesh_comm_create(su->world_comm, tpx_sharding_mesh(su->sharding), &r->mc, err);
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  if (!st) st = tpx_runtime_create(su->sharding, r->mc, &ro, &r->rt, err);
  if (st) { tr_rank_destroy(r); return st; }
  r->embed = tpx_model_find_param(r->model, "model.embed_tokens.weight");
  r->m_embed = tpx_model_find_module(r->model, "model.embed_tokens");
  r->m_lm_head = tpx_model_find_module(r->model, "lm_head");
  int64_t nl = 0;
  tpx_model_config_int(r->model, "num_hidden_layers", &nl, NULL);
  r->nlayers = nl;
  r->layer_param = calloc((size_t)(nl + 1), sizeof *r->layer_param);
  r->nunits = tpx_runtime_num_units(r->rt);
  r->unsharded_fwd = calloc(r->nunits + 1, 1);
  r->unsharded_bwd = calloc(r->nunits + 1, 1);
  r->reduced = calloc(r->nunits + 1, 1);
  if (!r->layer_param || !r->unsharded_fwd || !r->unsharded_bwd || !r->reduced) {
    tr_rank_destroy(r);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  for (int64_t l = 0; l < nl; l++) {
    char b[128];
    snprintf(b, sizeof b, "model.layers.%lld.self_attn.q_proj.weight", (long long)l);
    r->layer_param[l] = tpx_model_find_param(r->model, b);
  }
  *out = r;
  return TPX_OK;
}

void tr_rank_destroy(tr_rank *r) {
  if (!r) return;
  tpx_runtime_destroy(r->rt);
  tpx_mesh_comm_destroy(r->mc);
  free(r->layer_param); free(r->unsharded_fwd); free(r->unsharded_bwd); free(r->reduced);
  free(r);
}

tpx_status tr_rank_load(tr_rank *r, int64_t p, const float *full, tpx_error *err) {
  return tpx_runtime_load_param(r->rt, p, full, TPX_DTYPE_F32, err);
}

tpx_status tr_rank_gather(tr_rank *r, int64_t p, float *full, tpx_error *err) {
  return tpx_runtime_gather_param(r->rt, p, full, TPX_DTYPE_F32, err);
}

int tr_rank_is_root(const tr_rank *r) { return r->rank == 0; }

static tpx_runtime_param_info info(tr_rank *r, int64_t p) {
  tpx_runtime_param_info pi;
  memset(&pi, 0, sizeof pi);
  tpx_runtime_param(r->rt, p, &pi, NULL);
  return pi;
}

float *tr_param_w(tr_rank *r, int64_t p) { return p < 0 ? NULL : info(r, p).unsharded; }
float *tr_param_g(tr_rank *r, int64_t p) { return p < 0 ? NULL : info(r, p).unsharded_grad; }
int64_t tr_param_dim(tr_rank *r, int64_t p, int d) {
  tpx_runtime_param_info pi = info(r, p);
  return d < pi.ndim ? pi.local_shape[d] : 1;
}
int64_t tr_param_full_dim(tr_rank *r, int64_t p, int d) {
  tpx_param_info pi;
  if (tpx_model_param(r->model, p, &pi, NULL) || d >= pi.ndim) return 1;
  return pi.shape[d];
}

static tpx_tensor t3(float *d, int64_t b, int64_t s, int64_t f) {
  int64_t sh[3] = {b, s, f};
  return tpx_tensor_make(d, TPX_DTYPE_F32, 3, sh);
}

tpx_status tr_transition(tr_rank *r, int64_t module, int output, int backward, tr_act *x,
                         tpx_error *err) {
  const tpx_transition *tr = NULL;
  tpx_transition_side side = output ? TPX_TRANSITION_OUTPUT : TPX_TRANSITION_INPUT;
  if (module < 0 || tpx_sharding_module_entry(r->sh, module) < 0) return TPX_OK; /* unstyled */
  tpx_error e = {0};
  tpx_status st = tpx_tp_transition_get(r->sh, module, side, 0, &tr, &e);
  if (st == TPX_NOT_FOUND) return TPX_OK; /* the style has no such side */
  if (st) { *err = e; return st; }
  if (!tr) return TPX_OK; /* tp == 1 */
  int64_t shape[3] = {x->b, x->S, x->F}, in_l[3], out_l[3];
  st = tpx_tp_transition_shape(r->sh, module, side, 0, backward, r->rank, shape, 3, in_l, out_l, err);
  if (st) return st;
  if (in_l[0] != x->b || in_l[1] != x->s || in_l[2] != x->f)
    return tpx_error_set(err, TPX_INTERNAL,
                         "module %s %s %d: local [%lld,%lld,%lld], transition expects [%lld,%lld,%lld]",
                         tpx_model_module_fqn(r->model, module), output ? "output" : "input",
                         backward, (long long)x->b, (long long)x->s, (long long)x->f,
                         (long long)in_l[0], (long long)in_l[1], (long long)in_l[2]);
  tr_act y = {0};
  if ((st = tr_act_alloc(&y, out_l[0], out_l[1], out_l[2], err))) return st;
  y.S = x->S; y.F = x->F;
  tpx_tensor in = t3(x->d, x->b, x->s, x->f), o = t3(y.d, y.b, y.s, y.f);
  double t0 = tr_now();
  st = tpx_tp_transition_run(r->sh, r->mc, module, side, 0, backward, shape, &in, &o, err);
  r->comm_s += tr_now() - t0;
  if (st) { tr_act_free(&y); return st; }
  tr_act_free(x);
  *x = y;
  return TPX_OK;
}

tpx_status tr_embed_fwd(tr_rank *r, const int32_t *ids, int64_t b, int64_t t, tr_act *out,
                        tpx_error *err) {
  int64_t ish[2] = {b, t}, ol[3], wl[2];
  tpx_status st = tpx_tp_embedding_shape(r->sh, r->m_embed, r->rank, ish, 2, ol, wl, err);
  if (st) return st;
  if ((st = tr_act_alloc(out, ol[0], ol[1], ol[2], err))) return st;
  out->S = t;
  out->F = tr_param_full_dim(r, r->embed, 1);
  tpx_tensor ti = tpx_tensor_make((void *)ids, TPX_DTYPE_I32, 2, ish);
  tpx_tensor tw = tpx_tensor_make(tr_param_w(r, r->embed), TPX_DTYPE_F32, 2, wl);
  tpx_tensor to = t3(out->d, ol[0], ol[1], ol[2]);
  return tpx_tp_embedding_forward(r->sh, r->mc, r->m_embed, &ti, &tw, &to, err);
}

tpx_status tr_embed_bwd(tr_rank *r, const int32_t *ids, int64_t b, int64_t t, tr_act *dout,
                        tpx_error *err) {
  int64_t ish[2] = {b, t}, ol[3], wl[2];
  tpx_status st = tpx_tp_embedding_shape(r->sh, r->m_embed, r->rank, ish, 2, ol, wl, err);
  if (st) return st;
  tpx_tensor ti = tpx_tensor_make((void *)ids, TPX_DTYPE_I32, 2, ish);
  tpx_tensor tg = t3(dout->d, dout->b, dout->s, dout->f);
  tpx_tensor tw = tpx_tensor_make(tr_param_g(r, r->embed), TPX_DTYPE_F32, 2, wl);
  return tpx_tp_embedding_backward(r->sh, r->mc, r->m_embed, &ti, &tg, &tw, err);
}

tpx_status tr_cross_entropy(tr_rank *r, const tr_act *logits, const int32_t *targets,
                            double *loss, tr_act *dlogits, tpx_error *err) {
  tpx_tp_loss_options lo = TPX_TP_LOSS_OPTIONS_INIT;
  lo.vocab = logits->F;
  lo.vocab_parallel = logits->f != logits->F;
  int64_t tsh[2] = {logits->b, logits->s};
  tpx_tensor tl = t3(logits->d, logits->b, logits->s, logits->f);
  tpx_tensor tt = tpx_tensor_make((void *)targets, TPX_DTYPE_I32, 2, tsh);
  tpx_tensor tg = t3(dlogits->d, dlogits->b, dlogits->s, dlogits->f);
  return tpx_tp_cross_entropy_mean(r->sh, r->mc, &lo, &tl, &tt, &tg, loss, err);
}

static int64_t unit_of(tr_rank *r, int64_t layer) {
  int64_t p = layer < 0 ? r->embed : r->layer_param[layer];
  return tpx_runtime_param_unit(r->rt, p);
}

tpx_status tr_zero_grads(tr_rank *r, tpx_error *err) {
  memset(r->unsharded_fwd, 0, r->nunits + 1);
  memset(r->unsharded_bwd, 0, r->nunits + 1);
  memset(r->reduced, 0, r->nunits + 1);
  return tpx_runtime_zero_grads(r->rt, err);
}

/* Each unit is unsharded once per pass, reduced once per step, whichever
 * layer asks first (a layer may share the root's unit; FSDP off is one
 * pseudo-unit). */
tpx_status tr_unit_unshard(tr_rank *r, int64_t layer, int backward, tpx_error *err) {
  int64_t u = unit_of(r, layer);
  if (u < 0 || (size_t)u >= r->nunits)
    return tpx_error_set(err, TPX_INTERNAL, "no runtime unit for layer %lld", (long long)layer);
  unsigned char *done = backward ? r->unsharded_bwd : r->unsharded_fwd;
  if (done[u]) return TPX_OK;
  done[u] = 1;
  TIMED(r, tpx_runtime_unshard(r->rt, (size_t)u,
                               backward ? TPX_RUNTIME_BACKWARD : TPX_RUNTIME_FORWARD, err));
}

tpx_status tr_unit_reshard(tr_rank *r, int64_t layer, int backward, tpx_error *err) {
  int64_t u = unit_of(r, layer);
  if (!fsdp_on(r)) return TPX_OK;
  if (u == unit_of(r, -1) && layer >= 0) return TPX_OK; /* the root's: at the end */
  if (backward && !r->reduced[u]) return TPX_OK;
  return tpx_runtime_reshard(r->rt, (size_t)u, backward ? TPX_RUNTIME_BACKWARD : TPX_RUNTIME_FORWARD, err);
}

tpx_status tr_unit_reduce_grads(tr_rank *r, int64_t layer, tpx_error *err) {
  int64_t u = unit_of(r, layer);
  if (layer >= 0 && (!fsdp_on(r) || u == unit_of(r, -1))) return TPX_OK; /* with the root */
  if (r->reduced[u]) return TPX_OK;
  r->reduced[u] = 1;
  TIMED(r, tpx_runtime_reduce_grads(r->rt, (size_t)u, err));
}

tpx_status tr_dp_mean(tr_rank *r, double *v, tpx_error *err) {
  const tpx_mesh *mesh = tpx_sharding_mesh(r->sh);
  int64_t n = 1;
  for (int d = 0; d < tpx_mesh_ndim(mesh); d++) {
    const char *name = tpx_mesh_dim_name(mesh, d);
    if (strcmp(name, "dp_shard") && strcmp(name, "dp_replicate")) continue;
    if (tpx_mesh_dim_size(mesh, d) == 1) continue;
    double x = *v;
    tpx_status st = tpx_comm_all_reduce(tpx_mesh_comm_dim(r->mc, d), &x, v, 1, TPX_DTYPE_F64,
                                        TPX_REDUCE_SUM, err);
    if (st) return st;
    n *= tpx_mesh_dim_size(mesh, d);
  }
  *v /= (double)n;
  return TPX_OK;
}

tpx_status tr_optimizer_step(tr_rank *r, double clip, double lr, double wd, int64_t step,
                             double *grad_norm, tpx_error *err) {
  double t0 = tr_now();
  tpx_status st = clip > 0 ? tpx_runtime_clip_grad_norm(r->rt, clip, 2.0, grad_norm, err)
                           : tpx_runtime_grad_norm(r->rt, 2.0, grad_norm, err);
  r->comm_s += tr_now() - t0;
  if (st) return st;
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = lr;
  ao.weight_decay = wd;
  return tpx_runtime_adamw_step(r->rt, &ao, err);
}
