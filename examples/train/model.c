/* model.c — the Llama/Qwen2/Qwen3 decoder, forward and backward, over the
 * glue: every styled module is entered and left through tr_transition, the
 * embedding and the loss go through the glue's vocab-parallel calls, and
 * every size is TP-local (read from the local parameter shapes), so the same
 * code runs on any mesh. Activations of one step are kept for backward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

static int64_t pidx(const tpx_model *m, const char *fmt, int64_t l, const char *leaf) {
  char b[256];
  snprintf(b, sizeof b, fmt, (long long)l, leaf);
  return tpx_model_find_param(m, b);
}

static int64_t midx(const tpx_model *m, const char *fmt, int64_t l, const char *leaf) {
  char b[256];
  snprintf(b, sizeof b, fmt, (long long)l, leaf);
  return tpx_model_find_module(m, b);
}

#define LP "model.layers.%lld.%s.weight"
#define LB "model.layers.%lld.%s.bias"
#define LM "model.layers.%lld.%s"

tpx_status tr_net_init(tr_net *net, const tpx_model *model, tpx_error *err) {
  memset(net, 0, sizeof *net);
  if (tr_config_read(model, &net->cfg, err)) return err ? err->status : TPX_VALIDATION;
  net->model = model;
  net->embed = tpx_model_find_param(model, "model.embed_tokens.weight");
  net->norm = tpx_model_find_param(model, "model.norm.weight");
  net->lm_head = tpx_model_find_param(model, "lm_head.weight");
  net->m_embed = tpx_model_find_module(model, "model.embed_tokens");
  net->m_norm = tpx_model_find_module(model, "model.norm");
  net->m_lm_head = tpx_model_find_module(model, "lm_head");
  if (net->embed < 0 || net->norm < 0 || net->lm_head < 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "model: embed_tokens, norm or lm_head weight is missing");
  net->L = calloc((size_t)(net->cfg.layers ? net->cfg.layers : 1), sizeof *net->L);
  if (!net->L) return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (int64_t l = 0; l < net->cfg.layers; l++) {
    tr_layer_ids *L = &net->L[l];
    L->in_norm = pidx(model, LP, l, "input_layernorm");
    L->post_norm = pidx(model, LP, l, "post_attention_layernorm");
    L->q = pidx(model, LP, l, "self_attn.q_proj");
    L->k = pidx(model, LP, l, "self_attn.k_proj");
    L->v = pidx(model, LP, l, "self_attn.v_proj");
    L->o = pidx(model, LP, l, "self_attn.o_proj");
    L->gate = pidx(model, LP, l, "mlp.gate_proj");
    L->up = pidx(model, LP, l, "mlp.up_proj");
    L->down = pidx(model, LP, l, "mlp.down_proj");
    L->qb = net->cfg.qkv_bias ? pidx(model, LB, l, "self_attn.q_proj") : -1;
    L->kb = net->cfg.qkv_bias ? pidx(model, LB, l, "self_attn.k_proj") : -1;
    L->vb = net->cfg.qkv_bias ? pidx(model, LB, l, "self_attn.v_proj") : -1;
    L->qn = net->cfg.qk_norm ? pidx(model, LP, l, "self_attn.q_norm") : -1;
    L->kn = net->cfg.qk_norm ? pidx(model, LP, l, "self_attn.k_norm") : -1;
    L->m_in_norm = midx(model, LM, l, "input_layernorm");
    L->m_post_norm = midx(model, LM, l, "post_attention_layernorm");
    L->m_q = midx(model, LM, l, "self_attn.q_proj");
    L->m_k = midx(model, LM, l, "self_attn.k_proj");
    L->m_v = midx(model, LM, l, "self_attn.v_proj");
    L->m_o = midx(model, LM, l, "self_attn.o_proj");
    L->m_gate = midx(model, LM, l, "mlp.gate_proj");
    L->m_up = midx(model, LM, l, "mlp.up_proj");
    L->m_down = midx(model, LM, l, "mlp.down_proj");
    if (L->in_norm < 0 || L->post_norm < 0 || L->q < 0 || L->k < 0 || L->v < 0 || L->o < 0 ||
        L->gate < 0 || L->up < 0 || L->down < 0 ||
        (net->cfg.qkv_bias && (L->qb < 0 || L->kb < 0 || L->vb < 0)) ||
        (net->cfg.qk_norm && (L->qn < 0 || L->kn < 0)))
      return tpx_error_set(err, TPX_VALIDATION, "model: layer %lld lacks a parameter %s needs",
                           (long long)l, net->cfg.arch);
  }
  return TPX_OK;
}

void tr_net_free(tr_net *net) {
  if (net) { free(net->L); net->L = NULL; }
}

/* ---- building blocks ---- */

