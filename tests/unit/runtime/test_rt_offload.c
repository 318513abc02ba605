/* test_rt_offload.c — FSDP2 CPU offload in the runtime
 * (tpx_runtime_options.offload, FSDP2's CPUOffloadPolicy), on local
 * threads with the world in the sim memory space: every buffer of the comm
 * path is a tagged pointer that faults on a host access, while the
 * offloaded shards are plain host pointers that fault when handed to the
 * space's ops as device buffers. So a wrong-side access anywhere crashes.
 * One table of (model, mesh, precision) cases, each trained 3 steps
 * (two micro-batches in step 2, a clip in step 1, AdamW every step):
 *  - the sharded parameters, masters and gradients are host pointers
 *    under offload (and sim pointers without), the unsharded parameters
 *    and gradients sim pointers either way;
 *  - the offloaded masters and gradients, read on the host directly, are
 *    this rank's slices of the gathered parameters and gradients;
 *  - byte accounting: the host bytes are exactly the parameters,
 *    gradients and optimizer state (plus D2H staging at the peak), the
 *    device bytes the rest;
 *  - the final parameters, the last gradients and every step's grad norm
 *    are bit-identical to the run without offload (sim and host memory),
 *    with and without the comm thread.
 * Under TPX_TEST_DEVICE=cuda (tools/gpu-check.sh) the device world is CUDA
 * managed memory: pointer sides are not checked by tag there, and the
 * comparison is to 1e-6 (host loops against CUDA kernels).
 * Also: offload without FSDP units is refused. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fsdp_fixture.h"

typedef struct ocase {
  const char *name;
  int llama; /* shard_fixture's llama (tied) and its plan; else the tiny */
  int sp;    /* tiny: sequence-parallel norms */
  int64_t dpr, dps, tp;
  int mp; /* 0 f32; 1 f32 storage + bf16 compute; 2 bf16 storage + master */
} ocase;

static const ocase cases[] = {
    {"tiny 1x1x1", 0, 0, 1, 1, 1, 0},
    {"tiny dp2", 0, 0, 1, 2, 1, 0},
    {"tiny dp3 uneven", 0, 0, 1, 3, 1, 0},
    {"tiny dp2 tp2", 0, 0, 1, 2, 2, 0},
    {"tiny sp dp3 tp2 uneven", 0, 1, 1, 3, 2, 0},
    {"tiny tp4 (dp_shard 1)", 0, 1, 1, 1, 4, 0},
    {"tiny hsdp 2x2", 0, 0, 2, 2, 1, 0},
    {"tiny hsdp 2x3 uneven", 0, 0, 2, 3, 1, 0},
    {"tiny sp hsdp 2x1 tp2", 0, 1, 2, 1, 2, 0},
    {"llama dp2 tp2", 1, 0, 1, 2, 2, 0},
    {"llama hsdp 2x2 tp2", 1, 0, 2, 2, 2, 0},
    {"tiny bf16 compute dp2 tp2", 0, 0, 1, 2, 2, 1},
    {"tiny bf16 storage dp3", 0, 0, 1, 3, 1, 2},
    {"tiny bf16 storage hsdp 2x2", 0, 1, 2, 2, 1, 2},
};

enum { STEPS = 3 };

typedef struct octx {
  const ocase *c;
  tpx_model *model;
  tpx_plan *plan;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  int offload, sim, async;
  size_t np;
  int64_t *numel;
  int *alias;
  /* rank 0's results: parameters after the last step, that step's reduced
   * (clip-free) gradients, every step's pre-clip L2 norm */
  float **final, **grads;
  double norms[STEPS];
} octx;

/* Elements of parameter p; *alias = 1 for a tied alias. */
static int64_t param_numel(const tpx_model *m, size_t p, int *alias) {
  tpx_param_info info;
  ck_assert_int_eq(tpx_model_param(m, (int64_t)p, &info, NULL), TPX_OK);
  *alias = info.tied_to >= 0;
  int64_t n = 1;
  for (int i = 0; i < info.ndim; i++) n *= info.shape[i];
  return n;
}

