/* device/ms_cuda_kernels.cu — the cuda memory space's kernel table
 * (device/kernels.h: tpx__ms_cuda_kernels), compiled by nvcc through
 * meson's cuda language when CUDA + NCCL and a working nvcc are found.
 * Each entry enqueues on the space's stream and reports the launch.
 * The math mirrors device/host_kernels.c element for element (same f32 /
 * f64 operations, the host's own bf16 / f16 conversions from
 * device/elem_bits.h, the loss's polynomial exp); reductions (norm_acc,
 * loss sums) combine partial sums in a tree, so they are not bit-identical
 * to the host's sequential order.
 * embed_scatter_add keeps the host's id order per column (one thread per
 * column), so duplicate ids accumulate deterministically.
 * Compile-and-link only here: no GPU runs these in the tests. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "device/elem_bits.h"
#include "device/ms_cuda_kernels.h"

namespace {

const int kThreads = 256;

/* 16-bit floats through the host's bit operations (device/elem_bits.h),
 * not __half2float / __float2half_rn, which canonicalise NaN. */
__device__ float getf(const void *p, int dt, size_t i) {
  if (dt == TPX_DTYPE_BF16)
    return tpx__hb_bf16_to_f32(((const uint16_t *)p)[i]);
  if (dt == TPX_DTYPE_F16)
    return tpx__hb_f16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}

__device__ void putf(void *p, int dt, size_t i, float v) {
  if (dt == TPX_DTYPE_BF16)
    ((uint16_t *)p)[i] = tpx__hb_f32_to_bf16(v);
  else if (dt == TPX_DTYPE_F16)
    ((uint16_t *)p)[i] = tpx__hb_f32_to_f16(v);
  else
    ((float *)p)[i] = v;
}

__device__ int64_t get_index(const void *ids, int idt, size_t i) {
  if (idt == TPX_DTYPE_I32) return ((const int32_t *)ids)[i];
  return ((const int64_t *)ids)[i];
}

unsigned blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

#define GRID_STRIDE(i, n)                                                      \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);      \
       i += (size_t)gridDim.x * blockDim.x)

__global__ void k_convert(void *dst, int dd, const void *src, int sd,
                          size_t n) {
  GRID_STRIDE(i, n) putf(dst, dd, i, getf(src, sd, i));
}

__global__ void k_add(float *dst, const void *src, int sd, size_t n,
                      float div) {
  GRID_STRIDE(i, n) {
    float s = getf(src, sd, i);
    dst[i] += (div == 1.0f && sd == TPX_DTYPE_F32) ? s : s / div;
  }
}

__global__ void k_scale(float *p, size_t n, float v, int divide) {
  GRID_STRIDE(i, n) p[i] = divide ? p[i] / v : p[i] * v;
}

/* One block: partial sums / maxima in shared memory, thread 0 folds. */
__global__ void k_norm(double *acc, const float *g, size_t n, int inf) {
  __shared__ double part[kThreads];
  double a = 0.0;
  for (size_t k = threadIdx.x; k < n; k += blockDim.x) {
    double v = (double)g[k];
    if (inf) {
      v = fabs(v);
      if (v > a || isnan(v)) a = v;
    } else {
      a += v * v;
    }
  }
  part[threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.x != 0) return;
  double t = *acc;
  for (int j = 0; j < (int)blockDim.x; j++) {
    if (inf) {
      if (part[j] > t || isnan(part[j])) t = part[j];
    } else {
      t += part[j];
    }
  }
  *acc = t;
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v,
                        size_t n, float decay, float w1, float b2, float w2,
                        float bc2s, float eps, float step) {
  GRID_STRIDE(i, n) {
    float pi = p[i] * decay;
    float mi = m[i] + w1 * (g[i] - m[i]);
    float vi = v[i] * b2 + w2 * g[i] * g[i];
    float denom = sqrtf(vi) / bc2s + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + step * mi / denom;
  }
}

