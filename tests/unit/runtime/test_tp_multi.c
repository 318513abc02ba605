/* test_tp_multi.c — transitions beyond positional input / output 0, on
 * local threads: prepare_module_input keyword inputs
 * (tpx_tp_kwarg_transition_*: every kwarg, forward and backward, plain and
 * DTensor arrivals, against the logical tensor sliced by the layout, with
 * and without use_local_output, at tp 2, 3 and 4 (uneven sequence shards),
 * tp 1 copies, bad input) and rotary_embed_parallel's outputs 0 and 1
 * (cos, sin: Replicate over the whole sequence, no collective). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"
#include "rt_util.h"

/* attn: use_local_output 0; mlp: use_local_output 1. At most 4 kwargs per
 * style (TPX_STYLE_MAX_KWARGS). */
static const char kw_plan[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": ["
    "{\"module\": \"model.layers.0.self_attn\", \"style\": "
    "\"prepare_module_input\", \"input_kwarg_layouts\": {\"hidden_states\": "
    "\"shard(1)\", \"position_ids\": \"replicate\", \"past\": null, "
    "\"bias\": \"partial\"}, \"desired_input_kwarg_layouts\": "
    "{\"position_ids\": \"shard(1)\", \"hidden_states\": \"replicate\", "
    "\"past\": null, \"bias\": \"replicate\"}},"
    "{\"module\": \"model.layers.0.mlp\", \"style\": "
    "\"prepare_module_input\", \"use_local_output\": true, "
    "\"input_kwarg_layouts\": {\"x\": \"shard(1)\", \"same\": \"shard(1)\", "
    "\"nodesired\": \"replicate\", \"y\": \"replicate\"}, "
    "\"desired_input_kwarg_layouts\": {\"x\": \"replicate\", \"same\": "
    "\"shard(1)\", \"nodesired\": null, \"y\": \"shard(-1)\"}},"
    "{\"module\": \"model.layers.0.self_attn.q_proj\", \"style\": "
    "\"colwise\"}]}";

/* What the plain (NULL arrival) call reads and writes, as torch runs it. */
typedef struct kw_want {
  const char *module, *kwarg;
  const char *fin, *fout, *bin, *bout; /* forward / backward layouts */
  int fcopy, bcopy;
  int keeps; /* a DTensor passes as it arrived (None / annotated == desired) */
} kw_want;

static const kw_want kw_wants[] = {
    {"model.layers.0.self_attn", "hidden_states", "shard(1)", "replicate",
     "partial", "shard(1)", 0, 0, 0},
    {"model.layers.0.self_attn", "position_ids", "replicate", "shard(1)",
     "shard(1)", "replicate", 0, 0, 0},
    {"model.layers.0.self_attn", "past", "replicate", "replicate", "replicate",
     "replicate", 1, 1, 1},
    {"model.layers.0.self_attn", "bias", "partial", "replicate", "replicate",
     "replicate", 0, 1, 0},
    /* use_local_output: the gathered input's gradient comes back replicated
     * (a local chunk, not a reduce-scatter) */
    {"model.layers.0.mlp", "x", "shard(1)", "replicate", "replicate",
     "shard(1)", 0, 0, 0},
    {"model.layers.0.mlp", "same", "shard(1)", "shard(1)", "shard(1)",
     "shard(1)", 1, 1, 1},
    {"model.layers.0.mlp", "nodesired", "replicate", "replicate", "replicate",
     "replicate", 1, 1, 1},
    {"model.layers.0.mlp", "y", "replicate", "shard(-1)", "shard(-1)",
     "replicate", 0, 0, 0},
};
#define N_KW (sizeof kw_wants / sizeof kw_wants[0])

static tpx_placement pl(const char *s) {
  tpx_placement p;
  ck_assert(tpx_placement_parse(s, &p, NULL) == TPX_OK);
  return p;
}

static int pl_eq(tpx_placement a, tpx_placement b, int ndim) {
  tpx_placement x, y;
  if (tpx_placement_normalize(a, ndim, &x, NULL) != TPX_OK ||
      tpx_placement_normalize(b, ndim, &y, NULL) != TPX_OK)
    return 0;
  return tpx_placement_equal(x, y);
}

/* Layouts (no communication): the plain table, and the arrival rules. */
START_TEST(test_kwarg_layouts) {
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_plan_json(kw_plan), 1, 2);
  tpx_placement arr[2] = {tpx_placement_replicate(), tpx_placement_shard(1)};
  for (size_t k = 0; k < N_KW; k++) {
    const kw_want *c = &kw_wants[k];
    int64_t mod = tpx_model_find_module(m, c->module);
    for (int bwd = 0; bwd < 2; bwd++) {
      tpx_placement in, out;
      int copy;
      tpx_error e = {0};
      ck_assert_msg(tpx_tp_kwarg_transition_layouts(w.sh, mod, c->kwarg, bwd,
                                                    NULL, 3, &in, &out, &copy,
                                                    &e) == TPX_OK,
                    "%s", e.message);
      ck_assert_msg(pl_eq(in, pl(bwd ? c->bin : c->fin), 3) &&
                        pl_eq(out, pl(bwd ? c->bout : c->fout), 3) &&
                        copy == (bwd ? c->bcopy : c->fcopy),
                    "%s %s %s", c->module, c->kwarg, bwd ? "bwd" : "fwd");
      for (int a = 0; a < 2; a++) {
        ck_assert_int_eq(tpx_tp_kwarg_transition_layouts(w.sh, mod, c->kwarg,
                                                         bwd, &arr[a], 3, &in,
                                                         &out, &copy, NULL),
                         TPX_OK);
        tpx_placement g = arr[a]; /* a DTensor's gradient: its layout */
        if (c->keeps) {
          ck_assert_msg(pl_eq(in, g, 3) && pl_eq(out, g, 3) && copy, "%s kept",
                        c->kwarg);
        } else if (!bwd) {
          ck_assert_msg(pl_eq(in, arr[a], 3) && pl_eq(out, pl(c->fout), 3),
                        "%s arrived fwd", c->kwarg);
        } else if (!pl_eq(arr[a], pl(c->fout), 3)) {
          ck_assert_msg(pl_eq(out, arr[a], 3), "%s arrived bwd", c->kwarg);
        } else {
          ck_assert_msg(pl_eq(in, out, 3) && copy, "%s arrived = desired",
                        c->kwarg);
        }
      }
    }
  }
  rt_world_free(&w);
}
END_TEST

