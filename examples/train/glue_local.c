/* glue_local.c — the trainer's parameters on storage it owns, without the
 * FSDP runtime: each rank holds the TP-local slice of every parameter
 * (tpx_sharding_local_slice), accumulates its gradients there, and does the
 * grad norm, clip and AdamW itself. Runs world 1 and tp-only meshes (no
 * data-parallel dims); the TP half is glue_tp.c. This is tpx-train-ref, the
 * reference the runtime-backed tpx-train is compared with. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "glue_impl.h"

struct tr_rank {
  tr_tp tp; /* first: the shared TP half (glue_tp.c) */
  size_t np;
  float **w, **g, **m, **v; /* per param (tied: the target's) */
  tpx_slice *sl;            /* this rank's slice of each param */
  int *tp_sharded;          /* the param is split over tp */
  int64_t *owner;           /* storage owner (tied_to or self) */
  int64_t steps;
};

static int64_t nelem(const tpx_slice *s) { return tpx_slice_numel(s); }

tpx_status tr_rank_create(const tr_rank_setup *su, tr_rank **out,
                          tpx_error *err) {
  *out = NULL;
  const tpx_mesh *mesh = tpx_sharding_mesh(su->sharding);
  if (su->world != tpx_sharding_tp_size(su->sharding))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx-train-ref runs world 1 and tp-only meshes "
                         "(data-parallel dims need tpx-train and the "
                         "runtime)");
  if (su->offload)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx-train-ref has no runtime to offload (--offload "
                         "needs tpx-train)");
  tr_rank *r = calloc(1, sizeof *r);
  if (!r)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx_status st = tr_tp_init(&r->tp, su, err);
  if (st) {
    tr_rank_destroy(r);
    return st;
  }
  int tpd = tpx_mesh_dim_index(mesh, "tp");
  r->np = tpx_model_num_params(su->model);
  r->w = calloc(r->np, sizeof *r->w);
  r->g = calloc(r->np, sizeof *r->g);
  r->m = calloc(r->np, sizeof *r->m);
  r->v = calloc(r->np, sizeof *r->v);
  r->sl = calloc(r->np, sizeof *r->sl);
  r->owner = calloc(r->np, sizeof *r->owner);
  r->tp_sharded = calloc(r->np, sizeof *r->tp_sharded);
  if (!r->w || !r->g || !r->m || !r->v || !r->sl || !r->owner ||
      !r->tp_sharded) {
    tr_rank_destroy(r);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  for (size_t p = 0; p < r->np; p++) {
    tpx_param_info pi;
    tpx_param_sharding ps;
    if ((st = tpx_model_param(su->model, (int64_t)p, &pi, err)) ||
        (st = tpx_sharding_local_slice(su->sharding, (int64_t)p, su->rank,
                                       &r->sl[p], err)) ||
        (st = tpx_sharding_param(su->sharding, (int64_t)p, &ps, err))) {
      tr_rank_destroy(r);
      return st;
    }
    r->owner[p] = pi.tied_to >= 0 ? pi.tied_to : (int64_t)p;
    r->tp_sharded[p] = tpd >= 0 && ps.placements[tpd].kind != TPX_REPLICATE;
    if (pi.tied_to >= 0)
      continue;
    size_t n = (size_t)nelem(&r->sl[p]);
    n = n ? n : 1;
    r->w[p] = calloc(n, sizeof(float));
    r->g[p] = calloc(n, sizeof(float));
    r->m[p] = calloc(n, sizeof(float));
    r->v[p] = calloc(n, sizeof(float));
    if (!r->w[p] || !r->g[p] || !r->m[p] || !r->v[p]) {
      tr_rank_destroy(r);
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (parameter %s)",
                           pi.fqn);
    }
  }
  *out = r;
  return TPX_OK;
}

tpx_runtime *tr_rank_runtime(const tr_rank *r) {
  (void)r;
  return NULL;
}

int tr_rank_memory(const tr_rank *r, tr_memory *out) {
  (void)r;
  memset(out, 0, sizeof *out);
  return 0;
}

