/* test_tp_resolved.c — the resolved-transition pair of tpx/runtime_tp.h
 * (tpx_tp_transition_resolve, tpx_tp_transition_run_resolved) against the
 * older calls it replaces: for every module (styled or not), input / output
 * 0 and 1, forward and backward, plain and DTensor arrivals, every rank,
 * on the zoo plan (tp 2, 3, dp 2 x tp 2, tp 1), the llama sp1 plan and a
 * plan with keyword inputs: present, copy, layouts, local shapes and
 * keeps_dtensor equal what tpx_tp_transition_get / _layouts_dt / _shape_dt
 * / tpx_tp_output_keeps_dtensor / tpx_tp_kwarg_transition_* return; a
 * missing transition is present = 0, not an error; run_resolved moves the
 * same bytes as tpx_tp_transition_run_dt; bad input.
 * tpx_tp_transition_resolve_flow: a flow that states the same arrival
 * resolves the same transition, reads only the field its direction needs
 * (a forward input the activation's DTensor state, an input's backward how
 * that input arrived), and says what the result carries; a caller built
 * against the first tpx_tp_resolved (struct_size up to out_local) is served
 * without its tail being written, and refused by resolve_flow. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"

static const char kw_plan[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": ["
    "{\"module\": \"model.layers.0.self_attn\", \"style\": "
    "\"prepare_module_input\", \"input_kwarg_layouts\": {\"hidden_states\": "
    "\"shard(1)\", \"position_ids\": \"replicate\", \"past\": null}, "
    "\"desired_input_kwarg_layouts\": {\"position_ids\": \"shard(1)\", "
    "\"hidden_states\": \"replicate\", \"past\": null}},"
    "{\"module\": \"model.layers.0.self_attn.q_proj\", \"style\": "
    "\"colwise\"}]}";

static int same_pl(tpx_placement a, tpx_placement b) {
  return tpx_placement_equal(a, b);
}

static int same_shape(const int64_t *a, const int64_t *b, int n) {
  return memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0;
}

static int same_flow_pl(int set, tpx_placement a, tpx_placement b) {
  return set ? same_pl(a, b) : a.kind == TPX_REPLICATE;
}

/* resolve_flow with a flow stating `arr` (and a decoy in the field this
 * direction must not read) against the plain resolve r of the same case. */
static void check_flow(const tpx_sharding *sh, int64_t mod,
                       tpx_transition_side side, int index, int bwd,
                       const tpx_placement *arr, int64_t rank,
                       const tpx_tp_resolved *r, const char *where) {
  int64_t shape[3] = {2, 7, 12};
  tpx_placement rep = tpx_placement_replicate(), decoy = tpx_placement_shard(0);
  tpx_tp_flow f = {0, rep, 0, rep};
  if (bwd) { /* the activation's own state is not the input's arrival */
    f.dtensor = 1;
    f.layout = decoy;
    if (arr) {
      f.input_dtensor = 1;
      f.input_layout = *arr;
    }
  } else {
    f.input_dtensor = 1; /* a forward input overwrites it; an output keeps */
    f.input_layout = decoy;
    if (arr) {
      f.dtensor = 1;
      f.layout = *arr;
    }
  }
  tpx_tp_resolved q = TPX_TP_RESOLVED_INIT;
  tpx_error e = {0};
  tpx_status st = tpx_tp_transition_resolve_flow(sh, mod, side, index, bwd, &f,
                                                 rank, shape, 3, &q, &e);
  ck_assert_msg(st == TPX_OK, "%s: flow: %s", where, e.message);
  ck_assert_msg(q.present == r->present && q.is_copy == r->is_copy &&
                    q.keeps_dtensor == r->keeps_dtensor &&
                    same_pl(q.in_layout, r->in_layout) &&
                    same_pl(q.out_layout, r->out_layout) &&
                    same_shape(q.in_local, r->in_local, 3) &&
                    same_shape(q.out_local, r->out_local, 3),
                "%s: flow resolves another transition", where);
  tpx_tp_flow w = f; /* backward, or nothing runs: unchanged */
  if (r->present && !bwd && side == TPX_TRANSITION_INPUT) {
    w.input_dtensor = f.dtensor;
    w.input_layout = f.dtensor ? f.layout : rep;
    w.dtensor = 0;
    w.layout = rep;
  } else if (r->present && !bwd) {
    w.dtensor = r->keeps_dtensor;
    w.layout = r->keeps_dtensor ? r->out_layout : rep;
  }
  ck_assert_msg(
      q.flow.dtensor == w.dtensor &&
          same_flow_pl(w.dtensor, q.flow.layout, w.layout) &&
          q.flow.input_dtensor == w.input_dtensor &&
          same_flow_pl(w.input_dtensor, q.flow.input_layout, w.input_layout),
      "%s: flow after: dtensor %d input_dtensor %d", where, q.flow.dtensor,
      q.flow.input_dtensor);
}

