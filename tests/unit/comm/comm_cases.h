/* comm_cases.h — backend-independent collective and redistribute cases.
 *
 * Each case is a rank body: it runs a table of collectives on `world`,
 * checks every result against a serial reference computed on the rank, and
 * returns TPX_VALIDATION with the first mismatch in err. A failing rank keeps
 * calling every collective of the table, so ranks never fall out of step.
 * test_comm.c runs them on `local` worlds of 1..8 threads; test_comm_mpi.c
 * on the MPI world under mpirun. */
#ifndef TPX_TEST_COMM_CASES_H
#define TPX_TEST_COMM_CASES_H

#include "tpx/comm.h"
#include "tpx/mesh.h"
#include "tpx/redistribute.h"

/* Collective cases; arg is ignored (NULL). */
tpx_status case_all_reduce(tpx_comm *world, void *arg, tpx_error *err);
tpx_status case_reduce_scatter(tpx_comm *world, void *arg, tpx_error *err);
tpx_status case_all_gather(tpx_comm *world, void *arg, tpx_error *err);
tpx_status case_broadcast(tpx_comm *world, void *arg, tpx_error *err);
tpx_status case_all_to_all(tpx_comm *world, void *arg, tpx_error *err);
tpx_status case_chunked(tpx_comm *world, void *arg, tpx_error *err);
tpx_status case_barrier(tpx_comm *world, void *arg, tpx_error *err);
tpx_status case_split(tpx_comm *world, void *arg, tpx_error *err);

/* Redistribution between every pair of placement tuples in a table. */
typedef struct redist_arg {
  const tpx_mesh *mesh; /* world size = mesh world size */
  int full;             /* 1: every pair of the long table (1-D meshes) */
} redist_arg;
tpx_status case_redistribute(tpx_comm *world, void *arg, tpx_error *err);

#endif
