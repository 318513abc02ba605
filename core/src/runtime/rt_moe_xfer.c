/* runtime/rt_moe_xfer.c — the MoE dispatch's moves over ep
 * (runtime/rt_moe_internal.h): one public tpx_comm collective per move, so
 * every backend (local, mpi, nccl) runs it unchanged; host buffers staged
 * through the comm's memory space when that is a device one. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_moe_internal.h"

void *tpx__moe_alloc(tpx_moe_dispatch *d, size_t n, size_t size, int zero) {
  size_t b = n * size > 0 ? n * size : 1;
  void *p = zero ? calloc(1, b) : malloc(b);
  if (p && d)
    d->bytes += b;
  return p;
}

static tpx_status run(tpx_comm *c, tpx__moe_op op, const void *s, void *r,
                      size_t count, tpx_dtype dt, tpx_error *err) {
  switch (op) {
  case TPX__MOE_GATHER: return tpx_comm_all_gather(c, s, r, count, dt, err);
  case TPX__MOE_SCATTER:
    return tpx_comm_reduce_scatter(c, s, r, count, dt, TPX_REDUCE_SUM, err);
  case TPX__MOE_A2A: return tpx_comm_all_to_all(c, s, r, count, dt, err);
  case TPX__MOE_MAX:
    return tpx_comm_all_reduce(c, s, r, count, dt, TPX_REDUCE_MAX, err);
  }
  return tpx_error_set(err, TPX_INTERNAL, "moe: unknown collective %d",
                       (int)op);
}

tpx_status tpx__moe_coll(const tpx_moe_dispatch *d, tpx__moe_op op,
                         const void *send, void *recv, size_t count,
                         tpx_dtype dt, tpx_error *err) {
  size_t es = tpx_dtype_size(dt), P = (size_t)d->P;
  if (!count)
    return TPX_OK;
  size_t sb =
      count * es * (op == TPX__MOE_SCATTER || op == TPX__MOE_A2A ? P : 1);
  size_t rb =
      count * es * (op == TPX__MOE_GATHER || op == TPX__MOE_A2A ? P : 1);
  if (d->P == 1) {
    memcpy(recv, send, rb);
    return TPX_OK;
  }
  const tpx__memspace *ms = d->ms;
  if (!tpx__ms_is_device(ms))
    return run(d->ep, op, send, recv, count, dt, err);
  void *ds = NULL, *dr = NULL;
  tpx_status st = tpx__ms_alloc(ms, sb, 0, &ds, err);
  if (st == TPX_OK)
    st = tpx__ms_alloc(ms, rb, 0, &dr, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, ds, send, sb, TPX__H2D, err);
  if (st == TPX_OK)
    st = run(d->ep, op, ds, dr, count, dt, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, recv, dr, rb, TPX__D2H, err);
  tpx__ms_free(ms, ds);
  tpx__ms_free(ms, dr);
  return st;
}

tpx_status tpx__moe_fwd(const tpx_moe_dispatch *d, const float *src, int64_t W,
                        int per_slot, float *rows, tpx_error *err) {
  int64_t k = d->k, P = d->P, per = per_slot ? k : 1;
  int gather = d->kind == TPX_MOE_ALL_GATHER;
  int64_t send_rows = gather ? d->nmax * per : P * d->C;
  int64_t recv_rows = gather ? P * send_rows : P * d->C;
  size_t rw = sizeof(float) * (size_t)W;
  float *send = calloc((size_t)(send_rows ? send_rows : 1), rw);
  float *recv = malloc((size_t)(recv_rows ? recv_rows : 1) * rw);
  if (!send || !recv) {
    free(send);
    free(recv);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "moe dispatch: %lld rows of %lld floats",
                         (long long)(send_rows + recv_rows), (long long)W);
  }
  if (gather) {
    if (d->n)
      memcpy(send, src, (size_t)(d->n * per) * rw);
  } else {
    for (int64_t i = 0; i < P * d->C; i++)
      if (d->send_slot[i] >= 0)
        memcpy(send + i * W, src + (d->send_slot[i] / (per_slot ? 1 : k)) * W,
               rw);
  }
  tpx_status st = tpx__moe_coll(
      d, gather ? TPX__MOE_GATHER : TPX__MOE_A2A, send, recv,
      (size_t)((gather ? send_rows : d->C) * W), TPX_DTYPE_F32, err);
  if (st == TPX_OK)
    for (int64_t i = 0; i < d->m; i++) {
      int64_t at =
          gather && per_slot ? d->row_src[i] * k + d->row_j[i] : d->row_src[i];
      memcpy(rows + i * W, recv + at * W, rw);
    }
  free(send);
  free(recv);
  return st;
}

tpx_status tpx__moe_ret(const tpx_moe_dispatch *d, const float *vals, int64_t W,
                        float **back, tpx_error *err) {
  int gather = d->kind == TPX_MOE_ALL_GATHER;
  int64_t P = d->P;
  int64_t recv_rows = gather ? d->nmax * d->k : P * d->C;
  int64_t send_rows = gather ? P * recv_rows : P * d->C;
  size_t rw = sizeof(float) * (size_t)W;
  float *send = calloc((size_t)(send_rows ? send_rows : 1), rw);
  float *recv = calloc((size_t)(recv_rows ? recv_rows : 1), rw);
  *back = NULL;
  if (!send || !recv) {
    free(send);
    free(recv);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "moe combine: %lld rows of %lld floats",
                         (long long)(send_rows + recv_rows), (long long)W);
  }
  for (int64_t i = 0; i < d->m; i++)
    memcpy(send + d->row_dst[i] * W, vals + i * W, rw);
  tpx_status st = tpx__moe_coll(
      d, gather ? TPX__MOE_SCATTER : TPX__MOE_A2A, send, recv,
      (size_t)((gather ? recv_rows : d->C) * W), TPX_DTYPE_F32, err);
  free(send);
  if (st == TPX_OK)
    *back = recv;
  else
    free(recv);
  return st;
}

tpx_status tpx__moe_in(const tpx__memspace *ms, const void *p, size_t bytes,
                       const void **h, void **owned, tpx_error *err) {
  *owned = NULL;
  *h = p;
  if (!tpx__ms_is_device(ms) || !bytes)
    return TPX_OK;
  void *c = malloc(bytes);
  if (!c)
    return tpx_error_set(err, TPX_NO_MEMORY, "moe: a host copy of %zu bytes",
                         bytes);
  tpx_status st = tpx__ms_copy(ms, c, p, bytes, TPX__D2H, err);
  if (st != TPX_OK) {
    free(c);
    return st;
  }
  *owned = c;
  *h = c;
  return TPX_OK;
}

tpx_status tpx__moe_out_buf(const tpx__memspace *ms, void *dst, size_t bytes,
                            void **h, void **owned, tpx_error *err) {
  *owned = NULL;
  *h = dst;
  if (!tpx__ms_is_device(ms) || !bytes)
    return TPX_OK;
  if (!(*owned = *h = malloc(bytes)))
    return tpx_error_set(err, TPX_NO_MEMORY, "moe: a host copy of %zu bytes",
                         bytes);
  return TPX_OK;
}

tpx_status tpx__moe_out(const tpx__memspace *ms, void *dst, void *owned,
                        size_t bytes, tpx_error *err) {
  if (!owned)
    return TPX_OK;
  tpx_status st = tpx__ms_copy(ms, dst, owned, bytes, TPX__H2D, err);
  free(owned);
  return st;
}
