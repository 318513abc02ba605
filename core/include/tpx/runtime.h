/* tpx/runtime.h — the runtime object: one rank's parameters, gradients and
 * optimizer state under a sharding, and the FSDP2 collectives that move them
 * (unshard / reshard / prefetch / gradient reduction), the global gradient
 * norm and clip, and AdamW on the sharded buffers.
 *
 * A tpx_runtime is bound to one tpx_sharding (model + plan + mesh), one
 * tpx_mesh_comm (its backend) and one rank (the rank of the mesh comm's
 * world). It is used by one thread at a time (the rank's thread).
 *
 * Storage. For every FSDP unit (tpx/fsdp.h) this rank holds ONE flat buffer
 * of its parameters' shards, in unit order: each parameter is first cut to
 * its TP-local piece, then that piece is split on dim 0 over dp_shard
 * (torch.chunk rule) and padded to the full chunk as FSDP2 pads
 * (tpx_layout_fsdp_padded_numel), so a unit's all-gather is one collective
 * over dp_shard (for TP-then-FSDP params this is the strided layout FSDP2
 * calls _StridedShard). Gradients have the same layout (always f32). The
 * global slice of every shard comes from tpx_sharding_local_slice. A tied
 * parameter (tpx_param_info.tied_to) is the same storage as its target.
 *
 * Dtypes. Storage dtype = tpx_runtime_options.storage_dtype, or the model's
 * dtype of each parameter when INVALID (f32, bf16 and f16 are supported).
 * Compute (unsharded) dtype and gradient reduce dtype follow the sharding's
 * MixedPrecisionPolicy (tpx_sharding_mp_policy) with FSDP2's clearing rules
 * applied to the storage dtype (tpx_fsdp_param_dtypes); parameters the
 * sharding keeps in fp32 use its tpx_param_sharding dtypes. When storage is
 * not f32 the runtime keeps an f32 master copy of the shards; the optimizer
 * updates the master and rounds it into storage. Sharded gradients are f32.
 * Without FSDP the storage must be f32 and compute = storage.
 *
 * FSDP off (tpx_sharding_num_fsdp_units == 0, e.g. a tp-only mesh): one
 * pseudo-unit (index 0) holds every parameter; unshard / reshard are no-ops
 * and the unsharded pointers are the TP-local tensors themselves (storage
 * dtype). If the mesh nevertheless has data-parallel ranks, reduce_grads
 * averages the gradients over them with an all-reduce (DDP).
 *
 * Threads and overlap. With the `local` backend a comm thread owned by the
 * runtime runs every data-parallel collective (dp_shard, dp_replicate) in
 * issue order, so prefetched all-gathers overlap compute; tensor-parallel
 * collectives stay on the calling thread. With `mpi` the same holds when
 * the program initialised MPI with MPI_THREAD_MULTIPLE itself; otherwise
 * (tpx_comm_create_mpi asks MPI_THREAD_FUNNELED only), and always with
 * `nccl`, every collective runs synchronously on the calling thread and a
 * "prefetch" is an eager synchronous all-gather: results are identical,
 * there is just no overlap. tpx_runtime_is_async says which applies.
 *
 * A trainer's step (every rank runs the same calls in the same order; the
 * module hooks below make these unit calls for a trainer that names its
 * modules instead):
 *
 *   tpx_runtime_zero_grads(rt, err);
 *   for each unit u in forward order (root first, then layers):
 *     tpx_runtime_unshard(rt, u, TPX_RUNTIME_FORWARD, err);  // + prefetch
 *     ... forward of the unit's modules on tpx_runtime_param().unsharded ...
 *     tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, err);  // if flagged
 *   for each unit u in backward order:
 *     tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, err); // grads zeroed
 *     ... backward, accumulating into .unsharded_grad ...
 *     tpx_runtime_reduce_grads(rt, u, err);   // reduce-scatter + HSDP + SP
 *     tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, err);
 *   tpx_runtime_grad_norm(rt, 2.0, &norm, err);
 *   tpx_runtime_clip_grads(rt, max_norm, norm, err);
 *   tpx_runtime_adamw_step(rt, &adamw, err);
 *
 * Buffers live in the world communicator's memory space
 * (tpx_comm_memspace): host memory on local and mpi, CUDA device memory on
 * nccl (every pointer in tpx_runtime_param_info is then a device pointer).
 * The comm path never reads a buffer to decide what to do (sizes come from
 * shapes and layouts); copies, casts, the norm, clip and AdamW run as that
 * space's copies and kernels. The caller's full tensors of load_param /
 * gather_* stay host memory. On nccl the runtime runs synchronously (no
 * comm thread). docs/RUNTIME.md "Device memory" has the details. With
 * tpx_runtime_options.offload the sharded state lives in host memory
 * instead (docs/RUNTIME.md "CPU offload").
 *
 * Not here: TP activation transitions and vocab-parallel math
 * (tpx/runtime_tp.h), the checkpoint reader itself (tpx/checkpoint.h). */
