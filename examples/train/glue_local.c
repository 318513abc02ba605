/* glue_local.c — where the decoder meets tpx, one object per rank. This version
 * runs world 1 only, on storage it owns (full tensors, no collectives): the
 * numerical reference the runtime-backed meshes are compared with. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"

struct tr_rank {
  const tpx_model *model;
  size_t np;
  float **w, **g, **m, **v; /* per param (tied: the target's) */
  int64_t (*shape)[2];
  int64_t *owner; /* storage owner (tied_to or self) */
};

tpx_status tr_rank_create(const tr_rank_setup *su, tr_rank **out, tpx_error *err) {
  *out = NULL;
  if (su->world != 1)
    return tpx_error_set(err, TPX_UNSUPPORTED, "tpx-train: this build runs world 1 only");
  tr_rank *r = calloc(1, sizeof *r);
  if (!r) return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  r->model = su->model;
  r->np = tpx_model_num_params(su->model);
  r->w = calloc(r->np, sizeof *r->w); r->g = calloc(r->np, sizeof *r->g);
  r->m = calloc(r->np, sizeof *r->m); r->v = calloc(r->np, sizeof *r->v);
  r->shape = calloc(r->np, sizeof *r->shape); r->owner = calloc(r->np, sizeof *r->owner);
  if (!r->w || !r->g || !r->m || !r->v || !r->shape || !r->owner) {
    tr_rank_destroy(r);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  for (size_t p = 0; p < r->np; p++) {
    tpx_param_info pi;
    tpx_model_param(su->model, (int64_t)p, &pi, NULL);
    r->owner[p] = pi.tied_to >= 0 ? pi.tied_to : (int64_t)p;
    r->shape[p][0] = pi.ndim > 0 ? pi.shape[0] : 1;
    r->shape[p][1] = pi.ndim > 1 ? pi.shape[1] : 1;
    if (pi.tied_to >= 0) continue;
    size_t n = (size_t)(r->shape[p][0] * r->shape[p][1]);
    r->w[p] = calloc(n, sizeof(float)); r->g[p] = calloc(n, sizeof(float));
    r->m[p] = calloc(n, sizeof(float)); r->v[p] = calloc(n, sizeof(float));
    if (!r->w[p] || !r->g[p] || !r->m[p] || !r->v[p]) {
      tr_rank_destroy(r);
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (parameter %s)", pi.fqn);
    }
  }
  *out = r;
  return TPX_OK;
}

void tr_rank_destroy(tr_rank *r) {
  if (!r) return;
  for (size_t p = 0; p < r->np; p++)
    if (r->w && r->owner && r->owner[p] == (int64_t)p) {
      free(r->w[p]); free(r->g[p]); free(r->m[p]); free(r->v[p]);
    }
  free(r->w); free(r->g); free(r->m); free(r->v); free(r->shape); free(r->owner);
  free(r);
}

tpx_status tr_rank_load(tr_rank *r, int64_t p, const float *full, tpx_error *err) {
  if (r->owner[p] != p) return TPX_OK;
  memcpy(r->w[p], full, sizeof(float) * (size_t)(r->shape[p][0] * r->shape[p][1]));
  return TPX_OK;
}

tpx_status tr_rank_gather(tr_rank *r, int64_t p, float *full, tpx_error *err) {
  int64_t o = r->owner[p];
  memcpy(full, r->w[o], sizeof(float) * (size_t)(r->shape[p][0] * r->shape[p][1]));
  return TPX_OK;
}

int tr_rank_is_root(const tr_rank *r) { return 1; }
double tr_rank_comm_seconds(const tr_rank *r) { return 0; }

float *tr_param_w(tr_rank *r, int64_t p) { return p < 0 ? NULL : r->w[r->owner[p]]; }
float *tr_param_g(tr_rank *r, int64_t p) { return p < 0 ? NULL : r->g[r->owner[p]]; }
int64_t tr_param_dim(tr_rank *r, int64_t p, int d) { return r->shape[p][d]; }
int64_t tr_param_full_dim(tr_rank *r, int64_t p, int d) { return r->shape[p][d]; }

tpx_status tr_transition(tr_rank *r, int64_t module, int output, int backward, tr_act *x,
                         tpx_error *err) {
  return TPX_OK;
}

tpx_status tr_embed_fwd(tr_rank *r, const int32_t *ids, int64_t b, int64_t t, tr_act *out,
                        tpx_error *err) {
  int64_t p = tpx_model_find_param(r->model, "model.embed_tokens.weight");
  int64_t v = r->shape[p][0], h = r->shape[p][1];
  tpx_status st = tr_act_alloc(out, b, t, h, err);
  if (st) return st;
  for (int64_t i = 0; i < b * t; i++) {
    if (ids[i] < 0 || ids[i] >= v)
      return tpx_error_set(err, TPX_VALIDATION, "token id %d outside the vocabulary", ids[i]);
    memcpy(out->d + i * h, r->w[p] + (int64_t)ids[i] * h, sizeof(float) * (size_t)h);
  }
  return TPX_OK;
}

tpx_status tr_embed_bwd(tr_rank *r, const int32_t *ids, int64_t b, int64_t t, tr_act *dout,
                        tpx_error *err) {
  int64_t p = tpx_model_find_param(r->model, "model.embed_tokens.weight");
  int64_t h = r->shape[p][1];
  for (int64_t i = 0; i < b * t; i++) {
    float *gr = r->g[p] + (int64_t)ids[i] * h;
    for (int64_t j = 0; j < h; j++) gr[j] += dout->d[i * h + j];
  }
  return TPX_OK;
}

tpx_status tr_cross_entropy(tr_rank *r, const tr_act *logits, const int32_t *targets,
                            double *loss, tr_act *dlogits, tpx_error *err) {
  int64_t n = logits->b * logits->s, v = logits->f;
  double total = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *x = logits->d + i * v;
    float *dx = dlogits->d + i * v;
    float mx = x[0];
    for (int64_t j = 1; j < v; j++) mx = x[j] > mx ? x[j] : mx;
    double s = 0;
    for (int64_t j = 0; j < v; j++) s += exp((double)(x[j] - mx));
    double lse = (double)mx + log(s);
    total += lse - (double)x[targets[i]];
    for (int64_t j = 0; j < v; j++) dx[j] = (float)(exp((double)x[j] - lse) / (double)n);
    dx[targets[i]] -= 1.0f / (float)n;
  }
  *loss = total / (double)n;
  return TPX_OK;
}

