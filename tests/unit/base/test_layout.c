/* test_layout.c — tpx_layout_local_slice and friends against an independent
 * element-level reference of torch.chunk / DTensor / FSDP2 _StridedShard. */
#include <stdint.h>
#include <stdio.h>

#include "base_test.h"
#include "tpx/layout.h"

/* ---- reference ----------------------------------------------------------
 * Works on explicit index lists, the way torch.chunk is defined: the pieces
 * are consecutive runs of ceil(n/chunks) elements, as many as needed (maybe
 * fewer than `chunks`); DTensor gives the missing trailing ranks an empty
 * piece whose offset is the end of the parent. */
typedef struct ilist {
  int64_t base; /* where the list sits when empty (end of the parent) */
  int n;
  int64_t idx[64];
} ilist;

static ilist ref_chunk(const ilist *l, int64_t chunks, int64_t which) {
  ilist out = {0};
  int64_t cs = (l->n + chunks - 1) / chunks;
  int piece = 0;
  for (int start = 0; cs > 0 && start < l->n; start += (int)cs, piece++) {
    if (piece != which)
      continue;
    for (int j = start; j < l->n && j < start + cs; j++)
      out.idx[out.n++] = l->idx[j];
  }
  out.base = out.n ? out.idx[0] : (l->n ? l->idx[l->n - 1] + 1 : l->base);
  return out;
}

/* The list of global indices on tensor dim d held by the rank at `coords`:
 * plain shards left to right, then strided shards right to left. */
static ilist ref_dim(int64_t n, int d, int ndim, int m, const int64_t *sizes,
                     const tpx_placement *pl, const int64_t *coords) {
  ilist l = {0};
  for (int64_t i = 0; i < n; i++) l.idx[l.n++] = i;
  for (int k = 0; k < m; k++) {
    int pd = pl[k].dim < 0 ? pl[k].dim + ndim : pl[k].dim;
    if (pl[k].kind == TPX_SHARD && pd == d)
      l = ref_chunk(&l, sizes[k], coords[k]);
  }
  for (int k = m - 1; k >= 0; k--) {
    int pd = pl[k].dim < 0 ? pl[k].dim + ndim : pl[k].dim;
    if (pl[k].kind == TPX_STRIDED_SHARD && pd == d)
      l = ref_chunk(&l, sizes[k], coords[k]);
  }
  return l;
}

static void coords_of(int64_t rank, int m, const int64_t *sizes,
                      int64_t *coords) {
  for (int k = m - 1; k >= 0; k--) {
    coords[k] = rank % sizes[k];
    rank /= sizes[k];
  }
}

static tpx_mesh *make_mesh(int m, const int64_t *sizes) {
  static const char *names[] = {"a", "b", "c", "d"};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, m, &mesh, NULL), TPX_OK);
  return mesh;
}

/* Compare every rank's slice with the reference and check that every
 * element is held by exactly one distinct-shard owner (once per copy in
 * the replicated mesh dims). Returns the number of ranks checked. */
