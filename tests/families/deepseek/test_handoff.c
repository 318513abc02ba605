/* test_handoff.c — the selection handed whole to the sharding
 * (tpx_sharding_options.selection), on DeepSeek-V4, a family whose strategy
 * keeps parameters in fp32: `tpx plan`'s sharding (tools/plan/plan_shard.c,
 * linked in) and tpx-train's (examples/train/main.c build_sharding: the
 * selection, f32 param dtype, FSDP on) hold the same bytes on every rank,
 * byte for byte, and equal the sharding built from the selection's parts
 * copied by hand (what both callers did before); the fp32 parameters reach
 * the trainer's sharding, which they did not when it copied the units
 * alone. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fam_util.h"
#include "plan_extra.h"
#include "tpx/tpx.h"

#define FAM "deepseek"

typedef struct world {
  tpx_registry *reg;
  tpx_model *model;
  tpx_selection *sel;
  tpx_diag_list *diags;
  tpx_mesh *mesh;
} world;

static void world_init(world *w, int64_t dps) {
  tpx_error err = {0};
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  memset(w, 0, sizeof *w);
  w->reg = fam_registry(FAM);
  w->model = fam_model(w->reg, FAM, "dsv4-tiny.config.json", 1);
  ck_assert_int_eq(tpx_diag_list_create(&w->diags, &err), TPX_OK);
  ck_assert_int_eq(
      tpx_select_plan(w->reg, w->model, &o, &w->sel, w->diags, &err), TPX_OK);
  ck_assert_uint_gt(tpx_selection_num_fp32(w->sel), 0);
  ck_assert_int_eq(plan_mesh(1, dps, 1, 1, &w->mesh, &err), TPX_OK);
}

static void world_free(world *w) {
  tpx_mesh_destroy(w->mesh);
  tpx_selection_destroy(w->sel);
  tpx_diag_list_destroy(w->diags);
  tpx_model_destroy(w->model);
  tpx_registry_destroy(w->reg);
}

/* tpx-train's build_sharding, option for option. */
static tpx_sharding *trainer_sharding(const world *w) {
  tpx_error err = {0};
  tpx_sharding *sh = NULL;
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.param_dtype = TPX_DTYPE_F32;
  opts.fsdp = 1;
  opts.selection = w->sel;
  ck_assert_msg(
      tpx_sharding_create(w->model, NULL, w->mesh, &opts, &sh, &err) == TPX_OK,
      "%s", err.message);
  return sh;
}

/* The parts copied by hand, as tools/plan/plan_shard.c did before the
 * selection travelled whole (param dtype: `mp_param`). */
static tpx_sharding *copied_sharding(const world *w, tpx_dtype mp_param) {
  tpx_error err = {0};
  tpx_sharding *sh = NULL;
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  const char *units[64], *fp32[64];
  int reshard[64];
  size_t nu = tpx_selection_num_fsdp_units(w->sel);
  size_t nf = tpx_selection_num_fp32(w->sel);
  tpx_mp_policy mp = {mp_param, opts.reduce_dtype, opts.output_dtype};
  ck_assert_uint_le(nu, 64);
  ck_assert_uint_le(nf, 64);
  ck_assert_int_eq(tpx_selection_strategy_mp(w->sel, &mp, &err), TPX_OK);
  opts.param_dtype = mp.param_dtype;
  opts.reduce_dtype = mp.reduce_dtype;
  opts.output_dtype = mp.output_dtype;
  for (size_t i = 0; i < nu; i++)
    units[i] = tpx_selection_fsdp_unit(w->sel, i, &reshard[i]);
  for (size_t i = 0; i < nf; i++) fp32[i] = tpx_selection_fp32(w->sel, i);
  opts.num_fsdp_units = nu;
  opts.fsdp_units = nu ? units : NULL;
  opts.fsdp_unit_reshard = nu ? reshard : NULL;
  opts.num_fp32_params = nf;
  opts.fp32_params = nf ? fp32 : NULL;
  ck_assert_msg(tpx_sharding_create(w->model, tpx_selection_plan(w->sel),
                                    w->mesh, &opts, &sh, &err) == TPX_OK,
                "%s", err.message);
  return sh;
}

static size_t fp32_params(const tpx_sharding *sh, const tpx_model *m) {
  size_t n = 0;
  for (int64_t p = 0; p < (int64_t)tpx_model_num_params(m); p++)
    n += (size_t)tpx_sharding_param_keeps_fp32(sh, p);
  return n;
}

/* Same placements, fp32 flags, FSDP units and bytes on every rank. */
static void assert_same(const tpx_sharding *a, const tpx_sharding *b,
                        const tpx_model *m, int peaks) {
  int64_t world_size = tpx_mesh_world_size(tpx_sharding_mesh(a));
  tpx_error err = {0};
  ck_assert_uint_eq(tpx_sharding_num_fsdp_units(a),
                    tpx_sharding_num_fsdp_units(b));
  for (int64_t r = 0; r < world_size; r++) {
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(a, r),
                     tpx_sharding_rank_param_bytes(b, r));
    if (peaks)
      ck_assert_int_eq(tpx_sharding_rank_peak_bytes(a, r),
                       tpx_sharding_rank_peak_bytes(b, r));
  }
  for (int64_t p = 0; p < (int64_t)tpx_model_num_params(m); p++) {
    tpx_param_sharding pa, pb;
    ck_assert_int_eq(tpx_sharding_param(a, p, &pa, &err), TPX_OK);
    ck_assert_int_eq(tpx_sharding_param(b, p, &pb, &err), TPX_OK);
    ck_assert_int_eq(tpx_sharding_param_keeps_fp32(a, p),
                     tpx_sharding_param_keeps_fp32(b, p));
    ck_assert_int_eq(pa.fsdp_unit, pb.fsdp_unit);
    ck_assert_int_eq(pa.param_dtype, pb.param_dtype);
    for (int d = 0; d < tpx_mesh_ndim(tpx_sharding_mesh(a)); d++) {
      ck_assert_int_eq(pa.placements[d].kind, pb.placements[d].kind);
      ck_assert_int_eq(pa.placements[d].dim, pb.placements[d].dim);
    }
  }
}

