/* device/host_kernels.c — the reference loops of every memory-space kernel
 * (device/kernels.h): the runtime's math, written once. The host and sim
 * spaces share this table: every buffer argument is reached through the
 * space's host_view (host: the pointer itself; sim: untagged), so a buffer
 * from another space faults here as it would on a device. The cuda kernels
 * mirror these loops. Not here: buffers (ms_host.c, ms_sim.c), the
 * wrappers' checks (kernels.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/elem.h"
#include "device/kernels.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The host alias of a buffer argument of the space `ms`. */
#define V(p) tpx__ms_host_view(ms, p)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* Eight-lane versions of the hot loops where the CPU has AVX2 (chosen at
 * run time). No FMA: no operation is fused, so every lane has the bits of
 * the scalar loop. */
#include <immintrin.h>
#define TPX_HAVE_AVX2_PATH 1
static int have_avx2(void) { return __builtin_cpu_supports("avx2"); }
#endif

/* ---- element access ---- */

static float getf(const void *p, tpx_dtype dt, size_t i) {
  switch (dt) {
  case TPX_DTYPE_BF16: return tpx__bf16_to_f32(((const uint16_t *)p)[i]);
  case TPX_DTYPE_F16: return tpx__f16_to_f32(((const uint16_t *)p)[i]);
  default: return ((const float *)p)[i];
  }
}

static void putf(void *p, tpx_dtype dt, size_t i, float v) {
  switch (dt) {
  case TPX_DTYPE_BF16: ((uint16_t *)p)[i] = tpx__f32_to_bf16(v); break;
  case TPX_DTYPE_F16: ((uint16_t *)p)[i] = tpx__f32_to_f16(v); break;
  default: ((float *)p)[i] = v; break;
  }
}

static int64_t get_index(const void *ids, tpx_dtype idt, size_t i) {
  if (idt == TPX_DTYPE_I32)
    return ((const int32_t *)ids)[i];
  return ((const int64_t *)ids)[i];
}

/* ---- kernels ---- */

static tpx_status h_reduce(const tpx__memspace *ms, void *const *dsts, int ndst,
                           const void *const *srcs, int nsrc, size_t count,
                           tpx_dtype dtype, tpx_reduce_op op, int64_t avg_div,
                           tpx_error *err) {
  void *d[TPX__MS_MAX_PTRS];
  const void *s[TPX__MS_MAX_PTRS];
  (void)err;
  for (int j = 0; j < ndst; j++) d[j] = V(dsts[j]);
  for (int j = 0; j < nsrc; j++) s[j] = V(srcs[j]);
  tpx__reduce_into(d, ndst, s, nsrc, count, dtype, op, avg_div, 0);
  return TPX_OK;
}

static tpx_status h_convert(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                            const void *src, tpx_dtype sd, size_t n,
                            tpx_error *err) {
  dst = V(dst), src = V(src);
  (void)err;
  if (dd == sd) {
    memmove(dst, src, n * tpx_dtype_size(dd));
    return TPX_OK;
  }
  switch (dd) {
  case TPX_DTYPE_BF16:
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)dst)[i] = tpx__f32_to_bf16(getf(src, sd, i));
    break;
  case TPX_DTYPE_F16:
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)dst)[i] = tpx__f32_to_f16(getf(src, sd, i));
    break;
  default:
    for (size_t i = 0; i < n; i++) ((float *)dst)[i] = getf(src, sd, i);
    break;
  }
  return TPX_OK;
}

static tpx_status h_add_f32(const tpx__memspace *ms, float *dst,
                            const void *src, tpx_dtype sd, size_t n, float div,
                            tpx_error *err) {
  dst = V(dst), src = V(src);
  (void)err;
  if (sd == TPX_DTYPE_F32) {
    const float *s = src;
    if (div == 1.0f)
      for (size_t i = 0; i < n; i++) dst[i] += s[i];
    else
      for (size_t i = 0; i < n; i++) dst[i] += s[i] / div;
    return TPX_OK;
  }
  for (size_t i = 0; i < n; i++) dst[i] += getf(src, sd, i) / div;
  return TPX_OK;
}

