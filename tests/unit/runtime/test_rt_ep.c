/* test_rt_ep.c — the runtime at ep > 1 (docs/RUNTIME.md "Expert
 * parallelism") on the local backend, world 4, a hand-built MoE model (f32):
 *   model.embed_tokens                    weight [6, 4]
 *   model.layers.{0,1}.self_attn.q_proj   weight [4, 4]
 *   model.layers.{0,1}.mlp.gate           weight [4, 4] (the router)
 *   model.layers.{0,1}.mlp.experts        gate_and_up_projs [4, 5, 6],
 *                                         down_projs [4, 3, 5] (experts)
 *   model.norm                            weight [4]
 *   lm_head                               weight [6, 4]
 * on dp_shard 4 x ep 2 (experts units over ep_shard 2, dim 1 split
 * unevenly), dp_shard 4 x ep 4 (ep = world: experts in no FSDP unit),
 * dp_replicate 2 x dp_shard 2 x ep 2, dp_shard 2 x tp 2 x ep 2 (an ep
 * group of tp peers; no TP plan), dp_shard 2 x cp 2 x ep 2 and cp 2 x tp 2
 * x ep 4 (FSDP over dp_shard_cp), through the unit calls and through the
 * module hooks, with two micro-batches accumulating (ep 2 and 4), once with
 * CPU offload, twice with the world in the sim memory space (no host
 * access to a runtime buffer) and twice in bf16 compute over f32 storage
 * (gradients reduced in f32):
 *  - the ep / ep_shard comms: sizes, this rank's index, and their members
 *    (an ep group is ep consecutive ranks);
 *  - an expert parameter's local piece is [E/ep, ...] (this rank's experts
 *    whole) and its shard tpx_sharding_local_slice's; unshard gives the
 *    rank's experts exactly as loaded;
 *  - every rank writes its own gradients; after the reduction an expert's
 *    gradient is the sum over the ranks holding it divided by the world
 *    size, a non-expert one the sum over its data-parallel ranks divided by
 *    dp (gather_grad, on every rank, against values computed here);
 *  - grad norm (2 and inf) = the norm of those full gradients;
 *    gather_param returns the full [E, ...] tensors; clip + AdamW match the
 *    formula on the full tensors; allocated parameter and gradient bytes
 *    are the padded sums and the training-memory estimate's (tpx/memory.h);
 *  - a checkpoint written by every rank's shards at ep 2
 *    (tpx_checkpoint_write_rank) loads at ep 4 and at dp_replicate 2 x
 *    dp_shard 2 x ep 2 (tpx_runtime_load_safetensors) to the same values;
 *  - FSDP off at ep > 1 is refused, and so is an experts unit holding a
 *    parameter that is not an expert one; ep 1 has no ep comm.
 * Built twice: on local threads, and with RT_MPI as test_rt_ep_mpi, one
 * rank per process under mpirun -np 4 (the host cases). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_fsdp_fixture.h"
#include "tpx/checkpoint.h"
#include "tpx/memory.h"

#define NL 2
#define E 4

typedef struct ecase {
  const char *name;
  int64_t dpr, dps, tp, ep;
  int hooks;   /* 1: the backward through the module hooks */
  int offload; /* 1: CPU offload */
  int sim;     /* 1: the world's buffers in the sim memory space */
  int bf16;    /* 1: bf16 compute over f32 storage (reduce in f32) */
  int64_t cp;  /* > 1: mesh (dp_replicate, dp_shard, cp, tp), FSDP over
                  dp_shard_cp */
  int micro;   /* 2: two backward passes accumulate (0: one) */
} ecase;

