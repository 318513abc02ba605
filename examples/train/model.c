/* model.c — the Llama/Qwen2/Qwen3 decoder, forward and backward, over the
 * glue: every styled module is entered and left through tr_transition, the
 * embedding and the loss go through the glue's vocab-parallel calls, and
 * every size is TP-local (read from the local parameter shapes), so the same
 * code runs on any mesh. Under context parallelism each rank computes its
 * positions of the sequence (tpx_cp_positions: RoPE at those global
 * positions) and attention gathers K and V over cp (forward, and again in
 * backward) and reduce-scatters their gradients (docs/SEMANTICS.md
 * "Context parallelism"). A step's activations come from the net's arena
 * (arena.c); the step itself allocates nothing, and what is dead below a
 * live buffer is given back as torch frees it (keep_only: a transition's
 * local input, a backward's temporaries, the head and its logits before
 * the layers' backward). Under activation
 * checkpointing (tr_net.ckpt) a layer, or its attention and MLP, gives
 * its activations back to the arena after the forward and runs its
 * forward again in backward (layer_bwd; docs/TRAIN.md "Activation
 * checkpointing"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

tpx_status tr_net_init(tr_net *net, const tpx_model *model, tpx_error *err) {
  memset(net, 0, sizeof *net);
  if (tr_config_read(model, &net->cfg, err))
    return err ? err->status : TPX_VALIDATION;
  tpx_status st = tr_params_find(model, &net->cfg, &net->params, err);
  if (st)
    return st;
  size_t nl = (size_t)(net->cfg.layers ? net->cfg.layers : 1);
  net->acts = calloc(nl, sizeof *net->acts);
  if (!net->acts)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return TPX_OK;
}

void tr_net_free(tr_net *net) {
  if (!net)
    return;
  for (int64_t l = 0; net->acts && l < net->cfg.layers; l++)
    tr_moe_acts_release(&net->acts[l].moe);
  tr_params_free(&net->params, net->cfg.layers);
  free(net->acts);
  free(net->ids);
  free(net->targets);
  free(net->rope_cos);
  free(net->rope_sin);
  free(net->pos);
  tr_arena_free(&net->arena);
  memset(net, 0, sizeof *net);
}

int64_t tr_net_activation_bytes(const tr_net *net) {
  return (int64_t)net->arena.peak;
}

/* ---- building blocks ---- */

/* What every block needs: the rank's glue, the arena, the error. */
typedef struct ctx {
  tr_rank *r;
  tr_arena *ar;
  tpx_error *err;
} ctx;

#define CK(x)                                                                  \
  do {                                                                         \
    if ((st = (x)) != TPX_OK)                                                  \
      return st;                                                               \
  } while (0)

/* An activation shaped as `like` (sizes and logical extents only), for
 * one of the trainer's kernels to fill whole (not zeroed). */
static tpx_status act_like(ctx *c, tr_act *a, const tr_act *like) {
  tpx_status st = tr_act_alloc(c->ar, a, like->b, like->s, like->f, 0, c->err);
  a->S = like->S;
  a->F = like->F;
  return st;
}

static tpx_status floats(ctx *c, float **p, int64_t n) {
  *p = tr_arena_floats(c->ar, n, 0, c->err);
  return *p ? TPX_OK : TPX_NO_MEMORY;
}

static void act_add(tr_act *dst, const tr_act *src) {
  int64_t n = tr_act_numel(dst);
  TR_PARALLEL_FOR(n)
  for (int64_t i = 0; i < n; i++) dst->d[i] += src->d[i];
}

/* x, the last thing taken from the arena, keeps its values and takes the
 * place of everything taken since the mark: an output transition's
 * result replaces the local output it was reduced or gathered from, a
 * backward's result the temporaries it came from (torch frees those once
 * nothing refers to them). */
static tpx_status keep_only(ctx *c, size_t mark, tr_act *x) {
  if (tr_arena_mark(c->ar) == mark)
    return TPX_OK;
  float *d = tr_arena_lower(c->ar, mark, x->d, tr_act_numel(x), c->err);
  if (!d)
    return TPX_NO_MEMORY;
  x->d = d;
  return TPX_OK;
}

/* The residual stream: h = h + y, written into y's buffer (y is not kept),
 * so the old h, which a norm keeps as its input, stays intact. */
