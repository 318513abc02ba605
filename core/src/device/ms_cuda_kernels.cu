/* device/ms_cuda_kernels.cu — the cuda memory space's kernel table
 * (device/kernels.h: tpx__ms_cuda_kernels), compiled by nvcc through
 * meson's cuda language when CUDA + NCCL and a working nvcc are found.
 * Each entry enqueues on the space's stream and reports the launch.
 * The math mirrors device/host_kernels.c element for element (same f32 /
 * f64 operations, the host's own bf16 / f16 conversions from
 * device/elem_bits.h, the loss's polynomial exp); reduce is
 * tpx__reduce_into's arithmetic bit for bit, the loss's row sums the
 * host's order of terms (bit for bit), norm_acc the host's fixed tree
 * (below) grid-wide, index_check's verdict (a minimum) the host's. Not
 * bit for bit: loss_logprobs' log() (CUDA's, within an ulp of libm's).
 * Every entry is asynchronous on the stream, except that index_check
 * reads its verdict back.
 * embed_scatter_add keeps the host's id order per column (one thread per
 * column), so duplicate ids accumulate deterministically.
 * CI only compiles and links these; tools/gpu-check.sh runs them against
 * the host loops where a GPU exists. */
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
  if (idt == TPX_DTYPE_I32)
    return ((const int32_t *)ids)[i];
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

/* ---- the norms: a grid-wide reduction in a fixed order ----
 * The order of device/host_kernels.c "the norms" (and of
 * tests/unit/device/norm_tree_ref.h), so the bits match: tiles of 4096
 * elements; in tile t, thread j folds its elements t*kTile + j + 256*k
 * (k = 0..15) in k order into an f64 starting at 0; the 256 thread values
 * meet in a fixed binary tree (stride 128, 64, ..., 1); the tile values
 * form the next level's input, reduced the same way until one value
 * remains; then *acc = *acc + that value. The grid's size only decides
 * which block takes which tile, so the result does not depend on it (or on
 * timing). */
const int kPer = 16;
const size_t kTile = (size_t)kThreads * kPer;

/* max with NaN winning (the host's `v > a || isnan(v)`). */
__device__ double nan_max(double a, double v) {
  return (v > a || isnan(v)) ? v : a;
}

/* Level 0 (kSq): in = g (f32), element = g^2 or |g|; later levels: in =
 * the previous level's tile values (f64). out[t] = tile t's value. */
template <bool kSq, bool kInf>
__global__ void k_norm_tiles(const void *in, size_t n, double *out) {
  __shared__ double part[kThreads];
  size_t ntiles = (n + kTile - 1) / kTile;
  for (size_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
    double a = 0.0;
    for (int k = 0; k < kPer; k++) {
      size_t i = t * kTile + (size_t)k * kThreads + threadIdx.x;
      if (i >= n)
        break;
      double v = kSq ? (double)((const float *)in)[i] : ((const double *)in)[i];
      if (kInf)
        a = nan_max(a, kSq ? fabs(v) : v);
      else
        a = kSq ? __dadd_rn(a, __dmul_rn(v, v)) : __dadd_rn(a, v);
    }
    part[threadIdx.x] = a;
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      __syncthreads();
      if ((int)threadIdx.x < s)
        part[threadIdx.x] =
            kInf ? nan_max(part[threadIdx.x], part[threadIdx.x + s])
                 : __dadd_rn(part[threadIdx.x], part[threadIdx.x + s]);
    }
    __syncthreads();
    if (threadIdx.x == 0)
      out[t] = part[0];
    __syncthreads(); /* part is reused by the next tile */
  }
}

__global__ void k_norm_acc(double *acc, const double *total, int inf) {
  *acc = inf ? nan_max(*acc, *total) : __dadd_rn(*acc, *total);
}

/* ---- reduce: tpx__reduce_into's arithmetic, one element per thread ---- */

struct RedPtrs {
  const void *s[TPX__MS_MAX_PTRS];
  void *d[TPX__MS_MAX_PTRS];
};

__device__ int64_t ld_i(const void *p, int dt, size_t i) {
  switch (dt) {
  case TPX_DTYPE_I32: return ((const int32_t *)p)[i];
  case TPX_DTYPE_I16: return ((const int16_t *)p)[i];
  case TPX_DTYPE_I8: return ((const int8_t *)p)[i];
  default: return ((const int64_t *)p)[i];
  }
}

__device__ uint64_t ld_u(const void *p, int dt, size_t i) {
  switch (dt) {
  case TPX_DTYPE_U32: return ((const uint32_t *)p)[i];
  case TPX_DTYPE_U16: return ((const uint16_t *)p)[i];
  case TPX_DTYPE_U8: return ((const uint8_t *)p)[i];
  default: return ((const uint64_t *)p)[i];
  }
}

