/* comm/comm_impl.h — the backend interface behind tpx_comm (private).
 *
 * ggml-backend's shape: a struct of function pointers plus a context pointer.
 * The public wrappers in comm.c have already checked every argument (non-NULL
 * buffers, known dtype, op valid for the dtype, root in range, sizes that do
 * not overflow), so a backend only moves data. count == 0 still reaches the
 * backend: every rank must take part (the local backend checks that all
 * ranks agree on the call). A member
 * left NULL gets the wrapper's default (noted per member). Buffers live in
 * the comm's memory space (tpx_comm.ms: host, sim, or cuda for nccl); the
 * wrappers move them only through it.
 *
 * Not public: trainers use tpx/comm.h only; the areas above comm read
 * comm/comm_view.h. */
#ifndef TPX_COMM_IMPL_H
#define TPX_COMM_IMPL_H

#include <stddef.h>

#include "comm/comm_view.h"
#include "device/memspace.h"
#include "tpx/comm.h"

typedef struct tpx_comm_iface {
  const char *name; /* "local", "mpi", "nccl" */
  /* blocks (collective): new comm over this rank's group; group ranks are
   * world ranks ordered by index, `index` is this rank's position. */
  tpx_status (*split)(tpx_comm *world, const int64_t *group, int gsize,
                      int index, tpx_comm **out, tpx_error *err);
  /* non-blocking, local: release the context. */
  void (*destroy)(void *ctx);
  /* blocks until recv is complete on this rank. */
  tpx_status (*all_gather)(void *ctx, const void *send, void *recv,
                           size_t count, tpx_dtype dtype, tpx_error *err);
  /* blocks; NULL -> all_reduce into a temporary (in the comm's memory
   * space) + copy of this rank's block. */
  tpx_status (*reduce_scatter)(void *ctx, const void *send, void *recv,
                               size_t count, tpx_dtype dtype, tpx_reduce_op op,
                               tpx_error *err);
  /* blocks; op AVG reaches it only when has_avg is set (else SUM + divide). */
  tpx_status (*all_reduce)(void *ctx, const void *send, void *recv,
                           size_t count, tpx_dtype dtype, tpx_reduce_op op,
                           tpx_error *err);
  /* blocks; required. */
  tpx_status (*broadcast)(void *ctx, const void *send, void *recv, size_t count,
                          tpx_dtype dtype, int root, tpx_error *err);
  /* blocks; never sees send == recv (the wrapper copies send first, into
   * a temporary of the comm's memory space). */
  tpx_status (*all_to_all)(void *ctx, const void *send, void *recv,
                           size_t count, tpx_dtype dtype, tpx_error *err);
  /* blocks until every rank of the group entered it; NULL -> a one-element
   * all_reduce. */
  tpx_status (*barrier)(void *ctx, tpx_error *err);
  /* optional; non-blocking, local: this rank failed before a collective
   * its peers may already wait in (a wrapper's temporary, say) and will not
   * join it. Release them with an error naming `why` (local: the world's
   * abort flag, checked by every wait). NULL: the peers wait out their
   * timeout. */
  void (*abort)(void *ctx, const char *why);
  int has_avg; /* all_reduce / reduce_scatter handle AVG themselves */
} tpx_comm_iface;

struct tpx_comm {
  const tpx_comm_iface *iface;
  void *ctx;
  int rank;
  int size;
  /* Where this comm's buffers live (host unless the backend says so:
   * nccl -> cuda, local in sim mode -> sim). Set by the backend after
   * tpx__comm_new; sub-communicators inherit their world's. */
  const tpx__memspace *ms;
  /* How long a collective waits for the group's other ranks (seconds;
   * tpx_comm_set_timeout, else TPX_COMM_TIMEOUT, else 600) and what the
   * group is ("" for a world, else the mesh dim's name): backends put both
   * in their timeout and abort messages. Sub-communicators inherit the
   * timeout of the comm they are split from. */
  double timeout_s;
  char dim[32];
  /* The clock of the mesh comm this comm is a dim or view of (NULL
   * otherwise): the calls of tpx/runtime_cp.h on it count there
   * (tpx_mesh_comm_time). */
  tpx__comm_clock *clock;
};

/* The default collective timeout: TPX_COMM_TIMEOUT when it holds a
 * number of seconds in (0, 1e9], else 600 (torch's NCCL default). */
double tpx__comm_default_timeout(void);
/* TPX_COMM_TIMEOUT parsed: *out = its seconds, or 600 when it is unset or
 * empty; TPX_INVALID_ARGUMENT naming the variable and its value when it is
 * anything else than a number in (0, 1e9] ("5s", "abc", "0", "-1", "inf",
 * "1e999"). Called where a local or mpi world is created, which refuses. */
tpx_status tpx__comm_env_timeout(double *out, tpx_error *err);

/* "mesh dim 'tp'" or "the world" (for messages). */
const char *tpx__comm_where(const tpx_comm *comm, char *buf, size_t size);

/* Wrap a backend context into a new handle (NULL on out of memory; the
 * context is then NOT destroyed). */
tpx_comm *tpx__comm_new(const tpx_comm_iface *iface, void *ctx, int rank,
                        int size);

#endif /* TPX_COMM_IMPL_H */