static int check_layout(const int64_t *shape, int ndim, int m,
                        const int64_t *sizes, const tpx_placement *pl) {
  tpx_mesh *mesh = make_mesh(m, sizes);
  int64_t world = tpx_mesh_world_size(mesh);
  int64_t total = 1, copies = 1;
  for (int d = 0; d < ndim; d++) total *= shape[d];
  for (int k = 0; k < m; k++)
    if (pl[k].kind != TPX_SHARD && pl[k].kind != TPX_STRIDED_SHARD)
      copies *= sizes[k];
  ck_assert_int_le(total, 4096);
  static int owners[4096];
  memset(owners, 0, sizeof owners);
  for (int64_t r = 0; r < world; r++) {
    int64_t coords[8];
    coords_of(r, m, sizes, coords);
    tpx_slice s;
    tpx_error err = {0};
    ck_assert_msg(tpx_layout_local_slice(shape, ndim, mesh, pl, r, &s, &err) ==
                      TPX_OK,
                  "rank %lld: %s", (long long)r, err.message);
    ck_assert_int_eq(s.ndim, ndim);
    for (int d = 0; d < ndim; d++) {
      ilist l = ref_dim(shape[d], d, ndim, m, sizes, pl, coords);
      /* The reference list must be one contiguous run... */
      for (int j = 1; j < l.n; j++)
        ck_assert_int_eq(l.idx[j], l.idx[j - 1] + 1);
      /* ...and equal the slice the library computed. */
      ck_assert_msg(s.length[d] == l.n && s.offset[d] == l.base,
                    "rank %lld dim %d (n=%lld): got [%lld +%lld), want "
                    "[%lld +%d)",
                    (long long)r, d, (long long)shape[d],
                    (long long)s.offset[d], (long long)s.length[d],
                    (long long)l.base, l.n);
      ck_assert_int_ge(s.offset[d], 0);
      ck_assert_int_le(s.offset[d] + s.length[d], shape[d]);
    }
    /* Count ownership element by element. */
    for (int64_t e = 0; e < total; e++) {
      int64_t rest = e, in = 1;
      for (int d = ndim - 1; d >= 0; d--) {
        int64_t i = rest % shape[d];
        rest /= shape[d];
        if (i < s.offset[d] || i >= s.offset[d] + s.length[d])
          in = 0;
      }
      owners[e] += (int)in;
    }
    int64_t numel = tpx_slice_numel(&s);
    int64_t want = 1;
    for (int d = 0; d < ndim; d++) want *= s.length[d];
    ck_assert_int_eq(numel, want);
  }
  /* A rank's slice never depends on its coords in non-sharding mesh dims
   * (checked against the reference above), so owners[e] is copies times the
   * number of distinct shard positions holding e: that number must be 1. */
  for (int64_t e = 0; e < total; e++)
    ck_assert_msg(owners[e] == copies,
                  "element %lld held %d times, want %lld (one per replica)",
                  (long long)e, owners[e], (long long)copies);
  tpx_mesh_destroy(mesh);
  return (int)world;
}

/* ---- 1-D exhaustive ---------------------------------------------------- */

