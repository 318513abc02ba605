/* runtime/rt_internal.h — the inside of tpx_runtime, shared by the rt_*.c
 * files: rt_runtime.c (create, queries), rt_buf.c (buffers and byte
 * accounting), rt_dim.c (mesh-dim communicators), rt_queue.c (the
 * comm thread), rt_fsdp.c (unshard, reshard,
 * prefetch, gradient reduction), rt_load.c (load / gather full tensors),
 * rt_norm.c (grad norm and clip), rt_adamw.c (AdamW), rt_hooks.c (module
 * names to units, the per-pass hooks), rt_ep.c (expert parallelism: the
 * MoE mesh's comms, the expert parameters and their units).
 * Not for other areas: they use tpx/runtime.h. */
#ifndef TPX_RUNTIME_RT_INTERNAL_H
#define TPX_RUNTIME_RT_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "device/kernels.h"
#include "tpx/runtime.h"

/* ---- the comm thread (rt_queue.c) ---- */

/* One piece of data-parallel work. Filled by the submitter, run once. */
typedef struct tpx__rt_job {
  tpx_status (*fn)(void *arg, tpx_error *err);
  void *arg;
  int done;      /* guarded by the queue mutex */
  tpx_status st; /* valid once done */
  tpx_error err; /* valid once done */
  struct tpx__rt_job *next;
} tpx__rt_job;

typedef struct tpx__rt_queue {
  int threaded; /* 0: jobs run inline at submit */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  tpx__rt_job *head, *tail;
  int stop;
} tpx__rt_queue;

tpx_status tpx__rt_queue_start(tpx__rt_queue *q, int threaded, tpx_error *err);
/* Drain, stop and join (no-op when never started). */
void tpx__rt_queue_stop(tpx__rt_queue *q);
/* Queue `job` (runs inline when not threaded). The job must stay alive
 * until tpx__rt_queue_wait returns for it. */
void tpx__rt_queue_submit(tpx__rt_queue *q, tpx__rt_job *job);
/* Wait for `job`; returns its status and copies its error into err. */
tpx_status tpx__rt_queue_wait(tpx__rt_queue *q, tpx__rt_job *job,
                              tpx_error *err);
/* submit + wait. */
tpx_status tpx__rt_queue_run(tpx__rt_queue *q,
                             tpx_status (*fn)(void *, tpx_error *), void *arg,
                             tpx_error *err);

/* ---- dtypes ---- */

/* 1 for the float dtypes the runtime stores and computes in (f32, bf16,
 * f16). The conversions themselves are memspace ops (device/memspace.h:
 * convert, add_f32), so they run where the buffers live. */
static inline int tpx__rt_dtype_ok(tpx_dtype dt) {
  return dt == TPX_DTYPE_F32 || dt == TPX_DTYPE_BF16 || dt == TPX_DTYPE_F16;
}

/* ---- the runtime ---- */

typedef enum tpx__rt_state {
  TPX__RT_SHARDED = 0,
  TPX__RT_INFLIGHT = 1, /* gather submitted, not waited */
  TPX__RT_UNSHARDED = 2,
} tpx__rt_state;