static void octx_init(octx *x, const ocase *c) {
  memset(x, 0, sizeof *x);
  x->c = c;
  if (c->llama) {
    fx_opts o = {0, 1, 0, 0, NULL};
    x->model = fx_model(&o);
    x->plan = fx_llama_plan();
  } else {
    x->model = rt_tiny_model();
    x->plan = rt_tiny_plan(c->sp);
  }
  x->mesh = fx_mesh(c->dpr, c->dps, c->tp);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = 1;
  so.param_dtype = c->mp == 1 ? TPX_DTYPE_BF16 : TPX_DTYPE_INVALID;
  x->sh = fx_shard(x->model, x->plan, x->mesh, &so);
  x->np = tpx_model_num_params(x->model);
  x->numel = calloc(x->np, sizeof *x->numel);
  x->alias = calloc(x->np, sizeof *x->alias);
  x->final = calloc(x->np, sizeof *x->final);
  x->grads = calloc(x->np, sizeof *x->grads);
  for (size_t p = 0; p < x->np; p++) {
    x->numel[p] = param_numel(x->model, p, &x->alias[p]);
    if (!x->alias[p]) {
      x->final[p] = calloc((size_t)x->numel[p], 4);
      x->grads[p] = calloc((size_t)x->numel[p], 4);
    }
  }
}

static void octx_free(octx *x) {
  for (size_t p = 0; p < x->np; p++) {
    free(x->final[p]);
    free(x->grads[p]);
  }
  free(x->final);
  free(x->grads);
  free(x->numel);
  free(x->alias);
  tpx_sharding_destroy(x->sh);
  tpx_mesh_destroy(x->mesh);
  tpx_plan_destroy(x->plan);
  tpx_model_destroy(x->model);
}

/* The world's device pointers carry the sim tag (not under
 * TPX_TEST_DEVICE=cuda, where they are CUDA managed memory). */
static int tagged_world(const octx *x) {
  return x->sim && !tpx__test_device_cuda();
}

/* p is where it should be: a device pointer of a tagged world when
 * `dev`, a host pointer when not (untestable by tag on cuda). */
static void check_side(const octx *x, const void *p, int dev) {
  if (tagged_world(x) || !x->sim)
    ck_assert_int_eq(tpx__sim_is_tagged(p), dev && x->sim);
}

/* The sharded state sits on the host under offload, in the world's space
 * without; both byte tallies agree with it. */
static void check_placement(const octx *x, tpx_runtime *rt, int64_t rank) {
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    tpx_runtime_param_info in;
    RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
    check_side(x, in.sharded, !x->offload);
    check_side(x, in.master, !x->offload);
    check_side(x, in.sharded_grad, !x->offload);
  }
  int64_t state = 0;
  for (int k = TPX_RUNTIME_MEM_PARAMS; k <= TPX_RUNTIME_MEM_OPTIMIZER; k++)
    state += tpx_runtime_allocated_bytes(rt, (tpx_runtime_mem_kind)k);
  int64_t host = tpx_runtime_space_bytes(rt, 1, 0);
  int64_t dev = tpx_runtime_space_bytes(rt, 0, 0);
  ck_assert_int_gt(state, 0);
  ck_assert_int_eq(host, x->offload ? state : 0);
  ck_assert_int_eq(host + dev,
                   tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_TOTAL));
  ck_assert_int_eq(tpx_runtime_is_offloaded(rt), x->offload);
}

/* Forward over every unit (root first): the unsharded tensors live on the
 * device. */
