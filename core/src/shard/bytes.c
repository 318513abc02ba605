/* bytes.c — per-rank parameter bytes of a sharding: the sharded state each
 * rank holds (after TP and FSDP, without padding), each FSDP unit's gathered
 * (TP-local, param-dtype) bytes, the estimated peak, and the FSDP2-padded
 * state terms the training-memory estimate (memory.c) is built from.
 *
 * Every slice comes from tpx_layout_local_slice. Parameters are grouped by
 * signature (shape, dtype, compute dtype, placements): a million expert
 * weights usually have a handful of signatures, so the layout is asked
 * signatures x ranks times, not parameters x ranks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "model/model_view.h"
#include "shard/shard_internal.h"

typedef struct {
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS];
  tpx_dtype dtype;
  tpx_dtype compute;
  tpx_dtype reduce;
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  int moe; /* placements on the MoE mesh (ep.c) */
} sig_key;

typedef struct {
  sig_key *keys;
  uint64_t *hashes;
  size_t n, cap;
  int64_t *slots; /* open addressing: sig index or -1 */
  size_t nslots;
} sig_table;

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

static uint64_t sig_hash(const sig_key *k, int mesh_ndim) {
  uint64_t h = (uint64_t)k->ndim * 0x100000001b3ULL;
  for (int i = 0; i < k->ndim; i++) h = mix(h, (uint64_t)k->shape[i]);
  h = mix(h, ((uint64_t)k->moe << 24) | ((uint64_t)k->reduce << 16) |
                 ((uint64_t)k->dtype << 8) | (uint64_t)k->compute);
  for (int i = 0; i < mesh_ndim; i++)
    h = mix(h, ((uint64_t)k->pl[i].kind << 48) ^
                   ((uint64_t)(uint32_t)k->pl[i].dim << 16) ^
                   ((uint64_t)(uint32_t)k->pl[i].split_factor << 8) ^
                   (uint64_t)k->pl[i].op);
  return h;
}

static int sig_equal(const sig_key *a, const sig_key *b, int mesh_ndim) {
  if (a->ndim != b->ndim || a->dtype != b->dtype || a->compute != b->compute ||
      a->reduce != b->reduce || a->moe != b->moe)
    return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i])
      return 0;
  for (int i = 0; i < mesh_ndim; i++)
    if (a->pl[i].kind != b->pl[i].kind || a->pl[i].dim != b->pl[i].dim ||
        a->pl[i].split_factor != b->pl[i].split_factor ||
        a->pl[i].op != b->pl[i].op)
      return 0;
  return 1;
}

/* sig_equal against a parameter's fields, without building its key. */
static int sig_is(const sig_key *a, int ndim, const int64_t *shape,
                  tpx_dtype dtype, tpx_dtype compute, tpx_dtype reduce,
                  const tpx_placement *pl, int mesh_ndim, int moe) {
  if (a->ndim != ndim || a->dtype != dtype || a->compute != compute ||
      a->reduce != reduce || a->moe != moe)
    return 0;
  for (int i = 0; i < ndim; i++)
    if (a->shape[i] != shape[i])
      return 0;
  for (int i = 0; i < mesh_ndim; i++)
    if (a->pl[i].kind != pl[i].kind || a->pl[i].dim != pl[i].dim ||
        a->pl[i].split_factor != pl[i].split_factor || a->pl[i].op != pl[i].op)
      return 0;
  return 1;
}

#define sat_add tpx__sat_add
#define sat_mul tpx__sat_mul