static const ecase cases[] = {
    {"dps4 ep2", 1, 4, 1, 2, 0, 0, 0, 0, 0, 0},
    {"dps4 ep2 hooks", 1, 4, 1, 2, 1, 0, 0, 0, 0, 0},
    {"dps4 ep4", 1, 4, 1, 4, 0, 0, 0, 0, 0, 0},
    {"dps4 ep4 hooks", 1, 4, 1, 4, 1, 0, 0, 0, 0, 0},
    {"dps4 ep4 hooks 2 micro", 1, 4, 1, 4, 1, 0, 0, 0, 0, 2},
    {"dps4 ep2 hooks 2 micro", 1, 4, 1, 2, 1, 0, 0, 0, 0, 2},
    {"dpr2 dps2 ep2", 2, 2, 1, 2, 0, 0, 0, 0, 0, 0},
    {"dpr2 dps2 ep2 hooks", 2, 2, 1, 2, 1, 0, 0, 0, 0, 0},
    {"dps2 tp2 ep2", 1, 2, 2, 2, 1, 0, 0, 0, 0, 0},
    {"dps4 ep2 offload", 1, 4, 1, 2, 1, 1, 0, 0, 0, 0},
    {"dps4 ep2 sim", 1, 4, 1, 2, 1, 0, 1, 0, 0, 0},
    {"dps4 ep4 sim", 1, 4, 1, 4, 0, 1, 1, 0, 0, 0},
    {"dps4 ep2 bf16", 1, 4, 1, 2, 1, 0, 0, 1, 0, 0},
    {"dps4 ep4 bf16", 1, 4, 1, 4, 0, 0, 0, 1, 0, 0},
    {"dps2 cp2 ep2", 1, 2, 1, 2, 1, 0, 0, 0, 2, 0},
    {"cp2 tp2 ep4", 1, 1, 2, 4, 0, 0, 0, 0, 2, 0},
};

static const char *const expert_pats[2] = {
    "model.layers.*.mlp.experts.gate_and_up_projs",
    "model.layers.*.mlp.experts.down_projs"};

/* extra: one more parameter in experts module 0, not an expert one */
static tpx_model *moe_model(int extra) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  int64_t emb[2] = {6, 4}, sq[2] = {4, 4}, gu[3] = {E, 5, 6}, dn[3] = {E, 3, 5},
          n[1] = {4};
  rt_add(m, "model.embed_tokens", TPX_MODULE_EMBEDDING, "weight", emb, 2);
  for (int l = 0; l < NL; l++) {
    char q[64], g[64], x[64];
    snprintf(q, sizeof q, "model.layers.%d.self_attn.q_proj", l);
    snprintf(g, sizeof g, "model.layers.%d.mlp.gate", l);
    snprintf(x, sizeof x, "model.layers.%d.mlp.experts", l);
    rt_add(m, q, TPX_MODULE_LINEAR, "weight", sq, 2);
    rt_add(m, g, TPX_MODULE_LINEAR, "weight", sq, 2);
    rt_add(m, x, TPX_MODULE_OTHER, "gate_and_up_projs", gu, 3);
    rt_add(m, x, TPX_MODULE_OTHER, "down_projs", dn, 3);
    if (extra && l == 0)
      rt_add(m, x, TPX_MODULE_OTHER, "scale", n, 1);
  }
  rt_add(m, "model.norm", TPX_MODULE_NORM, "weight", n, 1);
  rt_add(m, "lm_head", TPX_MODULE_LINEAR, "weight", emb, 2);
  return m;
}

typedef struct ex {
  const ecase *c;
  const char *expect; /* refuse_body: the refusal's words */
  tpx_model *model;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  int64_t world;
} ex;

/* FSDP's group size: dp_shard, times cp when it joins it. */
static int64_t dps_of(const ecase *c) {
  return c->dps * (c->cp > 1 ? c->cp : 1);
}

static tpx_sharding *moe_shard(const tpx_model *m, const tpx_mesh *mesh,
                               int64_t ep, int fsdp, int bf16, int cp) {
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  if (cp)
    so.dp_shard_dim = "dp_shard_cp";
  so.fsdp = fsdp;
  so.param_dtype = bf16 ? TPX_DTYPE_BF16 : TPX_DTYPE_INVALID;
  so.ep = ep;
  so.num_expert_params = 2;
  so.expert_params = expert_pats;
  return fx_shard(m, NULL, mesh, &so);
}

static void ex_init(ex *x, const ecase *c) {
  memset(x, 0, sizeof *x);
  x->c = c;
  x->model = moe_model(0);
  if (c->cp > 1)
    ck_assert_int_eq(
        tpx_mesh_create_fsdp2(c->dpr, c->dps, c->cp, c->tp, &x->mesh, NULL),
        TPX_OK);
  else
    x->mesh = fx_mesh(c->dpr, c->dps, c->tp);
  x->world = c->dpr * dps_of(c) * c->tp;
  x->sh = moe_shard(x->model, x->mesh, c->ep, 1, c->bf16, c->cp > 1);
}

static void ex_free(ex *x) {
  tpx_sharding_destroy(x->sh);
  tpx_mesh_destroy(x->mesh);
  tpx_model_destroy(x->model);
}

static int is_expert(const tpx_param_info *in) {
  return strstr(in->fqn, ".experts.") != NULL;
}

