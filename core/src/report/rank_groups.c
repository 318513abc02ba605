/* report/rank_groups.c — grouping ranks whose per-rank figures are equal
 * (see rank_groups.h), and the grouped per_rank array of tpx-report/1.
 * O(world log world): at a million ranks the array is a few hundred bytes
 * instead of ~100 MB. */
#include <stdlib.h>
#include <string.h>

#include "report/rank_groups.h"
#include "tpx/mesh.h"

void tpx__rank_figures(const tpx_sharding *sh, int64_t rank,
                       int64_t fig[TPX__RANK_FIGURES]) {
  fig[0] = tpx_sharding_rank_param_bytes(sh, rank);
  fig[1] = tpx_sharding_rank_peak_bytes(sh, rank);
}

typedef struct {
  int64_t fig[TPX__RANK_FIGURES];
  int64_t rank;
} rank_fig;

static int by_figures(const void *a, const void *b) {
  const rank_fig *x = a, *y = b;
  for (int i = 0; i < TPX__RANK_FIGURES; i++)
    if (x->fig[i] != y->fig[i])
      return x->fig[i] < y->fig[i] ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

typedef struct {
  int64_t first, begin, end; /* first rank; slice of the sorted array */
} span;

static int by_first(const void *a, const void *b) {
  const span *x = a, *y = b;
  return (x->first > y->first) - (x->first < y->first);
}

int tpx__rank_groups_build(const tpx_sharding *sh, tpx__rank_groups *out) {
  memset(out, 0, sizeof *out);
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  size_t n = world > 0 ? (size_t)world : 0;
  rank_fig *rf = malloc((n ? n : 1) * sizeof *rf);
  span *sp = malloc((n ? n : 1) * sizeof *sp);
  out->ranks = malloc((n ? n : 1) * sizeof *out->ranks);
  out->start = malloc((n + 1) * sizeof *out->start);
  if (!rf || !sp || !out->ranks || !out->start) {
    free(rf);
    free(sp);
    tpx__rank_groups_free(out);
    return -1;
  }
  for (size_t r = 0; r < n; r++) {
    rf[r].rank = (int64_t)r;
    tpx__rank_figures(sh, (int64_t)r, rf[r].fig);
  }
  qsort(rf, n, sizeof *rf, by_figures);
  size_t ng = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || memcmp(rf[i].fig, rf[i - 1].fig, sizeof rf[i].fig) != 0) {
      if (ng)
        sp[ng - 1].end = (int64_t)i;
      sp[ng].first = rf[i].rank; /* ranks ascend within equal figures */
      sp[ng].begin = (int64_t)i;
      ng++;
    }
  }
  if (ng)
    sp[ng - 1].end = (int64_t)n;
  qsort(sp, ng, sizeof *sp, by_first);
  size_t o = 0;
  for (size_t g = 0; g < ng; g++) {
    out->start[g] = (int64_t)o;
    for (int64_t i = sp[g].begin; i < sp[g].end; i++)
      out->ranks[o++] = rf[i].rank;
  }
  out->start[ng] = (int64_t)o;
  out->num_groups = (int64_t)ng;
  free(rf);
  free(sp);
  return 0;
}

void tpx__rank_groups_free(tpx__rank_groups *g) {
  if (!g)
    return;
  free(g->ranks);
  free(g->start);
  memset(g, 0, sizeof *g);
}

int tpx__rank_groups_json(const tpx_sharding *sh, char *const *names,
                          int indent, tpx__sbuf *b) {
  tpx__rank_groups g;
  if (tpx__rank_groups_build(sh, &g) != 0)
    return -1;
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  int nd = tpx_mesh_ndim(mesh);
  const char *sep = indent > 0 ? ": " : ":";
  const char *comma = indent > 0 ? ", " : ",";
  int64_t coords[TPX_MESH_MAX_DIMS];
  tpx__sbuf_printf(b, "[");
  for (int64_t k = 0; k < g.num_groups && !b->failed; k++) {
    const int64_t *m = g.ranks + g.start[k];
    int64_t count = g.start[k + 1] - g.start[k];
    int64_t fig[TPX__RANK_FIGURES];
    tpx__rank_figures(sh, m[0], fig);
    if (tpx_mesh_coords(mesh, m[0], coords, NULL) != TPX_OK)
      memset(coords, 0, sizeof coords);
    if (k)
      tpx__sbuf_printf(b, ",");
    if (indent > 0)
      tpx__sbuf_printf(b, "\n%*s", 2 * indent, "");
    tpx__sbuf_printf(b, "{\"rank\"%s%lld%s\"coords\"%s{", sep, (long long)m[0],
                     comma, sep);
    for (int d = 0; d < nd; d++)
      tpx__sbuf_printf(b, "%s%s%s%lld", d ? comma : "", names[d], sep,
                       (long long)coords[d]);
    tpx__sbuf_printf(b,
                     "}%s\"param_bytes\"%s%lld%s\"peak_bytes\"%s%lld%s"
                     "\"num_ranks\"%s%lld%s\"ranks\"%s[",
                     comma, sep, (long long)fig[0], comma, sep,
                     (long long)fig[1], comma, sep, (long long)count, comma,
                     sep);
    for (int64_t i = 0; i < count;) {
      int64_t j = i;
      while (j + 1 < count && m[j + 1] == m[j] + 1)
        j++;
      tpx__sbuf_printf(b, "%s[%lld%s%lld]", i ? comma : "", (long long)m[i],
                       comma, (long long)m[j]);
      i = j + 1;
    }
    tpx__sbuf_printf(b, "]}");
  }
  if (indent > 0 && g.num_groups > 0)
    tpx__sbuf_printf(b, "\n%*s", indent, "");
  tpx__sbuf_printf(b, "]");
  tpx__rank_groups_free(&g);
  return b->failed ? -1 : 0;
}
