/* tpx/comm.h — communicators and collectives over a group of ranks.
 *
 * A tpx_comm is one rank's handle on a group (a world, or the sub-group along
 * one mesh dim). The collectives follow NCCL's conventions: `count` is the
 * element count of one rank's piece, buffers are contiguous, in place means
 * aliasing as NCCL defines it (see each call). Every call on a group is
 * collective: all ranks of the group call it in the same order with the same
 * count, dtype, op and root. Reductions of f16 / bf16 accumulate in f32 and
 * round once; integer sums wrap (two's complement); avg on integers truncates.
 *
 * Three backends sit behind the same handle:
 *  - local: ranks are threads of one process (tpx_local_run); shared memory,
 *    no copies beyond what each collective needs. The embedded default.
 *  - mpi:   one rank per process under mpirun (Open MPI).
 *  - nccl:  CUDA device buffers through NCCL; bootstrapped through MPI or a
 *    caller-provided unique id. Fails with TPX_NO_DEVICE when no GPU exists.
 *
 * Uneven shards (torch.chunk sizes, see tpx/layout.h) are handled by the
 * *_chunked calls, which pad to the full chunk the way DTensor and FSDP2 do.
 *
 * Not here: which slice a rank owns (tpx/layout.h) and moving a tensor between
 * placements (tpx/redistribute.h).
 *
 * Example (4 thread ranks, a 2x2 mesh, an all-reduce over "tp"):
 *
 *   static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
 *     tpx_mesh_comm *mc;
 *     tpx_status st = tpx_mesh_comm_create(world, arg, &mc, err);
 *     if (st != TPX_OK) return st;
 *     float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
 *     st = tpx_comm_all_reduce(tpx_mesh_comm_dim(mc, 1), x, x, 8,
 *                              TPX_DTYPE_F32, TPX_REDUCE_SUM, err);
 *     tpx_mesh_comm_destroy(mc);
 *     return st;
 *   }
 *   ... tpx_local_run(4, body, mesh, &err);   (mesh: ("dp","tp") = (2,2))
 *
 * Under mpirun, the same body runs on the world from tpx_comm_create_mpi.
 *
 * Thread safety: a tpx_comm is used by one thread at a time (its rank). */
#ifndef TPX_COMM_H
#define TPX_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/mesh.h"
#include "tpx/placement.h"

TPX_BEGIN_DECLS

typedef struct tpx_comm tpx_comm;
typedef struct tpx_mesh_comm tpx_mesh_comm;

/* ---- handles ----------------------------------------------------------- */

/* NULL is a no-op. Destroying a communicator is local (not collective) for
 * the local and mpi backends; the nccl backend destroys its NCCL comm. */
TPX_API void tpx_comm_destroy(tpx_comm *comm);

/* This rank's index in the group, and the group size. -1 for NULL. */
TPX_API int tpx_comm_rank(const tpx_comm *comm);
TPX_API int tpx_comm_size(const tpx_comm *comm);
/* "local", "mpi" or "nccl"; a static string ("(null)" for NULL). */
TPX_API const char *tpx_comm_backend(const tpx_comm *comm);

/* Collective over `world`, whose size must equal the mesh's world size (the
 * rank in `world` is the mesh rank): a new communicator over this rank's group
 * along mesh dim (or flattened view) `dim`, ranked by index in that group
 * (tpx_mesh_group_ranks). The caller destroys *out. */
TPX_API tpx_status tpx_comm_split_mesh_dim(tpx_comm *world,
                                           const tpx_mesh *mesh,
                                           const char *dim, tpx_comm **out,
                                           tpx_error *err);

/* ---- collectives (all block until this rank's part is complete) -------- */

/* recv[size * count] = concatenation of every rank's send[count] in rank
 * order. In place when send == recv + rank * count. */
TPX_API tpx_status tpx_comm_all_gather(tpx_comm *comm, const void *send,
                                       void *recv, size_t count,
                                       tpx_dtype dtype, tpx_error *err);

/* recv[count] = op over ranks of block `rank` of send[size * count]. In place
 * when recv == send + rank * count. */
TPX_API tpx_status tpx_comm_reduce_scatter(tpx_comm *comm, const void *send,
                                           void *recv, size_t count,
                                           tpx_dtype dtype, tpx_reduce_op op,
                                           tpx_error *err);

