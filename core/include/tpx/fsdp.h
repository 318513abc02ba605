/* tpx/fsdp.h — the FSDP2 side of a tpx_sharding: units, reshard flags,
 * prefetch lists and the mixed-precision policy (docs/SEMANTICS.md
 * "FSDP2").
 *
 * Units, as Automodel's apply_fsdp2_sharding_recursively forms them: every
 * non-container element of every module list reachable through non-container
 * modules (a module list is a container whose children are all named by
 * digits), in tree order, then the root. A plugin may supply its own units
 * (tpx_sharding_options.fsdp_units). Then, as NeMo Automodel 0.7.0 does
 * (not with plugin units), an untied input embedding (the first
 * embed_tokens outside a multimodal tower) and output embedding (lm_head)
 * become units of their own, before the root; tied ones stay in the root.
 * Each parameter belongs to the unit that contains it, else to the root.
 * reshard_after_forward: true except for the last element of each list,
 * false for the root and for lm_head's unit, unless overridden (the
 * override never applies to lm_head).
 *
 * Placements over dp: Shard(0) on dp_shard, or StridedShard(0, k) when TP
 * already splits dim 0 into k pieces; Replicate on dp_replicate (HSDP).
 *
 * Not a runtime: the runtime executes these units over a communicator. */
#ifndef TPX_FSDP_H
#define TPX_FSDP_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/sharding.h"

TPX_BEGIN_DECLS

/* Borrowed view of one FSDP unit. */
typedef struct tpx_fsdp_unit {
  int64_t module;  /* module index; 0 for the root */
  const char *fqn; /* "model.layers.3"; "" for the root */
  int is_root;
  int64_t group; /* index of the module list it came from; -1 for the
                    root and the embedding units */
  int reshard_after_forward;
  size_t num_params; /* parameters it owns (tied aliases excluded) */
  size_t num_fwd_prefetch;
  const int64_t *fwd_prefetch; /* unit indices, nearest first */
  size_t num_bwd_prefetch;
  const int64_t *bwd_prefetch; /* unit indices, nearest first */
} tpx_fsdp_unit;

/* 0 when FSDP is off. Units are ordered bottom-up; the root is last. */
TPX_API size_t tpx_sharding_num_fsdp_units(const tpx_sharding *sh);
TPX_API tpx_status tpx_sharding_fsdp_unit(const tpx_sharding *sh, size_t index,
                                          tpx_fsdp_unit *out, tpx_error *err);
/* The mesh dim or flattened view unit `index` shards over: "ep_shard" (on
 * the MoE mesh, tpx_sharding_moe_mesh) for a routed-experts unit at ep > 1,
 * else the FSDP view (tpx_sharding_fsdp_mesh_name). Borrowed; NULL out of
 * range. */
TPX_API const char *tpx_sharding_fsdp_unit_dim(const tpx_sharding *sh,
                                               size_t index);
/* Bytes of unit `index` gathered (all-gathered over dp, TP-local) on `rank`,
 * in the param dtype of each parameter. -1 when out of range. */
TPX_API int64_t tpx_sharding_fsdp_unit_gathered_bytes(const tpx_sharding *sh,
                                                      size_t index,
                                                      int64_t rank);

/* FSDP2 MixedPrecisionPolicy; TPX_DTYPE_INVALID stands for None. */
typedef struct tpx_mp_policy {
  tpx_dtype param_dtype;
  tpx_dtype reduce_dtype;
  tpx_dtype output_dtype;
} tpx_mp_policy;

/* Per-parameter dtypes after FSDP2's clearing rules: reduce_dtype falls back
 * to param_dtype when unset; then reduce is cleared (INVALID) when it equals
 * the param dtype, and param is cleared when it equals `orig`. Effective
 * dtypes: *param_out = the compute dtype (orig when cleared), *reduce_out =
 * the gradient reduction dtype (the compute dtype when cleared). Non-float
 * parameters keep `orig` for both. */
/* The policy the sharding was made with (all INVALID when FSDP is off). */
TPX_API tpx_mp_policy tpx_sharding_mp_policy(const tpx_sharding *sh);

TPX_API void tpx_fsdp_param_dtypes(const tpx_mp_policy *policy, tpx_dtype orig,
                                   tpx_dtype *param_out, tpx_dtype *reduce_out);

/* ---- layer groups (docs/SEMANTICS.md "FSDP2") ---- */

/* Automodel's _extract_model_layer_groups: the decoder / vision layers of a
 * model. This is the layer list activation checkpointing and per-layer
 * tooling use; FSDP units follow the recursive rule above, which finds the
 * same lists for the models of the spec table. */
typedef enum tpx_layer_group {
  TPX_LAYERS_LANGUAGE = 0,
  TPX_LAYERS_VISION = 1,
  TPX_LAYERS_UNKNOWN = 2, /* the largest module list (heuristic) */
} tpx_layer_group;

/* "language", "vision", "unknown"; static. */
TPX_API const char *tpx_layer_group_name(tpx_layer_group group);

/* Layers in group order (language, then vision): by the spec table for the
 * model's primary architecture (first candidate FQN that exists wins; a
 * module list expands to its children, any other module is one layer),
 * else "model.layers", else "layers", else the first strictly largest module
 * list in depth-first order. Writes up to `cap` module indices and groups
 * (either array may be NULL) and the total in *count. A known architecture
 * whose candidates resolve nothing gives 0 layers (Automodel warns);
 * TPX_NOT_FOUND naming the architecture when the heuristic finds no list. */
TPX_API tpx_status tpx_model_layer_groups(const tpx_model *model,
                                          int64_t *modules,
                                          tpx_layer_group *groups, size_t cap,
                                          size_t *count, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_FSDP_H */
