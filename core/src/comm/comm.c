/* comm.c — the public collective wrappers over the backend interface.
 *
 * Checks every argument before a backend sees it, supplies the defaults for
 * what a backend leaves out (avg as sum + divide, reduce-scatter through
 * all-reduce, in-place all-to-all through a copy, barrier through a tiny
 * all-reduce), and implements the uneven torch.chunk variants by padding.
 * Backends live in local.c, mpi.c, nccl.c. Mesh communicators are in
 * mesh_comm.c. */
#include "comm/comm_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/try.h"
#include "device/elem.h"
#include "tpx_config.h"
#include "tpx/layout.h"

tpx_comm *tpx__comm_new(const tpx_comm_iface *iface, void *ctx, int rank,
                        int size) {
  tpx_comm *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->iface = iface;
  c->ctx = ctx;
  c->rank = rank;
  c->size = size;
  c->ms = &tpx__ms_host;
  c->timeout_s = tpx__comm_default_timeout();
  return c;
}

/* The largest timeout a world accepts (about 31 years; as
 * tpx_local_options.timeout_s): a bigger one is a typo, not a wish. */
#define TIMEOUT_MAX_S 1e9

tpx_status tpx__comm_env_timeout(double *out, tpx_error *err) {
  const char *v = getenv("TPX_COMM_TIMEOUT");
  *out = 600.0;
  if (!v || !*v)
    return TPX_OK;
  char *end = NULL;
  double t = strtod(v, &end);
  if (end == v || *end != '\0' || !isfinite(t) || t <= 0 || t > TIMEOUT_MAX_S)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "TPX_COMM_TIMEOUT='%.64s' is not a collective "
                         "timeout: give a number of seconds > 0 and <= 1e9 "
                         "with no unit (e.g. TPX_COMM_TIMEOUT=5 or 0.5), or "
                         "unset it for the default of 600",
                         v);
  *out = t;
  return TPX_OK;
}

double tpx__comm_default_timeout(void) {
  double t = 600.0;
  return tpx__comm_env_timeout(&t, NULL) == TPX_OK ? t : 600.0;
}

const char *tpx__comm_where(const tpx_comm *comm, char *buf, size_t size) {
  if (comm && comm->dim[0])
    snprintf(buf, size, "mesh dim '%s'", comm->dim);
  else
    snprintf(buf, size, "the world");
  return buf;
}

tpx_status tpx_comm_set_timeout(tpx_comm *comm, double seconds,
                                tpx_error *err) {
  if (!comm)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "comm_set_timeout: comm is NULL");
  if (!isfinite(seconds) || seconds <= 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "comm_set_timeout: %g seconds; the timeout must be "
                         "a positive number of seconds",
                         seconds);
  comm->timeout_s = seconds;
  return TPX_OK;
}

double tpx_comm_timeout(const tpx_comm *comm) {
  return comm ? comm->timeout_s : tpx__comm_default_timeout();
}

tpx_status tpx__comm_fail_before(tpx_comm *comm, const char *what,
                                 tpx_status st, const tpx_error *err) {
  if (comm && comm->iface->abort) {
    char why[TPX_ERROR_MESSAGE_SIZE + 96];
    snprintf(why, sizeof why,
             "%s failed on this rank before the "
             "collective: %s",
             what, err && err->message[0] ? err->message : tpx_status_str(st));
    comm->iface->abort(comm->ctx, why);
  }
  return st;
}

const tpx__memspace *tpx__comm_ms(const tpx_comm *comm) {
  return comm && comm->ms ? comm->ms : &tpx__ms_host;
}

const char *tpx_comm_memspace(const tpx_comm *comm) {
  return tpx__comm_ms(comm)->buf->name;
}

void tpx_comm_destroy(tpx_comm *comm) {
  if (!comm)
    return;
  if (comm->iface && comm->iface->destroy)
    comm->iface->destroy(comm->ctx);
  free(comm);
}

int tpx_comm_rank(const tpx_comm *comm) { return comm ? comm->rank : -1; }
int tpx_comm_size(const tpx_comm *comm) { return comm ? comm->size : -1; }
const char *tpx_comm_backend(const tpx_comm *comm) {
  return comm ? comm->iface->name : "(null)";
}