/* The gradient rank r writes at global index gi: an expert's depends on
 * the rank, a non-expert's on the data-parallel index only (tp peers see
 * the same tokens, so their replicated gradients agree). */
static float grad_of(const ex *x, int64_t p, int64_t gi, int64_t r, int exp) {
  float v = rt_grad(p, gi, exp ? r : r / x->c->tp);
  return x->c->bf16 ? rt_from_bf16(rt_to_bf16(v)) : v;
}

/* The reduced gradient of element gi (expert e = its expert, or -1). */
static double expected_grad(const ex *x, int64_t p, int64_t gi, int64_t e) {
  double s = 0, micro = x->c->micro ? x->c->micro : 1;
  if (e >= 0) { /* the ranks holding expert e: r % ep == its ep index */
    int64_t owner = e / (E / x->c->ep);
    for (int64_t r = 0; r < x->world; r++)
      if (r % x->c->ep == owner)
        s += grad_of(x, p, gi, r, 1);
    return micro * s / (double)x->world;
  }
  int64_t dp = x->c->dpr * dps_of(x->c); /* the ranks of distinct tokens */
  for (int64_t j = 0; j < dp; j++) s += grad_of(x, p, gi, j * x->c->tp, 0);
  return micro * s / (double)dp;
}

/* ---- the comms ---- */

static void check_comms(const ex *x, tpx_runtime *rt, tpx_mesh_comm *mc,
                        int64_t rank) {
  int64_t ep = x->c->ep, es = x->world / ep;
  tpx_comm *ce = tpx_runtime_ep_comm(rt), *cs = tpx_runtime_ep_shard_comm(rt);
  ck_assert_ptr_nonnull(ce);
  ck_assert_ptr_nonnull(cs);
  ck_assert_int_eq(tpx_comm_size(ce), ep);
  ck_assert_int_eq(tpx_comm_rank(ce), rank % ep);
  ck_assert_int_eq(tpx_comm_size(cs), es);
  ck_assert_int_eq(tpx_comm_rank(cs), rank / ep);
  ck_assert_double_eq(tpx_runtime_grad_divide_factor(rt, 1), (double)x->world);
  ck_assert_double_eq(tpx_runtime_grad_divide_factor(rt, 0),
                      (double)(x->c->dpr * dps_of(x->c)));
  float me = (float)rank, got[8];
  if (x->c->sim) /* the comms work on sim pointers: the other cases check */
    return;
  RK_OK(tpx_comm_all_gather(ce, &me, got, 1, TPX_DTYPE_F32, E_));
  for (int64_t i = 0; i < ep; i++) /* ep consecutive ranks */
    ck_assert_float_eq(got[i], (float)((rank / ep) * ep + i));
  RK_OK(tpx_comm_all_gather(cs, &me, got, 1, TPX_DTYPE_F32, E_));
  for (int64_t j = 0; j < es; j++)
    ck_assert_float_eq(got[j], (float)(j * ep + rank % ep));
  /* the MoE dispatch over the runtime's ep comm counts on mc's clock */
  tpx_comm_time t0 = TPX_COMM_TIME_INIT, t1 = TPX_COMM_TIME_INIT;
  RK_OK(tpx_mesh_comm_time(mc, &t0, E_));
  tpx_moe_dispatch_options o = TPX_MOE_DISPATCH_OPTIONS_INIT;
  o.ep = ce;
  o.experts = E;
  o.top_k = 1;
  o.hidden = 1;
  float xv = 1.0f, wv = 1.0f;
  int32_t ev = 0;
  tpx_moe_dispatch *d = NULL;
  RK_OK(tpx_moe_dispatch_create(&o, &xv, &ev, &wv, 1, &d, E_));
  tpx_moe_dispatch_destroy(d);
  RK_OK(tpx_mesh_comm_time(mc, &t1, E_));
  ck_assert_int_eq(t1.moe_calls, t0.moe_calls + 1);
  ck_assert(t1.moe_seconds > t0.moe_seconds);
}

/* ---- shapes and unshard ---- */