/* One (non-alias) parameter. Offsets are into its unit's buffers. */
typedef struct tpx__rt_param {
  int64_t index; /* model parameter index */
  size_t unit;
  tpx_dtype storage, compute, reduce;
  int ndim;
  int64_t local_shape[TPX_MAX_TENSOR_DIMS];
  int64_t local_numel;
  /* The local piece is [outer, rows, row_numel] around the dim FSDP splits
   * (split_dim: 0, or 1 for an expert parameter's Shard(1) over ep_shard);
   * a shard is [outer, shard_rows, row_numel], contiguous, its padding at
   * the end. */
  int split_dim;
  int64_t outer;       /* prod(local_shape[:split_dim]); 1 for split_dim 0 */
  int64_t rows;        /* local_shape[split_dim]; 1 for ndim 0 */
  int64_t row_numel;   /* prod(local_shape[split_dim+1:]); 1 for ndim 0 */
  tpx_slice global;    /* this rank's shard (tpx_sharding_local_slice) */
  tpx_slice tp_local;  /* the TP-local piece (dp dims replicated); for an
                          expert parameter the ep-local one (ep_shard
                          replicated): [E/ep, ...] */
  int64_t shard_rows;  /* rows of this rank's shard */
  int64_t shard_numel; /* outer * shard_rows * row_numel */
  int dp_split;        /* 1: split over its unit's group; 0: replicated */
  int moe;             /* on the MoE mesh (a routed-expert parameter) */
  unsigned moe_mask;   /* moe: bit 0 sharded over ep_shard, bit 1 over ep */
  int64_t padded;     /* per-rank padded numel (tpx_layout_fsdp_padded_numel) */
  size_t flat_off;    /* bytes into the storage flat buffer */
  size_t cflat_off;   /* bytes into one rank's compute-dtype gather block */
  size_t rflat_off;   /* bytes into one rank's reduce-dtype block */
  int64_t grad_off;   /* f32 elements into grad / optimizer state */
  int64_t master_off; /* f32 elements into the master buffer, -1: storage */
  size_t unsh_off;    /* bytes into the unsharded buffers */
  unsigned shard_mask; /* bit d: sharded over mesh dim d */
  int grad_tp_allreduce;
} tpx__rt_param;

typedef struct tpx__rt_unit {
  struct tpx_runtime *rt; /* back-pointer for the unit's jobs */
  size_t first, count;    /* range in rt->params */
  int reshard_after_forward;
  const int64_t *fwd, *bwd; /* borrowed from the sharding */
  size_t num_fwd, num_bwd;
  size_t flat_bytes;  /* storage flat buffer, per rank */
  size_t cflat_bytes; /* one rank's compute-dtype gather block */
  size_t rflat_bytes; /* one rank's reduce-dtype block */
  tpx_dtype reduce;   /* the unit's reduce dtype */
  /* The group the unit is sharded over: dp_shard (or its view) for the
   * sharding's units on the main mesh, ep_shard for an experts unit at
   * ep > 1, one rank for an expert unit of the runtime's own (rt_ep.c).
   * gcomm NULL when ws is 1. After the reduce-scatter the reduced shard is
   * all-reduced over rcomm when set (dp_replicate; ep_shard for expert
   * parameters replicated there) and divided by `divide`. */
  int moe;
  int64_t ws;
  tpx_comm *gcomm, *rcomm;
  double divide;
  int64_t module;       /* the module it wraps (-1: none known) */
  int64_t grad_numel;   /* f32 flat grad / optimizer state */
  int64_t master_numel; /* f32 master elements (0: all storage f32) */
  size_t unsh_bytes;    /* unsharded params (compute dtype) */
  int cast_send;        /* the gather block differs from storage */
  void *flat;
  float *master;
  float *grad;
  float *exp_avg, *exp_avg_sq;
  /* Unsharded state. */
  tpx__rt_state state;
  void *unsh;
  void *unsh_grad;
  void *send;  /* compute-dtype copy of the shard (cast_send) */
  void *dflat; /* offload: the shard copied to the device (flat_bytes) */
  void *stage; /* all-gather output, dps blocks */
  tpx__rt_job job;
  /* Gradient reduction in flight (submitted, finished at the next sync). */
  int reduce_pending;
  void *rstage; /* reduce-dtype blocks, dps of them */
  void *rout;   /* this rank's reduced block */
  tpx__rt_job rjob;
  /* The hooks (rt_hooks.c): a root unit (outside every module list) is
   * gathered when a pass begins and reduced when the backward ends; the
   * flags say what this pass did already. */
  int root;
  int fwd_done, bwd_done, reduced;
} tpx__rt_unit;