static void forward(const octx *x, tpx_runtime *rt, int64_t rank) {
  size_t nu = tpx_runtime_num_units(rt);
  for (size_t k = 0; k < nu; k++) {
    size_t u = k == 0 ? nu - 1 : k - 1;
    RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_FORWARD, E_));
    for (size_t p = 0; p < x->np; p++) {
      if (x->alias[p] || tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
        continue;
      tpx_runtime_param_info in;
      RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
      ck_assert_ptr_nonnull(in.unsharded);
      check_side(x, in.unsharded, 1);
    }
    RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, E_));
  }
}

/* Backward over every unit (reverse): dp rank d writes gradients that
 * depend on the step and micro-batch, in the compute dtype. */
static void backward(const octx *x, tpx_runtime *rt, int64_t rank, int64_t d,
                     int64_t seed) {
  size_t nu = tpx_runtime_num_units(rt);
  for (size_t k = nu; k-- > 0;) {
    size_t u = k == 0 ? nu - 1 : k - 1;
    RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
    for (size_t p = 0; p < x->np; p++) {
      if (x->alias[p] || tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
        continue;
      tpx_runtime_param_info in;
      RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
      check_side(x, in.unsharded_grad, 1);
      tpx_param_info info;
      tpx_model_param(x->model, (int64_t)p, &info, NULL);
      void *g = rt_hv(x->sim, in.unsharded_grad);
      for (int64_t i = 0; i < in.local_numel; i++) {
        int64_t gi = rt_global_index(&in.tp_local, info.shape, i);
        float v = rt_grad((int64_t)p, gi, d + 7 * seed);
        if (in.compute_dtype == TPX_DTYPE_BF16)
          ((uint16_t *)g)[i] = rt_to_bf16(v);
        else
          ((float *)g)[i] += v;
      }
    }
    RK_OK(tpx_runtime_reduce_grads(rt, u, E_));
    RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
  }
}

/* Under offload: the host masters / gradients, read directly, are this
 * rank's slices of the gathered tensors (full: the gathered one). */
static void check_host_shard(const octx *x, tpx_runtime *rt, int64_t rank,
                             size_t p, const float *full, int grad) {
  tpx_runtime_param_info in;
  RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
  tpx_param_info info;
  tpx_model_param(x->model, (int64_t)p, &info, NULL);
  const float *h = grad ? in.sharded_grad : in.master;
  int64_t bad = -1;
  for (int64_t i = 0; i < in.sharded_numel && bad < 0; i++)
    if (h[i] != full[rt_global_index(&in.global, info.shape, i)])
      bad = i;
  ck_assert_msg(bad < 0, "rank %lld %s: host %s[%lld] is not its slice",
                (long long)rank, info.fqn, grad ? "grad" : "master",
                (long long)bad);
}

/* Gather every parameter (grad 0) or gradient (1) through tmp, check the
 * host shards against it under offload; rank 0 keeps it in keep[p]. */
static void gather_all(const octx *x, tpx_runtime *rt, int64_t rank, int grad,
                       float *tmp, float **keep) {
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    RK_OK(grad ? tpx_runtime_gather_grad(rt, (int64_t)p, tmp, TPX_DTYPE_F32, E_)
               : tpx_runtime_gather_param(rt, (int64_t)p, tmp, TPX_DTYPE_F32,
                                          E_));
    if (x->offload)
      check_host_shard(x, rt, rank, p, tmp, grad);
    if (rank == 0)
      memcpy(keep[p], tmp, (size_t)x->numel[p] * 4);
  }
}

/* After a step's backward: the gathered gradients (rank 0 keeps them),
 * the host shards against them, the norm, a clip in step 1. */
