/* mpi.c — the `mpi` backend: one rank per process, Open MPI collectives.
 *
 * Every tpx world duplicates the caller's MPI communicator (errors return
 * instead of aborting), sub-groups come from MPI_Comm_split keyed by the
 * group's first rank. f16 / bf16 reductions are widened to f32 in a
 * temporary, reduced, divided (avg) and rounded once, so results match the
 * local backend bit for bit. Counts beyond INT_MAX are refused (MPI counts
 * are int). Built as a stub returning TPX_UNSUPPORTED without MPI. */
#include "tpx_config.h"

#include <stdlib.h>

#include "comm/comm_impl.h"

#if TPX_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <string.h>

#include "device/elem.h"

typedef struct mctx {
  MPI_Comm comm;
  int is_world; /* counts towards finalizing MPI if tpx initialised it */
} mctx;

static int mpi_inited_by_tpx; /* tpx called MPI_Init_thread */
static int mpi_world_count;   /* live tpx mpi worlds */

static tpx_status mpi_fail(tpx_error *err, const char *what, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return tpx_error_set(err, TPX_COMM, "mpi %s failed: %s", what, msg);
}
#define MPI_TRY(what, call)                                                    \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != MPI_SUCCESS)                                                    \
      return mpi_fail(err, what, rc_);                                         \
  } while (0)

static MPI_Datatype mpi_type(tpx_dtype t) {
  switch (t) {
  case TPX_DTYPE_F64: return MPI_DOUBLE;
  case TPX_DTYPE_F32: return MPI_FLOAT;
  case TPX_DTYPE_I64: return MPI_INT64_T;
  case TPX_DTYPE_I32: return MPI_INT32_T;
  case TPX_DTYPE_I16: return MPI_INT16_T;
  case TPX_DTYPE_I8: return MPI_INT8_T;
  case TPX_DTYPE_U64: return MPI_UINT64_T;
  case TPX_DTYPE_U32: return MPI_UINT32_T;
  case TPX_DTYPE_U16: return MPI_UINT16_T;
  /* Pure data movement for the rest: same bytes. */
  case TPX_DTYPE_F16: case TPX_DTYPE_BF16: return MPI_UINT16_T;
  default: return MPI_UINT8_T;
  }
}

static MPI_Op mpi_op(tpx_reduce_op op) {
  return op == TPX_REDUCE_MAX ? MPI_MAX : op == TPX_REDUCE_MIN ? MPI_MIN
                                                               : MPI_SUM;
}

static int is16(tpx_dtype t) {
  return t == TPX_DTYPE_F16 || t == TPX_DTYPE_BF16;
}

static tpx_status check_count(const char *what, size_t count,
                              tpx_error *err) {
  if (count > (size_t)INT_MAX)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "mpi %s: count %zu exceeds INT_MAX (MPI counts are "
                         "int); split the buffer",
                         what, count);
  return TPX_OK;
}

static void widen(float *dst, const void *src, size_t n, tpx_dtype t) {
  const uint16_t *s = src;
  for (size_t i = 0; i < n; i++)
    dst[i] = t == TPX_DTYPE_F16 ? tpx__f16_to_f32(s[i])
                                : tpx__bf16_to_f32(s[i]);
}
static void narrow(void *dst, const float *src, size_t n, tpx_dtype t) {
  uint16_t *d = dst;
  for (size_t i = 0; i < n; i++)
    d[i] = t == TPX_DTYPE_F16 ? tpx__f32_to_f16(src[i])
                              : tpx__f32_to_bf16(src[i]);
}

static void mpi_destroy(void *ctx) {
  mctx *c = ctx;
  if (!c)
    return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin)
    MPI_Comm_free(&c->comm);
  if (c->is_world && --mpi_world_count == 0 && mpi_inited_by_tpx && !fin) {
    MPI_Finalize();
    mpi_inited_by_tpx = 0;
  }
  free(c);
}

static const tpx_comm_iface mpi_iface;