static void check_expert_shapes(const ex *x, tpx_runtime *rt, int64_t rank,
                                int64_t p, const tpx_param_info *in) {
  int64_t ep = x->c->ep, es = x->world / ep;
  tpx_runtime_param_info pi;
  RK_OK(tpx_runtime_param(rt, p, &pi, E_));
  tpx_slice want;
  RK_OK(tpx_sharding_local_slice(x->sh, p, rank, &want, E_));
  ck_assert_int_eq(pi.local_shape[0], E / ep);
  ck_assert_int_eq(pi.tp_local.offset[0], (rank % ep) * (E / ep));
  for (int i = 1; i < in->ndim; i++)
    ck_assert_int_eq(pi.local_shape[i], in->shape[i]);
  for (int i = 0; i < in->ndim; i++) {
    ck_assert_int_eq(pi.global.offset[i], want.offset[i]);
    ck_assert_int_eq(pi.global.length[i], want.length[i]);
    ck_assert_int_eq(pi.sharded_shape[i], want.length[i]);
  }
  /* dim 1 split over ep_shard (torch.chunk), or whole at ep_shard 1 */
  int64_t off = 0, len = in->shape[1];
  if (es > 1)
    tpx_layout_chunk(in->shape[1], es, rank / ep, &off, &len, NULL);
  ck_assert_int_eq(want.offset[1], off);
  ck_assert_int_eq(want.length[1], len);
  ck_assert_int_eq(pi.sharded_numel, (E / ep) * len * in->shape[2]);
}

/* Every gathered tensor of `unit` equals the loaded weights' slice. */
static void check_unsharded(tpx_runtime *rt, const tpx_model *m, size_t unit,
                            int64_t rank, int sim, int bf16) {
  for (size_t p = 0; p < tpx_model_num_params(m); p++) {
    if (tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)unit)
      continue;
    tpx_param_info in;
    tpx_runtime_param_info pi;
    tpx_model_param(m, (int64_t)p, &in, NULL);
    RK_OK(tpx_runtime_param(rt, (int64_t)p, &pi, E_));
    ck_assert_ptr_nonnull(pi.unsharded);
    const float *u = rt_hv(sim, pi.unsharded);
    const uint16_t *h = rt_hv(sim, pi.unsharded);
    for (int64_t i = 0; i < pi.local_numel; i++) {
      float w =
          rt_weight((int64_t)p, rt_global_index(&pi.tp_local, in.shape, i));
      if (bf16)
        ck_assert_uint_eq(h[i], rt_to_bf16(w));
      else
        ck_assert_float_eq(u[i], w);
    }
  }
}

/* Write rank `rank`'s gradients into every unsharded gradient of `unit`. */
static void write_grads(const ex *x, tpx_runtime *rt, size_t unit,
                        int64_t rank) {
  for (size_t p = 0; p < tpx_model_num_params(x->model); p++) {
    if (tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)unit)
      continue;
    tpx_param_info in;
    tpx_runtime_param_info pi;
    tpx_model_param(x->model, (int64_t)p, &in, NULL);
    RK_OK(tpx_runtime_param(rt, (int64_t)p, &pi, E_));
    ck_assert_ptr_nonnull(pi.unsharded_grad);
    float *g = rt_hv(x->c->sim, pi.unsharded_grad);
    uint16_t *h = rt_hv(x->c->sim, pi.unsharded_grad);
    for (int64_t i = 0; i < pi.local_numel; i++) {
      float v =
          grad_of(x, (int64_t)p, rt_global_index(&pi.tp_local, in.shape, i),
                  rank, is_expert(&in));
      if (x->c->bf16)
        h[i] = rt_to_bf16(v);
      else
        g[i] = v;
    }
  }
}

/* One step's backward through the unit calls. */
static void backward_units(const ex *x, tpx_runtime *rt, int64_t rank) {
  size_t nu = tpx_runtime_num_units(rt);
  RK_OK(tpx_runtime_zero_grads(rt, E_));
  for (size_t u = nu; u-- > 0;) {
    RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
    write_grads(x, rt, u, rank);
    RK_OK(tpx_runtime_reduce_grads(rt, u, E_));
    RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
  }
  RK_OK(tpx_runtime_wait(rt, E_));
}

