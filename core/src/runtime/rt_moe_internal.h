/* runtime/rt_moe_internal.h — what the rt_moe_*.c files share
 * (tpx/runtime_moe.h): the dispatch object and its two transfers. Not for
 * other areas.
 *
 * A token's k choices are its slots, slot t·k + j. The dispatch keeps two
 * index maps, built once by tpx_moe_dispatch_create:
 *  - forward (owner -> expert rank): a buffer of token (or slot) rows is
 *    moved over ep (all-gather, or all-to-all in blocks of C rows per
 *    rank pair) and expert row i is row row_src[i] of what arrived;
 *  - return (expert rank -> owner): expert row i goes to row row_dst[i]
 *    of a zeroed buffer, which is reduce-scattered (all-gather: every
 *    slot has a row of its own, so the sum adds only zeros to it) or sent
 *    back all-to-all; slot s of this rank's tokens is then row
 *    slot_row[s] of what came back.
 * Expert rows are ordered by local expert, then by the source rank, then
 * by the token: the same rows in the same order under both dispatchers.
 * All index work is on the host; buffers of a device memory space are
 * staged through host copies (docs/RUNTIME.md "Mixture of experts"). */
#ifndef TPX_RUNTIME_RT_MOE_INTERNAL_H
#define TPX_RUNTIME_RT_MOE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/try.h"
#include "device/memspace.h"
#include "tpx/runtime_moe.h"

struct tpx_moe_dispatch {
  tpx_comm *ep;            /* NULL at ep 1 */
  const tpx__memspace *ms; /* the comm's memory space */
  int P, r;                /* group size and rank */
  tpx_moe_dispatcher kind;
  int64_t E, El, k, H, n;     /* El = E / P local experts */
  int64_t nmax;               /* all-gather: the largest n of the group */
  int64_t C;                  /* all-to-all: rows per rank pair (padded) */
  float *w;                   /* [n·k] this rank's routing weights */
  int64_t *slot_row;          /* [n·k] */
  int64_t *send_slot;         /* all-to-all: [P·C] slot of each sent row, -1 */
  int64_t m;                  /* expert rows on this rank */
  int64_t *offsets;           /* [El + 1] */
  int64_t *row_src, *row_dst; /* [m] */
  int32_t *row_j;             /* [m] all-gather: the row's j */
  float *row_w;               /* [m] the routing weight of each row */
  float *rows_host;           /* [m·H] */
  float *rows;                /* [m·H] in ms (rows_host on the host) */
  size_t bytes;
};

/* rt_moe_route.c: the router options' checks, messages starting with w. */
tpx_status tpx__moe_check_router(const tpx_moe_router_options *o, const char *w,
                                 tpx_error *err);

/* ---- rt_moe_xfer.c ---- */
typedef enum tpx__moe_op {
  TPX__MOE_GATHER = 0,  /* all_gather */
  TPX__MOE_SCATTER = 1, /* reduce_scatter, sum */
  TPX__MOE_A2A = 2,     /* all_to_all */
  TPX__MOE_MAX = 3,     /* all_reduce, max */
} tpx__moe_op;

/* One collective over d->ep on host buffers, `count` elements of dt as
 * tpx/comm.h counts them; staged through d->ms when it is a device space.
 * At ep 1 a copy. count 0: nothing (every rank has the same count). */
tpx_status tpx__moe_coll(const tpx_moe_dispatch *d, tpx__moe_op op,
                         const void *send, void *recv, size_t count,
                         tpx_dtype dt, tpx_error *err);

/* Forward: src (host) holds this rank's n token rows (per_slot: n·k slot
 * rows) of W floats; rows[m·W] (host) gets each expert row's. */
tpx_status tpx__moe_fwd(const tpx_moe_dispatch *d, const float *src, int64_t W,
                        int per_slot, float *rows, tpx_error *err);

/* Return: vals[m·W] (host) -> *back (malloc'd host, free it), in which
 * slot s of this rank's tokens is row slot_row[s]. */
tpx_status tpx__moe_ret(const tpx_moe_dispatch *d, const float *vals, int64_t W,
                        float **back, tpx_error *err);

/* A host view of `bytes` of a buffer p of ms: p itself on the host, else
 * a malloc'd copy in *owned (free it). */
tpx_status tpx__moe_in(const tpx__memspace *ms, const void *p, size_t bytes,
                       const void **h, void **owned, tpx_error *err);
/* Where to write an output dst of ms on the host: dst itself on the host,
 * else a malloc'd buffer in *owned that tpx__moe_out copies to dst and
 * frees. */
tpx_status tpx__moe_out_buf(const tpx__memspace *ms, void *dst, size_t bytes,
                            void **h, void **owned, tpx_error *err);
tpx_status tpx__moe_out(const tpx__memspace *ms, void *dst, void *owned,
                        size_t bytes, tpx_error *err);

/* ---- rt_moe_plan.c: the agreement and the index maps (collective) ----
 * tpx__moe_agree: one all-gather over ep of every rank's n, options,
 * verdict st on its own input and all-to-all block width; every rank then
 * returns the same verdict (*agreed = 1 once the exchange ran): its own
 * error, else a peer that refused its input or options that differ, named;
 * else OK with cnts[P] (each rank's n), d->nmax and d->C set. So one
 * rank's bad input fails the call on every rank and leaves the comm
 * usable. At ep 1 local. */
tpx_status tpx__moe_agree(tpx_moe_dispatch *d, tpx_status st, int64_t width,
                          int64_t *cnts, int *agreed, tpx_error *err);
tpx_status tpx__moe_plan_gather(tpx_moe_dispatch *d, const int32_t *ex,
                                const int64_t *cnts, tpx_error *err);
tpx_status tpx__moe_plan_a2a(tpx_moe_dispatch *d, const int32_t *ex,
                             tpx_error *err);

/* malloc(n * size) that counts into d->bytes; n 0 gives a 1-byte block. */
void *tpx__moe_alloc(tpx_moe_dispatch *d, size_t n, size_t size, int zero);

#endif /* TPX_RUNTIME_RT_MOE_INTERNAL_H */
