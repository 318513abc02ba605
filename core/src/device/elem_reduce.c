/* device/elem_reduce.c — reduction and fan-out copy kernels on host memory
 * (see device/elem.h).
 *
 * Work is done in blocks small enough for L1: a block is accumulated from
 * every source into a local accumulator array, then written to every
 * destination. That makes in-place use safe and reads each source once.
 * The f32 sum path (the one that matters for bandwidth) is plain loops over
 * float arrays that the compiler vectorises; SSE2 non-temporal stores write
 * large fan-out results without reading the destination lines first. */
#include "device/elem.h"
#include "device/elem_bits.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define TPX_HAVE_SSE2 1
#else
#define TPX_HAVE_SSE2 0
#endif

#define BLOCK 2048 /* elements per block: 8 KiB of f32 accumulator */

tpx_status tpx__reduce_check(const char *what, tpx_dtype dtype,
                             tpx_reduce_op op, tpx_error *err) {
  if (op < TPX_REDUCE_SUM || op > TPX_REDUCE_MIN)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: unknown reduce op %d (expected sum, avg, max "
                         "or min)",
                         what, (int)op);
  switch (dtype) {
  case TPX_DTYPE_F64:
  case TPX_DTYPE_F32:
  case TPX_DTYPE_F16:
  case TPX_DTYPE_BF16:
  case TPX_DTYPE_I64:
  case TPX_DTYPE_I32:
  case TPX_DTYPE_I16:
  case TPX_DTYPE_I8:
  case TPX_DTYPE_U64:
  case TPX_DTYPE_U32:
  case TPX_DTYPE_U16:
  case TPX_DTYPE_U8: return TPX_OK;
  default:
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "%s: cannot reduce dtype %s with op %s (reductions "
                         "take f64, f32, f16, bf16 and integer types)",
                         what, tpx_dtype_short_name(dtype),
                         tpx_reduce_op_name(op));
  }
}

/* ---- 16-bit floats ------------------------------------------------------ */

/* The bit operations live in device/elem_bits.h, shared with the cuda
 * kernels so both memory spaces convert alike. */
float tpx__bf16_to_f32(uint16_t h) { return tpx__hb_bf16_to_f32(h); }
uint16_t tpx__f32_to_bf16(float f) { return tpx__hb_f32_to_bf16(f); }
float tpx__f16_to_f32(uint16_t h) { return tpx__hb_f16_to_f32(h); }
uint16_t tpx__f32_to_f16(float f) { return tpx__hb_f32_to_f16(f); }

/* ---- accumulators ------------------------------------------------------- */

typedef enum { ACC_F32, ACC_F64, ACC_I64, ACC_U64 } acc_kind;

static acc_kind kind_of(tpx_dtype t) {
  switch (t) {
  case TPX_DTYPE_F64: return ACC_F64;
  case TPX_DTYPE_I64:
  case TPX_DTYPE_I32:
  case TPX_DTYPE_I16:
  case TPX_DTYPE_I8: return ACC_I64;
  case TPX_DTYPE_U64:
  case TPX_DTYPE_U32:
  case TPX_DTYPE_U16:
  case TPX_DTYPE_U8: return ACC_U64;
  default: return ACC_F32;
  }
}

typedef union acc_block {
  float f[BLOCK];
  double d[BLOCK];
  int64_t i[BLOCK];
  uint64_t u[BLOCK];
} acc_block;

/* Load n elements of a source into the accumulator (converting). */
static void load(acc_block *a, const void *src, size_t n, tpx_dtype t) {
  size_t k;
  switch (t) {
  case TPX_DTYPE_F32: memcpy(a->f, src, n * 4); break;
  case TPX_DTYPE_F16:
    for (k = 0; k < n; k++)
      a->f[k] = tpx__f16_to_f32(((const uint16_t *)src)[k]);
    break;
  case TPX_DTYPE_BF16:
    for (k = 0; k < n; k++)
      a->f[k] = tpx__bf16_to_f32(((const uint16_t *)src)[k]);
    break;
  case TPX_DTYPE_F64: memcpy(a->d, src, n * 8); break;
  case TPX_DTYPE_I64: memcpy(a->i, src, n * 8); break;
  case TPX_DTYPE_I32:
    for (k = 0; k < n; k++) a->i[k] = ((const int32_t *)src)[k];
    break;
  case TPX_DTYPE_I16:
    for (k = 0; k < n; k++) a->i[k] = ((const int16_t *)src)[k];
    break;
  case TPX_DTYPE_I8:
    for (k = 0; k < n; k++) a->i[k] = ((const int8_t *)src)[k];
    break;
  case TPX_DTYPE_U64: memcpy(a->u, src, n * 8); break;
  case TPX_DTYPE_U32:
    for (k = 0; k < n; k++) a->u[k] = ((const uint32_t *)src)[k];
    break;
  case TPX_DTYPE_U16:
    for (k = 0; k < n; k++) a->u[k] = ((const uint16_t *)src)[k];
    break;
  case TPX_DTYPE_U8:
    for (k = 0; k < n; k++) a->u[k] = ((const uint8_t *)src)[k];
    break;
  default: break;
  }
}

