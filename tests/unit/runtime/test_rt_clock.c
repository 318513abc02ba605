/* test_rt_clock.c — what a mesh comm keeps beyond its dims, on 4 local
 * threads (tpx_mesh_create_fsdp2: dp_shard 2 x tp 2, the tiny model):
 *  - tpx_mesh_comm_view: a real dim's comm is tpx_mesh_comm_dim's; a
 *    flattened view (dp_cp) is split once, kept (the same pointer again) and
 *    spans the view's ranks; an unknown name and NULL arguments are refused;
 *  - tpx_mesh_comm_time: zero at first; each clocked call (a TP
 *    redistribution, a CP all-gather on one of mc's comms, runtime calls)
 *    adds one call and time to its own kind; a runtime call that makes
 *    others inside (clip_grad_norm: grad_norm, clip) counts once; plain
 *    collectives, and CP calls on a comm that is not mc's, count nothing;
 *    a too-small struct_size is refused. */
#include "rt_fsdp_fixture.h"

typedef struct {
  tpx_model *model;
  tpx_mesh *mesh;
  tpx_sharding *sh;
} cx;

static tpx_comm_time now(tpx_mesh_comm *mc) {
  tpx_comm_time t = TPX_COMM_TIME_INIT;
  ck_assert_int_eq(tpx_mesh_comm_time(mc, &t, NULL), TPX_OK);
  ck_assert(t.seconds == t.tp_seconds + t.cp_seconds + t.runtime_seconds);
  return t;
}

static void views(tpx_mesh_comm *mc, const tpx_mesh *mesh, int64_t rank) {
  tpx_comm *c = NULL, *c2 = NULL;
  RK_OK(tpx_mesh_comm_view(mc, "tp", &c, E_));
  ck_assert_ptr_eq(c, tpx_mesh_comm_dim(mc, tpx_mesh_dim_index(mesh, "tp")));
  RK_OK(tpx_mesh_comm_view(mc, "dp_cp", &c, E_)); /* collective: first ask */
  RK_OK(tpx_mesh_comm_view(mc, "dp_cp", &c2, E_));
  ck_assert_ptr_eq(c, c2);
  ck_assert_int_eq(tpx_comm_size(c), 2);
  int64_t ranks[4], idx = -1;
  RK_OK(tpx_mesh_group_ranks(mesh, "dp_cp", rank, ranks, &idx, E_));
  ck_assert_int_eq(tpx_comm_rank(c), idx);
  tpx_error e = {0};
  ck_assert_int_ne(tpx_mesh_comm_view(mc, "nope", &c2, &e), TPX_OK);
  ck_assert_msg(strstr(e.message, "nope"), "%s", e.message);
  ck_assert_ptr_null(c2);
  ck_assert_int_eq(tpx_mesh_comm_view(NULL, "tp", &c2, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_mesh_comm_view(mc, NULL, &c2, NULL),
                   TPX_INVALID_ARGUMENT);
}

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  cx *x = arg;
  int64_t rank = tpx_comm_rank(world);
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  RK_OK(tpx_mesh_comm_create(world, x->mesh, &mc, E_));
  tpx_comm_time t = now(mc);
  ck_assert(t.seconds == 0.0 && t.calls == 0);
  views(mc, x->mesh, rank);

  /* plain collectives: not clocked */
  tpx_comm *dp = NULL;
  RK_OK(tpx_mesh_comm_view(mc, "dp_cp", &dp, E_));
  double v = 1.0;
  RK_OK(tpx_comm_all_reduce(dp, &v, &v, 1, TPX_DTYPE_F64, TPX_REDUCE_SUM, E_));
  ck_assert_int_eq(now(mc).calls, 0);

  /* TP: one redistribution over tp */
  int64_t shape[2] = {4, 6}, ls[2] = {2, 6};
  float a[24], b[24];
  for (int i = 0; i < 24; i++) a[i] = (float)(i + 100 * rank);
  tpx_tensor in = tpx_tensor_make(a, TPX_DTYPE_F32, 2, ls);
  tpx_tensor out = tpx_tensor_make(b, TPX_DTYPE_F32, 2, shape);
  RK_OK(tpx_tp_redistribute(x->sh, mc, shape, tpx_placement_shard(0),
                            tpx_placement_replicate(), &in, &out, E_));
  t = now(mc);
  ck_assert_int_eq(t.calls, 1);
  ck_assert(t.tp_seconds > 0.0 && t.cp_seconds == 0.0 &&
            t.runtime_seconds == 0.0);

  /* CP: a sequence all-gather on mc's dp_cp comm counts; on a comm of
   * the world's own, not */
  int64_t lsh[3] = {1, 2, 3}, fsh[3] = {1, 4, 3};
  tpx_tensor tl = tpx_tensor_make(a, TPX_DTYPE_F32, 3, lsh);
  tpx_tensor tf = tpx_tensor_make(b, TPX_DTYPE_F32, 3, fsh);
  RK_OK(tpx_cp_all_gather_seq(dp, TPX_CP_CONTIGUOUS, &tl, &tf, E_));
  t = now(mc);
  ck_assert_int_eq(t.calls, 2);
  ck_assert(t.cp_seconds > 0.0);
  tpx_comm *own = NULL;
  RK_OK(tpx_comm_split_mesh_dim(world, x->mesh, "dp_cp", &own, E_));
  RK_OK(tpx_cp_all_gather_seq(own, TPX_CP_CONTIGUOUS, &tl, &tf, E_));
  tpx_comm_destroy(own);
  ck_assert_int_eq(now(mc).calls, 2);

  /* the runtime: each outermost call once */
  RK_OK(tpx_runtime_create(x->sh, mc, NULL, &rt, E_));
  RK_OK(tpx_runtime_forward_begin(rt, E_));
  RK_OK(tpx_runtime_backward_begin(rt, E_));
  RK_OK(tpx_runtime_backward_end(rt, E_));
  t = now(mc);
  ck_assert_int_eq(t.calls, 5);
  ck_assert(t.runtime_seconds > 0.0);
  double norm = 0;
  RK_OK(tpx_runtime_clip_grad_norm(rt, 1.0, 2.0, &norm, E_));
  ck_assert_int_eq(now(mc).calls, 6);

  tpx_comm_time small = {0};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_mesh_comm_time(mc, &small, &e), TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e.message, "TPX_COMM_TIME_INIT"), "%s", e.message);
  ck_assert_int_eq(tpx_mesh_comm_time(NULL, &t, NULL), TPX_INVALID_ARGUMENT);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  (void)err;
  return TPX_OK;
}

START_TEST(view_and_time) {
  cx x = {rt_tiny_model(), NULL, NULL};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_mesh_create_fsdp2(1, 2, 1, 2, &x.mesh, &e), TPX_OK);
  tpx_plan *plan = rt_tiny_plan(0);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.param_dtype = TPX_DTYPE_INVALID;
  x.sh = fx_shard(x.model, plan, x.mesh, &so);
  tpx_status st = tpx_local_run(4, body, &x, &e);
  ck_assert_msg(st == TPX_OK, "%s", e.message);
  tpx_sharding_destroy(x.sh);
  tpx_plan_destroy(plan);
  tpx_mesh_destroy(x.mesh);
  tpx_model_destroy(x.model);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_clock");
  TCase *tc = tcase_create("clock");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, view_and_time);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