#define CK(x) do { if ((st = (x)) != TPX_OK) goto done; } while (0)

static tpx_status act_copy(tr_act *dst, const tr_act *src, tpx_error *err) {
  tpx_status st = tr_act_alloc(dst, src->b, src->s, src->f, err);
  float *d = dst->d;
  *dst = *src; /* shapes and DTensor metadata */
  dst->d = d;
  if (!st) memcpy(dst->d, src->d, sizeof(float) * (size_t)tr_act_numel(src));
  return st;
}

static void act_add(tr_act *dst, const tr_act *src) {
  int64_t n = tr_act_numel(dst);
  for (int64_t i = 0; i < n; i++) dst->d[i] += src->d[i];
}

/* linear module: xin = T_in(x) kept in *saved, y = T_out(xin W^T + b) */
static tpx_status lin_fwd(tr_rank *r, int64_t module, int64_t pw, int64_t pb, const tr_act *x,
                          tr_act *saved, tr_act *y, tpx_error *err) {
  tpx_status st;
  memset(y, 0, sizeof *y);
  CK(act_copy(saved, x, err));
  CK(tr_transition(r, module, 0, 0, saved, err));
  int64_t out = tr_param_dim(r, pw, 0), in = tr_param_dim(r, pw, 1);
  if (saved->f != in) {
    st = tpx_error_set(err, TPX_INTERNAL, "linear module %lld: input width %lld, weight in %lld",
                       (long long)module, (long long)saved->f, (long long)in);
    goto done;
  }
  CK(tr_act_alloc(y, saved->b, saved->s, out, err));
  y->S = saved->S;
  y->F = tr_param_full_dim(r, pw, 0);
  tr_linear_fwd(saved->d, tr_param_w(r, pw), pb >= 0 ? tr_param_w(r, pb) : NULL, y->d,
                saved->b * saved->s, in, out);
  CK(tr_transition(r, module, 1, 0, y, err));
done:
  return st;
}

/* dy is consumed (transitioned); dx (shape of the module's input before
 * T_in) is set (first use) or accumulated into. */
static tpx_status lin_bwd(tr_rank *r, int64_t module, int64_t pw, int64_t pb, const tr_act *saved,
                          tr_act *dy, tr_act *dx, tpx_error *err) {
  tpx_status st;
  tr_act dxi = {0};
  CK(tr_transition(r, module, 1, 1, dy, err));
  int64_t out = tr_param_dim(r, pw, 0), in = tr_param_dim(r, pw, 1);
  CK(tr_act_alloc(&dxi, saved->b, saved->s, in, err));
  dxi.S = saved->S; dxi.F = saved->F;
  dxi.in_arr = saved->in_arr; dxi.in_arrl = saved->in_arrl;
  tr_linear_bwd(saved->d, tr_param_w(r, pw), dy->d, dxi.d, tr_param_g(r, pw),
                pb >= 0 ? tr_param_g(r, pb) : NULL, saved->b * saved->s, in, out, 0);
  CK(tr_transition(r, module, 0, 1, &dxi, err));
  if (!dx->d) { *dx = dxi; dxi.d = NULL; }
  else act_add(dx, &dxi);
done:
  tr_act_free(&dxi);
  return st;
}