/* Combine loops per accumulator kind; `x` is a block converted by load(). */
#define COMBINE(FIELD, T, SUMEXPR)                                             \
  do {                                                                         \
    T *restrict acc = a->FIELD;                                                \
    const T *restrict in = x->FIELD;                                           \
    switch (op) {                                                              \
    case TPX_REDUCE_MAX:                                                       \
      for (k = 0; k < n; k++) acc[k] = in[k] > acc[k] ? in[k] : acc[k];        \
      break;                                                                   \
    case TPX_REDUCE_MIN:                                                       \
      for (k = 0; k < n; k++) acc[k] = in[k] < acc[k] ? in[k] : acc[k];        \
      break;                                                                   \
    default:                                                                   \
      for (k = 0; k < n; k++) SUMEXPR;                                         \
      break;                                                                   \
    }                                                                          \
  } while (0)

static void combine(acc_block *restrict a, const acc_block *restrict x,
                    size_t n, acc_kind kind, tpx_reduce_op op) {
  size_t k;
  switch (kind) {
  case ACC_F32: COMBINE(f, float, acc[k] += in[k]); break;
  case ACC_F64: COMBINE(d, double, acc[k] += in[k]); break;
  case ACC_I64: /* wrap instead of signed overflow (UB) */
    COMBINE(i, int64_t, acc[k] = (int64_t)((uint64_t)acc[k] + (uint64_t)in[k]));
    break;
  case ACC_U64: COMBINE(u, uint64_t, acc[k] += in[k]); break;
  }
}

/* f32 sources combine straight from memory, two sources per pass over the
 * accumulator, still in source order (((a + b) + c) + d), so the result
 * does not depend on how the passes are grouped. SSE2 where available: the
 * -O2 vectoriser leaves these loops scalar, and scalar adds cannot keep up
 * with memory. */
#if TPX_HAVE_SSE2
#define V4 __m128
#define VLOAD(p) _mm_loadu_ps(p)
#define VSTORE(p, v) _mm_storeu_ps(p, v)
static inline V4 vop(V4 acc, V4 in, tpx_reduce_op op) {
  /* max / min keep the scalar rule: in > acc ? in : acc */
  return op == TPX_REDUCE_MAX   ? _mm_max_ps(in, acc)
         : op == TPX_REDUCE_MIN ? _mm_min_ps(in, acc)
                                : _mm_add_ps(acc, in);
}
#endif

static inline float sop(float acc, float in, tpx_reduce_op op) {
  return op == TPX_REDUCE_MAX   ? (in > acc ? in : acc)
         : op == TPX_REDUCE_MIN ? (in < acc ? in : acc)
                                : acc + in;
}

/* One pass over up to four sources, in order:
 *   first: acc = ((s0 op s1) op s2) op s3
 *   else:  acc = (((acc op s0) op s1) op s2) op s3
 * Reading several streams at once keeps more misses in flight than one
 * pass per source. (Software prefetch measured slower than the hardware
 * prefetcher alone here.) */