static tpx_status h_scale_f32(const tpx__memspace *ms, float *p, size_t n,
                              float v, int divide, tpx_error *err) {
  p = V(p);
  (void)err;
  if (divide)
    for (size_t i = 0; i < n; i++) p[i] /= v;
  else
    for (size_t i = 0; i < n; i++) p[i] *= v;
  return TPX_OK;
}

/* ---- the norms, in the order every space shares (kernels.h) ----
 * Tiles of NT_TILE = 4096 values; in a tile, lane j (0..255) folds values
 * j + 256*k (k = 0..15) in k order into an f64 starting at 0; the 256
 * lanes meet in a binary tree (stride 128, 64, ..., 1); the tile values
 * are the next level's input, reduced alike down to one value; then
 * *acc combined with it. The cuda kernels (ms_cuda_kernels.cu) run the
 * same order grid-wide, so every space gives the same bits. */
#define NT_LANES 256
#define NT_TILE ((size_t)NT_LANES * 16)

static inline double nan_max(double a, double v) {
  return (v > a || isnan(v)) ? v : a;
}

#if defined(TPX_HAVE_AVX2_PATH)
/* sq_acc's lanes [0, returned end) four at a time. */
__attribute__((target("avx2"))) static size_t
sq_acc_avx2(double *part, const float *g, size_t m) {
  size_t j = 0;
  for (; j + 4 <= m; j += 4) {
    __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(g + j));
    _mm256_storeu_pd(part + j, _mm256_add_pd(_mm256_loadu_pd(part + j),
                                             _mm256_mul_pd(x, x)));
  }
  return j;
}
#endif

/* part[j] += g[j]^2 in f64, j < m. */
static void sq_acc(double *part, const float *g, size_t m) {
  size_t j = 0;
#if defined(TPX_HAVE_AVX2_PATH)
  if (have_avx2())
    j = sq_acc_avx2(part, g, m);
#endif
  for (; j < m; j++) part[j] += (double)g[j] * (double)g[j];
}

/* One tile of `len` <= NT_TILE values: g (f32, squared or |g|) when g,
 * else d (the previous level's values). */
static double nt_tile(const float *g, const double *d, size_t len, int inf) {
  double part[NT_LANES];
  for (int j = 0; j < NT_LANES; j++) part[j] = 0.0;
  for (size_t k = 0; k * NT_LANES < len; k++) {
    size_t m = len - k * NT_LANES < NT_LANES ? len - k * NT_LANES : NT_LANES;
    const size_t o = k * NT_LANES;
    if (inf)
      for (size_t j = 0; j < m; j++)
        part[j] = nan_max(part[j], g ? fabs((double)g[o + j]) : d[o + j]);
    else if (g)
      sq_acc(part, g + o, m);
    else
      for (size_t j = 0; j < m; j++) part[j] += d[o + j];
  }
  for (int w = NT_LANES / 2; w > 0; w >>= 1)
    for (int j = 0; j < w; j++)
      part[j] = inf ? nan_max(part[j], part[j + w]) : part[j] + part[j + w];
  return part[0];
}

static tpx_status h_norm_acc(const tpx__memspace *ms, double *acc,
                             const float *g, size_t n, int inf,
                             tpx_error *err) {
  acc = V(acc), g = V(g);
  size_t m = (n + NT_TILE - 1) / NT_TILE;
  double one = 0.0, *lv = m > 1 ? malloc(m * sizeof *lv) : &one;
  if (!lv)
    return tpx_error_set(err, TPX_NO_MEMORY, "norm: %zu tile values", m);
  for (size_t t = 0; t < m; t++) {
    size_t len = n - t * NT_TILE < NT_TILE ? n - t * NT_TILE : NT_TILE;
    lv[t] = nt_tile(g + t * NT_TILE, NULL, len, inf);
  }
  while (m > 1) { /* in place: tile t's value lands at t <= its start */
    size_t next = (m + NT_TILE - 1) / NT_TILE;
    for (size_t t = 0; t < next; t++) {
      size_t len = m - t * NT_TILE < NT_TILE ? m - t * NT_TILE : NT_TILE;
      lv[t] = nt_tile(NULL, lv + t * NT_TILE, len, inf);
    }
    m = next;
  }
  double total = lv[0];
  if (lv != &one)
    free(lv);
  *acc = inf ? nan_max(*acc, total) : *acc + total;
  return TPX_OK;
}