struct tpx_runtime {
  const tpx_sharding *sh;
  tpx_mesh_comm *mc;
  /* The world comm's memory space: every buffer below (flat, master, grad,
   * optimizer state, gather / reduce buffers, caches) is allocated, moved
   * and computed on through it, never dereferenced here. */
  const tpx__memspace *ms;
  tpx_runtime_options opts;
  int64_t rank;
  int ndim; /* mesh dims */
  int tp_dim, dps_dim, dpr_dim;
  int64_t tp, dps, dpr;
  int64_t dps_index; /* this rank's index along dp_shard (or dp_shard_cp) */
  /* FSDP over a flattened view (dp_shard_cp = dp_shard x cp): it spans
   * dps_ndims mesh dims from dps_dim, and dps_comm (owned) is its group,
   * which tpx__rt_dim_comm answers for dps_dim; NULL for a real dim. */
  int dps_ndims;
  tpx_comm *dps_comm;
  int fsdp;
  double divide;
  /* Expert parallelism (rt_ep.c): ep and ep_shard (1 and 1 at ep 1), the
   * comms of the MoE mesh's dims (owned; NULL at ep 1), the divisor of the
   * expert gradients, and how many of the units are the sharding's FSDP
   * units (the rest are the runtime's own expert units). */
  int64_t ep, ep_shard;
  tpx_comm *ep_comm, *eps_comm;
  double expert_divide;
  size_t num_fsdp_units;
  /* The modules holding expert parameters that are in no FSDP unit (ep =
   * world, or FSDP over one rank), each a runtime unit of its own after
   * the FSDP units (owned). */
  int64_t *ep_modules;
  size_t num_ep_modules;
  size_t num_params;   /* model parameters (aliases included) */
  int64_t *param_slot; /* [num_params] index in params (aliases: target's) */
  tpx__rt_param *params;
  size_t num_rt_params;
  tpx__rt_unit *units;
  size_t num_units;
  int64_t steps;
  tpx__rt_queue queue;
  int64_t cur[TPX_RUNTIME_MEM_TOTAL + 1];
  int64_t peak[TPX_RUNTIME_MEM_TOTAL + 1];
  /* Freed transient buffers kept for reuse (cache_buffers). */
  struct tpx__rt_block {
    void *p;
    size_t bytes;
  } * cache;
  size_t ncache, cache_cap;
  int64_t cached_bytes;
  /* Of cur[TOTAL]: bytes in host memory outside rt->ms (offload); peaks of
   * the host and the rt->ms parts. */
  int64_t host_cur, host_peak, dev_peak;
  /* The hooks (rt_hooks.c): the unit each unit's module heads (-1 for
   * other modules), the root units in forward order, the open pass. */
  int64_t *unit_at;
  size_t num_modules;
  size_t *root_units;
  size_t num_root;
  int pass;
};

/* ---- buffers (rt_buf.c) ---- */

/* Zeroed allocation / free in rt->ms with byte accounting (compute thread
 * only). NULL on OOM.
 * GATHER and UNSHARDED_GRADS buffers go through the cache when
 * cache_buffers is on: free keeps them, alloc reuses one of the same size
 * (zeroed again). */
void *tpx__rt_alloc(tpx_runtime *rt, tpx_runtime_mem_kind kind, size_t bytes);
/* The same; zero = 0 leaves a reused buffer's contents as they were (for
 * buffers the caller overwrites entirely). */
void *tpx__rt_alloc_raw(tpx_runtime *rt, tpx_runtime_mem_kind kind,
                        size_t bytes, int zero);
void tpx__rt_free(tpx_runtime *rt, tpx_runtime_mem_kind kind, void *p,
                  size_t bytes);
/* Free the cached buffers (destroy). */
void tpx__rt_release_cache(tpx_runtime *rt);

/* ---- offload (rt_buf.c; tpx_runtime_options.offload) ---- */

/* The space of the sharded state (PARAMS, GRADS, OPTIMIZER buffers): host
 * memory under offload, else rt->ms. The buffers above are allocated
 * there by kind; GATHER and UNSHARDED_GRADS are always in rt->ms. */
const tpx__memspace *tpx__rt_state_ms(const tpx_runtime *rt);
/* The copy kind that moves the sharded state into rt->ms (H2D under
 * offload, else D2D). */
tpx__copy_kind tpx__rt_state_to_ms(const tpx_runtime *rt);
/* A host staging buffer (not cached, not zeroed) counted under `kind`
 * and as host bytes; NULL on OOM. And its free (NULL: no-op). */