static void residual_add(tr_act *h, tr_act *y) {
  int64_t n = tr_act_numel(h);
  TR_PARALLEL_FOR(n)
  for (int64_t i = 0; i < n; i++) y->d[i] += h->d[i];
  h->d = y->d;
}

/* A linear module's input side: *in = T_in(x), kept for backward. A
 * recompute stops here at a region's last linear, whose output nothing in
 * backward needs (torch's non-reentrant checkpoint stops its recompute
 * once every saved tensor is back). */
static tpx_status linear_in(ctx *c, const tr_module *mod, const tr_act *x,
                            tr_act *in) {
  *in = *x;
  return tr_transition(c->r, c->ar, mod->m, 0, 0, in, c->err);
}

/* A linear module: *in = T_in(x), kept for backward; y = T_out(in W^T + b). */
static tpx_status linear_fwd(ctx *c, const tr_module *mod, const tr_act *x,
                             tr_act *in, tr_act *y) {
  tpx_status st;
  CK(linear_in(c, mod, x, in));
  int64_t out = tr_param_dim(c->r, mod->w, 0);
  int64_t width = tr_param_dim(c->r, mod->w, 1);
  if (in->f != width)
    return tpx_error_set(c->err, TPX_INTERNAL,
                         "linear module %lld: input width %lld, weight in %lld",
                         (long long)mod->m, (long long)in->f, (long long)width);
  size_t mark = tr_arena_mark(c->ar);
  CK(tr_act_alloc(c->ar, y, in->b, in->s, out, 0, c->err));
  y->S = in->S;
  y->F = tr_param_full_dim(c->r, mod->w, 0);
  tr_linear_fwd(in->d, tr_param_w(c->r, mod->w), tr_param_w(c->r, mod->b), y->d,
                in->b * in->s, width, out);
  float *local = y->d;
  CK(tr_transition(c->r, c->ar, mod->m, 1, 0, y, c->err));
  return y->d == local ? TPX_OK : keep_only(c, mark, y);
}

/* dy is consumed (transitioned); dx (the shape of the module's input
 * before T_in) is set on first use and accumulated into after. */
static tpx_status linear_bwd(ctx *c, const tr_module *mod, const tr_act *in,
                             tr_act *dy, tr_act *dx) {
  tpx_status st;
  tr_act dxi;
  size_t mark = tr_arena_mark(c->ar);
  CK(tr_transition(c->r, c->ar, mod->m, 1, 1, dy, c->err));
  int64_t out = tr_param_dim(c->r, mod->w, 0);
  int64_t width = tr_param_dim(c->r, mod->w, 1);
  CK(act_like(c, &dxi, in));
  dxi.flow = in->flow;
  tr_linear_bwd(in->d, tr_param_w(c->r, mod->w), dy->d, dxi.d,
                tr_param_g(c->r, mod->w), tr_param_g(c->r, mod->b),
                in->b * in->s, width, out, 0);
  CK(tr_transition(c->r, c->ar, mod->m, 0, 1, &dxi, c->err));
  /* dy's transition, dxi and its transition are dead once dx holds them */
  if (!dx->d) {
    *dx = dxi;
    return keep_only(c, mark, dx);
  }
  act_add(dx, &dxi);
  tr_arena_pop(c->ar, mark);
  return TPX_OK;
}

/* An RMSNorm module: *in = T_in(x) and its rstd kept; y = T_out(norm). */
static tpx_status norm_fwd(ctx *c, const tr_module *mod, double eps,
                           const tr_act *x, tr_act *in, float **rstd,
                           tr_act *y) {
  tpx_status st;
  *in = *x;
  CK(tr_transition(c->r, c->ar, mod->m, 0, 0, in, c->err));
  int64_t n = in->b * in->s;
  CK(floats(c, rstd, n));
  size_t mark = tr_arena_mark(c->ar);
  CK(act_like(c, y, in));
  tr_rmsnorm_fwd(in->d, tr_param_w(c->r, mod->w), y->d, *rstd, n, in->f, eps);
  float *local = y->d;
  CK(tr_transition(c->r, c->ar, mod->m, 1, 0, y, c->err));
  return y->d == local ? TPX_OK : keep_only(c, mark, y);
}

