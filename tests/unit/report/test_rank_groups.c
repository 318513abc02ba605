/* test_rank_groups.c — tpx-report/1 per_rank above 4096 ranks: one entry
 * per group of ranks with identical figures. Every rank is in exactly one
 * group, each entry's figures are those of every rank it stands for, the
 * ranges are maximal and ascending, entries are ordered by first rank and
 * carry that rank's coords; up to 4096 ranks, one entry per rank as before. */
#include <jansson.h>

#include "../shard/shard_fixture.h"
#include "tpx/report.h"

static json_t *per_rank(const tpx_sharding *sh, int indent, json_t **root) {
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.indent = indent;
  char *text = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_report_json(sh, &o, &text, &e) == TPX_OK, "%s", e.message);
  json_error_t je;
  *root = json_loads(text, 0, &je);
  ck_assert_msg(*root != NULL, "invalid JSON: %s", je.text);
  free(text);
  json_t *pr = json_object_get(*root, "per_rank");
  ck_assert(json_is_array(pr));
  return pr;
}

static int64_t ival(const json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  ck_assert_msg(json_is_integer(v), "'%s' is not an integer", k);
  return (int64_t)json_integer_value(v);
}

/* Meshes above the limit, with tp splits that are even and uneven (the
 * fixture's dims are 64 and 128: tp 3 and 4096/128 give several groups, in
 * ranges interleaved across dp). */
static const int64_t grouped[][3] = {
    {1, 1, 4097}, {2, 1024, 3}, {1, 33, 128}, {3, 3, 1000}, {1, 8192, 1}};

START_TEST(grouped_per_rank) {
  const int64_t *sz = grouped[_i];
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(sz[0], sz[1], sz[2]);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  int64_t world = sz[0] * sz[1] * sz[2];
  ck_assert_int_gt(world, 4096);
  for (int indent = 0; indent <= 2; indent += 2) {
    json_t *root;
    json_t *pr = per_rank(sh, indent, &root);
    char *seen = calloc((size_t)world, 1);
    ck_assert_ptr_nonnull(seen);
    int64_t prev_first = -1, total = 0;
    size_t n = json_array_size(pr);
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_lt(n, 64);
    for (size_t k = 0; k < n; k++) {
      json_t *e = json_array_get(pr, k);
      int64_t first = ival(e, "rank"), pb = ival(e, "param_bytes"),
              pk = ival(e, "peak_bytes"), count = ival(e, "num_ranks");
      ck_assert_int_gt(first, prev_first);
      prev_first = first;
      json_t *c = json_object_get(e, "coords");
      ck_assert_int_eq(ival(c, "dp_replicate"), first / (sz[1] * sz[2]));
      ck_assert_int_eq(ival(c, "dp_shard"), first / sz[2] % sz[1]);
      ck_assert_int_eq(ival(c, "tp"), first % sz[2]);
      /* no two entries share figures */
      for (size_t q = 0; q < k; q++) {
        json_t *o = json_array_get(pr, q);
        ck_assert(ival(o, "param_bytes") != pb || ival(o, "peak_bytes") != pk);
      }
      json_t *ranges = json_object_get(e, "ranks");
      ck_assert(json_is_array(ranges));
      int64_t members = 0, last_hi = -2;
      for (size_t i = 0; i < json_array_size(ranges); i++) {
        json_t *rg = json_array_get(ranges, i);
        ck_assert_uint_eq(json_array_size(rg), 2);
        int64_t lo = (int64_t)json_integer_value(json_array_get(rg, 0));
        int64_t hi = (int64_t)json_integer_value(json_array_get(rg, 1));
        ck_assert_int_le(lo, hi);
        ck_assert_int_gt(lo, last_hi + 1); /* ascending and maximal */
        if (i == 0)
          ck_assert_int_eq(lo, first);
        last_hi = hi;
        for (int64_t r = lo; r <= hi; r++) {
          ck_assert_int_lt(r, world);
          ck_assert_msg(!seen[r], "rank %lld in two groups", (long long)r);
          seen[r] = 1;
          ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, r), pb);
          ck_assert_int_eq(tpx_sharding_rank_peak_bytes(sh, r), pk);
        }
        members += hi - lo + 1;
      }
      ck_assert_int_eq(members, count);
      total += count;
    }
    ck_assert_int_eq(total, world);
    free(seen);
    ck_assert(json_is_boolean(json_object_get(root, "ok")));
    json_decref(root);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* At the limit: one entry per rank, no grouping fields. */
START_TEST(per_rank_at_limit) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1024, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  json_t *root;
  json_t *pr = per_rank(sh, 0, &root);
  ck_assert_uint_eq(json_array_size(pr), 4096);
  json_t *e = json_array_get(pr, 4095);
  ck_assert_int_eq(ival(e, "rank"), 4095);
  ck_assert_ptr_null(json_object_get(e, "num_ranks"));
  ck_assert_ptr_null(json_object_get(e, "ranks"));
  json_decref(root);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("report-rank-groups");
  TCase *tc = tcase_create("per_rank");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, grouped_per_rank, 0,
                      (int)(sizeof grouped / sizeof grouped[0]));
  tcase_add_test(tc, per_rank_at_limit);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
