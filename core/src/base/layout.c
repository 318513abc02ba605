/* layout.c — which global slice of a tensor a rank holds under a mesh and
 * one placement per mesh dim (torch DTensor Shard / FSDP2 _StridedShard).
 *
 * Pure arithmetic on the stack: tpx_layout_local_slice is called millions of
 * times while planning, so it never allocates. Not redistribution: see the
 * shard area for moving data between layouts. */
#include "tpx/layout.h"

#include <string.h>

#include "base/mesh_internal.h"

/* torch.chunk on [0, n) over w parts, part i: chunk = ceil(n/w) and the part
 * starts at i*chunk clamped to n. Unsigned so that i*chunk (< n + w <= 2^64)
 * cannot overflow; one division, since this sits in the hot path. */
static inline void chunk_of(uint64_t n, uint64_t w, uint64_t i, uint64_t *off,
                            uint64_t *len) {
  uint64_t chunk = n / w + (n % w != 0);
  uint64_t o = i * chunk;
  if (o > n)
    o = n;
  *off = o;
  *len = n - o < chunk ? n - o : chunk;
}

tpx_status tpx_layout_chunk(int64_t n, int64_t w, int64_t i, int64_t *off,
                            int64_t *len, tpx_error *err) {
  if (off == NULL || len == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_layout_chunk: %s is NULL",
                         off == NULL ? "off" : "len");
  if (n < 0 || w < 1 || i < 0 || i >= w)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "chunk: need n >= 0, w >= 1 and 0 <= i < w; got "
                         "n=%lld, w=%lld, i=%lld",
                         (long long)n, (long long)w, (long long)i);
  uint64_t o, l;
  chunk_of((uint64_t)n, (uint64_t)w, (uint64_t)i, &o, &l);
  *off = (int64_t)o;
  *len = (int64_t)l;
  return TPX_OK;
}

/* Narrow the piece [*off, *off + *len) to part i of w. Arguments are already
 * validated; a mesh dim of size 1 leaves the piece alone. */
static inline void split(int64_t *off, int64_t *len, int64_t w, int64_t i) {
  if (w == 1)
    return;
  uint64_t o, l;
  chunk_of((uint64_t)*len, (uint64_t)w, (uint64_t)i, &o, &l);
  *off += (int64_t)o;
  *len = (int64_t)l;
}

/* The coordinate of `rank` on mesh dim k (row-major), computed only for the
 * dims that shard, with the trivial divisions skipped. */
static inline int64_t coord_of(const tpx_mesh *mesh, int k, int64_t rank) {
  int64_t q = mesh->strides[k] == 1 ? rank : rank / mesh->strides[k];
  return k == 0 ? q : q % mesh->sizes[k];
}

/* The index of `rank` in the run of mesh dims first..last (a placement and
 * the Joined dims after it), row-major over them; `width` is the product of
 * their sizes. A run of one dim is its coordinate. */
static inline int64_t run_index(const tpx_mesh *mesh, int first, int last,
                                int64_t width, int64_t rank) {
  if (first == last)
    return coord_of(mesh, first, rank);
  int64_t q = rank / mesh->strides[last];
  return first == 0 ? q : q % width;
}

static tpx_status bad_placement(const tpx_mesh *mesh, int k, tpx_placement p,
                                const char *why, int ndim, tpx_error *err) {
  char buf[64];
  tpx_placement_format(p, buf, sizeof buf);
  return tpx_error_set(err, TPX_OUT_OF_RANGE,
                       "layout: placement %s on mesh dim \"%s\": %s (tensor "
                       "has %d dims)",
                       buf, mesh->names[k], why, ndim);
}