/* dy is consumed; *dx is set to the grad of the module's input. */
static tpx_status norm_bwd(ctx *c, const tr_module *mod, const tr_act *in,
                           const float *rstd, tr_act *dy, tr_act *dx) {
  tpx_status st;
  size_t mark = tr_arena_mark(c->ar);
  CK(tr_transition(c->r, c->ar, mod->m, 1, 1, dy, c->err));
  CK(act_like(c, dx, in));
  dx->flow = in->flow;
  tr_rmsnorm_bwd(in->d, tr_param_w(c->r, mod->w), rstd, dy->d, dx->d,
                 tr_param_g(c->r, mod->w), in->b * in->s, in->f);
  CK(tr_transition(c->r, c->ar, mod->m, 0, 1, dx, c->err));
  return keep_only(c, mark, dx);
}

/* Qwen3's q_norm / k_norm: RMSNorm over each head of x [b, t, n*hd];
 * *raw keeps x, *y the normed copy. Not a styled module here: each rank
 * normalises its own heads. */
static tpx_status head_norm_fwd(ctx *c, const tr_module *mod, double eps,
                                int64_t hd, tr_act *x, tr_act *raw,
                                float **rstd) {
  tpx_status st;
  int64_t rows = x->b * x->s * (x->f / hd);
  *raw = *x;
  CK(floats(c, rstd, rows));
  CK(act_like(c, x, raw));
  tr_rmsnorm_fwd(raw->d, tr_param_w(c->r, mod->w), x->d, *rstd, rows, hd, eps);
  return TPX_OK;
}

/* dy is replaced by the grad of the norm's input. The norm weight's grad
 * is partial (this rank saw only its heads): tpx_tp_param_grad_needs_
 * allreduce says so, and the glue's gradient reduction sums it over tp. */
static tpx_status head_norm_bwd(ctx *c, const tr_module *mod, int64_t hd,
                                const tr_act *raw, const float *rstd,
                                tr_act *dy) {
  tpx_status st;
  tr_act dx;
  CK(act_like(c, &dx, dy));
  tr_rmsnorm_bwd(raw->d, tr_param_w(c->r, mod->w), rstd, dy->d, dx.d,
                 tr_param_g(c->r, mod->w), raw->b * raw->s * (raw->f / hd), hd);
  *dy = dx;
  return TPX_OK;
}

/* ---- one decoder layer ---- */

/* The local heads q_proj / k_proj produced, checked against each other. */
static tpx_status attn_shape(ctx *c, int64_t l, int64_t hd, tr_layer_acts *a) {
  tr_attn_shape *sh = &a->ash;
  *sh = (tr_attn_shape){a->q.b, a->q.s, a->q.f / hd, a->k.f / hd, hd, 0, NULL};
  if (sh->nkv <= 0 || sh->nh % sh->nkv || a->k.s != sh->t || a->v.f != a->k.f)
    return tpx_error_set(
        c->err, TPX_INTERNAL,
        "layer %lld: local heads %lld / kv heads %lld do not fit", (long long)l,
        (long long)sh->nh, (long long)sh->nkv);
  return TPX_OK;
}

static int64_t attn_keys(const tr_attn_shape *sh) {
  return sh->tk ? sh->tk : sh->t;
}

/* Under cp: the layer's K and V of the whole sequence, into the net's
 * one-layer buffers (position order); queries see keys up to their
 * global position. */
static tpx_status gather_kv(tr_net *net, ctx *c, tr_layer_acts *a) {
  tpx_status st;
  tr_attn_shape *sh = &a->ash;
  sh->tk = net->seq;
  sh->qpos = net->pos;
  CK(tr_cp_gather(c->r, a->k.d, net->k_full, sh->b, sh->t, a->k.f, c->err));
  return tr_cp_gather(c->r, a->v.d, net->v_full, sh->b, sh->t, a->v.f, c->err);
}

/* Attention's backward: dq, dk, dv (this rank's positions) from dout.
 * Under cp, K and V are gathered again (the forward's buffers hold the
 * last layer's) and the gradients of the whole sequence's keys and values
 * are summed over cp into this rank's positions. */
static tpx_status attn_bwd(tr_net *net, ctx *c, tr_layer_acts *a,
                           const tr_act *dout, tr_act *dq, tr_act *dk,
                           tr_act *dv) {
  tpx_status st;
  const tr_attn_shape *sh = &a->ash;
  float *ds, *dkf = dk->d, *dvf = dv->d;
  const float *k = a->k.d, *v = a->v.d;
  int64_t kv = sh->b * attn_keys(sh) * a->k.f;
  CK(floats(c, &ds, sh->b * sh->nh * sh->t * attn_keys(sh)));
  if (net->cp.size > 1) {
    CK(gather_kv(net, c, a));
    k = net->k_full;
    v = net->v_full;
    CK(floats(c, &dkf, kv));
    CK(floats(c, &dvf, kv));
  }
  tr_attn_bwd(sh, a->q.d, k, v, a->att, dout->d, dq->d, dkf, dvf, ds);
  if (net->cp.size == 1)
    return TPX_OK;
  CK(tr_cp_reduce_scatter(c->r, dkf, dk->d, sh->b, sh->t, a->k.f, c->err));
  return tr_cp_reduce_scatter(c->r, dvf, dv->d, sh->b, sh->t, a->v.f, c->err);
}

