/* test_comm.c — the comm suite on the `local` backend: every collective x
 * dtype x op x ranks 1..8 x uneven sizes against a serial reference,
 * redistribution between every pair of placements on 1-D and 2-D meshes,
 * bad arguments, and the nccl backend's clean refusal without a GPU. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_cases.h"
#include "tpx/comm.h"
#include "tpx/redistribute.h"
#include "tpx_config.h"

static void run(int n, tpx_local_fn fn, void *arg) {
  tpx_error e = {0};
  tpx_status st = tpx_local_run(n, fn, arg, &e);
  ck_assert_msg(st == TPX_OK, "ranks=%d: %s: %s", n, tpx_status_name(st),
                e.message);
}

/* Loop index = number of ranks (1..8). */
START_TEST(t_all_reduce) { run(_i, case_all_reduce, NULL); }
END_TEST
START_TEST(t_reduce_scatter) { run(_i, case_reduce_scatter, NULL); }
END_TEST
START_TEST(t_all_gather) { run(_i, case_all_gather, NULL); }
END_TEST
START_TEST(t_broadcast) { run(_i, case_broadcast, NULL); }
END_TEST
START_TEST(t_all_to_all) { run(_i, case_all_to_all, NULL); }
END_TEST
START_TEST(t_chunked) { run(_i, case_chunked, NULL); }
END_TEST
START_TEST(t_barrier) { run(_i, case_barrier, NULL); }
END_TEST
START_TEST(t_split) { run(_i, case_split, NULL); }
END_TEST

START_TEST(t_redistribute_1d) {
  const char *names[] = {"tp"};
  int64_t sizes[] = {_i};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 1, &mesh, NULL), TPX_OK);
  redist_arg a = {mesh, 1};
  run(_i, case_redistribute, &a);
  tpx_mesh_destroy(mesh);
}
END_TEST

static const int64_t meshes_2d[][2] = {{2, 2}, {2, 3}, {3, 2},
                                       {1, 4}, {4, 1}, {2, 4}};
START_TEST(t_redistribute_2d) {
  const char *names[] = {"dp", "tp"};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, meshes_2d[_i], 2, &mesh, NULL),
                   TPX_OK);
  redist_arg a = {mesh, 0};
  run((int)(meshes_2d[_i][0] * meshes_2d[_i][1]), case_redistribute, &a);
  tpx_mesh_destroy(mesh);
}
END_TEST

/* ---- bad arguments ------------------------------------------------------ */

