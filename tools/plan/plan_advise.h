/* plan_advise.h — what the two halves of the mesh advisor share
 * (`tpx plan --gpus N`): the candidate meshes and their costs, one advice
 * run, and the alternatives costed when nothing fits. cmd_plan_advise.c
 * enumerates, costs and ranks; cmd_plan_advise_print.c prints the advice
 * as text or tpx-advice/1 JSON. Private to tools/plan/. */
#ifndef TPX_TOOLS_PLAN_ADVISE_H
#define TPX_TOOLS_PLAN_ADVISE_H

#include <stddef.h>
#include <stdint.h>

#include "plan_extra.h"
#include "plan_setup.h"

#define RANK_RULE                                                              \
  "meshes that fit, in traffic bands (bytes sent per step within 10% of the "  \
  "band's least), the most memory left first within a band; then those "       \
  "that do not fit, by peak; then the rejected"
#define BAND_REL 0.10
#define BAND_ABS ((int64_t)1 << 20)

typedef struct {
  int64_t dpr, dps, cp, tp;
  int64_t ep; /* expert parallelism (1 for a model that is not a custom
                 MoE model) */
  int rejected;
  char why[512];
  tpx_memory worst;    /* the rank with the largest peak */
  tpx_traffic traffic; /* the rank sending most */
  int64_t host_max;    /* the most host bytes of any rank (offload) */
  int fits;            /* device (and, with offload, host) memory fit */
  int band; /* traffic band among the fitting meshes, 0 first; -1 none */
  /* Why upstream (NeMo Automodel) would refuse this mesh although tpx
   * plans it (from the sharding's diagnostics), or "". */
  char upstream[160];
} cand_t;

static inline int kind_of(const cand_t *c) {
  return c->rejected ? 2 : c->fits ? 0 : 1;
}

/* One advice run: every mesh of x->gpus ranks, planned, costed, ranked. */
typedef struct {
  cand_t *c;
  size_t n;
  tpx_memory_options mo;
} advice_t;

static inline size_t count_fitting(const advice_t *a) {
  size_t k = 0;
  for (size_t i = 0; i < a->n; i++) k += kind_of(&a->c[i]) == 0;
  return k;
}

/* What would make a mesh fit when none does: the same advice costed with
 * cp, activation checkpointing, CPU offload, or all three. */
enum { ALT_CP, ALT_AC, ALT_OFFLOAD, ALT_ALL, ALT_N };

typedef struct {
  advice_t run[ALT_N];
  int costed[ALT_N];
} alts_t;

static inline int alt_fits(const alts_t *s, int k) {
  return s->costed[k] && s->run[k].n && kind_of(&s->run[k].c[0]) == 0;
}

/* The advice `a` (and the alternatives `s`) as text or tpx-advice/1 JSON
 * on stdout, with the best mesh as a runnable command built from `pa`. */
void advise_print_text(const advice_t *a, const alts_t *s,
                       const tpx_model *model, const plan_extra *x,
                       const struct tpx_cli_plan_args *pa);
void advise_print_json(const advice_t *a, const alts_t *s,
                       const tpx_model *model, const plan_extra *x,
                       const struct tpx_cli_plan_args *pa);

#endif