#ifndef TPX_RUNTIME_H
#define TPX_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/comm.h"
#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/fsdp.h"
#include "tpx/layout.h"
#include "tpx/runtime_tp.h"
#include "tpx/sharding.h"
#include "tpx/tensor.h"

TPX_BEGIN_DECLS

typedef struct tpx_runtime tpx_runtime;
/* tpx/checkpoint.h's reader (C11 allows the repeated typedef) */
typedef struct tpx_checkpoint_reader tpx_checkpoint_reader;

typedef struct tpx_runtime_options {
  size_t struct_size;
  /* 1 (default): issue the unit's prefetch list (tpx_fsdp_unit fwd/bwd
   * lists) on every unshard; 0: gather each unit only when it is unsharded. */
  int prefetch;
  /* 1 (default): run data-parallel collectives on a comm thread when the
   * backend allows (see the top comment); 0: always on the calling thread. */
  int async;
  /* Dtype of the sharded parameters; INVALID (default) = the model's. */
  tpx_dtype storage_dtype;
  /* Gradients are divided by this after the data-parallel reduction; 0
   * (default) = dp_shard x dp_replicate, as FSDP2 does. */
  double grad_divide_factor;
  /* 1 (default): keep the buffers freed by reshard / reduce_grads for
   * reuse by the next unshard / reduce of the same size (a caching
   * allocator, as torch's: no page faults every step); they are released
   * at destroy. tpx_runtime_allocated_bytes counts buffers in use only;
   * tpx_runtime_cached_bytes the cached ones. 0: free them at once. */
  int cache_buffers;
  /* 1: FSDP2's CPUOffloadPolicy. The sharded parameters (and f32
   * masters), sharded gradients and AdamW state live in host memory
   * instead of the comm's memory space; unshard copies the unit's shard
   * to the device (H2D) before its all-gather, reduce_grads copies the
   * reduced gradient shard back (D2H) and accumulates it on the host, and
   * the grad norm, clip and AdamW run on the host. The unsharded
   * parameters and gradients and every collective stay on the device.
   * The pointers sharded / master / sharded_grad of
   * tpx_runtime_param_info are then host memory. Needs FSDP on
   * (TPX_UNSUPPORTED otherwise). 0 (default): everything in the comm's
   * space. Results are bit-identical either way (docs/RUNTIME.md
   * "CPU offload"). */
  int offload;
  /* Expert parameters' gradients (ep > 1) are divided by this after their
   * reduction; 0 (default) = grad_divide_factor x world / (dp_shard x
   * dp_replicate), i.e. the world size with the default grad_divide_factor,
   * as NeMo Automodel 0.7.0 scales them (docs/RUNTIME.md "Expert
   * parallelism"). Added after offload: an older, shorter struct_size
   * means 0. */
  double expert_grad_divide_factor;
} tpx_runtime_options;

#define TPX_RUNTIME_OPTIONS_INIT                                               \
  { sizeof(tpx_runtime_options), 1, 1, TPX_DTYPE_INVALID, 0.0, 1, 0, 0.0 }

/* Which pass an unshard / reshard belongs to. */
typedef enum tpx_runtime_phase {
  TPX_RUNTIME_FORWARD = 0,
  TPX_RUNTIME_BACKWARD = 1,
} tpx_runtime_phase;

