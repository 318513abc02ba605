/* report/rank_groups.c — grouping ranks whose per-rank figures are equal
 * (see rank_groups.h), and the grouped per_rank array of tpx-report/1.
 * O(world log world): at a million ranks the array is a few hundred bytes
 * instead of ~100 MB. */
#include <stdlib.h>
#include <string.h>

#include "report/rank_groups.h"
#include "report/report_memory.h"
#include "tpx/mesh.h"

static void memory_figures(const tpx_memory *m, int64_t *fig) {
  fig[0] = m->params;
  fig[1] = m->grads;
  fig[2] = m->optimizer;
  fig[3] = m->gather_peak;
  fig[4] = m->activations;
  fig[5] = m->peak;
}

int tpx__rank_figures(const tpx_sharding *sh, const tpx_memory_options *mo,
                      int64_t rank, int64_t fig[TPX__RANK_FIGURES]) {
  tpx_memory m;
  fig[0] = tpx_sharding_rank_param_bytes(sh, rank);
  fig[1] = tpx_sharding_rank_peak_bytes(sh, rank);
  if (tpx_memory_rank(sh, mo, rank, &m, NULL) != TPX_OK)
    return -1;
  memory_figures(&m, fig + 2);
  return 0;
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

int tpx__rank_groups_build(const tpx_sharding *sh, const tpx_memory_options *mo,
                           tpx__rank_groups *out) {
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
  /* Memory terms in windows: tpx_memory_ranks shares work across ranks. */
  enum { WINDOW = 512 };
  tpx_memory *win = malloc(WINDOW * sizeof *win);
  int bad = win == NULL;
  for (size_t r0 = 0; r0 < n && !bad; r0 += WINDOW) {
    size_t k = n - r0 < WINDOW ? n - r0 : WINDOW;
    if (tpx_memory_ranks(sh, mo, (int64_t)r0, k, win, NULL) != TPX_OK) {
      bad = 1;
      break;
    }
    for (size_t i = 0; i < k; i++) {
      int64_t r = (int64_t)(r0 + i);
      rf[r].rank = r;
      rf[r].fig[0] = tpx_sharding_rank_param_bytes(sh, r);
      rf[r].fig[1] = tpx_sharding_rank_peak_bytes(sh, r);
      memory_figures(&win[i], rf[r].fig + 2);
    }
  }
  free(win);
  if (bad) {
    free(rf);
    free(sp);
    tpx__rank_groups_free(out);
    return -1;
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

int tpx__rank_groups_json(const tpx_sharding *sh, const tpx_memory_options *mo,
                          char *const *names, int indent, tpx__sbuf *b) {
  tpx__rank_groups g;
  if (tpx__rank_groups_build(sh, mo, &g) != 0)
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
    if (tpx__rank_figures(sh, mo, m[0], fig) != 0) {
      b->failed = 1;
      break;
    }
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
    tpx__report_moe_coords(sh, m[0], sep, comma, b);
    tpx__sbuf_printf(b, "}%s\"param_bytes\"%s%lld%s\"peak_bytes\"%s%lld", comma,
                     sep, (long long)fig[0], comma, sep, (long long)fig[1]);
    tpx_memory mem;
    if (tpx_memory_rank(sh, mo, m[0], &mem, NULL) != TPX_OK) {
      b->failed = 1;
      break;
    }
    tpx__report_memory_write(b, &mem, sep, comma,
                             tpx__report_memory_offload(mo));
    tpx__sbuf_printf(b, "%s\"num_ranks\"%s%lld%s\"ranks\"%s[", comma, sep,
                     (long long)count, comma, sep);
    for (int64_t i = 0; i < count;) {
      int64_t j = i;
      while (j + 1 < count && m[j + 1] == m[j] + 1) j++;
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
