/* runtime/rt_adamw.c — torch.optim.AdamW (single-tensor path, f32) on the
 * sharded flat buffers: the f32 masters with the sharded f32 gradients;
 * low-precision storage is refreshed from the masters afterwards. Padding
 * stays zero (zero gradient, zero state, zero parameter). The update is the
 * memory space's adamw kernel (device/host_kernels.c holds the loop), run
 * where the state lives: the host under offload (FSDP2's
 * CPUOffloadPolicy steps the optimizer on the CPU). */
#include <math.h>
#include <string.h>

#include "runtime/rt_internal.h"

tpx_status tpx_runtime_adamw_step(tpx_runtime *rt,
                                  const tpx_adamw_options *opts,
                                  tpx_error *err) {
  if (!rt || !opts)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_adamw_step: %s is NULL",
                         !rt ? "runtime" : "options");
  tpx_adamw_options o = TPX_ADAMW_OPTIONS_INIT;
  if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof o)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_adamw_step: options struct_size %zu "
                         "is not a tpx_adamw_options size",
                         opts->struct_size);
  memcpy(&o, opts, opts->struct_size);
  if (!(o.lr >= 0) || !(o.eps >= 0) || !(o.weight_decay >= 0) ||
      !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_adamw_step: invalid hyper-parameters "
                         "(lr %g, betas %g %g, eps %g, weight_decay %g; "
                         "need lr, eps, weight_decay >= 0 and betas in "
                         "[0, 1))",
                         o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  tpx_status st = tpx_runtime_wait(rt, err);
  if (st != TPX_OK)
    return st;
  for (size_t u = 0; rt->fsdp && u < rt->num_units; u++)
    if (rt->units[u].state != TPX__RT_SHARDED)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_runtime_adamw_step: unit %zu is unsharded; "
                           "reshard every unit before the optimizer step",
                           u);
  /* State first, so a failure leaves parameters untouched. */
  for (size_t u = 0; u < rt->num_units; u++) {
    tpx__rt_unit *un = &rt->units[u];
    size_t bytes = (size_t)un->grad_numel * sizeof(float);
    if (!un->exp_avg)
      un->exp_avg = tpx__rt_alloc(rt, TPX_RUNTIME_MEM_OPTIMIZER, bytes);
    if (!un->exp_avg_sq)
      un->exp_avg_sq = tpx__rt_alloc(rt, TPX_RUNTIME_MEM_OPTIMIZER, bytes);
    if (!un->exp_avg || !un->exp_avg_sq)
      return tpx_error_set(err, TPX_NO_MEMORY,
                           "tpx_runtime_adamw_step: out of memory for the "
                           "optimizer state of unit %zu",
                           u);
  }
  rt->steps++;
  double t = (double)rt->steps;
  double bc1 = 1.0 - pow(o.beta1, t);
  double bc2 = 1.0 - pow(o.beta2, t);
  float decay =
      o.weight_decay != 0 ? (float)(1.0 - o.lr * o.weight_decay) : 1.0f;
  tpx__ms_adamw h;
  h.decay = decay;
  h.w1 = (float)(1.0 - o.beta1);
  h.b2 = (float)o.beta2;
  h.w2 = (float)(1.0 - o.beta2);
  h.bc2s = (float)sqrt(bc2);
  h.eps = (float)o.eps;
  h.step = (float)(-(o.lr / bc1));
  /* Where the sharded state lives: host memory under offload. */
  const tpx__memspace *ms = tpx__rt_state_ms(rt);
  for (size_t i = 0; i < rt->num_rt_params && st == TPX_OK; i++) {
    const tpx__rt_param *p = &rt->params[i];
    tpx__rt_unit *un = &rt->units[p->unit];
    float *master = tpx__rt_master(rt, p);
    if (!p->padded)
      continue;
    st = tpx__ms_adamw_update(
        ms, master, un->grad + p->grad_off, un->exp_avg + p->grad_off,
        un->exp_avg_sq + p->grad_off, (size_t)p->padded, &h, err);
    if (st == TPX_OK && p->master_off >= 0)
      st = tpx__ms_convert(ms, (unsigned char *)un->flat + p->flat_off,
                           p->storage, master, TPX_DTYPE_F32, (size_t)p->padded,
                           err);
  }
  return st;
}
