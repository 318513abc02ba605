/* mpi_verdict.h — run one case on every MPI rank and agree on the verdict
 * before asserting (header-only, static inline), so all ranks run the same
 * collectives in the same order even when one rank fails. A failing rank
 * prints its own message to stderr; the assertion names how many failed.
 * Also the main() of an MPI suite: run it on every rank, unforked. */
#ifndef TPX_TESTS_MPI_VERDICT_H
#define TPX_TESTS_MPI_VERDICT_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tpx/comm.h"

static inline void mpi_run_agreed(tpx_comm *world, tpx_local_fn fn, void *arg,
                                  const char *name) {
  tpx_error e = {0};
  tpx_status st = fn(world, arg, &e);
  int32_t bad = st != TPX_OK, nbad = 0;
  if (bad)
    fprintf(stderr, "mpi rank %d: %s: %s\n", tpx_comm_rank(world), name,
            e.message);
  tpx_error e2 = {0};
  tpx_status st2 = tpx_comm_all_reduce(world, &bad, &nbad, 1, TPX_DTYPE_I32,
                                       TPX_REDUCE_SUM, &e2);
  ck_assert_msg(st2 == TPX_OK, "agreeing on the verdict: %s", e2.message);
  ck_assert_msg(nbad == 0, "%s failed on %d of %d ranks (messages on stderr)",
                name, nbad, tpx_comm_size(world));
}

/* Runs suite s on every rank of world (no fork after MPI_Init; rank 0
 * prints, the others are silent), then destroys world (which finalizes MPI
 * when tpx initialised it). The process's exit status: EXIT_FAILURE when a
 * test failed on this rank. */
static inline int mpi_run_suite(Suite *s, tpx_comm *world) {
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, tpx_comm_rank(world) == 0 ? CK_NORMAL : CK_SILENT);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  tpx_comm_destroy(world);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