/* Narrowing stores wrap, as the host's. */
__device__ void st_u(void *p, int dt, size_t i, uint64_t v) {
  switch (dt) {
  case TPX_DTYPE_I32:
  case TPX_DTYPE_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case TPX_DTYPE_I16:
  case TPX_DTYPE_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
  case TPX_DTYPE_I8:
  case TPX_DTYPE_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  default: ((uint64_t *)p)[i] = v; break;
  }
}

template <typename T> __device__ T red_op(T acc, T in, int op) {
  if (op == TPX_REDUCE_MAX)
    return in > acc ? in : acc;
  if (op == TPX_REDUCE_MIN)
    return in < acc ? in : acc;
  return acc + in;
}

__device__ float red_f32(float acc, float in, int op) {
  if (op == TPX_REDUCE_MAX)
    return in > acc ? in : acc;
  if (op == TPX_REDUCE_MIN)
    return in < acc ? in : acc;
  return __fadd_rn(acc, in);
}

__device__ double red_f64(double acc, double in, int op) {
  if (op == TPX_REDUCE_MAX)
    return in > acc ? in : acc;
  if (op == TPX_REDUCE_MIN)
    return in < acc ? in : acc;
  return __dadd_rn(acc, in);
}

__global__ void k_reduce(RedPtrs a, int ndst, int nsrc, size_t n, int dt,
                         int op, int64_t div) {
  int avg = op == TPX_REDUCE_AVG && div > 1;
  GRID_STRIDE(i, n) {
    if (dt == TPX_DTYPE_F32 || dt == TPX_DTYPE_F16 || dt == TPX_DTYPE_BF16) {
      float acc = getf(a.s[0], dt, i);
      for (int j = 1; j < nsrc; j++)
        acc = red_f32(acc, getf(a.s[j], dt, i), op);
      if (avg)
        acc = __fdiv_rn(acc, (float)div);
      for (int d = 0; d < ndst; d++) putf(a.d[d], dt, i, acc);
    } else if (dt == TPX_DTYPE_F64) {
      double acc = ((const double *)a.s[0])[i];
      for (int j = 1; j < nsrc; j++)
        acc = red_f64(acc, ((const double *)a.s[j])[i], op);
      if (avg)
        acc = __ddiv_rn(acc, (double)div);
      for (int d = 0; d < ndst; d++) ((double *)a.d[d])[i] = acc;
    } else if (dt == TPX_DTYPE_I64 || dt == TPX_DTYPE_I32 ||
               dt == TPX_DTYPE_I16 || dt == TPX_DTYPE_I8) {
      int64_t acc = ld_i(a.s[0], dt, i);
      for (int j = 1; j < nsrc; j++) {
        int64_t in = ld_i(a.s[j], dt, i);
        acc = op == TPX_REDUCE_MAX || op == TPX_REDUCE_MIN
                  ? red_op<int64_t>(acc, in, op)
                  : (int64_t)((uint64_t)acc + (uint64_t)in); /* wraps */
      }
      if (avg)
        acc /= div;
      for (int d = 0; d < ndst; d++) st_u(a.d[d], dt, i, (uint64_t)acc);
    } else {
      uint64_t acc = ld_u(a.s[0], dt, i);
      for (int j = 1; j < nsrc; j++)
        acc = red_op<uint64_t>(acc, ld_u(a.s[j], dt, i), op);
      if (avg)
        acc /= (uint64_t)div;
      for (int d = 0; d < ndst; d++) st_u(a.d[d], dt, i, acc);
    }
  }
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n,
                        float decay, float w1, float b2, float w2, float bc2s,
                        float eps, float step) {
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

/* Grid-wide: the smallest bad index into *first (atomicMin, so the
 * result is the host's first bad index whatever the order). */
__global__ void k_index_first(const void *ids, int idt, size_t n, int64_t V,
                              int has_ignore, int64_t ignore,
                              unsigned long long *first) {
  GRID_STRIDE(i, n) {
    int64_t id = get_index(ids, idt, i);
    if (has_ignore && id == ignore)
      continue;
    if (id < 0 || id >= V)
      atomicMin(first, (unsigned long long)i);
  }
}

/* bad[0..1] = the first bad index (or -1) and its id (or 0). */
__global__ void k_index_verdict(const void *ids, int idt,
                                const unsigned long long *first, int64_t *bad) {
  unsigned long long m = *first;
  bad[0] = m == ~0ull ? -1 : (int64_t)m;
  bad[1] = m == ~0ull ? 0 : get_index(ids, idt, (size_t)m);
}

__device__ int64_t row_of(int64_t id, int64_t off, int64_t len, int masked) {
  if (!masked)
    return id;
  int64_t r = id - off;
  return r >= 0 && r < len ? r : -1;
}

/* Block i copies (or zeroes) output row i. */
__global__ void k_embed_lookup(unsigned char *out, const unsigned char *w,
                               size_t row_bytes, const void *ids, int idt,
                               size_t n, int64_t off, int64_t len, int masked) {
  for (size_t i = blockIdx.x; i < n; i += gridDim.x) {
    int64_t r = row_of(get_index(ids, idt, i), off, len, masked);
    for (size_t b = threadIdx.x; b < row_bytes; b += blockDim.x)
      out[i * row_bytes + b] = r < 0 ? 0 : w[(size_t)r * row_bytes + b];
  }
}

/* Thread j owns column j and walks the ids in order, as the host loop. */
__global__ void k_embed_scatter_add(void *wg, int wdt, const void *g, int gdt,
                                    size_t hl, const void *ids, int idt,
                                    size_t n, int64_t off, int64_t len,
                                    int masked) {
  GRID_STRIDE(j, hl) {
    for (size_t i = 0; i < n; i++) {
      int64_t r = row_of(get_index(ids, idt, i), off, len, masked);
      if (r < 0)
        continue;
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

/* The row sums in the host's order (device/host_kernels.c sum_exp), so
 * they are bit-identical: k_row_terms makes each term the host adds in
 * f64 — one per block of 8 columns, (v0+v4)+(v1+v5) + (v2+v6)+(v3+v7) in
 * f32, then one per tail column — in parallel; k_row_fold adds a row's
 * terms in order, one thread per row. `per` = terms per row. */
__global__ void k_row_terms(float *terms, size_t per, const float *mx,
                            const void *z, int ldt, size_t rows, size_t len) {
  size_t blocks = len / 8;
  GRID_STRIDE(k, rows * per) {
    size_t i = k / per, b = k % per;
    const float m = mx[i];
    size_t base = i * len;
    if (b < blocks) {
      float v[8];
      for (int l = 0; l < 8; l++)
        v[l] = exp_f32(__fsub_rn(getf(z, ldt, base + 8 * b + l), m));
      float a = __fadd_rn(__fadd_rn(v[0], v[4]), __fadd_rn(v[1], v[5]));
      float c = __fadd_rn(__fadd_rn(v[2], v[6]), __fadd_rn(v[3], v[7]));
      terms[k] = __fadd_rn(a, c);
    } else {
      size_t j = 8 * blocks + (b - blocks);
      terms[k] = exp_f32(__fsub_rn(getf(z, ldt, base + j), m));
    }
  }
}

__global__ void k_row_fold(double *se, const float *terms, size_t per,
                           const void *z, int ldt, const void *tg, int tdt,
                           size_t rows, size_t len, int64_t off, int64_t ignore,
                           int want_tgt) {
  GRID_STRIDE(i, rows) {
    double s = 0;
    for (size_t b = 0; b < per; b++)
      s = __dadd_rn(s, (double)terms[i * per + b]);
    se[i] = s;
    if (want_tgt) {
      int64_t tt = get_index(tg, tdt, i);
      se[rows + i] = (tt != ignore && tt >= off && tt < off + (int64_t)len)
                         ? (double)getf(z, ldt, i * len + (size_t)(tt - off))
                         : 0.0;
    }
  }
}

/* Block i writes gradient row i. */
__global__ void k_loss_grad(void *grad, int gdt, const float *mx,
                            const double *se, const float *gi, double scale,
                            double sign, const void *z, int ldt, const void *tg,
                            int tdt, size_t rows, size_t len, int64_t off,
                            int64_t ignore) {
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
      if ((int64_t)j + off == t)
        o -= (float)c;
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
      out[i] = ign ? 0.0f : (float)(se[rows + i] - (double)mx[i] - log(se[i]));
    }
  }
  if (sum_count && blockIdx.x == 0 && threadIdx.x == 0)
    for (size_t i = 0; i < rows; i++) {
      if (get_index(tg, tdt, i) == ignore)
        continue;
      sum_count[0] -= se[rows + i] - (double)mx[i] - log(se[i]);
      sum_count[1] += 1.0;
    }
}

cudaStream_t S(const tpx__memspace *ms) { return (cudaStream_t)ms->stream; }

unsigned rows_grid(size_t rows) {
  return (unsigned)(rows < 65535 ? (rows ? rows : 1) : 65535);
}

tpx_status cuda_failed(const char *what, cudaError_t e, tpx_error *err) {
  return tpx_error_set(err, TPX_COMM, "cuda memory space: kernel %s: %s (%s)",
                       what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The launch's status; the work stays in flight on the stream (ordered
 * before every later op of the space). */
tpx_status launched(const tpx__memspace *ms, const char *what, tpx_error *err) {
  (void)ms;
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? TPX_OK : cuda_failed(what, e, err);
}

/* Stream-ordered scratch (cudaMallocAsync: no device-wide sync). */
tpx_status scratch(const tpx__memspace *ms, const char *what, size_t bytes,
                   void **out, tpx_error *err) {
  cudaError_t e = cudaMallocAsync(out, bytes ? bytes : 1, S(ms));
  return e == cudaSuccess ? TPX_OK : cuda_failed(what, e, err);
}

tpx_status c_reduce(const tpx__memspace *ms, void *const *dsts, int ndst,
                    const void *const *srcs, int nsrc, size_t count,
                    tpx_dtype dtype, tpx_reduce_op op, int64_t avg_div,
                    tpx_error *err) {
  RedPtrs a;
  for (int j = 0; j < nsrc; j++) a.s[j] = srcs[j];
  for (int j = 0; j < ndst; j++) a.d[j] = dsts[j];
  k_reduce<<<blocks_for(count), kThreads, 0, S(ms)>>>(a, ndst, nsrc, count,
                                                      dtype, op, avg_div);
  return launched(ms, "reduce", err);
}

/* ---- the kernel table (device/kernels.h): arguments checked by the
 * wrappers in kernels.c ---- */

tpx_status c_convert(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                     const void *src, tpx_dtype sd, size_t n, tpx_error *err) {
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

template <bool kInf>
void norm_levels(const tpx__memspace *ms, const float *g, size_t n,
                 double *tmp) {
  size_t m = n, nt = (m + kTile - 1) / kTile;
  k_norm_tiles<true, kInf><<<rows_grid(nt), kThreads, 0, S(ms)>>>(g, m, tmp);
  while (nt > 1) {
    m = nt;
    nt = (m + kTile - 1) / kTile;
    k_norm_tiles<false, kInf>
        <<<rows_grid(nt), kThreads, 0, S(ms)>>>(tmp, m, tmp + m);
    tmp += m;
  }
}

/* The grid-wide tree (k_norm_tiles): scratch for every level's tile
 * values, then *acc combined with the last one. */
tpx_status c_norm_acc(const tpx__memspace *ms, double *acc, const float *g,
                      size_t n, int inf, tpx_error *err) {
  size_t total = 0;
  for (size_t m = n; m > 1 || total == 0;) {
    m = (m + kTile - 1) / kTile;
    total += m;
  }
  void *tmpv = NULL;
  tpx_status st = scratch(ms, "norm_acc", total * sizeof(double), &tmpv, err);
  if (st != TPX_OK)
    return st;
  double *tmp = (double *)tmpv;
  if (inf)
    norm_levels<true>(ms, g, n, tmp);
  else
    norm_levels<false>(ms, g, n, tmp);
  k_norm_acc<<<1, 1, 0, S(ms)>>>(acc, tmp + total - 1, inf);
  st = launched(ms, "norm_acc", err);
  cudaFreeAsync(tmpv, S(ms));
  return st;
}

tpx_status c_adamw(const tpx__memspace *ms, float *p, const float *g, float *m,
                   float *v, size_t n, const tpx__ms_adamw *h, tpx_error *err) {
  k_adamw<<<blocks_for(n), kThreads, 0, S(ms)>>>(
      p, g, m, v, n, h->decay, h->w1, h->b2, h->w2, h->bc2s, h->eps, h->step);
  return launched(ms, "adamw", err);
}

/* Two device words (the first bad index or -1, and its id), read back:
 * the verdict an input check needs. */
tpx_status c_index_check(const tpx__memspace *ms, const void *ids,
                         tpx_dtype idt, size_t n, int64_t V, int has_ignore,
                         int64_t ignore, int64_t *bad, tpx_error *err) {
  /* word[0]: the first bad index (all ones: none); word[1..2]: the
   * verdict, read back (the D2H copy waits: the host needs it). */
  void *wordv = NULL;
  tpx_status st = scratch(ms, "index_check", 3 * sizeof(int64_t), &wordv, err);
  if (st != TPX_OK)
    return st;
  unsigned long long *first = (unsigned long long *)wordv;
  int64_t *verdict = (int64_t *)wordv + 1;
  cudaMemsetAsync(first, 0xff, sizeof *first, S(ms));
  k_index_first<<<blocks_for(n), kThreads, 0, S(ms)>>>(
      ids, idt, n, V, has_ignore, ignore, first);
  k_index_verdict<<<1, 1, 0, S(ms)>>>(ids, idt, first, verdict);
  st = launched(ms, "index_check", err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, bad, verdict, 2 * sizeof *verdict, TPX__D2H, err);
  cudaFreeAsync(wordv, S(ms));
  return st;
}

tpx_status c_embed_lookup(const tpx__memspace *ms, void *out,
                          const void *weight, size_t row_bytes, const void *ids,
                          tpx_dtype idt, size_t n, const tpx__ms_rows *rows,
                          tpx_error *err) {
  k_embed_lookup<<<rows_grid(n), kThreads, 0, S(ms)>>>(
      (unsigned char *)out, (const unsigned char *)weight, row_bytes, ids, idt,
      n, rows->off, rows->len, rows->masked);
  return launched(ms, "embed_lookup", err);
}

tpx_status c_embed_scatter_add(const tpx__memspace *ms, void *wgrad,
                               tpx_dtype wdt, const void *g, tpx_dtype gdt,
                               size_t hl, const void *ids, tpx_dtype idt,
                               size_t n, const tpx__ms_rows *rows,
                               tpx_error *err) {
  k_embed_scatter_add<<<blocks_for(hl), kThreads, 0, S(ms)>>>(
      wgrad, wdt, g, gdt, hl, ids, idt, n, rows->off, rows->len, rows->masked);
  return launched(ms, "embed_scatter_add", err);
}

tpx_status c_loss_row_max(const tpx__memspace *ms, float *mx,
                          const tpx__ms_loss *l, tpx_error *err) {
  k_row_max<<<rows_grid(l->rows), kThreads, 0, S(ms)>>>(mx, l->logits, l->ldt,
                                                        l->rows, l->len);
  return launched(ms, "loss_row_max", err);
}

tpx_status c_loss_row_sums(const tpx__memspace *ms, double *se, const float *mx,
                           const tpx__ms_loss *l, int want_tgt,
                           tpx_error *err) {
  size_t per = l->len / 8 + l->len % 8; /* the host's terms per row */
  void *tv = NULL;
  tpx_status st = scratch(ms, "loss_row_sums",
                          l->rows * (per ? per : 1) * sizeof(float), &tv, err);
  if (st != TPX_OK)
    return st;
  float *terms = (float *)tv;
  if (per)
    k_row_terms<<<blocks_for(l->rows * per), kThreads, 0, S(ms)>>>(
        terms, per, mx, l->logits, l->ldt, l->rows, l->len);
  k_row_fold<<<blocks_for(l->rows), kThreads, 0, S(ms)>>>(
      se, terms, per, l->logits, l->ldt, l->targets, l->tdt, l->rows, l->len,
      l->off, l->ignore, want_tgt);
  st = launched(ms, "loss_row_sums", err);
  cudaFreeAsync(tv, S(ms));
  return st;
}

tpx_status c_loss_grad(const tpx__memspace *ms, void *grad, tpx_dtype gdt,
                       const float *mx, const double *se, const float *gi,
                       double scale, double sign, const tpx__ms_loss *l,
                       tpx_error *err) {
  k_loss_grad<<<rows_grid(l->rows), kThreads, 0, S(ms)>>>(
      grad, gdt, mx, se, gi, scale, sign, l->logits, l->ldt, l->targets, l->tdt,
      l->rows, l->len, l->off, l->ignore);
  return launched(ms, "loss_grad", err);
}

tpx_status c_loss_logprobs(const tpx__memspace *ms, float *out,
                           double *sum_count, const float *mx, const double *se,
                           const tpx__ms_loss *l, tpx_error *err) {
  k_logprobs<<<blocks_for(l->rows), kThreads, 0, S(ms)>>>(
      out, sum_count, mx, se, l->targets, l->tdt, l->rows, l->ignore);
  return launched(ms, "loss_logprobs", err);
}

} // namespace

/* In the order of struct tpx__ms_kernels (C++17: no designators). */
extern "C" const tpx__ms_kernels tpx__ms_cuda_kernels = {
    c_reduce,        c_convert,       c_add_f32,
    c_scale_f32,     c_norm_acc,      c_adamw,
    c_index_check,   c_embed_lookup,  c_embed_scatter_add,
    c_loss_row_max,  c_loss_row_sums, c_loss_grad,
    c_loss_logprobs,
};
