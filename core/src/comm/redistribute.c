/* redistribute.c — placements -> placements over a mesh communicator
 * (tpx/redistribute.h).
 *
 * The move is planned as a list of steps, each changing the placement of
 * one mesh dim; a step runs one collective on that dim's sub-group. Every
 * box (what a group member holds before and after the step) comes from
 * tpx_layout_local_slice, so uneven and nested shards need no arithmetic
 * here: a step packs the boxes into equal, padded blocks for the collective
 * (DTensor's pad / unpad) and unpacks them. When the blocks already lie in
 * order in the buffer and are even, the collective runs on the buffers
 * directly with no packing. Buffers (the caller's and the temporaries)
 * live in the mesh comm's memory space and are only moved through it
 * (device/memspace.h), so device memory works; nothing reads data.
 *
 * Not here: the collectives (comm.c and the backends), shard arithmetic
 * (layout). */
#include "tpx/redistribute.h"

#include <stdlib.h>
#include <string.h>

#include "base/try.h"
#include "comm/box.h"
#include "comm/comm_impl.h"

typedef struct rd {
  tpx_mesh_comm *mc;
  const tpx_mesh *mesh;
  const int64_t *shape;
  int ndim;
  tpx_dtype dtype;
  size_t es;
  int64_t me; /* world (mesh) rank */
  tpx_error *err;
  const tpx__memspace *ms; /* the comm's: every buffer moves through it */
} rd;

#define TRY TPX__TRY

static tpx_status slice_of(const rd *r, const tpx_placement *pl, int64_t rank,
                           tpx_slice *out) {
  return tpx_layout_local_slice(r->shape, r->ndim, r->mesh, pl, rank, out,
                                r->err);
}

static size_t numel(const tpx_slice *s) { return (size_t)tpx_slice_numel(s); }

/* A temporary of n elements in the comm's memory space. */
static void *alloc(const rd *r, size_t n, int zero, tpx_status *st) {
  void *p = NULL;
  *st = tpx__ms_alloc(r->ms, n * r->es, zero, &p, r->err);
  return p;
}

static void release(const rd *r, void *p) { tpx__ms_free(r->ms, p); }

/* `n` elements from `from` to `to` (both in the comm's memory space). */
static tpx_status copy(const rd *r, void *to, const void *from, size_t n) {
  return tpx__ms_copy(r->ms, to, from, n * r->es, TPX__D2D, r->err);
}

static tpx_status box_copy(const rd *r, void *to_buf, const tpx_slice *to,
                           const void *from_buf, const tpx_slice *from,
                           const tpx_slice *part) {
  return tpx__box_copy(r->ms, TPX__D2D, to_buf, to, from_buf, from, part, r->es,
                       r->err);
}

/* The group along mesh dim m: members' world ranks and my index. */
typedef struct group {
  tpx_comm *comm;
  int size;
  int index;
  int64_t *ranks;
} group;

static tpx_status group_get(const rd *r, int m, group *g) {
  memset(g, 0, sizeof *g);
  g->comm = tpx_mesh_comm_dim(r->mc, m);
  g->size = tpx_comm_size(g->comm);
  g->ranks = malloc((size_t)g->size * sizeof *g->ranks);
  if (!g->ranks)
    return tpx_error_set(r->err, TPX_NO_MEMORY, "redistribute: group");
  int64_t idx = 0;
  TRY(tpx_mesh_group_ranks(r->mesh, tpx_mesh_dim_name(r->mesh, m), r->me,
                           g->ranks, &idx, r->err));
  g->index = (int)idx;
  if (g->index != tpx_comm_rank(g->comm))
    return tpx_error_set(r->err, TPX_INTERNAL,
                         "redistribute: mesh dim %d comm rank %d differs from "
                         "the mesh group index %d",
                         m, tpx_comm_rank(g->comm), g->index);
  return TPX_OK;
}

/* Every member's box under `pl` (g->size of them, in a new array *out
 * that the caller frees, also on failure) and the largest one's element
 * count. */
