/* test_rt_fsdp.c — the runtime object end to end on the local backend, one
 * table of (model, plan, mesh) cases, each run through 3 training steps on
 * every rank:
 *  - load full tensors, unshard: every TP-local tensor equals the slice a
 *    tp-only sharding gives (tpx_sharding_local_slice), exactly;
 *  - every dp rank writes different gradients; after reduce_grads the
 *    gathered gradient is their mean, and each rank's sharded gradient is
 *    its own slice of it; two micro-batches accumulate (step 2);
 *  - grad norm (2 and inf) equals the norm of the full mean gradient;
 *  - clip scales exactly as torch's clip_grad_norm_;
 *  - AdamW equals the same formula applied to the full tensors;
 *  - allocated bytes equal the padded sums; the root stays unsharded after
 *    forward, nothing stays gathered after backward;
 *  - prefetch on a comm thread, synchronous prefetch, no prefetch and no
 *    buffer cache give bit-identical parameters; peak >= allocated bytes;
 *  - the same run with the world in the sim memory space (every runtime
 *    buffer a tagged pointer that faults on a host access; the test reads
 *    and writes the unsharded / sharded tensors through sim_tag.h as a
 *    device kernel would) is bit-identical to host memory.
 * Built three times: on local threads (every case); with RT_MPI defined as
 * test_rt_fsdp_mpi, one rank per process (the cases whose world equals the
 * MPI world size; CK_NOFORK, since forking after MPI_Init is not allowed);
 * and with RT_MPI_MULTIPLE too, where the test initialises MPI with
 * MPI_THREAD_MULTIPLE so the runtime runs its dp collectives on a comm
 * thread over MPI. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fsdp_fixture.h"

typedef enum rmodel {
  M_TINY = 0,   /* hand-built tiny model, its plan */
  M_TINY_SP,    /* + sequence_parallel norms */
  M_LLAMA,      /* shard_fixture's llama (tied), its sp0 plan */
  M_LLAMA_PLUG, /* llama through the llama plugin, sequence parallel */
} rmodel;

typedef struct rcase {
  const char *name;
  rmodel model;
  int64_t dpr, dps, tp;
  int fsdp;
  int64_t cp; /* > 1: mesh (dp_replicate, dp_shard, cp, tp), FSDP over the
                 flattened dp_shard_cp (0: no cp dim) */
} rcase;

/* FSDP's group size: dp_shard, times cp when it joins it */
static int64_t dps_of(const rcase *c) {
  return c->dps * (c->cp > 1 ? c->cp : 1);
}

static const rcase cases[] = {
    {"tiny 1x1x1", M_TINY, 1, 1, 1, 1, 1},
    {"tiny dp2", M_TINY, 1, 2, 1, 1, 1},
    {"tiny dp3 uneven", M_TINY, 1, 3, 1, 1, 1},
    {"tiny dp2 tp2", M_TINY, 1, 2, 2, 1, 1},
    {"tiny tp4", M_TINY, 1, 1, 4, 1, 1},
    {"tiny hsdp 2x2", M_TINY, 2, 2, 1, 1, 1},
    {"tiny dp3 tp2", M_TINY, 1, 3, 2, 1, 1},
    {"tiny sp dp2 tp2", M_TINY_SP, 1, 2, 2, 1, 1},
    {"tiny sp tp4", M_TINY_SP, 1, 1, 4, 1, 1},
    {"tiny no-fsdp tp2", M_TINY, 1, 1, 2, 0, 1},
    {"tiny no-fsdp ddp2 tp2", M_TINY_SP, 1, 2, 2, 0, 1},
    {"llama dp2 tp2", M_LLAMA, 1, 2, 2, 1, 1},
    {"llama hsdp 2x2", M_LLAMA, 2, 2, 1, 1, 1},
    {"llama dp3", M_LLAMA, 1, 3, 1, 1, 1},
    {"llama plugin sp dp2 tp2", M_LLAMA_PLUG, 1, 2, 2, 1, 1},
    {"llama plugin sp tp4", M_LLAMA_PLUG, 1, 1, 4, 1, 1},
    {"tiny sp hsdp 2x1 tp2", M_TINY_SP, 2, 1, 2, 1, 1},
    {"llama plugin sp hsdp 2x1 tp2", M_LLAMA_PLUG, 2, 1, 2, 1, 1},
    {"tiny hsdp 2x3 uneven", M_TINY, 2, 3, 1, 1, 1},
    /* context parallelism: FSDP over dp_shard_cp (one torch.chunk over
     * dp_shard x cp; cp ranks hold different shards) */
    {"tiny cp2", M_TINY, 1, 1, 1, 1, 2},
    {"tiny dp3 cp2 uneven", M_TINY, 1, 3, 1, 1, 2},
    {"llama plugin sp dp2 cp2 tp2", M_LLAMA_PLUG, 1, 2, 2, 1, 2},
    {"tiny hsdp 2x1 cp2 tp2", M_TINY_SP, 2, 1, 2, 1, 2},
};

