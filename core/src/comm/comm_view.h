/* comm/comm_view.h — what the areas above comm (tp/, runtime/) may ask of a
 * communicator beyond tpx/comm.h: where its buffers live, whether MPI lets
 * two threads of a rank drive communicators, whether a mesh comm runs over
 * a given mesh, and how a rank that fails before a collective releases its
 * peers. The backend vtable stays in comm_impl.h, which only comm/
 * includes. */
#ifndef TPX_COMM_COMM_VIEW_H
#define TPX_COMM_COMM_VIEW_H

#include <stdint.h>

#include "device/memspace.h"
#include "tpx/error.h"
#include "tpx/mesh.h"

/* The handles of tpx/comm.h (C11 allows the repeated typedefs); not
 * including it keeps this view below comm.c, which includes it. */
typedef struct tpx_comm tpx_comm;
typedef struct tpx_mesh_comm tpx_mesh_comm;

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

/* comm.c: this rank failed (status st, err's message) in `what` before a
 * collective its peers run and will not join it: abort the comm so they
 * return an error instead of waiting (local: the whole world; mpi: this
 * comm refuses further calls, the peers reach their timeout). Returns st.
 * Every temporary allocated or filled before a collective goes through
 * this on failure (issue: a rank that returned early hung its peers). */
tpx_status tpx__comm_fail_before(tpx_comm *comm, const char *what,
                                 tpx_status st, const tpx_error *err);

/* ---- the mesh comm's clock (clock.c; tpx_mesh_comm_time) ----
 * The wall seconds the calling thread spends in the public calls of
 * tpx/runtime_tp.h, tpx/runtime_cp.h and tpx/runtime.h that may
 * communicate, by kind. Only the outermost clocked call counts (a runtime
 * call that runs a tp all-reduce inside counts once, as runtime). Only the
 * rank's own thread enters it: the runtime's comm thread runs plain
 * collectives, which are not clocked. */
typedef enum tpx__clock_kind {
  TPX__CLOCK_TP = 0,
  TPX__CLOCK_CP = 1,
  TPX__CLOCK_RUNTIME = 2,
  TPX__CLOCK_MOE = 3, /* tpx/runtime_moe.h's collective calls */
  TPX__CLOCK_KINDS = 4,
} tpx__clock_kind;
typedef struct tpx__comm_clock {
  int depth; /* clocked calls open on this thread */
  double seconds[TPX__CLOCK_KINDS];
  int64_t calls[TPX__CLOCK_KINDS];
} tpx__comm_clock;
/* mc's clock; NULL for NULL. */
tpx__comm_clock *tpx__mesh_comm_clock(const tpx_mesh_comm *mc);
/* The clock of the mesh comm `comm` belongs to (a dim or view of it, or
 * a comm bound to it with tpx__comm_bind_clock), else NULL. */
tpx__comm_clock *tpx__comm_clock_of(const tpx_comm *comm);
/* Count the clocked calls made on comm (one the caller split and owns,
 * e.g. the runtime's ep comm) on clock c, e.g. its mesh comm's. comm must
 * not outlive c. */
void tpx__comm_bind_clock(tpx_comm *comm, tpx__comm_clock *c);
/* Open a clocked call: the start time when it is the outermost, else 0.
 * NULL clock: nothing. */
double tpx__clock_enter(tpx__comm_clock *c);
/* Close it; the outermost adds its seconds to `kind`. */
void tpx__clock_leave(tpx__comm_clock *c, tpx__clock_kind kind, double t0);
/* `return expr;` clocked on clk as kind (the public call's whole body). */
#define TPX__CLOCKED(clk, kind, expr)                                          \
  do {                                                                         \
    tpx__comm_clock *clk_ = (clk);                                             \
    double t0_ = tpx__clock_enter(clk_);                                       \
    tpx_status st_ = (expr);                                                   \
    tpx__clock_leave(clk_, (kind), t0_);                                       \
    return st_;                                                                \
  } while (0)

#endif /* TPX_COMM_COMM_VIEW_H */