/* self_attn: x (input_layernorm's output) -> y (o_proj's output, the
 * residual stream's layout). `full` 0, a recompute, stops at o_proj's
 * input (linear_in). */
static tpx_status attn_fwd(tr_net *net, ctx *c, int64_t l, const tr_act *x,
                           tr_act *y, int full) {
  const tr_config *cfg = &net->cfg;
  const tr_layer *L = &net->params.layers[l];
  tr_layer_acts *a = &net->acts[l];
  int64_t hd = cfg->head_dim;
  tpx_status st;
  tr_act o;
  /* q, k, v; RoPE; softmax(q k^T) v; o_proj */
  CK(linear_fwd(c, &L->q_proj, x, &a->q_in, &a->q));
  CK(linear_fwd(c, &L->k_proj, x, &a->k_in, &a->k));
  CK(linear_fwd(c, &L->v_proj, x, &a->v_in, &a->v));
  CK(attn_shape(c, l, hd, a));
  if (cfg->qk_norm) {
    CK(head_norm_fwd(c, &L->q_norm, cfg->eps, hd, &a->q, &a->q_raw,
                     &a->q_rstd));
    CK(head_norm_fwd(c, &L->k_norm, cfg->eps, hd, &a->k, &a->k_raw,
                     &a->k_rstd));
  }
  const tr_attn_shape *sh = &a->ash;
  tr_rope(a->q.d, sh->b, sh->t, sh->nh, hd, net->rope_cos, net->rope_sin, 0);
  tr_rope(a->k.d, sh->b, sh->t, sh->nkv, hd, net->rope_cos, net->rope_sin, 0);
  const float *k = a->k.d, *v = a->v.d;
  if (net->cp.size > 1) {
    CK(gather_kv(net, c, a));
    k = net->k_full;
    v = net->v_full;
  }
  CK(floats(c, &a->att, sh->b * sh->nh * sh->t * attn_keys(sh)));
  CK(act_like(c, &o, &a->q));
  tr_attn_fwd(sh, a->q.d, k, v, a->att, o.d);
  if (!full)
    return linear_in(c, &L->o_proj, &o, &a->o_in);
  return linear_fwd(c, &L->o_proj, &o, &a->o_in, y);
}

/* A SwiGLU MLP: x -> y = down(silu(gate(x)) * up(x)); a recompute
 * (`full` 0) stops at down_proj's input. */
static tpx_status swiglu_mlp_fwd(ctx *c, const tr_mlp *P, tr_mlp_acts *a,
                                 const tr_act *x, tr_act *y, int full) {
  tpx_status st;
  tr_act m;
  CK(linear_fwd(c, &P->gate_proj, x, &a->gate_in, &a->gate));
  CK(linear_fwd(c, &P->up_proj, x, &a->up_in, &a->up));
  CK(act_like(c, &m, &a->gate));
  tr_swiglu_fwd(a->gate.d, a->up.d, m.d, tr_act_numel(&m));
  if (!full)
    return linear_in(c, &P->down_proj, &m, &a->down_in);
  return linear_fwd(c, &P->down_proj, &m, &a->down_in, y);
}

/* An MoE layer's mlp: the routed experts (moe.c), plus the shared experts
 * where the layer has them (a plain MLP on the same input, added). A
 * forward whose activations are dropped (checkpointing, `full` 1) lets
 * the dispatch go; its recompute (`full` 0) keeps the new one for the
 * backward. */
static tpx_status moe_mlp_fwd(tr_net *net, ctx *c, int64_t l, const tr_act *x,
                              tr_act *y, int full) {
  const tr_layer *L = &net->params.layers[l];
  tr_layer_acts *a = &net->acts[l];
  int keep = net->ckpt == TR_CKPT_NONE || !full;
  tpx_status st;
  tr_act ys;
  CK(tr_moe_fwd(net, c->r, c->ar, l, x, y, keep, c->err));
  if (L->shared.down_proj.w < 0)
    return TPX_OK;
  CK(swiglu_mlp_fwd(c, &L->shared, &a->shared, x, &ys, full));
  if (full)
    act_add(y, &ys);
  return TPX_OK;
}