/* Memory kinds for tpx_runtime_allocated_bytes / tpx_runtime_peak_bytes. */
typedef enum tpx_runtime_mem_kind {
  TPX_RUNTIME_MEM_PARAMS = 0,    /* sharded flat param buffers (padded) +
                                    f32 masters when storage is not f32 */
  TPX_RUNTIME_MEM_GRADS = 1,     /* sharded flat grad buffers (padded, f32) */
  TPX_RUNTIME_MEM_OPTIMIZER = 2, /* AdamW exp_avg + exp_avg_sq (f32, padded) */
  TPX_RUNTIME_MEM_GATHER = 3,    /* unsharded params + all-gather staging of
                                    units unsharded or in flight */
  TPX_RUNTIME_MEM_UNSHARDED_GRADS = 4, /* unsharded grads + reduce staging */
  TPX_RUNTIME_MEM_TOTAL = 5,           /* the sum of the above */
} tpx_runtime_mem_kind;

/* What this rank holds of one parameter. Pointers are borrowed from the
 * runtime. A tied alias reports its target (param = the target index). */
typedef struct tpx_runtime_param_info {
  int64_t param;           /* parameter index (a tied alias -> its target) */
  int64_t unit;            /* runtime unit (FSDP unit; 0 when FSDP is off) */
  tpx_dtype storage_dtype; /* dtype of `sharded` */
  tpx_dtype compute_dtype; /* dtype of `unsharded` and `unsharded_grad` */
  tpx_dtype reduce_dtype;  /* dtype of the data-parallel reduction */
  int ndim;
  /* This rank's shard: an unpadded view into the unit's flat buffer, shape
   * sharded_shape (row-major). Never NULL, even when empty (numel 0). */
  void *sharded;
  float *master;       /* f32 master of the shard (== sharded when f32) */
  float *sharded_grad; /* f32 gradient of the shard, same shape */
  int64_t sharded_shape[TPX_MAX_TENSOR_DIMS];
  int64_t sharded_numel;
  tpx_slice global; /* tpx_sharding_local_slice of this rank */
  /* The TP-local (unsharded over dp) tensor. */
  int64_t local_shape[TPX_MAX_TENSOR_DIMS];
  int64_t local_numel;
  tpx_slice tp_local;    /* the global slice the TP-local tensor covers */
  void *unsharded;       /* compute dtype; NULL while the unit is sharded */
  void *unsharded_grad;  /* compute dtype; NULL unless unsharded for backward */
  int grad_tp_allreduce; /* 1: reduce_grads all-reduces it over tp (SP) */
} tpx_runtime_param_info;

/* A new runtime for this rank (the rank of tpx_mesh_comm_world(mc)). The
 * sharding and mc are borrowed and must outlive the runtime; their meshes
 * must have the same dims and sizes. Not collective. Parameters and
 * gradients are allocated zeroed. opts may be NULL (defaults). Errors:
 * TPX_INVALID_ARGUMENT (NULL, mesh mismatch), TPX_UNSUPPORTED naming a
 * parameter whose dtype is not f32 / bf16 / f16 or a sharding with expert
 * parallelism and FSDP off, TPX_NO_MEMORY. At ep > 1 it is collective
 * over the world (it splits the ep and ep_shard comms from it). */
TPX_API tpx_status tpx_runtime_create(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                      const tpx_runtime_options *opts,
                                      tpx_runtime **out, tpx_error *err);
/* Waits for the comm thread and frees everything. NULL is a no-op. */
TPX_API void tpx_runtime_destroy(tpx_runtime *rt);

TPX_API const tpx_sharding *tpx_runtime_sharding(const tpx_runtime *rt);
TPX_API tpx_mesh_comm *tpx_runtime_mesh_comm(const tpx_runtime *rt);
/* Mesh rank of this runtime; -1 for NULL. */
TPX_API int64_t tpx_runtime_rank(const tpx_runtime *rt);
/* 1 when FSDP units exist (the sharding has FSDP on). */
TPX_API int tpx_runtime_fsdp_enabled(const tpx_runtime *rt);
/* 1 when data-parallel collectives run on the comm thread. */
TPX_API int tpx_runtime_is_async(const tpx_runtime *rt);
/* Number of runtime units: the FSDP units (plus, at ep > 1, one per module
 * holding expert parameters that are in no FSDP unit: see "Expert
 * parallelism" below), or 1 when FSDP is off. */