tpx_status tr_unit_unshard(tr_rank *r, int64_t layer, int backward, tpx_error *err) {
  return TPX_OK;
}
tpx_status tr_unit_reshard(tr_rank *r, int64_t layer, int backward, tpx_error *err) {
  return TPX_OK;
}
tpx_status tr_unit_reduce_grads(tr_rank *r, int64_t layer, tpx_error *err) { return TPX_OK; }
tpx_status tr_dp_mean(tr_rank *r, double *v, tpx_error *err) { return TPX_OK; }

tpx_status tr_zero_grads(tr_rank *r, tpx_error *err) {
  for (size_t p = 0; p < r->np; p++)
    if (r->owner[p] == (int64_t)p)
      memset(r->g[p], 0, sizeof(float) * (size_t)(r->shape[p][0] * r->shape[p][1]));
  return TPX_OK;
}

tpx_status tr_optimizer_step(tr_rank *r, double clip, double lr, double wd, int64_t step,
                             double *grad_norm, tpx_error *err) {
  double ss = 0;
  for (size_t p = 0; p < r->np; p++) {
    if (r->owner[p] != (int64_t)p) continue;
    int64_t n = r->shape[p][0] * r->shape[p][1];
    for (int64_t i = 0; i < n; i++) ss += (double)r->g[p][i] * r->g[p][i];
  }
  double norm = sqrt(ss);
  *grad_norm = norm;
  float scale = 1.0f;
  if (clip > 0) {
    double c = clip / (norm + 1e-6);
    if (c < 1.0) scale = (float)c;
  }
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
  float step_size = (float)lr / bc1, bc2s = sqrtf(bc2);
  for (size_t p = 0; p < r->np; p++) {
    if (r->owner[p] != (int64_t)p) continue;
    int64_t n = r->shape[p][0] * r->shape[p][1];
    float *w = r->w[p], *g = r->g[p], *m = r->m[p], *v = r->v[p];
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * scale;
      w[i] *= 1.0f - (float)(lr * wd);
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      w[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2s + eps);
    }
  }
  return TPX_OK;
}
