/* gpu_fsdp.c — tpx-gpu-check's "fsdp" group and the FSDP part of "bench":
 * the runtime's FSDP step (load, unshard, a written gradient reduced,
 * reshard, grad norm, AdamW, gather) on local worlds of 1, 2 and 4 ranks
 * whose buffers are CUDA device memory, against the same step on host
 * memory: final parameters bit for bit, the norm within 1e-12 relative
 * (the device's norm tree). The bench times one step on the device world,
 * split into its collectives (unshard, reduce_grads, reshard) and its
 * compute (grad norm, AdamW). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/runtime/rt_fsdp_fixture.h"
#include "device/cuda_api.h"
#include "gpu_check.h"

typedef struct frun {
  tpx_model *model;
  tpx_sharding *sh;
  tpx_mesh *mesh;
  float **out; /* final parameters, per param */
  double norm;
  double coll, comp; /* seconds on rank 0 */
} frun;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* This rank's slice of every gradient written into the unsharded grads,
 * as a trainer's backward would (cudaMemcpy on device memory). */
static tpx_status write_grads(tpx_runtime *rt, const tpx_model *m, size_t u,
                              int dev, tpx_error *err) {
  size_t np = tpx_model_num_params(m);
  for (size_t p = 0; p < np; p++) {
    if (tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
      continue;
    tpx_runtime_param_info in;
    tpx_status st = tpx_runtime_param(rt, (int64_t)p, &in, err);
    if (st != TPX_OK)
      return st;
    if (in.param != (int64_t)p)
      continue;
    /* in the compute dtype (bf16 under the default mixed precision) */
    size_t n = (size_t)in.local_numel, es = tpx_dtype_size(in.compute_dtype);
    unsigned char *g = rt_grad_bytes((int64_t)p, n, es);
    if (dev == 1)
      cudaMemcpy(in.unsharded_grad, g, n * es, cudaMemcpyHostToDevice);
    else
      memcpy(dev ? tpx__sim_untag(in.unsharded_grad) : in.unsharded_grad, g,
             n * es);
    free(g);
  }
  return TPX_OK;
}

static tpx_status step(tpx_comm *w, void *arg, tpx_error *err) {
  frun *r = arg;
  /* 1: cuda; 2: sim (the harness self-test) */
  int dev = strcmp(tpx_comm_memspace(w), "cuda") == 0  ? 1
            : strcmp(tpx_comm_memspace(w), "sim") == 0 ? 2
                                                       : 0;
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_mesh_comm_create(w, r->mesh, &mc, err);
  if (st == TPX_OK)
    st = tpx_runtime_create(r->sh, mc, NULL, &rt, err);
  if (st == TPX_OK)
    st = rt_load_weights(rt, r->model, err);
  double t0 = now(), coll = 0;
  size_t nu = st == TPX_OK ? tpx_runtime_num_units(rt) : 0;
  for (size_t u = nu; st == TPX_OK && u-- > 0;) {
    double c0 = now();
    st = tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, err);
    coll += now() - c0;
    if (st == TPX_OK)
      st = write_grads(rt, r->model, u, dev, err);
    c0 = now();
    if (st == TPX_OK)
      st = tpx_runtime_reduce_grads(rt, u, err);
    if (st == TPX_OK)
      st = tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, err);
    coll += now() - c0;
  }
  double c1 = now();
  if (st == TPX_OK)
    st = tpx_runtime_grad_norm(rt, 2.0, &r->norm, err);
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = 0.01;
  ao.weight_decay = 0.1;
  if (st == TPX_OK)
    st = tpx_runtime_adamw_step(rt, &ao, err);
  if (dev == 1)
    cudaDeviceSynchronize();
  if (tpx_comm_rank(w) == 0)
    r->coll = coll, r->comp = now() - c1;
  (void)t0;
  size_t np = tpx_model_num_params(r->model);
  for (size_t p = 0; p < np && st == TPX_OK; p++) {
    tpx_param_info in;
    tpx_model_param(r->model, (int64_t)p, &in, NULL);
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    float *o = malloc((size_t)(n ? n : 1) * 4);
    st = tpx_runtime_gather_param(rt, (int64_t)p, o, TPX_DTYPE_F32, err);
    if (tpx_comm_rank(w) == 0)
      r->out[p] = o;
    else
      free(o);
  }
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return st;
}