typedef struct ctx {
  const rcase *c;
  tpx_model *model;
  tpx_plan *plan;
  tpx_mesh *mesh, *tp_mesh;
  tpx_sharding *sh, *sh_tp;
  tpx_runtime_options ro;
  int sim; /* the world's buffers are in the sim memory space */
  size_t np;
  int64_t *numel;
  int *alias;
  int *sp; /* expected grad_tp_allreduce */
  float **init;
  double **gmean;
  double norm2, norminf;
  float **final;
} ctx;

static tpx_plan *plugin_plan(const tpx_model *m, int64_t tp) {
  tpx_registry *reg = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_create(&reg, &e), TPX_OK);
  ck_assert_int_eq(tpx_registry_load_default(reg, &e), TPX_OK);
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  o.tp_size = tp;
  o.sequence_parallel = 1;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &e), TPX_OK);
  ck_assert_msg(tpx_select_plan(reg, m, &o, &sel, diags, &e) == TPX_OK, "%s",
                e.message);
  tpx_diag_list_destroy(diags);
  ck_assert_int_eq(tpx_selection_source(sel), TPX_PLAN_SOURCE_PLUGIN);
  tpx_plan *p = NULL;
  ck_assert_int_eq(tpx_plan_clone(tpx_selection_plan(sel), &p, &e), TPX_OK);
  tpx_selection_destroy(sel);
  tpx_registry_destroy(reg);
  return p;
}

static void ctx_init(ctx *x, const rcase *c) {
  memset(x, 0, sizeof *x);
  x->c = c;
  int sp_plan = c->model == M_TINY_SP || c->model == M_LLAMA_PLUG;
  if (c->model == M_TINY || c->model == M_TINY_SP) {
    x->model = rt_tiny_model();
    x->plan = rt_tiny_plan(c->model == M_TINY_SP);
  } else {
    fx_opts o = {0, 1, 0, 0, NULL};
    x->model = fx_model(&o);
    x->plan =
        c->model == M_LLAMA ? fx_llama_plan() : plugin_plan(x->model, c->tp);
  }
  if (c->cp > 1)
    ck_assert_int_eq(
        tpx_mesh_create_fsdp2(c->dpr, c->dps, c->cp, c->tp, &x->mesh, NULL),
        TPX_OK);
  else
    x->mesh = fx_mesh(c->dpr, c->dps, c->tp);
  const char *tn[1] = {"tp"};
  int64_t ts[1] = {c->tp};
  ck_assert_int_eq(tpx_mesh_create(tn, ts, 1, &x->tp_mesh, NULL), TPX_OK);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = c->fsdp;
  so.param_dtype = TPX_DTYPE_INVALID;
  if (c->cp > 1)
    so.dp_shard_dim = "dp_shard_cp";
  x->sh = fx_shard(x->model, x->plan, x->mesh, &so);
  so.fsdp = 0;
  so.dp_shard_dim = "dp_shard";
  x->sh_tp = fx_shard(x->model, x->plan, x->tp_mesh, &so);
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = TPX_DTYPE_F32;
  x->ro = ro;
  x->np = tpx_model_num_params(x->model);
  x->numel = calloc(x->np, sizeof *x->numel);
  x->alias = calloc(x->np, sizeof *x->alias);
  x->sp = calloc(x->np, sizeof *x->sp);
  x->init = calloc(x->np, sizeof *x->init);
  x->gmean = calloc(x->np, sizeof *x->gmean);
  x->final = calloc(x->np, sizeof *x->final);
  int64_t D = c->dpr * dps_of(c);
  double sum = 0, mx = 0;
  for (size_t p = 0; p < x->np; p++) {
    tpx_param_info info;
    ck_assert_int_eq(tpx_model_param(x->model, (int64_t)p, &info, NULL),
                     TPX_OK);
    int64_t n = 1;
    for (int i = 0; i < info.ndim; i++) n *= info.shape[i];
    x->numel[p] = n;
    x->alias[p] = info.tied_to >= 0;
    x->sp[p] = sp_plan && c->tp > 1 && strstr(info.fqn, "norm") != NULL;
    if (x->alias[p])
      continue;
    x->init[p] = malloc((size_t)n * sizeof(float));
    x->gmean[p] = malloc((size_t)n * sizeof(double));
    x->final[p] = calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++) {
      x->init[p][i] = rt_weight((int64_t)p, i);
      double s = 0;
      for (int64_t d = 0; d < D; d++) s += (double)rt_grad((int64_t)p, i, d);
      x->gmean[p][i] = s / (double)D;
      sum += x->gmean[p][i] * x->gmean[p][i];
      if (fabs(x->gmean[p][i]) > mx)
        mx = fabs(x->gmean[p][i]);
    }
  }
  x->norm2 = sqrt(sum);
  x->norminf = mx;
}

