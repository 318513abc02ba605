/* test_rt_memory.c — the training-memory estimate (tpx/memory.h) against
 * what the runtime (tpx/runtime.h) really allocates, on every rank of local
 * worlds: parameters, gradients and optimizer state agree to the byte.
 *
 * The runtime books the f32 master copy of low-precision parameters with
 * the parameters and its AdamW states as optimizer state (allocated at the
 * first step); the estimate books the master under optimizer and says how
 * much it is (tpx_memory.master). So, per rank:
 *   TPX_RUNTIME_MEM_PARAMS    == params + master
 *   TPX_RUNTIME_MEM_GRADS     == grads
 *   TPX_RUNTIME_MEM_OPTIMIZER == optimizer - master   (after one step)
 * Models: the bf16 tiny llama of the shard tests (masters; even and uneven
 * splits) and the f32 runtime model with odd sizes, a 0-d parameter and a
 * tied head. Without FSDP the runtime computes in the storage dtype and
 * needs f32, so those cases use the f32 model. tpx_runtime_memory_stats
 * gives every figure of the single accessors at once (checked after the
 * step, and its refusals). */
#include "../shard/shard_fixture.h"
#include "rt_fsdp_fixture.h"
#include "tpx/runtime.h"

typedef struct {
  const char *name;
  int model; /* 0: tiny llama (bf16), 1: runtime model (f32, odd sizes) */
  int64_t dpr, dps, tp;
  int fsdp;
} mcase;

static const mcase cases[] = {
    {"llama 1x1x1", 0, 1, 1, 1, 1}, {"llama 1x2x2", 0, 1, 2, 2, 1},
    {"llama 1x3x1", 0, 1, 3, 1, 1}, {"llama 2x3x2", 0, 2, 3, 2, 1},
    {"llama 1x1x4", 0, 1, 1, 4, 1}, {"odd 1x2x2 no fsdp", 1, 1, 2, 2, 0},
    {"odd 1x3x2", 1, 1, 3, 2, 1},   {"odd 2x2x3", 1, 2, 2, 3, 1},
    {"odd 1x4x1", 1, 1, 4, 1, 1},   {"odd 1x1x2 no fsdp", 1, 1, 1, 2, 0},
};

typedef struct {
  const tpx_sharding *sh;
  const tpx_mesh *mesh;
} ctx;

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  ctx *x = arg;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_mesh_comm_create(world, x->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  st = tpx_runtime_create(x->sh, mc, NULL, &rt, err);
  if (st != TPX_OK) {
    tpx_mesh_comm_destroy(mc);
    return st;
  }
  tpx_memory m;
  st = tpx_memory_rank(x->sh, NULL, rank, &m, err);
  if (st == TPX_OK) {
    int64_t params = tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_PARAMS);
    int64_t grads = tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GRADS);
    ck_assert_msg(params == m.params + m.master,
                  "rank %lld: runtime params %lld, estimate %lld + master "
                  "%lld",
                  (long long)rank, (long long)params, (long long)m.params,
                  (long long)m.master);
    ck_assert_msg(grads == m.grads,
                  "rank %lld: runtime grads %lld, "
                  "estimate %lld",
                  (long long)rank, (long long)grads, (long long)m.grads);
    ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_OPTIMIZER),
                     0);
    tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
    st = tpx_runtime_adamw_step(rt, &ao, err);
  }
  if (st == TPX_OK) {
    int64_t opt = tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_OPTIMIZER);
    ck_assert_msg(opt == m.optimizer - m.master,
                  "rank %lld: runtime optimizer %lld, estimate %lld - master "
                  "%lld",
                  (long long)rank, (long long)opt, (long long)m.optimizer,
                  (long long)m.master);
    tpx_runtime_memory ms = TPX_RUNTIME_MEMORY_INIT;
    st = tpx_runtime_memory_stats(rt, &ms, err);
    for (int k = 0; st == TPX_OK && k <= TPX_RUNTIME_MEM_TOTAL; k++) {
      ck_assert_int_eq(ms.allocated[k], tpx_runtime_allocated_bytes(rt, k));
      ck_assert_int_eq(ms.peak[k], tpx_runtime_peak_bytes(rt, k));
    }
    ck_assert_int_eq(ms.cached, tpx_runtime_cached_bytes(rt));
    ck_assert_int_eq(ms.device, tpx_runtime_space_bytes(rt, 0, 0));
    ck_assert_int_eq(ms.device_peak, tpx_runtime_space_bytes(rt, 0, 1));
    ck_assert_int_eq(ms.host, tpx_runtime_space_bytes(rt, 1, 0));
    ck_assert_int_eq(ms.host_peak, tpx_runtime_space_bytes(rt, 1, 1));
    ck_assert_int_eq(ms.device + ms.host, ms.allocated[TPX_RUNTIME_MEM_TOTAL]);
    tpx_runtime_memory small = {0};
    tpx_error e2 = {0};
    ck_assert_int_eq(tpx_runtime_memory_stats(rt, &small, &e2),
                     TPX_INVALID_ARGUMENT);
    ck_assert_msg(strstr(e2.message, "TPX_RUNTIME_MEMORY_INIT"), "%s",
                  e2.message);
    ck_assert_int_eq(tpx_runtime_memory_stats(NULL, &ms, NULL),
                     TPX_INVALID_ARGUMENT);
  }
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(agree) {
  const mcase *c = &cases[_i];
  tpx_model *model = c->model ? rt_tiny_model() : fx_llama();
  tpx_plan *plan = c->model ? rt_tiny_plan(0) : fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(c->dpr, c->dps, c->tp);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = c->fsdp;
  if (c->model)
    so.param_dtype = TPX_DTYPE_INVALID; /* f32 compute */
  tpx_sharding *sh = fx_shard(model, plan, mesh, &so);
  ctx x = {sh, mesh};
  tpx_error e = {0};
  tpx_status st = tpx_local_run((int)(c->dpr * c->dps * c->tp), body, &x, &e);
  ck_assert_msg(st == TPX_OK, "%s: %s", c->name, e.message);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(plan);
  tpx_model_destroy(model);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_memory");
  TCase *tc = tcase_create("agree");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, agree, 0, (int)(sizeof cases / sizeof cases[0]));
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