TPX_API size_t tpx_runtime_num_units(const tpx_runtime *rt);
/* Unit of a parameter (tied alias -> its target's); -1 when out of range. */
TPX_API int64_t tpx_runtime_param_unit(const tpx_runtime *rt, int64_t param);
/* 1 while unit is unsharded (gathered, or always when FSDP is off). */
TPX_API int tpx_runtime_unit_is_unsharded(const tpx_runtime *rt, size_t unit);

/* Fill *out for parameter `param` (TPX_OUT_OF_RANGE naming the index). */
TPX_API tpx_status tpx_runtime_param(const tpx_runtime *rt, int64_t param,
                                     tpx_runtime_param_info *out,
                                     tpx_error *err);

/* ---- loading and gathering --------------------------------------------- */

/* Copy this rank's shard of parameter `param` out of `full` (the whole
 * tensor, global shape, row-major, in `dtype`: f32, bf16 or f16; host
 * memory on every backend), converted to the storage dtype (and the
 * master). Not collective. The parameter's
 * unit must be sharded (FSDP on): TPX_INVALID_ARGUMENT otherwise. */
TPX_API tpx_status tpx_runtime_load_param(tpx_runtime *rt, int64_t param,
                                          const void *full, tpx_dtype dtype,
                                          tpx_error *err);
/* Read this rank's shard of every parameter from a Hugging Face
 * safetensors checkpoint (`path`: a .safetensors file, its
 * model.safetensors.index.json, or their directory) through the
 * checkpoint reader (tpx/checkpoint.h): only this rank's bytes are read,
 * converted from the stored dtype to the storage dtype (f32 masters get the
 * f32 conversion). Every parameter must be stored (a tied alias through its
 * target); shapes must match the model. Not collective. Every unit must be
 * sharded (FSDP on): TPX_INVALID_ARGUMENT otherwise. Errors from the reader
 * name the file and tensor at fault; on error the shards hold partial data. */
TPX_API tpx_status tpx_runtime_load_safetensors(tpx_runtime *rt,
                                                const char *path,
                                                tpx_error *err);
/* tpx_runtime_load_safetensors through a reader the caller opened
 * (tpx_checkpoint_reader_create), which it keeps: several ranks' runtimes
 * (threads of one process) may read through one reader at once, so a
 * checkpoint is opened once, not once per rank. Same rules and errors. */
TPX_API tpx_status tpx_runtime_load_checkpoint(tpx_runtime *rt,
                                               const tpx_checkpoint_reader *rd,
                                               tpx_error *err);
/* Collective over the whole mesh: every rank gets the full parameter (from
 * the f32 masters) / full sharded gradient in `full` (host memory on every
 * backend; global shape, dtype f32, bf16 or f16). For tests and
 * checkpoints; not a hot path. */
TPX_API tpx_status tpx_runtime_gather_param(tpx_runtime *rt, int64_t param,
                                            void *full, tpx_dtype dtype,
                                            tpx_error *err);
TPX_API tpx_status tpx_runtime_gather_grad(tpx_runtime *rt, int64_t param,
                                           void *full, tpx_dtype dtype,
                                           tpx_error *err);

/* ---- FSDP2 -------------------------------------------------------------- */

/* Collective over dp_shard (all ranks call it in the same order). Make unit
 * `unit` unsharded: wait for its prefetch if one is in flight, else
 * all-gather its flat buffer over dp_shard (one collective, compute dtype)
 * and copy it out into per-parameter TP-local tensors. Then issue the
 * prefetch of the unit's forward (phase FORWARD, depth 1) or backward
 * (BACKWARD, depth 2) list. In phase BACKWARD the unit's unsharded
 * gradients are allocated zeroed (if not already). No-op gather when the
 * unit is already unsharded (reshard_after_forward false). */