/* One kwarg, one direction, one arrival, on this rank's data. */
static void kw_one(const tpx_sharding *sh, tpx_mesh_comm *mc, int64_t mod,
                   const char *kwarg, int bwd, const tpx_placement *arrived,
                   int64_t salt, tpx_error *err) {
  int64_t shape[3] = {2, 7, 12};
  int64_t me = tpx_comm_rank(tpx_mesh_comm_world(mc));
  char where[160];
  snprintf(where, sizeof where, "kwarg '%s' %s (%s)", kwarg,
           bwd ? "backward" : "forward", arrived ? "DTensor" : "plain");
  tpx_placement in_pl, out_pl;
  int copy;
  tpx_error e = {0};
  if (tpx_tp_kwarg_transition_layouts(sh, mod, kwarg, bwd, arrived, 3, &in_pl,
                                      &out_pl, &copy, &e) != TPX_OK) {
    rtu_lib_failed(err, where, &e);
    return;
  }
  int64_t n = rtu_numel(shape, 3);
  double *full = malloc((size_t)n * sizeof *full);
  double *pin = malloc((size_t)n * sizeof *pin);
  double *pout = malloc((size_t)n * sizeof *pout);
  for (int64_t i = 0; i < n; i++) full[i] = rtu_ival(i, salt);
  int64_t lin[3], lout[3], sin_[3], sout[3];
  tpx_status st = rtu_piece_of(sh, mc, in_pl, full, shape, 3, pin, lin, &e);
  if (st == TPX_OK)
    st = rtu_piece_of(sh, mc, out_pl, full, shape, 3, pout, lout, &e);
  if (st == TPX_OK)
    st = tpx_tp_kwarg_transition_shape(sh, mod, kwarg, bwd, arrived, me, shape,
                                       3, sin_, sout, &e);
  if (st != TPX_OK) {
    rtu_lib_failed(err, where, &e);
    free(full), free(pin), free(pout);
    return;
  }
  for (int d = 0; d < 3; d++)
    if (sin_[d] != lin[d] || sout[d] != lout[d])
      rtu_failed(err, "%s: shape dim %d", where, d);
  tpx_tensor tin = rtu_talloc(TPX_DTYPE_F32, 3, lin);
  tpx_tensor tout = rtu_talloc(TPX_DTYPE_F32, 3, lout);
  for (int64_t i = 0; i < rtu_numel(lin, 3); i++)
    ((float *)tin.data)[i] = (float)pin[i];
  rtu_sim sm;
  RTU_SIM(&sm, mc, &tin, &tout);
  st = tpx_tp_kwarg_transition_run(sh, mc, mod, kwarg, bwd, arrived, shape,
                                   &tin, &tout, &e);
  rtu_sim_end(&sm, me);
  if (st != TPX_OK) {
    rtu_lib_failed(err, where, &e);
  } else {
    for (int64_t i = 0; i < rtu_numel(lout, 3); i++)
      if (((float *)tout.data)[i] != (float)pout[i]) {
        rtu_failed(err, "%s: element %lld = %g, want %g", where, (long long)i,
                   ((float *)tout.data)[i], pout[i]);
        break;
      }
  }
  free(tin.data), free(tout.data), free(full), free(pin), free(pout);
}

