/* plan/match_internal.h — the match result's layout, shared by matching
 * (match.c) and the replicated-by-omission producer (omission.c), and the
 * omission entry points the sharding's application calls. Internal. */
#ifndef TPX_PLAN_MATCH_INTERNAL_H
#define TPX_PLAN_MATCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/match.h"
#include "tpx/placement.h"

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

#endif /* TPX_PLAN_MATCH_INTERNAL_H */