static void frun_init(frun *r, int world) {
  memset(r, 0, sizeof *r);
  r->model = rt_tiny_model();
  r->mesh = fx_mesh(1, world, 1);
  tpx_plan *plan = rt_tiny_plan(0);
  r->sh = fx_shard(r->model, plan, r->mesh, NULL);
  tpx_plan_destroy(plan);
  r->out = calloc(tpx_model_num_params(r->model), sizeof *r->out);
}

static void frun_free(frun *r) {
  size_t np = tpx_model_num_params(r->model);
  for (size_t p = 0; p < np; p++) free(r->out[p]);
  free(r->out);
  tpx_sharding_destroy(r->sh);
  tpx_mesh_destroy(r->mesh);
  tpx_model_destroy(r->model);
}

static tpx_status run_on(frun *r, int world, int dev, tpx_error *e) {
  tpx_local_options lo = TPX_LOCAL_OPTIONS_INIT;
  lo.cuda_memory = dev;
  return gc_sim ? tpx__local_run_sim(world, dev, step, r, e)
                : tpx_local_run_opts(world, &lo, step, r, e);
}

static void fsdp_cases(gc_group *g) {
  static const int worlds[] = {1, 2, 4};
  for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
    frun r[2];
    tpx_status st[2];
    tpx_error e[2] = {{0}, {0}};
    for (int dev = 0; dev < 2; dev++) {
      frun_init(&r[dev], worlds[w]);
      st[dev] = run_on(&r[dev], worlds[w], dev, &e[dev]);
    }
    gc_check(g, st[0] == TPX_OK && st[1] == TPX_OK,
             "fsdp world %d: host %s / cuda %s", worlds[w], e[0].message,
             e[1].message);
    if (st[0] == TPX_OK && st[1] == TPX_OK) {
      gc_check(g, fabs(r[0].norm - r[1].norm) <= 1e-12 * r[0].norm,
               "fsdp world %d: norm %.17g vs host %.17g", worlds[w], r[1].norm,
               r[0].norm);
      size_t np = tpx_model_num_params(r[0].model);
      for (size_t p = 0; p < np; p++) {
        tpx_param_info in;
        tpx_model_param(r[0].model, (int64_t)p, &in, NULL);
        int64_t n = 1;
        for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
        gc_check(g,
                 r[0].out[p] && r[1].out[p] &&
                     memcmp(r[0].out[p], r[1].out[p], (size_t)n * 4) == 0,
                 "fsdp world %d: %s differs between host and device", worlds[w],
                 in.fqn);
      }
    }
    frun_free(&r[0]), frun_free(&r[1]);
  }
}

static void fsdp_bench(gc_group *g) {
  frun r;
  frun_init(&r, 2);
  tpx_error e = {0};
  tpx_status st = run_on(&r, 2, 1, &e); /* warm-up */
  if (st == TPX_OK)
    st = run_on(&r, 2, 1, &e);
  gc_check(g, st == TPX_OK, "fsdp bench: %s", e.message);
  if (st == TPX_OK)
    printf("# fsdp step (tiny model, local world of 2 on one GPU, rank 0):"
           " collectives %.3f ms, compute %.3f ms (%.0f%% collectives)\n",
           1e3 * r.coll, 1e3 * r.comp,
           100.0 * r.coll / (r.coll + r.comp > 0 ? r.coll + r.comp : 1));
  frun_free(&r);
}

/* The fixture's helpers assert with Check, so the cases run as one Check
 * test in this process (no fork: CUDA does not survive one). */
static gc_group *cur;
static int bench;

START_TEST(t_fsdp) {
  if (bench)
    fsdp_bench(cur);
  else
    fsdp_cases(cur);
}
END_TEST

static void in_check(gc_group *g, int b) {
  cur = g, bench = b;
  Suite *s = suite_create("gpu_fsdp");
  TCase *tc = tcase_create("fsdp");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, t_fsdp);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  gc_check(g, srunner_ntests_failed(sr) == 0,
           "fsdp: a fixture assertion failed");
  srunner_free(sr);
}

void gc_fsdp_run(gc_group *g) { in_check(g, 0); }
void gc_fsdp_bench(gc_group *g) { in_check(g, 1); }
