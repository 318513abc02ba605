/* comm/local_dev.c — one rank's share of each local collective over device
 * memory (comm/local_dev.h): memory-space copies and the reduce kernel on
 * the rank's own stream, nothing dereferenced on the host. Results equal
 * the host path's byte for byte: the reduce kernel is tpx__reduce_into's
 * arithmetic with the sources in rank order. Not here: the rendezvous and
 * the stream syncs around it (local.c). */
#include "comm/local_dev.h"

#define AT(p, off) ((unsigned char *)(uintptr_t)(p) + (off))

tpx_status tpx__ldev_all_reduce(const tpx__ldev_peers *p, size_t count,
                                tpx_dtype dtype, tpx_reduce_op op,
                                tpx_error *err) {
  size_t es = tpx_dtype_size(dtype), per = (count + p->n - 1) / p->n;
  size_t lo = per * (size_t)p->me;
  if (lo >= count)
    return TPX_OK;
  size_t len = count - lo < per ? count - lo : per;
  const void *srcs[TPX__MS_MAX_PTRS];
  void *dsts[TPX__MS_MAX_PTRS];
  for (int j = 0; j < p->n; j++) {
    srcs[j] = AT(p->sends[j], lo * es);
    dsts[j] = AT(p->recvs[j], lo * es);
  }
  return tpx__ms_reduce(p->ms, dsts, p->n, srcs, p->n, len, dtype, op, p->n,
                        err);
}

tpx_status tpx__ldev_reduce_scatter(const tpx__ldev_peers *p, size_t count,
                                    tpx_dtype dtype, tpx_reduce_op op,
                                    tpx_error *err) {
  size_t es = tpx_dtype_size(dtype);
  const void *srcs[TPX__MS_MAX_PTRS];
  void *dst = p->recvs[p->me];
  for (int j = 0; j < p->n; j++)
    srcs[j] = AT(p->sends[j], (size_t)p->me * count * es);
  return tpx__ms_reduce(p->ms, &dst, 1, srcs, p->n, count, dtype, op, p->n,
                        err);
}

tpx_status tpx__ldev_all_gather(const tpx__ldev_peers *p, size_t bytes,
                                tpx_error *err) {
  tpx_status st = TPX_OK;
  for (int j = 0; j < p->n && st == TPX_OK; j++)
    st = tpx__ms_copy(p->ms, AT(p->recvs[p->me], (size_t)j * bytes),
                      p->sends[j], bytes, TPX__D2D, err);
  return st;
}

tpx_status tpx__ldev_broadcast(const tpx__ldev_peers *p, size_t bytes, int root,
                               tpx_error *err) {
  return tpx__ms_copy(p->ms, p->recvs[p->me], p->sends[root], bytes, TPX__D2D,
                      err);
}

tpx_status tpx__ldev_all_to_all(const tpx__ldev_peers *p, size_t bytes,
                                tpx_error *err) {
  tpx_status st = TPX_OK;
  for (int j = 0; j < p->n && st == TPX_OK; j++)
    st = tpx__ms_copy(p->ms, AT(p->recvs[p->me], (size_t)j * bytes),
                      AT(p->sends[j], (size_t)p->me * bytes), bytes, TPX__D2D,
                      err);
  return st;
}
