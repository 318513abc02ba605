/* runtime/rt_dim.c — the runtime's mesh dims: the communicator of each, which
 * are data-parallel, and an in-place all-reduce over one (on the comm
 * thread for dp dims, so it is ordered with the FSDP collectives there).
 * FSDP over a flattened view (dp_shard_cp) is one "dim" here: its first
 * mesh dim answers with the view's group, and the dims it joins carry no
 * shard of their own (their placement is Joined).
 * Not here: the FSDP collectives themselves (rt_fsdp.c). */
#include "runtime/rt_internal.h"

tpx_comm *tpx__rt_dim_comm(const tpx_runtime *rt, int dim) {
  if (dim >= 0 && dim == rt->dps_dim && rt->dps_comm)
    return rt->dps_comm;
  return dim < 0 ? NULL : tpx_mesh_comm_dim(rt->mc, dim);
}

int tpx__rt_dim_is_dp(const tpx_runtime *rt, int dim) {
  int in_view = rt->dps_dim >= 0 && dim >= rt->dps_dim &&
                dim < rt->dps_dim + (rt->dps_ndims > 1 ? rt->dps_ndims : 1);
  return dim >= 0 && (in_view || dim == rt->dpr_dim);
}

typedef struct ar_args {
  tpx_comm *comm;
  void *buf;
  size_t count;
  tpx_dtype dt;
  tpx_reduce_op op;
} ar_args;

static tpx_status ar_job(void *arg, tpx_error *err) {
  ar_args *a = arg;
  return tpx_comm_all_reduce(a->comm, a->buf, a->buf, a->count, a->dt, a->op,
                             err);
}

tpx_status tpx__rt_all_reduce_comm(tpx_runtime *rt, tpx_comm *c, int queued,
                                   void *buf, size_t count, tpx_dtype dt,
                                   tpx_reduce_op op, tpx_error *err) {
  if (!c || tpx_comm_size(c) <= 1)
    return TPX_OK;
  ar_args a = {c, buf, count, dt, op};
  if (queued)
    return tpx__rt_queue_run(&rt->queue, ar_job, &a, err);
  return ar_job(&a, err);
}

tpx_status tpx__rt_all_reduce_dim(tpx_runtime *rt, int dim, void *buf,
                                  size_t count, tpx_dtype dt, tpx_reduce_op op,
                                  tpx_error *err) {
  return tpx__rt_all_reduce_comm(rt, tpx__rt_dim_comm(rt, dim),
                                 tpx__rt_dim_is_dp(rt, dim), buf, count, dt, op,
                                 err);
}