/* The same through the hooks: each layer, and its experts inside it. */
static void backward_hooks(const ex *x, tpx_runtime *rt, int64_t rank,
                           int zero) {
  char lay[32], exp[48];
  size_t ul, ux;
  if (zero)
    RK_OK(tpx_runtime_zero_grads(rt, E_));
  RK_OK(tpx_runtime_forward_begin(rt, E_));
  for (int l = 0; l < NL; l++) {
    snprintf(lay, sizeof lay, "model.layers.%d", l);
    snprintf(exp, sizeof exp, "model.layers.%d.mlp.experts", l);
    RK_OK(tpx_runtime_pre_forward(rt, lay, E_));
    RK_OK(tpx_runtime_pre_forward(rt, exp, E_));
    RK_OK(tpx_runtime_module_unit(rt, exp, &ux, E_));
    ck_assert(tpx_runtime_unit_is_unsharded(rt, ux));
    check_unsharded(rt, x->model, ux, rank, x->c->sim, x->c->bf16);
    RK_OK(tpx_runtime_post_forward(rt, exp, E_));
    RK_OK(tpx_runtime_post_forward(rt, lay, E_));
  }
  RK_OK(tpx_runtime_backward_begin(rt, E_));
  for (size_t k = 0; k < tpx_runtime_num_units(rt); k++)
    if (tpx_runtime_unit_is_root(rt, k))
      write_grads(x, rt, k, rank);
  for (int l = NL; l-- > 0;) {
    snprintf(lay, sizeof lay, "model.layers.%d", l);
    snprintf(exp, sizeof exp, "model.layers.%d.mlp.experts", l);
    RK_OK(tpx_runtime_module_unit(rt, lay, &ul, E_));
    RK_OK(tpx_runtime_module_unit(rt, exp, &ux, E_));
    ck_assert_uint_ne(ul, ux);
    ck_assert(!tpx_runtime_unit_is_root(rt, ux));
    RK_OK(tpx_runtime_pre_backward(rt, lay, E_));
    RK_OK(tpx_runtime_pre_backward(rt, exp, E_));
    write_grads(x, rt, ul, rank);
    write_grads(x, rt, ux, rank);
    RK_OK(tpx_runtime_post_backward(rt, exp, E_));
    ck_assert(!tpx_runtime_unit_is_unsharded(rt, ux));
    RK_OK(tpx_runtime_post_backward(rt, lay, E_));
  }
  RK_OK(tpx_runtime_backward_end(rt, E_));
}

/* The reduced gradients, full, on every rank; returns the 2-norm's square
 * and the max |g| of them. */
static void check_grads(const ex *x, tpx_runtime *rt, int64_t rank, double *sq,
                        double *mx) {
  *sq = *mx = 0;
  for (size_t p = 0; p < tpx_model_num_params(x->model); p++) {
    tpx_param_info in;
    tpx_model_param(x->model, (int64_t)p, &in, NULL);
    int64_t n = 1, inner = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    for (int i = 1; i < in.ndim; i++) inner *= in.shape[i];
    float *full = malloc((size_t)n * 4);
    RK_OK(tpx_runtime_gather_grad(rt, (int64_t)p, full, TPX_DTYPE_F32, E_));
    for (int64_t i = 0; i < n; i++) {
      double want =
          expected_grad(x, (int64_t)p, i, is_expert(&in) ? i / inner : -1);
      ck_assert_msg(fabs(full[i] - want) <= 1e-6 * (1 + fabs(want)),
                    "rank %lld: %s[%lld] = %g, want %g", (long long)rank,
                    in.fqn, (long long)i, (double)full[i], want);
      *sq += want * want;
      *mx = fabs(want) > *mx ? fabs(want) : *mx;
    }
    free(full);
  }
}

/* AdamW's first step on the full tensors (after clipping by coef). */
static void check_adamw(const ex *x, tpx_runtime *rt, int64_t rank,
                        double coef) {
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = 0.01;
  RK_OK(tpx_runtime_adamw_step(rt, &ao, E_));
  for (size_t p = 0; p < tpx_model_num_params(x->model); p++) {
    tpx_param_info in;
    tpx_model_param(x->model, (int64_t)p, &in, NULL);
    int64_t n = 1, inner = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    for (int i = 1; i < in.ndim; i++) inner *= in.shape[i];
    float *full = malloc((size_t)n * 4);
    RK_OK(tpx_runtime_gather_param(rt, (int64_t)p, full, TPX_DTYPE_F32, E_));
    for (int64_t i = 0; i < n; i++) {
      double g = coef * expected_grad(x, (int64_t)p, i,
                                      is_expert(&in) ? i / inner : -1);
      double w = rt_weight((int64_t)p, i) * (1 - ao.lr * ao.weight_decay);
      double want = w - ao.lr * g / (fabs(g) + ao.eps);
      ck_assert_msg(fabs(full[i] - want) <= 2e-5,
                    "rank %lld: %s[%lld] = %g after AdamW, want %g",
                    (long long)rank, in.fqn, (long long)i, (double)full[i],
                    want);
    }
    free(full);
  }
}

