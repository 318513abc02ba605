/* tpx/sharding.h — the result of applying a TP plan (and FSDP) to a model on
 * a named mesh: one object a trainer queries.
 *
 * tpx_sharding_create matches the plan's keys against the model
 * (tpx/match.h), applies every matched style exactly as torch's
 * parallelize_module does (docs/SEMANTICS.md "Parallel styles"), adds the
 * FSDP2 placements over the data-parallel dims (docs/SEMANTICS.md "FSDP2"),
 * and computes per-rank bytes. Problems are diagnostics held by the result
 * (tied-embeddings, uneven-shard, replicated-by-omission, unmatched-key, ...);
 * the call fails only on bad arguments or out of memory.
 *
 * Placements per parameter are one per mesh dim in mesh order. Params that no
 * distribute_module style covers stay plain tensors: "replicate" on tp. At
 * tp == 1 (or when the mesh has no TP dim) Automodel skips parallelize_module,
 * so nothing is TP-sharded; matching still runs for the report, and what it
 * finds is kept at info level, its message starting "not applied at tp 1"
 * (an unmatched key is no fault where no plan is applied).
 *
 * Which global slice a rank holds is answered by tpx_layout_local_slice
 * (tpx/layout.h); this object only supplies the placements.
 *
 * Lifetime: the model and the mesh are borrowed and must outlive the
 * sharding; the plan is copied. Not a runtime: see tpx/comm.h. */
#ifndef TPX_SHARDING_H
#define TPX_SHARDING_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/layout.h"
#include "tpx/mesh.h"
#include "tpx/model.h"
#include "tpx/placement.h"
#include "tpx/plan.h"

TPX_BEGIN_DECLS

/* Plan selection's result (tpx/select.h). */
typedef struct tpx_selection tpx_selection;

typedef struct tpx_sharding_options {
  size_t struct_size;
  const char *tp_dim; /* "tp"; absent from the mesh = tp size 1 */
  /* FSDP Shard(0): "dp_shard", or a flattened view of consecutive mesh
   * dims ("dp_shard_cp" = dp_shard x cp, made by tpx_mesh_flatten), as
   * upstream shards over dp_shard_cp: one torch.chunk over the view's size,
   * the placement on its first dim and Joined on the others
   * (docs/SEMANTICS.md "Context parallelism"). */
  const char *dp_shard_dim;

  const char *dp_replicate_dim; /* "dp_replicate" (HSDP Replicate) */
  int fsdp;                     /* 1: FSDP2 over the dp dims (default) */
  int fwd_prefetch_depth;       /* 1 */
  int bwd_prefetch_depth;       /* 2 */
  int reshard_after_forward;    /* -1: Automodel's rule; 0/1: override */
  tpx_dtype param_dtype;        /* FSDP mp param dtype, bf16; INVALID = none */
  tpx_dtype reduce_dtype;       /* f32; INVALID = none */
  tpx_dtype output_dtype;       /* f32; INVALID = none */
  /* Units chosen by a plugin (tpx_selection_fsdp_unit), bottom-up, root
   * excluded; 0 units = tpx's rule (docs/SEMANTICS.md "FSDP2"). Borrowed during
   * tpx_sharding_create only. reshard may be NULL (then 1 each). */
  size_t num_fsdp_units;
  const char *const *fsdp_units;
  const int *fsdp_unit_reshard;
  /* Parameters kept in fp32 (tpx_selection_fp32 patterns from a plugin:
   * Qwen3.5 A_log / dt_bias, NemotronH router bias): FQN patterns matched
   * per atom with fnmatch (tpx_match_atom), same number of atoms. A
   * floating-point match is held in f32 and keeps f32 as its FSDP param
   * dtype (no param_dtype cast, like Automodel's fully_shard_by_dtype
   * fp32 group); bytes and peaks count it so. Copied at create (added
   * after fsdp_unit_reshard: an older, shorter struct_size means none). */
  size_t num_fp32_params;
  const char *const *fp32_params;
  /* The selection the plan came from (tpx/select.h), handed over whole so
   * no caller copies its parts by hand; NULL = none. Borrowed during
   * tpx_sharding_create only. It supplies what the fields above leave
   * unset: the plan when tpx_sharding_create's `plan` is NULL, the plugin's
   * FSDP units and reshard flags when num_fsdp_units is 0, its fp32
   * parameters when num_fp32_params is 0, and the strategy's
   * mixed-precision default (tpx_selection_strategy_mp) written over
   * param_dtype / reduce_dtype / output_dtype where the strategy gives one.
   * Its tp size (tpx_selection_tp_size) must be the mesh's tp_dim size
   * (1 when the mesh has no such dim): the plan was chosen and validated for
   * it, so another is refused with TPX_INVALID_ARGUMENT naming both.
   * Added after fp32_params: an older, shorter struct_size means none. */
  const tpx_selection *selection;
  /* The context-parallel dim ("cp"; absent from the mesh = cp size 1): each
   * cp rank holds 1/cp of every sequence (activations, traffic). FSDP
   * shards over it only when dp_shard_dim names a view that spans it.
   * Added after selection: an older, shorter struct_size means "cp". */
  const char *cp_dim;
  /* Expert parallelism (docs/SEMANTICS.md "Expert parallelism"): ep > 1
   * builds upstream's MoE mesh (tpx_mesh_create_moe: ("ep_shard", "ep") =
   * (world / ep, ep) over the same ranks) and places every routed-expert
   * parameter on it, Shard(0) over ep and, when ep_shard > 1, Shard(1)
   * over ep_shard in an FSDP unit of its own (the experts module); with
   * ep_shard 1 an expert parameter is in no FSDP unit. 0 = the selection's
   * ep (tpx_selection_ep), else 1. An ep that does not divide the world
   * fails with upstream's message. Expert parameters are those matching
   * expert_params (FQN patterns matched per atom, tpx_match_fqn; dim 0 the
   * expert dim); 0 patterns = the selection's (tpx_selection_expert_param).
   * Borrowed during tpx_sharding_create only. Added after cp_dim: an older,
   * shorter struct_size means the selection's (or none). */
  int64_t ep;
  size_t num_expert_params;
  const char *const *expert_params;
} tpx_sharding_options;