/* norm module: xin = T_in(x) in *saved, y = T_out(rmsnorm(xin)) */
static tpx_status norm_fwd(tr_rank *r, int64_t module, int64_t pw, double eps, const tr_act *x,
                           tr_act *saved, float **rstd, tr_act *y, tpx_error *err) {
  tpx_status st;
  memset(y, 0, sizeof *y);
  CK(act_copy(saved, x, err));
  CK(tr_transition(r, module, 0, 0, saved, err));
  int64_t n = saved->b * saved->s;
  *rstd = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!*rstd) { st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory"); goto done; }
  CK(tr_act_alloc(y, saved->b, saved->s, saved->f, err));
  y->S = saved->S; y->F = saved->F;
  tr_rmsnorm_fwd(saved->d, tr_param_w(r, pw), y->d, *rstd, n, saved->f, eps);
  CK(tr_transition(r, module, 1, 0, y, err));
done:
  return st;
}

static tpx_status norm_bwd(tr_rank *r, int64_t module, int64_t pw, const tr_act *saved,
                           const float *rstd, tr_act *dy, tr_act *dx, tpx_error *err) {
  tpx_status st;
  memset(dx, 0, sizeof *dx);
  CK(tr_transition(r, module, 1, 1, dy, err));
  CK(tr_act_alloc(dx, saved->b, saved->s, saved->f, err));
  dx->S = saved->S; dx->F = saved->F;
  dx->in_arr = saved->in_arr; dx->in_arrl = saved->in_arrl;
  tr_rmsnorm_bwd(saved->d, tr_param_w(r, pw), rstd, dy->d, dx->d, tr_param_g(r, pw),
                 saved->b * saved->s, saved->f);
  CK(tr_transition(r, module, 0, 1, dx, err));
done:
  return st;
}

/* ---- one decoder layer ---- */

typedef struct layer_cache {
  tr_act n1_in, a_q, a_k, a_v, q_pre, k_pre, q, k, v, o_in, n2_in, a_g, a_u, g, u, m_in;
  float *rstd1, *rstd2, *rq, *rk, *p;
  tr_attn_shape ash;
} layer_cache;

static void cache_free(layer_cache *c) {
  tr_act *acts[] = {&c->n1_in, &c->a_q, &c->a_k, &c->a_v, &c->q_pre, &c->k_pre, &c->q, &c->k,
                    &c->v, &c->o_in, &c->n2_in, &c->a_g, &c->a_u, &c->g, &c->u, &c->m_in};
  for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) tr_act_free(acts[i]);
  free(c->rstd1); free(c->rstd2); free(c->rq); free(c->rk); free(c->p);
  memset(c, 0, sizeof *c);
}

typedef struct rope_tab {
  float *cosv, *sinv;
} rope_tab;