static void ctx_free(ctx *x) {
  for (size_t p = 0; p < x->np; p++) {
    free(x->init[p]);
    free(x->gmean[p]);
    free(x->final[p]);
  }
  free(x->init);
  free(x->gmean);
  free(x->final);
  free(x->numel);
  free(x->alias);
  free(x->sp);
  tpx_sharding_destroy(x->sh);
  tpx_sharding_destroy(x->sh_tp);
  tpx_mesh_destroy(x->mesh);
  tpx_mesh_destroy(x->tp_mesh);
  tpx_plan_destroy(x->plan);
  tpx_model_destroy(x->model);
}

#ifdef RT_MPI_MULTIPLE
#include <mpi.h>
static int mpi_multiple; /* MPI_THREAD_MULTIPLE was provided */
#else
enum { mpi_multiple = 0 };
#endif

/* AdamW on one f32 element, torch's single-tensor order of operations. */
static float ref_adamw(float p, float g, float *m, float *v, int64_t t,
                       double lr, double wd) {
  double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  if (wd != 0)
    p *= (float)(1.0 - lr * wd);
  *m = *m + (float)(1.0 - b1) * (g - *m);
  *v = *v * (float)b2 + (float)(1.0 - b2) * g * g;
  double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
  float denom = sqrtf(*v) / (float)sqrt(bc2) + (float)eps;
  return p + (float)(-(lr / bc1)) * *m / denom;
}

/* One rank's run: its runtime and coordinates (dp index d, tp index t),
 * the units in forward order, and the reference state every rank keeps
 * (parameters, AdamW moments, gathered gradients, a gather buffer). */
typedef struct rank_run {
  ctx *x;
  tpx_runtime *rt;
  int64_t rank, d, t;
  size_t nu;
  size_t *order;
  float **ref, **m, **v, **gg, **full;
} rank_run;

/* Layout and bytes: every parameter's slices and flags as the sharding
 * says; returns the padded element count of the flat buffers. */
static int64_t check_layout(const rank_run *r) {
  const ctx *x = r->x;
  const rcase *c = x->c;
  int64_t rank = r->rank, padded_sum = 0;
  for (size_t p = 0; p < x->np; p++) {
    tpx_runtime_param_info in;
    RK_OK(tpx_runtime_param(r->rt, (int64_t)p, &in, E_));
    tpx_param_info info;
    tpx_model_param(x->model, (int64_t)p, &info, NULL);
    if (x->alias[p]) {
      tpx_runtime_param_info tin;
      RK_OK(tpx_runtime_param(r->rt, info.tied_to, &tin, E_));
      ck_assert_ptr_eq(in.sharded, tin.sharded);
      ck_assert_int_eq(in.param, info.tied_to);
      continue;
    }
    tpx_slice tl, g;
    RK_OK(tpx_sharding_local_slice(x->sh_tp, (int64_t)p, r->t, &tl, E_));
    RK_OK(tpx_sharding_local_slice(x->sh, (int64_t)p, rank, &g, E_));
    ck_assert_int_eq(memcmp(&tl, &in.tp_local, sizeof tl), 0);
    ck_assert_int_eq(memcmp(&g, &in.global, sizeof g), 0);
    ck_assert_int_eq(in.sharded_numel, tpx_slice_numel(&g));
    for (int i = 0; i < info.ndim; i++) {
      ck_assert_int_eq(in.sharded_shape[i], g.length[i]);
      ck_assert_int_eq(in.local_shape[i], tl.length[i]);
    }
    ck_assert_msg(in.grad_tp_allreduce == x->sp[p], "%s: sp %d", info.fqn,
                  in.grad_tp_allreduce);
    int64_t rows = info.ndim ? tl.length[0] : 1, rest = 1;
    for (int i = 1; i < info.ndim; i++) rest *= tl.length[i];
    if (c->fsdp && info.ndim)
      padded_sum += (rows + dps_of(c) - 1) / dps_of(c) * rest;
    else
      padded_sum += rows * rest;
    ck_assert_int_eq(in.storage_dtype, TPX_DTYPE_F32);
    ck_assert_int_eq(in.compute_dtype, TPX_DTYPE_F32);
  }
  tpx_runtime *rt = r->rt;
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_PARAMS),
                   padded_sum * 4);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GRADS),
                   padded_sum * 4);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GATHER), 0);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_OPTIMIZER),
                   0);
  return padded_sum;
}