/* Parameter bytes: every shard padded to its group's first chunk. */
static void check_bytes(const ex *x, tpx_runtime *rt) {
  int64_t want = 0;
  for (size_t p = 0; p < tpx_model_num_params(x->model); p++) {
    tpx_param_info in;
    tpx_runtime_param_info pi;
    tpx_model_param(x->model, (int64_t)p, &in, NULL);
    ck_assert_int_eq(tpx_runtime_param(rt, (int64_t)p, &pi, NULL), TPX_OK);
    int64_t padded = 0;
    if (is_expert(&in)) {
      int64_t es = x->world / x->c->ep;
      padded = pi.local_shape[0] * ((in.shape[1] + es - 1) / es) * in.shape[2];
    } else {
      ck_assert_int_eq(tpx_layout_fsdp_padded_numel(pi.local_shape, in.ndim,
                                                    dps_of(x->c), &padded,
                                                    NULL),
                       TPX_OK);
    }
    want += padded * 4;
  }
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_PARAMS),
                   want);
  /* the training-memory estimate (tpx/memory.h) books the same bytes */
  tpx_memory m;
  int64_t rank = tpx_runtime_rank(rt);
  RK_OK(tpx_memory_rank(x->sh, NULL, rank, &m, E_));
  ck_assert_int_eq(m.params + m.master, want);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GRADS),
                   m.grads);
}