#if defined(TPX_HAVE_AVX2_PATH)
/* h_adamw's loop on eight lanes, for [0, returned end). */
__attribute__((target("avx2"))) static size_t
adamw_avx2(float *restrict p, const float *restrict g, float *restrict m,
           float *restrict v, size_t n, const tpx__ms_adamw *h) {
  const __m256 vdecay = _mm256_set1_ps(h->decay), vw1 = _mm256_set1_ps(h->w1),
               vb2 = _mm256_set1_ps(h->b2), vw2 = _mm256_set1_ps(h->w2),
               vbc2s = _mm256_set1_ps(h->bc2s), veps = _mm256_set1_ps(h->eps),
               vstep = _mm256_set1_ps(h->step);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 gi = _mm256_loadu_ps(g + i), mi = _mm256_loadu_ps(m + i),
           vi = _mm256_loadu_ps(v + i);
    __m256 pi = _mm256_mul_ps(_mm256_loadu_ps(p + i), vdecay);
    mi = _mm256_add_ps(mi, _mm256_mul_ps(vw1, _mm256_sub_ps(gi, mi)));
    vi = _mm256_add_ps(_mm256_mul_ps(vi, vb2),
                       _mm256_mul_ps(_mm256_mul_ps(vw2, gi), gi));
    __m256 denom =
        _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vbc2s), veps);
    pi = _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(vstep, mi), denom));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(p + i, pi);
  }
  return i;
}
#endif

/* One AdamW element, in torch's order of operations. */
static inline float adamw1(float p, float g, float *m, float *v,
                           const tpx__ms_adamw *h) {
  float pi = p * h->decay;    /* decay is 1 without weight decay: exact */
  *m = *m + h->w1 * (g - *m); /* lerp_(g, 1-b1), weight < 0.5 */
  *v = *v * h->b2 + h->w2 * g * g;
  float denom = sqrtf(*v) / h->bc2s + h->eps;
  return pi + h->step * *m / denom;
}

/* With SSE2, four lanes at a time with the same IEEE operations in the same
 * order (sqrtps, divps are correctly rounded), so results are bit-identical
 * to the scalar loop; a plain loop does not vectorise because of sqrtf's
 * errno. */
static tpx_status h_adamw(const tpx__memspace *ms, float *restrict p,
                          const float *restrict g, float *restrict m,
                          float *restrict v, size_t n, const tpx__ms_adamw *h,
                          tpx_error *err) {
  p = V(p), g = V(g), m = V(m), v = V(v);
  (void)err;
  size_t i = 0;
#if defined(TPX_HAVE_AVX2_PATH)
  if (have_avx2())
    i = adamw_avx2(p, g, m, v, n, h);
#endif
#if defined(__SSE2__)
  const __m128 vdecay = _mm_set1_ps(h->decay), vw1 = _mm_set1_ps(h->w1),
               vb2 = _mm_set1_ps(h->b2), vw2 = _mm_set1_ps(h->w2),
               vbc2s = _mm_set1_ps(h->bc2s), veps = _mm_set1_ps(h->eps),
               vstep = _mm_set1_ps(h->step);
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
  for (; i < n; i++) p[i] = adamw1(p[i], g[i], &m[i], &v[i], h);
  return TPX_OK;
}

static tpx_status h_index_check(const tpx__memspace *ms, const void *ids,
                                tpx_dtype idt, size_t n, int64_t V,
                                int has_ignore, int64_t ignore, int64_t *bad,
                                tpx_error *err) {
  ids = V(ids); /* bad is host memory */
  (void)err;
  bad[0] = -1;
  bad[1] = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t id = get_index(ids, idt, i);
    if (has_ignore && id == ignore)
      continue;
    if (id < 0 || id >= V) {
      bad[0] = (int64_t)i;
      bad[1] = id;
      break;
    }
  }
  return TPX_OK;
}

static int64_t row_of(const tpx__ms_rows *rows, int64_t id) {
  if (rows->masked) {
    int64_t r = id - rows->off;
    return r >= 0 && r < rows->len ? r : -1;
  }
  return id;
}