/* Load, and the reference copy every rank keeps. */
static void load_params(rank_run *r) {
  const ctx *x = r->x;
  int64_t rank = r->rank;
  r->ref = calloc(x->np, sizeof *r->ref);
  r->m = calloc(x->np, sizeof *r->m);
  r->v = calloc(x->np, sizeof *r->v);
  r->gg = calloc(x->np, sizeof *r->gg);
  r->full = calloc(x->np, sizeof *r->full);
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    size_t n = (size_t)x->numel[p];
    r->ref[p] = malloc(n * 4);
    memcpy(r->ref[p], x->init[p], n * 4);
    r->m[p] = calloc(n, 4);
    r->v[p] = calloc(n, 4);
    r->gg[p] = malloc(n * 4);
    r->full[p] = malloc(n * 4);
    RK_OK(tpx_runtime_load_param(r->rt, (int64_t)p, x->init[p], TPX_DTYPE_F32,
                                 E_));
  }
}

/* Forward: TP-local tensors equal the reference slices. */
static void forward(const rank_run *r, int64_t step) {
  const ctx *x = r->x;
  int64_t rank = r->rank;
  tpx_runtime *rt = r->rt;
  for (size_t k = 0; k < r->nu; k++) {
    size_t u = r->order[k];
    RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_FORWARD, E_));
    ck_assert(tpx_runtime_unit_is_unsharded(rt, u));
    for (size_t p = 0; p < x->np; p++) {
      if (x->alias[p] || tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
        continue;
      tpx_runtime_param_info in;
      RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
      ck_assert_ptr_nonnull(in.unsharded);
      tpx_param_info info;
      tpx_model_param(x->model, (int64_t)p, &info, NULL);
      const float *un = rt_hv(x->sim, in.unsharded);
      int64_t bad = -1;
      for (int64_t i = 0; i < in.local_numel && bad < 0; i++)
        if (un[i] != r->ref[p][rt_global_index(&in.tp_local, info.shape, i)])
          bad = i;
      ck_assert_msg(bad < 0, "rank %lld step %lld %s: unsharded[%lld] %g",
                    (long long)rank, (long long)step, info.fqn, (long long)bad,
                    bad < 0 ? 0.0 : un[bad]);
    }
    RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, E_));
  }
  if (x->c->fsdp) {
    ck_assert(tpx_runtime_unit_is_unsharded(rt, r->nu - 1)); /* root kept */
    ck_assert_int_gt(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GATHER),
                     0);
  }
}

/* Backward over `mb` micro-batches: dp rank d writes its own gradients. */
static void backward(const rank_run *r, int mb) {
  const ctx *x = r->x;
  int64_t rank = r->rank, t = r->t, T = x->c->tp;
  tpx_runtime *rt = r->rt;
  for (int mbi = 0; mbi < mb; mbi++)
    for (size_t k = r->nu; k-- > 0;) {
      size_t u = r->order[k];
      RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
      for (size_t p = 0; p < x->np; p++) {
        if (x->alias[p] || tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
          continue;
        tpx_runtime_param_info in;
        RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
        ck_assert_ptr_nonnull(in.unsharded_grad);
        tpx_param_info info;
        tpx_model_param(x->model, (int64_t)p, &info, NULL);
        float *gr = rt_hv(x->sim, in.unsharded_grad);
        float w = x->sp[p] ? (float)(t + 1) / (float)(T * (T + 1) / 2) : 1.0f;
        for (int64_t i = 0; i < in.local_numel; i++) {
          int64_t gi = rt_global_index(&in.tp_local, info.shape, i);
          gr[i] += rt_grad((int64_t)p, gi, r->d) * w;
        }
      }
      RK_OK(tpx_runtime_reduce_grads(rt, u, E_));
      RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
    }
  if (x->c->fsdp) {
    ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GATHER),
                     0);
    /* the last reduction may still be in flight (overlap) until a sync */
    if (!tpx_runtime_is_async(rt))
      ck_assert_int_eq(
          tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS), 0);
    RK_OK(tpx_runtime_wait(rt, E_));
    ck_assert_int_eq(
        tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS), 0);
  }
}

