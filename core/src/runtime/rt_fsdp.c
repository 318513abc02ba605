/* runtime/rt_fsdp.c — FSDP2 on the runtime's unit buffers: unshard (one
 * all-gather of the unit's flat buffer over dp_shard, then copy-out into
 * TP-local tensors), prefetch, reshard, and gradient reduction
 * (reduce-scatter over dp_shard, all-reduce over dp_replicate, divide, tp
 * all-reduce of sequence-parallel partial gradients).
 * Under offload (tpx_runtime_options.offload) the shards are host memory:
 * the gather job copies the unit's shard H2D before casting and gathering,
 * and the reduced shard is copied D2H before it is added into the host
 * gradients.
 * Which rows of the TP-local piece dp rank b holds: tpx_layout_chunk, the
 * same split tpx_sharding_local_slice applies (rt_runtime.c checks this
 * rank's shard against it). */
#include <string.h>

#include "runtime/rt_internal.h"
#include "comm/comm_view.h"

/* Stop at the first failing memory-space op (st is the running status). */
#define MS(call)                                                               \
  do {                                                                         \
    if (st == TPX_OK)                                                          \
      st = (call);                                                             \
  } while (0)

static const char *phase_name(tpx_runtime_phase ph) {
  return ph == TPX_RUNTIME_BACKWARD ? "backward" : "forward";
}

/* Rows [*off, *off + *len) of p's TP-local piece (along its split dim)
 * held by index b of its unit's group (every rank holds all of a parameter
 * not split over it). */
static void block_rows(const tpx_runtime *rt, const tpx__rt_param *p, int64_t b,
                       int64_t *off, int64_t *len) {
  if (!p->dp_split) {
    *off = 0;
    *len = p->rows;
    return;
  }
  tpx_layout_chunk(p->rows, rt->units[p->unit].ws, b, off, len, NULL);
}

/* Copy rows [off, off + len) of each of p's `outer` slabs between a
 * contiguous [outer, len, row_numel] shard block `blk` and the unsharded
 * [outer, rows, row_numel] tensor `unsh` (to_unsh: blk -> unsh; else unsh
 * -> blk, converted from the compute to dtype `bdt`). The block is in the
 * compute dtype when to_unsh. */
static tpx_status copy_rows(const tpx__memspace *ms, const tpx__rt_param *p,
                            int64_t off, int64_t len, unsigned char *blk,
                            tpx_dtype bdt, unsigned char *unsh, int to_unsh,
                            tpx_error *err) {
  size_t csz = tpx_dtype_size(p->compute), bsz = tpx_dtype_size(bdt);
  size_t n = (size_t)(len * p->row_numel);
  tpx_status st = TPX_OK;
  for (int64_t o = 0; o < p->outer && n && st == TPX_OK; o++) {
    unsigned char *u =
        unsh + (size_t)((o * p->rows + off) * p->row_numel) * csz;
    unsigned char *b = blk + (size_t)o * n * bsz;
    st = to_unsh ? tpx__ms_copy(ms, u, b, n * csz, TPX__D2D, err)
                 : tpx__ms_convert(ms, b, bdt, u, p->compute, n, err);
  }
  return st;
}

static tpx_status check_unit(const tpx_runtime *rt, size_t unit,
                             const char *what, tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: runtime is NULL",
                         what);
  if (unit >= rt->num_units)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: unit %zu is outside 0..%zu", what, unit,
                         rt->num_units - 1);
  return TPX_OK;
}

static tpx_status check_phase_call(const tpx_runtime *rt, size_t unit,
                                   tpx_runtime_phase phase, const char *what,
                                   tpx_error *err) {
  tpx_status st = check_unit(rt, unit, what, err);
  if (st == TPX_OK && phase != TPX_RUNTIME_FORWARD &&
      phase != TPX_RUNTIME_BACKWARD)
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "%s: phase %d is neither forward nor backward", what,
                       (int)phase);
  return st;
}

/* ---- all-gather ---- */