static tpx_status bad_args_body(tpx_comm *c, void *arg, tpx_error *err) {
  (void)arg;
  float buf[16] = {0}, out[16] = {0};
  tpx_error e = {0};
#define EXPECT(call, status, needle)                                           \
  do {                                                                         \
    tpx_error_clear(&e);                                                       \
    tpx_status st_ = (call);                                                   \
    if (st_ != (status) || !strstr(e.message, needle))                         \
      return tpx_error_set(err, TPX_VALIDATION,                                \
                           "line %d: got %s \"%s\", want %s with \"%s\"",      \
                           __LINE__, tpx_status_name(st_), e.message,          \
                           tpx_status_name(status), needle);                   \
  } while (0)
  EXPECT(
      tpx_comm_all_reduce(NULL, buf, out, 4, TPX_DTYPE_F32, TPX_REDUCE_SUM, &e),
      TPX_INVALID_ARGUMENT, "comm is NULL");
  EXPECT(
      tpx_comm_all_reduce(c, NULL, out, 4, TPX_DTYPE_F32, TPX_REDUCE_SUM, &e),
      TPX_INVALID_ARGUMENT, "send buffer is NULL");
  EXPECT(tpx_comm_all_gather(c, buf, NULL, 4, TPX_DTYPE_F32, &e),
         TPX_INVALID_ARGUMENT, "recv buffer is NULL");
  EXPECT(
      tpx_comm_all_reduce(c, buf, out, 4, (tpx_dtype)999, TPX_REDUCE_SUM, &e),
      TPX_INVALID_ARGUMENT, "unknown dtype 999");
  EXPECT(tpx_comm_all_reduce(c, buf, out, 4, TPX_DTYPE_INVALID, TPX_REDUCE_SUM,
                             &e),
         TPX_INVALID_ARGUMENT, "unknown dtype");
  EXPECT(
      tpx_comm_all_reduce(c, buf, out, 4, TPX_DTYPE_F32, (tpx_reduce_op)7, &e),
      TPX_INVALID_ARGUMENT, "unknown reduce op 7");
  EXPECT(
      tpx_comm_all_reduce(c, buf, out, 4, TPX_DTYPE_BOOL, TPX_REDUCE_SUM, &e),
      TPX_UNSUPPORTED, "cannot reduce dtype bool");
  EXPECT(tpx_comm_reduce_scatter(c, buf, out, 2, TPX_DTYPE_F8_E4M3,
                                 TPX_REDUCE_MAX, &e),
         TPX_UNSUPPORTED, "f8_e4m3");
  EXPECT(tpx_comm_broadcast(c, buf, out, 4, TPX_DTYPE_F32, 5, &e),
         TPX_OUT_OF_RANGE, "root 5 out of range");
  EXPECT(tpx_comm_broadcast(c, buf, out, 4, TPX_DTYPE_F32, -1, &e),
         TPX_OUT_OF_RANGE, "root -1");
  EXPECT(tpx_comm_broadcast(c, NULL, out, 4, TPX_DTYPE_F32, 0, &e),
         TPX_INVALID_ARGUMENT, "send (on the root)");
  EXPECT(tpx_comm_all_gather(c, buf, out, (size_t)1 << 62, TPX_DTYPE_F32, &e),
         TPX_OUT_OF_RANGE, "overflows");
  EXPECT(tpx_comm_all_to_all(c, buf, out, 4, TPX_DTYPE_COUNT, &e),
         TPX_INVALID_ARGUMENT, "unknown dtype");
  EXPECT(tpx_comm_barrier(NULL, &e), TPX_INVALID_ARGUMENT, "comm is NULL");
  EXPECT(tpx_comm_split_mesh_dim(c, NULL, "tp", NULL, &e), TPX_INVALID_ARGUMENT,
         "is NULL");
  EXPECT(tpx_mesh_comm_create(NULL, NULL, NULL, &e), TPX_INVALID_ARGUMENT,
         "world is NULL");
  /* A mesh whose size differs from the world. */
  const char *names[] = {"tp"};
  int64_t sizes[] = {3};
  tpx_mesh *mesh = NULL;
  tpx_comm *sub = NULL;
  tpx_mesh_create(names, sizes, 1, &mesh, NULL);
  EXPECT(tpx_comm_split_mesh_dim(c, mesh, "tp", &sub, &e), TPX_INVALID_ARGUMENT,
         "the mesh has 3 ranks but the local world "
         "has 1");
  tpx_mesh_destroy(mesh);
  /* Zero counts with NULL buffers are fine. */
  EXPECT(
      tpx_comm_all_reduce(c, NULL, NULL, 0, TPX_DTYPE_F32, TPX_REDUCE_SUM, &e),
      TPX_OK, "");
  if (tpx_comm_rank(NULL) != -1 || tpx_comm_size(NULL) != -1 ||
      strcmp(tpx_comm_backend(c), "local") != 0 ||
      strcmp(tpx_comm_backend(NULL), "(null)") != 0)
    return tpx_error_set(err, TPX_VALIDATION, "getters");
  tpx_comm_destroy(NULL);
  tpx_mesh_comm_destroy(NULL);
  return TPX_OK;
}
START_TEST(t_bad_args) { run(1, bad_args_body, NULL); }
END_TEST

/* Ranks that disagree on the count or the collective all get an error. */
static tpx_status mismatch_body(tpx_comm *c, void *arg, tpx_error *err) {
  (void)arg;
  float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  int me = tpx_comm_rank(c);
  tpx_error e = {0};
  tpx_status st = tpx_comm_all_reduce(c, buf, out, me == 1 ? 3 : 4,
                                      TPX_DTYPE_F32, TPX_REDUCE_SUM, &e);
  if (st != TPX_INVALID_ARGUMENT || !strstr(e.message, "ranks disagree") ||
      !strstr(e.message, "rank 1 called all_reduce(count=3"))
    return tpx_error_set(err, TPX_VALIDATION, "count mismatch: %s \"%s\"",
                         tpx_status_name(st), e.message);
  tpx_error_clear(&e);
  st = me == 0 ? tpx_comm_all_gather(c, buf, out, 2, TPX_DTYPE_F32, &e)
               : tpx_comm_all_reduce(c, buf, out, 2, TPX_DTYPE_F32,
                                     TPX_REDUCE_SUM, &e);
  if (st != TPX_INVALID_ARGUMENT || !strstr(e.message, "all_gather"))
    return tpx_error_set(err, TPX_VALIDATION, "collective mismatch: %s",
                         e.message);
  tpx_error_clear(&e);
  st = tpx_comm_broadcast(c, buf, out, 2, TPX_DTYPE_F32, me == 2 ? 1 : 0, &e);
  if (st != TPX_INVALID_ARGUMENT)
    return tpx_error_set(err, TPX_VALIDATION, "root mismatch not caught");
  /* The group still works afterwards. */
  tpx_error_clear(&e);
  st = tpx_comm_all_reduce(c, buf, out, 8, TPX_DTYPE_F32, TPX_REDUCE_MAX, &e);
  if (st != TPX_OK || out[7] != 8)
    return tpx_error_set(err, TPX_VALIDATION, "after mismatch: %s", e.message);
  return TPX_OK;
}
START_TEST(t_mismatch) { run(4, mismatch_body, NULL); }
END_TEST