/* Reduced gradients: `mb` times the mean, in the right shards, and their
 * norms; returns the L2 norm. */
static double check_grads(const rank_run *r, int mb) {
  const ctx *x = r->x;
  int64_t rank = r->rank;
  tpx_runtime *rt = r->rt;
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    float *gg = r->gg[p];
    RK_OK(tpx_runtime_gather_grad(rt, (int64_t)p, gg, TPX_DTYPE_F32, E_));
    tpx_param_info info;
    tpx_model_param(x->model, (int64_t)p, &info, NULL);
    int64_t bad = -1;
    for (int64_t i = 0; i < x->numel[p] && bad < 0; i++)
      if (!(fabs(gg[i] - mb * x->gmean[p][i]) <=
            4e-6 * (1 + fabs(x->gmean[p][i]))))
        bad = i;
    ck_assert_msg(bad < 0, "rank %lld %s grad[%lld] %.9g vs mean %.9g x%d",
                  (long long)rank, info.fqn, (long long)bad,
                  bad < 0 ? 0.0 : gg[bad], bad < 0 ? 0.0 : x->gmean[p][bad],
                  mb);
    tpx_runtime_param_info in;
    RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
    const float *sg = rt_hv(x->sim, in.sharded_grad);
    for (int64_t i = 0; i < in.sharded_numel && bad < 0; i++)
      if (sg[i] != gg[rt_global_index(&in.global, info.shape, i)])
        bad = i;
    ck_assert_msg(bad < 0, "rank %lld %s: sharded grad[%lld] misplaced",
                  (long long)rank, info.fqn, (long long)bad);
  }
  double n2 = 0, ninf = 0;
  RK_OK(tpx_runtime_grad_norm(rt, 2.0, &n2, E_));
  RK_OK(tpx_runtime_grad_norm(rt, INFINITY, &ninf, E_));
  ck_assert_msg(fabs(n2 - mb * x->norm2) <= 1e-6 * mb * x->norm2,
                "rank %lld: L2 %.12g vs %.12g", (long long)rank, n2,
                mb * x->norm2);
  ck_assert_msg(fabs(ninf - mb * x->norminf) <= 1e-6 * mb * x->norminf,
                "rank %lld: inf %.12g vs %.12g", (long long)rank, ninf,
                mb * x->norminf);
  return n2;
}

/* Clipping: none above the norm, then to half of it; the reference
 * gradients become the clipped ones. */
static void clip(const rank_run *r, double n2) {
  const ctx *x = r->x;
  int64_t rank = r->rank;
  tpx_runtime *rt = r->rt;
  double tot = 0;
  RK_OK(tpx_runtime_clip_grad_norm(rt, 10 * n2, 2.0, &tot, E_)); /* none */
  ck_assert(tot == n2);
  RK_OK(tpx_runtime_clip_grads(rt, 0.5 * n2, n2, E_));
  float coef = (1.0f / ((float)n2 + 1e-6f)) * (float)(0.5 * n2);
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    RK_OK(
        tpx_runtime_gather_grad(rt, (int64_t)p, r->full[p], TPX_DTYPE_F32, E_));
    int64_t bad = -1;
    for (int64_t i = 0; i < x->numel[p]; i++) {
      if (r->full[p][i] != r->gg[p][i] * coef && bad < 0)
        bad = i;
      r->gg[p][i] = r->full[p][i];
    }
    ck_assert_msg(bad < 0, "param %zu: clipped grad[%lld]", p, (long long)bad);
  }
  double after = 0;
  RK_OK(tpx_runtime_grad_norm(rt, 2.0, &after, E_));
  ck_assert_msg(fabs(after - 0.5 * n2) <= 1e-5 * n2, "clipped %g", after);
}