/* tpx plan's sharding equals the hand copy, and the trainer's holds the
 * same bytes on every rank as tpx plan's. */
START_TEST(test_plan_and_trainer_agree) {
  static const int64_t dps[] = {1, 2, 4};
  world w;
  tpx_error err = {0};
  tpx_sharding *plan = NULL;
  world_init(&w, dps[_i]);
  ck_assert_int_eq(plan_shard(w.model, w.sel, w.mesh, 1, &plan, &err), TPX_OK);
  tpx_sharding *copied = copied_sharding(&w, TPX_DTYPE_BF16);
  assert_same(plan, copied, w.model, 1);
  tpx_sharding *train = trainer_sharding(&w);
  tpx_sharding *train_copied = copied_sharding(&w, TPX_DTYPE_F32);
  assert_same(train, train_copied, w.model, 1);
  /* the trainer gathers in f32: the same held bytes, not the same peaks */
  for (int64_t r = 0; r < tpx_mesh_world_size(w.mesh); r++)
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(train, r),
                     tpx_sharding_rank_param_bytes(plan, r));
  ck_assert_uint_eq(fp32_params(train, w.model), fp32_params(plan, w.model));
  tpx_sharding_destroy(train_copied);
  tpx_sharding_destroy(train);
  tpx_sharding_destroy(copied);
  tpx_sharding_destroy(plan);
  world_free(&w);
}
END_TEST

/* The fp32 parameters reach the trainer's sharding through the selection;
 * without them (the trainer's old hand copy took the units alone) the
 * same parameters are held in bf16 and every rank holds fewer bytes. */
START_TEST(test_fp32_reaches_trainer) {
  world w;
  tpx_error err = {0};
  tpx_sharding *units_only = NULL;
  world_init(&w, 2);
  tpx_sharding *train = trainer_sharding(&w);
  size_t n = fp32_params(train, w.model);
  ck_assert_uint_gt(n, 0);
  ck_assert_uint_eq(tpx_sharding_num_fp32_patterns(train),
                    tpx_selection_num_fp32(w.sel));
  int64_t p = tpx_model_find_param(w.model, "model.hc_head.hc_fn");
  ck_assert_int_ge(p, 0);
  ck_assert(tpx_sharding_param_keeps_fp32(train, p));

  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  const char *units[64];
  int reshard[64];
  size_t nu = tpx_selection_num_fsdp_units(w.sel);
  ck_assert_uint_le(nu, 64);
  for (size_t i = 0; i < nu; i++)
    units[i] = tpx_selection_fsdp_unit(w.sel, i, &reshard[i]);
  opts.param_dtype = TPX_DTYPE_F32;
  opts.num_fsdp_units = nu;
  opts.fsdp_units = nu ? units : NULL;
  opts.fsdp_unit_reshard = nu ? reshard : NULL;
  ck_assert_int_eq(tpx_sharding_create(w.model, tpx_selection_plan(w.sel),
                                       w.mesh, &opts, &units_only, &err),
                   TPX_OK);
  ck_assert_uint_eq(fp32_params(units_only, w.model), 0);
  for (int64_t r = 0; r < tpx_mesh_world_size(w.mesh); r++)
    ck_assert_int_gt(tpx_sharding_rank_param_bytes(train, r),
                     tpx_sharding_rank_param_bytes(units_only, r));
  tpx_sharding_destroy(units_only);
  tpx_sharding_destroy(train);
  world_free(&w);
}
END_TEST

/* What the caller sets wins over the selection: its own plan and units. */
START_TEST(test_caller_fields_win) {
  world w;
  tpx_error err = {0};
  tpx_sharding *sh = NULL;
  tpx_plan *empty = NULL;
  const char *unit = "model.layers.0";
  world_init(&w, 2);
  ck_assert_int_eq(tpx_plan_create(&empty, &err), TPX_OK);
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.selection = w.sel;
  opts.num_fsdp_units = 1;
  opts.fsdp_units = &unit;
  ck_assert_int_eq(
      tpx_sharding_create(w.model, empty, w.mesh, &opts, &sh, &err), TPX_OK);
  ck_assert_uint_eq(tpx_plan_size(tpx_sharding_plan(sh)), 0);
  ck_assert_uint_eq(tpx_sharding_num_fsdp_units(sh), 2); /* + the root */
  ck_assert_uint_gt(fp32_params(sh, w.model), 0);
  tpx_sharding_destroy(sh);
  tpx_plan_destroy(empty);
  world_free(&w);
}
END_TEST

int main(void) {
  Suite *s = suite_create("families-deepseek-handoff");
  TCase *tc = tcase_create("handoff");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_plan_and_trainer_agree, 0, 3);
  tcase_add_test(tc, test_fp32_reaches_trainer);
  tcase_add_test(tc, test_caller_fields_win);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