int tpx_comm_backend_compiled(const char *name) {
  if (!name)
    return 0;
  if (strcmp(name, "local") == 0)
    return 1;
  if (strcmp(name, "mpi") == 0)
    return TPX_HAVE_MPI;
  if (strcmp(name, "nccl") == 0)
    return TPX_HAVE_NCCL;
  return 0;
}

/* ---- argument checks ---------------------------------------------------- */

/* Common checks; *bytes_out = count * dtype size. `blocks` is how many
 * count-sized pieces the largest buffer holds (size for gathers). */
static tpx_status check_common(const char *what, const tpx_comm *comm,
                               size_t count, tpx_dtype dtype, size_t blocks,
                               size_t *bytes_out, tpx_error *err) {
  if (!comm)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: comm is NULL", what);
  size_t es = tpx_dtype_size(dtype);
  if (es == 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: unknown dtype %d (use a tpx_dtype value such "
                         "as TPX_DTYPE_F32)",
                         what, (int)dtype);
  if (count > SIZE_MAX / es / (blocks ? blocks : 1) ||
      count > (size_t)INT64_MAX / es / (blocks ? blocks : 1))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: count %zu of %s times %zu ranks overflows the "
                         "address space",
                         what, count, tpx_dtype_short_name(dtype), blocks);
  *bytes_out = count * es;
  return TPX_OK;
}

static tpx_status check_buf(const char *what, const char *name, const void *p,
                            size_t count, tpx_error *err) {
  if (!p && count > 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: %s buffer is NULL (count %zu)", what, name,
                         count);
  return TPX_OK;
}

#define TRY TPX__TRY

/* check_common and both buffers (each `count` elements, or NULL when
 * count is 0); bytes_out may be NULL. */
static tpx_status check_args(const char *what, const tpx_comm *comm,
                             size_t count, tpx_dtype dtype, size_t blocks,
                             const void *send, const void *recv,
                             size_t *bytes_out, tpx_error *err) {
  size_t bytes;
  TRY(check_common(what, comm, count, dtype, blocks,
                   bytes_out ? bytes_out : &bytes, err));
  TRY(check_buf(what, "send", send, count, err));
  return check_buf(what, "recv", recv, count, err);
}

/* The group size for the gathers' and scatters' checks (1 for NULL: the
 * NULL is reported then). */
static size_t blocks_of(const tpx_comm *comm) {
  return comm ? (size_t)comm->size : 1;
}

/* A temporary of `bytes` in the comm's memory space (zeroed when `zero`);
 * a failure is reported as this rank failing before the collective `w`. */
static tpx_status temp_alloc(tpx_comm *comm, const char *w, size_t bytes,
                             int zero, void **out, tpx_error *err) {
  tpx_status st = tpx__ms_alloc(tpx__comm_ms(comm), bytes, zero, out, err);
  return st == TPX_OK ? st : tpx__comm_fail_before(comm, w, st, err);
}

/* The uneven calls' checks and sizes: the group size, this rank's
 * torch.chunk piece (len elements), the even chunk and the element size.
 * The whole buffer (`total` elements) is recv for a gather, send for a
 * scatter; the other holds the piece. */
typedef struct chunked {
  int64_t n, len;
  size_t chunk, es;
} chunked;

static tpx_status check_chunked(const char *w, const tpx_comm *comm,
                                const void *send, const void *recv,
                                size_t total, tpx_dtype dtype, int gather,
                                chunked *k, tpx_error *err) {
  size_t bytes;
  int64_t off = 0;
  TRY(check_common(w, comm, total, dtype, 1, &bytes, err));
  k->n = comm->size;
  k->len = 0;
  TRY(tpx_layout_chunk((int64_t)total, k->n, comm->rank, &off, &k->len, err));
  k->chunk = (size_t)((int64_t)total + k->n - 1) / (size_t)k->n;
  k->es = tpx_dtype_size(dtype);
  TRY(check_buf(w, "send", send, gather ? (size_t)k->len : total, err));
  return check_buf(w, "recv", recv, gather ? total : (size_t)k->len, err);
}

/* ---- collectives -------------------------------------------------------- */