static tpx_status ex_body(tpx_comm *world, void *arg, tpx_error *err) {
  ex *x = arg;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = TPX_DTYPE_F32;
  ro.offload = x->c->offload;
  tpx_status st = tpx_mesh_comm_create(world, x->mesh, &mc, err);
  if (st == TPX_OK)
    st = tpx_runtime_create(x->sh, mc, &ro, &rt, err);
  if (st == TPX_OK)
    st = rt_load_weights(rt, x->model, err);
  if (st != TPX_OK) {
    tpx_runtime_destroy(rt);
    tpx_mesh_comm_destroy(mc);
    return st;
  }
  check_comms(x, rt, mc, rank);
  check_bytes(x, rt);
  for (size_t p = 0; p < tpx_model_num_params(x->model); p++) {
    tpx_param_info in;
    tpx_model_param(x->model, (int64_t)p, &in, NULL);
    if (is_expert(&in))
      check_expert_shapes(x, rt, rank, (int64_t)p, &in);
  }
  for (int k = 0; k < (x->c->micro ? x->c->micro : 1); k++)
    if (x->c->hooks)
      backward_hooks(x, rt, rank, k == 0);
    else
      backward_units(x, rt, rank);
  double sq, mx, norm, inorm;
  check_grads(x, rt, rank, &sq, &mx);
  RK_OK(tpx_runtime_grad_norm(rt, INFINITY, &inorm, E_));
  ck_assert_msg(fabs(inorm - mx) <= 1e-6 * mx, "inf norm %g, want %g", inorm,
                mx);
  double max_norm = 0.5 * sqrt(sq);
  RK_OK(tpx_runtime_clip_grad_norm(rt, max_norm, 2.0, &norm, E_));
  ck_assert_msg(fabs(norm - sqrt(sq)) <= 1e-6 * sqrt(sq),
                "rank %lld: norm %.9g, want %.9g", (long long)rank, norm,
                sqrt(sq));
  check_adamw(x, rt, rank, max_norm / (norm + 1e-6));
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

#ifdef RT_MPI
static tpx_comm *mpi_world;
#endif

START_TEST(t_case) {
  ex x;
  ex_init(&x, &cases[_i]);
  tpx_error e = {0};
#ifdef RT_MPI
  if (cases[_i].sim || x.world != tpx_comm_size(mpi_world)) {
    ex_free(&x);
    return;
  }
  tpx_status st = ex_body(mpi_world, &x, &e);
#else
  tpx_status st = rt_local_run((int)x.world, cases[_i].sim, ex_body, &x, &e);
#endif
  ck_assert_msg(st == TPX_OK, "%s: %s", cases[_i].name, e.message);
  ex_free(&x);
}
END_TEST

#ifndef RT_MPI /* threads of one process (one mesh comm per test) */

/* ---- units and refusals ---- */

static tpx_status units_body(tpx_comm *world, void *arg, tpx_error *err) {
  ex *x = arg;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_mesh_comm_create(world, x->mesh, &mc, err);
  if (st == TPX_OK)
    st = tpx_runtime_create(x->sh, mc, NULL, &rt, err);
  if (st == TPX_OK) {
    size_t nf = tpx_sharding_num_fsdp_units(x->sh);
    int64_t gu = tpx_model_find_param(
        x->model, "model.layers.1.mlp.experts.gate_and_up_projs");
    int64_t dn =
        tpx_model_find_param(x->model, "model.layers.1.mlp.experts.down_projs");
    size_t ux;
    RK_OK(tpx_runtime_module_unit(rt, "model.layers.1.mlp.experts", &ux, E_));
    ck_assert_int_eq(tpx_runtime_param_unit(rt, gu), (int64_t)ux);
    ck_assert_int_eq(tpx_runtime_param_unit(rt, dn), (int64_t)ux);
    if (x->c->ep == x->world) { /* ep = world: one unit per experts module */
      ck_assert_uint_eq(tpx_runtime_num_units(rt), nf + NL);
      ck_assert_uint_ge(ux, nf);
    } else {
      ck_assert_uint_eq(tpx_runtime_num_units(rt), nf);
      ck_assert_str_eq(tpx_sharding_fsdp_unit_dim(x->sh, ux), "ep_shard");
    }
  }
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(units) {
  static const ecase c[2] = {{"ep2", 1, 4, 1, 2, 0, 0, 0, 0, 0, 0},
                             {"ep4", 1, 4, 1, 4, 0, 0, 0, 0, 0, 0}};
  for (int k = 0; k < 2; k++) {
    ex x;
    ex_init(&x, &c[k]);
    tpx_error e = {0};
    ck_assert_msg(rt_local_run(4, 0, units_body, &x, &e) == TPX_OK, "%s",
                  e.message);
    ex_free(&x);
  }
}
END_TEST

static tpx_status refuse_body(tpx_comm *world, void *arg, tpx_error *err) {
  ex *x = arg;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  RK_OK(tpx_mesh_comm_create(world, x->mesh, &mc, E_));
  tpx_error e = {0};
  ck_assert_int_eq(tpx_runtime_create(x->sh, mc, NULL, &rt, &e),
                   TPX_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(e.message, x->expect));
  ck_assert_ptr_null(rt);
  tpx_mesh_comm_destroy(mc);
  (void)err;
  return TPX_OK;
}

static tpx_status ep1_body(tpx_comm *world, void *arg, tpx_error *err) {
  ex *x = arg;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  RK_OK(tpx_mesh_comm_create(world, x->mesh, &mc, E_));
  RK_OK(tpx_runtime_create(x->sh, mc, NULL, &rt, E_));
  ck_assert_ptr_null(tpx_runtime_ep_comm(rt));
  ck_assert_ptr_null(tpx_runtime_ep_shard_comm(rt));
  ck_assert_double_eq(tpx_runtime_grad_divide_factor(rt, 1), 2.0);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  (void)err;
  return TPX_OK;
}

START_TEST(refusals) {
  ex x;
  memset(&x, 0, sizeof x);
  x.model = moe_model(0);
  x.mesh = fx_mesh(1, 2, 1);
  x.sh = moe_shard(x.model, x.mesh, 2, 0, 0, 0); /* FSDP off */
  x.expect = "FSDP off";
  tpx_error e = {0};
  ck_assert_msg(rt_local_run(2, 0, refuse_body, &x, &e) == TPX_OK, "%s",
                e.message);
  /* an experts unit holding a parameter that is not an expert one */
  tpx_model *mx = moe_model(1);
  tpx_mesh *m4 = fx_mesh(1, 4, 1);
  tpx_sharding *sx = moe_shard(mx, m4, 2, 1, 0, 0);
  ex y = x;
  y.model = mx;
  y.mesh = m4;
  y.sh = sx;
  y.expect = "'model.layers.0.mlp.experts.scale' is not an expert";
  ck_assert_msg(rt_local_run(4, 0, refuse_body, &y, &e) == TPX_OK, "%s",
                e.message);
  tpx_sharding_destroy(sx);
  tpx_mesh_destroy(m4);
  tpx_model_destroy(mx);
  tpx_sharding_destroy(x.sh);
  x.sh = moe_shard(x.model, x.mesh, 1, 1, 0, 0); /* ep 1 */
  ck_assert_msg(rt_local_run(2, 0, ep1_body, &x, &e) == TPX_OK, "%s",
                e.message);
  ck_assert_ptr_null(tpx_runtime_ep_comm(NULL));
  ck_assert_double_eq(tpx_runtime_grad_divide_factor(NULL, 0), 0.0);
  ex_free(&x);
}
END_TEST

/* ---- checkpoints: save at ep 2, load at ep 4 ---- */

typedef struct kx {
  ex x;
  const char *dir;
  int save; /* 1: load the weights and write them; 0: read them back */
} kx;

static tpx_status save_rank(kx *k, tpx_runtime *rt, int64_t rank,
                            tpx_error *err) {
  const tpx_model *m = k->x.model;
  size_t np = tpx_model_num_params(m), ne = 0;
  tpx_checkpoint_entry *ents = NULL;
  tpx_checkpoint_dest *srcs = calloc(np, sizeof *srcs);
  tpx_checkpoint_writer *w = NULL;
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  o.num_writers = k->x.world;
  o.writer_rank = rank;
  tpx_status st = rt_load_weights(rt, m, err);
  if (st == TPX_OK)
    st = tpx_checkpoint_model_entries(m, &ents, &ne, err);
  if (st == TPX_OK)
    st = tpx_checkpoint_writer_create(k->dir, ents, ne, &o, &w, err);
  for (size_t p = 0; p < np && st == TPX_OK; p++) {
    tpx_runtime_param_info pi; /* the shard: tpx_sharding_local_slice's */
    st = tpx_runtime_param(rt, (int64_t)p, &pi, err);
    srcs[p] = (tpx_checkpoint_dest){pi.master, (size_t)pi.sharded_numel * 4,
                                    TPX_DTYPE_F32};
  }
  if (st == TPX_OK)
    st = tpx_checkpoint_write_rank(w, k->x.sh, rank, srcs, err);
  if (st == TPX_OK)
    st = tpx_checkpoint_writer_finish(w, NULL, err);
  tpx_checkpoint_writer_destroy(w);
  free(ents);
  free(srcs);
  return st;
}

static tpx_status ckpt_body(tpx_comm *world, void *arg, tpx_error *err) {
  kx *k = arg;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_mesh_comm_create(world, k->x.mesh, &mc, err);
  if (st == TPX_OK)
    st = tpx_runtime_create(k->x.sh, mc, NULL, &rt, err);
  if (st == TPX_OK)
    st = k->save ? save_rank(k, rt, rank, err)
                 : tpx_runtime_load_safetensors(rt, k->dir, err);
  for (size_t p = 0;
       !k->save && st == TPX_OK && p < tpx_model_num_params(k->x.model); p++) {
    tpx_param_info in;
    tpx_model_param(k->x.model, (int64_t)p, &in, NULL);
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    float *full = malloc((size_t)n * 4);
    RK_OK(tpx_runtime_gather_param(rt, (int64_t)p, full, TPX_DTYPE_F32, E_));
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(full[i] == rt_weight((int64_t)p, i), "%s[%lld] = %g",
                    in.fqn, (long long)i, (double)full[i]);
    free(full);
  }
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(ckpt_roundtrip) {
  static const ecase c[3] = {{"save ep2", 1, 4, 1, 2, 0, 0, 0, 0, 0, 0},
                             {"load ep4", 1, 4, 1, 4, 0, 0, 0, 0, 0, 0},
                             {"load dpr2 ep2", 2, 2, 1, 2, 0, 0, 0, 0, 0, 0}};
  char dir[] = "/tmp/tpx_rt_ep_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  for (int i = 0; i < 3; i++) {
    kx k;
    ex_init(&k.x, &c[i]);
    k.dir = dir;
    k.save = i == 0;
    tpx_error e = {0};
    tpx_status st = rt_local_run(4, 0, ckpt_body, &k, &e);
    ck_assert_msg(st == TPX_OK, "%s: %s", c[i].name, e.message);
    ex_free(&k.x);
  }
  char path[64];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  ck_assert_int_eq(remove(path), 0);
  ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

#endif /* RT_MPI */

static Suite *suite(void) {
  Suite *s = suite_create("rt_ep");
  TCase *tc = tcase_create("ep");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, t_case, 0, (int)(sizeof cases / sizeof cases[0]));
#ifndef RT_MPI /* threads of one process */
  tcase_add_test(tc, units);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, ckpt_roundtrip);
#endif
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
#ifdef RT_MPI
  tpx_error e = {0};
  if (tpx_comm_create_mpi(NULL, &mpi_world, &e) != TPX_OK) {
    fprintf(stderr, "test_rt_ep_mpi: %s\n", e.message);
    return EXIT_FAILURE;
  }
#endif
  SRunner *sr = srunner_create(suite());
#ifdef RT_MPI
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, tpx_comm_rank(mpi_world) == 0 ? CK_NORMAL : CK_SILENT);
#else
  srunner_run_all(sr, CK_NORMAL);
#endif
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
#ifdef RT_MPI
  tpx_comm_destroy(mpi_world); /* finalizes MPI */
#endif
  return failed ? 1 : 0;
}