/* mlp: x (post_attention_layernorm's output) -> y; a recompute (`full` 0)
 * keeps what the backward needs and may leave y unset. */
static tpx_status mlp_fwd(tr_net *net, ctx *c, int64_t l, const tr_act *x,
                          tr_act *y, int full) {
  const tr_layer *L = &net->params.layers[l];
  if (L->moe)
    return moe_mlp_fwd(net, c, l, x, y, full);
  return swiglu_mlp_fwd(c, &L->mlp, &net->acts[l].mlp, x, y, full);
}

/* A region run forward without keeping its activations (checkpointing):
 * its output y, shaped as the residual stream h, lands in a buffer taken
 * before the region, and all the region took after it is given back at
 * once; backward runs the region again (recompute). */
typedef tpx_status (*region_fwd)(tr_net *net, ctx *c, int64_t l,
                                 const tr_act *x, tr_act *y, int full);

static tpx_status dropped_fwd(tr_net *net, ctx *c, int64_t l, region_fwd f,
                              const tr_act *x, const tr_act *h, tr_act *y) {
  tpx_status st;
  tr_act keep;
  CK(act_like(c, &keep, h));
  size_t mark = tr_arena_mark(c->ar);
  CK(f(net, c, l, x, y, 1));
  if (tr_act_numel(y) != tr_act_numel(h))
    return tpx_error_set(c->err, TPX_INTERNAL,
                         "layer %lld: a region's output holds %lld values, "
                         "the residual stream %lld",
                         (long long)l, (long long)tr_act_numel(y),
                         (long long)tr_act_numel(h));
  memcpy(keep.d, y->d, sizeof(float) * (size_t)tr_act_numel(h));
  tr_arena_pop(c->ar, mark);
  y->d = keep.d;
  return TPX_OK;
}

/* The layer on h, the residual stream in, replaced by the layer's output:
 * input_layernorm, self_attn, the residual; post_attention_layernorm,
 * mlp, the residual. Under TR_CKPT_MODULES self_attn and mlp keep nothing
 * (dropped_fwd), the norms keep what they keep without. A recompute
 * (`full` 0, TR_CKPT_LAYER's backward) stops at down_proj's input. */
static tpx_status layer_body(tr_net *net, ctx *c, int64_t l, tr_act *h,
                             int full) {
  const tr_config *cfg = &net->cfg;
  const tr_layer *L = &net->params.layers[l];
  tr_layer_acts *a = &net->acts[l];
  int drop = net->ckpt == TR_CKPT_MODULES;
  tpx_status st;
  tr_act y;
  CK(norm_fwd(c, &L->input_layernorm, cfg->eps, h, &a->ln1_in, &a->ln1_rstd,
              &a->attn_x));
  CK(drop ? dropped_fwd(net, c, l, attn_fwd, &a->attn_x, h, &y)
          : attn_fwd(net, c, l, &a->attn_x, &y, 1));
  residual_add(h, &y);
  CK(norm_fwd(c, &L->post_attention_layernorm, cfg->eps, h, &a->ln2_in,
              &a->ln2_rstd, &a->mlp_x));
  CK(drop ? dropped_fwd(net, c, l, mlp_fwd, &a->mlp_x, h, &y)
          : mlp_fwd(net, c, l, &a->mlp_x, &y, full));
  if (full)
    residual_add(h, &y);
  return TPX_OK;
}

/* The whole layer as a region (TR_CKPT_LAYER): x in, y out. */
static tpx_status layer_region(tr_net *net, ctx *c, int64_t l, const tr_act *x,
                               tr_act *y, int full) {
  *y = *x;
  return layer_body(net, c, l, y, full);
}

/* h: the residual stream in, replaced by the layer's output. */
static tpx_status layer_fwd(tr_net *net, ctx *c, int64_t l, tr_act *h) {
  tr_layer_acts *a = &net->acts[l];
  tpx_status st;
  tr_act y;
  tr_moe_acts_release(&a->moe);
  memset(a, 0, sizeof *a);
  a->in = *h;
  if (net->ckpt != TR_CKPT_LAYER)
    return layer_body(net, c, l, h, 1);
  CK(dropped_fwd(net, c, l, layer_region, h, h, &y));
  h->d = y.d;
  return TPX_OK;
}

