/* nccl.c — the `nccl` backend: CUDA device buffers through NCCL.
 *
 * Plain C on the CUDA runtime API (no nvcc). Bootstrap: a unique id the
 * caller hands to every rank, or one made on rank 0 and broadcast over MPI.
 * Every collective is enqueued on the comm's own stream and then waited for,
 * so calls block like the host backends. all_to_all is grouped send/recv.
 * Without a usable GPU, creation fails with TPX_NO_DEVICE and the CUDA
 * error text; it never crashes. Built as a stub returning TPX_UNSUPPORTED
 * without CUDA + NCCL. */
#include "tpx_config.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"

#if TPX_HAVE_NCCL

#include "device/cuda_api.h"

#if TPX_HAVE_MPI
#include <mpi.h>
#endif

typedef struct nctx {
  ncclComm_t comm;
  cudaStream_t stream;
  tpx__memspace ms; /* cuda, on `stream` */
  int device;
  int *dev_word; /* one int on the device for barrier */
} nctx;

static tpx_status cuda_fail(tpx_error *err, tpx_status st, const char *what,
                            cudaError_t e) {
  return tpx_error_set(err, st, "nccl backend: %s failed: %s (%s)", what,
                       cudaGetErrorString(e), cudaGetErrorName(e));
}
static tpx_status nccl_fail(tpx_error *err, const char *what, ncclResult_t r) {
  return tpx_error_set(err, TPX_COMM, "nccl backend: %s failed: %s", what,
                       ncclGetErrorString(r));
}

static tpx_status finish(nctx *c, const char *what, ncclResult_t r,
                         tpx_error *err) {
  if (r != ncclSuccess)
    return nccl_fail(err, what, r);
  cudaError_t e = cudaStreamSynchronize(c->stream);
  if (e != cudaSuccess)
    return cuda_fail(err, TPX_COMM, "cudaStreamSynchronize", e);
  return TPX_OK;
}

static int nccl_type(tpx_dtype t, ncclDataType_t *out) {
  switch (t) {
  case TPX_DTYPE_F64: *out = ncclFloat64; return 1;
  case TPX_DTYPE_F32: *out = ncclFloat32; return 1;
  case TPX_DTYPE_F16: *out = ncclFloat16; return 1;
  case TPX_DTYPE_BF16: *out = ncclBfloat16; return 1;
  case TPX_DTYPE_I64: *out = ncclInt64; return 1;
  case TPX_DTYPE_I32: *out = ncclInt32; return 1;
  case TPX_DTYPE_I8: *out = ncclInt8; return 1;
  case TPX_DTYPE_U64: *out = ncclUint64; return 1;
  case TPX_DTYPE_U32: *out = ncclUint32; return 1;
  case TPX_DTYPE_U8:
  case TPX_DTYPE_BOOL:
  case TPX_DTYPE_F8_E4M3:
  case TPX_DTYPE_F8_E5M2:
  case TPX_DTYPE_F8_E8M0: *out = ncclUint8; return 1;
  default: return 0; /* i16 / u16: NCCL has no 16-bit integer type */
  }
}

static ncclRedOp_t nccl_op(tpx_reduce_op op) {
  switch (op) {
  case TPX_REDUCE_AVG: return ncclAvg;
  case TPX_REDUCE_MAX: return ncclMax;
  case TPX_REDUCE_MIN: return ncclMin;
  default: return ncclSum;
  }
}

/* Data movement may treat i16/u16 as bytes; reductions may not. */
static tpx_status move_type(tpx_dtype t, size_t *count, ncclDataType_t *out,
                            tpx_error *err) {
  if (nccl_type(t, out))
    return TPX_OK;
  (void)err;
  *out = ncclUint8;
  *count *= tpx_dtype_size(t);
  return TPX_OK;
}

static void nccl_destroy(void *ctx) {
  nctx *c = ctx;
  if (!c)
    return;
  cudaSetDevice(c->device);
  if (c->comm)
    ncclCommDestroy(c->comm);
  if (c->dev_word)
    cudaFree(c->dev_word);
  if (c->stream)
    cudaStreamDestroy(c->stream);
  free(c);
}

static tpx_status nccl_all_gather(void *ctx, const void *send, void *recv,
                                  size_t count, tpx_dtype dtype,
                                  tpx_error *err) {
  nctx *c = ctx;
  ncclDataType_t t;
  move_type(dtype, &count, &t, err);
  return finish(c, "ncclAllGather",
                ncclAllGather(send, recv, count, t, c->comm, c->stream), err);
}

static tpx_status reduce_type(const char *what, tpx_dtype dtype,
                              ncclDataType_t *t, tpx_error *err) {
  if (nccl_type(dtype, t) && (*t != ncclUint8 || dtype == TPX_DTYPE_U8))
    return TPX_OK;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "nccl %s: NCCL cannot reduce dtype %s", what,
                       tpx_dtype_short_name(dtype));
}