static tpx_status wrap(MPI_Comm comm, int is_world, tpx_comm **out,
                       tpx_error *err) {
  int rank = 0, size = 0;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  mctx *c = calloc(1, sizeof *c);
  tpx_comm *h = c ? tpx__comm_new(&mpi_iface, c, rank, size) : NULL;
  if (!h) {
    free(c);
    MPI_Comm_free(&comm);
    return tpx_error_set(err, TPX_NO_MEMORY, "mpi communicator");
  }
  c->comm = comm;
  c->is_world = is_world;
  if (is_world)
    mpi_world_count++;
  *out = h;
  return TPX_OK;
}

static tpx_status mpi_split(tpx_comm *world, const int64_t *group, int gsize,
                            int index, tpx_comm **out, tpx_error *err) {
  mctx *w = world->ctx;
  MPI_Comm sub;
  (void)gsize;
  MPI_TRY("MPI_Comm_split", MPI_Comm_split(w->comm, (int)group[0], index,
                                           &sub));
  return wrap(sub, 0, out, err);
}

static tpx_status mpi_all_gather(void *ctx, const void *send, void *recv,
                                 size_t count, tpx_dtype dtype,
                                 tpx_error *err) {
  mctx *c = ctx;
  int rank;
  tpx_status st = check_count("all_gather", count, err);
  if (st != TPX_OK)
    return st;
  MPI_Comm_rank(c->comm, &rank);
  size_t bytes = count * tpx_dtype_size(dtype);
  const void *s =
      send == (unsigned char *)recv + (size_t)rank * bytes ? MPI_IN_PLACE
                                                           : send;
  MPI_TRY("MPI_Allgather",
          MPI_Allgather(s, (int)count, mpi_type(dtype), recv, (int)count,
                        mpi_type(dtype), c->comm));
  return TPX_OK;
}

static tpx_status mpi_all_reduce(void *ctx, const void *send, void *recv,
                                 size_t count, tpx_dtype dtype,
                                 tpx_reduce_op op, tpx_error *err) {
  mctx *c = ctx;
  int size;
  tpx_status st = check_count("all_reduce", count, err);
  if (st != TPX_OK)
    return st;
  MPI_Comm_size(c->comm, &size);
  if (is16(dtype)) {
    float *tmp = malloc((count ? count : 1) * sizeof(float));
    if (!tmp)
      return tpx_error_set(err, TPX_NO_MEMORY, "mpi all_reduce: %zu floats",
                           count);
    widen(tmp, send, count, dtype);
    int rc = MPI_Allreduce(MPI_IN_PLACE, tmp, (int)count, MPI_FLOAT,
                           mpi_op(op), c->comm);
    if (rc == MPI_SUCCESS) {
      if (op == TPX_REDUCE_AVG)
        tpx__divide(tmp, count, TPX_DTYPE_F32, size);
      narrow(recv, tmp, count, dtype);
    }
    free(tmp);
    return rc == MPI_SUCCESS ? TPX_OK : mpi_fail(err, "MPI_Allreduce", rc);
  }
  MPI_TRY("MPI_Allreduce",
          MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                        mpi_type(dtype), mpi_op(op), c->comm));
  if (op == TPX_REDUCE_AVG)
    tpx__divide(recv, count, dtype, size);
  return TPX_OK;
}

static tpx_status mpi_reduce_scatter(void *ctx, const void *send, void *recv,
                                     size_t count, tpx_dtype dtype,
                                     tpx_reduce_op op, tpx_error *err) {
  mctx *c = ctx;
  int size, rank;
  tpx_status st = check_count("reduce_scatter", count, err);
  if (st != TPX_OK)
    return st;
  MPI_Comm_size(c->comm, &size);
  MPI_Comm_rank(c->comm, &rank);
  size_t total = count * (size_t)size, es = tpx_dtype_size(dtype);
  if (is16(dtype)) {
    float *tmp = malloc((total + count + 1) * sizeof(float));
    if (!tmp)
      return tpx_error_set(err, TPX_NO_MEMORY,
                           "mpi reduce_scatter: %zu floats", total + count);
    widen(tmp, send, total, dtype);
    float *out = tmp + total;
    int rc = MPI_Reduce_scatter_block(tmp, out, (int)count, MPI_FLOAT,
                                      mpi_op(op), c->comm);
    if (rc == MPI_SUCCESS) {
      if (op == TPX_REDUCE_AVG)
        tpx__divide(out, count, TPX_DTYPE_F32, size);
      narrow(recv, out, count, dtype);
    }
    free(tmp);
    return rc == MPI_SUCCESS ? TPX_OK
                             : mpi_fail(err, "MPI_Reduce_scatter_block", rc);
  }
  /* recv inside send (in place): MPI forbids the overlap, go through a
   * temporary. */
  const unsigned char *s = send;
  unsigned char *r = recv;
  int overlap = r < s + total * es && s < r + count * es;
  void *dst = recv;
  if (overlap && count > 0) {
    dst = malloc(count * es);
    if (!dst)
      return tpx_error_set(err, TPX_NO_MEMORY, "mpi reduce_scatter");
  }
  int rc = MPI_Reduce_scatter_block(send, dst, (int)count, mpi_type(dtype),
                                    mpi_op(op), c->comm);
  if (dst != recv) {
    if (rc == MPI_SUCCESS)
      memcpy(recv, dst, count * es);
    free(dst);
  }
  if (rc != MPI_SUCCESS)
    return mpi_fail(err, "MPI_Reduce_scatter_block", rc);
  if (op == TPX_REDUCE_AVG)
    tpx__divide(recv, count, dtype, size);
  return TPX_OK;
}