/* h: residual stream in, replaced by the layer's output */
static tpx_status layer_fwd(tr_net *net, tr_rank *r, int64_t l, const rope_tab *rt, tr_act *h,
                            layer_cache *c, tpx_error *err) {
  const tr_layer_ids *L = &net->L[l];
  const tr_config *cfg = &net->cfg;
  tpx_status st;
  tr_act a = {0}, o = {0}, o_out = {0}, g_out = {0}, m = {0}, d = {0};
  CK(norm_fwd(r, L->m_in_norm, L->in_norm, cfg->eps, h, &c->n1_in, &c->rstd1, &a, err));
  CK(lin_fwd(r, L->m_q, L->q, L->qb, &a, &c->a_q, &c->q, err));
  CK(lin_fwd(r, L->m_k, L->k, L->kb, &a, &c->a_k, &c->k, err));
  CK(lin_fwd(r, L->m_v, L->v, L->vb, &a, &c->a_v, &c->v, err));
  int64_t hd = cfg->head_dim, b = c->q.b, t = c->q.s;
  c->ash = (tr_attn_shape){b, t, c->q.f / hd, c->k.f / hd, hd};
  if (c->ash.nkv <= 0 || c->ash.nh % c->ash.nkv || c->k.s != t || c->v.f != c->k.f) {
    st = tpx_error_set(err, TPX_INTERNAL, "layer %lld: local heads %lld / kv heads %lld do not fit",
                       (long long)l, (long long)c->ash.nh, (long long)c->ash.nkv);
    goto done;
  }
  if (cfg->qk_norm) {
    int64_t nq = b * t * c->ash.nh, nk = b * t * c->ash.nkv;
    CK(act_copy(&c->q_pre, &c->q, err));
    CK(act_copy(&c->k_pre, &c->k, err));
    c->rq = malloc(sizeof(float) * (size_t)(nq ? nq : 1));
    c->rk = malloc(sizeof(float) * (size_t)(nk ? nk : 1));
    if (!c->rq || !c->rk) { st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory"); goto done; }
    tr_rmsnorm_fwd(c->q_pre.d, tr_param_w(r, L->qn), c->q.d, c->rq, nq, hd, cfg->eps);
    tr_rmsnorm_fwd(c->k_pre.d, tr_param_w(r, L->kn), c->k.d, c->rk, nk, hd, cfg->eps);
  }
  tr_rope(c->q.d, b, t, c->ash.nh, hd, rt->cosv, rt->sinv, 0);
  tr_rope(c->k.d, b, t, c->ash.nkv, hd, rt->cosv, rt->sinv, 0);
  c->p = malloc(sizeof(float) * (size_t)(b * c->ash.nh * t * t + 1));
  if (!c->p) { st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory (attention)"); goto done; }
  CK(tr_act_alloc(&o, b, t, c->q.f, err));
  o.S = c->q.S; o.F = c->q.F;
  tr_attn_fwd(&c->ash, c->q.d, c->k.d, c->v.d, c->p, o.d);
  CK(lin_fwd(r, L->m_o, L->o, -1, &o, &c->o_in, &o_out, err));
  act_add(h, &o_out);
  tr_act_free(&a);
  CK(norm_fwd(r, L->m_post_norm, L->post_norm, cfg->eps, h, &c->n2_in, &c->rstd2, &a, err));
  CK(lin_fwd(r, L->m_gate, L->gate, -1, &a, &c->a_g, &c->g, err));
  CK(lin_fwd(r, L->m_up, L->up, -1, &a, &c->a_u, &c->u, err));
  CK(tr_act_alloc(&m, c->g.b, c->g.s, c->g.f, err));
  m.S = c->g.S; m.F = c->g.F;
  tr_swiglu_fwd(c->g.d, c->u.d, m.d, tr_act_numel(&m));
  CK(lin_fwd(r, L->m_down, L->down, -1, &m, &c->m_in, &d, err));
  act_add(h, &d);
done:
  tr_act_free(&a); tr_act_free(&o); tr_act_free(&o_out); tr_act_free(&g_out);
  tr_act_free(&m); tr_act_free(&d);
  return st;
}

/* dh: grad of the layer output, replaced by the grad of its input */
static tpx_status layer_bwd(tr_net *net, tr_rank *r, int64_t l, const rope_tab *rt, tr_act *dh,
                            layer_cache *c, tpx_error *err) {
  const tr_layer_ids *L = &net->L[l];
  const tr_config *cfg = &net->cfg;
  tpx_status st;
  tr_act dy = {0}, dm = {0}, dg = {0}, du = {0}, da = {0}, dx = {0}, dq = {0}, dk = {0},
         dv = {0}, dqn = {0}, dkn = {0};
  int64_t hd = cfg->head_dim;
  /* MLP */
  CK(act_copy(&dy, dh, err));
  CK(lin_bwd(r, L->m_down, L->down, -1, &c->m_in, &dy, &dm, err));
  CK(tr_act_alloc(&dg, dm.b, dm.s, dm.f, err));
  CK(tr_act_alloc(&du, dm.b, dm.s, dm.f, err));
  dg.S = du.S = dm.S; dg.F = du.F = dm.F;
  tr_swiglu_bwd(c->g.d, c->u.d, dm.d, dg.d, du.d, tr_act_numel(&dm));
  CK(lin_bwd(r, L->m_gate, L->gate, -1, &c->a_g, &dg, &da, err));
  CK(lin_bwd(r, L->m_up, L->up, -1, &c->a_u, &du, &da, err));
  CK(norm_bwd(r, L->m_post_norm, L->post_norm, &c->n2_in, c->rstd2, &da, &dx, err));
  act_add(dh, &dx);
  tr_act_free(&dy); tr_act_free(&da); tr_act_free(&dx); tr_act_free(&dm);
  /* attention */
  CK(act_copy(&dy, dh, err));
  CK(lin_bwd(r, L->m_o, L->o, -1, &c->o_in, &dy, &dm, err));
  CK(tr_act_alloc(&dq, c->q.b, c->q.s, c->q.f, err));
  CK(tr_act_alloc(&dk, c->k.b, c->k.s, c->k.f, err));
  CK(tr_act_alloc(&dv, c->v.b, c->v.s, c->v.f, err));
  dq.S = c->q.S; dq.F = c->q.F; dk.S = c->k.S; dk.F = c->k.F; dv.S = c->v.S; dv.F = c->v.F;
  tr_attn_bwd(&c->ash, c->q.d, c->k.d, c->v.d, c->p, dm.d, dq.d, dk.d, dv.d);
  int64_t b = c->ash.b, t = c->ash.t;
  tr_rope(dq.d, b, t, c->ash.nh, hd, rt->cosv, rt->sinv, 1);
  tr_rope(dk.d, b, t, c->ash.nkv, hd, rt->cosv, rt->sinv, 1);
  if (cfg->qk_norm) {
    CK(tr_act_alloc(&dqn, dq.b, dq.s, dq.f, err));
    CK(tr_act_alloc(&dkn, dk.b, dk.s, dk.f, err));
    dqn.S = dq.S; dqn.F = dq.F; dkn.S = dk.S; dkn.F = dk.F;
    tr_rmsnorm_bwd(c->q_pre.d, tr_param_w(r, L->qn), c->rq, dq.d, dqn.d, tr_param_g(r, L->qn),
                   b * t * c->ash.nh, hd);
    tr_rmsnorm_bwd(c->k_pre.d, tr_param_w(r, L->kn), c->rk, dk.d, dkn.d, tr_param_g(r, L->kn),
                   b * t * c->ash.nkv, hd);
    /* this rank saw only its heads: the norm weights' grads are partial;
     * tpx_tp_param_grad_needs_allreduce says so, and the glue's gradient
     * reduction sums them over tp */
    tr_act tmp = dq; dq = dqn; dqn = tmp;
    tmp = dk; dk = dkn; dkn = tmp;
  }
  CK(lin_bwd(r, L->m_q, L->q, L->qb, &c->a_q, &dq, &da, err));
  CK(lin_bwd(r, L->m_k, L->k, L->kb, &c->a_k, &dk, &da, err));
  CK(lin_bwd(r, L->m_v, L->v, L->vb, &c->a_v, &dv, &da, err));
  CK(norm_bwd(r, L->m_in_norm, L->in_norm, &c->n1_in, c->rstd1, &da, &dx, err));
  act_add(dh, &dx);
done:
  tr_act_free(&dy); tr_act_free(&dm); tr_act_free(&dg); tr_act_free(&du); tr_act_free(&da);
  tr_act_free(&dx); tr_act_free(&dq); tr_act_free(&dk); tr_act_free(&dv); tr_act_free(&dqn);
  tr_act_free(&dkn);
  return st;
}

/* ---- the whole model ---- */

tpx_status tr_net_step(tr_net *net, tr_rank *r, const int32_t *tokens, int64_t b, int64_t t,
                       double *loss, tpx_error *err) {
  const tr_config *cfg = &net->cfg;
  tpx_status st = TPX_OK;
  int64_t nl = cfg->layers;
  layer_cache *cache = calloc((size_t)(nl ? nl : 1), sizeof *cache);
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(b * t + 1));
  int32_t *tgt = malloc(sizeof(int32_t) * (size_t)(b * t + 1));
  rope_tab rt = {malloc(sizeof(float) * (size_t)(t * cfg->head_dim / 2 + 1)),
                 malloc(sizeof(float) * (size_t)(t * cfg->head_dim / 2 + 1))};
  double *inv_freq = malloc(sizeof(double) * (size_t)(cfg->head_dim / 2 + 1));
  tr_act h = {0}, fin_in = {0}, fin = {0}, lm_in = {0}, logits = {0}, dlogits = {0}, dfin = {0},
         dh = {0};
  float *rstd = NULL;
  if (!cache || !ids || !tgt || !rt.cosv || !rt.sinv || !inv_freq) {
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    goto done;
  }
  for (int64_t i = 0; i < b; i++)
    for (int64_t j = 0; j < t; j++) {
      ids[i * t + j] = tokens[i * (t + 1) + j];
      tgt[i * t + j] = tokens[i * (t + 1) + j + 1];
    }
  tr_rope_inv_freq(cfg, inv_freq);
  tr_rope_tables(rt.cosv, rt.sinv, t, cfg->head_dim, inv_freq);
  CK(tr_zero_grads(r, err));
  CK(tr_unit_unshard(r, -1, 0, err));
  CK(tr_embed_fwd(r, ids, b, t, &h, err));
  for (int64_t l = 0; l < nl; l++) {
    CK(tr_unit_unshard(r, l, 0, err));
    CK(layer_fwd(net, r, l, &rt, &h, &cache[l], err));
    CK(tr_unit_reshard(r, l, 0, err));
  }
  CK(norm_fwd(r, net->m_norm, net->norm, cfg->eps, &h, &fin_in, &rstd, &fin, err));
  CK(lin_fwd(r, net->m_lm_head, net->lm_head, -1, &fin, &lm_in, &logits, err));
  CK(tr_act_alloc(&dlogits, logits.b, logits.s, logits.f, err));
  dlogits.S = logits.S; dlogits.F = logits.F;
  CK(tr_cross_entropy(r, &logits, tgt, loss, &dlogits, err));
  CK(tr_unit_unshard(r, -1, 1, err));
  CK(lin_bwd(r, net->m_lm_head, net->lm_head, -1, &lm_in, &dlogits, &dfin, err));
  CK(norm_bwd(r, net->m_norm, net->norm, &fin_in, rstd, &dfin, &dh, err));
  for (int64_t l = nl - 1; l >= 0; l--) {
    CK(tr_unit_unshard(r, l, 1, err));
    CK(layer_bwd(net, r, l, &rt, &dh, &cache[l], err));
    CK(tr_unit_reduce_grads(r, l, err));
    CK(tr_unit_reshard(r, l, 1, err));
    cache_free(&cache[l]);
  }
  CK(tr_embed_bwd(r, ids, b, t, &dh, err));
  CK(tr_unit_reduce_grads(r, -1, err));
  CK(tr_unit_reshard(r, -1, 1, err));
done:
  if (cache)
    for (int64_t l = 0; l < nl; l++) cache_free(&cache[l]);
  free(cache); free(ids); free(tgt); free(rt.cosv); free(rt.sinv); free(rstd);
  free(inv_freq);
  tr_act *acts[] = {&h, &fin_in, &fin, &lm_in, &logits, &dlogits, &dfin, &dh};
  for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) tr_act_free(acts[i]);
  return st;
}