TPX_API tpx_status tpx_runtime_unshard(tpx_runtime *rt, size_t unit,
                                       tpx_runtime_phase phase, tpx_error *err);
/* Free the unit's unsharded parameters: in phase FORWARD only when the
 * unit's reshard_after_forward is set, in BACKWARD always (after
 * reduce_grads; unreduced unsharded gradients are an error). Not collective.
 * Waits for a prefetch of the unit in flight. No-op with FSDP off. */
TPX_API tpx_status tpx_runtime_reshard(tpx_runtime *rt, size_t unit,
                                       tpx_runtime_phase phase, tpx_error *err);
/* Reduce the unit's unsharded gradients: cast to the reduce dtype,
 * reduce-scatter (sum) over dp_shard, all-reduce (sum) over dp_replicate
 * (HSDP), divide by the divide factor (dp_shard x dp_replicate), all-reduce
 * (sum) over tp the parameters replicated over tp whose gradient is
 * partial under sequence parallelism (grad_tp_allreduce), and ADD the result
 * into the sharded f32 gradients (accumulation across micro-batches); then
 * free the unsharded gradients. Collective over dp and tp.
 * Overlap, as FSDP2: with a comm thread the call returns once the dp part is
 * queued, and the reduction is finished (tp part, accumulation, free) at
 * the next sync point — the next reduce_grads (one in flight at a time),
 * unshard(BACKWARD) of a unit with one pending, wait, zero_grads,
 * grad_norm, clip_grads, gather_grad, adamw_step. Read sharded_grad
 * directly only after tpx_runtime_wait. Without a comm thread it completes
 * before returning. With FSDP off: the DDP all-reduce over the dp dims (if
 * any) and the tp all-reduce, in place on the gradients, synchronously
 * (call it once per step). TPX_INVALID_ARGUMENT when the unit has no
 * unreduced unsharded gradients (not unsharded in phase BACKWARD). */
TPX_API tpx_status tpx_runtime_reduce_grads(tpx_runtime *rt, size_t unit,
                                            tpx_error *err);
/* Wait for every data-parallel collective in flight and finish pending
 * gradient reductions (collective when reductions are pending). */
TPX_API tpx_status tpx_runtime_wait(tpx_runtime *rt, tpx_error *err);
/* Zero the sharded gradients (and any live unsharded gradients). Local. */
TPX_API tpx_status tpx_runtime_zero_grads(tpx_runtime *rt, tpx_error *err);

/* ---- FSDP2 module hooks (the runtime keeps the unit bookkeeping) -------- */

/* The calls above take unit indices and leave the "which unit, has it been
 * gathered this pass, is it reduced yet" questions to the caller. The calls
 * below answer them inside, as FSDP2's hooks on fully_shard modules do: a
 * trainer names the module it is about to run (its full dotted name, as
 * tpx_model_find_module takes it) and the runtime finds its unit (the
 * nearest enclosing FSDP unit module, else the root's; the one pseudo-unit
 * when FSDP is off). A step:
 *
 *   tpx_runtime_zero_grads(rt, err);
 *   tpx_runtime_forward_begin(rt, err);   // root units gathered
 *   for each layer: pre_forward("model.layers.3") ... post_forward(same)
 *   tpx_runtime_backward_begin(rt, err);  // ends the forward
 *   for each layer, last first:
 *     pre_backward("model.layers.3") ... post_backward(same)
 *   tpx_runtime_backward_end(rt, err);    // root units reduced, all freed
 *
 * Root units are the units outside every module list (tpx_fsdp_unit.group
 * < 0): the root (final norm, tied embeddings) and the untied input and
 * output embeddings' own units. They are unsharded (with their prefetch)
 * when a pass begins, in forward order (the order of their first
 * parameters) for the forward and the reverse for the backward, stay
 * gathered from the forward through the backward, and are reduced and
 * resharded at backward_end; hooks on their modules are no-ops.
 * Idempotence: a unit is unsharded once per forward and once per backward
 * (prefetch included) and its gradients reduced once per backward, however
 * many of its modules call the hooks. Every rank must make the same calls in
 * the same order (they are collective as the unit calls they make are).
 * The model itself (module "", FSDP2's root module) opens and closes the
 * passes: pre_forward("") is forward_begin, post_forward("") forward_end,
 * pre_backward("") backward_begin and post_backward("") backward_end, so a
 * trainer may wrap its whole model in hooks as it wraps each layer.
 * Activation checkpointing: between backward_begin and backward_end,
 * pre_forward acts as pre_backward and post_forward does nothing (the
 * recomputed forward finds the unit gathered for the backward), as FSDP2
 * skips its reshard while a module's backward is pending. Each pass may be
 * run again (gradient accumulation: every backward_end adds its reduced
 * gradients into the sharded ones). Errors: TPX_NOT_FOUND naming a module
 * the model lacks, TPX_INVALID_ARGUMENT for a hook outside its pass, a
 * post_backward with no pre_backward, a pre_backward after its unit's
 * gradients were reduced; and whatever the unit calls return. */