static tpx_status group_boxes(const rd *r, const group *g,
                              const tpx_placement *pl, tpx_slice **out,
                              size_t *c) {
  *c = 0;
  *out = malloc((size_t)g->size * sizeof **out);
  if (!*out)
    return tpx_error_set(r->err, TPX_NO_MEMORY, "redistribute: boxes");
  for (int j = 0; j < g->size; j++) {
    TRY(slice_of(r, pl, g->ranks[j], &(*out)[j]));
    if (numel(&(*out)[j]) > *c)
      *c = numel(&(*out)[j]);
  }
  return TPX_OK;
}

/* True when boxes[j] (j < n) each hold `c` elements and lie one after the
 * other, in order, from the start of a buffer holding `whole`; then a
 * collective can use that buffer directly. */
static int in_order(const tpx_slice *boxes, int n, size_t c,
                    const tpx_slice *whole) {
  size_t expect = 0;
  for (int j = 0; j < n; j++) {
    const tpx_slice *b = &boxes[j];
    if (numel(b) != c)
      return 0;
    /* b is one contiguous run of `whole` when, before the last dim where
     * it is narrower than whole, it is one element thick. */
    size_t off = 0, stride = 1;
    int last_diff = -1;
    for (int i = whole->ndim - 1; i >= 0; i--) {
      off += (size_t)(b->offset[i] - whole->offset[i]) * stride;
      stride *= (size_t)whole->length[i];
      if (last_diff < 0 && b->length[i] != whole->length[i])
        last_diff = i;
    }
    for (int i = 0; i < last_diff; i++)
      if (b->length[i] > 1)
        return 0;
    if (c > 0 && off != expect)
      return 0;
    expect += c;
  }
  return 1;
}

/* ---- steps: each reads `in` (my box under cur) and fills `out` (my box
 * under nxt), where nxt differs from cur only on mesh dim m. ------------- */

static tpx_status step_gather(const rd *r, int m, const tpx_placement *cur,
                              const tpx_placement *nxt, const void *in,
                              void *out) {
  group g;
  tpx_slice *boxes = NULL, after, mine;
  void *sendbuf = NULL, *recvbuf = NULL;
  size_t c = 0;
  tpx_status st = group_get(r, m, &g);
  if (st == TPX_OK)
    st = group_boxes(r, &g, cur, &boxes, &c);
  if (st == TPX_OK)
    st = slice_of(r, nxt, r->me, &after);
  if (st == TPX_OK)
    st = slice_of(r, cur, r->me, &mine);
  if (st == TPX_OK && in_order(boxes, g.size, c, &after)) {
    st = tpx_comm_all_gather(g.comm, in, out, c, r->dtype, r->err);
  } else if (st == TPX_OK) {
    const void *s = in;
    if (numel(&mine) != c) { /* pad my piece to the full chunk */
      sendbuf = alloc(r, c, 1, &st);
      if (st == TPX_OK)
        st = copy(r, sendbuf, in, numel(&mine));
      s = sendbuf;
    }
    if (st == TPX_OK)
      recvbuf = alloc(r, c * (size_t)g.size, 0, &st);
    if (st == TPX_OK)
      st = tpx_comm_all_gather(g.comm, s, recvbuf, c, r->dtype, r->err);
    for (int j = 0; st == TPX_OK && j < g.size; j++)
      st = box_copy(r, out, &after,
                    (unsigned char *)recvbuf + (size_t)j * c * r->es, &boxes[j],
                    &boxes[j]);
  }
  release(r, sendbuf);
  release(r, recvbuf);
  free(boxes);
  free(g.ranks);
  return st;
}

