/* runtime/rt_adamw.c — torch.optim.AdamW (single-tensor path, f32) on the
 * sharded flat buffers: the f32 masters with the sharded f32 gradients;
 * low-precision storage is refreshed from the masters afterwards. Padding
 * stays zero (zero gradient, zero state, zero parameter). */
#include <math.h>
#include <string.h>

#include "runtime/rt_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* One element, in torch's order of operations. */
static inline float adamw1(float p, float g, float *m, float *v, float decay,
                           float w1, float b2, float w2, float bc2s,
                           float eps, float step) {
  float pi = p * decay; /* decay is 1 without weight decay: exact */
  *m = *m + w1 * (g - *m); /* lerp_(g, 1-b1), weight < 0.5 */
  *v = *v * b2 + w2 * g * g;
  float denom = sqrtf(*v) / bc2s + eps;
  return pi + step * *m / denom;
}

/* With SSE2, four lanes at a time with the same IEEE operations in the same
 * order (sqrtps, divps are correctly rounded), so results are bit-identical
 * to the scalar loop; a plain loop does not vectorise because of sqrtf's
 * errno. */
static void adamw(float *restrict p, const float *restrict g,
                  float *restrict m, float *restrict v, int64_t n,
                  float decay, float w1, float b2, float w2, float bc2s,
                  float eps, float step) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128 vdecay = _mm_set1_ps(decay), vw1 = _mm_set1_ps(w1),
               vb2 = _mm_set1_ps(b2), vw2 = _mm_set1_ps(w2),
               vbc2s = _mm_set1_ps(bc2s), veps = _mm_set1_ps(eps),
               vstep = _mm_set1_ps(step);
  for (; i + 4 <= n; i += 4) {
    __m128 gi = _mm_loadu_ps(g + i), mi = _mm_loadu_ps(m + i),
           vi = _mm_loadu_ps(v + i);
    __m128 pi = _mm_mul_ps(_mm_loadu_ps(p + i), vdecay);
    mi = _mm_add_ps(mi, _mm_mul_ps(vw1, _mm_sub_ps(gi, mi)));
    vi = _mm_add_ps(_mm_mul_ps(vi, vb2), _mm_mul_ps(_mm_mul_ps(vw2, gi), gi));
    __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), vbc2s), veps);
    pi = _mm_add_ps(pi, _mm_div_ps(_mm_mul_ps(vstep, mi), denom));
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    _mm_storeu_ps(p + i, pi);
  }
#endif
  for (; i < n; i++)
    p[i] = adamw1(p[i], g[i], &m[i], &v[i], decay, w1, b2, w2, bc2s, eps,
                  step);
}

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
  if (st != TPX_OK) return st;
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
  float decay = o.weight_decay != 0 ? (float)(1.0 - o.lr * o.weight_decay)
                                    : 1.0f;
  float step = (float)(-(o.lr / bc1));
  float bc2s = (float)sqrt(bc2);
  for (size_t i = 0; i < rt->num_rt_params; i++) {
    const tpx__rt_param *p = &rt->params[i];
    tpx__rt_unit *un = &rt->units[p->unit];
    float *master = tpx__rt_master(rt, p);
    adamw(master, un->grad + p->grad_off, un->exp_avg + p->grad_off,
          un->exp_avg_sq + p->grad_off, p->padded, decay,
          (float)(1.0 - o.beta1), (float)o.beta2, (float)(1.0 - o.beta2),
          bc2s, (float)o.eps, step);
    if (p->master_off >= 0)
      tpx__rt_convert((unsigned char *)un->flat + p->flat_off, p->storage,
                      master, TPX_DTYPE_F32, (size_t)p->padded);
  }
  return TPX_OK;
}