/* The runtime unit of `module` into *unit. Not collective. */
TPX_API tpx_status tpx_runtime_module_unit(const tpx_runtime *rt,
                                           const char *module, size_t *unit,
                                           tpx_error *err);
/* 1 when `unit` is a root unit (see above); 0 otherwise or out of range. */
TPX_API int tpx_runtime_unit_is_root(const tpx_runtime *rt, size_t unit);
/* Open a forward pass (ending an open one): the per-pass flags are cleared
 * and the root units unsharded for the forward. */
TPX_API tpx_status tpx_runtime_forward_begin(tpx_runtime *rt, tpx_error *err);
/* End the forward: every non-root unit gathered in it is resharded as its
 * reshard_after_forward says (the root units stay). backward_begin calls it
 * when a forward is open. */
TPX_API tpx_status tpx_runtime_forward_end(tpx_runtime *rt, tpx_error *err);
/* Open a backward pass: the root units unsharded for the backward. */
TPX_API tpx_status tpx_runtime_backward_begin(tpx_runtime *rt, tpx_error *err);
/* End the backward: every unit gathered in it whose gradients are not
 * reduced yet (the root units, and any whose post_backward did not come) is
 * reduced and resharded, then tpx_runtime_wait: the sharded gradients are
 * final when it returns. */
TPX_API tpx_status tpx_runtime_backward_end(tpx_runtime *rt, tpx_error *err);
/* Before `module`'s forward: its unit unsharded (tpx_runtime_unshard,
 * FORWARD, with its prefetch) unless this forward did so already. */
TPX_API tpx_status tpx_runtime_pre_forward(tpx_runtime *rt, const char *module,
                                           tpx_error *err);
/* After it: the unit resharded (tpx_runtime_reshard, FORWARD: only when its
 * reshard_after_forward is set). No-op for a root unit. */
TPX_API tpx_status tpx_runtime_post_forward(tpx_runtime *rt, const char *module,
                                            tpx_error *err);
/* Before `module`'s backward: its unit unsharded for the backward
 * (gradients allocated, its backward prefetch issued), once per backward. */
TPX_API tpx_status tpx_runtime_pre_backward(tpx_runtime *rt, const char *module,
                                            tpx_error *err);
/* After it: the unit's gradients reduced (tpx_runtime_reduce_grads) and the
 * unit resharded, once per backward; for a root unit, at backward_end. Call
 * it after the backward of every module of the unit. */
TPX_API tpx_status tpx_runtime_post_backward(tpx_runtime *rt,
                                             const char *module,
                                             tpx_error *err);