static tpx_status step_all_to_all(const rd *r, int m, const tpx_placement *cur,
                                  const tpx_placement *nxt, const void *in,
                                  void *out) {
  group g;
  tpx_status st = group_get(r, m, &g);
  size_t n = (size_t)g.size;
  tpx_slice *before = st == TPX_OK ? malloc(2 * n * sizeof *before) : NULL;
  tpx_slice *after = before ? before + n : NULL;
  void *sendbuf = NULL, *recvbuf = NULL;
  if (st == TPX_OK && !before)
    st = tpx_error_set(r->err, TPX_NO_MEMORY, "redistribute: boxes");
  for (size_t j = 0; st == TPX_OK && j < n; j++) {
    st = slice_of(r, cur, g.ranks[j], &before[j]);
    if (st == TPX_OK)
      st = slice_of(r, nxt, g.ranks[j], &after[j]);
  }
  size_t c = 0;
  for (size_t i = 0; st == TPX_OK && i < n; i++)
    for (size_t j = 0; j < n; j++) {
      tpx_slice x = tpx__box_intersect(&before[i], &after[j]);
      if (numel(&x) > c)
        c = numel(&x);
    }
  if (st == TPX_OK)
    sendbuf = alloc(r, c * n, 0, &st);
  if (st == TPX_OK)
    recvbuf = alloc(r, c * n, 0, &st);
  if (st == TPX_OK) {
    const tpx_slice *mine = &before[g.index];
    for (size_t j = 0; st == TPX_OK && j < n; j++) {
      tpx_slice x = tpx__box_intersect(mine, &after[j]);
      st = box_copy(r, (unsigned char *)sendbuf + j * c * r->es, &x, in, mine,
                    &x);
    }
    if (st == TPX_OK)
      st = tpx_comm_all_to_all(g.comm, sendbuf, recvbuf, c, r->dtype, r->err);
  }
  if (st == TPX_OK) {
    const tpx_slice *mine = &after[g.index];
    for (size_t i = 0; st == TPX_OK && i < n; i++) {
      tpx_slice x = tpx__box_intersect(&before[i], mine);
      st = box_copy(r, out, mine, (unsigned char *)recvbuf + i * c * r->es, &x,
                    &x);
    }
  }
  release(r, sendbuf);
  release(r, recvbuf);
  free(before);
  free(g.ranks);
  return st;
}

static tpx_status step_reduce_scatter(const rd *r, int m,
                                      const tpx_placement *cur,
                                      const tpx_placement *nxt, const void *in,
                                      void *out) {
  group g;
  tpx_slice *boxes = NULL, whole;
  void *sendbuf = NULL;
  tpx_reduce_op op = cur[m].op;
  size_t c = 0;
  tpx_status st = group_get(r, m, &g);
  if (st == TPX_OK)
    st = slice_of(r, cur, r->me, &whole);
  if (st == TPX_OK)
    st = group_boxes(r, &g, nxt, &boxes, &c);
  if (st == TPX_OK && in_order(boxes, g.size, c, &whole)) {
    st = tpx_comm_reduce_scatter(g.comm, in, out, c, r->dtype, op, r->err);
  } else if (st == TPX_OK) {
    sendbuf = alloc(r, c * (size_t)g.size, 1, &st);
    for (int j = 0; st == TPX_OK && j < g.size; j++)
      st = box_copy(r, (unsigned char *)sendbuf + (size_t)j * c * r->es,
                    &boxes[j], in, &whole, &boxes[j]);
    unsigned char *mine =
        sendbuf ? (unsigned char *)sendbuf + (size_t)g.index * c * r->es : NULL;
    if (st == TPX_OK)
      st = tpx_comm_reduce_scatter(g.comm, sendbuf, mine, c, r->dtype, op,
                                   r->err);
    if (st == TPX_OK)
      st = copy(r, out, mine, numel(&boxes[g.index]));
  }
  release(r, sendbuf);
  free(boxes);
  free(g.ranks);
  return st;
}

/* Replicate -> Partial(op) on dim m: sum keeps the value on index 0 and
 * zeroes the rest; avg / max / min keep it everywhere. */
static tpx_status partition(const rd *r, int m, tpx_reduce_op op,
                            const void *in, void *out, size_t n) {
  tpx_comm *comm = tpx_mesh_comm_dim(r->mc, m);
  if (op == TPX_REDUCE_SUM && tpx_comm_rank(comm) != 0)
    return tpx__ms_memset(r->ms, out, 0, n * r->es, r->err);
  return copy(r, out, in, n);
}