START_TEST(test_chunk_table) {
  /* The spec's worked examples: n=10,T=4 -> 3,3,3,1; n=5 -> 2,2,1,0;
   * n=2 -> 1,1,0,0; offsets r*c clamped to n. */
  static const struct {
    int64_t n, w;
    int64_t off[4], len[4];
  } cases[] = {
      {10, 4, {0, 3, 6, 9}, {3, 3, 3, 1}}, {5, 4, {0, 2, 4, 5}, {2, 2, 1, 0}},
      {2, 4, {0, 1, 2, 2}, {1, 1, 0, 0}},  {0, 4, {0, 0, 0, 0}, {0, 0, 0, 0}},
      {8, 4, {0, 2, 4, 6}, {2, 2, 2, 2}},  {9, 4, {0, 3, 6, 9}, {3, 3, 3, 0}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int64_t i = 0; i < cases[c].w; i++) {
      int64_t off = -1, len = -1;
      ck_assert_int_eq(
          tpx_layout_chunk(cases[c].n, cases[c].w, i, &off, &len, NULL),
          TPX_OK);
      ck_assert_msg(off == cases[c].off[i] && len == cases[c].len[i],
                    "n=%lld w=%lld i=%lld: got (%lld,%lld)",
                    (long long)cases[c].n, (long long)cases[c].w, (long long)i,
                    (long long)off, (long long)len);
    }
}
END_TEST

START_TEST(test_chunk_exhaustive) {
  for (int64_t n = 0; n <= 40; n++)
    for (int64_t w = 1; w <= 12; w++) {
      ilist all = {0};
      for (int64_t i = 0; i < n; i++) all.idx[all.n++] = i;
      for (int64_t i = 0; i < w; i++) {
        int64_t off, len;
        ck_assert_int_eq(tpx_layout_chunk(n, w, i, &off, &len, NULL), TPX_OK);
        ilist l = ref_chunk(&all, w, i);
        ck_assert_int_eq(len, l.n);
        ck_assert_int_eq(off, l.base);
      }
    }
}
END_TEST

START_TEST(test_chunk_large) {
  /* No overflow near INT64_MAX. */
  int64_t n = INT64_MAX, off, len;
  ck_assert_int_eq(tpx_layout_chunk(n, 3, 2, &off, &len, NULL), TPX_OK);
  ck_assert_int_eq(off + len, n);
  ck_assert_int_eq(tpx_layout_chunk(n, 1, 0, &off, &len, NULL), TPX_OK);
  ck_assert_int_eq(off, 0);
  ck_assert_int_eq(len, n);
  ck_assert_int_eq(
      tpx_layout_chunk(5, INT64_MAX, INT64_MAX - 1, &off, &len, NULL), TPX_OK);
  ck_assert_int_eq(off, 5);
  ck_assert_int_eq(len, 0);
}
END_TEST

/* Every n in 0..17 x world 1..8 x {shard(0), shard(-1), replicate, partial},
 * on 1-D tensors [n] and 2-D tensors [n, 3] / [3, n]. */
START_TEST(test_1d_exhaustive) {
  const tpx_placement pls[] = {tpx_placement_shard(0), tpx_placement_shard(-1),
                               tpx_placement_replicate(),
                               tpx_placement_partial(TPX_REDUCE_SUM)};
  int ranks = 0;
  for (int64_t n = 0; n <= 17; n++)
    for (int64_t w = 1; w <= 8; w++)
      for (size_t p = 0; p < sizeof pls / sizeof pls[0]; p++) {
        int64_t s1[1] = {n}, s2[2] = {n, 3}, s3[2] = {3, n};
        ranks += check_layout(s1, 1, 1, &w, &pls[p]);
        ranks += check_layout(s2, 2, 1, &w, &pls[p]);
        ranks += check_layout(s3, 2, 1, &w, &pls[p]);
      }
  ck_assert_int_eq(ranks, 3 * 4 * 18 * 36);
}
END_TEST

START_TEST(test_negative_dims) {
  /* shard(-1) on [4, 6] is shard(1); shard(-2) is shard(0). */
  tpx_mesh *mesh = make_mesh(1, (int64_t[]){4});
  int64_t shape[2] = {4, 6};
  for (int64_t r = 0; r < 4; r++) {
    tpx_slice a, b;
    tpx_placement neg = tpx_placement_shard(-1), pos = tpx_placement_shard(1);
    ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, &neg, r, &a, NULL),
                     TPX_OK);
    ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, &pos, r, &b, NULL),
                     TPX_OK);
    ck_assert_int_eq(a.ndim, b.ndim);
    for (int d = 0; d < 2; d++) {
      ck_assert_int_eq(a.offset[d], b.offset[d]);
      ck_assert_int_eq(a.length[d], b.length[d]);
    }
    ck_assert_int_eq(a.offset[0], 0);
    ck_assert_int_eq(a.length[0], 4);
    ck_assert_int_eq(a.offset[1], r < 3 ? 2 * r : 6);
    ck_assert_int_eq(a.length[1], r < 3 ? 2 : 0);
    neg = tpx_placement_shard(-2);
    ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, &neg, r, &a, NULL),
                     TPX_OK);
    ck_assert_int_eq(a.offset[0], r);
    ck_assert_int_eq(a.length[0], 1);
  }
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_empty_shards) {
  /* [2, 5] over 4 ranks on dim 0: ranks 2, 3 hold nothing, at offset 2. */
  tpx_mesh *mesh = make_mesh(1, (int64_t[]){4});
  int64_t shape[2] = {2, 5};
  tpx_placement p = tpx_placement_shard(0);
  for (int64_t r = 0; r < 4; r++) {
    tpx_slice s;
    ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, &p, r, &s, NULL),
                     TPX_OK);
    ck_assert_int_eq(s.offset[0], r < 2 ? r : 2);
    ck_assert_int_eq(s.length[0], r < 2 ? 1 : 0);
    ck_assert_int_eq(tpx_slice_numel(&s), r < 2 ? 5 : 0);
    ck_assert_int_eq(tpx_slice_nbytes(&s, TPX_DTYPE_BF16), r < 2 ? 10 : 0);
  }
  /* A zero-size dim stays empty everywhere. */
  int64_t zero[2] = {0, 5};
  tpx_slice s;
  ck_assert_int_eq(tpx_layout_local_slice(zero, 2, mesh, &p, 3, &s, NULL),
                   TPX_OK);
  ck_assert_int_eq(s.offset[0], 0);
  ck_assert_int_eq(s.length[0], 0);
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_scalar) {
  /* ndim 0: a scalar is replicated everywhere and has one element. */
  tpx_mesh *mesh = make_mesh(2, (int64_t[]){2, 3});
  tpx_placement pl[2] = {tpx_placement_replicate(),
                         tpx_placement_partial(TPX_REDUCE_AVG)};
  tpx_slice s;
  ck_assert_int_eq(tpx_layout_local_slice(NULL, 0, mesh, pl, 5, &s, NULL),
                   TPX_OK);
  ck_assert_int_eq(s.ndim, 0);
  ck_assert_int_eq(tpx_slice_numel(&s), 1);
  ck_assert_int_eq(tpx_slice_nbytes(&s, TPX_DTYPE_F32), 4);
  ck_assert_int_eq(tpx_slice_nbytes(&s, TPX_DTYPE_INVALID), 0);
  tpx_mesh_destroy(mesh);
}
END_TEST