static tpx_status gather_job(void *arg, tpx_error *err) {
  tpx__rt_unit *u = arg;
  tpx_runtime *rt = u->rt;
  const tpx__memspace *ms = rt->ms;
  tpx_status st = TPX_OK;
  const unsigned char *send = u->flat;
  if (u->dflat) { /* offload: the host shard to the device first */
    MS(tpx__ms_copy(ms, u->dflat, u->flat, u->flat_bytes, TPX__H2D, err));
    send = u->dflat;
  }
  if (u->cast_send) {
    for (size_t i = 0; i < u->count; i++) {
      const tpx__rt_param *p = &rt->params[u->first + i];
      MS(tpx__ms_convert(ms, (unsigned char *)u->send + p->cflat_off,
                         p->compute, send + p->flat_off, p->storage,
                         (size_t)p->padded, err));
    }
    send = u->send;
  }
  if (u->gcomm && u->ws > 1)
    MS(tpx_comm_all_gather(u->gcomm, send, u->stage, u->cflat_bytes,
                           TPX_DTYPE_U8, err));
  else
    MS(tpx__ms_copy(ms, u->stage, send, u->cflat_bytes, TPX__D2D, err));
  if (st != TPX_OK)
    return st;
  /* Copy-out: block b holds group rank b's padded shards. */
  for (int64_t b = 0; b < u->ws; b++) {
    unsigned char *blk = (unsigned char *)u->stage + (size_t)b * u->cflat_bytes;
    for (size_t i = 0; i < u->count; i++) {
      const tpx__rt_param *p = &rt->params[u->first + i];
      if (!p->dp_split && b > 0)
        continue;
      int64_t off, len;
      block_rows(rt, p, b, &off, &len);
      if (len > 0)
        MS(copy_rows(ms, p, off, len, blk + p->cflat_off, p->compute,
                     (unsigned char *)u->unsh + p->unsh_off, 1, err));
    }
  }
  return st;
}

void tpx__rt_free_unsharded(tpx_runtime *rt, tpx__rt_unit *u) {
  tpx__rt_free(rt, TPX_RUNTIME_MEM_GATHER, u->dflat, u->flat_bytes);
  tpx__rt_free(rt, TPX_RUNTIME_MEM_GATHER, u->send, u->cflat_bytes);
  tpx__rt_free(rt, TPX_RUNTIME_MEM_GATHER, u->stage,
               u->cflat_bytes * (size_t)u->ws);
  tpx__rt_free(rt, TPX_RUNTIME_MEM_GATHER, u->unsh, u->unsh_bytes);
  u->dflat = u->send = u->stage = u->unsh = NULL;
  u->state = TPX__RT_SHARDED;
}

/* Allocate the gather buffers and submit the unit's all-gather. */
static tpx_status start_gather(tpx_runtime *rt, size_t unit, tpx_error *err) {
  tpx__rt_unit *u = &rt->units[unit];
  /* Each is overwritten entirely by the gather job. */
  u->unsh = tpx__rt_alloc_raw(rt, TPX_RUNTIME_MEM_GATHER, u->unsh_bytes, 0);
  u->stage = tpx__rt_alloc_raw(rt, TPX_RUNTIME_MEM_GATHER,
                               u->cflat_bytes * (size_t)u->ws, 0);
  if (u->cast_send)
    u->send = tpx__rt_alloc_raw(rt, TPX_RUNTIME_MEM_GATHER, u->cflat_bytes, 0);
  if (rt->opts.offload)
    u->dflat = tpx__rt_alloc_raw(rt, TPX_RUNTIME_MEM_GATHER, u->flat_bytes, 0);
  if (!u->unsh || !u->stage || (u->cast_send && !u->send) ||
      (rt->opts.offload && !u->dflat)) {
    tpx__rt_free_unsharded(rt, u);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_unshard: out of memory gathering unit "
                         "%zu (%zu bytes)",
                         unit, u->unsh_bytes);
  }
  memset(&u->job, 0, sizeof u->job);
  u->job.fn = gather_job;
  u->job.arg = u;
  u->state = TPX__RT_INFLIGHT;
  tpx__rt_queue_submit(&rt->queue, &u->job);
  return TPX_OK;
}

/* Wait for the unit's gather in flight and release its staging. */
static tpx_status finish_gather(tpx_runtime *rt, size_t unit, tpx_error *err) {
  tpx__rt_unit *u = &rt->units[unit];
  if (u->state != TPX__RT_INFLIGHT)
    return TPX_OK;
  tpx_status st = tpx__rt_queue_wait(&rt->queue, &u->job, err);
  if (st != TPX_OK) {
    tpx__rt_free_unsharded(rt, u);
    return st;
  }
  tpx__rt_free(rt, TPX_RUNTIME_MEM_GATHER, u->dflat, u->flat_bytes);
  tpx__rt_free(rt, TPX_RUNTIME_MEM_GATHER, u->send, u->cflat_bytes);
  tpx__rt_free(rt, TPX_RUNTIME_MEM_GATHER, u->stage,
               u->cflat_bytes * (size_t)u->ws);
  u->dflat = u->send = u->stage = NULL;
  u->state = TPX__RT_UNSHARDED;
  return TPX_OK;
}