tpx_status tpx_comm_all_gather(tpx_comm *comm, const void *send, void *recv,
                               size_t count, tpx_dtype dtype, tpx_error *err) {
  TRY(check_args("all_gather", comm, count, dtype, blocks_of(comm), send, recv,
                 NULL, err));
  return comm->iface->all_gather(comm->ctx, send, recv, count, dtype, err);
}

/* A reducing collective of the backend (all_reduce or reduce_scatter). */
typedef tpx_status (*reduce_fn)(void *ctx, const void *send, void *recv,
                                size_t count, tpx_dtype dtype, tpx_reduce_op op,
                                tpx_error *err);

/* `fn` with the avg default applied: a backend without avg sums, then the
 * result (count elements) is divided by the group size. */
static tpx_status reduce_avg(tpx_comm *comm, reduce_fn fn, const void *send,
                             void *recv, size_t count, tpx_dtype dtype,
                             tpx_reduce_op op, tpx_error *err) {
  if (op != TPX_REDUCE_AVG || comm->iface->has_avg)
    return fn(comm->ctx, send, recv, count, dtype, op, err);
  TRY(fn(comm->ctx, send, recv, count, dtype, TPX_REDUCE_SUM, err));
  tpx__divide(recv, count, dtype, comm->size);
  return TPX_OK;
}

/* all_reduce with the avg default applied. */
static tpx_status do_all_reduce(tpx_comm *comm, const void *send, void *recv,
                                size_t count, tpx_dtype dtype, tpx_reduce_op op,
                                tpx_error *err) {
  return reduce_avg(comm, comm->iface->all_reduce, send, recv, count, dtype, op,
                    err);
}

tpx_status tpx_comm_all_reduce(tpx_comm *comm, const void *send, void *recv,
                               size_t count, tpx_dtype dtype, tpx_reduce_op op,
                               tpx_error *err) {
  const char *w = "all_reduce";
  TRY(check_args(w, comm, count, dtype, 1, send, recv, NULL, err));
  TRY(tpx__reduce_check(w, dtype, op, err));
  return do_all_reduce(comm, send, recv, count, dtype, op, err);
}

tpx_status tpx_comm_reduce_scatter(tpx_comm *comm, const void *send, void *recv,
                                   size_t count, tpx_dtype dtype,
                                   tpx_reduce_op op, tpx_error *err) {
  const char *w = "reduce_scatter";
  size_t bytes;
  TRY(check_args(w, comm, count, dtype, blocks_of(comm), send, recv, &bytes,
                 err));
  TRY(tpx__reduce_check(w, dtype, op, err));
  const tpx_comm_iface *f = comm->iface;
  if (f->reduce_scatter)
    return reduce_avg(comm, f->reduce_scatter, send, recv, count, dtype, op,
                      err);
  /* Default: all-reduce the whole buffer, keep this rank's block (the
   * temporary lives in the comm's memory space). */
  const tpx__memspace *ms = tpx__comm_ms(comm);
  size_t total = count * (size_t)comm->size;
  void *tmp = NULL;
  TRY(temp_alloc(comm, w, total * tpx_dtype_size(dtype), 0, &tmp, err));
  tpx_status st = do_all_reduce(comm, send, tmp, total, dtype, op, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, recv,
                      (unsigned char *)tmp + (size_t)comm->rank * bytes, bytes,
                      TPX__D2D, err);
  tpx__ms_free(ms, tmp);
  return st;
}

tpx_status tpx_comm_broadcast(tpx_comm *comm, const void *send, void *recv,
                              size_t count, tpx_dtype dtype, int root,
                              tpx_error *err) {
  const char *w = "broadcast";
  size_t bytes;
  TRY(check_common(w, comm, count, dtype, 1, &bytes, err));
  if (root < 0 || root >= comm->size)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: root %d out of range for a group of %d ranks", w,
                         root, comm->size);
  if (comm->rank == root)
    TRY(check_buf(w, "send (on the root)", send, count, err));
  TRY(check_buf(w, "recv", recv, count, err));
  return comm->iface->broadcast(comm->ctx, send, recv, count, dtype, root, err);
}