typedef struct counts {
  int present, copies, moves, absent;
} counts;

/* One (module, side, index or kwarg, direction, arrival, rank). */
static void check_one(const tpx_sharding *sh, int64_t mod,
                      tpx_transition_side side, int index, const char *kwarg,
                      int bwd, const tpx_placement *arr, int64_t rank,
                      counts *n) {
  int64_t shape[3] = {2, 7, 12};
  char where[256];
  snprintf(where, sizeof where,
           "module %lld %s %d kwarg %s %s arrived %d "
           "rank %lld",
           (long long)mod, side ? "output" : "input", index,
           kwarg ? kwarg : "-", bwd ? "bwd" : "fwd", arr ? 1 : 0,
           (long long)rank);
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  tpx_error e = {0};
  tpx_status st = tpx_tp_transition_resolve(sh, mod, side, index, kwarg, bwd,
                                            arr, rank, shape, 3, &r, &e);
  /* the old calls */
  tpx_placement in, out;
  int copy = -1;
  int64_t lin[3], lout[3];
  tpx_status s1, s2, sg = TPX_OK;
  const tpx_transition *tr = NULL;
  if (kwarg) {
    s1 = tpx_tp_kwarg_transition_layouts(sh, mod, kwarg, bwd, arr, 3, &in, &out,
                                         &copy, NULL);
    s2 = tpx_tp_kwarg_transition_shape(sh, mod, kwarg, bwd, arr, rank, shape, 3,
                                       lin, lout, NULL);
  } else {
    sg = tpx_tp_transition_get(sh, mod, side, index, &tr, NULL);
    s1 = tpx_tp_transition_layouts_dt(sh, mod, side, index, bwd, arr, 3, &in,
                                      &out, &copy, NULL);
    s2 = tpx_tp_transition_shape_dt(sh, mod, side, index, bwd, arr, rank, shape,
                                    3, lin, lout, NULL);
  }
  ck_assert_int_eq(s1, s2);
  if (s1 == TPX_NOT_FOUND || sg == TPX_NOT_FOUND) {
    ck_assert_msg(st == TPX_OK, "%s: %s", where, e.message);
    ck_assert_msg(!r.present && r.is_copy && !r.keeps_dtensor, "%s", where);
    ck_assert(same_shape(r.in_local, r.out_local, 3));
    n->absent++;
    return;
  }
  ck_assert_msg(st == s1, "%s: %s vs %s (%s)", where, tpx_status_name(st),
                tpx_status_name(s1), e.message);
  if (st)
    return;
  ck_assert_msg(r.present ==
                    (kwarg ? tpx_tp_mesh_dim(sh) >= 0 &&
                                 tpx_mesh_dim_size(tpx_sharding_mesh(sh),
                                                   tpx_tp_mesh_dim(sh)) > 1
                           : tr != NULL),
                "%s: present %d", where, r.present);
  ck_assert_msg(same_pl(r.in_layout, in) && same_pl(r.out_layout, out) &&
                    r.is_copy == copy,
                "%s: layouts / copy", where);
  ck_assert_msg(same_shape(r.in_local, lin, 3) &&
                    same_shape(r.out_local, lout, 3),
                "%s: local shapes", where);
  int keeps = !kwarg && side == TPX_TRANSITION_OUTPUT &&
              tpx_tp_output_keeps_dtensor(sh, mod, index);
  ck_assert_msg(r.keeps_dtensor == keeps, "%s: keeps_dtensor", where);
  ck_assert(r.module == mod && r.backward == bwd && r.rank == rank &&
            r.ndim == 3 && same_shape(r.shape, shape, 3) &&
            r.arrived_set == (arr != NULL));
  if (!kwarg)
    check_flow(sh, mod, side, index, bwd, arr, rank, &r, where);
  n->present += r.present;
  n->copies += r.present && r.is_copy;
  n->moves += r.present && !r.is_copy;
}

static const char *const kwargs[] = {"hidden_states", "position_ids", "past",
                                     "nope"};