/* ---- multi-dim meshes ---------------------------------------------------- */

START_TEST(test_2d_3d_meshes) {
  /* dp_replicate x dp_shard x tp and 2-D (dp, tp) meshes with the usual
   * TP / FSDP / HSDP placements, over several uneven shapes. */
  const tpx_placement R = tpx_placement_replicate(),
                      S0 = tpx_placement_shard(0), S1 = tpx_placement_shard(1),
                      Sm1 = tpx_placement_shard(-1),
                      P = tpx_placement_partial(TPX_REDUCE_SUM);
  static const int64_t shapes[][2] = {{10, 4}, {7, 5},   {3, 9}, {1, 1},
                                      {0, 6},  {16, 16}, {13, 2}};
  const int64_t meshes2[][2] = {{2, 4}, {3, 2}, {1, 4}, {4, 1}, {2, 3}};
  const tpx_placement pl2[][2] = {
      {S0, S1}, {S1, S0}, {S0, S0}, {S1, S1}, {R, S0},   {S0, R},
      {P, Sm1}, {Sm1, P}, {R, R},   {S0, P},  {Sm1, S0},
  };
  int ranks = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t m = 0; m < sizeof meshes2 / sizeof meshes2[0]; m++)
      for (size_t p = 0; p < sizeof pl2 / sizeof pl2[0]; p++)
        ranks += check_layout(shapes[s], 2, 2, meshes2[m], pl2[p]);

  const int64_t meshes3[][3] = {{2, 2, 2}, {1, 2, 4}, {2, 3, 2}, {3, 1, 3}};
  const tpx_placement pl3[][3] = {
      {R, S0, S0}, {R, S0, S1}, {S0, S0, S0}, {R, R, Sm1},
      {S1, S0, P}, {P, S1, S0}, {S0, S1, S0}, {R, S1, S1},
  };
  const int64_t shapes3[][3] = {{10, 4, 3}, {5, 7, 2}, {2, 3, 17}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t m = 0; m < sizeof meshes3 / sizeof meshes3[0]; m++)
      for (size_t p = 0; p < sizeof pl3 / sizeof pl3[0]; p++)
        ranks += check_layout(shapes[s], 2, 3, meshes3[m], pl3[p]);
  for (size_t s = 0; s < sizeof shapes3 / sizeof shapes3[0]; s++)
    for (size_t m = 0; m < sizeof meshes3 / sizeof meshes3[0]; m++)
      for (size_t p = 0; p < sizeof pl3 / sizeof pl3[0]; p++)
        ranks += check_layout(shapes3[s], 3, 3, meshes3[m], pl3[p]);
  ck_assert_int_gt(ranks, 1000);
}
END_TEST

START_TEST(test_compose_left_to_right) {
  /* Two mesh dims sharding the same tensor dim: the left one splits first.
   * [10] over (a=2, b=3), (shard(0), shard(0)): a splits 10 -> 5,5; b splits
   * each 5 -> 2,2,1. */
  tpx_mesh *mesh = make_mesh(2, (int64_t[]){2, 3});
  tpx_placement pl[2] = {tpx_placement_shard(0), tpx_placement_shard(0)};
  int64_t shape[1] = {10};
  static const int64_t off[6] = {0, 2, 4, 5, 7, 9}, len[6] = {2, 2, 1, 2, 2, 1};
  for (int64_t r = 0; r < 6; r++) {
    tpx_slice s;
    ck_assert_int_eq(tpx_layout_local_slice(shape, 1, mesh, pl, r, &s, NULL),
                     TPX_OK);
    ck_assert_int_eq(s.offset[0], off[r]);
    ck_assert_int_eq(s.length[0], len[r]);
  }
  tpx_mesh_destroy(mesh);
}
END_TEST