/* AdamW against the formula on the full tensors, bit-identical. */
static void adamw(const rank_run *r, int64_t step) {
  const ctx *x = r->x;
  int64_t rank = r->rank;
  tpx_runtime *rt = r->rt;
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = 0.01;
  ao.weight_decay = 0.1;
  RK_OK(tpx_runtime_adamw_step(rt, &ao, E_));
  ck_assert_int_eq(tpx_runtime_optimizer_steps(rt), step);
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    float *ref = r->ref[p], *full = r->full[p];
    for (int64_t i = 0; i < x->numel[p]; i++)
      ref[i] = ref_adamw(ref[i], r->gg[p][i], &r->m[p][i], &r->v[p][i], step,
                         0.01, 0.1);
    RK_OK(tpx_runtime_gather_param(rt, (int64_t)p, full, TPX_DTYPE_F32, E_));
    int64_t bad = -1;
    for (int64_t i = 0; i < x->numel[p] && bad < 0; i++)
      if (full[i] != ref[i])
        bad = i; /* bit-identical */
    ck_assert_msg(bad < 0, "rank %lld step %lld param %zu[%lld] %.9g vs %.9g",
                  (long long)rank, (long long)step, p, (long long)bad,
                  bad < 0 ? 0.0 : full[bad], bad < 0 ? 0.0 : ref[bad]);
    memcpy(ref, full, (size_t)x->numel[p] * 4);
  }
}

/* The memory figures after the steps. */
static void check_memory_end(const rank_run *r, int64_t padded_sum) {
  const ctx *x = r->x;
  tpx_runtime *rt = r->rt;
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_OPTIMIZER),
                   2 * padded_sum * 4);
  for (int k = 0; k <= TPX_RUNTIME_MEM_TOTAL; k++)
    ck_assert_int_ge(tpx_runtime_peak_bytes(rt, (tpx_runtime_mem_kind)k),
                     tpx_runtime_allocated_bytes(rt, (tpx_runtime_mem_kind)k));
  if (x->c->fsdp) {
    ck_assert_int_gt(tpx_runtime_peak_bytes(rt, TPX_RUNTIME_MEM_GATHER), 0);
    /* freed gather / reduce buffers are kept only with cache_buffers */
    if (x->ro.cache_buffers)
      ck_assert_int_gt(tpx_runtime_cached_bytes(rt), 0);
    else
      ck_assert_int_eq(tpx_runtime_cached_bytes(rt), 0);
  }
}

