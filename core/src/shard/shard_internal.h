/* shard/shard_internal.h — the inside of tpx_sharding, shared by the files of
 * the shard area: the record every step fills, the steps' entry points and
 * two small helpers. sharding.c (create, destroy, queries) runs the steps in
 * order: fp32.c (fp32 patterns), apply.c (TP placements and their
 * diagnostics), partial_grad.c, transitions.c (module layouts and
 * collectives), fsdp.c (units, dp placements, mixed precision) and bytes.c
 * (per-rank bytes); memory.c, activations.c and traffic.c read the result.
 * The steps read this header, never sharding.c, so the file that runs them
 * sits above them.
 * Not for other areas: they use tpx/sharding.h and tpx/fsdp.h, or the
 * read-only shard/sharding_view.h. */
#ifndef TPX_SHARD_SHARD_INTERNAL_H
#define TPX_SHARD_SHARD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/fsdp.h"
#include "tpx/memory.h"
#include "tpx/sharding.h"

/* One styled module's transitions with their collective names stored inline;
 * the public tpx_transition views point into these. */
typedef struct tpx__transition_rec {
  tpx_transition view;
  char fwd[64];
  char bwd[64];
} tpx__transition_rec;

/* Transitions of one plan entry applied to one module class (linear-like or
 * embedding): computed once, shared by every module the entry styles. */
typedef struct tpx__transition_set {
  size_t count;
  tpx__transition_rec recs[2 * TPX_STYLE_MAX_LAYOUTS + 2];
  tpx_transition views[2 * TPX_STYLE_MAX_LAYOUTS + 2];
} tpx__transition_set;

typedef struct tpx__fsdp_unit_rec {
  int64_t module;
  int64_t group;
  int reshard;
  size_t num_params;
  int64_t *fwd; /* malloc'd */
  size_t num_fwd;
  int64_t *bwd; /* malloc'd */
  size_t num_bwd;
  int64_t *gathered; /* [world] bytes gathered on each rank; malloc'd */
  int on_moe;        /* routed experts: shards over ep_shard (MoE mesh) */
} tpx__fsdp_unit_rec;

struct tpx_sharding {
  const tpx_model *model;    /* borrowed */
  const tpx_mesh *mesh;      /* borrowed */
  tpx_plan *plan;            /* owned copy */
  tpx_sharding_options opts; /* string pointers not kept past create */

  int ndim;                     /* mesh dims */
  int tp_dim, dps_dim, dpr_dim; /* mesh dim index or -1 */
  int64_t tp, dps, dpr, world;
  int tp_applied;   /* tp > 1: parallelize_module ran */
  int tp_grad_sync; /* the selection's strategy sums partial gradients of
                       tp replicas (tpx_selection_tp_grad_sync) */
  /* FSDP's dim or flattened view (opts.dp_shard_dim): its first real dim is
   * dps_dim, it spans dps_ndims consecutive dims and dps is its size
   * (dp_shard x cp for "dp_shard_cp"); "" when the mesh has none. */
  int dps_ndims;
  char fsdp_mesh[TPX_MESH_NAME_MAX];
  int cp_dim; /* mesh dim index or -1 */
  int64_t cp; /* 1 when absent */

  size_t num_params, num_modules, num_entries;
  int topo_modules;        /* every module's parent has a smaller index */
  const char **entry_keys; /* [num_entries], borrowed from plan */
  tpx_style *entry_styles; /* [num_entries] */
  uint8_t *entry_kinds;    /* [num_entries] bit 0: a non-embedding module
                              carries the entry, bit 1: an embedding does
                              (filled by apply.c when tp is applied) */
  int64_t *tied_params;    /* parameters with tied_to >= 0 */
  size_t num_tied;
  tpx_placement *placements; /* [num_params * ndim] */
  int64_t *param_entry;      /* covering plan entry or -1 */
  int64_t *param_styled;     /* module the covering style applies to, or -1 */
  int64_t *param_unit;       /* FSDP unit or -1 */
  uint8_t *param_dtype;      /* effective compute dtype (tpx_dtype) */
  uint8_t *reduce_dtype;     /* effective reduce dtype (tpx_dtype) */
  uint8_t *param_fp32;       /* matches an fp32 pattern (alias: its target) */
  char **fp32_patterns;      /* [num_fp32] copies of opts.fp32_params */
  size_t *fp32_matched;      /* [num_fp32] parameters each matched */
  size_t num_fp32;
  int64_t *module_entry; /* entry applied to the module itself, or -1 */
  int64_t *module_cover; /* nearest styled ancestor-or-self, or -1 */

  tpx__transition_set *tsets; /* [num_entries * 2], computed at create */
  int *tset_valid;            /* [num_entries * 2] */

  tpx__fsdp_unit_rec *units;
  size_t num_units;

