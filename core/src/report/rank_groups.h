/* report/rank_groups.h — ranks whose per-rank figures are all identical,
 * grouped: how tpx-report/1 writes per_rank above TPX__PER_RANK_MAX ranks
 * (one entry per group, with the rank ranges it stands for). Private to the
 * report area. Not the figures themselves (tpx/sharding.h). */
#ifndef TPX_REPORT_RANK_GROUPS_H
#define TPX_REPORT_RANK_GROUPS_H

#include <stdint.h>

#include "report/report_util.h"
#include "tpx/memory.h"
#include "tpx/sharding.h"

/* Up to this many ranks, per_rank holds one entry per rank; above, one
 * entry per group of ranks with identical figures (docs/REPORT_FORMAT.md). */
#define TPX__PER_RANK_MAX 4096

/* The figures a per_rank entry carries besides rank and coords (param and
 * peak bytes, then the six training-memory terms of tpx/memory.h under the
 * options `mo`, NULL = defaults); two ranks with equal figures are one
 * group. 0 ok, -1 when the memory terms cannot be computed. */
#define TPX__RANK_FIGURES 8
int tpx__rank_figures(const tpx_sharding *sh, const tpx_memory_options *mo,
                      int64_t rank, int64_t fig[TPX__RANK_FIGURES]);

typedef struct tpx__rank_groups {
  int64_t *ranks; /* every rank, grouped; ascending within a group */
  int64_t *start; /* group g is ranks[start[g] .. start[g + 1]) */
  int64_t num_groups;
} tpx__rank_groups;

/* Groups ordered by their first rank. 0 ok, -1 out of memory. */
int tpx__rank_groups_build(const tpx_sharding *sh, const tpx_memory_options *mo,
                           tpx__rank_groups *out);
void tpx__rank_groups_free(tpx__rank_groups *g);

/* The grouped per_rank array as JSON text: each entry is the first rank's
 * entry ("rank", "coords", the figures) plus "num_ranks" and "ranks" (the
 * inclusive [first, last] ranges of its members). `names` are the mesh dim
 * names, JSON-escaped with quotes; `indent` 0 = compact. 0 ok, -1 out of
 * memory. */
int tpx__rank_groups_json(const tpx_sharding *sh, const tpx_memory_options *mo,
                          char *const *names, int indent, tpx__sbuf *b);

#endif /* TPX_REPORT_RANK_GROUPS_H */
