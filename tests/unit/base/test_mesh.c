/* test_mesh.c — named device mesh: row-major coords, flattened views, rank
 * groups and argument errors, compared with torch.arange(world).view(sizes). */
#include <stdint.h>
#include <stdio.h>

#include "base_test.h"
#include "tpx/mesh.h"

static tpx_mesh *mesh3(void) {
  /* ("dp_replicate", "dp_shard", "cp", "tp") = (2, 3, 2, 2): 24 ranks. */
  const char *names[] = {"dp_replicate", "dp_shard", "cp", "tp"};
  const int64_t sizes[] = {2, 3, 2, 2};
  tpx_mesh *m = NULL;
  tpx_error err = {0};
  ck_assert_msg(tpx_mesh_create(names, sizes, 4, &m, &err) == TPX_OK, "%s",
                err.message);
  return m;
}

START_TEST(test_basic_getters) {
  tpx_mesh *m = mesh3();
  ck_assert_int_eq(tpx_mesh_ndim(m), 4);
  ck_assert_int_eq(tpx_mesh_world_size(m), 24);
  ck_assert_str_eq(tpx_mesh_dim_name(m, 0), "dp_replicate");
  ck_assert_str_eq(tpx_mesh_dim_name(m, 3), "tp");
  ck_assert_ptr_null(tpx_mesh_dim_name(m, 4));
  ck_assert_ptr_null(tpx_mesh_dim_name(m, -1));
  ck_assert_int_eq(tpx_mesh_dim_size(m, 1), 3);
  ck_assert_int_eq(tpx_mesh_dim_size(m, 9), 0);
  ck_assert_int_eq(tpx_mesh_dim_index(m, "cp"), 2);
  ck_assert_int_eq(tpx_mesh_dim_index(m, "pp"), -1);
  ck_assert_int_eq(tpx_mesh_dim_index(m, NULL), -1);
  int64_t sz = 0;
  ck_assert_int_eq(tpx_mesh_size_of(m, "dp_shard", &sz, NULL), TPX_OK);
  ck_assert_int_eq(sz, 3);
  /* NULL mesh getters are harmless. */
  ck_assert_int_eq(tpx_mesh_ndim(NULL), 0);
  ck_assert_int_eq(tpx_mesh_world_size(NULL), 0);
  ck_assert_ptr_null(tpx_mesh_dim_name(NULL, 0));
  tpx_mesh_destroy(m);
  tpx_mesh_destroy(NULL);
}
END_TEST

