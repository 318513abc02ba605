/* shard/selection_opts.h — the selection handed to tpx_sharding_create
 * whole (tpx_sharding_options.selection), turned into plain options.
 * Private to the shard area (sharding.c calls it). */
#ifndef TPX_SHARD_SELECTION_OPTS_H
#define TPX_SHARD_SELECTION_OPTS_H

#include "tpx/error.h"
#include "tpx/plan.h"
#include "tpx/sharding.h"

/* The options' selection (tpx_sharding_options.selection)
 * turned into plain options, in place: *o gets the selection's FSDP units,
 * reshard flags, fp32 parameters, ep and expert patterns where it has none
 * of its own, and the
 * strategy's mixed-precision default; *plan (when NULL) the selection's
 * plan. The arrays live in *s until tpx__selection_opts_free. */
typedef struct tpx__selection_opts {
  const char **units;
  int *reshard;
  const char **fp32;
  const char **experts;
} tpx__selection_opts;
tpx_status tpx__selection_opts_apply(tpx_sharding_options *o,
                                     const tpx_plan **plan,
                                     tpx__selection_opts *s, tpx_error *err);
void tpx__selection_opts_free(tpx__selection_opts *s);

#endif /* TPX_SHARD_SELECTION_OPTS_H */