/* ---- FSDP2 over TP --------------------------------------------------------
 */

START_TEST(test_strided_even) {
  /* Colwise weight [16, 4] on (dp=2, tp=4), (strided_shard(0,4), shard(0)):
   * TP chunk j = rows [4j, 4j+4); dp=i takes rows [4j+2i, 4j+2i+2). */
  tpx_mesh *mesh = make_mesh(2, (int64_t[]){2, 4});
  tpx_placement pl[2] = {tpx_placement_strided_shard(0, 4),
                         tpx_placement_shard(0)};
  int64_t shape[2] = {16, 4};
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 4; j++) {
      tpx_slice s;
      ck_assert_int_eq(
          tpx_layout_local_slice(shape, 2, mesh, pl, i * 4 + j, &s, NULL),
          TPX_OK);
      ck_assert_int_eq(s.offset[0], 4 * j + 2 * i);
      ck_assert_int_eq(s.length[0], 2);
      ck_assert_int_eq(s.offset[1], 0);
      ck_assert_int_eq(s.length[1], 4);
    }
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_strided_uneven_by_hand) {
  /* [10, 4] on (dp=2, tp=4), (strided_shard(0,4), shard(0)).
   * TP (torch.chunk, c=3): rows [0,3) [3,6) [6,9) [9,10).
   * FSDP splits each TP piece over dp=2:
   *   3 rows -> c=2: dp0 2 rows, dp1 1 row; 1 row -> dp0 1 row, dp1 empty.
   * rank = dp*4 + tp. */
  static const struct {
    int64_t rank, off, len;
  } want[] = {
      {0, 0, 2}, {1, 3, 2}, {2, 6, 2}, {3, 9, 1},  /* dp=0 */
      {4, 2, 1}, {5, 5, 1}, {6, 8, 1}, {7, 10, 0}, /* dp=1 */
  };
  tpx_mesh *mesh = make_mesh(2, (int64_t[]){2, 4});
  tpx_placement pl[2] = {tpx_placement_strided_shard(0, 4),
                         tpx_placement_shard(0)};
  int64_t shape[2] = {10, 4};
  for (size_t c = 0; c < sizeof want / sizeof want[0]; c++) {
    tpx_slice s;
    ck_assert_int_eq(
        tpx_layout_local_slice(shape, 2, mesh, pl, want[c].rank, &s, NULL),
        TPX_OK);
    ck_assert_msg(s.offset[0] == want[c].off && s.length[0] == want[c].len,
                  "rank %lld: got [%lld +%lld)", (long long)want[c].rank,
                  (long long)s.offset[0], (long long)s.length[0]);
    ck_assert_int_eq(s.length[1], 4);
  }
  /* Contrast: plain (shard(0), shard(0)) splits over dp first:
   * dp0 rows [0,5) -> tp c=2: [0,2) [2,4) [4,5) [5,5). */
  pl[0] = tpx_placement_shard(0);
  tpx_slice s;
  ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, pl, 1, &s, NULL),
                   TPX_OK);
  ck_assert_int_eq(s.offset[0], 2);
  ck_assert_int_eq(s.length[0], 2);
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_strided_hsdp_and_rowwise) {
  /* HSDP + TP on (dp_replicate=2, dp_shard=2, tp=3):
   * colwise (replicate, strided_shard(0,3), shard(0)) and
   * rowwise (replicate, shard(0), shard(1)), over uneven shapes, against the
   * reference; plus one number by hand. */
  const tpx_placement R = tpx_placement_replicate();
  const tpx_placement col[3] = {R, tpx_placement_strided_shard(0, 3),
                                tpx_placement_shard(0)};
  const tpx_placement row[3] = {R, tpx_placement_shard(0),
                                tpx_placement_shard(1)};
  const int64_t sizes[3] = {2, 2, 3};
  static const int64_t shapes[][2] = {{11, 5}, {7, 7}, {2, 3}, {0, 4}, {12, 6}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    check_layout(shapes[s], 2, 3, sizes, col);
    check_layout(shapes[s], 2, 3, sizes, row);
  }
  /* [11, 5] colwise: tp c=4 -> [0,4) [4,8) [8,11); tp=2 piece of 3 rows
   * over dp_shard=2 (c=2): dp_shard=1 holds row 10 only. Rank
   * (rep=1, shard=1, tp=2) = 1*6 + 1*3 + 2 = 11. */
  tpx_mesh *mesh = make_mesh(3, sizes);
  tpx_slice sl;
  ck_assert_int_eq(
      tpx_layout_local_slice(shapes[0], 2, mesh, col, 11, &sl, NULL), TPX_OK);
  ck_assert_int_eq(sl.offset[0], 10);
  ck_assert_int_eq(sl.length[0], 1);
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_strided_ep_tp) {
  /* Two later mesh dims sharding dim 0 (torch 2.9 EP+TP style):
   * (dp=2, ep=2, tp=2) with (strided_shard(0,4), shard(0), shard(0)). */
  const tpx_placement pl[3] = {tpx_placement_strided_shard(0, 4),
                               tpx_placement_shard(0), tpx_placement_shard(0)};
  const int64_t sizes[3] = {2, 2, 2};
  static const int64_t shapes[][2] = {{16, 2}, {13, 3}, {5, 1}, {3, 3}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    check_layout(shapes[s], 2, 3, sizes, pl);
  /* Two strided dims: (strided_shard(0,2), strided_shard(0,2)... is not one
   * box unless factors match the later dims: (strided(0,4), strided(0,2),
   * shard(0)) — tp first, then ep, then dp. */
  const tpx_placement pl2[3] = {tpx_placement_strided_shard(0, 4),
                                tpx_placement_strided_shard(0, 2),
                                tpx_placement_shard(0)};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    check_layout(shapes[s], 2, 3, sizes, pl2);
}
END_TEST

START_TEST(test_strided_bad_factor) {
  /* The split factor must match the later mesh dims sharding that dim. */
  tpx_mesh *mesh = make_mesh(2, (int64_t[]){2, 4});
  int64_t shape[2] = {10, 4};
  tpx_slice s;
  tpx_placement pl[2] = {tpx_placement_strided_shard(0, 2),
                         tpx_placement_shard(0)};
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, &s, &e_),
              TPX_INVALID_ARGUMENT, "split factor 2");
  /* TP shards dim 1 (rowwise): FSDP on dim 0 must be plain shard(0). */
  pl[0] = tpx_placement_strided_shard(0, 4);
  pl[1] = tpx_placement_shard(1);
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, &s, &e_),
              TPX_INVALID_ARGUMENT, "\"a\"");
  /* With no later shard the only valid factor is 1 (then it is Shard). */
  pl[1] = tpx_placement_replicate();
  pl[0] = tpx_placement_strided_shard(0, 1);
  ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, pl, 4, &s, NULL),
                   TPX_OK);
  ck_assert_int_eq(s.offset[0], 5);
  ck_assert_int_eq(s.length[0], 5);
  tpx_mesh_destroy(mesh);
}
END_TEST

