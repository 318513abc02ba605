/* plan/omission_view.h — the replicated-by-omission entry point the
 * sharding's application (shard/apply.c) calls after the styles are
 * applied. The match result's layout and the sibling rule stay in
 * plan/match_internal.h. */
#ifndef TPX_PLAN_OMISSION_VIEW_H
#define TPX_PLAN_OMISSION_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/match.h"
#include "tpx/model.h"
#include "tpx/placement.h"

/* replicated-by-omission, the placement rule (after the styles are
 * applied): a parameter no style places, while a parameter of the same
 * local name and shape is sharded on tp in a sibling module of the same
 * parent or at the same place in another layer. Names matching already
 * warned about are skipped, so each parameter is named once. */
typedef struct tpx__omission_in {
  const tpx_model *model;
  const tpx_match *match;
  size_t num_params;
  const int64_t *param_styled;   /* < 0: no style places the parameter */
  const int64_t *param_entry;    /* the key that places it */
  const char *const *entry_keys; /* [num_entries] */
  size_t num_entries;
  const tpx_placement *tp_placement; /* [num_params * stride] */
  size_t stride;
  uint64_t *compare; /* [num_params] nonzero: compared; used as scratch */
} tpx__omission_in;

tpx_status tpx__omission_by_placement(const tpx__omission_in *in,
                                      tpx_diag_list *diags, tpx_error *err);

#endif /* TPX_PLAN_OMISSION_VIEW_H */