tpx_status tpx_layout_local_slice(const int64_t *shape, int ndim,
                                  const tpx_mesh *mesh,
                                  const tpx_placement *placements, int64_t rank,
                                  tpx_slice *out, tpx_error *err) {
  if (mesh == NULL || placements == NULL || out == NULL ||
      (shape == NULL && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_layout_local_slice: %s is NULL",
                         mesh == NULL         ? "mesh"
                         : placements == NULL ? "placements"
                         : out == NULL        ? "out"
                                              : "shape");
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "layout: tensor ndim=%d is out of range (0..%d)", ndim,
                         TPX_MAX_TENSOR_DIMS);
  if (rank < 0 || rank >= mesh->world)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "layout: rank %lld is out of range [0, %lld)",
                         (long long)rank, (long long)mesh->world);
  /* Zeroed whole, padding included, so callers may memcmp or hash slices. */
  tpx_slice s;
  memset(&s, 0, sizeof s);
  s.ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "layout: tensor dim %d has negative size %lld", d,
                           (long long)shape[d]);
    s.length[d] = shape[d];
  }

  const int m = mesh->ndim;
  int dims[TPX_MESH_MAX_DIMS]; /* normalised tensor dim per mesh dim */
  /* A placement followed by Joined dims acts over the run as one mesh dim:
   * its width is the product of the run's sizes and its last dim `last`
   * gives the index, (rank / stride(last)) % width (row-major over
   * consecutive dims). A dim without Joined after it is a run of one. */
  int64_t width[TPX_MESH_MAX_DIMS];
  int last[TPX_MESH_MAX_DIMS];

  /* Validate and normalise right to left so that, for a strided shard, the
   * product of the later mesh dims sharding the same tensor dim is known:
   * it must equal the split factor, or the rank's piece is not one box. */
  int64_t later[TPX_MAX_TENSOR_DIMS];
  for (int d = 0; d < ndim; d++) later[d] = 1;
  int64_t run_width = 1; /* sizes of the Joined dims just right of k */
  int run_last = -1;
  for (int k = m - 1; k >= 0; k--) {
    tpx_placement p = placements[k];
    dims[k] = -1;
    width[k] = mesh->sizes[k] * run_width;
    last[k] = run_last >= 0 ? run_last : k;
    if (p.kind == TPX_JOINED) {
      if (k == 0)
        return bad_placement(
            mesh, k, p, "joined needs an earlier mesh dim to join", ndim, err);
      run_width = width[k];
      run_last = last[k];
      continue;
    }
    run_width = 1;
    run_last = -1;
    switch (p.kind) {
    case TPX_REPLICATE: continue;
    case TPX_PARTIAL:
      if ((unsigned)p.op > (unsigned)TPX_REDUCE_MIN)
        return bad_placement(mesh, k, p, "unknown reduce op", ndim, err);
      continue;
    case TPX_SHARD:
    case TPX_STRIDED_SHARD: break;
    default:
      return bad_placement(mesh, k, p, "unknown placement kind", ndim, err);
    }
    if (p.dim < -ndim || p.dim >= ndim)
      return bad_placement(mesh, k, p, "dim out of range", ndim, err);
    int d = p.dim < 0 ? p.dim + ndim : p.dim;
    if (p.kind == TPX_STRIDED_SHARD && p.split_factor != later[d]) {
      char buf[64];
      tpx_placement_format(p, buf, sizeof buf);
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT,
          "layout: placement %s on mesh dim \"%s\": split factor %d must "
          "equal the product of the sizes of the later mesh dims that shard "
          "tensor dim %d (%lld)",
          buf, mesh->names[k], (int)p.split_factor, d, (long long)later[d]);
    }
    later[d] *= width[k];
    dims[k] = d;
  }

  /* Plain shards left to right (DTensor's order), then strided shards right
   * to left: each one splits the piece left by the later mesh dims. */
  for (int k = 0; k < m; k++)
    if (placements[k].kind == TPX_SHARD && width[k] > 1)
      split(&s.offset[dims[k]], &s.length[dims[k]], width[k],
            run_index(mesh, k, last[k], width[k], rank));
  for (int k = m - 1; k >= 0; k--)
    if (placements[k].kind == TPX_STRIDED_SHARD && width[k] > 1)
      split(&s.offset[dims[k]], &s.length[dims[k]], width[k],
            run_index(mesh, k, last[k], width[k], rank));
  *out = s;
  return TPX_OK;
}

int64_t tpx_slice_numel(const tpx_slice *slice) {
  if (slice == NULL || slice->ndim < 0 || slice->ndim > TPX_MAX_TENSOR_DIMS)
    return 0;
  int64_t n = 1;
  for (int d = 0; d < slice->ndim; d++) {
    if (slice->length[d] <= 0)
      return 0;
    if (n > INT64_MAX / slice->length[d])
      return INT64_MAX; /* saturate rather than wrap */
    n *= slice->length[d];
  }
  return n;
}

int64_t tpx_slice_nbytes(const tpx_slice *slice, tpx_dtype dtype) {
  int64_t n = tpx_slice_numel(slice);
  int64_t sz = (int64_t)tpx_dtype_size(dtype);
  if (sz == 0)
    return 0;
  if (n > INT64_MAX / sz)
    return INT64_MAX;
  return n * sz;
}

tpx_status tpx_layout_fsdp_padded_numel(const int64_t *local_shape, int ndim,
                                        int64_t dp, int64_t *out,
                                        tpx_error *err) {
  if (out == NULL || (local_shape == NULL && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_layout_fsdp_padded_numel: %s is NULL",
                         out == NULL ? "out" : "local_shape");
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "fsdp padded numel: ndim=%d is out of range (0..%d)",
                         ndim, TPX_MAX_TENSOR_DIMS);
  if (dp < 1)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "fsdp padded numel: dp=%lld must be >= 1",
                         (long long)dp);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    int64_t v = local_shape[d];
    if (v < 0)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "fsdp padded numel: dim %d has negative size %lld",
                           d, (long long)v);
    if (d == 0)
      v = v / dp + (v % dp != 0);
    if (v != 0 && n > INT64_MAX / v)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "fsdp padded numel: element count overflows int64");
    n *= v;
  }
  *out = n;
  return TPX_OK;
}