/* One block: the smallest bad index (and its id) into bad[0..1]. */
__global__ void k_index_check(const void *ids, int idt, size_t n, int64_t V,
                              int has_ignore, int64_t ignore, int64_t *bad) {
  __shared__ unsigned long long first[kThreads];
  unsigned long long mine = ~0ull;
  for (size_t i = threadIdx.x; i < n && mine == ~0ull; i += blockDim.x) {
    int64_t id = get_index(ids, idt, i);
    if (has_ignore && id == ignore) continue;
    if (id < 0 || id >= V) mine = i;
  }
  first[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned long long m = ~0ull;
  for (int j = 0; j < (int)blockDim.x; j++)
    if (first[j] < m) m = first[j];
  bad[0] = m == ~0ull ? -1 : (int64_t)m;
  bad[1] = m == ~0ull ? 0 : get_index(ids, idt, (size_t)m);
}

__device__ int64_t row_of(int64_t id, int64_t off, int64_t len, int masked) {
  if (!masked) return id;
  int64_t r = id - off;
  return r >= 0 && r < len ? r : -1;
}

/* Block i copies (or zeroes) output row i. */
__global__ void k_embed_lookup(unsigned char *out, const unsigned char *w,
                               size_t row_bytes, const void *ids, int idt,
                               size_t n, int64_t off, int64_t len,
                               int masked) {
  for (size_t i = blockIdx.x; i < n; i += gridDim.x) {
    int64_t r = row_of(get_index(ids, idt, i), off, len, masked);
    for (size_t b = threadIdx.x; b < row_bytes; b += blockDim.x)
      out[i * row_bytes + b] = r < 0 ? 0 : w[(size_t)r * row_bytes + b];
  }
}

/* Thread j owns column j and walks the ids in order, as the host loop. */
__global__ void k_embed_scatter_add(void *wg, int wdt, const void *g,
                                    int gdt, size_t hl, const void *ids,
                                    int idt, size_t n, int64_t off,
                                    int64_t len, int masked) {
  GRID_STRIDE(j, hl) {
    for (size_t i = 0; i < n; i++) {
      int64_t r = row_of(get_index(ids, idt, i), off, len, masked);
      if (r < 0) continue;
      size_t k = (size_t)r * hl + j;
      putf(wg, wdt, k, getf(wg, wdt, k) + getf(g, gdt, i * hl + j));
    }
  }
}

/* The host's branch-free exp for x <= 0 (device/host_kernels.c). */
__device__ float exp_f32(float x) {
  x = fmaxf(x, -100.0f);
  const float shifter = 12582912.0f;
  float t = __fadd_rn(__fmul_rn(x, 1.44269504088896341f), shifter);
  int32_t tb = __float_as_int(t), sb = __float_as_int(shifter);
  float n = __fsub_rn(t, shifter);
  float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, 0.693145751953125f)),
                      __fmul_rn(n, 1.428606765330187e-06f));
  float p = 1.0f / 5040.0f;
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 720.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 120.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 24.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 6.0f);
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  int32_t e = tb - sb + 127;
  e &= ~(e >> 31);
  e <<= 23;
  return __fmul_rn(p, __int_as_float(e));
}

/* Block i: the max of row i. */
__global__ void k_row_max(float *mx, const void *z, int ldt, size_t rows,
                          size_t len) {
  __shared__ float part[kThreads];
  for (size_t i = blockIdx.x; i < rows; i += gridDim.x) {
    float m = -INFINITY;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) {
      float v = getf(z, ldt, i * len + j);
      m = v > m ? v : m;
    }
    part[threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
      float t = -INFINITY;
      for (int l = 0; l < (int)blockDim.x; l++) t = part[l] > t ? part[l] : t;
      mx[i] = t;
    }
    __syncthreads();
  }
}

/* Block i: sumexp of row i (f64), and the target logit when want_tgt. */
__global__ void k_row_sums(double *se, const float *mx, const void *z,
                           int ldt, const void *tg, int tdt, size_t rows,
                           size_t len, int64_t off, int64_t ignore,
                           int want_tgt) {
  __shared__ double part[kThreads];
  for (size_t i = blockIdx.x; i < rows; i += gridDim.x) {
    double s = 0;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x)
      s += (double)exp_f32(getf(z, ldt, i * len + j) - mx[i]);
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
      double t = 0;
      for (int l = 0; l < (int)blockDim.x; l++) t += part[l];
      se[i] = t;
      if (want_tgt) {
        int64_t tt = get_index(tg, tdt, i);
        se[rows + i] = (tt != ignore && tt >= off && tt < off + (int64_t)len)
                           ? (double)getf(z, ldt, i * len + (size_t)(tt - off))
                           : 0.0;
      }
    }
    __syncthreads();
  }
}