void tr_rank_destroy(tr_rank *r) {
  if (!r)
    return;
  for (size_t p = 0; p < r->np; p++)
    if (r->w && r->owner && r->owner[p] == (int64_t)p) {
      free(r->w[p]);
      free(r->g[p]);
      free(r->m[p]);
      free(r->v[p]);
    }
  free(r->w);
  free(r->g);
  free(r->m);
  free(r->v);
  free(r->sl);
  free(r->owner);
  free(r->tp_sharded);
  tr_tp_fini(&r->tp);
  free(r);
}

/* copy the 1-D / 2-D box `s` between a full row-major tensor and a packed
 * buffer (to_full: packed -> full) */
static void box_copy(const tpx_slice *s, int64_t full_cols, float *full,
                     float *packed, int to_full) {
  int64_t rows = s->length[0], cols = s->ndim > 1 ? s->length[1] : 1;
  int64_t r0 = s->offset[0], c0 = s->ndim > 1 ? s->offset[1] : 0;
  for (int64_t i = 0; i < rows; i++) {
    float *f = full + (r0 + i) * full_cols + c0, *p = packed + i * cols;
    if (to_full)
      memcpy(f, p, sizeof(float) * (size_t)cols);
    else
      memcpy(p, f, sizeof(float) * (size_t)cols);
  }
}

static int64_t full_cols(tr_rank *r, int64_t p) {
  tpx_param_info pi;
  tpx_model_param(r->tp.model, p, &pi, NULL);
  return pi.ndim > 1 ? pi.shape[1] : 1;
}

/* each parameter's slice straight into its buffer (a tied alias: its
 * target's) */
tpx_status tr_rank_load(tr_rank *r, const tpx_checkpoint_reader *rd,
                        tpx_error *err) {
  tpx_checkpoint_dest *d = calloc(r->np ? r->np : 1, sizeof *d);
  if (!d)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t p = 0; p < r->np; p++)
    if (r->owner[p] == (int64_t)p)
      d[p] = (tpx_checkpoint_dest){
          r->w[p], sizeof(float) * (size_t)nelem(&r->sl[p]), TPX_DTYPE_F32};
  tpx_status st = tpx_checkpoint_read_rank(rd, r->tp.sh, r->tp.rank, d, err);
  free(d);
  return st;
}

/* all-gather the tp group's slices (padded to the largest) and place each */
static tpx_status gather(tr_rank *r, int64_t p, float **bufs, float *full,
                         tpx_error *err) {
  int64_t o = r->owner[p];
  const tpx_mesh *mesh = tpx_sharding_mesh(r->tp.sh);
  int tpd = tpx_mesh_dim_index(mesh, "tp");
  int64_t ntp = tpx_sharding_tp_size(r->tp.sh);
  int64_t ranks[TPX_LOCAL_MAX_RANKS], idx = 0, maxn = 0;
  if (ntp <= 1 || tpd < 0) { /* the whole tensor (MoE experts: 3-D) */
    memcpy(full, bufs[o], sizeof(float) * (size_t)nelem(&r->sl[o]));
    return TPX_OK;
  }
  tpx_status st =
      tpx_mesh_group_ranks(mesh, "tp", r->tp.rank, ranks, &idx, err);
  tpx_slice sl[TPX_LOCAL_MAX_RANKS];
  for (int64_t i = 0; !st && i < ntp; i++) {
    st = tpx_sharding_local_slice(r->tp.sh, o, ranks[i], &sl[i], err);
    if (nelem(&sl[i]) > maxn)
      maxn = nelem(&sl[i]);
  }
  if (st)
    return st;
  float *send = calloc((size_t)(maxn ? maxn : 1), sizeof(float));
  float *recv = calloc((size_t)(maxn ? maxn : 1) * (size_t)ntp, sizeof(float));
  if (!send || !recv) {
    free(send);
    free(recv);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  memcpy(send, bufs[o], sizeof(float) * (size_t)nelem(&r->sl[o]));
  st = tpx_comm_all_gather(tpx_mesh_comm_dim(r->tp.mc, tpd), send, recv,
                           (size_t)maxn, TPX_DTYPE_F32, err);
  for (int64_t i = 0; !st && i < ntp; i++)
    box_copy(&sl[i], full_cols(r, o), full, recv + i * maxn, 1);
  free(send);
  free(recv);
  return st;
}

tpx_status tr_rank_gather(tr_rank *r, int64_t p, int grad, float *full,
                          tpx_error *err) {
  return gather(r, p, grad ? r->g : r->w, full, err);
}

float *tr_param_w(tr_rank *r, int64_t p) {
  return p < 0 ? NULL : r->w[r->owner[p]];
}
float *tr_param_g(tr_rank *r, int64_t p) {
  return p < 0 ? NULL : r->g[r->owner[p]];
}
int64_t tr_param_dim(tr_rank *r, int64_t p, int d) {
  const tpx_slice *s = &r->sl[r->owner[p]];
  return d < s->ndim ? s->length[d] : 1;
}

tpx_status tr_unit_unshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err) {
  return TPX_OK;
}
tpx_status tr_unit_reshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err) {
  return TPX_OK;
}