/* A SwiGLU MLP's backward: dy (consumed by the output transition) ->
 * dx (set on first use, accumulated into after). */
static tpx_status swiglu_mlp_bwd(ctx *c, const tr_mlp *P, tr_mlp_acts *a,
                                 tr_act *dy, tr_act *dx) {
  tpx_status st;
  tr_act dm = {0}, dg, du;
  CK(linear_bwd(c, &P->down_proj, &a->down_in, dy, &dm));
  CK(act_like(c, &dg, &dm));
  CK(act_like(c, &du, &dm));
  tr_swiglu_bwd(a->gate.d, a->up.d, dm.d, dg.d, du.d, tr_act_numel(&dm));
  CK(linear_bwd(c, &P->gate_proj, &a->gate_in, &dg, dx));
  return linear_bwd(c, &P->up_proj, &a->up_in, &du, dx);
}

/* The MLP's backward: dh, the grad of the layer's output, gets the grad
 * of the MLP's input through post_attention_layernorm added in. The
 * gradient starts from dh (dy: the same buffer, consumed by the output
 * transition). An MoE layer's: the shared experts', then the routed
 * experts' added (moe.c). */
static tpx_status mlp_bwd(tr_net *net, ctx *c, int64_t l, tr_act *dh) {
  const tr_layer *L = &net->params.layers[l];
  tr_layer_acts *a = &net->acts[l];
  tpx_status st;
  tr_act dy = *dh, dx = {0}, dn;
  if (!L->moe) {
    CK(swiglu_mlp_bwd(c, &L->mlp, &a->mlp, &dy, &dx));
  } else {
    if (L->shared.down_proj.w >= 0)
      CK(swiglu_mlp_bwd(c, &L->shared, &a->shared, &dy, &dx));
    CK(tr_moe_bwd(net, c->r, c->ar, l, &a->mlp_x, dh, &dx, c->err));
  }
  CK(norm_bwd(c, &L->post_attention_layernorm, &a->ln2_in, a->ln2_rstd, &dx,
              &dn));
  act_add(dh, &dn);
  return TPX_OK;
}

/* The attention's backward, as mlp_bwd: dh (the grad of the attention's
 * residual output) gets the grad through input_layernorm added in. */
static tpx_status attn_block_bwd(tr_net *net, ctx *c, int64_t l, tr_act *dh) {
  const tr_layer *L = &net->params.layers[l];
  tr_layer_acts *a = &net->acts[l];
  const tr_attn_shape *sh = &a->ash;
  int64_t hd = net->cfg.head_dim;
  tpx_status st;
  tr_act dy = *dh, dout = {0}, dq, dk, dv, dxa = {0}, dn;
  CK(linear_bwd(c, &L->o_proj, &a->o_in, &dy, &dout));
  CK(act_like(c, &dq, &a->q));
  CK(act_like(c, &dk, &a->k));
  CK(act_like(c, &dv, &a->v));
  CK(attn_bwd(net, c, a, &dout, &dq, &dk, &dv));
  tr_rope(dq.d, sh->b, sh->t, sh->nh, hd, net->rope_cos, net->rope_sin, 1);
  tr_rope(dk.d, sh->b, sh->t, sh->nkv, hd, net->rope_cos, net->rope_sin, 1);
  if (net->cfg.qk_norm) {
    CK(head_norm_bwd(c, &L->q_norm, hd, &a->q_raw, a->q_rstd, &dq));
    CK(head_norm_bwd(c, &L->k_norm, hd, &a->k_raw, a->k_rstd, &dk));
  }
  CK(linear_bwd(c, &L->q_proj, &a->q_in, &dq, &dxa));
  CK(linear_bwd(c, &L->k_proj, &a->k_in, &dk, &dxa));
  CK(linear_bwd(c, &L->v_proj, &a->v_in, &dv, &dxa));
  CK(norm_bwd(c, &L->input_layernorm, &a->ln1_in, a->ln1_rstd, &dxa, &dn));
  act_add(dh, &dn);
  return TPX_OK;
}