/* Block i writes gradient row i. */
__global__ void k_loss_grad(void *grad, int gdt, const float *mx,
                            const double *se, const float *gi, double scale,
                            double sign, const void *z, int ldt,
                            const void *tg, int tdt, size_t rows, size_t len,
                            int64_t off, int64_t ignore) {
  for (size_t i = blockIdx.x; i < rows; i += gridDim.x) {
    int64_t t = get_index(tg, tdt, i);
    double c = (gi ? (double)gi[i] : 1.0) * scale * sign;
    float k = (float)(c / se[i]);
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) {
      if (t == ignore) {
        putf(grad, gdt, i * len + j, 0.0f);
        continue;
      }
      float o = __fmul_rn(k, exp_f32(getf(z, ldt, i * len + j) - mx[i]));
      if ((int64_t)j + off == t) o -= (float)c;
      putf(grad, gdt, i * len + j, o);
    }
  }
}

__global__ void k_logprobs(float *out, double *sum_count, const float *mx,
                           const double *se, const void *tg, int tdt,
                           size_t rows, int64_t ignore) {
  if (out) {
    GRID_STRIDE(i, rows) {
      int ign = get_index(tg, tdt, i) == ignore;
      out[i] = ign ? 0.0f
                   : (float)(se[rows + i] - (double)mx[i] - log(se[i]));
    }
  }
  if (sum_count && blockIdx.x == 0 && threadIdx.x == 0)
    for (size_t i = 0; i < rows; i++) {
      if (get_index(tg, tdt, i) == ignore) continue;
      sum_count[0] -= se[rows + i] - (double)mx[i] - log(se[i]);
      sum_count[1] += 1.0;
    }
}

cudaStream_t S(const tpx__memspace *ms) { return (cudaStream_t)ms->stream; }

unsigned rows_grid(size_t rows) {
  return (unsigned)(rows < 65535 ? (rows ? rows : 1) : 65535);
}

/* The launch's status, then (for now) the stream waited for: every op is
 * complete on return (device/memspace.h). */