#define TPX_SHARDING_OPTIONS_INIT                                              \
  {                                                                            \
    sizeof(tpx_sharding_options), "tp", "dp_shard", "dp_replicate", 1, 1, 2,   \
        -1, TPX_DTYPE_BF16, TPX_DTYPE_F32, TPX_DTYPE_F32, 0, NULL, NULL, 0,    \
        NULL, NULL, "cp", 0, 0, NULL                                           \
  }

typedef struct tpx_sharding tpx_sharding;

/* Match, apply, FSDP, bytes. `plan` may be NULL: the options' selection's
 * plan, else an empty plan; `opts` may be NULL (defaults). *out is a new
 * object the caller destroys. */
TPX_API tpx_status tpx_sharding_create(const tpx_model *model,
                                       const tpx_plan *plan,
                                       const tpx_mesh *mesh,
                                       const tpx_sharding_options *opts,
                                       tpx_sharding **out, tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_sharding_destroy(tpx_sharding *sh);

/* Borrowed back-references. */
TPX_API const tpx_model *tpx_sharding_model(const tpx_sharding *sh);
TPX_API const tpx_mesh *tpx_sharding_mesh(const tpx_sharding *sh);
/* The (copied) plan that was applied; never NULL. */
TPX_API const tpx_plan *tpx_sharding_plan(const tpx_sharding *sh);
/* Size of the TP dim (1 when the mesh has none). */
TPX_API int64_t tpx_sharding_tp_size(const tpx_sharding *sh);

/* Size of the cp dim (1 when the mesh has none). */
TPX_API int64_t tpx_sharding_cp_size(const tpx_sharding *sh);
/* The mesh dim or flattened view FSDP shards over ("dp_shard",
 * "dp_shard_cp"; upstream's dp_shard_cp_mesh_name), NULL when FSDP is off or
 * the mesh has no such dim; *size (may be NULL) gets its size (1 when
 * NULL is returned). Borrowed, valid while the sharding lives. */
TPX_API const char *tpx_sharding_fsdp_mesh_name(const tpx_sharding *sh,
                                                int64_t *size);

/* ---- expert parallelism (docs/SEMANTICS.md "Expert parallelism") ---- */
/* The ep the sharding was made with (1 without expert parallelism; 0 for
 * NULL). */
TPX_API int64_t tpx_sharding_ep_size(const tpx_sharding *sh);
/* The MoE mesh ("ep_shard", "ep"), owned by the sharding (borrowed, valid
 * while it lives); NULL at ep 1, as upstream builds none. */
TPX_API const tpx_mesh *tpx_sharding_moe_mesh(const tpx_sharding *sh);
/* The mesh parameter `param` lives on: the MoE mesh for a routed-expert
 * parameter at ep > 1, else the main mesh (tpx_sharding_mesh). Its
 * placements (tpx_param_sharding.placements) are one per dim of that mesh,
 * and a rank's coordinates on it are tpx_mesh_coords(that mesh, rank): a
 * rank's number is the same on both meshes. NULL out of range. */
TPX_API const tpx_mesh *tpx_sharding_param_mesh(const tpx_sharding *sh,
                                                int64_t param);

/* Diagnostics from matching, application and FSDP. Borrowed. */
TPX_API const tpx_diag_list *tpx_sharding_diagnostics(const tpx_sharding *sh);
/* 1 when no error-level diagnostic is present. */
TPX_API int tpx_sharding_ok(const tpx_sharding *sh);

/* ---- per parameter (indices as tpx_model_param) ---- */

/* Borrowed view of one parameter's sharding. */
typedef struct tpx_param_sharding {
  int64_t param;                   /* parameter index */
  const tpx_placement *placements; /* [mesh ndim], mesh order, of the
                                      mesh the parameter lives on
                                      (tpx_sharding_param_mesh) */
  int64_t plan_entry;     /* index in the plan of the key covering it, or -1 */
  const char *plan_key;   /* that key, or NULL */
  int64_t styled_module;  /* module the style was applied to, or -1 */
  int64_t fsdp_unit;      /* FSDP unit index, or -1 when FSDP is off
                             (and for an expert parameter at ep = world) */
  tpx_dtype param_dtype;  /* FSDP unsharded (compute) dtype after clearing */
  tpx_dtype reduce_dtype; /* gradient reduce dtype after clearing */
} tpx_param_sharding;

TPX_API tpx_status tpx_sharding_param(const tpx_sharding *sh, int64_t param,
                                      tpx_param_sharding *out, tpx_error *err);

/* 1 when parameter `param` matches one of the options' fp32 patterns (a
 * tied alias follows its target), else 0 (also out of range). */
TPX_API int tpx_sharding_param_keeps_fp32(const tpx_sharding *sh,
                                          int64_t param);
/* The fp32 patterns the sharding was made with (copies; borrowed, valid
 * while the sharding lives), and how many parameters each matched. */
TPX_API size_t tpx_sharding_num_fp32_patterns(const tpx_sharding *sh);
TPX_API const char *tpx_sharding_fp32_pattern(const tpx_sharding *sh, size_t i,
                                              size_t *num_matched);

/* The global slice `rank` holds of parameter `param` (delegates to
 * tpx_layout_local_slice with the parameter's placements). */
TPX_API tpx_status tpx_sharding_local_slice(const tpx_sharding *sh,
                                            int64_t param, int64_t rank,
                                            tpx_slice *out, tpx_error *err);

/* ---- per rank ---- */

/* Bytes of the slices `rank` holds, summed over all parameters (a tied
 * parameter once), after TP and FSDP, without padding. -1 if out of range. */
TPX_API int64_t tpx_sharding_rank_param_bytes(const tpx_sharding *sh,
                                              int64_t rank);
/* Estimated peak parameter bytes on `rank` while FSDP units are gathered:
 * the sharded state + the root unit gathered (it is not resharded) + the
 * largest (unit + its prefetched units) gathered, TP-local, in the param
 * dtype. Equals tpx_sharding_rank_param_bytes when FSDP is off. */
TPX_API int64_t tpx_sharding_rank_peak_bytes(const tpx_sharding *sh,
                                             int64_t rank);

/* ---- per module: layouts and collectives (docs/SEMANTICS.md
 * "Transitions") ---- */

typedef enum tpx_transition_side {
  TPX_TRANSITION_INPUT = 0,
  TPX_TRANSITION_OUTPUT = 1,
} tpx_transition_side;

/* One input or output of a styled module: the layout it arrives in, the
 * layout the style wants, and the collective that implies. */
typedef struct tpx_transition {
  tpx_transition_side side;
  int index;            /* positional input / output index */
  tpx_placement from;   /* annotated / produced layout */
  tpx_placement to;     /* desired layout */
  int from_is_none;     /* prepare_module_*: pass-through item */
  const char *forward;  /* "none", "all-gather(dim=-1)", "all-reduce", ... */
  const char *backward; /* the dual in backward */
} tpx_transition;

/* The transitions of module `module` (empty when no style applies to it
 * directly). *out is borrowed, valid while the sharding lives. */
TPX_API tpx_status tpx_sharding_module_transitions(const tpx_sharding *sh,
                                                   int64_t module,
                                                   const tpx_transition **out,
                                                   size_t *count,
                                                   tpx_error *err);
/* Plan entry applied to module `module` itself, or -1. */
TPX_API int64_t tpx_sharding_module_entry(const tpx_sharding *sh,
                                          int64_t module);

TPX_END_DECLS

#endif /* TPX_SHARDING_H */