static tpx_status h_embed_lookup(const tpx__memspace *ms, void *out,
                                 const void *weight, size_t row_bytes,
                                 const void *ids, tpx_dtype idt, size_t n,
                                 const tpx__ms_rows *rows, tpx_error *err) {
  out = V(out), weight = V(weight), ids = V(ids);
  (void)err;
  for (size_t i = 0; i < n; i++) {
    int64_t r = row_of(rows, get_index(ids, idt, i));
    char *dst = (char *)out + i * row_bytes;
    if (r < 0)
      memset(dst, 0, row_bytes); /* masked: zero before the reduction */
    else
      memcpy(dst, (const char *)weight + (size_t)r * row_bytes, row_bytes);
  }
  return TPX_OK;
}

static tpx_status h_embed_scatter_add(const tpx__memspace *ms, void *wgrad,
                                      tpx_dtype wdt, const void *g,
                                      tpx_dtype gdt, size_t hl, const void *ids,
                                      tpx_dtype idt, size_t n,
                                      const tpx__ms_rows *rows,
                                      tpx_error *err) {
  wgrad = V(wgrad), g = V(g), ids = V(ids);
  (void)err;
  for (size_t i = 0; i < n; i++) {
    int64_t r = row_of(rows, get_index(ids, idt, i));
    if (r < 0)
      continue; /* masked: another rank's rows */
    for (size_t j = 0; j < hl; j++) {
      size_t k = (size_t)r * hl + j;
      putf(wgrad, wdt, k, getf(wgrad, wdt, k) + getf(g, gdt, i * hl + j));
    }
  }
  return TPX_OK;
}

/* ---- the vocab-parallel loss (tp_loss.c's row loops) ---- */

/* The row loops on 8-lane vectors (GCC / clang vector extensions): SSE2
 * pairs by default, one AVX2 register in the copies compiled for AVX2
 * (chosen at run time; no FMA, so nothing is fused). A row's tail is one
 * more block, padded. The compiler would not vectorise a scalar exp (int
 * <-> float bit casts), and these loops are most of the loss's time. */
#define LANES 8
typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));

#define V8_INLINE static inline __attribute__((always_inline))

/* *v = exp(*v) per lane in f32, without a libm call (by pointer: no vector
 * crosses a call ABI): x = n ln2 + r with |r| <= ln2/2 (n rounded with the
 * 1.5 * 2^23 trick), e^r by its Taylor series to r^7 (truncation error <
 * 6e-9 relative), times 2^n built in the exponent bits. Only x <= 0 occurs
 * here (logit - row max); x is raised to -100 first (-inf and NaN: -100),
 * and 2^n for n < -126 is flushed to 0 with integer ops, so no branch
 * remains. The cuda kernels run the same operations. */
V8_INLINE void exp_v8(f8 *v) {
  const f8 zero = {0}, shifter = zero + 12582912.0f, floor = zero - 100.0f;
  f8 x = *v;
  i8 keep = x > floor;
  x = (f8)(((i8)x & keep) | ((i8)floor & ~keep));
  f8 t = x * 1.44269504088896341f + shifter;
  f8 n = t - shifter;
  f8 r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  f8 p = zero + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  i8 e = (i8)t - (i8)shifter + 127;
  e &= ~(e >> 31); /* max(e, 0): 2^n below the normal range -> 0 */
  *v = p * (f8)(e << 23);
}

/* *v = exp(z[l] - m) for l < cnt (<= LANES); lanes past cnt are junk. */
V8_INLINE void exp_row_v8(f8 *v, const float *z, size_t cnt, float m) {
  *v = (f8){0};
  memcpy(v, z, cnt * sizeof(float));
  *v -= m;
  exp_v8(v);
}

/* sum_exp's whole blocks; returns where they end. Each block's lanes are
 * summed in f32 as ((v0 + v4) + (v1 + v5)) + ((v2 + v6) + (v3 + v7)). */
V8_INLINE size_t sum_exp_v8(const float *z, size_t len, float m, double *s) {
  size_t j = 0;
  for (; j + LANES <= len; j += LANES) {
    f8 v;
    f4 lo, hi;
    exp_row_v8(&v, z + j, LANES, m);
    memcpy(&lo, &v, sizeof lo);
    memcpy(&hi, (const char *)&v + sizeof lo, sizeof hi);
    lo += hi;
    *s += (double)((lo[0] + lo[1]) + (lo[2] + lo[3]));
  }
  return j;
}