tpx_status launched(const tpx__memspace *ms, const char *what,
                    tpx_error *err) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(S(ms));
  if (e == cudaSuccess) return TPX_OK;
  return tpx_error_set(err, TPX_COMM, "cuda memory space: kernel %s: %s (%s)",
                       what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* ---- the kernel table (device/kernels.h): arguments checked by the
 * wrappers in kernels.c ---- */

tpx_status c_convert(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                     const void *src, tpx_dtype sd, size_t n,
                     tpx_error *err) {
  k_convert<<<blocks_for(n), kThreads, 0, S(ms)>>>(dst, dd, src, sd, n);
  return launched(ms, "convert", err);
}

tpx_status c_add_f32(const tpx__memspace *ms, float *dst, const void *src,
                     tpx_dtype sd, size_t n, float div, tpx_error *err) {
  k_add<<<blocks_for(n), kThreads, 0, S(ms)>>>(dst, src, sd, n, div);
  return launched(ms, "add_f32", err);
}

tpx_status c_scale_f32(const tpx__memspace *ms, float *p, size_t n, float v,
                       int divide, tpx_error *err) {
  k_scale<<<blocks_for(n), kThreads, 0, S(ms)>>>(p, n, v, divide);
  return launched(ms, "scale_f32", err);
}

tpx_status c_norm_acc(const tpx__memspace *ms, double *acc, const float *g,
                      size_t n, int inf, tpx_error *err) {
  k_norm<<<1, kThreads, 0, S(ms)>>>(acc, g, n, inf);
  return launched(ms, "norm_acc", err);
}

tpx_status c_adamw(const tpx__memspace *ms, float *p, const float *g,
                   float *m, float *v, size_t n, const tpx__ms_adamw *h,
                   tpx_error *err) {
  k_adamw<<<blocks_for(n), kThreads, 0, S(ms)>>>(p, g, m, v, n, h->decay,
                                                 h->w1, h->b2, h->w2, h->bc2s,
                                                 h->eps, h->step);
  return launched(ms, "adamw", err);
}

/* Two device words (the first bad index or -1, and its id), read back:
 * the verdict an input check needs. */
tpx_status c_index_check(const tpx__memspace *ms, const void *ids,
                         tpx_dtype idt, size_t n, int64_t V, int has_ignore,
                         int64_t ignore, int64_t *bad, tpx_error *err) {
  void *wordv = NULL;
  tpx_status st = tpx__ms_alloc(ms, 2 * sizeof(int64_t), 0, &wordv, err);
  if (st != TPX_OK) return st;
  int64_t *word = (int64_t *)wordv;
  k_index_check<<<1, kThreads, 0, S(ms)>>>(ids, idt, n, V, has_ignore,
                                           ignore, word);
  st = launched(ms, "index_check", err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, bad, word, 2 * sizeof *word, TPX__D2H, err);
  tpx__ms_free(ms, word);
  return st;
}

tpx_status c_embed_lookup(const tpx__memspace *ms, void *out,
                          const void *weight, size_t row_bytes,
                          const void *ids, tpx_dtype idt, size_t n,
                          const tpx__ms_rows *rows, tpx_error *err) {
  k_embed_lookup<<<rows_grid(n), kThreads, 0, S(ms)>>>(
      (unsigned char *)out, (const unsigned char *)weight, row_bytes, ids,
      idt, n, rows->off, rows->len, rows->masked);
  return launched(ms, "embed_lookup", err);
}

tpx_status c_embed_scatter_add(const tpx__memspace *ms, void *wgrad,
                               tpx_dtype wdt, const void *g, tpx_dtype gdt,
                               size_t hl, const void *ids, tpx_dtype idt,
                               size_t n, const tpx__ms_rows *rows,
                               tpx_error *err) {
  k_embed_scatter_add<<<blocks_for(hl), kThreads, 0, S(ms)>>>(
      wgrad, wdt, g, gdt, hl, ids, idt, n, rows->off, rows->len,
      rows->masked);
  return launched(ms, "embed_scatter_add", err);
}

tpx_status c_loss_row_max(const tpx__memspace *ms, float *mx,
                          const tpx__ms_loss *l, tpx_error *err) {
  k_row_max<<<rows_grid(l->rows), kThreads, 0, S(ms)>>>(mx, l->logits, l->ldt,
                                                        l->rows, l->len);
  return launched(ms, "loss_row_max", err);
}

tpx_status c_loss_row_sums(const tpx__memspace *ms, double *se,
                           const float *mx, const tpx__ms_loss *l,
                           int want_tgt, tpx_error *err) {
  k_row_sums<<<rows_grid(l->rows), kThreads, 0, S(ms)>>>(
      se, mx, l->logits, l->ldt, l->targets, l->tdt, l->rows, l->len, l->off,
      l->ignore, want_tgt);
  return launched(ms, "loss_row_sums", err);
}

tpx_status c_loss_grad(const tpx__memspace *ms, void *grad, tpx_dtype gdt,
                       const float *mx, const double *se, const float *gi,
                       double scale, double sign, const tpx__ms_loss *l,
                       tpx_error *err) {
  k_loss_grad<<<rows_grid(l->rows), kThreads, 0, S(ms)>>>(
      grad, gdt, mx, se, gi, scale, sign, l->logits, l->ldt, l->targets,
      l->tdt, l->rows, l->len, l->off, l->ignore);
  return launched(ms, "loss_grad", err);
}

tpx_status c_loss_logprobs(const tpx__memspace *ms, float *out,
                           double *sum_count, const float *mx,
                           const double *se, const tpx__ms_loss *l,
                           tpx_error *err) {
  k_logprobs<<<blocks_for(l->rows), kThreads, 0, S(ms)>>>(
      out, sum_count, mx, se, l->targets, l->tdt, l->rows, l->ignore);
  return launched(ms, "loss_logprobs", err);
}

}  // namespace

/* In the order of struct tpx__ms_kernels (C++17: no designators). */
extern "C" const tpx__ms_kernels tpx__ms_cuda_kernels = {
    c_convert,      c_add_f32,      c_scale_f32,
    c_norm_acc,     c_adamw,        c_index_check,
    c_embed_lookup, c_embed_scatter_add,
    c_loss_row_max, c_loss_row_sums, c_loss_grad,
    c_loss_logprobs,
};