/* ---- FSDP padded numel ------------------------------------------------- */

START_TEST(test_fsdp_padded_numel) {
  static const struct {
    int64_t shape[3];
    int ndim;
    int64_t dp, want;
  } cases[] = {
      {{10, 4, 0}, 2, 4, 12}, /* ceil(10/4)=3 rows of 4 */
      {{8, 4, 0}, 2, 4, 8},       {{5, 0, 0}, 1, 4, 2},
      {{2, 3, 0}, 2, 4, 3}, /* ranks 2,3 empty but padded to 1 row */
      {{0, 7, 0}, 2, 3, 0},       {{7, 3, 2}, 3, 1, 42},
      {{7, 3, 2}, 3, 2, 24},      {{0, 0, 0}, 0, 8, 1}, /* scalar */
      {{1, 4096, 0}, 2, 8, 4096},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t got = -1;
    ck_assert_int_eq(tpx_layout_fsdp_padded_numel(cases[c].shape, cases[c].ndim,
                                                  cases[c].dp, &got, NULL),
                     TPX_OK);
    ck_assert_msg(got == cases[c].want, "case %zu: got %lld want %lld", c,
                  (long long)got, (long long)cases[c].want);
  }
  /* Consistent with the layout: padded >= every rank's real numel. */
  tpx_mesh *mesh = make_mesh(1, (int64_t[]){4});
  tpx_placement p = tpx_placement_shard(0);
  int64_t shape[2] = {10, 3}, padded;
  ck_assert_int_eq(tpx_layout_fsdp_padded_numel(shape, 2, 4, &padded, NULL),
                   TPX_OK);
  for (int64_t r = 0; r < 4; r++) {
    tpx_slice s;
    ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, &p, r, &s, NULL),
                     TPX_OK);
    ck_assert_int_le(tpx_slice_numel(&s), padded);
    if (r == 0)
      ck_assert_int_eq(tpx_slice_numel(&s), padded);
  }
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_fsdp_padded_bad) {
  int64_t shape[2] = {4, 4}, out;
  CHECK_FAILS(tpx_layout_fsdp_padded_numel(shape, 2, 0, &out, &e_),
              TPX_OUT_OF_RANGE, "dp=0");
  CHECK_FAILS(tpx_layout_fsdp_padded_numel(shape, 9, 2, &out, &e_),
              TPX_OUT_OF_RANGE, "ndim=9");
  CHECK_FAILS(tpx_layout_fsdp_padded_numel(NULL, 2, 2, &out, &e_),
              TPX_INVALID_ARGUMENT, "local_shape");
  CHECK_FAILS(tpx_layout_fsdp_padded_numel(shape, 2, 2, NULL, &e_),
              TPX_INVALID_ARGUMENT, "out");
  int64_t neg[2] = {4, -1};
  CHECK_FAILS(tpx_layout_fsdp_padded_numel(neg, 2, 2, &out, &e_),
              TPX_OUT_OF_RANGE, "dim 1");
  int64_t huge[3] = {INT64_MAX, INT64_MAX, 2};
  CHECK_FAILS(tpx_layout_fsdp_padded_numel(huge, 3, 1, &out, &e_),
              TPX_OUT_OF_RANGE, "overflow");
}
END_TEST