static void free_run(rank_run *r) {
  for (size_t p = 0; p < r->x->np; p++) {
    free(r->ref[p]);
    free(r->m[p]);
    free(r->v[p]);
    free(r->gg[p]);
    free(r->full[p]);
  }
  free(r->ref);
  free(r->m);
  free(r->v);
  free(r->gg);
  free(r->full);
  free(r->order);
}

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  ctx *x = arg;
  const rcase *c = x->c;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_mesh_comm_create(world, x->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  ck_assert_str_eq(tpx_comm_memspace(world),
                   x->sim ? tpx__test_device_name() : "host");
  RK_OK(tpx_runtime_create(x->sh, mc, &x->ro, &rt, E_));
  int64_t co[4];
  RK_OK(tpx_mesh_coords(x->mesh, rank, co, E_));
  size_t nu = tpx_runtime_num_units(rt);
  rank_run r = {.x = x,
                .rt = rt,
                .rank = rank,
                /* the data-parallel index: row-major over
                 * (dp_replicate, dp_shard[, cp]) */
                .d = c->cp > 1 ? (co[0] * c->dps + co[1]) * c->cp + co[2]
                               : co[0] * c->dps + co[1],
                .t = co[c->cp > 1 ? 3 : 2],
                .nu = nu};
  ck_assert_int_eq(tpx_runtime_fsdp_enabled(rt), c->fsdp);
  ck_assert_uint_eq(nu, c->fsdp ? tpx_sharding_num_fsdp_units(x->sh) : 1);
  /* a comm thread on the local backend, and on mpi under THREAD_MULTIPLE */
  ck_assert_int_eq(
      tpx_runtime_is_async(rt),
      x->ro.async && dps_of(c) * c->dpr > 1 &&
          (strcmp(tpx_comm_backend(world), "local") == 0 || mpi_multiple));

  int64_t padded_sum = check_layout(&r);
  load_params(&r);
  r.order = calloc(nu, sizeof *r.order);
  for (size_t i = 0; i < nu; i++) /* forward: root first, then layers */
    r.order[i] = c->fsdp ? (i == 0 ? nu - 1 : i - 1) : 0;

  for (int64_t step = 1; step <= 3; step++) {
    RK_OK(tpx_runtime_zero_grads(rt, E_));
    forward(&r, step);
    /* Step 2 runs two micro-batches (FSDP only: reduce_grads accumulates),
     * so its reduced gradient is twice the mean. */
    int mb = step == 2 && c->fsdp ? 2 : 1;
    backward(&r, mb);
    double n2 = check_grads(&r, mb);
    if (step == 1)
      clip(&r, n2);
    adamw(&r, step);
  }
  check_memory_end(&r, padded_sum);
  if (rank == 0)
    for (size_t p = 0; p < x->np; p++)
      if (!x->alias[p])
        memcpy(x->final[p], r.full[p], (size_t)x->numel[p] * 4);
  free_run(&r);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

#ifdef RT_MPI
static tpx_comm *mpi_world;
#endif

START_TEST(t_case) {
  const rcase *c = &cases[_i];
  int world = (int)(c->dpr * dps_of(c) * c->tp);
#ifdef RT_MPI
  if (world != tpx_comm_size(mpi_world))
    return;
#endif
  ctx x;
  ctx_init(&x, c);
  /* prefetch on a comm thread, synchronous prefetch, no prefetch, the
   * comm thread without the buffer cache, and the first and second in the
   * sim memory space (local only): {prefetch, async, cache, sim} */
  static const int variants[6][4] = {{1, 1, 1, 0}, {1, 0, 1, 0}, {0, 0, 1, 0},
                                     {1, 1, 0, 0}, {1, 1, 1, 1}, {1, 0, 1, 1}};
  float **first = calloc(x.np, sizeof *first);
  for (int k = 0; k < 6; k++) {
    x.ro.prefetch = variants[k][0];
    x.ro.async = variants[k][1];
    x.ro.cache_buffers = variants[k][2];
    x.sim = variants[k][3];
    tpx_error e = {0};
#ifdef RT_MPI
    if (x.sim)
      continue;
    tpx_status st = body(mpi_world, &x, &e);
#else
    tpx_status st = rt_local_run(world, x.sim, body, &x, &e);
#endif
    ck_assert_msg(st == TPX_OK, "%s (variant %d): %s", c->name, k, e.message);
    for (size_t p = 0; p < x.np; p++) {
      if (x.alias[p])
        continue;
      size_t bytes = (size_t)x.numel[p] * 4;
      if (k == 0) {
        first[p] = malloc(bytes);
        memcpy(first[p], x.final[p], bytes);
      } else {
        ck_assert_msg(memcmp(first[p], x.final[p], bytes) == 0,
                      "%s: variant %d differs on param %zu", c->name, k, p);
      }
    }
  }
  for (size_t p = 0; p < x.np; p++) free(first[p]);
  free(first);
  ctx_free(&x);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_fsdp");
  TCase *tc = tcase_create("cases");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, t_case, 0, (int)(sizeof cases / sizeof cases[0]));
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
#ifdef RT_MPI_MULTIPLE
  int provided = 0;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  mpi_multiple = provided == MPI_THREAD_MULTIPLE;
  printf("MPI thread level %s: the runtime %s a comm thread\n",
         mpi_multiple ? "MULTIPLE" : "below MULTIPLE",
         mpi_multiple ? "uses" : "does not use");
#endif
#ifdef RT_MPI
  tpx_error e = {0};
  if (tpx_comm_create_mpi(NULL, &mpi_world, &e) != TPX_OK) {
    fprintf(stderr, "test_rt_fsdp_mpi: %s\n", e.message);
    return EXIT_FAILURE;
  }
#endif
  SRunner *r = srunner_create(suite());
#ifdef RT_MPI
  srunner_set_fork_status(r, CK_NOFORK);
  srunner_run_all(r, tpx_comm_rank(mpi_world) == 0 ? CK_NORMAL : CK_SILENT);
#else
  srunner_run_all(r, CK_NORMAL);
#endif
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
#ifdef RT_MPI
  tpx_comm_destroy(mpi_world); /* finalizes MPI when tpx initialised it */
#endif
#ifdef RT_MPI_MULTIPLE
  MPI_Finalize();
#endif
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