static tpx_status fail_on_2(tpx_comm *c, void *arg, tpx_error *err) {
  (void)arg;
  tpx_comm_barrier(c, NULL);
  if (tpx_comm_rank(c) == 2)
    return tpx_error_set(err, TPX_VALIDATION, "rank two says no");
  return TPX_OK;
}
START_TEST(t_local_run_errors) {
  tpx_error e = {0};
  ck_assert_int_eq(tpx_local_run(0, fail_on_2, NULL, &e), TPX_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(e.message, "nranks 0 out of range"));
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_local_run(TPX_LOCAL_MAX_RANKS + 1, fail_on_2, NULL, &e),
                   TPX_OUT_OF_RANGE);
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_local_run(2, NULL, NULL, &e), TPX_INVALID_ARGUMENT);
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_local_run(4, fail_on_2, NULL, &e), TPX_VALIDATION);
  ck_assert_str_eq(e.message, "local rank 2: rank two says no");
  ck_assert_int_eq(tpx_local_run(2, fail_on_2, NULL, NULL), TPX_OK);
}
END_TEST

static tpx_status redist_bad_body(tpx_comm *c, void *arg, tpx_error *err) {
  const tpx_mesh *mesh = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_error e = {0};
  if (tpx_mesh_comm_create(c, mesh, &mc, &e) != TPX_OK)
    return tpx_error_set(err, TPX_VALIDATION, "%s", e.message);
  int64_t shape[2] = {8, 4};
  float in[32] = {0}, out[32];
  tpx_placement r = tpx_placement_replicate();
  tpx_placement s0[2] = {tpx_placement_shard(0), r}, rr[2] = {r, r};
  /* FSDP over TP: dp strided, tp shard on the same dim (valid layout). */
  tpx_placement strided[2] = {tpx_placement_strided_shard(0, 2),
                              tpx_placement_shard(0)};
  tpx_placement s5[2] = {tpx_placement_shard(5), r};
  tpx_status st;
  tpx_status result = TPX_OK;
#define CHECK_RD(call, want, needle)                                           \
  tpx_error_clear(&e);                                                         \
  st = (call);                                                                 \
  if (result == TPX_OK && (st != (want) || !strstr(e.message, needle)))        \
    result = tpx_error_set(err, TPX_VALIDATION, "line %d: %s \"%s\"",          \
                           __LINE__, tpx_status_name(st), e.message);
  CHECK_RD(tpx_redistribute(NULL, shape, 2, TPX_DTYPE_F32, s0, in, rr, out, &e),
           TPX_INVALID_ARGUMENT, "mesh comm is NULL");
  CHECK_RD(tpx_redistribute(mc, shape, 2, TPX_DTYPE_F32, s0, NULL, rr, out, &e),
           TPX_INVALID_ARGUMENT, "src buffer is NULL");
  CHECK_RD(tpx_redistribute(mc, shape, 2, TPX_DTYPE_F32, s0, in, rr, NULL, &e),
           TPX_INVALID_ARGUMENT, "dst buffer is NULL");
  CHECK_RD(tpx_redistribute(mc, shape, 2, (tpx_dtype)77, s0, in, rr, out, &e),
           TPX_INVALID_ARGUMENT, "unknown dtype");
  CHECK_RD(tpx_redistribute(mc, shape, 9, TPX_DTYPE_F32, s0, in, rr, out, &e),
           TPX_OUT_OF_RANGE, "ndim 9");
  CHECK_RD(tpx_redistribute(mc, shape, 2, TPX_DTYPE_F32, s5, in, rr, out, &e),
           TPX_OUT_OF_RANGE, "");
  CHECK_RD(
      tpx_redistribute(mc, shape, 2, TPX_DTYPE_F32, strided, in, rr, out, &e),
      TPX_UNSUPPORTED, "strided_shard");
  tpx_mesh_comm_destroy(mc);
  return result;
}
START_TEST(t_redistribute_bad) {
  const char *names[] = {"dp", "tp"};
  int64_t sizes[] = {2, 2};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, &mesh, NULL), TPX_OK);
  run(4, redist_bad_body, mesh);
  tpx_mesh_destroy(mesh);
}
END_TEST