/* ---- expert parallelism (docs/RUNTIME.md "Expert parallelism") ---------
 *
 * At ep > 1 (tpx_sharding_ep_size) the routed-expert parameters live on
 * the MoE mesh (tpx_sharding_moe_mesh: ("ep_shard", "ep") = (world / ep,
 * ep), rank r at (r / ep, r % ep), an ep group ep consecutive ranks). The
 * runtime splits the comms of its two dims from the world at create and
 * runs the expert parameters on them:
 *  - storage: this rank's slice (tpx_sharding_local_slice: E/ep whole
 *    experts, dim 1 split over ep_shard in FSDP units), row-major, as
 *    every other parameter; tpx_runtime_param_info.tp_local is the
 *    ep-local piece [E/ep, ...] and local_shape its shape;
 *  - an experts module that is an FSDP unit over ep_shard
 *    (tpx_sharding_fsdp_unit_dim) unshards by one all-gather over
 *    ep_shard into the [E/ep, ...] tensor and reduce-scatters its
 *    gradients over ep_shard; its hooks are those of any non-root unit
 *    (pre_forward / post_backward of the experts module's name);
 *  - expert parameters in no FSDP unit (ep = world, or FSDP over one
 *    rank) get one runtime unit per module holding them, numbered after
 *    the FSDP units, over one rank: unshard copies (casts) the shard,
 *    reduce_grads divides (and sums the replicas over ep_shard when the
 *    parameters are replicated there); their hooks work the same way;
 *  - expert gradients are divided by expert_grad_divide_factor (by
 *    default the world size, where the others get dp_shard x
 *    dp_replicate): each rank's expert gradient sums every rank's
 *    tokens of its ep group, so the sum over ep_shard covers the world;
 *  - the grad norm counts each expert element once (reduced over the MoE
 *    mesh dims it is sharded on); gather_param / gather_grad return the
 *    full [E, ...] tensor; clip, AdamW, offload and the byte counts treat
 *    them as any other parameter.
 * FSDP off (no units) with ep > 1 is refused at create. */

/* The comm of this rank's ep group (the MoE mesh's "ep" dim: rank i of it
 * holds experts [i·E/ep, (i+1)·E/ep)), for tpx_moe_dispatch_options.ep.
 * Borrowed, valid while rt lives; NULL at ep 1 (or for NULL). Collectives
 * on it run on the calling thread. */
TPX_API tpx_comm *tpx_runtime_ep_comm(const tpx_runtime *rt);
/* The comm of this rank's ep_shard group (the ranks holding the same
 * experts: r % ep equal), over which expert units are sharded. The runtime
 * runs its collectives on its comm thread: a trainer must not use it while
 * the runtime may (use it only between steps, after tpx_runtime_wait).
 * Borrowed; NULL at ep 1. */
TPX_API tpx_comm *tpx_runtime_ep_shard_comm(const tpx_runtime *rt);
/* The divisor of the gradients after their data-parallel reduction: of the
 * non-expert parameters (expert 0: grad_divide_factor or its default) or
 * of the expert ones (expert 1: expert_grad_divide_factor or its
 * default). 0 for NULL. */
TPX_API double tpx_runtime_grad_divide_factor(const tpx_runtime *rt,
                                              int expert);

/* ---- gradient norm and clip (torch clip_grad_norm_) --------------------- */

/* Total norm of all sharded gradients over the whole mesh, each global
 * element once: local sums of squares (max of |g| for inf) in f64, reduced
 * over exactly the mesh dims each parameter is sharded on. norm_type 2.0 or
 * INFINITY (anything else: TPX_INVALID_ARGUMENT). Collective over the mesh.
 * Call it after reduce_grads of every unit. */
TPX_API tpx_status tpx_runtime_grad_norm(tpx_runtime *rt, double norm_type,
                                         double *out, tpx_error *err);
/* Multiply every sharded gradient by max_norm / (total_norm + 1e-6) when
 * that is < 1, exactly as torch's clip_grad_norm_ (f32:
 * (1 / (norm + 1e-6)) * max_norm; a NaN norm makes every gradient NaN, an
 * infinite one zeroes them). Local; every rank passes the same total_norm.
 * max_norm must be > 0 and finite. */
TPX_API tpx_status tpx_runtime_clip_grads(tpx_runtime *rt, double max_norm,
                                          double total_norm, tpx_error *err);
/* grad_norm then clip_grads; *total_out (may be NULL) = the pre-clip norm. */
TPX_API tpx_status tpx_runtime_clip_grad_norm(tpx_runtime *rt, double max_norm,
                                              double norm_type,
                                              double *total_out,
                                              tpx_error *err);