/* scaled_exp's whole blocks; returns where they end. */
V8_INLINE size_t scaled_exp_v8(const float *z, size_t len, float m, float k,
                               float *o) {
  size_t j = 0;
  for (; j + LANES <= len; j += LANES) {
    f8 v;
    exp_row_v8(&v, z + j, LANES, m);
    v = k * v;
    memcpy(o + j, &v, sizeof v);
  }
  return j;
}

#if defined(TPX_HAVE_AVX2_PATH)
__attribute__((target("avx2"))) static size_t
sum_exp_avx2(const float *z, size_t len, float m, double *s) {
  return sum_exp_v8(z, len, m, s);
}
__attribute__((target("avx2"))) static size_t
scaled_exp_avx2(const float *z, size_t len, float m, float k, float *o) {
  return scaled_exp_v8(z, len, m, k, o);
}
#endif

/* sum_j exp(z[j] - m): whole blocks as sum_exp_v8 sums them, into an f64
 * in block order, then the tail's terms one by one. */
static double sum_exp(const float *z, size_t len, float m) {
  double s = 0;
  size_t j;
#if defined(TPX_HAVE_AVX2_PATH)
  if (have_avx2())
    j = sum_exp_avx2(z, len, m, &s);
  else
#endif
    j = sum_exp_v8(z, len, m, &s);
  if (j < len) {
    f8 v;
    exp_row_v8(&v, z + j, len - j, m);
    for (size_t l = 0; l < len - j; l++) s += (double)v[l];
  }
  return s;
}

/* o[j] = k * exp(z[j] - m); o may alias z. */
static void scaled_exp(const float *z, size_t len, float m, float k, float *o) {
  size_t j;
#if defined(TPX_HAVE_AVX2_PATH)
  if (have_avx2())
    j = scaled_exp_avx2(z, len, m, k, o);
  else
#endif
    j = scaled_exp_v8(z, len, m, k, o);
  if (j < len) {
    f8 v;
    exp_row_v8(&v, z + j, len - j, m);
    v = k * v;
    memcpy(o + j, &v, (len - j) * sizeof(float));
  }
}

static float row_max(const float *z, size_t len) {
  float v[LANES];
  for (int l = 0; l < LANES; l++) v[l] = -INFINITY;
  size_t j = 0;
  for (; j + LANES <= len; j += LANES)
    for (int l = 0; l < LANES; l++) v[l] = z[j + l] > v[l] ? z[j + l] : v[l];
  float m = -INFINITY;
  for (int l = 0; l < LANES; l++) m = v[l] > m ? v[l] : m;
  for (; j < len; j++) m = z[j] > m ? z[j] : m;
  return m;
}

/* Row i of the logits as f32: a pointer into the buffer, or `scratch`
 * (len floats) filled from bf16. */
static const float *row_f32(const tpx__ms_loss *l, size_t i, float *scratch) {
  if (l->ldt == TPX_DTYPE_F32)
    return (const float *)l->logits + i * l->len;
  for (size_t j = 0; j < l->len; j++)
    scratch[j] = getf(l->logits, l->ldt, i * l->len + j);
  return scratch;
}

static tpx_status scratch_of(const tpx__ms_loss *l, float **out,
                             tpx_error *err) {
  *out = malloc((l->len ? l->len : 1) * sizeof **out);
  return *out ? TPX_OK
              : tpx_error_set(err, TPX_NO_MEMORY, "loss: a row of %zu floats",
                              l->len);
}

/* *u = the loss view with its buffers as host aliases, and a scratch row. */
static tpx_status loss_begin(const tpx__memspace *ms, const tpx__ms_loss *l,
                             tpx__ms_loss *u, float **scratch, tpx_error *err) {
  *u = *l;
  u->logits = V(l->logits);
  u->targets = V(l->targets);
  return scratch_of(u, scratch, err);
}

static tpx_status h_loss_row_max(const tpx__memspace *ms, float *mx,
                                 const tpx__ms_loss *l, tpx_error *err) {
  mx = V(mx);
  tpx__ms_loss u;
  float *scratch;
  tpx_status st = loss_begin(ms, l, &u, &scratch, err);
  if (st != TPX_OK)
    return st;
  l = &u;
  for (size_t i = 0; i < l->rows; i++)
    mx[i] = row_max(row_f32(l, i, scratch), l->len);
  free(scratch);
  return TPX_OK;
}