static tpx_status run_step(const rd *r, int m, const tpx_placement *cur,
                           const tpx_placement *nxt, const void *in,
                           void *out) {
  tpx_placement a = cur[m], b = nxt[m];
  tpx_slice mine, after;
  TRY(slice_of(r, cur, r->me, &mine));
  TRY(slice_of(r, nxt, r->me, &after));
  tpx_comm *comm = tpx_mesh_comm_dim(r->mc, m);
  if (a.kind == TPX_SHARD && b.kind == TPX_REPLICATE)
    return step_gather(r, m, cur, nxt, in, out);
  if (a.kind == TPX_SHARD && b.kind == TPX_SHARD)
    return step_all_to_all(r, m, cur, nxt, in, out);
  if (a.kind == TPX_PARTIAL && b.kind == TPX_REPLICATE)
    return tpx_comm_all_reduce(comm, in, out, numel(&mine), r->dtype, a.op,
                               r->err);
  if (a.kind == TPX_PARTIAL && b.kind == TPX_SHARD)
    return step_reduce_scatter(r, m, cur, nxt, in, out);
  if (a.kind == TPX_REPLICATE && b.kind == TPX_SHARD)
    return box_copy(r, out, &after, in, &mine, &after);
  if (a.kind == TPX_REPLICATE && b.kind == TPX_PARTIAL)
    return partition(r, m, b.op, in, out, numel(&after));
  if (a.kind == TPX_PARTIAL && b.kind == TPX_PARTIAL) {
    TRY(tpx_comm_all_reduce(comm, in, out, numel(&mine), r->dtype, a.op,
                            r->err));
    return partition(r, m, b.op, out, out, numel(&after));
  }
  if (a.kind == TPX_SHARD && b.kind == TPX_PARTIAL) {
    TRY(step_gather(r, m, cur, nxt, in, out));
    return partition(r, m, b.op, out, out, numel(&after));
  }
  return tpx_error_set(r->err, TPX_UNSUPPORTED,
                       "redistribute: mesh dim %d: no rule from kind %d to "
                       "kind %d",
                       m, (int)a.kind, (int)b.kind);
}

/* ---- planning ----------------------------------------------------------- */

typedef struct step {
  int m;
  tpx_placement to;
} step;

static int shards(tpx_placement p, int t) {
  return (p.kind == TPX_SHARD || p.kind == TPX_STRIDED_SHARD) && p.dim == t;
}

/* Steps from src to dst (both normalised); see the header for the rule. */
static tpx_status plan(const rd *r, const tpx_placement *src,
                       const tpx_placement *dst, int k, step *steps,
                       int *nsteps) {
  int users[TPX_MAX_TENSOR_DIMS] = {0}; /* mesh dims sharding tensor dim t */
  for (int t = 0; t < r->ndim; t++)
    for (int m = 0; m < k; m++)
      if (shards(src[m], t) || shards(dst[m], t))
        users[t]++;
  int entangled = 0;
  for (int m = 0; m < k; m++) {
    if (tpx_placement_equal(src[m], dst[m]))
      continue;
    if (src[m].kind == TPX_STRIDED_SHARD || dst[m].kind == TPX_STRIDED_SHARD)
      return tpx_error_set(r->err, TPX_UNSUPPORTED,
                           "redistribute: mesh dim %d (%s): strided_shard "
                           "placements cannot be redistributed",
                           m, tpx_mesh_dim_name(r->mesh, m));
    for (int t = 0; t < r->ndim; t++)
      if ((shards(src[m], t) || shards(dst[m], t)) && users[t] > 1)
        entangled = 1;
  }
  int n = 0;
  if (!entangled) {
    for (int m = 0; m < k; m++)
      if (!tpx_placement_equal(src[m], dst[m]))
        steps[n++] = (step){m, dst[m]};
    *nsteps = n;
    return TPX_OK;
  }
  /* Nested: gather right to left every shard that changes or shares its
   * tensor dim, then apply the target left to right. */
  tpx_placement cur[TPX_MESH_MAX_DIMS];
  memcpy(cur, src, (size_t)k * sizeof *cur);
  for (int m = k - 1; m >= 0; m--) {
    if (cur[m].kind != TPX_SHARD && cur[m].kind != TPX_STRIDED_SHARD)
      continue;
    int t = cur[m].dim;
    if (tpx_placement_equal(cur[m], dst[m]) && users[t] <= 1)
      continue;
    if (cur[m].kind == TPX_STRIDED_SHARD)
      return tpx_error_set(r->err, TPX_UNSUPPORTED,
                           "redistribute: mesh dim %d (%s): strided_shard "
                           "placements cannot be redistributed",
                           m, tpx_mesh_dim_name(r->mesh, m));
    cur[m] = tpx_placement_replicate();
    steps[n++] = (step){m, cur[m]};
  }
  for (int m = 0; m < k; m++)
    if (!tpx_placement_equal(cur[m], dst[m]))
      steps[n++] = (step){m, dst[m]};
  *nsteps = n;
  return TPX_OK;
}