/* recv[count] = op over ranks of send[count]. In place when send == recv. */
TPX_API tpx_status tpx_comm_all_reduce(tpx_comm *comm, const void *send,
                                       void *recv, size_t count,
                                       tpx_dtype dtype, tpx_reduce_op op,
                                       tpx_error *err);

/* recv[count] = root's send[count] on every rank. `send` is read on the root
 * only (may be NULL elsewhere). In place when send == recv. */
TPX_API tpx_status tpx_comm_broadcast(tpx_comm *comm, const void *send,
                                      void *recv, size_t count, tpx_dtype dtype,
                                      int root, tpx_error *err);

/* Block j of recv[size * count] = block `rank` of rank j's send[size*count].
 * In place when send == recv (uses a temporary copy). */
TPX_API tpx_status tpx_comm_all_to_all(tpx_comm *comm, const void *send,
                                       void *recv, size_t count,
                                       tpx_dtype dtype, tpx_error *err);

TPX_API tpx_status tpx_comm_barrier(tpx_comm *comm, tpx_error *err);

/* ---- uneven (torch.chunk) variants --------------------------------------
 * A flat extent of `total` elements is split over the group as torch.chunk
 * does (chunk = ceil(total/size), trailing ranks short or empty; the same
 * arithmetic as tpx_layout_chunk). Rank r's piece has the length
 * tpx_layout_chunk gives it. These pad every piece to the full chunk for the
 * collective and unpad afterwards, as DTensor and FSDP2 do; when `total`
 * divides evenly they run the plain collective with no extra copy. */

/* send = this rank's piece; recv[total] = all pieces in order. */
TPX_API tpx_status tpx_comm_all_gather_chunked(tpx_comm *comm, const void *send,
                                               void *recv, size_t total,
                                               tpx_dtype dtype, tpx_error *err);
/* send[total] on every rank; recv = this rank's piece of the reduction. */
TPX_API tpx_status tpx_comm_reduce_scatter_chunked(
    tpx_comm *comm, const void *send, void *recv, size_t total, tpx_dtype dtype,
    tpx_reduce_op op, tpx_error *err);

/* ---- backends ----------------------------------------------------------- */

/* A rank's body for tpx_local_run: `world` is this rank's communicator over
 * all nranks threads (borrowed; valid until the function returns), `err` is
 * this rank's own zeroed error struct. Return TPX_OK or an error status. */
typedef tpx_status (*tpx_local_fn)(tpx_comm *world, void *arg, tpx_error *err);

/* Run fn on `nranks` threads (1..TPX_LOCAL_MAX_RANKS), one per rank of a
 * `local` world, and wait for all of them. Returns TPX_OK when every rank
 * returned TPX_OK, else the status of the lowest failing rank (err gets its
 * message prefixed with "local rank R: ").
 * A rank that returns an error aborts the world: every collective its peers
 * wait in, or call later, returns TPX_COMM naming that rank and its error,
 * so tpx_local_run never blocks on a failed rank. A rank that returns
 * TPX_OK while its peers wait for it in a collective aborts the world the
 * same way.
 * A hung rank: once the world is aborted (a failure, or a collective's
 * timeout), a rank still running its own code, outside tpx's collectives,
 * past its collective timeout (counted from its last collective when a
 * timeout named it, else also from the abort) is not waited for:
 * tpx_local_run returns TPX_TIMEOUT, "local rank R did not return: ...",
 * followed by the lowest failing rank's message, within about the timeout.
 * That rank's thread is left running, detached: it still holds `arg` and
 * its communicators (whose shared state is kept alive for it and freed
 * when it returns, if it ever does), so keep `arg` valid and end the
 * process rather than go on. A world that is not aborted waits for every
 * rank however long it runs. A TPX_COMM_TIMEOUT that is not a number of
 * seconds in (0, 1e9] is refused (TPX_INVALID_ARGUMENT naming it) unless
 * tpx_local_options.timeout_s is given. */
#define TPX_LOCAL_MAX_RANKS 256
TPX_API tpx_status tpx_local_run(int nranks, tpx_local_fn fn, void *arg,
                                 tpx_error *err);

