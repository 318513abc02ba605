/* glue_rt.c — the trainer's parameters through the tpx runtime
 * (tpx/runtime.h), one object per rank: storage, FSDP2 units (unshard,
 * reshard, gradient reduction), grad norm / clip and AdamW. The TP half
 * (transitions, vocab-parallel embedding and loss) is glue_tp.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glue_impl.h"

struct tr_rank {
  tr_tp tp; /* first: the shared TP half (glue_tp.c) */
  const tpx_model *model;
  tpx_runtime *rt;
  int64_t embed;
  int64_t *layer_param; /* a parameter of each layer (its unit) */
  int64_t nlayers;
  size_t nunits;
  unsigned char *unsharded_fwd, *unsharded_bwd, *reduced;
  /* units holding parameters outside the decoder layers (embedding, final
   * norm, lm_head: the root and, for untied embeddings, their own units),
   * in forward order; "layer -1" stands for all of them */
  int64_t root_units[8];
  int nroot;
};

/* time a collective call into r->comm_s */
#define TIMED(r, call)                                                         \
  do {                                                                         \
    double t0_ = tr_now();                                                     \
    tpx_status s_ = (call);                                                    \
    (r)->tp.comm_s += tr_now() - t0_;                                          \
    return s_;                                                                 \
  } while (0)

static int fsdp_on(const tr_rank *r) { return tpx_runtime_fsdp_enabled(r->rt); }

tpx_status tr_rank_create(const tr_rank_setup *su, tr_rank **out,
                          tpx_error *err) {
  *out = NULL;
  tr_rank *r = calloc(1, sizeof *r);
  if (!r)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  r->model = su->model;
  tpx_status st = tr_tp_init(&r->tp, su, err);
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  /* the trainer computes in f32 whatever the checkpoint's dtype (a bf16
   * checkpoint is read and upcast, as from_pretrained(dtype=float32)) */
  ro.storage_dtype = TPX_DTYPE_F32;
  ro.offload = su->offload;
  if (!st)
    st = tpx_runtime_create(su->sharding, r->tp.mc, &ro, &r->rt, err);
  if (st) {
    tr_rank_destroy(r);
    return st;
  }
  r->embed = r->tp.embed;
  int64_t nl = 0;
  tpx_model_config_int(r->model, "num_hidden_layers", &nl, NULL);
  r->nlayers = nl;
  r->layer_param = calloc((size_t)(nl + 1), sizeof *r->layer_param);
  r->nunits = tpx_runtime_num_units(r->rt);
  r->unsharded_fwd = calloc(r->nunits + 1, 1);
  r->unsharded_bwd = calloc(r->nunits + 1, 1);
  r->reduced = calloc(r->nunits + 1, 1);
  if (!r->layer_param || !r->unsharded_fwd || !r->unsharded_bwd ||
      !r->reduced) {
    tr_rank_destroy(r);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  for (int64_t l = 0; l < nl; l++) {
    char b[128];
    snprintf(b, sizeof b, "model.layers.%lld.self_attn.q_proj.weight",
             (long long)l);
    r->layer_param[l] = tpx_model_find_param(r->model, b);
  }
  const char *outside[] = {"model.embed_tokens.weight", "model.norm.weight",
                           "lm_head.weight"};
  for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
    int64_t u = tpx_runtime_param_unit(
        r->rt, tpx_model_find_param(r->model, outside[i]));
    int seen = u < 0;
    for (int k = 0; k < r->nroot; k++) seen |= r->root_units[k] == u;
    if (!seen)
      r->root_units[r->nroot++] = u;
  }
  *out = r;
  return TPX_OK;
}

int tr_rank_memory(const tr_rank *r, tr_memory *out) {
  out->params = tpx_runtime_allocated_bytes(r->rt, TPX_RUNTIME_MEM_PARAMS);
  out->grads = tpx_runtime_allocated_bytes(r->rt, TPX_RUNTIME_MEM_GRADS);
  out->optimizer =
      tpx_runtime_allocated_bytes(r->rt, TPX_RUNTIME_MEM_OPTIMIZER);
  out->gather_peak = tpx_runtime_peak_bytes(r->rt, TPX_RUNTIME_MEM_GATHER);
  out->peak = tpx_runtime_peak_bytes(r->rt, TPX_RUNTIME_MEM_TOTAL);
  out->device_peak = tpx_runtime_space_bytes(r->rt, 0, 1);
  out->host_peak = tpx_runtime_space_bytes(r->rt, 1, 1);
  return 1;
}

void tr_rank_destroy(tr_rank *r) {
  if (!r)
    return;
  tpx_runtime_destroy(r->rt);
  tr_tp_fini(&r->tp);
  free(r->layer_param);
  free(r->unsharded_fwd);
  free(r->unsharded_bwd);
  free(r->reduced);
  free(r);
}

/* the shard itself: an f32 view into the unit's flat buffer (master ==
 * sharded for f32 storage), whose global box is this rank's local slice */
tpx_checkpoint_dest tr_rank_dest(tr_rank *r, int64_t p) {
  tpx_checkpoint_dest d = {NULL, 0, TPX_DTYPE_F32};
  tpx_param_info mi;
  tpx_runtime_param_info pi;
  if (tpx_model_param(r->model, p, &mi, NULL) || mi.tied_to >= 0 ||
      tpx_runtime_param(r->rt, p, &pi, NULL))
    return d;
  d.data = pi.master;
  d.bytes = sizeof(float) * (size_t)pi.sharded_numel;
  return d;
}

