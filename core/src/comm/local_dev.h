/* comm/local_dev.h — the local backend's collectives over device memory
 * (private; local_dev.c). Ranks are threads sharing one device; after the
 * rendezvous each rank works only through its memory space (its own
 * stream): D2D copies and the reduce kernel (device/kernels.h), reading
 * the other ranks' buffers by their device pointers. Each function does
 * one rank's share; local.c holds the rendezvous (publish, barrier,
 * agreement, the stream syncs around it). */
#ifndef TPX_COMM_LOCAL_DEV_H
#define TPX_COMM_LOCAL_DEV_H

#include <stddef.h>

#include "device/kernels.h"

/* The group's buffers as the ranks published them (device pointers). */
typedef struct tpx__ldev_peers {
  const tpx__memspace *ms; /* this rank's space */
  int me, n;               /* this rank, the group size */
  const void *const *sends;
  void *const *recvs;
} tpx__ldev_peers;

/* all_reduce: this rank reduces its share of the elements (an even split,
 * ceil(count / n) each) from every send and writes it into every recv, so
 * each element is reduced once, in rank order, and in-place calls are
 * safe (no rank writes what another still reads). */
tpx_status tpx__ldev_all_reduce(const tpx__ldev_peers *p, size_t count,
                                tpx_dtype dtype, tpx_reduce_op op,
                                tpx_error *err);
/* The others pull: this rank writes only its own recv. */
tpx_status tpx__ldev_reduce_scatter(const tpx__ldev_peers *p, size_t count,
                                    tpx_dtype dtype, tpx_reduce_op op,
                                    tpx_error *err);
tpx_status tpx__ldev_all_gather(const tpx__ldev_peers *p, size_t bytes,
                                tpx_error *err);
tpx_status tpx__ldev_broadcast(const tpx__ldev_peers *p, size_t bytes, int root,
                               tpx_error *err);
tpx_status tpx__ldev_all_to_all(const tpx__ldev_peers *p, size_t bytes,
                                tpx_error *err);

#endif /* TPX_COMM_LOCAL_DEV_H */
