/* test_comm_mpi.c — the comm cases on the `mpi` backend, one rank per
 * process. Run under `mpirun -np 4` by .ci/mpi-tests.sh; meson also runs it
 * as a one-process MPI singleton.
 *
 * Check runs without fork here (forking after MPI_Init is not allowed), and
 * every test agrees on its verdict over the world before asserting, so all
 * ranks run the same collectives in the same order even when one fails.
 * Rank 0 prints Check's summary; a failing rank prints its own message to
 * stderr. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mpi_verdict.h"

#include "comm_cases.h"
#include "tpx/comm.h"

static tpx_comm *world;

static void run(tpx_local_fn fn, void *arg, const char *name) {
  mpi_run_agreed(world, fn, arg, name);
}

#define CASE(fn)                                                               \
  START_TEST(t_##fn) { run(fn, NULL, #fn); }                                   \
  END_TEST
CASE(case_all_reduce)
CASE(case_reduce_scatter)
CASE(case_all_gather)
CASE(case_broadcast)
CASE(case_all_to_all)
CASE(case_chunked)
CASE(case_barrier)
CASE(case_split)

/* Meshes for the world size n: (n), (2, n/2) when n is even, (1, n), (n, 1). */
START_TEST(t_redistribute) {
  int n = tpx_comm_size(world);
  int64_t shapes[4][2] = {{n, 0}, {2, n / 2}, {1, n}, {n, 1}};
  const char *names[] = {"dp", "tp"};
  for (int i = 0; i < 4; i++) {
    int nd = i == 0 ? 1 : 2;
    if (i == 1 && n % 2)
      continue;
    tpx_mesh *mesh = NULL;
    ck_assert_int_eq(tpx_mesh_create(nd == 1 ? names + 1 : names, shapes[i], nd,
                                     &mesh, NULL),
                     TPX_OK);
    redist_arg a = {mesh, nd == 1};
    char label[64];
    snprintf(label, sizeof label, "case_redistribute mesh %d", i);
    run(case_redistribute, &a, label);
    tpx_mesh_destroy(mesh);
  }
}
END_TEST

/* nccl bootstrapped over this MPI world: without a GPU every rank gets
 * TPX_NO_DEVICE (and the test skips); with one, a barrier must work. */
START_TEST(t_nccl_over_mpi) {
  tpx_nccl_options o = TPX_NCCL_OPTIONS_INIT;
  tpx_comm *c = NULL;
  tpx_error e = {0};
  tpx_status st = tpx_comm_create_nccl(&o, &c, &e);
  if (st == TPX_NO_DEVICE || st == TPX_UNSUPPORTED) {
    ck_assert_ptr_null(c);
    if (tpx_comm_rank(world) == 0)
      printf("SKIP nccl over mpi: %s\n", e.message);
    return;
  }
  ck_assert_msg(st == TPX_OK, "%s", e.message);
  ck_assert_int_eq(tpx_comm_size(c), tpx_comm_size(world));
  ck_assert_int_eq(tpx_comm_barrier(c, &e), TPX_OK);
  tpx_comm_destroy(c);
}
END_TEST

int main(void) {
  tpx_error e = {0};
  if (tpx_comm_create_mpi(NULL, &world, &e) != TPX_OK) {
    fprintf(stderr, "test_comm_mpi: %s\n", e.message);
    return EXIT_FAILURE;
  }
  Suite *s = suite_create("comm-mpi");
  TCase *tc = tcase_create("mpi");
  tcase_add_test(tc, t_case_all_reduce);
  tcase_add_test(tc, t_case_reduce_scatter);
  tcase_add_test(tc, t_case_all_gather);
  tcase_add_test(tc, t_case_broadcast);
  tcase_add_test(tc, t_case_all_to_all);
  tcase_add_test(tc, t_case_chunked);
  tcase_add_test(tc, t_case_barrier);
  tcase_add_test(tc, t_case_split);
  tcase_add_test(tc, t_redistribute);
  tcase_add_test(tc, t_nccl_over_mpi);
  suite_add_tcase(s, tc);
  return mpi_run_suite(s, world); /* finalizes MPI: tpx initialised it */
}