static void reduce_checks(octx *x, tpx_runtime *rt, int64_t rank, int64_t step,
                          float *tmp) {
  gather_all(x, rt, rank, 1, tmp, x->grads);
  double n2 = 0;
  RK_OK(tpx_runtime_grad_norm(rt, 2.0, &n2, E_));
  ck_assert(n2 > 0 && isfinite(n2));
  if (rank == 0)
    x->norms[step] = n2;
  if (step == 0)
    RK_OK(tpx_runtime_clip_grads(rt, 0.5 * n2, n2, E_));
}

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  octx *x = arg;
  const ocase *c = x->c;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, x->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = c->mp == 2 ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
  ro.offload = x->offload;
  ro.async = x->async;
  tpx_runtime *rt = NULL;
  RK_OK(tpx_runtime_create(x->sh, mc, &ro, &rt, E_));
  int64_t co[3];
  RK_OK(tpx_mesh_coords(x->mesh, rank, co, E_));
  int64_t d = co[0] * c->dps + co[1];
  check_placement(x, rt, rank);
  int64_t maxn = 1;
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    float *w = malloc((size_t)x->numel[p] * 4);
    for (int64_t i = 0; i < x->numel[p]; i++) w[i] = rt_weight((int64_t)p, i);
    RK_OK(tpx_runtime_load_param(rt, (int64_t)p, w, TPX_DTYPE_F32, E_));
    free(w);
    if (x->numel[p] > maxn)
      maxn = x->numel[p];
  }
  float *tmp = malloc((size_t)maxn * 4);
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = 0.01;
  ao.weight_decay = 0.1;
  for (int64_t step = 0; step < STEPS; step++) {
    RK_OK(tpx_runtime_zero_grads(rt, E_));
    forward(x, rt, rank);
    for (int mb = 0; mb < (step == 1 ? 2 : 1); mb++)
      backward(x, rt, rank, d, 2 * step + mb);
    RK_OK(tpx_runtime_wait(rt, E_));
    reduce_checks(x, rt, rank, step, tmp);
    RK_OK(tpx_runtime_adamw_step(rt, &ao, E_));
    check_placement(x, rt, rank);
    /* the D2H staging of the reduced shards came and went (from step 1
     * on it came on top of the optimizer state) */
    if (x->offload && step > 0)
      ck_assert_int_gt(tpx_runtime_space_bytes(rt, 1, 1),
                       tpx_runtime_space_bytes(rt, 1, 0));
    ck_assert_int_ge(tpx_runtime_space_bytes(rt, 0, 1),
                     tpx_runtime_space_bytes(rt, 0, 0));
  }
  gather_all(x, rt, rank, 0, tmp, x->final);
  free(tmp);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

/* rank 0's results of one run, kept for comparison */
typedef struct results {
  float **final, **grads;
  double norms[STEPS];
} results;

static void keep(const octx *x, results *r) {
  r->final = calloc(x->np, sizeof *r->final);
  r->grads = calloc(x->np, sizeof *r->grads);
  for (size_t p = 0; p < x->np; p++) {
    if (x->alias[p])
      continue;
    size_t b = (size_t)x->numel[p] * 4;
    r->final[p] = malloc(b);
    r->grads[p] = malloc(b);
    memcpy(r->final[p], x->final[p], b);
    memcpy(r->grads[p], x->grads[p], b);
  }
  memcpy(r->norms, x->norms, sizeof r->norms);
}

static void drop(const octx *x, results *r) {
  for (size_t p = 0; p < x->np; p++) {
    free(r->final[p]);
    free(r->grads[p]);
  }
  free(r->final);
  free(r->grads);
}

/* a and b agree: bit for bit in the host and sim spaces; on a GPU
 * (TPX_TEST_DEVICE=cuda) the offloaded norm and AdamW run as host loops
 * where the reference ran CUDA kernels, so to 1e-6 relative there. */
static int same_f32(const float *a, const float *b, int64_t n) {
  if (!tpx__test_device_cuda())
    return memcmp(a, b, (size_t)n * 4) == 0;
  for (int64_t i = 0; i < n; i++)
    if (!(fabsf(a[i] - b[i]) <= 1e-6f * (1.0f + fabsf(b[i]))))
      return 0;
  return 1;
}