static tpx_status kw_body(tpx_comm *world, void *arg, tpx_error *err) {
  rt_sh_arg *a = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_status st =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(a->sh), &mc, err);
  if (st != TPX_OK)
    return st;
  const tpx_model *m = tpx_sharding_model(a->sh);
  tpx_placement arr[2] = {tpx_placement_replicate(), tpx_placement_shard(1)};
  int64_t salt = tpx_comm_rank(world) - rtu_tp_coord(a->sh, mc);
  for (size_t k = 0; k < N_KW; k++) {
    int64_t mod = tpx_model_find_module(m, kw_wants[k].module);
    for (int bwd = 0; bwd < 2; bwd++) {
      kw_one(a->sh, mc, mod, kw_wants[k].kwarg, bwd, NULL, salt + (int64_t)k,
             err);
      for (int j = 0; j < 2; j++)
        kw_one(a->sh, mc, mod, kw_wants[k].kwarg, bwd, &arr[j],
               salt + (int64_t)k + 7 * j, err);
    }
  }
  tpx_mesh_comm_destroy(mc);
  return err->status;
}

/* Data against the logical tensor: tp 2, 3, 4; with a dp dim; tp 1. */
START_TEST(test_kwarg_data) {
  static const int64_t meshes[][2] = {{1, 2}, {1, 3}, {1, 4}, {2, 2}, {1, 1}};
  int64_t dp = meshes[_i][0], tp = meshes[_i][1];
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_plan_json(kw_plan), dp, tp);
  rt_run_body_mem(kw_body, w.sh, 1);
  rt_world_free(&w);
}
END_TEST