void *tpx__rt_alloc_host(tpx_runtime *rt, tpx_runtime_mem_kind kind,
                         size_t bytes);
void tpx__rt_free_host(tpx_runtime *rt, tpx_runtime_mem_kind kind, void *p,
                       size_t bytes);

/* ---- mesh dims (rt_dim.c) ---- */

/* The communicator of mesh dim `dim` (NULL when the mesh has none); for
 * FSDP's dim, its whole view (dp_shard_cp), so the FSDP collectives, the
 * grad norm and full-tensor gathers reduce over the view's ranks. */
tpx_comm *tpx__rt_dim_comm(const tpx_runtime *rt, int dim);
/* 1 when `dim` is a data-parallel dim (its collectives go to the queue);
 * the dims a flattened FSDP view joins (cp) are. */
int tpx__rt_dim_is_dp(const tpx_runtime *rt, int dim);
/* All-reduce `count` elements of buf in place over mesh dim `dim`, on the
 * comm thread for dp dims, inline for others. */
tpx_status tpx__rt_all_reduce_dim(tpx_runtime *rt, int dim, void *buf,
                                  size_t count, tpx_dtype dt, tpx_reduce_op op,
                                  tpx_error *err);
/* All-reduce in place over `c` (NULL or size 1: no-op), on the comm
 * thread when `queued` (a comm the unit jobs use), else inline. */
tpx_status tpx__rt_all_reduce_comm(tpx_runtime *rt, tpx_comm *c, int queued,
                                   void *buf, size_t count, tpx_dtype dt,
                                   tpx_reduce_op op, tpx_error *err);

/* ---- expert parallelism (rt_ep.c) ---- */

/* The MoE mesh's comms and the expert divisor (create, before build);
 * TPX_UNSUPPORTED for ep > 1 without FSDP units. */
tpx_status tpx__rt_ep_init(tpx_runtime *rt, tpx_error *err);
/* Fill an expert parameter's shapes and slices (describe_param's MoE
 * half; dtypes are set by the caller). */
tpx_status tpx__rt_ep_describe(tpx_runtime *rt, int64_t index,
                               const tpx_param_info *info, tpx__rt_param *p,
                               tpx_error *err);
/* The runtime unit of an expert parameter outside every FSDP unit: its
 * module's (rt->num_fsdp_units + k, k its index in rt->ep_modules); -1
 * for others. */
int64_t tpx__rt_ep_extra_unit(const tpx_runtime *rt, int64_t param);
/* The group, replicas and divisor of unit u (create, after its params). */
void tpx__rt_ep_unit_groups(tpx_runtime *rt, size_t u);
/* An expert gradient's all-reduce over the MoE mesh dims in `mask`. */
tpx_status tpx__rt_ep_reduce_mask(tpx_runtime *rt, unsigned mask, void *buf,
                                  size_t count, tpx_dtype dt, tpx_reduce_op op,
                                  tpx_error *err);

/* ---- parameters (rt_runtime.c) ---- */

/* Look up parameter `param` (alias -> target); NULL + error when bad. */
tpx__rt_param *tpx__rt_lookup(const tpx_runtime *rt, int64_t param,
                              const char *what, tpx_error *err);
/* Pointer to the f32 master of p. */
float *tpx__rt_master(const tpx_runtime *rt, const tpx__rt_param *p);
/* Free the unit's gather buffers and unsharded params (not grads). */
void tpx__rt_free_unsharded(tpx_runtime *rt, tpx__rt_unit *u);
/* Finish every gradient reduction in flight (in unit order): wait for its
 * dp collectives, run its tp all-reduce, add into the sharded gradients.
 * Every public call that reads or writes sharded gradients calls it first,
 * so all ranks finish reductions at the same points of the program. */
tpx_status tpx__rt_finish_reduces(tpx_runtime *rt, tpx_error *err);

/* ---- hooks (rt_hooks.c) ---- */

/* The module -> unit map and the root units (create, after the units). */
tpx_status tpx__rt_hooks_init(tpx_runtime *rt, tpx_error *err);
void tpx__rt_hooks_free(tpx_runtime *rt);

#endif /* TPX_RUNTIME_RT_INTERNAL_H */