static int same_f64(double a, double b) {
  if (!tpx__test_device_cuda())
    return memcmp(&a, &b, sizeof a) == 0;
  return fabs(a - b) <= 1e-9 * fabs(b);
}

START_TEST(t_offload) {
  const ocase *c = &cases[_i];
  octx x;
  octx_init(&x, c);
  /* {sim, offload, async}: the reference without offload first */
  static const int variants[][3] = {
      {1, 0, 1}, {1, 1, 1}, {1, 1, 0}, {0, 1, 1}, {0, 0, 1}};
  int nv = (int)(sizeof variants / sizeof *variants);
  results ref = {NULL, NULL, {0}};
  for (int k = 0; k < nv; k++) {
    x.sim = variants[k][0];
    x.offload = variants[k][1];
    x.async = variants[k][2];
    tpx_error e = {0};
    tpx_status st =
        rt_local_run((int)(c->dpr * c->dps * c->tp), x.sim, body, &x, &e);
    ck_assert_msg(st == TPX_OK, "%s (variant %d): %s", c->name, k, e.message);
    if (k == 0) {
      keep(&x, &ref);
      continue;
    }
    for (int s = 0; s < STEPS; s++)
      ck_assert_msg(same_f64(x.norms[s], ref.norms[s]),
                    "%s (variant %d) step %d: norm %.17g vs %.17g", c->name, k,
                    s, x.norms[s], ref.norms[s]);
    for (size_t p = 0; p < x.np; p++) {
      if (x.alias[p])
        continue;
      ck_assert_msg(same_f32(x.final[p], ref.final[p], x.numel[p]),
                    "%s (variant %d): parameter %zu differs", c->name, k, p);
      ck_assert_msg(same_f32(x.grads[p], ref.grads[p], x.numel[p]),
                    "%s (variant %d): gradient %zu differs", c->name, k, p);
    }
  }
  /* not vacuous: training moved the parameters */
  int moved = 0;
  for (size_t p = 0; p < x.np; p++)
    for (int64_t i = 0; !x.alias[p] && i < x.numel[p]; i++)
      moved |= ref.final[p][i] != rt_weight((int64_t)p, i);
  ck_assert(moved);
  drop(&x, &ref);
  octx_free(&x);
}
END_TEST

static tpx_status refuse_body(tpx_comm *world, void *arg, tpx_error *err) {
  tpx_sharding *sh = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK)
    return st;
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.offload = 1;
  tpx_runtime *rt = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_runtime_create(sh, mc, &ro, &rt, &e), TPX_UNSUPPORTED);
  ck_assert_ptr_null(rt);
  ck_assert_msg(strstr(e.message, "offload") && strstr(e.message, "FSDP"), "%s",
                e.message);
  /* without offload the same sharding runs */
  ro.offload = 0;
  ck_assert_int_eq(tpx_runtime_create(sh, mc, &ro, &rt, &e), TPX_OK);
  ck_assert_int_eq(tpx_runtime_is_offloaded(rt), 0);
  ck_assert_int_eq(tpx_runtime_space_bytes(rt, 1, 1), 0);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

START_TEST(t_refuse_without_fsdp) {
  tpx_model *m = rt_tiny_model();
  tpx_plan *p = rt_tiny_plan(0);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = 0;
  tpx_sharding *sh = fx_shard(m, p, mesh, &so);
  tpx_error e = {0};
  ck_assert_msg(rt_local_run(2, 1, refuse_body, sh, &e) == TPX_OK, "%s",
                e.message);
  ck_assert_int_eq(tpx_runtime_space_bytes(NULL, 0, 0), -1);
  ck_assert_int_eq(tpx_runtime_is_offloaded(NULL), 0);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_offload");
  TCase *tc = tcase_create("offload");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, t_offload, 0, (int)(sizeof cases / sizeof *cases));
  tcase_add_test(tc, t_refuse_without_fsdp);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