/* dh: the grad of the layer's output, replaced by the grad of its input.
 * Under checkpointing the dropped regions run forward again first, with
 * the layer's unit unsharded for backward (the caller's), as FSDP2's
 * pre-backward unshard precedes checkpoint's recompute: the whole layer
 * from its input (TR_CKPT_LAYER), or the MLP from its input, its
 * backward, then the attention the same way (TR_CKPT_MODULES). What the
 * MLP's backward took is given back before the attention's. The values are
 * those of the forward, bit for bit: the same kernels on the same inputs, the
 * same transitions. */
static tpx_status layer_bwd(tr_net *net, ctx *c, int64_t l, tr_act *dh) {
  tr_layer_acts *a = &net->acts[l];
  int modules = net->ckpt == TR_CKPT_MODULES;
  tpx_status st;
  tr_act h = a->in, y;
  if (net->ckpt == TR_CKPT_LAYER)
    CK(layer_body(net, c, l, &h, 0));
  size_t mark = tr_arena_mark(c->ar);
  if (modules)
    CK(mlp_fwd(net, c, l, &a->mlp_x, &y, 0));
  CK(mlp_bwd(net, c, l, dh));
  /* the MLP's gradients (and its recompute) are dead: dh holds the sum */
  tr_arena_pop(c->ar, mark);
  if (modules)
    CK(attn_fwd(net, c, l, &a->attn_x, &y, 0));
  return attn_block_bwd(net, c, l, dh);
}

/* ---- the whole model ---- */

/* The RoPE tables at this rank's positions: the whole sequence's, then
 * the rows of pos. */
static tpx_status rope_setup(tr_net *net, tpx_error *err) {
  const tr_config *cfg = &net->cfg;
  size_t half = (size_t)(cfg->head_dim / 2);
  size_t all = (size_t)net->seq * half + 1;
  double *inv_freq = malloc(sizeof(double) * (half + 1));
  float *c = malloc(sizeof(float) * all), *s = malloc(sizeof(float) * all);
  net->rope_cos = malloc(sizeof(float) * ((size_t)net->t * half + 1));
  net->rope_sin = malloc(sizeof(float) * ((size_t)net->t * half + 1));
  tpx_status st = TPX_OK;
  if (!inv_freq || !c || !s || !net->rope_cos || !net->rope_sin)
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (!st) {
    tr_rope_inv_freq(cfg, inv_freq);
    tr_rope_tables(c, s, net->seq, cfg->head_dim, inv_freq);
    for (int64_t j = 0; j < net->t; j++) {
      memcpy(net->rope_cos + (size_t)j * half, c + net->pos[j] * (int64_t)half,
             sizeof(float) * half);
      memcpy(net->rope_sin + (size_t)j * half, s + net->pos[j] * (int64_t)half,
             sizeof(float) * half);
    }
  }
  free(inv_freq);
  free(c);
  free(s);
  return st;
}

/* The first step sizes what every step reuses: this rank's positions of
 * the sequence, token buffers and the RoPE tables. */
static tpx_status step_setup(tr_net *net, tr_rank *r, int64_t b, int64_t seq,
                             tpx_error *err) {
  if (net->ids) {
    if (b == net->b && seq == net->seq)
      return TPX_OK;
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "step of [%lld, %lld] tokens after [%lld, %lld]",
                         (long long)b, (long long)seq, (long long)net->b,
                         (long long)net->seq);
  }
  net->cp = tr_rank_cp(r);
  int64_t t = seq / net->cp.size;
  net->pos = malloc(sizeof(int64_t) * (size_t)(t + 1));
  net->ids = malloc(sizeof(int32_t) * (size_t)(b * t + 1));
  net->targets = malloc(sizeof(int32_t) * (size_t)(b * t + 1));
  if (!net->pos || !net->ids || !net->targets)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx_status st = tpx_cp_positions(seq, net->cp.size, net->cp.rank,
                                   net->cp.layout, net->pos, err);
  if (st)
    return st;
  net->b = b;
  net->t = t;
  net->seq = seq;
  return rope_setup(net, err);
}

/* Inputs tokens[:, :seq], targets tokens[:, 1:], at this rank's
 * positions. */
static void split_tokens(tr_net *net, const int32_t *tokens) {
  int64_t b = net->b, t = net->t, row = net->seq + 1;
  for (int64_t i = 0; i < b; i++)
    for (int64_t j = 0; j < t; j++) {
      net->ids[i * t + j] = tokens[i * row + net->pos[j]];
      net->targets[i * t + j] = tokens[i * row + net->pos[j] + 1];
    }
}

/* Under cp: the one-layer buffers of the gathered K and V, at the step's
 * start (the arena gives everything back at the next). */