  int64_t *rank_bytes; /* [world] */
  int64_t *rank_peak;  /* [world] */
  /* [world * TPX__STATE_TERMS]: per rank, over parameters (a tied one once)
   * in FSDP2's padded per-rank layout (tpx_layout_fsdp_padded_numel over
   * dp_shard of the TP-local piece; the TP-local piece itself without
   * FSDP): bytes in the held dtype, floating-point grad bytes in the reduce
   * dtype (f32 without FSDP), floating-point elements, and those held below
   * 4 bytes. */
  int64_t *rank_state;

  /* Expert parallelism (ep.c): at ep > 1 the MoE mesh (owned), ep_shard
   * = world / ep, which parameters live on it, and their placements on
   * it, rows of moe_w = max(ndim, 2) entries (the MoE mesh's two, then
   * Replicate), so a reader that walks a row with the main mesh's ndim
   * stays inside it. NULL / 1 / 0 at ep 1. */
  tpx_mesh *moe_mesh;
  int64_t ep, ep_shard;
  int ep_fsdp; /* experts units over ep_shard: FSDP on (over more than one
                  rank, as upstream's fsdp_enabled) and ep_shard > 1 */
  int moe_w;
  uint8_t *param_moe;            /* [num_params] */
  tpx_placement *moe_placements; /* [num_params * moe_w] */

  tpx_diag_list *diags;
};

/* ---- ep_cost.c ---- */
/* At ep > 1 (docs/MEMORY.md "Expert parallelism"): the token-dispatch
 * buffers of one MoE layer and what EP adds to the saved activations
 * (*dispatch, *saved), and the bytes a rank sends over ep per step
 * (*traffic); all 0 at ep 1 or seq 0. */
tpx_status tpx__ep_costs(const tpx_sharding *sh, const tpx_memory_options *o,
                         int64_t *dispatch, int64_t *saved, int64_t *traffic,
                         tpx_error *err);

/* ---- ep.c ---- */
/* At ep > 1 (sh->ep): the MoE mesh, param_moe from the expert patterns,
 * and moe_placements (before FSDP). */
tpx_status tpx__ep_setup(tpx_sharding *sh, tpx_error *err);
/* The placements row of param p on the mesh it lives on. */
const tpx_placement *tpx__param_row(const tpx_sharding *sh, int64_t p);
/* The mesh param p lives on. */
const tpx_mesh *tpx__param_mesh(const tpx_sharding *sh, int64_t p);
/* 1 when the last atom of fqn names a multimodal tower or projector
 * (Automodel's MULTIMODAL_MODULE_NAMES): at ep > 1 such a module is one
 * unit, the lists inside it none. */
int tpx__ep_multimodal_name(const char *fqn);
/* Called by fsdp.c at ep > 1: units of their own for the modules holding
 * expert parameters when ep_shard > 1 (on_moe), for the dtype-minority
 * subtrees of each block (blocks[0..num_blocks): the layer units, as
 * upstream's fully_shard_by_dtype splits them), for each outermost
 * multimodal tower or projector holding parameters, and the inner model's
 * root unit ("model", or its text module model.language_model /
 * text_model / text_decoder) when the embeddings are not tied across it;
 * -1 out of memory. `push` adds a unit as fsdp.c does. */
int tpx__ep_units(const tpx_sharding *sh, const int64_t *blocks,
                  size_t num_blocks, void *vec,
                  int (*push)(void *vec, int64_t module, int64_t group,
                              int reshard, int on_moe));

/* ---- apply.c ---- */
/* Fill module_entry (from matching), module_cover, param_entry, param_styled
 * and the TP column of placements; tied, uneven and omission diagnostics. */
tpx_status tpx__apply_tp(tpx_sharding *sh, tpx_error *err);
/* Normalised tp placement of param p (Replicate when tp is absent). */
tpx_placement tpx__tp_placement(const tpx_sharding *sh, int64_t p, int ndim);

/* ---- partial_grad.c ---- */
/* The sibling `<x>_proj` of module m named `<x>_norm` when that projection
 * is colwise with its output sharded on the last dim (heads), else -1. */
int64_t tpx__norm_colwise_sibling(const tpx_sharding *sh, int64_t m);
/* 1 when param (a tied alias: its target) is replicated over tp > 1, no
 * style covers it, and it is the weight of a per-head norm `<x>_norm` whose
 * sibling `<x>_proj` is colwise with its output sharded on the last dim:
 * each tp rank's gradient is then partial (Qwen3's q_norm / k_norm).
 * *sibling (may be NULL) = that projection module, else -1. */
int tpx__param_partial_over_tp(const tpx_sharding *sh, int64_t param,
                               int64_t *sibling);
/* The `partial-grad-replicated` warnings (after tpx__apply_tp). */
tpx_status tpx__partial_grad_diags(tpx_sharding *sh, tpx_error *err);

/* ---- gen_names.c ---- */
/* Generalised module names (tpx__fqn_generalize), each once, in the order
 * first added: one diagnostic per group of identical layers. Zero-init;
 * tpx__gen_names_free. */