/* ---- AdamW (torch.optim.AdamW, single-tensor, f32) ---------------------- */

typedef struct tpx_adamw_options {
  size_t struct_size;
  double lr;           /* 1e-3 */
  double beta1;        /* 0.9 */
  double beta2;        /* 0.999 */
  double eps;          /* 1e-8 */
  double weight_decay; /* 0.01 (torch's default; pass 0 for none) */
} tpx_adamw_options;

#define TPX_ADAMW_OPTIONS_INIT                                                 \
  { sizeof(tpx_adamw_options), 1e-3, 0.9, 0.999, 1e-8, 0.01 }

/* One step on every sharded parameter (its f32 master) with its sharded
 * gradient, step t = previous steps + 1:
 *   p *= 1 - lr*wd; m = lerp(m, g, 1-b1); v = b2*v + (1-b2)*g*g;
 *   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
 * State (m, v) is allocated zeroed at the first step. Local. Must not run
 * while a unit is unsharded (its unsharded copy would be stale):
 * TPX_INVALID_ARGUMENT. */
TPX_API tpx_status tpx_runtime_adamw_step(tpx_runtime *rt,
                                          const tpx_adamw_options *opts,
                                          tpx_error *err);
/* Optimizer steps taken so far. */
TPX_API int64_t tpx_runtime_optimizer_steps(const tpx_runtime *rt);

/* ---- memory accounting -------------------------------------------------- */

/* Bytes currently allocated by the runtime of one kind; -1 for NULL / a bad
 * kind. Exact sums of the buffers it holds (padding included). */
TPX_API int64_t tpx_runtime_allocated_bytes(const tpx_runtime *rt,
                                            tpx_runtime_mem_kind kind);
/* High-water mark of the same since create. */
TPX_API int64_t tpx_runtime_peak_bytes(const tpx_runtime *rt,
                                       tpx_runtime_mem_kind kind);
/* Bytes freed but kept for reuse (tpx_runtime_options.cache_buffers);
 * -1 for NULL. Not part of any kind above. */
TPX_API int64_t tpx_runtime_cached_bytes(const tpx_runtime *rt);

/* Where the bytes above live: `host` 0 counts the buffers in the comm's
 * memory space (tpx_comm_memspace: the GPU on nccl, host memory on local
 * and mpi), 1 the buffers the runtime keeps in host memory because of
 * tpx_runtime_options.offload (the sharded state and its D2H staging,
 * counted as host bytes on every backend; 0 without offload). `peak` 0: bytes
 * allocated now; 1: the high-water mark since create. The two "now" figures sum
 * to TPX_RUNTIME_MEM_TOTAL. -1 for NULL. */
TPX_API int64_t tpx_runtime_space_bytes(const tpx_runtime *rt, int host,
                                        int peak);
/* 1 when the runtime offloads its sharded state (options.offload). */
TPX_API int tpx_runtime_is_offloaded(const tpx_runtime *rt);

/* Every figure above at once (what a trainer reports after a step). */
typedef struct tpx_runtime_memory {
  size_t struct_size;
  int64_t allocated[TPX_RUNTIME_MEM_TOTAL + 1]; /* by kind: bytes now */
  int64_t peak[TPX_RUNTIME_MEM_TOTAL + 1];      /* by kind: high-water mark */
  int64_t cached;                               /* tpx_runtime_cached_bytes */
  int64_t device, device_peak; /* tpx_runtime_space_bytes(rt, 0, 0 / 1) */
  int64_t host, host_peak;     /* tpx_runtime_space_bytes(rt, 1, 0 / 1) */
} tpx_runtime_memory;
#define TPX_RUNTIME_MEMORY_INIT                                                \
  { sizeof(tpx_runtime_memory), {0}, {0}, 0, 0, 0, 0, 0 }

/* Fill *out (struct_size from TPX_RUNTIME_MEMORY_INIT). Local. */
TPX_API tpx_status tpx_runtime_memory_stats(const tpx_runtime *rt,
                                            tpx_runtime_memory *out,
                                            tpx_error *err);

TPX_END_DECLS

#endif /* TPX_RUNTIME_H */
