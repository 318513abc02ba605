/* glue_rt.c — the trainer's parameters through the tpx runtime
 * (tpx/runtime.h), one object per rank: storage, FSDP2 through the
 * runtime's module hooks (which keep the unit bookkeeping), grad norm /
 * clip and AdamW. The TP half (transitions, vocab-parallel embedding and
 * loss) is glue_tp.c. */
#include <stdio.h>
#include <stdlib.h>

#include "glue_impl.h"

struct tr_rank {
  tr_tp tp; /* first: the shared TP half (glue_tp.c) */
  tpx_runtime *rt;
};

tpx_status tr_rank_create(const tr_rank_setup *su, tr_rank **out,
                          tpx_error *err) {
  tr_rank *r = *out = calloc(1, sizeof *r);
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  /* the trainer computes in f32 whatever the checkpoint's dtype (a bf16
   * checkpoint is read and upcast, as from_pretrained(dtype=float32)) */
  ro.storage_dtype = TPX_DTYPE_F32;
  ro.offload = su->offload;
  tpx_status st = r ? tr_tp_init(&r->tp, su, err)
                    : tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (!st)
    st = tpx_runtime_create(su->sharding, r->tp.mc, &ro, &r->rt, err);
  if (st) {
    tr_rank_destroy(r);
    *out = NULL;
  }
  return st;
}

int tr_rank_memory(const tr_rank *r, tr_memory *out) {
  *out = (tr_memory)TPX_RUNTIME_MEMORY_INIT;
  return tpx_runtime_memory_stats(r->rt, out, NULL) == TPX_OK;
}

void tr_rank_destroy(tr_rank *r) {
  if (!r)
    return;
  tpx_runtime_destroy(r->rt);
  tr_tp_fini(&r->tp);
  free(r);
}

tpx_runtime *tr_rank_runtime(const tr_rank *r) { return r->rt; }

static tpx_runtime_param_info info(tr_rank *r, int64_t p) {
  tpx_runtime_param_info pi = {0}; /* a tied alias reports its target */
  tpx_runtime_param(r->rt, p, &pi, NULL);
  return pi;
}

tpx_status tr_rank_load(tr_rank *r, const tpx_checkpoint_reader *rd,
                        tpx_error *err) {
  return tpx_runtime_load_checkpoint(r->rt, rd, err);
}

tpx_status tr_rank_gather(tr_rank *r, int64_t p, int grad, float *full,
                          tpx_error *err) {
  return grad ? tpx_runtime_gather_grad(r->rt, p, full, TPX_DTYPE_F32, err)
              : tpx_runtime_gather_param(r->rt, p, full, TPX_DTYPE_F32, err);
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

/* FSDP2's hooks, by module name: the runtime finds each layer's unit,
 * gathers it once per pass and reduces it once per backward; the model's
 * own hooks (module "", layer -1 here) open and close the passes, keeping
 * the root units (embedding, final norm, lm_head) gathered between. */
static const char *module(int64_t l, char *b) {
  snprintf(b, 64, "model.layers.%lld", (long long)l);
  return l < 0 ? "" : b;
}

tpx_status tr_unit_unshard(tr_rank *r, int64_t l, int backward,
                           tpx_error *err) {
  char b[64];
  return backward ? tpx_runtime_pre_backward(r->rt, module(l, b), err)
                  : tpx_runtime_pre_forward(r->rt, module(l, b), err);
}

tpx_status tr_unit_reduce_grads(tr_rank *r, int64_t l, tpx_error *err) {
  char b[64];
  return tpx_runtime_post_backward(r->rt, module(l, b), err);
}

/* backward: post_backward above resharded already */
tpx_status tr_unit_reshard(tr_rank *r, int64_t l, int backward,
                           tpx_error *err) {
  char b[64];
  return backward ? TPX_OK : tpx_runtime_post_forward(r->rt, module(l, b), err);
}

tpx_status tr_zero_grads(tr_rank *r, tpx_error *err) {
  return tpx_runtime_zero_grads(r->rt, err);
}

tpx_status tr_optimizer_step(tr_rank *r, double clip, double lr, double wd,
                             int64_t step, double *grad_norm, tpx_error *err) {
  tpx_status st =
      clip > 0 ? tpx_runtime_clip_grad_norm(r->rt, clip, 2.0, grad_norm, err)
               : tpx_runtime_grad_norm(r->rt, 2.0, grad_norm, err);
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = lr;
  ao.weight_decay = wd;
  return st ? st : tpx_runtime_adamw_step(r->rt, &ao, err);
}