static tpx_status kv_buffers(tr_net *net, ctx *c) {
  if (net->cp.size == 1 || !net->cfg.layers)
    return TPX_OK;
  tpx_status st;
  int64_t n =
      net->b * net->seq * tr_param_dim(c->r, net->params.layers[0].k_proj.w, 0);
  CK(floats(c, &net->k_full, n));
  return floats(c, &net->v_full, n);
}

/* *head: the arena's mark where the final norm and lm_head begin (what
 * backward gives back once the gradient reaches the last layer). */
static tpx_status forward(tr_net *net, ctx *c, tr_act *logits, tr_act *fin_in,
                          float **fin_rstd, tr_act *lm_in, size_t *head) {
  const tr_params *P = &net->params;
  tpx_status st;
  tr_act h, x;
  CK(tr_unit_unshard(c->r, -1, 0, c->err));
  CK(tr_embed_fwd(c->r, c->ar, net->ids, net->b, net->t, &h, c->err));
  for (int64_t l = 0; l < net->cfg.layers; l++) {
    CK(tr_unit_unshard(c->r, l, 0, c->err));
    CK(layer_fwd(net, c, l, &h));
    CK(tr_unit_reshard(c->r, l, 0, c->err));
  }
  *head = tr_arena_mark(c->ar);
  CK(norm_fwd(c, &P->norm, net->cfg.eps, &h, fin_in, fin_rstd, &x));
  return linear_fwd(c, &P->lm_head, &x, lm_in, logits);
}

static tpx_status backward(tr_net *net, ctx *c, tr_act *dlogits,
                           const tr_act *fin_in, const float *fin_rstd,
                           const tr_act *lm_in, size_t head) {
  const tr_params *P = &net->params;
  tpx_status st;
  tr_act dx = {0}, dh;
  CK(tr_unit_unshard(c->r, -1, 1, c->err));
  CK(linear_bwd(c, &P->lm_head, lm_in, dlogits, &dx));
  CK(norm_bwd(c, &P->norm, fin_in, fin_rstd, &dx, &dh));
  /* the head's activations and the logits' gradient are dead: the layers'
   * backward runs without the [b, t, vocab] buffer, as torch's has given
   * its loss's buffers back by then */
  CK(keep_only(c, head, &dh));
  for (int64_t l = net->cfg.layers - 1; l >= 0; l--) {
    size_t mark = tr_arena_mark(c->ar); /* dh stays below it */
    CK(tr_unit_unshard(c->r, l, 1, c->err));
    CK(layer_bwd(net, c, l, &dh));
    CK(tr_unit_reduce_grads(c->r, l, c->err));
    CK(tr_unit_reshard(c->r, l, 1, c->err));
    tr_arena_pop(c->ar, mark);
  }
  CK(tr_embed_bwd(c->r, net->ids, net->b, net->t, &dh, c->err));
  CK(tr_unit_reduce_grads(c->r, -1, c->err));
  return tr_unit_reshard(c->r, -1, 1, c->err);
}

tpx_status tr_net_step(tr_net *net, tr_rank *r, const int32_t *tokens,
                       int64_t b, int64_t t, double *loss, tpx_error *err) {
  ctx c = {r, &net->arena, err};
  tpx_status st;
  tr_act logits, dlogits, fin_in, lm_in;
  float *fin_rstd;
  size_t head;
  CK(step_setup(net, r, b, t, err));
  CK(tr_arena_reset(&net->arena, err));
  split_tokens(net, tokens);
  CK(kv_buffers(net, &c));
  CK(tr_zero_grads(r, err));
  CK(forward(net, &c, &logits, &fin_in, &fin_rstd, &lm_in, &head));
  /* the loss writes the gradient over the logits (runtime_tp.h allows
   * it): one [b, t, vocab] buffer through backward, not two, as torch's
   * loss keeps one f32 log-softmax */
  dlogits = (tr_act){.d = logits.d,
                     .b = logits.b,
                     .s = logits.s,
                     .f = logits.f,
                     .S = logits.S,
                     .F = logits.F};
  CK(tr_cross_entropy(r, &logits, net->targets, loss, &dlogits, err));
  CK(backward(net, &c, &dlogits, &fin_in, fin_rstd, &lm_in, head));
  /* the step's activations are dead: give them back now, so the first
   * step (the warm-up) regrows the block and the next ones find it ready */
  return tr_arena_reset(&net->arena, err);
}