tpx_status tpx_comm_all_to_all(tpx_comm *comm, const void *send, void *recv,
                               size_t count, tpx_dtype dtype, tpx_error *err) {
  const char *w = "all_to_all";
  size_t bytes;
  TRY(check_args(w, comm, count, dtype, blocks_of(comm), send, recv, &bytes,
                 err));
  if (send != recv || count == 0)
    return comm->iface->all_to_all(comm->ctx, send, recv, count, dtype, err);
  const tpx__memspace *ms = tpx__comm_ms(comm);
  size_t total = bytes * (size_t)comm->size;
  void *tmp = NULL;
  TRY(temp_alloc(comm, w, total, 0, &tmp, err));
  tpx_status st = tpx__ms_copy(ms, tmp, send, total, TPX__D2D, err);
  if (st == TPX_OK)
    st = comm->iface->all_to_all(comm->ctx, tmp, recv, count, dtype, err);
  else
    tpx__comm_fail_before(comm, w, st, err);
  tpx__ms_free(ms, tmp);
  return st;
}

tpx_status tpx_comm_barrier(tpx_comm *comm, tpx_error *err) {
  if (!comm)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "barrier: comm is NULL");
  if (comm->iface->barrier)
    return comm->iface->barrier(comm->ctx, err);
  int32_t one = 1, out = 0;
  return comm->iface->all_reduce(comm->ctx, &one, &out, 1, TPX_DTYPE_I32,
                                 TPX_REDUCE_SUM, err);
}

/* ---- uneven (torch.chunk) variants -------------------------------------- */

tpx_status tpx_comm_all_gather_chunked(tpx_comm *comm, const void *send,
                                       void *recv, size_t total,
                                       tpx_dtype dtype, tpx_error *err) {
  const char *w = "all_gather_chunked";
  chunked k;
  TRY(check_chunked(w, comm, send, recv, total, dtype, 1, &k, err));
  size_t n = (size_t)k.n, chunk = k.chunk, es = k.es, len = (size_t)k.len;
  if (chunk * n == total)
    return tpx_comm_all_gather(comm, send, recv, chunk, dtype, err);
  /* Pad to chunk * n: pieces land at r * chunk, which is where torch.chunk
   * puts them, so the first `total` elements are the result. The
   * temporary lives in the comm's memory space. */
  const tpx__memspace *ms = tpx__comm_ms(comm);
  void *tmpv = NULL;
  TRY(temp_alloc(comm, w, (chunk * n + chunk) * es, 1, &tmpv, err));
  unsigned char *tmp = tmpv;
  unsigned char *padded_send = tmp + chunk * n * es;
  tpx_status st = tpx__ms_copy(ms, padded_send, send, len * es, TPX__D2D, err);
  if (st == TPX_OK)
    st = tpx_comm_all_gather(comm, padded_send, tmp, chunk, dtype, err);
  else
    tpx__comm_fail_before(comm, w, st, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, recv, tmp, total * es, TPX__D2D, err);
  tpx__ms_free(ms, tmp);
  return st;
}

tpx_status tpx_comm_reduce_scatter_chunked(tpx_comm *comm, const void *send,
                                           void *recv, size_t total,
                                           tpx_dtype dtype, tpx_reduce_op op,
                                           tpx_error *err) {
  const char *w = "reduce_scatter_chunked";
  chunked k;
  TRY(check_chunked(w, comm, send, recv, total, dtype, 0, &k, err));
  TRY(tpx__reduce_check(w, dtype, op, err));
  size_t n = (size_t)k.n, chunk = k.chunk, es = k.es, len = (size_t)k.len;
  if (chunk * n == total)
    return tpx_comm_reduce_scatter(comm, send, recv, chunk, dtype, op, err);
  const tpx__memspace *ms = tpx__comm_ms(comm);
  void *tmpv = NULL;
  TRY(temp_alloc(comm, w, chunk * n * es, 1, &tmpv, err));
  unsigned char *tmp = tmpv;
  tpx_status st = tpx__ms_copy(ms, tmp, send, total * es, TPX__D2D, err);
  unsigned char *mine = tmp + (size_t)comm->rank * chunk * es;
  if (st == TPX_OK)
    st = tpx_comm_reduce_scatter(comm, tmp, mine, chunk, dtype, op, err);
  else
    tpx__comm_fail_before(comm, w, st, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, recv, mine, (size_t)len * es, TPX__D2D, err);
  tpx__ms_free(ms, tmp);
  return st;
}
