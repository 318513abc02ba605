/* test_activations.c — the activation term of the memory estimate
 * (core/src/shard/activations.c) beyond the base table of test_memory.c:
 * context parallelism (each rank holds seq/cp tokens plus the gathered K
 * and V of one layer). Figures by hand; formulas in docs/MEMORY.md. */
#include "shard_fixture.h"

/* Mesh (dp_replicate 1, dp_shard 1, cp, tp). */
static tpx_mesh *cp_mesh(int64_t cp, int64_t tp) {
  const char *names[4] = {"dp_replicate", "dp_shard", "cp", "tp"};
  int64_t sizes[4] = {1, 1, cp, tp};
  tpx_mesh *mesh = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_mesh_create(names, sizes, 4, &mesh, &e) == TPX_OK, "%s",
                e.message);
  return mesh;
}

static int64_t act_of(int64_t cp, int64_t tp, int64_t seq) {
  tpx_model *m = fx_llama();
  tpx_plan *p = tp > 1 ? fx_llama_plan() : NULL;
  tpx_mesh *mesh = cp_mesh(cp, tp);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  o.batch = 2;
  o.seq = seq;
  tpx_memory x;
  tpx_error e = {0};
  ck_assert_msg(tpx_memory_rank(sh, &o, 0, &x, &e) == TPX_OK, "%s", e.message);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  if (p)
    tpx_plan_destroy(p);
  tpx_model_destroy(m);
  return x.activations;
}

/* cp 2 holds half the tokens, plus the K and V of one layer gathered over
 * the full sequence: batch 2 x seq 16 = 32 tokens, 8 kv heads x 8, bf16:
 * 32 * 2 * (2 * 8 * 8) = 8192 bytes. */
START_TEST(cp_halves) {
  int64_t one = act_of(1, 1, 16);
  int64_t half = act_of(1, 1, 8); /* cp 1 at half the tokens */
  int64_t two = act_of(2, 1, 16);
  ck_assert_int_eq(two, half + 8192);
  /* about half: within 10% of one / 2 */
  ck_assert_int_lt(two, one / 2 + one / 20);
  ck_assert_int_gt(two, one / 2 - one / 20);
  /* cp 4 at four times the sequence holds about cp 1's figure */
  int64_t four = act_of(4, 1, 64);
  ck_assert_int_eq(four, one + 4 * 8192);
  /* with tp 2, the gathered K/V are the local heads' (4 kv heads) */
  ck_assert_int_eq(act_of(2, 2, 16), act_of(1, 2, 8) + 4096);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("activations");
  TCase *tc = tcase_create("activations");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, cp_halves);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