static int sig_grow(sig_table *t) {
  size_t ns = t->nslots ? t->nslots * 2 : 64;
  int64_t *slots = malloc(ns * sizeof *slots);
  if (!slots)
    return -1;
  for (size_t i = 0; i < ns; i++) slots[i] = -1;
  for (size_t i = 0; i < t->n; i++) {
    size_t s = (size_t)t->hashes[i] & (ns - 1);
    while (slots[s] >= 0) s = (s + 1) & (ns - 1);
    slots[s] = (int64_t)i;
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = ns;
  return 0;
}

/* Index of key in the table, inserting it; -1 when out of memory. */
static int64_t sig_intern(sig_table *t, const sig_key *k, int mesh_ndim) {
  uint64_t h = sig_hash(k, mesh_ndim);
  if ((t->n + 1) * 2 > t->nslots && sig_grow(t) != 0)
    return -1;
  size_t s = (size_t)h & (t->nslots - 1);
  while (t->slots[s] >= 0) {
    int64_t i = t->slots[s];
    if (t->hashes[i] == h && sig_equal(&t->keys[i], k, mesh_ndim))
      return i;
    s = (s + 1) & (t->nslots - 1);
  }
  if (t->n == t->cap) {
    size_t cap = t->cap, cap_hashes = t->cap;
    if (TPX_GROW(t->keys, cap, t->n + 1, 32) ||
        TPX_GROW(t->hashes, cap_hashes, t->n + 1, 32))
      return -1;
    t->cap = cap;
  }
  t->keys[t->n] = *k;
  t->hashes[t->n] = h;
  t->slots[s] = (int64_t)t->n;
  return (int64_t)t->n++;
}

static void sig_free(sig_table *t) {
  free(t->keys);
  free(t->hashes);
  free(t->slots);
}

/* The work arrays of one tpx__bytes_compute: parameters grouped by
 * signature (shape, dtypes, placements), so each layout is measured once. */
typedef struct bytes_work {
  sig_table t;
  size_t np, nw, ns; /* parameters, ranks, signatures */
  int mnd;           /* mesh dims */
  int64_t *psig;     /* [np] signature of each parameter, -1: a tied alias */
  int64_t *count;    /* [ns] parameters of each signature */
  int64_t *sharded;  /* [ns * nw] held bytes of one parameter on each rank */
  int64_t *gathered; /* [ns * nw] its TP-local bytes in the compute dtype */
} bytes_work;

/* psig: every non-alias parameter's signature, interned in w->t. */
static tpx_status sign_params(const tpx_sharding *sh, bytes_work *w,
                              tpx_error *err) {
  const tpx_model *model = sh->model;
  int mnd = w->mnd;
  enum { RECENT = 4 };
  int64_t recent[RECENT] = {-1, -1, -1, -1};
  int next_recent = 0;
  for (size_t p = 0; p < w->np; p++) {
    const tpx__param *r = tpx__mv_param(model, (int64_t)p);
    if (r->tied_to >= 0) { /* one tensor: counted at its target */
      w->psig[p] = -1;
      continue;
    }
    const int64_t *shape = tpx__mv_shape(model, r);
    tpx_dtype held = tpx__held_dtype(sh, (int64_t)p, (tpx_dtype)r->dtype);
    tpx_dtype compute = (tpx_dtype)sh->param_dtype[p];
    tpx_dtype reduce = (tpx_dtype)sh->reduce_dtype[p];
    /* The row on the parameter's own mesh, as mnd entries (a main-mesh
     * row padded with Replicate when the MoE rows are wider). */
    tpx_placement pl[TPX_MESH_MAX_DIMS];
    const int moe = sh->param_moe && sh->param_moe[p];
    const int have = moe ? sh->moe_w : sh->ndim;
    const tpx_placement *row = tpx__param_row(sh, (int64_t)p);
    for (int d = 0; d < mnd; d++)
      pl[d] = d < have ? row[d] : tpx_placement_replicate();
    /* Models repeat a few signatures in a short cycle (gate, up, down of
     * each expert): the last few are compared in place before a key is
     * built and hashed. */
    int64_t hit = -1;
    for (int i = 0; i < RECENT && hit < 0; i++)
      if (recent[i] >= 0 && sig_is(&w->t.keys[recent[i]], r->ndim, shape, held,
                                   compute, reduce, pl, mnd, moe))
        hit = recent[i];
    if (hit < 0) {
      sig_key k;
      memset(&k, 0, sizeof k);
      k.ndim = r->ndim;
      if (r->ndim)
        memcpy(k.shape, shape, (size_t)r->ndim * sizeof k.shape[0]);
      k.dtype = held;
      k.compute = compute;
      k.reduce = reduce;
      k.moe = moe;
      memcpy(k.pl, pl, (size_t)mnd * sizeof k.pl[0]);
      hit = sig_intern(&w->t, &k, mnd);
      if (hit < 0)
        return tpx__shard_oom(err, "signatures");
      recent[next_recent] = hit;
      next_recent = (next_recent + 1) % RECENT;
    }
    w->psig[p] = hit;
  }
  return TPX_OK;
}

/* torch's view of a rank's optimizer state: the unpadded local shard
 * (held bytes / element size) and one tensor per parameter. */
static void state_unpadded(int64_t *rs, int64_t count, int64_t held_bytes,
                           tpx_dtype dt) {
  int64_t n = sat_mul(count, held_bytes / (int64_t)tpx_dtype_size(dt));
  rs[TPX__STATE_FLOAT_NUMEL_UNPADDED] =
      sat_add(rs[TPX__STATE_FLOAT_NUMEL_UNPADDED], n);
  if (tpx_dtype_size(dt) < 4)
    rs[TPX__STATE_LOWP_NUMEL_UNPADDED] =
        sat_add(rs[TPX__STATE_LOWP_NUMEL_UNPADDED], n);
  rs[TPX__STATE_FLOAT_TENSORS] = sat_add(rs[TPX__STATE_FLOAT_TENSORS], count);
}

/* Per signature and rank: held bytes, and the TP-local (dp dims treated as
 * Replicate) bytes in the compute dtype, which is what an FSDP all-gather
 * materialises; and each rank's rank_state terms. */
static tpx_status measure_signatures(tpx_sharding *sh, bytes_work *w,
                                     tpx_error *err) {
  size_t nw = w->nw;
  int mnd = w->mnd;
  /* FSDP2 pads each rank's dim-0 chunk over dp_shard; without FSDP a rank
   * holds the TP-local tensor itself. */
  int64_t pad_dp = sh->num_units > 0 && sh->dps_dim >= 0 ? sh->dps : 1;
  for (size_t s = 0; s < w->ns; s++) {
    const sig_key *k = &w->t.keys[s];
    tpx_placement tponly[TPX_MESH_MAX_DIMS];
    memcpy(tponly, k->pl, (size_t)mnd * sizeof tponly[0]);
    /* An expert parameter on the MoE mesh: what its unit gathers is the
     * ep-local piece (ep_shard replicated), padded over ep_shard when that
     * unit exists; EP alone shards it otherwise. */
    const tpx_mesh *mesh = k->moe ? sh->moe_mesh : sh->mesh;
    int64_t pad = k->moe ? 1 : pad_dp;
    if (k->moe) {
      tponly[0] = tpx_placement_replicate();
    } else {
      if (sh->dps_dim >= 0)
        tponly[sh->dps_dim] = tpx_placement_replicate();
      if (sh->dpr_dim >= 0)
        tponly[sh->dpr_dim] = tpx_placement_replicate();
    }
    for (size_t r = 0; r < nw; r++) {
      tpx_slice sl;
      tpx_status st = tpx_layout_local_slice(k->shape, k->ndim, mesh, k->pl,
                                             (int64_t)r, &sl, err);
      if (st != TPX_OK)
        return st;
      w->sharded[s * nw + r] = tpx_slice_nbytes(&sl, k->dtype);
      st = tpx_layout_local_slice(k->shape, k->ndim, mesh, tponly, (int64_t)r,
                                  &sl, err);
      if (st != TPX_OK)
        return st;
      w->gathered[s * nw + r] = tpx_slice_nbytes(&sl, k->compute);
      int64_t padded = 0;
      st = tpx_layout_fsdp_padded_numel(sl.length, sl.ndim, pad, &padded, err);
      if (st != TPX_OK)
        return st;
      if (k->moe && sh->ep_fsdp && sl.ndim >= 2) /* Shard(1) over ep_shard */
        padded = sat_mul(padded / (sl.length[1] ? sl.length[1] : 1),
                         (sl.length[1] + sh->ep_shard - 1) / sh->ep_shard);
      int64_t *rs = &sh->rank_state[r * TPX__STATE_TERMS];
      int64_t n = sat_mul(w->count[s], padded);
      rs[TPX__STATE_PARAM_BYTES] =
          sat_add(rs[TPX__STATE_PARAM_BYTES],
                  sat_mul(n, (int64_t)tpx_dtype_size(k->dtype)));
      if (tpx_dtype_is_float(k->dtype)) {
        /* sharded grads: the FSDP reduce dtype; without FSDP, f32 (kept
         * next to the f32 master, as tpx's runtime does) */
        tpx_dtype gd = sh->num_units > 0 ? k->reduce : TPX_DTYPE_F32;
        int64_t gb = sat_mul(n, (int64_t)tpx_dtype_size(gd));
        rs[TPX__STATE_GRAD_BYTES] = sat_add(rs[TPX__STATE_GRAD_BYTES], gb);
        if (k->moe)
          rs[TPX__STATE_MOE_GRAD_BYTES] =
              sat_add(rs[TPX__STATE_MOE_GRAD_BYTES], gb);
        rs[TPX__STATE_FLOAT_NUMEL] = sat_add(rs[TPX__STATE_FLOAT_NUMEL], n);
        if (tpx_dtype_size(k->dtype) < 4)
          rs[TPX__STATE_LOWP_NUMEL] = sat_add(rs[TPX__STATE_LOWP_NUMEL], n);
        state_unpadded(rs, w->count[s], w->sharded[s * nw + r], k->dtype);
      }
    }
  }
  return TPX_OK;
}

/* Per unit gathered bytes: units x signatures counts when small, else a
 * direct per-parameter sum. */
static tpx_status unit_gathered(tpx_sharding *sh, const bytes_work *w,
                                tpx_error *err) {
  size_t nu = sh->num_units, ns = w->ns, nw = w->nw;
  for (size_t u = 0; u < nu; u++) {
    sh->units[u].gathered = calloc(nw, sizeof(int64_t));
    if (!sh->units[u].gathered)
      return tpx__shard_oom(err, "unit bytes");
  }
  if (ns && nu <= ((size_t)1 << 26) / ns) {
    int64_t *ucount = calloc(nu * ns, sizeof *ucount);
    if (!ucount)
      return tpx__shard_oom(err, "unit counts");
    for (size_t p = 0; p < w->np; p++)
      if (w->psig[p] >= 0 && sh->param_unit[p] >= 0)
        ucount[(size_t)sh->param_unit[p] * ns + (size_t)w->psig[p]]++;
    for (size_t u = 0; u < nu; u++)
      for (size_t s = 0; s < ns; s++) {
        int64_t c = ucount[u * ns + s];
        if (!c)
          continue;
        for (size_t r = 0; r < nw; r++)
          sh->units[u].gathered[r] = sat_add(
              sh->units[u].gathered[r], sat_mul(c, w->gathered[s * nw + r]));
      }
    free(ucount);
  } else {
    for (size_t p = 0; p < w->np; p++) {
      if (w->psig[p] < 0 || sh->param_unit[p] < 0)
        continue;
      int64_t *g = sh->units[sh->param_unit[p]].gathered;
      for (size_t r = 0; r < nw; r++)
        g[r] = sat_add(g[r], w->gathered[w->psig[p] * nw + r]);
    }
  }
  return TPX_OK;
}

/* Peak: sharded state + the root (never resharded) + the units outside
 * any module list that never reshard either (lm_head as its own unit) +
 * the worst window of a unit with its forward or backward prefetch
 * targets. */
static void rank_peaks(tpx_sharding *sh, size_t nw) {
  size_t nu = sh->num_units;
  for (size_t r = 0; r < nw; r++) {
    int64_t worst = 0, kept = 0;
    for (size_t u = 0; u + 1 < nu; u++) {
      const tpx__fsdp_unit_rec *x = &sh->units[u];
      /* kept gathered: an unlisted unit that never reshards (lm_head), and
       * at ep > 1 every unit that does not (upstream's MoE default) */
      if (!x->reshard && (x->group < 0 || sh->ep > 1)) {
        kept = sat_add(kept, x->gathered[r]);
        continue;
      }
      int64_t f = x->gathered[r], b = x->gathered[r];
      for (size_t j = 0; j < x->num_fwd; j++)
        f = sat_add(f, sh->units[x->fwd[j]].gathered[r]);
      for (size_t j = 0; j < x->num_bwd; j++)
        b = sat_add(b, sh->units[x->bwd[j]].gathered[r]);
      if (f > worst)
        worst = f;
      if (b > worst)
        worst = b;
    }
    sh->rank_peak[r] = sat_add(
        sat_add(sat_add(sh->rank_bytes[r], sh->units[nu - 1].gathered[r]),
                kept),
        worst);
  }
}

/* Allocates the tables for w->ns signatures (after sign_params) and counts
 * the parameters of each. */
static tpx_status alloc_tables(tpx_sharding *sh, bytes_work *w,
                               tpx_error *err) {
  size_t ns = w->ns, nw = w->nw;
  if (ns && nw > ((size_t)1 << 28) / ns)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "per-rank bytes: %zu distinct parameter layouts x "
                         "%zu ranks is too large to tabulate",
                         ns, nw);
  w->count = calloc(ns ? ns : 1, sizeof *w->count);
  w->sharded = calloc((ns ? ns : 1) * nw, sizeof *w->sharded);
  w->gathered = calloc((ns ? ns : 1) * nw, sizeof *w->gathered);
  if (!w->count || !w->sharded || !w->gathered)
    return tpx__shard_oom(err, "per-rank bytes");
  for (size_t p = 0; p < w->np; p++)
    if (w->psig[p] >= 0)
      w->count[w->psig[p]]++;
  free(sh->rank_state);
  sh->rank_state = calloc(nw * TPX__STATE_TERMS, sizeof *sh->rank_state);
  if (!sh->rank_state)
    return tpx__shard_oom(err, "per-rank state bytes");
  return TPX_OK;
}