static tpx_status kw_bad_body(tpx_comm *world, void *arg, tpx_error *err) {
  rt_sh_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK)
    return st;
  const tpx_model *m = tpx_sharding_model(sh);
  int64_t attn = tpx_model_find_module(m, "model.layers.0.self_attn");
  int64_t q = tpx_model_find_module(m, "model.layers.0.self_attn.q_proj");
  int64_t shape[3] = {2, 7, 12};
  float buf[2 * 7 * 12] = {0}, out[2 * 7 * 12];
  tpx_tensor in = tpx_tensor_make(buf, TPX_DTYPE_F32, 3, shape);
  tpx_tensor o = tpx_tensor_make(out, TPX_DTYPE_F32, 3, shape);
  tpx_tensor o16 = tpx_tensor_make(out, TPX_DTYPE_BF16, 3, shape);
  RT_EXPECT(tpx_tp_kwarg_transition_run(sh, mc, attn, "hidden", 0, NULL, shape,
                                        &in, &o, &e_),
            TPX_NOT_FOUND,
            "has no layout for keyword input 'hidden' (torch passes it "
            "through untouched); it has: 'hidden_states', 'position_ids', "
            "'past', 'bias'");
  RT_EXPECT(
      tpx_tp_kwarg_transition_run(sh, mc, q, "x", 0, NULL, shape, &in, &o, &e_),
      TPX_NOT_FOUND,
      "(style colwise, plan key "
      "'model.layers.0.self_attn.q_proj') has no "
      "keyword-input layouts");
  RT_EXPECT(
      tpx_tp_kwarg_transition_run(sh, mc, 0, "x", 0, NULL, shape, &in, &o, &e_),
      TPX_NOT_FOUND, "module '(root)' has no parallel style");
  RT_EXPECT(tpx_tp_kwarg_transition_run(sh, mc, attn, NULL, 0, NULL, shape, &in,
                                        &o, &e_),
            TPX_INVALID_ARGUMENT, "keyword name is NULL");
  /* hidden_states forward reads Shard(1): 7 over tp 2 is 4 / 3 */
  RT_EXPECT(tpx_tp_kwarg_transition_run(sh, mc, attn, "hidden_states", 0, NULL,
                                        shape, &in, &o, &e_),
            TPX_INVALID_ARGUMENT,
            "module 'model.layers.0.self_attn' keyword input "
            "'hidden_states' (forward): input has local shape [2, 7, 12]");
  RT_EXPECT(tpx_tp_kwarg_transition_run(sh, mc, attn, "past", 0, NULL, shape,
                                        &in, &o16, &e_),
            TPX_INVALID_ARGUMENT,
            "input dtype f32 differs from output "
            "dtype bf16");
  RT_EXPECT(tpx_tp_kwarg_transition_run(sh, mc, attn, "past", 0, NULL, NULL,
                                        &in, &o, &e_),
            TPX_INVALID_ARGUMENT, "logical shape is NULL");
  /* in place through one buffer: "past" passes through */
  for (int i = 0; i < 2 * 7 * 12; i++) buf[i] = (float)i;
  tpx_error e = {0};
  st = tpx_tp_kwarg_transition_run(sh, mc, attn, "past", 1, NULL, shape, &in,
                                   &in, &e);
  if (st != TPX_OK)
    tpx_error_set(err, st, "in place: %s", e.message);
  for (int i = 0; st == TPX_OK && i < 2 * 7 * 12; i++)
    if (buf[i] != (float)i)
      st = tpx_error_set(err, TPX_VALIDATION, "in place [%d]", i);
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(test_kwarg_bad_input) {
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_plan_json(kw_plan), 1, 2);
  rt_run_body(kw_bad_body, w.sh);
  int64_t attn = tpx_model_find_module(m, "model.layers.0.self_attn");
  int64_t shape[3] = {2, 7, 12}, lo[3];
  tpx_placement a, b;
  ck_assert_int_eq(tpx_tp_kwarg_transition_shape(w.sh, attn, "bias", 0, NULL, 9,
                                                 shape, 3, NULL, lo, NULL),
                   TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_tp_kwarg_transition_layouts(NULL, attn, "bias", 0, NULL,
                                                   3, &a, &b, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_tp_kwarg_transition_layouts(w.sh, 1 << 30, "bias", 0,
                                                   NULL, 3, &a, &b, NULL, NULL),
                   TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_tp_kwarg_transition_layouts(w.sh, attn, "bias", 0, NULL,
                                                   3, NULL, &b, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  rt_world_free(&w);
}
END_TEST

/* ---- rotary_embed_parallel: outputs 0 and 1 ---------------------------- */

static tpx_status rot_body(tpx_comm *world, void *arg, tpx_error *err) {
  rt_sh_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK)
    return st;
  int64_t rot =
      tpx_model_find_module(tpx_sharding_model(sh), "model.rotary_emb");
  int64_t me = tpx_comm_rank(world);
  int64_t shape[3] = {2, 7, 8}; /* cos / sin: [B, T, head_dim] */
  for (int idx = 0; idx < 2 && st == TPX_OK; idx++)
    for (int bwd = 0; bwd < 2 && st == TPX_OK; bwd++) {
      int64_t lo[3];
      tpx_error e = {0};
      st = tpx_tp_transition_shape(sh, rot, TPX_TRANSITION_OUTPUT, idx, bwd, me,
                                   shape, 3, NULL, lo, &e);
      if (st != TPX_OK) {
        tpx_error_set(err, st, "output %d shape: %s", idx, e.message);
        break;
      }
      if (lo[1] != 7) /* the whole sequence on every rank */
        st = tpx_error_set(err, TPX_VALIDATION, "output %d: local T %lld", idx,
                           (long long)lo[1]);
      float x[2 * 7 * 8], y[2 * 7 * 8];
      for (int i = 0; i < 2 * 7 * 8; i++) x[i] = (float)(i + 100 * idx);
      tpx_tensor tx = tpx_tensor_make(x, TPX_DTYPE_F32, 3, shape);
      tpx_tensor ty = tpx_tensor_make(y, TPX_DTYPE_F32, 3, shape);
      if (st == TPX_OK) {
        rtu_sim sm;
        RTU_SIM(&sm, mc, &tx, &ty);
        st = tpx_tp_transition_run(sh, mc, rot, TPX_TRANSITION_OUTPUT, idx, bwd,
                                   shape, &tx, &ty, &e);
        rtu_sim_end(&sm, me);
        if (st != TPX_OK)
          tpx_error_set(err, st, "output %d run: %s", idx, e.message);
      }
      for (int i = 0; st == TPX_OK && i < 2 * 7 * 8; i++)
        if (y[i] != x[i])
          st = tpx_error_set(err, TPX_VALIDATION, "output %d [%d]", idx, i);
    }
  tpx_mesh_comm_destroy(mc);
  return st;
}

static const char rot_local_plan[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": ["
    "{\"module\": \"model.rotary_emb\", \"style\": \"rotary_embed_parallel\","
    " \"use_local_output\": true}]}";

START_TEST(test_rotary_outputs) {
  int64_t tp = 2 + _i; /* 2, 3 (uneven sequence) */
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_plan_json(rt_zoo_plan), 1, tp);
  int64_t rot = tpx_model_find_module(m, "model.rotary_emb");
  const tpx_transition *tr;
  tpx_error e = {0};
  for (int idx = 0; idx < 2; idx++) {
    ck_assert_int_eq(
        tpx_tp_transition_get(w.sh, rot, TPX_TRANSITION_OUTPUT, idx, &tr, &e),
        TPX_OK);
    ck_assert_int_eq(tr->from.kind, TPX_REPLICATE);
    ck_assert_int_eq(tr->to.kind, TPX_REPLICATE);
    ck_assert_str_eq(tr->forward, "none");
    ck_assert_str_eq(tr->backward, "none");
    /* use_local_output false (the zoo, Qwen's plan): DTensors */
    ck_assert_int_eq(tpx_tp_output_keeps_dtensor(w.sh, rot, idx), 1);
  }
  /* inputs: hidden states sequence-sharded, position ids replicated */
  ck_assert_int_eq(
      tpx_tp_transition_get(w.sh, rot, TPX_TRANSITION_INPUT, 1, &tr, &e),
      TPX_OK);
  ck_assert_int_eq(tr->from.kind, TPX_REPLICATE);
  ck_assert_int_eq(
      tpx_tp_transition_get(w.sh, rot, TPX_TRANSITION_OUTPUT, 2, &tr, &e),
      TPX_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(e.message, "output 0, output 1"));
  rt_run_body_mem(rot_body, w.sh, 1);
  rt_world_free(&w);
  /* Gemma3's RotaryEmbedParallel(use_local_output=True): plain tensors */
  m = rt_model(256);
  w = rt_world_of(m, rt_plan_json(rot_local_plan), 1, tp);
  ck_assert_int_eq(tpx_tp_output_keeps_dtensor(w.sh, rot, 1), 0);
  rt_run_body_mem(rot_body, w.sh, 1);
  rt_world_free(&w);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_tp_multi");
  TCase *tc = tcase_create("multi");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_kwarg_layouts);
  tcase_add_loop_test(tc, test_kwarg_data, 0, 5);
  tcase_add_test(tc, test_kwarg_bad_input);
  tcase_add_loop_test(tc, test_rotary_outputs, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