static tpx_status mpi_broadcast(void *ctx, const void *send, void *recv,
                                size_t count, tpx_dtype dtype, int root,
                                tpx_error *err) {
  mctx *c = ctx;
  int rank;
  tpx_status st = check_count("broadcast", count, err);
  if (st != TPX_OK)
    return st;
  MPI_Comm_rank(c->comm, &rank);
  if (rank == root && send != recv && count > 0)
    memcpy(recv, send, count * tpx_dtype_size(dtype));
  MPI_TRY("MPI_Bcast",
          MPI_Bcast(recv, (int)count, mpi_type(dtype), root, c->comm));
  return TPX_OK;
}

static tpx_status mpi_all_to_all(void *ctx, const void *send, void *recv,
                                 size_t count, tpx_dtype dtype,
                                 tpx_error *err) {
  mctx *c = ctx;
  tpx_status st = check_count("all_to_all", count, err);
  if (st != TPX_OK)
    return st;
  MPI_TRY("MPI_Alltoall",
          MPI_Alltoall(send, (int)count, mpi_type(dtype), recv, (int)count,
                       mpi_type(dtype), c->comm));
  return TPX_OK;
}

static tpx_status mpi_barrier(void *ctx, tpx_error *err) {
  mctx *c = ctx;
  MPI_TRY("MPI_Barrier", MPI_Barrier(c->comm));
  return TPX_OK;
}

static const tpx_comm_iface mpi_iface = {
    .name = "mpi",
    .split = mpi_split,
    .destroy = mpi_destroy,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .all_reduce = mpi_all_reduce,
    .broadcast = mpi_broadcast,
    .all_to_all = mpi_all_to_all,
    .barrier = mpi_barrier,
    .has_avg = 1,
};

tpx_status tpx_comm_create_mpi(const void *mpi_comm, tpx_comm **out,
                               tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "create_mpi: out is NULL");
  *out = NULL;
  int flag = 0;
  MPI_Finalized(&flag);
  if (flag)
    return tpx_error_set(err, TPX_COMM,
                         "create_mpi: MPI was already finalized");
  MPI_Initialized(&flag);
  if (!flag) {
    int provided = 0;
    MPI_TRY("MPI_Init_thread",
            MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
    mpi_inited_by_tpx = 1;
  }
  MPI_Comm base = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
  MPI_Comm dup;
  MPI_TRY("MPI_Comm_dup", MPI_Comm_dup(base, &dup));
  return wrap(dup, 1, out, err);
}

int tpx__mpi_thread_multiple(void) {
  int init = 0, fin = 0, provided = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return 0;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

#else /* !TPX_HAVE_MPI */

int tpx__mpi_thread_multiple(void) { return 0; }

tpx_status tpx_comm_create_mpi(const void *mpi_comm, tpx_comm **out,
                               tpx_error *err) {
  (void)mpi_comm;
  if (out)
    *out = NULL;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "the mpi backend is not built: libtpx was configured "
                       "without Open MPI (install it and reconfigure with "
                       "-Dmpi=enabled)");
}

#endif