/* ---- nccl: compiled here, but no GPU: a clean refusal -------------------- */

START_TEST(t_nccl_no_gpu) {
  ck_assert_int_eq(tpx_comm_backend_compiled("local"), 1);
  ck_assert_int_eq(tpx_comm_backend_compiled("mpi"), TPX_HAVE_MPI);
  ck_assert_int_eq(tpx_comm_backend_compiled("nccl"), TPX_HAVE_NCCL);
  ck_assert_int_eq(tpx_comm_backend_compiled("gloo"), 0);
  ck_assert_int_eq(tpx_comm_backend_compiled(NULL), 0);
  tpx_nccl_options o = TPX_NCCL_OPTIONS_INIT;
  o.has_unique_id = 1;
  o.rank = 0;
  o.nranks = 1;
  tpx_comm *c = NULL;
  tpx_error e = {0};
  tpx_status st = tpx_comm_create_nccl(&o, &c, &e);
  if (!TPX_HAVE_NCCL) {
    ck_assert_int_eq(st, TPX_UNSUPPORTED);
    printf("SKIP nccl tests: %s\n", e.message);
    return;
  }
  tpx_nccl_options bad = o;
  bad.struct_size = 3;
  tpx_comm *c2 = NULL;
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_comm_create_nccl(&bad, &c2, &e2), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e2.message, "struct_size 3"));
  tpx_error_clear(&e2);
  ck_assert_int_eq(tpx_comm_create_nccl(&o, NULL, &e2), TPX_INVALID_ARGUMENT);
  if (st == TPX_NO_DEVICE) {
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(e.message, "nccl backend"));
    printf("SKIP nccl tests: %s\n", e.message);
    return;
  }
  /* A GPU is present: a one-rank world must work. */
  ck_assert_msg(st == TPX_OK, "%s", e.message);
  ck_assert_int_eq(tpx_comm_barrier(c, &e), TPX_OK);
  tpx_comm_destroy(c);
}
END_TEST

START_TEST(t_mpi_not_in_local) {
  /* Creating an mpi world with a NULL out is an argument error whether or
   * not MPI is built (and must not initialise MPI). */
  tpx_error e = {0};
  tpx_status st = tpx_comm_create_mpi(NULL, NULL, &e);
  ck_assert(st == TPX_INVALID_ARGUMENT || st == TPX_UNSUPPORTED);
}
END_TEST

static Suite *comm_suite(void) {
  Suite *s = suite_create("comm");
  TCase *tc = tcase_create("collectives");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, t_all_reduce, 1, 9);
  tcase_add_loop_test(tc, t_reduce_scatter, 1, 9);
  tcase_add_loop_test(tc, t_all_gather, 1, 9);
  tcase_add_loop_test(tc, t_broadcast, 1, 9);
  tcase_add_loop_test(tc, t_all_to_all, 1, 9);
  tcase_add_loop_test(tc, t_chunked, 1, 9);
  tcase_add_loop_test(tc, t_barrier, 1, 9);
  tcase_add_loop_test(tc, t_split, 1, 9);
  suite_add_tcase(s, tc);
  tc = tcase_create("redistribute");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, t_redistribute_1d, 1, 9);
  tcase_add_loop_test(tc, t_redistribute_2d, 0,
                      (int)(sizeof meshes_2d / sizeof meshes_2d[0]));
  tcase_add_test(tc, t_redistribute_bad);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, t_bad_args);
  tcase_add_test(tc, t_mismatch);
  tcase_add_test(tc, t_local_run_errors);
  tcase_add_test(tc, t_nccl_no_gpu);
  tcase_add_test(tc, t_mpi_not_in_local);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(comm_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