/* The two reducing collectives: all_reduce, or reduce_scatter when
 * `scatter` is set. */
static tpx_status nccl_reduce(void *ctx, int scatter, const void *send,
                              void *recv, size_t count, tpx_dtype dtype,
                              tpx_reduce_op op, tpx_error *err) {
  nctx *c = ctx;
  ncclDataType_t t;
  tpx_status st =
      reduce_type(scatter ? "reduce_scatter" : "all_reduce", dtype, &t, err);
  if (st != TPX_OK)
    return st;
  if (scatter)
    return finish(c, "ncclReduceScatter",
                  ncclReduceScatter(send, recv, count, t, nccl_op(op), c->comm,
                                    c->stream),
                  err);
  return finish(
      c, "ncclAllReduce",
      ncclAllReduce(send, recv, count, t, nccl_op(op), c->comm, c->stream),
      err);
}

static tpx_status nccl_reduce_scatter(void *ctx, const void *send, void *recv,
                                      size_t count, tpx_dtype dtype,
                                      tpx_reduce_op op, tpx_error *err) {
  return nccl_reduce(ctx, 1, send, recv, count, dtype, op, err);
}

static tpx_status nccl_all_reduce(void *ctx, const void *send, void *recv,
                                  size_t count, tpx_dtype dtype,
                                  tpx_reduce_op op, tpx_error *err) {
  return nccl_reduce(ctx, 0, send, recv, count, dtype, op, err);
}

static tpx_status nccl_broadcast(void *ctx, const void *send, void *recv,
                                 size_t count, tpx_dtype dtype, int root,
                                 tpx_error *err) {
  nctx *c = ctx;
  ncclDataType_t t;
  move_type(dtype, &count, &t, err);
  return finish(c, "ncclBroadcast",
                ncclBroadcast(send, recv, count, t, root, c->comm, c->stream),
                err);
}

static tpx_status nccl_all_to_all(void *ctx, const void *send, void *recv,
                                  size_t count, tpx_dtype dtype,
                                  tpx_error *err) {
  nctx *c = ctx;
  ncclDataType_t t;
  int n = 0;
  size_t es = tpx_dtype_size(dtype);
  move_type(dtype, &count, &t, err);
  if (t == ncclUint8)
    es = 1;
  ncclCommCount(c->comm, &n);
  ncclResult_t r = ncclGroupStart();
  for (int j = 0; j < n && r == ncclSuccess; j++) {
    r = ncclSend((const unsigned char *)send + (size_t)j * count * es, count, t,
                 j, c->comm, c->stream);
    if (r == ncclSuccess)
      r = ncclRecv((unsigned char *)recv + (size_t)j * count * es, count, t, j,
                   c->comm, c->stream);
  }
  ncclResult_t r2 = ncclGroupEnd();
  return finish(c, "all_to_all (ncclSend/ncclRecv)", r != ncclSuccess ? r : r2,
                err);
}

static tpx_status nccl_barrier(void *ctx, tpx_error *err) {
  nctx *c = ctx;
  return finish(c, "ncclAllReduce (barrier)",
                ncclAllReduce(c->dev_word, c->dev_word, 1, ncclInt32, ncclSum,
                              c->comm, c->stream),
                err);
}

static tpx_status nccl_split(tpx_comm *world, const int64_t *group, int gsize,
                             int index, tpx_comm **out, tpx_error *err);

static const tpx_comm_iface nccl_iface = {
    .name = "nccl",
    .split = nccl_split,
    .destroy = nccl_destroy,
    .all_gather = nccl_all_gather,
    .reduce_scatter = nccl_reduce_scatter,
    .all_reduce = nccl_all_reduce,
    .broadcast = nccl_broadcast,
    .all_to_all = nccl_all_to_all,
    .barrier = nccl_barrier,
    .has_avg = 1,
};

/* A context on `device` around an initialised NCCL comm. */
static tpx_status wrap(ncclComm_t comm, int device, tpx_comm **out,
                       tpx_error *err) {
  int rank = 0, size = 0;
  nctx *c = calloc(1, sizeof *c);
  if (!c) {
    ncclCommDestroy(comm);
    return tpx_error_set(err, TPX_NO_MEMORY, "nccl communicator");
  }
  c->comm = comm;
  c->device = device;
  cudaError_t e = cudaStreamCreate(&c->stream);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&c->dev_word, sizeof(int));
  if (e != cudaSuccess) {
    nccl_destroy(c);
    return cuda_fail(err, TPX_NO_DEVICE, "stream/buffer setup", e);
  }
  tpx_status st = tpx__ms_cuda_init(&c->ms, (void *)c->stream, err);
  if (st != TPX_OK) {
    nccl_destroy(c);
    return st;
  }
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &size);
  *out = tpx__comm_new(&nccl_iface, c, rank, size);
  if (!*out) {
    nccl_destroy(c);
    return tpx_error_set(err, TPX_NO_MEMORY, "nccl communicator");
  }
  (*out)->ms = &c->ms;
  return TPX_OK;
}