static tpx_status h_loss_row_sums(const tpx__memspace *ms, double *se,
                                  const float *mx, const tpx__ms_loss *l,
                                  int want_tgt, tpx_error *err) {
  se = V(se), mx = V(mx);
  tpx__ms_loss u;
  float *scratch;
  tpx_status st = loss_begin(ms, l, &u, &scratch, err);
  if (st != TPX_OK)
    return st;
  l = &u;
  size_t rows = l->rows;
  int64_t len = (int64_t)l->len;
  for (size_t i = 0; i < rows; i++) {
    const float *z = row_f32(l, i, scratch);
    se[i] = sum_exp(z, l->len, mx[i]);
    if (!want_tgt)
      continue;
    se[rows + i] = 0;
    int64_t t = get_index(l->targets, l->tdt, i);
    if (t != l->ignore && t >= l->off && t < l->off + len)
      se[rows + i] = z[t - l->off];
  }
  free(scratch);
  return TPX_OK;
}

static tpx_status h_loss_grad(const tpx__memspace *ms, void *grad,
                              tpx_dtype gdt, const float *mx, const double *se,
                              const float *gi, double scale, double sign,
                              const tpx__ms_loss *l, tpx_error *err) {
  grad = V(grad), mx = V(mx), se = V(se), gi = V(gi);
  tpx__ms_loss u;
  float *scratch;
  tpx_status st = loss_begin(ms, l, &u, &scratch, err);
  if (st != TPX_OK)
    return st;
  l = &u;
  size_t len = l->len;
  int direct = gdt == TPX_DTYPE_F32;
  for (size_t i = 0; i < l->rows; i++) {
    int64_t t = get_index(l->targets, l->tdt, i);
    float *out = direct ? (float *)grad + i * len : NULL;
    if (t == l->ignore) {
      for (size_t j = 0; j < len; j++) putf(grad, gdt, i * len + j, 0.0f);
      continue;
    }
    const float *z = row_f32(l, i, scratch);
    float m = mx[i];
    float k = (float)((gi ? (double)gi[i] : 1.0) * scale * sign / se[i]);
    float *o = out ? out : scratch; /* bf16: z was read into scratch */
    scaled_exp(z, len, m, k, o);
    if (t >= l->off && t < l->off + (int64_t)len)
      o[t - l->off] -= (float)((gi ? (double)gi[i] : 1.0) * scale * sign);
    if (!out)
      for (size_t j = 0; j < len; j++) putf(grad, gdt, i * len + j, o[j]);
  }
  free(scratch);
  return TPX_OK;
}

static tpx_status h_loss_logprobs(const tpx__memspace *ms, float *out,
                                  double *sum_count, const float *mx,
                                  const double *se, const tpx__ms_loss *l,
                                  tpx_error *err) {
  out = V(out), sum_count = V(sum_count), mx = V(mx), se = V(se);
  const void *targets = V(l->targets);
  (void)err;
  size_t rows = l->rows;
  for (size_t i = 0; i < rows; i++) {
    int ignored = get_index(targets, l->tdt, i) == l->ignore;
    double lp = ignored ? 0.0 : se[rows + i] - (double)mx[i] - log(se[i]);
    if (out)
      out[i] = ignored ? 0.0f : (float)lp;
    if (sum_count && !ignored) {
      sum_count[0] -= lp;
      sum_count[1] += 1.0;
    }
  }
  return TPX_OK;
}

const tpx__ms_kernels tpx__ms_host_kernels = {
    .reduce = h_reduce,
    .convert = h_convert,
    .add_f32 = h_add_f32,
    .scale_f32 = h_scale_f32,
    .norm_acc = h_norm_acc,
    .adamw = h_adamw,
    .index_check = h_index_check,
    .embed_lookup = h_embed_lookup,
    .embed_scatter_add = h_embed_scatter_add,
    .loss_row_max = h_loss_row_max,
    .loss_row_sums = h_loss_row_sums,
    .loss_grad = h_loss_grad,
    .loss_logprobs = h_loss_logprobs,
};
