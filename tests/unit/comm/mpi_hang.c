/* mpi_hang.c MODE — under mpirun -np 4 (mesh dp 2 x tp 2): rank 3 stops
 * itself (SIGSTOP), as a hung rank would, at the point MODE names:
 *  - "all_reduce": before the tp all-reduce. Rank 2, its tp peer, must
 *    return TPX_TIMEOUT within TPX_COMM_TIMEOUT naming rank 3 and the mesh
 *    dim; ranks 0 and 1 then fail their world barrier the same way.
 *  - "dup": before tpx_comm_create_mpi (start-up): the others' world
 *    MPI_Comm_dup must end with TPX_TIMEOUT naming the phase.
 *  - "split": before tpx_mesh_comm_create (start-up): the others' split
 *    must end with TPX_TIMEOUT naming rank 3.
 * A rank that fails prints the message and ends the job with MPI_Abort,
 * as tpx-train does. mpi_hang.sh runs it and checks the message and the
 * time. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tpx/comm.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *mode = argc > 1 ? argv[1] : "all_reduce";
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  tpx_comm *world = NULL;
  tpx_mesh *mesh = NULL;
  tpx_mesh_comm *mc = NULL;
  tpx_error err = {0};
  const char *names[] = {"dp", "tp"};
  int64_t sizes[] = {2, 2};
  MPI_Comm c = MPI_COMM_WORLD;
  if (me == 3 && !strcmp(mode, "dup"))
    raise(SIGSTOP);
  tpx_status st = tpx_comm_create_mpi(&c, &world, &err);
  if (st == TPX_OK)
    st = tpx_mesh_create(names, sizes, 2, &mesh, &err);
  if (st == TPX_OK && me == 3 && !strcmp(mode, "split"))
    raise(SIGSTOP);
  if (st == TPX_OK)
    st = tpx_mesh_comm_create(world, mesh, &mc, &err);
  if (st == TPX_OK && me == 3)
    raise(SIGSTOP);
  float x = 1;
  if (st == TPX_OK)
    st = tpx_comm_all_reduce(tpx_mesh_comm_dim(mc, 1), &x, &x, 1, TPX_DTYPE_F32,
                             TPX_REDUCE_SUM, &err);
  /* Ranks 0 and 1 reach the world barrier late, so rank 2's report (the
   * one naming the tp dim) comes first; theirs would follow. */
  if (st == TPX_OK && me < 2)
    sleep(3);
  if (st == TPX_OK)
    st = tpx_comm_barrier(world, &err);
  if (st != TPX_OK) {
    fprintf(stderr, "mpi_hang: rank %d: %s: %s\n", me, tpx_status_name(st),
            err.message);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  tpx_mesh_comm_destroy(mc);
  tpx_mesh_destroy(mesh);
  tpx_comm_destroy(world);
  MPI_Finalize();
  return 0;
}