static tpx_status gather_unit(tpx_runtime *rt, size_t unit, tpx_error *err) {
  tpx__rt_unit *u = &rt->units[unit];
  if (u->state != TPX__RT_SHARDED)
    return TPX_OK;
  return start_gather(rt, unit, err);
}

static tpx_status clocked_runtime_unshard(tpx_runtime *rt, size_t unit,
                                          tpx_runtime_phase phase,
                                          tpx_error *err) {
  tpx_status st = check_phase_call(rt, unit, phase, "tpx_runtime_unshard", err);
  if (st != TPX_OK || !rt->fsdp)
    return st;
  tpx__rt_unit *u = &rt->units[unit];
  st = gather_unit(rt, unit, err);
  if (st == TPX_OK)
    st = finish_gather(rt, unit, err);
  if (st != TPX_OK)
    return st;
  if (phase == TPX_RUNTIME_BACKWARD && u->reduce_pending)
    st = tpx__rt_finish_reduces(rt, err); /* a second micro-batch */
  if (st != TPX_OK)
    return st;
  if (phase == TPX_RUNTIME_BACKWARD && !u->unsh_grad) {
    u->unsh_grad =
        tpx__rt_alloc(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->unsh_bytes);
    if (!u->unsh_grad)
      return tpx_error_set(err, TPX_NO_MEMORY,
                           "tpx_runtime_unshard: out of memory for the "
                           "unsharded gradients of unit %zu (%zu bytes)",
                           unit, u->unsh_bytes);
  }
  if (!rt->opts.prefetch)
    return TPX_OK;
  const int64_t *list = phase == TPX_RUNTIME_FORWARD ? u->fwd : u->bwd;
  size_t n = phase == TPX_RUNTIME_FORWARD ? u->num_fwd : u->num_bwd;
  for (size_t i = 0; i < n; i++) {
    if (list[i] < 0 || (size_t)list[i] >= rt->num_units)
      continue;
    st = gather_unit(rt, (size_t)list[i], err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

static tpx_status clocked_runtime_reshard(tpx_runtime *rt, size_t unit,
                                          tpx_runtime_phase phase,
                                          tpx_error *err) {
  tpx_status st = check_phase_call(rt, unit, phase, "tpx_runtime_reshard", err);
  if (st != TPX_OK || !rt->fsdp)
    return st;
  tpx__rt_unit *u = &rt->units[unit];
  st = finish_gather(rt, unit, err);
  if (st != TPX_OK)
    return st;
  if (phase == TPX_RUNTIME_FORWARD && !u->reshard_after_forward)
    return TPX_OK;
  if (u->unsh_grad && !u->reduce_pending)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_reshard: unit %zu still holds "
                         "unreduced unsharded gradients (call "
                         "tpx_runtime_reduce_grads before the %s reshard)",
                         unit, phase_name(phase));
  tpx__rt_free_unsharded(rt, u);
  return TPX_OK;
}

static tpx_status clocked_runtime_wait(tpx_runtime *rt, tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_wait: runtime is NULL");
  tpx_status first = tpx__rt_finish_reduces(rt, err);
  for (size_t u = 0; u < rt->num_units; u++) {
    tpx_status st = finish_gather(rt, u, err);
    if (first == TPX_OK)
      first = st;
  }
  return first;
}

/* ---- gradient reduction ---- */

static tpx_status reduce_job(void *arg, tpx_error *err) {
  tpx__rt_unit *u = arg;
  tpx_runtime *rt = u->rt;
  size_t rsz = tpx_dtype_size(u->reduce);
  const tpx__memspace *ms = rt->ms;
  tpx_status st = TPX_OK;
  for (int64_t b = 0; b < u->ws; b++) {
    unsigned char *blk =
        (unsigned char *)u->rstage + (size_t)b * u->rflat_bytes;
    for (size_t i = 0; i < u->count; i++) {
      const tpx__rt_param *p = &rt->params[u->first + i];
      int64_t off, len;
      block_rows(rt, p, b, &off, &len);
      size_t n = (size_t)(p->outer * len * p->row_numel);
      if (len > 0)
        MS(copy_rows(ms, p, off, len, blk + p->rflat_off, u->reduce,
                     (unsigned char *)u->unsh_grad + p->unsh_off, 0, err));
      if ((size_t)p->padded > n) /* FSDP2's padding reduces as zeros */
        MS(tpx__ms_memset(ms, blk + p->rflat_off + n * rsz, 0,
                          ((size_t)p->padded - n) * rsz, err));
    }
  }
  if (st != TPX_OK)
    return st;
  size_t count = u->rflat_bytes / rsz;
  if (u->gcomm && u->ws > 1)
    st = tpx_comm_reduce_scatter(u->gcomm, u->rstage, u->rout, count, u->reduce,
                                 TPX_REDUCE_SUM, err);
  else
    st = tpx__ms_copy(ms, u->rout, u->rstage, u->rflat_bytes, TPX__D2D, err);
  /* HSDP's dp_replicate, or ep_shard for replicated expert parameters */
  if (st == TPX_OK && u->rcomm && tpx_comm_size(u->rcomm) > 1)
    st = tpx_comm_all_reduce(u->rcomm, u->rout, u->rout, count, u->reduce,
                             TPX_REDUCE_SUM, err);
  return st;
}

/* tp all-reduce (sum) of the SP-partial parameters' reduced shards, in
 * place in `buf` (dtype dt, element offsets off_of(p)). */
static tpx_status tp_allreduce(tpx_runtime *rt, tpx__rt_unit *u, void *buf,
                               tpx_dtype dt, int use_grad_off, tpx_error *err) {
  tpx_comm *ct = tpx__rt_dim_comm(rt, rt->tp_dim);
  if (!ct || rt->tp <= 1)
    return TPX_OK;
  for (size_t i = 0; i < u->count; i++) {
    const tpx__rt_param *p = &rt->params[u->first + i];
    if (!p->grad_tp_allreduce)
      continue;
    size_t n = (size_t)p->shard_numel;
    unsigned char *at = use_grad_off ? (unsigned char *)buf +
                                           (size_t)p->grad_off * sizeof(float)
                                     : (unsigned char *)buf + p->rflat_off;
    tpx_status st = tpx_comm_all_reduce(ct, at, at, n, dt, TPX_REDUCE_SUM, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

/* FSDP off: DDP all-reduce over the dp dims, divide, tp all-reduce. */
static tpx_status reduce_plain(tpx_runtime *rt, tpx__rt_unit *u,
                               tpx_error *err) {
  size_t n = (size_t)u->grad_numel;
  tpx_status st = tpx__rt_all_reduce_dim(rt, rt->dps_dim, u->grad, n,
                                         TPX_DTYPE_F32, TPX_REDUCE_SUM, err);
  if (st == TPX_OK)
    st = tpx__rt_all_reduce_dim(rt, rt->dpr_dim, u->grad, n, TPX_DTYPE_F32,
                                TPX_REDUCE_SUM, err);
  if (st != TPX_OK)
    return st;
  if (rt->divide != 1.0 && n)
    st = tpx__ms_scale_f32(rt->ms, u->grad, n, (float)rt->divide, 1, err);
  if (st != TPX_OK)
    return st;
  return tp_allreduce(rt, u, u->grad, TPX_DTYPE_F32, 1, err);
}

/* Release a unit's reduce buffers and its unsharded gradients. */
static void free_reduce(tpx_runtime *rt, tpx__rt_unit *u) {
  tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->rstage,
               u->rflat_bytes * (size_t)u->ws);
  tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->rout, u->rflat_bytes);
  tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->unsh_grad,
               u->unsh_bytes);
  u->rstage = u->rout = u->unsh_grad = NULL;
  u->reduce_pending = 0;
}

/* Wait for unit u's reduction, then the tp part and the accumulation. */
static tpx_status finish_reduce(tpx_runtime *rt, tpx__rt_unit *u,
                                tpx_error *err) {
  if (!u->reduce_pending)
    return TPX_OK;
  tpx_status st = tpx__rt_queue_wait(&rt->queue, &u->rjob, err);
  if (st == TPX_OK)
    st = tp_allreduce(rt, u, u->rout, u->reduce, 0, err);
  /* Offload: the reduced shard comes back to the host, where the sharded
   * gradients accumulate (the same kernel, so the same bits). */
  const void *rout = u->rout;
  void *host = NULL;
  if (st == TPX_OK && rt->opts.offload) {
    host =
        tpx__rt_alloc_host(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->rflat_bytes);
    if (!host && u->rflat_bytes)
      st = tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_reduce_grads: out of host memory for "
                         "unit %zu's reduced gradients (%zu bytes)",
                         (size_t)(u - rt->units), u->rflat_bytes);
    if (st == TPX_OK)
      st = tpx__ms_copy(rt->ms, host, u->rout, u->rflat_bytes, TPX__D2H, err);
    rout = host;
  }
  if (st == TPX_OK) {
    float d = (float)u->divide;
    for (size_t i = 0; i < u->count && st == TPX_OK; i++) {
      const tpx__rt_param *p = &rt->params[u->first + i];
      size_t n = (size_t)p->shard_numel;
      if (n)
        st = tpx__ms_add_f32(tpx__rt_state_ms(rt), u->grad + p->grad_off,
                             (const unsigned char *)rout + p->rflat_off,
                             u->reduce, n, d, err);
    }
  }
  tpx__rt_free_host(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, host, u->rflat_bytes);
  free_reduce(rt, u);
  return st;
}

tpx_status tpx__rt_finish_reduces(tpx_runtime *rt, tpx_error *err) {
  tpx_status first = TPX_OK;
  for (size_t i = 0; i < rt->num_units; i++) {
    tpx_status st = finish_reduce(rt, &rt->units[i], err);
    if (first == TPX_OK)
      first = st;
  }
  return first;
}

static tpx_status clocked_runtime_reduce_grads(tpx_runtime *rt, size_t unit,
                                               tpx_error *err) {
  tpx_status st = check_unit(rt, unit, "tpx_runtime_reduce_grads", err);
  if (st != TPX_OK)
    return st;
  tpx__rt_unit *u = &rt->units[unit];
  if (!rt->fsdp)
    return reduce_plain(rt, u, err);
  if (!u->unsh_grad || u->reduce_pending)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_reduce_grads: unit %zu has no "
                         "unreduced unsharded gradients (unshard it with "
                         "TPX_RUNTIME_BACKWARD first)",
                         unit);
  /* At most one reduction in flight, as FSDP2: finish the previous one. */
  st = tpx__rt_finish_reduces(rt, err);
  if (st != TPX_OK)
    return st;
  /* Overwritten entirely by the reduce job (padding included). */
  u->rstage = tpx__rt_alloc_raw(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS,
                                u->rflat_bytes * (size_t)u->ws, 0);
  u->rout =
      tpx__rt_alloc_raw(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->rflat_bytes, 0);
  if (!u->rstage || !u->rout) {
    tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->rstage,
                 u->rflat_bytes * (size_t)u->ws);
    tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, u->rout, u->rflat_bytes);
    u->rstage = u->rout = NULL;
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_reduce_grads: out of memory for unit "
                         "%zu's reduce buffers",
                         unit);
  }
  memset(&u->rjob, 0, sizeof u->rjob);
  u->rjob.fn = reduce_job;
  u->rjob.arg = u;
  u->reduce_pending = 1;
  tpx__rt_queue_submit(&rt->queue, &u->rjob);
  if (!rt->queue.threaded)
    return finish_reduce(rt, u, err);
  return TPX_OK;
}

