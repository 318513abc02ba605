/* plan/match_internal.h — the match result's layout, shared by matching
 * (match.c) and the replicated-by-omission producer (omission.c).
 * Internal to core/src/plan/; the sharding's application sees only
 * plan/omission_view.h. */
#ifndef TPX_PLAN_MATCH_INTERNAL_H
#define TPX_PLAN_MATCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/match.h"
#include "tpx/placement.h"
#include "plan/omission_view.h"

/* Generalized parameter names (layer indices as '*') that a
 * replicated-by-omission warning already names. */
typedef struct tpx__name_set tpx__name_set;

struct tpx_match {
  size_t nentries;
  size_t
      *off; /* [nentries + 1]: entry e's modules are mods[off[e]..off[e+1]) */
  int64_t *mods;
  size_t nmods, capmods;
  int64_t nmodules;
  int64_t *module_entry;  /* [nmodules]: first entry applied, or -1 */
  tpx__name_set *omitted; /* what matching warned about; NULL when none */
};

/* replicated-by-omission, the sibling rule (tpx/match.h): a parameter of a
 * module no key covers, while a sibling module holding a parameter of the
 * same name and shape is sharded by a parameter-sharding key. Warnings go
 * to `diags`; the names are kept in m->omitted. TPX_NO_MEMORY on failure. */
tpx_status tpx__omission_by_sibling(tpx_match *m, const tpx_plan *plan,
                                    const tpx_model *model,
                                    tpx_diag_list *diags);

/* 1 when matching already warned about the generalized name `general`. */
int tpx__match_omitted(const tpx_match *m, const char *general);

void tpx__name_set_destroy(tpx__name_set *s);

#endif /* TPX_PLAN_MATCH_INTERNAL_H */
