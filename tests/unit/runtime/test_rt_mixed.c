/* test_rt_mixed.c — FSDP2 mixed precision in the runtime, on the tiny model
 * over local threads:
 *  - f32 storage, bf16 compute (MixedPrecisionPolicy param_dtype=bf16,
 *    reduce_dtype=f32): unsharded tensors are the bf16 rounding of the
 *    parameters, bf16 gradients are reduced in f32 to their mean;
 *  - bf16 storage with an f32 master: the master keeps the loaded f32
 *    values, the shard and the gathered tensors are its bf16 rounding, AdamW
 *    updates the master and re-rounds the storage;
 *  - byte accounting of both (2-byte unsharded buffers, master bytes). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fsdp_fixture.h"

typedef struct mcase {
  int64_t dps, tp;
  int bf16_storage; /* 0: f32 storage + bf16 compute; 1: bf16 storage */
} mcase;

static const mcase mcases[] = {
    {2, 2, 0}, {3, 1, 0}, {2, 2, 1}, {3, 1, 1}, {1, 4, 1},
};

typedef struct mctx {
  const mcase *c;
  tpx_model *model;
  tpx_plan *plan;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  int sim; /* the world's buffers in the sim memory space */
} mctx;

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  mctx *x = arg;
  const mcase *c = x->c;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, x->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = c->bf16_storage ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
  tpx_runtime *rt = NULL;
  RK_OK(tpx_runtime_create(x->sh, mc, &ro, &rt, E_));
  int64_t co[3];
  RK_OK(tpx_mesh_coords(x->mesh, rank, co, E_));
  int64_t d = co[1];
  size_t np = tpx_model_num_params(x->model), nu = tpx_runtime_num_units(rt);
  size_t root = nu - 1;
  int64_t padded = 0, kept_unsh = 0;
  float **ref = calloc(np, sizeof *ref);
  for (size_t p = 0; p < np; p++) {
    tpx_param_info info;
    tpx_model_param(x->model, (int64_t)p, &info, NULL);
    if (info.tied_to >= 0)
      continue;
    int64_t n = 1;
    for (int i = 0; i < info.ndim; i++) n *= info.shape[i];
    ref[p] = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) ref[p][i] = rt_weight((int64_t)p, i);
    RK_OK(tpx_runtime_load_param(rt, (int64_t)p, ref[p], TPX_DTYPE_F32, E_));
    tpx_runtime_param_info in;
    RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
    ck_assert_int_eq(in.storage_dtype, ro.storage_dtype);
    ck_assert_int_eq(in.compute_dtype, TPX_DTYPE_BF16);
    ck_assert_int_eq(in.reduce_dtype, TPX_DTYPE_F32);
    int64_t rows = info.ndim ? in.local_shape[0] : 1;
    int64_t pad = info.ndim ? (rows + c->dps - 1) / c->dps *
                                  (rows ? in.local_numel / rows : 0)
                            : 1;
    if (info.ndim && rows == 0)
      pad = 0;
    padded += pad;
    tpx_fsdp_unit fu;
    RK_OK(tpx_sharding_fsdp_unit(x->sh, (size_t)in.unit, &fu, E_));
    if (!fu.reshard_after_forward)
      kept_unsh += in.local_numel * 2;
    /* Shard and master. */
    const uint16_t *sb = rt_hv(x->sim, in.sharded);
    const float *ms = rt_hv(x->sim, in.master);
    for (int64_t i = 0; i < in.sharded_numel; i++) {
      float want = ref[p][rt_global_index(&in.global, info.shape, i)];
      ck_assert(ms[i] == want);
      if (c->bf16_storage)
        ck_assert(sb[i] == rt_to_bf16(want));
    }
  }
  int64_t pb = padded * (c->bf16_storage ? 2 + 4 : 4);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_PARAMS), pb);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GRADS),
                   padded * 4);

  for (int step = 0; step < 2; step++) {
    RK_OK(tpx_runtime_zero_grads(rt, E_));
    /* Forward: root, then the layers; unsharded = bf16(param). */
    for (size_t k = 0; k < nu; k++) {
      size_t u = k == 0 ? root : k - 1;
      RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_FORWARD, E_));
      for (size_t p = 0; p < np; p++) {
        if (!ref[p] || tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
          continue;
        tpx_param_info info;
        tpx_model_param(x->model, (int64_t)p, &info, NULL);
        tpx_runtime_param_info in;
        RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
        const uint16_t *un = rt_hv(x->sim, in.unsharded);
        int64_t bad = -1;
        for (int64_t i = 0; i < in.local_numel && bad < 0; i++)
          if (un[i] !=
              rt_to_bf16(ref[p][rt_global_index(&in.tp_local, info.shape, i)]))
            bad = i;
        ck_assert_msg(bad < 0, "rank %lld %s: unsharded[%lld]", (long long)rank,
                      info.fqn, (long long)bad);
      }
      RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, E_));
    }
    /* Only the units with reshard_after_forward false (the root, the last
     * layer) stay gathered: their bf16 tensors, nothing staged. */
    ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GATHER),
                     kept_unsh);
    /* Backward with bf16 gradients from each dp rank. */
    for (size_t k = nu; k-- > 0;) {
      size_t u = k == 0 ? root : k - 1;
      RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
      for (size_t p = 0; p < np; p++) {
        if (!ref[p] || tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
          continue;
        tpx_param_info info;
        tpx_model_param(x->model, (int64_t)p, &info, NULL);
        tpx_runtime_param_info in;
        RK_OK(tpx_runtime_param(rt, (int64_t)p, &in, E_));
        uint16_t *gr = rt_hv(x->sim, in.unsharded_grad);
        for (int64_t i = 0; i < in.local_numel; i++)
          gr[i] = rt_to_bf16(rt_grad(
              (int64_t)p, rt_global_index(&in.tp_local, info.shape, i), d));
      }
      RK_OK(tpx_runtime_reduce_grads(rt, u, E_));
      RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
    }
    for (size_t p = 0; p < np; p++) {
      if (!ref[p])
        continue;
      tpx_param_info info;
      tpx_model_param(x->model, (int64_t)p, &info, NULL);
      int64_t n = 1;
      for (int i = 0; i < info.ndim; i++) n *= info.shape[i];
      float *g = malloc((size_t)n * 4);
      RK_OK(tpx_runtime_gather_grad(rt, (int64_t)p, g, TPX_DTYPE_F32, E_));
      int64_t bad = -1;
      for (int64_t i = 0; i < n && bad < 0; i++) {
        double s = 0;
        for (int64_t k = 0; k < c->dps; k++)
          s += rt_from_bf16(rt_to_bf16(rt_grad((int64_t)p, i, k)));
        if (!(fabs(g[i] - s / (double)c->dps) <= 1e-6 * (1 + fabs(s))))
          bad = i;
      }
      ck_assert_msg(bad < 0, "rank %lld %s: grad[%lld] %g", (long long)rank,
                    info.fqn, (long long)bad, bad < 0 ? 0.0 : g[bad]);
      free(g);
    }
    tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
    ao.lr = 0.05;
    RK_OK(tpx_runtime_adamw_step(rt, &ao, E_));
    /* The new reference: the gathered f32 masters (exact AdamW is covered
     * by test_rt_fsdp); the next forward checks storage = bf16(master). */
    for (size_t p = 0; p < np; p++)
      if (ref[p])
        RK_OK(tpx_runtime_gather_param(rt, (int64_t)p, ref[p], TPX_DTYPE_F32,
                                       E_));
  }
  for (size_t p = 0; p < np; p++) free(ref[p]);
  free(ref);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

START_TEST(t_mixed) {
  const mcase *c = &mcases[_i];
  mctx x = {
      c, rt_tiny_model(), rt_tiny_plan(0), fx_mesh(1, c->dps, c->tp), NULL, 0};
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.param_dtype = c->bf16_storage ? TPX_DTYPE_INVALID : TPX_DTYPE_BF16;
  tpx_error e = {0};
  ck_assert_msg(tpx_sharding_create(x.model, x.plan, x.mesh, &so, &x.sh, &e) ==
                    TPX_OK,
                "%s", e.message);
  for (x.sim = 0; x.sim < 2; x.sim++) { /* host, then sim memory */
    tpx_status st = rt_local_run((int)(c->dps * c->tp), x.sim, body, &x, &e);
    ck_assert_msg(st == TPX_OK, "%s%s", x.sim ? "sim: " : "", e.message);
  }
  tpx_sharding_destroy(x.sh);
  tpx_mesh_destroy(x.mesh);
  tpx_plan_destroy(x.plan);
  tpx_model_destroy(x.model);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_mixed");
  TCase *tc = tcase_create("mixed");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, t_mixed, 0, (int)(sizeof mcases / sizeof mcases[0]));
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