static counts check_all(const tpx_sharding *sh, int with_kwargs) {
  counts n = {0, 0, 0, 0};
  const tpx_model *m = tpx_sharding_model(sh);
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  tpx_placement arrs[4] = {tpx_placement_replicate(), tpx_placement_shard(1),
                           tpx_placement_shard(-1),
                           tpx_placement_partial(TPX_REDUCE_SUM)};
  for (size_t mi = 0; mi < tpx_model_num_modules(m); mi++)
    for (int side = 0; side < 2; side++)
      for (int index = 0; index < 2; index++)
        for (int bwd = 0; bwd < 2; bwd++)
          for (int a = -1; a < (side ? 0 : 4); a++)
            for (int64_t rank = 0; rank < world; rank++)
              check_one(sh, (int64_t)mi, (tpx_transition_side)side, index, NULL,
                        bwd, a < 0 ? NULL : &arrs[a], rank, &n);
  if (with_kwargs) {
    int64_t mod = tpx_model_find_module(m, "model.layers.0.self_attn");
    for (int k = 0; k < 4; k++)
      for (int bwd = 0; bwd < 2; bwd++)
        for (int a = -1; a < 4; a++)
          for (int64_t rank = 0; rank < world; rank++)
            check_one(sh, mod, TPX_TRANSITION_INPUT, 0, kwargs[k], bwd,
                      a < 0 ? NULL : &arrs[a], rank, &n);
  }
  return n;
}

typedef struct world_case {
  int plan; /* 0 zoo, 1 llama sp1, 2 kwargs */
  int64_t dp, tp;
} world_case;

static const world_case world_cases[] = {
    {0, 1, 2}, {0, 1, 3}, {0, 2, 2}, {0, 2, 1}, {1, 1, 2}, {2, 1, 2},
};

START_TEST(test_resolve_matches_old_calls) {
  const world_case *c = &world_cases[_i];
  tpx_model *m = rt_model(256);
  tpx_plan *p = c->plan == 0   ? rt_plan_json(rt_zoo_plan)
                : c->plan == 1 ? rt_llama_plan(m, 1, c->tp)
                               : rt_plan_json(kw_plan);
  rt_world w = rt_world_of(m, p, c->dp, c->tp);
  counts n = check_all(w.sh, c->plan == 2);
  ck_assert_int_gt(n.absent, 0); /* unstyled modules, missing sides */
  if (c->tp > 1) {
    ck_assert_int_gt(n.moves, 0);
    ck_assert_int_gt(n.copies, 0);
  } else {
    ck_assert_int_eq(n.present, 0);
  }
  rt_world_free(&w);
}
END_TEST

/* ---- run_resolved against run_dt --------------------------------------- */

static tpx_status run_body(tpx_comm *world, void *arg, tpx_error *err) {
  const tpx_sharding *sh = ((rt_sh_arg *)arg)->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st)
    return st;
  const tpx_model *m = tpx_sharding_model(sh);
  int64_t me = tpx_comm_rank(world), shape[3] = {2, 7, 12};
  float x[2 * 7 * 12], y1[2 * 7 * 12], y2[2 * 7 * 12];
  for (size_t mi = 0; mi < tpx_model_num_modules(m) && !st; mi++)
    for (int side = 0; side < 2 && !st; side++)
      for (int bwd = 0; bwd < 2 && !st; bwd++) {
        tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
        st = tpx_tp_transition_resolve(sh, (int64_t)mi,
                                       (tpx_transition_side)side, 0, NULL, bwd,
                                       NULL, me, shape, 3, &r, err);
        if (st || !r.present)
          continue;
        for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
          x[i] = (float)((int64_t)i * 7 + me * 1000 + (int64_t)mi);
        memset(y1, 0, sizeof y1);
        memset(y2, 0, sizeof y2);
        tpx_tensor in = tpx_tensor_make(x, TPX_DTYPE_F32, 3, r.in_local);
        tpx_tensor o1 = tpx_tensor_make(y1, TPX_DTYPE_F32, 3, r.out_local);
        tpx_tensor o2 = tpx_tensor_make(y2, TPX_DTYPE_F32, 3, r.out_local);
        st = tpx_tp_transition_run_resolved(sh, mc, &r, &in, &o1, err);
        if (!st)
          st = tpx_tp_transition_run_dt(sh, mc, (int64_t)mi,
                                        (tpx_transition_side)side, 0, bwd, NULL,
                                        shape, &in, &o2, err);
        if (!st && memcmp(y1, y2, sizeof y1) != 0)
          st = tpx_error_set(err, TPX_VALIDATION,
                             "module %zu side %d bwd %d: run_resolved and "
                             "run_dt differ",
                             mi, side, bwd);
      }
  if (!st) { /* resolved for another rank: refused */
    int64_t mod = tpx_model_find_module(m, "model.layers.0.self_attn.q_proj");
    tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
    st = tpx_tp_transition_resolve(sh, mod, TPX_TRANSITION_INPUT, 0, NULL, 0,
                                   NULL, (me + 1) % tpx_comm_size(world), shape,
                                   3, &r, err);
    tpx_tensor in = tpx_tensor_make(x, TPX_DTYPE_F32, 3, r.in_local);
    tpx_tensor o = tpx_tensor_make(y1, TPX_DTYPE_F32, 3, r.out_local);
    tpx_error e = {0};
    if (!st && (tpx_tp_transition_run_resolved(sh, mc, &r, &in, &o, &e) !=
                    TPX_INVALID_ARGUMENT ||
                !strstr(e.message, "resolved for rank")))
      st = tpx_error_set(err, TPX_VALIDATION, "other rank: '%s'", e.message);
  }
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(test_run_resolved) {
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_plan_json(rt_zoo_plan), 1, 3);
  rt_run_body(run_body, w.sh);
  rt_world_free(&w);
}
END_TEST