static tpx_status nccl_split(tpx_comm *world, const int64_t *group, int gsize,
                             int index, tpx_comm **out, tpx_error *err) {
  nctx *w = world->ctx;
  ncclComm_t sub = NULL;
  (void)gsize;
  ncclResult_t r = ncclCommSplit(w->comm, (int)group[0], index, &sub, NULL);
  if (r != ncclSuccess)
    return nccl_fail(err, "ncclCommSplit", r);
  return wrap(sub, w->device, out, err);
}

tpx_status tpx_nccl_unique_id(unsigned char id[TPX_NCCL_UNIQUE_ID_BYTES],
                              tpx_error *err) {
  ncclUniqueId uid;
  if (!id)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "nccl_unique_id: id is "
                         "NULL");
  ncclResult_t r = ncclGetUniqueId(&uid);
  if (r != ncclSuccess)
    return nccl_fail(err, "ncclGetUniqueId", r);
  memcpy(id, uid.internal, TPX_NCCL_UNIQUE_ID_BYTES);
  return TPX_OK;
}

tpx_status tpx_comm_create_nccl(const tpx_nccl_options *opts, tpx_comm **out,
                                tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "create_nccl: out is NULL");
  *out = NULL;
  tpx_nccl_options o = TPX_NCCL_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof o)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "create_nccl: opts->struct_size %zu is not a "
                           "known size (use TPX_NCCL_OPTIONS_INIT)",
                           opts->struct_size);
    memcpy(&o, opts, opts->struct_size);
  }
  /* The GPU check first: on a machine without one this is the answer. */
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess)
    return tpx_error_set(err, TPX_NO_DEVICE,
                         "nccl backend: no usable CUDA device "
                         "(cudaGetDeviceCount: %s); use the 'local' or "
                         "'mpi' backend on this machine",
                         cudaGetErrorString(e));
  if (ndev <= 0)
    return tpx_error_set(err, TPX_NO_DEVICE,
                         "nccl backend: cudaGetDeviceCount found 0 devices; "
                         "use the 'local' or 'mpi' backend on this machine");
  ncclUniqueId uid;
  memset(&uid, 0, sizeof uid);
  if (o.has_unique_id) {
    if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "create_nccl: rank %d / nranks %d out of range",
                           o.rank, o.nranks);
    memcpy(uid.internal, o.unique_id, TPX_NCCL_UNIQUE_ID_BYTES);
  } else {
#if TPX_HAVE_MPI
    int init = 0;
    MPI_Initialized(&init);
    if (!init)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "create_nccl: no unique id given and MPI is not "
                           "initialised (create an mpi comm first, or pass "
                           "has_unique_id)");
    MPI_Comm mc = o.mpi_comm ? *(const MPI_Comm *)o.mpi_comm : MPI_COMM_WORLD;
    MPI_Comm_rank(mc, &o.rank);
    MPI_Comm_size(mc, &o.nranks);
    if (o.rank == 0) {
      ncclResult_t r = ncclGetUniqueId(&uid);
      if (r != ncclSuccess)
        return nccl_fail(err, "ncclGetUniqueId", r);
    }
    if (MPI_Bcast(&uid, (int)sizeof uid, MPI_BYTE, 0, mc) != MPI_SUCCESS)
      return tpx_error_set(err, TPX_COMM,
                           "create_nccl: MPI_Bcast of the unique id failed");
#else
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "create_nccl: no unique id given and libtpx has no "
                         "MPI to broadcast one; pass has_unique_id");
#endif
  }
  int dev = o.device >= 0 ? o.device : o.rank % ndev;
  e = cudaSetDevice(dev);
  if (e != cudaSuccess)
    return cuda_fail(err, TPX_NO_DEVICE, "cudaSetDevice", e);
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRank(&comm, o.nranks, uid, o.rank);
  if (r != ncclSuccess)
    return nccl_fail(err, "ncclCommInitRank", r);
  return wrap(comm, dev, out, err);
}

#else /* !TPX_HAVE_NCCL */

static tpx_status not_built(tpx_error *err) {
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "the nccl backend is not built: libtpx was configured "
                       "without CUDA and NCCL (see -Dgpu_root, -Dnccl)");
}

tpx_status tpx_comm_create_nccl(const tpx_nccl_options *opts, tpx_comm **out,
                                tpx_error *err) {
  (void)opts;
  if (out)
    *out = NULL;
  return not_built(err);
}

tpx_status tpx_nccl_unique_id(unsigned char id[TPX_NCCL_UNIQUE_ID_BYTES],
                              tpx_error *err) {
  (void)id;
  return not_built(err);
}

#endif