/* Options of a local world. */
typedef struct tpx_local_options {
  size_t struct_size;
  /* 1: the world's buffers are CUDA device memory of the calling thread's
   * current GPU, which the ranks share (tpx_comm_memspace: "cuda"): each
   * rank gets a CUDA stream of its own, collectives run as device-to-device
   * copies and reduction kernels on it, with the same results as host
   * memory byte for byte; every buffer a collective, the TP calls or the
   * runtime take is then a device pointer (docs/RUNTIME.md "Device
   * memory"). TPX_UNSUPPORTED when libtpx was built without CUDA,
   * TPX_NO_DEVICE without a usable GPU. 0: host memory. */
  int cuda_memory;
  /* Collective timeout in seconds for the world and the comms split from
   * it (tpx_comm_set_timeout); 0 = the default (TPX_COMM_TIMEOUT, else
   * 600). */
  double timeout_s;
} tpx_local_options;
#define TPX_LOCAL_OPTIONS_INIT                                                 \
  { sizeof(tpx_local_options), 0, 0.0 }

/* tpx_local_run with options (NULL = defaults). */
TPX_API tpx_status tpx_local_run_opts(int nranks, const tpx_local_options *opts,
                                      tpx_local_fn fn, void *arg,
                                      tpx_error *err);

/* ---- failure ----------------------------------------------------------- */

/* How long a collective on `comm` waits for the other ranks of its group,
 * in seconds (> 0). Past it, every rank that waits returns TPX_TIMEOUT with
 * a message naming the collective, the mesh dim and the rank(s) that did
 * not arrive; the communicator (local: the whole world) is then unusable:
 * later collectives fail at once. The default is the TPX_COMM_TIMEOUT
 * environment variable (a number of seconds in (0, 1e9], no unit), else
 * 600 (torch's NCCL default); creating a local or mpi world refuses any
 * other value of it ("5s", "0", "abc": TPX_INVALID_ARGUMENT naming the
 * variable and the value), and tpx_comm_timeout(NULL) then says 600. Comms
 * split from `comm` afterwards (tpx_mesh_comm_create, tpx_comm_split_mesh_dim)
 * inherit it, so set it on the world first. Backends: local and mpi; nccl
 * ignores it (NCCL's own watchdog applies). */
TPX_API tpx_status tpx_comm_set_timeout(tpx_comm *comm, double seconds,
                                        tpx_error *err);
/* The timeout of comm (the default for NULL). */
TPX_API double tpx_comm_timeout(const tpx_comm *comm);

/* The memory space of comm's buffers: "host" (local, mpi), "cuda" (nccl,
 * or local with cuda_memory: device pointers) or "sim" (a local world in
 * the tests' device-memory double). A static string; "host" for NULL. */
TPX_API const char *tpx_comm_memspace(const tpx_comm *comm);

/* True when libtpx was built with the backend ("local", "mpi", "nccl"). */
TPX_API int tpx_comm_backend_compiled(const char *name);

/* mpi: a world communicator over a duplicate of `mpi_comm` (a pointer to an
 * MPI_Comm; NULL means MPI_COMM_WORLD). Initialises MPI (thread level
 * FUNNELED) when the program has not; then the last tpx_comm_destroy of an
 * mpi world finalizes it. TPX_UNSUPPORTED when built without MPI.
 * Collective over mpi_comm, under the collective timeout: a rank that does
 * not arrive within TPX_COMM_TIMEOUT (else 600 s) makes the others return
 * TPX_TIMEOUT naming this start-up phase; the pending duplicate is then
 * left to MPI and the job should end (MPI_Abort). MPI_Init_thread, when
 * tpx calls it, is not under the timeout (a call stuck in it cannot be
 * returned from): a program that needs that initialises MPI itself under
 * a watchdog, as tpx-train does (docs/RUNTIME.md "A rank that fails or
 * hangs"). */
TPX_API tpx_status tpx_comm_create_mpi(const void *mpi_comm, tpx_comm **out,
                                       tpx_error *err);

#define TPX_NCCL_UNIQUE_ID_BYTES 128
typedef struct tpx_nccl_options {
  size_t struct_size;
  /* Bootstrap: when has_unique_id, every rank passes the same id (from
   * tpx_nccl_unique_id on one rank) with its rank and nranks. Otherwise the
   * id is made on rank 0 and broadcast over MPI (mpi_comm: pointer to an
   * MPI_Comm, NULL = MPI_COMM_WORLD), and rank / nranks come from MPI. */
  int has_unique_id;
  unsigned char unique_id[TPX_NCCL_UNIQUE_ID_BYTES];
  int rank;
  int nranks;
  const void *mpi_comm;
  int device; /* CUDA device; -1 = rank % device count */
} tpx_nccl_options;
#define TPX_NCCL_OPTIONS_INIT                                                  \
  { sizeof(tpx_nccl_options), 0, {0}, 0, 1, NULL, -1 }