/* ---- bad input --------------------------------------------------------- */

START_TEST(test_bad_input) {
  tpx_mesh *mesh = make_mesh(2, (int64_t[]){2, 4});
  int64_t shape[2] = {8, 8};
  tpx_placement pl[2] = {tpx_placement_shard(0), tpx_placement_shard(1)};
  tpx_slice s;
  /* shard dim out of range, both signs; the message names the placement and
   * the mesh dim. */
  pl[1] = tpx_placement_shard(2);
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "shard(2)");
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "mesh dim \"b\"");
  pl[1] = tpx_placement_shard(-3);
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "shard(-3)");
  /* Shard on a scalar. */
  pl[1] = tpx_placement_shard(0);
  CHECK_FAILS(tpx_layout_local_slice(NULL, 0, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "shard(0)");
  /* Rank out of range. */
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 8, &s, &e_),
              TPX_OUT_OF_RANGE, "rank 8");
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, -1, &s, &e_),
              TPX_OUT_OF_RANGE, "rank -1");
  /* Too many / negative tensor dims. */
  int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK_FAILS(tpx_layout_local_slice(big, 9, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "ndim=9");
  CHECK_FAILS(tpx_layout_local_slice(big, -1, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "ndim=-1");
  int64_t neg[2] = {8, -2};
  CHECK_FAILS(tpx_layout_local_slice(neg, 2, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "dim 1");
  /* NULL pointers. */
  CHECK_FAILS(tpx_layout_local_slice(NULL, 2, mesh, pl, 0, &s, &e_),
              TPX_INVALID_ARGUMENT, "shape");
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, NULL, pl, 0, &s, &e_),
              TPX_INVALID_ARGUMENT, "mesh");
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, NULL, 0, &s, &e_),
              TPX_INVALID_ARGUMENT, "placements");
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, NULL, &e_),
              TPX_INVALID_ARGUMENT, "out");
  /* Garbage placement values (e.g. uninitialised memory) are rejected. */
  pl[0].kind = (tpx_placement_kind)17;
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "unknown placement kind");
  pl[0] = tpx_placement_partial((tpx_reduce_op)9);
  CHECK_FAILS(tpx_layout_local_slice(shape, 2, mesh, pl, 0, &s, &e_),
              TPX_OUT_OF_RANGE, "reduce op");
  /* err may be NULL. */
  ck_assert_int_eq(tpx_layout_local_slice(shape, 2, NULL, pl, 0, &s, NULL),
                   TPX_INVALID_ARGUMENT);
  /* Chunk argument checks. */
  int64_t off, len;
  CHECK_FAILS(tpx_layout_chunk(-1, 2, 0, &off, &len, &e_), TPX_OUT_OF_RANGE,
              "n=-1");
  CHECK_FAILS(tpx_layout_chunk(4, 0, 0, &off, &len, &e_), TPX_OUT_OF_RANGE,
              "w=0");
  CHECK_FAILS(tpx_layout_chunk(4, 2, 2, &off, &len, &e_), TPX_OUT_OF_RANGE,
              "i=2");
  CHECK_FAILS(tpx_layout_chunk(4, 2, -1, &off, &len, &e_), TPX_OUT_OF_RANGE,
              "i=-1");
  CHECK_FAILS(tpx_layout_chunk(4, 2, 0, NULL, &len, &e_), TPX_INVALID_ARGUMENT,
              "off");
  /* Slice helpers tolerate NULL. */
  ck_assert_int_eq(tpx_slice_numel(NULL), 0);
  ck_assert_int_eq(tpx_slice_nbytes(NULL, TPX_DTYPE_F32), 0);
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_first_error_wins) {
  tpx_mesh *mesh = make_mesh(1, (int64_t[]){2});
  int64_t shape[1] = {4};
  tpx_placement p = tpx_placement_shard(3);
  tpx_slice s;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_layout_local_slice(shape, 1, mesh, &p, 0, &s, &err),
                   TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_layout_local_slice(shape, 1, mesh, &p, 9, &s, &err),
                   TPX_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(err.message, "shard(3)"));
  ck_assert_ptr_null(strstr(err.message, "rank 9"));
  tpx_mesh_destroy(mesh);
}
END_TEST

