/* glue_rt.c — the trainer's parameters through the tpx runtime
 * (tpx/runtime.h), one object per rank: storage, FSDP2 through the
 * runtime's module hooks (which keep the unit bookkeeping), grad norm /
 * clip and AdamW. The TP half (transitions, vocab-parallel embedding and
 * loss) is glue_tp.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glue_impl.h"

struct tr_rank {
  tr_tp tp; /* first: the shared TP half (glue_tp.c) */
  const tpx_model *model;
  tpx_runtime *rt;
};

/* time a collective call into r->comm_s */
#define TIMED(r, call)                                                         \
  do {                                                                         \
    double t0_ = tr_now();                                                     \
    tpx_status s_ = (call);                                                    \
    (r)->tp.comm_s += tr_now() - t0_;                                          \
    return s_;                                                                 \
  } while (0)

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
  if (st)
    tr_rank_destroy(r);
  else
    *out = r;
  return st;
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
  free(r);
}

/* the shard itself: an f32 view into the unit's flat buffer (master ==
 * sharded for f32 storage), whose global box is this rank's local slice */
tpx_checkpoint_dest tr_rank_dest(tr_rank *r, int64_t p) {
  tpx_checkpoint_dest d = {NULL, 0, TPX_DTYPE_F32};
  tpx_runtime_param_info pi; /* a tied alias reports its target */
  if (tpx_runtime_param(r->rt, p, &pi, NULL) || pi.param != p)
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

/* FSDP2's hooks, by module name: the runtime finds each layer's unit,
 * gathers it once per pass, reduces it once per backward, and keeps the
 * root units (embedding, final norm, lm_head) gathered from
 * forward_begin to backward_end (layer -1 stands for them). */
static const char *layer_name(int64_t layer, char *b, size_t n) {
  snprintf(b, n, "model.layers.%lld", (long long)layer);
  return b;
}

tpx_status tr_zero_grads(tr_rank *r, tpx_error *err) {
  return tpx_runtime_zero_grads(r->rt, err);
}

tpx_status tr_unit_unshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err) {
  char b[64];
  if (layer < 0)
    TIMED(r, backward ? tpx_runtime_backward_begin(r->rt, err)
                      : tpx_runtime_forward_begin(r->rt, err));
  layer_name(layer, b, sizeof b);
  TIMED(r, backward ? tpx_runtime_pre_backward(r->rt, b, err)
                    : tpx_runtime_pre_forward(r->rt, b, err));
}

tpx_status tr_unit_reduce_grads(tr_rank *r, int64_t layer, tpx_error *err) {
  char b[64];
  TIMED(r, layer < 0 ? tpx_runtime_backward_end(r->rt, err)
                     : tpx_runtime_post_backward(
                           r->rt, layer_name(layer, b, sizeof b), err));
}

/* backward: post_backward / backward_end above resharded already */
tpx_status tr_unit_reshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err) {
  char b[64];
  if (backward || layer < 0)
    return TPX_OK;
  return tpx_runtime_post_forward(r->rt, layer_name(layer, b, sizeof b), err);
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