/* nccl: a world communicator over CUDA device buffers (all collectives then
 * take device pointers and block until done on the comm's stream).
 * TPX_NO_DEVICE with the CUDA error when no GPU is usable; TPX_UNSUPPORTED
 * when built without NCCL. */
TPX_API tpx_status tpx_comm_create_nccl(const tpx_nccl_options *opts,
                                        tpx_comm **out, tpx_error *err);
/* A new NCCL unique id for has_unique_id bootstrap. */
TPX_API tpx_status
tpx_nccl_unique_id(unsigned char id[TPX_NCCL_UNIQUE_ID_BYTES], tpx_error *err);

/* ---- mesh communicators ------------------------------------------------- */

/* Collective over `world` (size = mesh world size): the world plus one
 * communicator per real mesh dim. `world` and `mesh` are borrowed and must
 * outlive *out; the caller destroys *out (not collective). */
TPX_API tpx_status tpx_mesh_comm_create(tpx_comm *world, const tpx_mesh *mesh,
                                        tpx_mesh_comm **out, tpx_error *err);
TPX_API void tpx_mesh_comm_destroy(tpx_mesh_comm *mc);
/* Borrowed pointers, valid while mc lives. dim out of range -> NULL. */
TPX_API tpx_comm *tpx_mesh_comm_world(const tpx_mesh_comm *mc);
TPX_API tpx_comm *tpx_mesh_comm_dim(const tpx_mesh_comm *mc, int dim);
TPX_API const tpx_mesh *tpx_mesh_comm_mesh(const tpx_mesh_comm *mc);

/* The communicator of mesh dim or flattened view `name` (tpx/mesh.h:
 * "dp", "dp_shard_cp", "dp_cp", ...), borrowed, valid while mc lives: a
 * real dim's is tpx_mesh_comm_dim's; a view's is split the first time it
 * is asked for and kept by mc (that first call is collective over the
 * world, as tpx_comm_split_mesh_dim: every rank asks for the same views in
 * the same order; later calls are local). TPX_NOT_FOUND / _INVALID_ARGUMENT
 * naming a name the mesh has neither as dim nor as view. */
TPX_API tpx_status tpx_mesh_comm_view(tpx_mesh_comm *mc, const char *name,
                                      tpx_comm **out, tpx_error *err);

/* How long this rank's thread spent in the calls that communicate over mc,
 * as tpx measures it (wall seconds since mc was created): the calls of
 * tpx/runtime_tp.h (transitions, embeddings, losses, tp gradient
 * all-reduces) and tpx/runtime.h (FSDP unshard / reshard and the waits for
 * prefetches, gradient reduction, the module hooks, grad norm, AdamW's
 * sync, gathers) given mc, and those of tpx/runtime_cp.h given one of mc's
 * dim or view comms, and the MoE dispatch's collective calls of
 * tpx/runtime_moe.h (dispatch_create, combine and their backward) on an ep
 * comm of size > 1 that is a dim of mc or the runtime's
 * (tpx_runtime_ep_comm of a runtime created on mc). A call made inside
 * another (a runtime call's tp all-reduce) counts once, in the outer
 * call's kind. Plain tpx_comm_* collectives are not counted, nor the
 * runtime's comm thread (the time a prefetch or reduction overlaps
 * compute: only the caller's wait for it). */
typedef struct tpx_comm_time {
  size_t struct_size;
  double seconds;         /* all of the below */
  double tp_seconds;      /* tpx/runtime_tp.h calls */
  double cp_seconds;      /* tpx/runtime_cp.h's K/V all-gather and
                             reduce-scatter */
  double runtime_seconds; /* tpx/runtime.h calls */
  int64_t calls;          /* outermost calls counted */
  /* appended (filled when struct_size covers them): */
  double moe_seconds; /* tpx/runtime_moe.h's dispatch, combine and their
                         backward over ep */
  int64_t moe_calls;  /* of `calls`, those */
} tpx_comm_time;
#define TPX_COMM_TIME_INIT                                                     \
  { sizeof(tpx_comm_time), 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0 }

/* Fill *out (struct_size from TPX_COMM_TIME_INIT; a struct of an older
 * tpx that ends at `calls` gets those fields, its `seconds` and `calls`
 * including the MoE dispatch's) with mc's figures. Local. */
TPX_API tpx_status tpx_mesh_comm_time(const tpx_mesh_comm *mc,
                                      tpx_comm_time *out, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_COMM_H */