static void pass_f32(float *restrict acc, const float *const *src, int m,
                     int first, size_t n, tpx_reduce_op op) {
  const float *s0 = src[0], *s1 = m > 1 ? src[1] : NULL,
              *s2 = m > 2 ? src[2] : NULL, *s3 = m > 3 ? src[3] : NULL;
  size_t k = 0;
  if (first && m == 1) {
    memcpy(acc, s0, n * sizeof *acc);
    return;
  }
#if TPX_HAVE_SSE2
  for (; k + 8 <= n; k += 8) {
    V4 x0, x1;
    if (first) {
      x0 = VLOAD(s0 + k);
      x1 = VLOAD(s0 + k + 4);
    } else {
      x0 = vop(VLOAD(acc + k), VLOAD(s0 + k), op);
      x1 = vop(VLOAD(acc + k + 4), VLOAD(s0 + k + 4), op);
    }
    if (s1) {
      x0 = vop(x0, VLOAD(s1 + k), op);
      x1 = vop(x1, VLOAD(s1 + k + 4), op);
    }
    if (s2) {
      x0 = vop(x0, VLOAD(s2 + k), op);
      x1 = vop(x1, VLOAD(s2 + k + 4), op);
    }
    if (s3) {
      x0 = vop(x0, VLOAD(s3 + k), op);
      x1 = vop(x1, VLOAD(s3 + k + 4), op);
    }
    VSTORE(acc + k, x0);
    VSTORE(acc + k + 4, x1);
  }
#endif
  for (; k < n; k++) {
    float x = first ? s0[k] : sop(acc[k], s0[k], op);
    if (s1)
      x = sop(x, s1[k], op);
    if (s2)
      x = sop(x, s2[k], op);
    if (s3)
      x = sop(x, s3[k], op);
    acc[k] = x;
  }
}

static void finish_avg(acc_block *a, size_t n, acc_kind kind, int64_t div) {
  size_t k;
  switch (kind) {
  case ACC_F32:
    for (k = 0; k < n; k++) a->f[k] /= (float)div;
    break;
  case ACC_F64:
    for (k = 0; k < n; k++) a->d[k] /= (double)div;
    break;
  case ACC_I64:
    for (k = 0; k < n; k++) a->i[k] /= div;
    break;
  case ACC_U64:
    for (k = 0; k < n; k++) a->u[k] /= (uint64_t)div;
    break;
  }
}

/* Convert the accumulator back into `dtype` in out (may be a->f itself for
 * f32, in which case nothing happens). Narrowing integer casts wrap. */
static void store(void *out, const acc_block *a, size_t n, tpx_dtype t) {
  size_t k;
  switch (t) {
  case TPX_DTYPE_F32:
    if (out != a->f)
      memcpy(out, a->f, n * 4);
    break;
  case TPX_DTYPE_F16:
    for (k = 0; k < n; k++) ((uint16_t *)out)[k] = tpx__f32_to_f16(a->f[k]);
    break;
  case TPX_DTYPE_BF16:
    for (k = 0; k < n; k++) ((uint16_t *)out)[k] = tpx__f32_to_bf16(a->f[k]);
    break;
  case TPX_DTYPE_F64:
    if (out != a->d)
      memcpy(out, a->d, n * 8);
    break;
  case TPX_DTYPE_I64:
    if (out != a->i)
      memcpy(out, a->i, n * 8);
    break;
  case TPX_DTYPE_I32:
    for (k = 0; k < n; k++)
      ((int32_t *)out)[k] = (int32_t)(uint32_t)(uint64_t)a->i[k];
    break;
  case TPX_DTYPE_I16:
    for (k = 0; k < n; k++)
      ((int16_t *)out)[k] = (int16_t)(uint16_t)(uint64_t)a->i[k];
    break;
  case TPX_DTYPE_I8:
    for (k = 0; k < n; k++)
      ((int8_t *)out)[k] = (int8_t)(uint8_t)(uint64_t)a->i[k];
    break;
  case TPX_DTYPE_U64:
    if (out != a->u)
      memcpy(out, a->u, n * 8);
    break;
  case TPX_DTYPE_U32:
    for (k = 0; k < n; k++) ((uint32_t *)out)[k] = (uint32_t)a->u[k];
    break;
  case TPX_DTYPE_U16:
    for (k = 0; k < n; k++) ((uint16_t *)out)[k] = (uint16_t)a->u[k];
    break;
  case TPX_DTYPE_U8:
    for (k = 0; k < n; k++) ((uint8_t *)out)[k] = (uint8_t)a->u[k];
    break;
  default: break;
  }
}

/* ---- stores ------------------------------------------------------------- */