tpx_status tr_rank_gather(tr_rank *r, int64_t p, float *full, tpx_error *err) {
  return tpx_runtime_gather_param(r->rt, p, full, TPX_DTYPE_F32, err);
}

tpx_status tr_rank_gather_grad(tr_rank *r, int64_t p, float *full,
                               tpx_error *err) {
  return tpx_runtime_gather_grad(r->rt, p, full, TPX_DTYPE_F32, err);
}

static tpx_runtime_param_info info(tr_rank *r, int64_t p) {
  tpx_runtime_param_info pi;
  memset(&pi, 0, sizeof pi);
  tpx_runtime_param(r->rt, p, &pi, NULL);
  return pi;
}

float *tr_param_w(tr_rank *r, int64_t p) {
  return p < 0 ? NULL : info(r, p).unsharded;
}
float *tr_param_g(tr_rank *r, int64_t p) {
  return p < 0 ? NULL : info(r, p).unsharded_grad;
}
int64_t tr_param_dim(tr_rank *r, int64_t p, int d) {
  tpx_runtime_param_info pi = info(r, p);
  return d < pi.ndim ? pi.local_shape[d] : 1;
}
int64_t tr_param_full_dim(tr_rank *r, int64_t p, int d) {
  tpx_param_info pi;
  if (tpx_model_param(r->model, p, &pi, NULL) || d >= pi.ndim)
    return 1;
  return pi.shape[d];
}

static int64_t unit_of(tr_rank *r, int64_t layer) {
  return tpx_runtime_param_unit(r->rt, r->layer_param[layer]);
}

static int is_root_unit(const tr_rank *r, int64_t u) {
  for (int k = 0; k < r->nroot; k++)
    if (r->root_units[k] == u)
      return 1;
  return 0;
}

tpx_status tr_zero_grads(tr_rank *r, tpx_error *err) {
  memset(r->unsharded_fwd, 0, r->nunits + 1);
  memset(r->unsharded_bwd, 0, r->nunits + 1);
  memset(r->reduced, 0, r->nunits + 1);
  return tpx_runtime_zero_grads(r->rt, err);
}

/* Each unit is unsharded once per pass and reduced once per step, whoever
 * asks first (a layer may share a root unit; FSDP off is one pseudo-unit).
 * Root units (layer -1) are gathered first and released last. */
static tpx_status unshard_one(tr_rank *r, int64_t u, int backward,
                              tpx_error *err) {
  if (u < 0 || (size_t)u >= r->nunits)
    return tpx_error_set(err, TPX_INTERNAL, "no runtime unit %lld",
                         (long long)u);
  unsigned char *done = backward ? r->unsharded_bwd : r->unsharded_fwd;
  if (done[u])
    return TPX_OK;
  done[u] = 1;
  TIMED(r, tpx_runtime_unshard(
               r->rt, (size_t)u,
               backward ? TPX_RUNTIME_BACKWARD : TPX_RUNTIME_FORWARD, err));
}

tpx_status tr_unit_unshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err) {
  if (layer >= 0)
    return unshard_one(r, unit_of(r, layer), backward, err);
  for (int k = 0; k < r->nroot; k++) {
    tpx_status st = unshard_one(r, r->root_units[k], backward, err);
    if (st)
      return st;
  }
  return TPX_OK;
}

static tpx_status reduce_one(tr_rank *r, int64_t u, tpx_error *err) {
  if (r->reduced[u])
    return TPX_OK;
  r->reduced[u] = 1;
  TIMED(r, tpx_runtime_reduce_grads(r->rt, (size_t)u, err));
}

tpx_status tr_unit_reduce_grads(tr_rank *r, int64_t layer, tpx_error *err) {
  if (layer >= 0) {
    int64_t u = unit_of(r, layer);
    if (!fsdp_on(r) || is_root_unit(r, u))
      return TPX_OK; /* with the root, at the end */
    return reduce_one(r, u, err);
  }
  for (int k = 0; k < r->nroot; k++) {
    tpx_status st = reduce_one(r, r->root_units[k], err);
    if (st)
      return st;
  }
  return TPX_OK;
}

tpx_status tr_unit_reshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err) {
  if (!fsdp_on(r))
    return TPX_OK;
  if (layer >= 0) {
    int64_t u = unit_of(r, layer);
    if (is_root_unit(r, u) || (backward && !r->reduced[u]))
      return TPX_OK;
    return tpx_runtime_reshard(
        r->rt, (size_t)u, backward ? TPX_RUNTIME_BACKWARD : TPX_RUNTIME_FORWARD,
        err);
  }
  for (int k = 0; k < r->nroot; k++) {
    tpx_status st = tpx_runtime_reshard(
        r->rt, (size_t)r->root_units[k],
        backward ? TPX_RUNTIME_BACKWARD : TPX_RUNTIME_FORWARD, err);
    if (st)
      return st;
  }
  return TPX_OK;
}

tpx_status tr_optimizer_step(tr_rank *r, double clip, double lr, double wd,
                             int64_t step, double *grad_norm, tpx_error *err) {
  double t0 = tr_now();
  tpx_status st =
      clip > 0 ? tpx_runtime_clip_grad_norm(r->rt, clip, 2.0, grad_norm, err)
               : tpx_runtime_grad_norm(r->rt, 2.0, grad_norm, err);
  r->tp.comm_s += tr_now() - t0;
  if (st)
    return st;
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = lr;
  ao.weight_decay = wd;
  return tpx_runtime_adamw_step(r->rt, &ao, err);
}