#define TPX__GEN_NAME_MAX 256
typedef struct tpx__gen_names {
  char (*names)[TPX__GEN_NAME_MAX]; /* [count]; malloc'd */
  size_t count, cap;
} tpx__gen_names;
/* Generalise module m's name into gen and add it: 1 when it is new, 0 when
 * already there, -1 when out of memory. */
int tpx__gen_names_add(tpx__gen_names *set, const tpx_sharding *sh, int64_t m,
                       char gen[TPX__GEN_NAME_MAX]);
/* The modules whose generalised name is gen and, keep non-NULL, for which
 * keep(sh, module) is non-zero. */
size_t tpx__gen_names_count(const tpx_sharding *sh, const char *gen,
                            int (*keep)(const tpx_sharding *, int64_t));
void tpx__gen_names_free(tpx__gen_names *set);

/* ---- qk_norm.c ---- */
/* `qk-norm-whole-width` errors for norms over a colwise projection's whole
 * output width, and the `upstream-qk-norm-whole-width` info (after
 * tpx__apply_tp). */
tpx_status tpx__qk_norm_diags(tpx_sharding *sh, tpx_error *err);

/* ---- table_version.c ---- */
/* `conversion-table-older` (info) when the config's transformers_version is
 * newer than the embedded conversion table's. */
tpx_status tpx__table_version_diags(tpx_sharding *sh, tpx_error *err);

/* ---- transitions.c ---- */
/* Transitions of entry `entry` on a module of `kind`. */
void tpx__transitions_compute(const tpx_style *style, tpx_module_kind kind,
                              tpx__transition_set *out);
/* The transition of keyword input `name` of a prepare_module_input style
 * (input_kwarg_layouts / desired_input_kwarg_layouts, by name; the rules of
 * the positional inputs; side input, index -1; view.forward / backward
 * point into *out). 0 when the style is not prepare_module_input or does
 * not list `name`. */
int tpx__transition_kwarg(const tpx_style *style, const char *name,
                          tpx__transition_rec *out);

/* ---- fsdp.c ---- */
/* Units, reshard/prefetch, dp placements and mixed-precision dtypes
 * (fp32-kept parameters: f32). */
tpx_status tpx__fsdp_build(tpx_sharding *sh, tpx_error *err);
void tpx__fsdp_free(tpx_sharding *sh);

/* ---- cp_diags.c ---- */
/* The cp and data-parallel mesh diagnostics (after FSDP). */
tpx_status tpx__cp_diags(tpx_sharding *sh, tpx_error *err);

/* ---- fp32.c ---- */
/* Match every parameter against the fp32 patterns (param_fp32,
 * fp32_matched); before the FSDP dtypes are set. */
tpx_status tpx__fp32_mark(tpx_sharding *sh, tpx_error *err);
/* The dtype parameter p is held in: f32 for a floating-point parameter that
 * matches an fp32 pattern (HF keeps such modules in fp32 whatever the
 * checkpoint dtype), else `orig`. */
tpx_dtype tpx__held_dtype(const tpx_sharding *sh, int64_t p, tpx_dtype orig);

enum {
  TPX__STATE_PARAM_BYTES = 0,
  TPX__STATE_GRAD_BYTES = 1,
  TPX__STATE_FLOAT_NUMEL = 2,
  TPX__STATE_LOWP_NUMEL = 3,
  /* the unpadded local shard (what torch's optimizer state follows) and
   * the floating-point tensors a rank holds (one AdamW step each) */
  TPX__STATE_FLOAT_NUMEL_UNPADDED = 4,
  TPX__STATE_LOWP_NUMEL_UNPADDED = 5,
  TPX__STATE_FLOAT_TENSORS = 6,
  /* the part of GRAD_BYTES on the MoE mesh (expert parameters, ep > 1):
   * reduce-scattered over ep_shard, not dp_shard */
  TPX__STATE_MOE_GRAD_BYTES = 7,
  TPX__STATE_TERMS = 8
};

/* ---- bytes.c ---- */
/* rank_bytes, unit gathered bytes, rank_peak and rank_state. */
tpx_status tpx__bytes_compute(tpx_sharding *sh, tpx_error *err);

/* Byte counts are non-negative and saturate at INT64_MAX rather than wrap
 * (as tpx_slice_nbytes does): a config can describe a model whose per-rank
 * sums exceed int64 (signed overflow is UB). Arguments >= 0. */
static inline int64_t tpx__sat_add(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}
static inline int64_t tpx__sat_mul(int64_t a, int64_t b) {
  return a != 0 && b > INT64_MAX / a ? INT64_MAX : a * b;
}

/* Out-of-memory helper: records the error and returns TPX_NO_MEMORY. */
static inline tpx_status tpx__shard_oom(tpx_error *err, const char *what) {
  return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (%s)", what);
}

#endif /* TPX_SHARD_SHARD_INTERNAL_H */