static void put(void *dst, const void *src, size_t bytes, int stream) {
  if (dst == src || bytes == 0)
    return;
#if TPX_HAVE_SSE2
  if (stream && ((uintptr_t)dst & 15u) == ((uintptr_t)src & 15u)) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (16u - ((uintptr_t)d & 15u)) & 15u;
    if (head > bytes)
      head = bytes;
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
      __m128i v0 = _mm_load_si128((const __m128i *)(const void *)s);
      __m128i v1 = _mm_load_si128((const __m128i *)(const void *)(s + 16));
      __m128i v2 = _mm_load_si128((const __m128i *)(const void *)(s + 32));
      __m128i v3 = _mm_load_si128((const __m128i *)(const void *)(s + 48));
      _mm_stream_si128((__m128i *)(void *)d, v0);
      _mm_stream_si128((__m128i *)(void *)(d + 16), v1);
      _mm_stream_si128((__m128i *)(void *)(d + 32), v2);
      _mm_stream_si128((__m128i *)(void *)(d + 48), v3);
    }
    memcpy(d, s, bytes);
    return;
  }
#endif
  (void)stream;
  memcpy(dst, src, bytes);
}

static void fence(int stream) {
#if TPX_HAVE_SSE2
  if (stream)
    _mm_sfence();
#endif
  (void)stream;
}

/* ---- entry points ------------------------------------------------------- */

void tpx__reduce_into(void *const *dsts, int ndst, const void *const *srcs,
                      int nsrc, size_t count, tpx_dtype dtype, tpx_reduce_op op,
                      int64_t avg_div, int stream) {
  /* On the stack (48 KiB), not TLS: libtpx may be dlopen'd. */
  _Alignas(64) acc_block acc, tmp, out16;
  size_t es = tpx_dtype_size(dtype);
  acc_kind kind = kind_of(dtype);
  for (size_t base = 0; base < count; base += BLOCK) {
    size_t n = count - base < BLOCK ? count - base : BLOCK;
    size_t off = base * es;
    if (dtype == TPX_DTYPE_F32) {
      const float *group[4];
      for (int s = 0; s < nsrc; s += 4) {
        int m = nsrc - s < 4 ? nsrc - s : 4;
        for (int j = 0; j < m; j++)
          group[j] = (const void *)((const unsigned char *)srcs[s + j] + off);
        pass_f32(acc.f, group, m, s == 0, n, op);
      }
    } else {
      load(&acc, (const unsigned char *)srcs[0] + off, n, dtype);
      for (int s = 1; s < nsrc; s++) {
        load(&tmp, (const unsigned char *)srcs[s] + off, n, dtype);
        combine(&acc, &tmp, n, kind, op);
      }
    }
    if (op == TPX_REDUCE_AVG && avg_div > 1)
      finish_avg(&acc, n, kind, avg_div);
    /* Native-width result: the accumulator itself for 32/64-bit types of
     * the same width, else a converted copy. */
    const void *res = &acc;
    if (es != 8 && dtype != TPX_DTYPE_F32) {
      store(&out16, &acc, n, dtype);
      res = &out16;
    }
    for (int d = 0; d < ndst; d++)
      put((unsigned char *)dsts[d] + off, res, n * es, stream);
  }
  fence(stream);
}

void tpx__copy_into(void *const *dsts, int ndst, const void *src, size_t bytes,
                    int stream) {
  const size_t blk = 16384;
  for (size_t base = 0; base < bytes; base += blk) {
    size_t n = bytes - base < blk ? bytes - base : blk;
    for (int d = 0; d < ndst; d++)
      put((unsigned char *)dsts[d] + base, (const unsigned char *)src + base, n,
          stream);
  }
  fence(stream);
}

void tpx__divide(void *buf, size_t count, tpx_dtype dtype, int64_t div) {
  _Alignas(64) acc_block acc;
  size_t es = tpx_dtype_size(dtype);
  acc_kind kind = kind_of(dtype);
  if (div <= 1)
    return;
  for (size_t base = 0; base < count; base += BLOCK) {
    size_t n = count - base < BLOCK ? count - base : BLOCK;
    void *p = (unsigned char *)buf + base * es;
    load(&acc, p, n, dtype);
    finish_avg(&acc, n, kind, div);
    store(p, &acc, n, dtype);
  }
}