tpx_status tpx_runtime_zero_grads(tpx_runtime *rt, tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_zero_grads: runtime is NULL");
  /* clocked: the reductions still in flight (the zeroing is compute) */
  tpx__comm_clock *clk = tpx__mesh_comm_clock(rt->mc);
  double t0 = tpx__clock_enter(clk);
  tpx_status st = tpx__rt_finish_reduces(rt, err);
  tpx__clock_leave(clk, TPX__CLOCK_RUNTIME, t0);
  if (st != TPX_OK)
    return st;
  for (size_t i = 0; i < rt->num_units && st == TPX_OK; i++) {
    tpx__rt_unit *u = &rt->units[i];
    st = tpx__ms_memset(tpx__rt_state_ms(rt), u->grad, 0,
                        (size_t)u->grad_numel * sizeof(float), err);
    if (st == TPX_OK && rt->fsdp && u->unsh_grad)
      st = tpx__ms_memset(rt->ms, u->unsh_grad, 0, u->unsh_bytes, err);
  }
  return st;
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_runtime_unshard(tpx_runtime *rt, size_t unit,
                               tpx_runtime_phase phase, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_unshard(rt, unit, phase, err));
}

tpx_status tpx_runtime_reshard(tpx_runtime *rt, size_t unit,
                               tpx_runtime_phase phase, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_reshard(rt, unit, phase, err));
}

tpx_status tpx_runtime_reduce_grads(tpx_runtime *rt, size_t unit,
                                    tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_reduce_grads(rt, unit, err));
}

tpx_status tpx_runtime_wait(tpx_runtime *rt, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_wait(rt, err));
}
