/* shard/sharding_view.h — read-only inline access to a sharding's mesh dims,
 * per-module plan entries and per-parameter TP placements, for the TP calls
 * (core/src/tp/) and the runtime object (core/src/runtime/). They run per
 * module or per transition, where the public queries' copies and checks
 * (tpx/sharding.h) would be most of the work.
 *
 * Same facts as tpx/sharding.h, no checks: indices must be valid (callers
 * check them against tpx__sv_num_modules / tpx__sv_num_params first).
 * Never write through these. Other areas include this header, never
 * shard/shard_internal.h. */
#ifndef TPX_SHARD_SHARDING_VIEW_H
#define TPX_SHARD_SHARDING_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "shard/shard_internal.h"

/* The mesh dims a sharding names: index (-1 when absent) and size (1 when
 * absent) of tp, dp_shard (FSDP's dim or view), dp_replicate and cp. */
typedef struct tpx__shard_dims {
  int ndim; /* mesh dims */
  int tp_dim, dps_dim, dpr_dim;
  int64_t tp, dps, dpr;
  int64_t world;  /* mesh world size */
  int tp_applied; /* tp > 1: parallelize_module ran (hooks exist) */
  /* FSDP's view: dps_dim is its first dim, it spans dps_ndims consecutive
   * dims (2 for dp_shard_cp) and dps is its size; cp as tp. */
  int dps_ndims;
  int cp_dim;
  int64_t cp;
} tpx__shard_dims;

static inline tpx__shard_dims tpx__sv_dims(const tpx_sharding *sh) {
  tpx__shard_dims d = {sh->ndim,       sh->tp_dim,    sh->dps_dim, sh->dpr_dim,
                       sh->tp,         sh->dps,       sh->dpr,     sh->world,
                       sh->tp_applied, sh->dps_ndims, sh->cp_dim,  sh->cp};
  return d;
}

/* The three the TP calls ask most. */
static inline int tpx__sv_tp_dim(const tpx_sharding *sh) { return sh->tp_dim; }
static inline int tpx__sv_tp_applied(const tpx_sharding *sh) {
  return sh->tp_applied;
}
static inline int64_t tpx__sv_world(const tpx_sharding *sh) {
  return sh->world;
}

static inline size_t tpx__sv_num_modules(const tpx_sharding *sh) {
  return sh->num_modules;
}

static inline size_t tpx__sv_num_params(const tpx_sharding *sh) {
  return sh->num_params;
}

/* The plan entry applied to module m itself, or -1. */
static inline int64_t tpx__sv_module_entry(const tpx_sharding *sh, int64_t m) {
  return sh->module_entry[m];
}

/* Style and key of plan entry e (e >= 0, from the calls above). */
static inline const tpx_style *tpx__sv_entry_style(const tpx_sharding *sh,
                                                   int64_t e) {
  return &sh->entry_styles[e];
}

static inline const char *tpx__sv_entry_key(const tpx_sharding *sh, int64_t e) {
  return sh->entry_keys[e];
}

/* Placement of parameter p on mesh dim d. */
static inline tpx_placement tpx__sv_placement(const tpx_sharding *sh, int64_t p,
                                              int d) {
  return sh->placements[p * sh->ndim + d];
}

/* The plan entry covering parameter p, and the module its style applies
 * to (-1 when none). */
static inline int64_t tpx__sv_param_entry(const tpx_sharding *sh, int64_t p) {
  return sh->param_entry[p];
}

static inline int64_t tpx__sv_param_styled(const tpx_sharding *sh, int64_t p) {
  return sh->param_styled[p];
}

#endif /* TPX_SHARD_SHARDING_VIEW_H */