/* after the whole backward (layer -1 is last): the tp all-reduce of the
 * gradients of params replicated over tp but fed by sequence-sharded
 * activations (norms under SP), as DTensor does */
tpx_status tr_unit_reduce_grads(tr_rank *r, int64_t layer, tpx_error *err) {
  if (layer >= 0)
    return TPX_OK;
  for (size_t p = 0; p < r->np; p++) {
    if (r->owner[p] != (int64_t)p)
      continue;
    int64_t n = nelem(&r->sl[p]);
    tpx_tensor g = tpx_tensor_make(r->g[p], TPX_DTYPE_F32, 1, &n);
    tpx_status st =
        tpx_tp_param_grad_allreduce(r->tp.sh, r->tp.mc, (int64_t)p, &g, err);
    if (st)
      return st;
  }
  return TPX_OK;
}

tpx_status tr_zero_grads(tr_rank *r, tpx_error *err) {
  for (size_t p = 0; p < r->np; p++)
    if (r->owner[p] == (int64_t)p)
      memset(r->g[p], 0, sizeof(float) * (size_t)nelem(&r->sl[p]));
  return TPX_OK;
}

tpx_status tr_optimizer_step(tr_rank *r, double clip, double lr, double wd,
                             int64_t step, double *grad_norm, tpx_error *err) {
  /* each element once: squares of tp-sharded params summed over tp,
   * replicated ones counted on this rank only */
  double sq[2] = {0, 0};
  for (size_t p = 0; p < r->np; p++) {
    if (r->owner[p] != (int64_t)p)
      continue;
    int64_t n = nelem(&r->sl[p]);
    for (int64_t i = 0; i < n; i++)
      sq[r->tp_sharded[p]] += (double)r->g[p][i] * r->g[p][i];
  }
  int tpd = tpx_mesh_dim_index(tpx_sharding_mesh(r->tp.sh), "tp");
  if (tpd >= 0 && tpx_sharding_tp_size(r->tp.sh) > 1) {
    double x = sq[1];
    tpx_status st =
        tpx_comm_all_reduce(tpx_mesh_comm_dim(r->tp.mc, tpd), &x, &sq[1], 1,
                            TPX_DTYPE_F64, TPX_REDUCE_SUM, err);
    if (st)
      return st;
  }
  double norm = sqrt(sq[0] + sq[1]);
  *grad_norm = norm;
  float scale = 1.0f;
  if (clip > 0) {
    double c = clip / (norm + 1e-6);
    if (c < 1.0)
      scale = (float)c;
  }
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
  float step_size = (float)lr / bc1, bc2s = sqrtf(bc2);
  for (size_t p = 0; p < r->np; p++) {
    if (r->owner[p] != (int64_t)p)
      continue;
    int64_t n = nelem(&r->sl[p]);
    float *w = r->w[p], *g = r->g[p], *m = r->m[p], *v = r->v[p];
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * scale;
      w[i] *= 1.0f - (float)(lr * wd);
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      w[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2s + eps);
    }
  }
  r->steps = step;
  return TPX_OK;
}