START_TEST(test_max_dims) {
  /* 8 tensor dims over an 8-dim mesh, each mesh dim sharding its own dim. */
  const char *names[8] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"};
  int64_t sizes[8] = {2, 1, 2, 1, 2, 1, 1, 2};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 8, &mesh, NULL), TPX_OK);
  tpx_placement pl[8];
  int64_t shape[8];
  for (int k = 0; k < 8; k++) {
    pl[k] = tpx_placement_shard(-1 - k);
    shape[k] = 3;
  }
  int64_t total = 0;
  for (int64_t r = 0; r < tpx_mesh_world_size(mesh); r++) {
    tpx_slice s;
    ck_assert_int_eq(tpx_layout_local_slice(shape, 8, mesh, pl, r, &s, NULL),
                     TPX_OK);
    total += tpx_slice_numel(&s);
  }
  ck_assert_int_eq(total, 3 * 3 * 3 * 3 * 3 * 3 * 3 * 3);
  tpx_mesh_destroy(mesh);
}
END_TEST

static Suite *layout_suite(void) {
  Suite *s = suite_create("layout");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_chunk_table);
  tcase_add_test(tc, test_chunk_exhaustive);
  tcase_add_test(tc, test_chunk_large);
  tcase_add_test(tc, test_1d_exhaustive);
  tcase_add_test(tc, test_negative_dims);
  tcase_add_test(tc, test_empty_shards);
  tcase_add_test(tc, test_scalar);
  tcase_add_test(tc, test_2d_3d_meshes);
  tcase_add_test(tc, test_compose_left_to_right);
  tcase_add_test(tc, test_strided_even);
  tcase_add_test(tc, test_strided_uneven_by_hand);
  tcase_add_test(tc, test_strided_hsdp_and_rowwise);
  tcase_add_test(tc, test_strided_ep_tp);
  tcase_add_test(tc, test_strided_bad_factor);
  tcase_add_test(tc, test_fsdp_padded_numel);
  tcase_add_test(tc, test_fsdp_padded_bad);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_first_error_wins);
  tcase_add_test(tc, test_max_dims);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(layout_suite()); }