tpx_status tpx_redistribute(tpx_mesh_comm *mc, const int64_t *shape, int ndim,
                            tpx_dtype dtype, const tpx_placement *src_pl,
                            const void *src, const tpx_placement *dst_pl,
                            void *dst, tpx_error *err) {
  const char *w = "redistribute";
  if (!mc || !src_pl || !dst_pl || (!shape && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !mc       ? "mesh comm"
                         : !src_pl ? "src placements"
                         : !dst_pl ? "dst placements"
                                   : "shape");
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: ndim %d out of range 0..%d", w, ndim,
                         TPX_MAX_TENSOR_DIMS);
  rd r = {mc,
          tpx_mesh_comm_mesh(mc),
          shape,
          ndim,
          dtype,
          tpx_dtype_size(dtype),
          tpx_comm_rank(tpx_mesh_comm_world(mc)),
          err,
          tpx__comm_ms(tpx_mesh_comm_world(mc))};
  if (r.es == 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: unknown dtype %d", w,
                         (int)dtype);
  int k = tpx_mesh_ndim(r.mesh);
  tpx_placement src_n[TPX_MESH_MAX_DIMS], dst_n[TPX_MESH_MAX_DIMS];
  for (int m = 0; m < k; m++) {
    TRY(tpx_placement_normalize(src_pl[m], ndim, &src_n[m], err));
    TRY(tpx_placement_normalize(dst_pl[m], ndim, &dst_n[m], err));
  }
  tpx_slice s_in, s_out;
  TRY(slice_of(&r, src_n, r.me, &s_in));
  TRY(slice_of(&r, dst_n, r.me, &s_out));
  if ((!src && numel(&s_in)) || (!dst && numel(&s_out)))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: %s buffer is NULL but this rank holds %zu "
                         "elements of it",
                         w, !src && numel(&s_in) ? "src" : "dst",
                         !src && numel(&s_in) ? numel(&s_in) : numel(&s_out));
  step steps[2 * TPX_MESH_MAX_DIMS];
  int nsteps = 0;
  TRY(plan(&r, src_n, dst_n, k, steps, &nsteps));
  if (nsteps == 0)
    return copy(&r, dst, src, numel(&s_in));
  tpx_placement cur[TPX_MESH_MAX_DIMS], nxt[TPX_MESH_MAX_DIMS];
  memcpy(cur, src_n, (size_t)k * sizeof *cur);
  const void *in = src;
  void *owned = NULL; /* temporary holding `in` when it is not src */
  tpx_status st = TPX_OK;
  for (int i = 0; i < nsteps && st == TPX_OK; i++) {
    memcpy(nxt, cur, (size_t)k * sizeof *nxt);
    nxt[steps[i].m] = steps[i].to;
    void *out = dst;
    if (i + 1 < nsteps) {
      tpx_slice s;
      st = slice_of(&r, nxt, r.me, &s);
      out = st == TPX_OK ? alloc(&r, numel(&s), 0, &st) : NULL;
    }
    if (st == TPX_OK)
      st = run_step(&r, steps[i].m, cur, nxt, in, out);
    release(&r, owned);
    owned = out == dst ? NULL : out;
    in = out;
    memcpy(cur, nxt, (size_t)k * sizeof *cur);
  }
  release(&r, owned);
  return st;
}