/* ---- bad input ---------------------------------------------------------- */

START_TEST(test_bad_input) {
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_plan_json(rt_zoo_plan), 1, 2);
  int64_t mod = tpx_model_find_module(m, "model.layers.0.self_attn.q_proj");
  int64_t shape[3] = {2, 7, 12};
  tpx_placement s1 = tpx_placement_shard(1);
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  tpx_error e = {0};
#define BAD(call, want, needle)                                                \
  do {                                                                         \
    memset(&e, 0, sizeof e);                                                   \
    ck_assert_int_eq((call), (want));                                          \
    ck_assert_msg(strstr(e.message, (needle)), "%s", e.message);               \
  } while (0)
  BAD(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_INPUT, 0, NULL, 0,
                                NULL, 0, shape, 3, NULL, &e),
      TPX_INVALID_ARGUMENT, "out is NULL");
  tpx_tp_resolved small = {0};
  BAD(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_INPUT, 0, NULL, 0,
                                NULL, 0, shape, 3, &small, &e),
      TPX_INVALID_ARGUMENT, "TPX_TP_RESOLVED_INIT");
  /* the first version's struct: served, its (absent) tail untouched */
  struct {
    tpx_tp_resolved r;
    unsigned char pad[64];
  } v1;
  memset(&v1, 0xab, sizeof v1);
  v1.r.struct_size = offsetof(tpx_tp_resolved, flow);
  memset(&e, 0, sizeof e);
  ck_assert_int_eq(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_INPUT, 0,
                                             NULL, 0, NULL, 0, shape, 3, &v1.r,
                                             &e),
                   TPX_OK);
  ck_assert_uint_eq(v1.r.struct_size, offsetof(tpx_tp_resolved, flow));
  ck_assert(v1.r.present && !v1.r.is_copy);
  const unsigned char *tail = (const unsigned char *)&v1.r.flow;
  for (size_t i = 0; i < sizeof v1.r.flow; i++)
    ck_assert_uint_eq(tail[i], 0xab);
  BAD(tpx_tp_transition_resolve_flow(w.sh, mod, TPX_TRANSITION_INPUT, 0, 0,
                                     NULL, 0, shape, 3, &v1.r, &e),
      TPX_INVALID_ARGUMENT, "TPX_TP_RESOLVED_INIT");
  BAD(tpx_tp_transition_resolve_flow(w.sh, 100000, TPX_TRANSITION_INPUT, 0, 0,
                                     NULL, 0, shape, 3, &r, &e),
      TPX_OUT_OF_RANGE, "100000");
  BAD(tpx_tp_transition_resolve(w.sh, 100000, TPX_TRANSITION_INPUT, 0, NULL, 0,
                                NULL, 0, shape, 3, &r, &e),
      TPX_OUT_OF_RANGE, "100000");
  BAD(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_INPUT, 0, NULL, 0,
                                NULL, 2, shape, 3, &r, &e),
      TPX_OUT_OF_RANGE, "rank 2");
  BAD(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_OUTPUT, 0, NULL, 0,
                                &s1, 0, shape, 3, &r, &e),
      TPX_INVALID_ARGUMENT, "inputs only");
  BAD(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_OUTPUT, 0, "x", 0,
                                NULL, 0, shape, 3, &r, &e),
      TPX_INVALID_ARGUMENT, "side INPUT");
  BAD(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_INPUT, 0, NULL, 0,
                                NULL, 0, NULL, 3, &r, &e),
      TPX_INVALID_ARGUMENT, "tpx_tp_transition_resolve");
  tpx_placement s9 = tpx_placement_shard(9);
  memset(&e, 0, sizeof e);
  ck_assert_int_ne(tpx_tp_transition_resolve(w.sh, mod, TPX_TRANSITION_INPUT, 0,
                                             NULL, 0, &s9, 0, shape, 3, &r, &e),
                   TPX_OK);
#undef BAD
  rt_world_free(&w);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_tp_resolved");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_resolve_matches_old_calls, 0,
                      sizeof world_cases / sizeof world_cases[0]);
  tcase_add_test(tc, test_run_resolved);
  tcase_add_test(tc, test_bad_input);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