tpx_status tpx__bytes_compute(tpx_sharding *sh, tpx_error *err) {
  bytes_work w;
  memset(&w, 0, sizeof w);
  w.np = sh->num_params;
  w.nw = (size_t)sh->world;
  w.mnd = sh->moe_mesh && sh->moe_w > sh->ndim ? sh->moe_w : sh->ndim;
  w.psig = malloc((w.np ? w.np : 1) * sizeof *w.psig);
  if (!w.psig)
    return tpx__shard_oom(err, "signatures");
  tpx_status st = sign_params(sh, &w, err);
  w.ns = w.t.n;
  if (st == TPX_OK)
    st = alloc_tables(sh, &w, err);
  if (st == TPX_OK)
    st = measure_signatures(sh, &w, err);
  if (st == TPX_OK) {
    size_t nw = w.nw;
    for (size_t r = 0; r < nw; r++) sh->rank_bytes[r] = 0;
    for (size_t s = 0; s < w.ns; s++)
      for (size_t r = 0; r < nw; r++)
        sh->rank_bytes[r] = sat_add(sh->rank_bytes[r],
                                    sat_mul(w.count[s], w.sharded[s * nw + r]));
    if (sh->num_units == 0) {
      for (size_t r = 0; r < nw; r++) sh->rank_peak[r] = sh->rank_bytes[r];
    } else {
      st = unit_gathered(sh, &w, err);
      if (st == TPX_OK)
        rank_peaks(sh, nw);
    }
  }
  free(w.psig);
  free(w.count);
  free(w.sharded);
  free(w.gathered);
  sig_free(&w.t);
  return st;
}
