/* comm/comm_view.h — what the areas above comm (tp/, runtime/) may ask of a
 * communicator beyond tpx/comm.h: where its buffers live, whether MPI lets
 * two threads of a rank drive communicators, and whether a mesh comm runs
 * over a given mesh. Read-only; the backend vtable stays in comm_impl.h,
 * which only comm/ includes. */
#ifndef TPX_COMM_COMM_VIEW_H
#define TPX_COMM_COMM_VIEW_H

#include "device/memspace.h"
#include "tpx/comm.h"

/* The memory space of comm's buffers (host for NULL; comm.c). */
const tpx__memspace *tpx__comm_ms(const tpx_comm *comm);

/* mpi.c: 1 when MPI is initialised with MPI_THREAD_MULTIPLE (so two
 * threads of a rank may each drive their own communicator), else 0 (also
 * without MPI). Used by the runtime to decide on its comm thread. */
int tpx__mpi_thread_multiple(void);

/* mesh_comm.c: TPX_OK when mc is non-NULL and its mesh has the dims, names
 * and sizes of `mesh`; else TPX_INVALID_ARGUMENT, the message starting with
 * `what` (the public call). */
tpx_status tpx__mesh_comm_check(tpx_mesh_comm *mc, const tpx_mesh *mesh,
                                const char *what, tpx_error *err);

#endif /* TPX_COMM_COMM_VIEW_H */