START_TEST(test_coords_row_major) {
  /* torch.arange(24).view(2,3,2,2)[a][b][c][d] == a*12 + b*4 + c*2 + d. */
  tpx_mesh *m = mesh3();
  int64_t r = 0;
  for (int64_t a = 0; a < 2; a++)
    for (int64_t b = 0; b < 3; b++)
      for (int64_t c = 0; c < 2; c++)
        for (int64_t d = 0; d < 2; d++, r++) {
          int64_t want[4] = {a, b, c, d}, got[4], back = -1;
          ck_assert_int_eq(tpx_mesh_coords(m, r, got, NULL), TPX_OK);
          ck_assert_mem_eq(got, want, sizeof want);
          ck_assert_int_eq(tpx_mesh_rank(m, want, &back, NULL), TPX_OK);
          ck_assert_int_eq(back, r);
          ck_assert_int_eq(back, a * 12 + b * 4 + c * 2 + d);
        }
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_groups_along_dims) {
  tpx_mesh *m = mesh3();
  int64_t g[24], idx = -1;
  /* Rank 17 = (1, 1, 0, 1). */
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "tp", 17, g, &idx, NULL), TPX_OK);
  ck_assert_int_eq(g[0], 16);
  ck_assert_int_eq(g[1], 17);
  ck_assert_int_eq(idx, 1);
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "dp_shard", 17, g, &idx, NULL),
                   TPX_OK);
  ck_assert_int_eq(g[0], 13);
  ck_assert_int_eq(g[1], 17);
  ck_assert_int_eq(g[2], 21);
  ck_assert_int_eq(idx, 1);
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "dp_replicate", 17, g, &idx, NULL),
                   TPX_OK);
  ck_assert_int_eq(g[0], 5);
  ck_assert_int_eq(g[1], 17);
  ck_assert_int_eq(idx, 1);
  /* index_out may be NULL. */
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "cp", 0, g, NULL, NULL), TPX_OK);
  ck_assert_int_eq(g[0], 0);
  ck_assert_int_eq(g[1], 2);
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_groups_partition) {
  /* For every dim, the groups partition the world: each rank sits in its
   * own group at its coordinate, and all members share the other coords. */
  tpx_mesh *m = mesh3();
  for (int d = 0; d < 4; d++) {
    const char *name = tpx_mesh_dim_name(m, d);
    for (int64_t r = 0; r < 24; r++) {
      int64_t g[8], idx, c[4];
      ck_assert_int_eq(tpx_mesh_group_ranks(m, name, r, g, &idx, NULL), TPX_OK);
      tpx_mesh_coords(m, r, c, NULL);
      ck_assert_int_eq(idx, c[d]);
      ck_assert_int_eq(g[idx], r);
      for (int64_t j = 0; j < tpx_mesh_dim_size(m, d); j++) {
        int64_t cj[4];
        tpx_mesh_coords(m, g[j], cj, NULL);
        for (int k = 0; k < 4; k++) ck_assert_int_eq(cj[k], k == d ? j : c[k]);
      }
    }
  }
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_flatten) {
  tpx_mesh *m = mesh3();
  const char *dsc[] = {"dp_shard", "cp"};
  const char *dp[] = {"dp_replicate", "dp_shard"};
  const char *all[] = {"dp_replicate", "dp_shard", "cp"};
  ck_assert_int_eq(tpx_mesh_flatten(m, "dp_shard_cp", dsc, 2, NULL), TPX_OK);
  ck_assert_int_eq(tpx_mesh_flatten(m, "dp", dp, 2, NULL), TPX_OK);
  ck_assert_int_eq(tpx_mesh_flatten(m, "dp_cp", all, 3, NULL), TPX_OK);
  /* Same definition again is fine (torch caches it). */
  ck_assert_int_eq(tpx_mesh_flatten(m, "dp_shard_cp", dsc, 2, NULL), TPX_OK);
  /* Views are not real dims. */
  ck_assert_int_eq(tpx_mesh_ndim(m), 4);
  ck_assert_int_eq(tpx_mesh_dim_index(m, "dp_shard_cp"), -1);
  int64_t sz;
  ck_assert_int_eq(tpx_mesh_size_of(m, "dp_shard_cp", &sz, NULL), TPX_OK);
  ck_assert_int_eq(sz, 6);
  ck_assert_int_eq(tpx_mesh_size_of(m, "dp", &sz, NULL), TPX_OK);
  ck_assert_int_eq(sz, 6);
  ck_assert_int_eq(tpx_mesh_size_of(m, "dp_cp", &sz, NULL), TPX_OK);
  ck_assert_int_eq(sz, 12);

  /* Rank 19 = (1, 1, 1, 1): dp_shard_cp index = 1*2 + 1 = 3; the group
   * varies (dp_shard, cp) with dp_replicate=1, tp=1 fixed:
   * 12 + {0,2,4,6,8,10} + 1. */
  int64_t g[12], idx;
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "dp_shard_cp", 19, g, &idx, NULL),
                   TPX_OK);
  ck_assert_int_eq(idx, 3);
  static const int64_t want[6] = {13, 15, 17, 19, 21, 23};
  ck_assert_mem_eq(g, want, sizeof want);
  /* "dp" over (dp_replicate, dp_shard) at cp=1, tp=1: index 1*3+1 = 4. */
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "dp", 19, g, &idx, NULL), TPX_OK);
  ck_assert_int_eq(idx, 4);
  static const int64_t want_dp[6] = {3, 7, 11, 15, 19, 23};
  ck_assert_mem_eq(g, want_dp, sizeof want_dp);
  /* "dp_cp": all ranks with tp=1, in row-major order. */
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "dp_cp", 19, g, &idx, NULL), TPX_OK);
  ck_assert_int_eq(idx, 9);
  for (int j = 0; j < 12; j++) ck_assert_int_eq(g[j], 2 * j + 1);
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_flatten_errors) {
  tpx_mesh *m = mesh3();
  const char *rev[] = {"cp", "dp_shard"};
  const char *dup[] = {"cp", "cp"};
  const char *unk[] = {"dp_shard", "ep"};
  const char *one[] = {"tp"};
  const char *other[] = {"dp_replicate", "dp_shard"};
  const char *withnull[] = {"dp_shard", NULL};
  CHECK_FAILS(tpx_mesh_flatten(m, "x", rev, 2, &e_), TPX_INVALID_ARGUMENT,
              "mesh order");
  CHECK_FAILS(tpx_mesh_flatten(m, "x", dup, 2, &e_), TPX_INVALID_ARGUMENT,
              "\"cp\"");
  CHECK_FAILS(tpx_mesh_flatten(m, "x", unk, 2, &e_), TPX_NOT_FOUND, "\"ep\"");
  CHECK_FAILS(tpx_mesh_flatten(m, "tp", one, 1, &e_), TPX_ALREADY_EXISTS,
              "\"tp\"");
  CHECK_FAILS(tpx_mesh_flatten(m, "", one, 1, &e_), TPX_INVALID_ARGUMENT,
              "empty");
  CHECK_FAILS(tpx_mesh_flatten(m, NULL, one, 1, &e_), TPX_INVALID_ARGUMENT,
              "NULL");
  CHECK_FAILS(tpx_mesh_flatten(m, "x", one, 0, &e_), TPX_OUT_OF_RANGE, "\"x\"");
  CHECK_FAILS(tpx_mesh_flatten(m, "x", one, 5, &e_), TPX_OUT_OF_RANGE, "\"x\"");
  CHECK_FAILS(tpx_mesh_flatten(m, "x", NULL, 1, &e_), TPX_INVALID_ARGUMENT,
              "dims");
  CHECK_FAILS(tpx_mesh_flatten(NULL, "x", one, 1, &e_), TPX_INVALID_ARGUMENT,
              "mesh");
  CHECK_FAILS(tpx_mesh_flatten(m, "x", withnull, 2, &e_), TPX_INVALID_ARGUMENT,
              "dim 1");
  ck_assert_int_eq(tpx_mesh_flatten(m, "dp", other, 2, NULL), TPX_OK);
  CHECK_FAILS(tpx_mesh_flatten(m, "dp", one, 1, &e_), TPX_ALREADY_EXISTS,
              "\"dp\"");
  char longname[TPX_MESH_NAME_MAX + 4];
  memset(longname, 'v', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  CHECK_FAILS(tpx_mesh_flatten(m, longname, one, 1, &e_), TPX_INVALID_ARGUMENT,
              "too long");
  /* Failed flattens added nothing. */
  int64_t sz;
  CHECK_FAILS(tpx_mesh_size_of(m, "x", &sz, &e_), TPX_NOT_FOUND, "\"x\"");
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_many_views) {
  /* Views grow past the initial capacity without losing earlier ones. */
  tpx_mesh *m = mesh3();
  const char *d[] = {"dp_shard", "cp"};
  char name[16];
  for (int i = 0; i < 40; i++) {
    snprintf(name, sizeof name, "v%d", i);
    ck_assert_int_eq(tpx_mesh_flatten(m, name, d, 2, NULL), TPX_OK);
  }
  for (int i = 0; i < 40; i++) {
    int64_t sz = 0;
    snprintf(name, sizeof name, "v%d", i);
    ck_assert_int_eq(tpx_mesh_size_of(m, name, &sz, NULL), TPX_OK);
    ck_assert_int_eq(sz, 6);
  }
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_create_errors) {
  tpx_mesh *m = (tpx_mesh *)&m; /* must be reset to NULL on failure */
  const char *n2[] = {"dp", "tp"};
  int64_t zero[] = {2, 0}, neg[] = {-1, 2}, ok[] = {2, 2};
  CHECK_FAILS(tpx_mesh_create(n2, zero, 2, &m, &e_), TPX_OUT_OF_RANGE,
              "\"tp\" has size 0");
  ck_assert_ptr_null(m);
  CHECK_FAILS(tpx_mesh_create(n2, neg, 2, &m, &e_), TPX_OUT_OF_RANGE,
              "\"dp\" has size -1");
  const char *dup[] = {"tp", "tp"};
  CHECK_FAILS(tpx_mesh_create(dup, ok, 2, &m, &e_), TPX_ALREADY_EXISTS,
              "\"tp\"");
  const char *empty[] = {"dp", ""};
  CHECK_FAILS(tpx_mesh_create(empty, ok, 2, &m, &e_), TPX_INVALID_ARGUMENT,
              "dim 1");
  const char *nul[] = {NULL, "tp"};
  CHECK_FAILS(tpx_mesh_create(nul, ok, 2, &m, &e_), TPX_INVALID_ARGUMENT,
              "dim 0");
  char longname[TPX_MESH_NAME_MAX + 1];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0'; /* exactly one too long */
  const char *lng[] = {"dp", longname};
  CHECK_FAILS(tpx_mesh_create(lng, ok, 2, &m, &e_), TPX_INVALID_ARGUMENT,
              "too long");
  longname[TPX_MESH_NAME_MAX - 1] = '\0'; /* the longest allowed */
  ck_assert_int_eq(tpx_mesh_create(lng, ok, 2, &m, NULL), TPX_OK);
  ck_assert_str_eq(tpx_mesh_dim_name(m, 1), longname);
  tpx_mesh_destroy(m);
  CHECK_FAILS(tpx_mesh_create(n2, ok, 0, &m, &e_), TPX_OUT_OF_RANGE, "ndim=0");
  CHECK_FAILS(tpx_mesh_create(n2, ok, 9, &m, &e_), TPX_OUT_OF_RANGE, "ndim=9");
  CHECK_FAILS(tpx_mesh_create(NULL, ok, 2, &m, &e_), TPX_INVALID_ARGUMENT,
              "names");
  CHECK_FAILS(tpx_mesh_create(n2, NULL, 2, &m, &e_), TPX_INVALID_ARGUMENT,
              "sizes");
  CHECK_FAILS(tpx_mesh_create(n2, ok, 2, NULL, &e_), TPX_INVALID_ARGUMENT,
              "out");
  /* World size overflow: 2^32 * 2^32. */
  int64_t huge[] = {INT64_C(1) << 32, INT64_C(1) << 32};
  CHECK_FAILS(tpx_mesh_create(n2, huge, 2, &m, &e_), TPX_OUT_OF_RANGE,
              "overflow");
  /* The largest world that fits is fine. */
  int64_t edge[] = {INT64_MAX, 1};
  ck_assert_int_eq(tpx_mesh_create(n2, edge, 2, &m, NULL), TPX_OK);
  ck_assert_int_eq(tpx_mesh_world_size(m), INT64_MAX);
  int64_t c[2];
  ck_assert_int_eq(tpx_mesh_coords(m, INT64_MAX - 1, c, NULL), TPX_OK);
  ck_assert_int_eq(c[0], INT64_MAX - 1);
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_rank_errors) {
  tpx_mesh *m = mesh3();
  int64_t c[4], r, g[24];
  CHECK_FAILS(tpx_mesh_coords(m, 24, c, &e_), TPX_OUT_OF_RANGE, "rank 24");
  CHECK_FAILS(tpx_mesh_coords(m, -1, c, &e_), TPX_OUT_OF_RANGE, "rank -1");
  CHECK_FAILS(tpx_mesh_coords(m, 0, NULL, &e_), TPX_INVALID_ARGUMENT, "coords");
  int64_t bad[4] = {0, 3, 0, 0};
  CHECK_FAILS(tpx_mesh_rank(m, bad, &r, &e_), TPX_OUT_OF_RANGE, "\"dp_shard\"");
  bad[1] = -1;
  CHECK_FAILS(tpx_mesh_rank(m, bad, &r, &e_), TPX_OUT_OF_RANGE, "-1");
  CHECK_FAILS(tpx_mesh_rank(m, NULL, &r, &e_), TPX_INVALID_ARGUMENT, "coords");
  CHECK_FAILS(tpx_mesh_group_ranks(m, "pp", 0, g, NULL, &e_), TPX_NOT_FOUND,
              "\"pp\"");
  /* The message lists the names that do exist. */
  CHECK_FAILS(tpx_mesh_group_ranks(m, "pp", 0, g, NULL, &e_), TPX_NOT_FOUND,
              "dp_shard");
  CHECK_FAILS(tpx_mesh_group_ranks(m, "tp", 99, g, NULL, &e_), TPX_OUT_OF_RANGE,
              "rank 99");
  CHECK_FAILS(tpx_mesh_group_ranks(m, "tp", 0, NULL, NULL, &e_),
              TPX_INVALID_ARGUMENT, "out");
  CHECK_FAILS(tpx_mesh_group_ranks(m, NULL, 0, g, NULL, &e_),
              TPX_INVALID_ARGUMENT, "name");
  int64_t sz;
  CHECK_FAILS(tpx_mesh_size_of(m, "ep", &sz, &e_), TPX_NOT_FOUND, "\"ep\"");
  CHECK_FAILS(tpx_mesh_size_of(NULL, "tp", &sz, &e_), TPX_INVALID_ARGUMENT,
              "mesh");
  tpx_mesh_destroy(m);
}
END_TEST

START_TEST(test_one_dim_mesh) {
  const char *n[] = {"world"};
  int64_t s[] = {1};
  tpx_mesh *m = NULL;
  ck_assert_int_eq(tpx_mesh_create(n, s, 1, &m, NULL), TPX_OK);
  int64_t g[1], idx = -1, c[1];
  ck_assert_int_eq(tpx_mesh_group_ranks(m, "world", 0, g, &idx, NULL), TPX_OK);
  ck_assert_int_eq(g[0], 0);
  ck_assert_int_eq(idx, 0);
  ck_assert_int_eq(tpx_mesh_coords(m, 0, c, NULL), TPX_OK);
  ck_assert_int_eq(c[0], 0);
  tpx_mesh_destroy(m);
}
END_TEST

/* Upstream's MoE mesh (_create_moe_mesh): the ranks in order, unflattened
 * to (ep_shard, ep); an EP group is ep consecutive ranks (tp peers folded
 * on a tp 2 mesh); an ep that does not divide the world is refused in
 * upstream's words. */
START_TEST(test_moe_mesh) {
  tpx_mesh *main4 = NULL, *main8 = NULL, *moe = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_mesh_create_fsdp2(1, 4, 1, 1, &main4, &err), TPX_OK);
  ck_assert_int_eq(tpx_mesh_create_fsdp2(1, 4, 1, 2, &main8, &err), TPX_OK);
  const int64_t eps[3] = {1, 2, 4};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(tpx_mesh_create_moe(main4, eps[i], &moe, &err), TPX_OK);
    ck_assert_str_eq(tpx_mesh_dim_name(moe, 0), "ep_shard");
    ck_assert_str_eq(tpx_mesh_dim_name(moe, 1), "ep");
    ck_assert_int_eq(tpx_mesh_dim_size(moe, 0), 4 / eps[i]);
    ck_assert_int_eq(tpx_mesh_dim_size(moe, 1), eps[i]);
    for (int64_t r = 0; r < 4; r++) {
      int64_t c[2];
      ck_assert_int_eq(tpx_mesh_coords(moe, r, c, &err), TPX_OK);
      ck_assert_int_eq(c[0], r / eps[i]);
      ck_assert_int_eq(c[1], r % eps[i]);
    }
    tpx_mesh_destroy(moe);
    moe = NULL;
  }
  /* world 8 = dp_shard 4 x tp 2, ep 2: the EP group of rank 5 is {4, 5},
   * the two tp ranks of dp_shard 2 */
  ck_assert_int_eq(tpx_mesh_create_moe(main8, 2, &moe, &err), TPX_OK);
  int64_t g[2], idx = -1;
  ck_assert_int_eq(tpx_mesh_group_ranks(moe, "ep", 5, g, &idx, &err), TPX_OK);
  ck_assert_int_eq(g[0], 4);
  ck_assert_int_eq(g[1], 5);
  ck_assert_int_eq(idx, 1);
  tpx_mesh_destroy(moe);
  moe = NULL;
  ck_assert_int_eq(tpx_mesh_create_moe(main4, 3, &moe, &err),
                   TPX_INVALID_ARGUMENT);
  ck_assert_str_eq(err.message,
                   "non_pp_size=4 must be a multiple of ep_size=3");
  ck_assert_ptr_null(moe);
  tpx_error_clear(&err);
  ck_assert_int_eq(tpx_mesh_create_moe(main4, 8, &moe, &err),
                   TPX_INVALID_ARGUMENT);
  ck_assert_str_eq(err.message,
                   "non_pp_size=4 must be a multiple of ep_size=8");
  ck_assert_int_eq(tpx_mesh_create_moe(main4, 0, &moe, NULL), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_mesh_create_moe(NULL, 2, &moe, NULL),
                   TPX_INVALID_ARGUMENT);
  tpx_mesh_destroy(main4);
  tpx_mesh_destroy(main8);
}
END_TEST

static Suite *mesh_suite(void) {
  Suite *s = suite_create("mesh");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_basic_getters);
  tcase_add_test(tc, test_coords_row_major);
  tcase_add_test(tc, test_groups_along_dims);
  tcase_add_test(tc, test_groups_partition);
  tcase_add_test(tc, test_flatten);
  tcase_add_test(tc, test_flatten_errors);
  tcase_add_test(tc, test_many_views);
  tcase_add_test(tc, test_create_errors);
  tcase_add_test(tc, test_rank_errors);
  tcase_add_test(tc, test_one_dim_mesh);
  tcase_add_test(tc, test_moe_mesh);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(mesh_suite()); }
