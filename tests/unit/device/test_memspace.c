/* test_memspace.c — the memory spaces of core/src/device (memspace.h): every
 * op on the host space and on the sim space gives bit-identical results
 * (strided copies with uneven and empty rows, casts between f32 / bf16 /
 * f16, add, scale, norm reductions, AdamW, index check, embedding lookup /
 * scatter-add, the loss's row max / sums / gradient against the order
 * written plainly in loss_exp_ref.h), and the sim space really catches
 * host access (a forked
 * child that dereferences a sim pointer dies on a signal), and the checked
 * kernel wrappers refuse bad arguments and missing kernels by name. The
 * host and sim sources are compiled in (the shared library hides them). */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device/elem_bits.h"
#include "device/kernels.h"
#include "../shard/shard_fixture.h"
#include "device/sim_tag.h"
#include "loss_exp_ref.h"
#include "norm_tree_ref.h"

static const tpx__memspace *space(int sim) {
  return sim ? &tpx__ms_sim : &tpx__ms_host;
}

/* A buffer of the space holding `bytes` copied from host `src` (zeroed
 * when src is NULL). */
static void *up(const tpx__memspace *ms, const void *src, size_t bytes) {
  void *p = NULL;
  ck_assert_int_eq(tpx__ms_alloc(ms, bytes, 1, &p, NULL), TPX_OK);
  ck_assert_ptr_nonnull(p);
  if (src)
    ck_assert_int_eq(tpx__ms_copy(ms, p, src, bytes, TPX__H2D, NULL), TPX_OK);
  return p;
}

static void down(const tpx__memspace *ms, void *dst, const void *p,
                 size_t bytes) {
  ck_assert_int_eq(tpx__ms_copy(ms, dst, p, bytes, TPX__D2H, NULL), TPX_OK);
}

static float fval(int64_t i, int salt) {
  /* mixed signs and magnitudes; a few values that round differently in
   * bf16 / f16 */
  double x = sin((double)(i * 7 + salt) * 0.37) * pow(2.0, (double)(i % 9) - 4);
  return (float)x;
}

START_TEST(test_alloc_tagged) {
  void *p = NULL;
  ck_assert_int_eq(tpx__ms_alloc(&tpx__ms_sim, 64, 1, &p, NULL), TPX_OK);
  ck_assert(tpx__sim_is_tagged(p));
  ck_assert(!tpx__sim_is_tagged(tpx__sim_untag(p)));
  ck_assert_ptr_null(tpx__sim_tag(NULL));
  ck_assert_ptr_null(tpx__sim_untag(NULL));
  unsigned char z[64], zero[64] = {0};
  down(&tpx__ms_sim, z, p, 64);
  ck_assert_int_eq(memcmp(z, zero, 64), 0); /* zeroed */
  tpx__ms_free(&tpx__ms_sim, p);
  tpx__ms_free(&tpx__ms_sim, NULL);
  ck_assert_str_eq(tpx__ms_sim.buf->name, "sim");
  ck_assert_int_eq(tpx__ms_sim.buf->device, 1);
  ck_assert_int_eq(tpx__ms_host.buf->device, 0);
  /* 0 bytes is a valid (non-NULL) allocation */
  ck_assert_int_eq(tpx__ms_alloc(&tpx__ms_sim, 0, 0, &p, NULL), TPX_OK);
  ck_assert_ptr_nonnull(p);
  tpx__ms_free(&tpx__ms_sim, p);
}
END_TEST

/* The forked child writes through a sim pointer: it must die on a signal
 * (SIGSEGV; SIGABRT when ASan reports the fault first). */
static void deref_in_child(int write) {
  void *p = NULL;
  ck_assert_int_eq(tpx__ms_alloc(&tpx__ms_sim, 16, 1, &p, NULL), TPX_OK);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    volatile unsigned char *q = p;
    if (write)
      q[3] = 7;
    else
      (void)q[3];
    _exit(0); /* not reached when the sim space works */
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFSIGNALED(status),
                "a host %s through a sim pointer did not fault (status %d)",
                write ? "write" : "read", status);
  ck_assert(WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS ||
            WTERMSIG(status) == SIGABRT);
  tpx__ms_free(&tpx__ms_sim, p);
}

START_TEST(test_sim_catches_host_read) { deref_in_child(0); }
END_TEST
START_TEST(test_sim_catches_host_write) { deref_in_child(1); }
END_TEST

/* Check's own signal expectation, without a fork of ours (not under
 * ASan, which turns the fault into an abort). */
START_TEST(test_sim_segv) {
  void *p = NULL;
  tpx__ms_alloc(&tpx__ms_sim, 16, 1, &p, NULL);
  volatile float *f = p;
  f[0] = 1.0f;
}
END_TEST

/* ---- copies ---- */

typedef struct c2d {
  size_t rows, width, spitch, dpitch;
} c2d;

static const c2d c2d_cases[] = {
    {3, 5, 7, 9}, /* uneven pitches */
    {4, 8, 8, 8}, /* contiguous */
    {0, 8, 8, 8}, /* no rows */
    {5, 0, 3, 4}, /* empty rows */
    {1, 13, 13, 20}, {6, 1, 2, 3},
};

START_TEST(test_copy2d) {
  const c2d *c = &c2d_cases[_i];
  size_t sbytes = c->rows * c->spitch + 1, dbytes = c->rows * c->dpitch + 1;
  unsigned char *src = malloc(sbytes), *want = malloc(dbytes),
                *got = malloc(dbytes);
  for (size_t i = 0; i < sbytes; i++) src[i] = (unsigned char)(i * 31 + 5);
  for (size_t i = 0; i < dbytes; i++) want[i] = 0xee;
  for (size_t r = 0; r < c->rows; r++)
    memcpy(want + r * c->dpitch, src + r * c->spitch, c->width);
  for (int sim = 0; sim < 2; sim++) {
    const tpx__memspace *ms = space(sim);
    /* D2D */
    unsigned char *fill = malloc(dbytes);
    memset(fill, 0xee, dbytes);
    void *ds = up(ms, src, sbytes), *dd = up(ms, fill, dbytes);
    ck_assert_int_eq(tpx__ms_copy2d(ms, dd, c->dpitch, ds, c->spitch, c->width,
                                    c->rows, TPX__D2D, NULL),
                     TPX_OK);
    down(ms, got, dd, dbytes);
    ck_assert_int_eq(memcmp(got, want, dbytes), 0);
    /* H2D then D2H (host side is a plain pointer) */
    ck_assert_int_eq(tpx__ms_copy(ms, dd, fill, dbytes, TPX__H2D, NULL),
                     TPX_OK);
    ck_assert_int_eq(tpx__ms_copy2d(ms, dd, c->dpitch, src, c->spitch, c->width,
                                    c->rows, TPX__H2D, NULL),
                     TPX_OK);
    down(ms, got, dd, dbytes);
    ck_assert_int_eq(memcmp(got, want, dbytes), 0);
    memcpy(got, fill, dbytes);
    ck_assert_int_eq(tpx__ms_copy2d(ms, got, c->dpitch, ds, c->spitch, c->width,
                                    c->rows, TPX__D2H, NULL),
                     TPX_OK);
    ck_assert_int_eq(memcmp(got, want, dbytes), 0);
    tpx__ms_free(ms, ds);
    tpx__ms_free(ms, dd);
    free(fill);
  }
  free(src), free(want), free(got);
}
END_TEST

START_TEST(test_copy_memset_overlap) {
  for (int sim = 0; sim < 2; sim++) {
    const tpx__memspace *ms = space(sim);
    unsigned char h[32];
    for (int i = 0; i < 32; i++) h[i] = (unsigned char)i;
    unsigned char *d = up(ms, h, 32);
    /* overlapping D2D copy: memmove semantics */
    ck_assert_int_eq(tpx__ms_copy(ms, d + 4, d, 16, TPX__D2D, NULL), TPX_OK);
    ck_assert_int_eq(tpx__ms_memset(ms, d + 28, 0xab, 4, NULL), TPX_OK);
    unsigned char g[32], w[32];
    memcpy(w, h, 32);
    memmove(w + 4, w, 16);
    memset(w + 28, 0xab, 4);
    down(ms, g, d, 32);
    ck_assert_int_eq(memcmp(g, w, 32), 0);
    tpx__ms_free(ms, d);
  }
}
END_TEST

/* ---- kernels: sim == host, bit for bit ---- */

static const tpx_dtype fdts[3] = {TPX_DTYPE_F32, TPX_DTYPE_BF16, TPX_DTYPE_F16};

START_TEST(test_convert) {
  enum { N = 103 };
  float src[N];
  for (int i = 0; i < N; i++) src[i] = fval(i, 1);
  src[5] = NAN;
  src[6] = INFINITY;
  src[7] = -0.0f;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      unsigned char in[N * 4], out[2][N * 4];
      /* first make `in` in dtype a (through the host convert) */
      tpx__ms_convert(&tpx__ms_host, in, fdts[a], src, TPX_DTYPE_F32, N, NULL);
      for (int sim = 0; sim < 2; sim++) {
        const tpx__memspace *ms = space(sim);
        size_t ib = N * tpx_dtype_size(fdts[a]),
               ob = N * tpx_dtype_size(fdts[b]);
        void *di = up(ms, in, ib), *dout = up(ms, NULL, ob);
        ck_assert_int_eq(
            tpx__ms_convert(ms, dout, fdts[b], di, fdts[a], N, NULL), TPX_OK);
        down(ms, out[sim], dout, ob);
        tpx__ms_free(ms, di);
        tpx__ms_free(ms, dout);
      }
      ck_assert_int_eq(memcmp(out[0], out[1], N * tpx_dtype_size(fdts[b])), 0);
    }
  /* f32 -> bf16 rounds to nearest even: 1 + 2^-8 is a tie, stays 1 */
  float t = 1.0f + 1.0f / 256.0f;
  uint16_t h = 0;
  tpx__ms_convert(&tpx__ms_host, &h, TPX_DTYPE_BF16, &t, TPX_DTYPE_F32, 1,
                  NULL);
  ck_assert_uint_eq(h, 0x3f80);
}
END_TEST

/* The 16-bit conversions the host loops and the cuda kernels share
 * (device/elem_bits.h): the exact bits for NaN (sign and payload kept, not
 * CUDA's canonical 0x7fff), inf, overflow, ties and subnormals, and the
 * host space's convert is exactly those functions for every f16 / bf16
 * pattern. */
static const struct {
  uint32_t f32;
  uint16_t bf16, f16;
} hb_cases[] = {
    {0x7fc00000u, 0x7fc0, 0x7e00}, /* quiet NaN */
    {0xffc00000u, 0xffc0, 0xfe00}, /* negative NaN keeps its sign */
    {0x7f800001u, 0x7fc0, 0x7e00}, /* signalling NaN becomes quiet */
    {0x7fa00000u, 0x7fe0, 0x7e00}, /* payload's top bits kept (bf16) */
    {0x7f800000u, 0x7f80, 0x7c00}, /* inf */
    {0xff800000u, 0xff80, 0xfc00}, /* -inf */
    {0x477ff000u, 0x4780, 0x7c00}, /* 65520: f16 tie rounds to inf */
    {0x477fefffu, 0x4780, 0x7bff}, /* just below: 65504 */
    {0x3f808000u, 0x3f80, 0x3c04}, /* 1 + 2^-8: bf16 tie to even */
    {0x3f818000u, 0x3f82, 0x3c0c}, /* 1 + 3 * 2^-8: bf16 tie up to even */
    {0x3f801000u, 0x3f80, 0x3c00}, /* 1 + 2^-11: f16 tie to even */
    {0x3f803000u, 0x3f80, 0x3c02}, /* 1 + 3 * 2^-11: f16 tie up */
    {0x33800000u, 0x3380, 0x0001}, /* 2^-24: smallest f16 subnormal */
    {0x33000000u, 0x3300, 0x0000}, /* 2^-25: tie to even (zero) */
    {0x33c00000u, 0x33c0, 0x0002}, /* 1.5 * 2^-24: tie up to 2 */
    {0x80000000u, 0x8000, 0x8000}, /* -0 */
};

START_TEST(test_half_bits) {
  for (size_t k = 0; k < sizeof hb_cases / sizeof hb_cases[0]; k++) {
    float f = tpx__hb_bits_f32(hb_cases[k].f32);
    ck_assert_msg(tpx__hb_f32_to_bf16(f) == hb_cases[k].bf16,
                  "case %zu: bf16 %04x", k, tpx__hb_f32_to_bf16(f));
    ck_assert_msg(tpx__hb_f32_to_f16(f) == hb_cases[k].f16,
                  "case %zu: f16 %04x", k, tpx__hb_f32_to_f16(f));
  }
  /* f16 / bf16 -> f32 keep a NaN's sign and payload */
  ck_assert_uint_eq(tpx__hb_f32_bits(tpx__hb_f16_to_f32(0xfc01)), 0xff802000u);
  ck_assert_uint_eq(tpx__hb_f32_bits(tpx__hb_bf16_to_f32(0xff81)), 0xff810000u);
  /* every pattern: the host space's convert is these functions, and
   * f16 -> f32 -> f16 round-trips (NaNs to sign | 0x7e00) */
  static uint16_t in[65536], o16[65536];
  static float o32[65536];
  for (uint32_t i = 0; i < 65536; i++) in[i] = (uint16_t)i;
  for (int bf = 0; bf < 2; bf++) {
    tpx_dtype dt = bf ? TPX_DTYPE_BF16 : TPX_DTYPE_F16;
    ck_assert_int_eq(
        tpx__ms_convert(&tpx__ms_host, o32, TPX_DTYPE_F32, in, dt, 65536, NULL),
        TPX_OK);
    ck_assert_int_eq(tpx__ms_convert(&tpx__ms_host, o16, dt, o32, TPX_DTYPE_F32,
                                     65536, NULL),
                     TPX_OK);
    for (uint32_t i = 0; i < 65536; i++) {
      float want = bf ? tpx__hb_bf16_to_f32(in[i]) : tpx__hb_f16_to_f32(in[i]);
      ck_assert_msg(memcmp(&o32[i], &want, 4) == 0, "%s %04x",
                    bf ? "bf16" : "f16", i);
      int nan = bf ? (i & 0x7fff) > 0x7f80 : (i & 0x7fff) > 0x7c00;
      uint16_t back =
          nan ? (uint16_t)(bf ? (i | 0x40) : ((i & 0x8000) | 0x7e00))
              : (uint16_t)i;
      ck_assert_msg(o16[i] == back, "%s %04x -> %04x", bf ? "bf16" : "f16", i,
                    o16[i]);
    }
  }
}
END_TEST

START_TEST(test_add_scale) {
  enum { N = 37 };
  float base[N], res[2][3][N];
  for (int i = 0; i < N; i++) base[i] = fval(i, 2);
  for (int sim = 0; sim < 2; sim++) {
    const tpx__memspace *ms = space(sim);
    for (int a = 0; a < 3; a++) {
      unsigned char src[N * 4];
      float s32[N];
      for (int i = 0; i < N; i++) s32[i] = fval(i, 3);
      tpx__ms_convert(&tpx__ms_host, src, fdts[a], s32, TPX_DTYPE_F32, N, NULL);
      float *d = up(ms, base, sizeof base);
      void *s = up(ms, src, N * tpx_dtype_size(fdts[a]));
      ck_assert_int_eq(tpx__ms_add_f32(ms, d, s, fdts[a], N, 3.0f, NULL),
                       TPX_OK);
      ck_assert_int_eq(tpx__ms_add_f32(ms, d, s, fdts[a], N, 1.0f, NULL),
                       TPX_OK);
      ck_assert_int_eq(tpx__ms_scale_f32(ms, d, N, 0.75f, 0, NULL), TPX_OK);
      ck_assert_int_eq(tpx__ms_scale_f32(ms, d, N, 3.0f, 1, NULL), TPX_OK);
      down(ms, res[sim][a], d, sizeof base);
      tpx__ms_free(ms, d);
      tpx__ms_free(ms, s);
    }
  }
  ck_assert_int_eq(memcmp(res[0], res[1], sizeof res[0]), 0);
  /* the math itself, on f32: ((b + s/3 + s) * 0.75) / 3 */
  for (int i = 0; i < N; i++) {
    float s = fval(i, 3), want = base[i];
    want += s / 3.0f;
    want += s;
    want *= 0.75f;
    want /= 3.0f;
    ck_assert(res[0][0][i] == want);
  }
}
END_TEST

START_TEST(test_norm_acc) {
  enum { N = 50 };
  float g[N];
  for (int i = 0; i < N; i++) g[i] = fval(i, 4);
  double got[2][2];
  for (int sim = 0; sim < 2; sim++) {
    const tpx__memspace *ms = space(sim);
    for (int inf = 0; inf < 2; inf++) {
      double start = inf ? 0.0 : 0.5;
      double *acc = up(ms, &start, sizeof start);
      float *dg = up(ms, g, sizeof g);
      ck_assert_int_eq(tpx__ms_norm_acc(ms, acc, dg, 20, inf, NULL), TPX_OK);
      ck_assert_int_eq(tpx__ms_norm_acc(ms, acc, dg + 20, N - 20, inf, NULL),
                       TPX_OK);
      down(ms, &got[sim][inf], acc, sizeof(double));
      tpx__ms_free(ms, acc);
      tpx__ms_free(ms, dg);
    }
  }
  double s = 0.5, m = 0;
  for (int i = 0; i < N; i++) {
    s += (double)g[i] * (double)g[i];
    if (fabs((double)g[i]) > m)
      m = fabs((double)g[i]);
  }
  ck_assert(got[0][0] == s && got[1][0] == s);
  ck_assert(got[0][1] == m && got[1][1] == m);
  /* NaN wins the max */
  float bad[3] = {1, NAN, 2};
  double a = 0;
  tpx__ms_norm_acc(&tpx__ms_host, &a, bad, 3, 1, NULL);
  ck_assert(isnan(a));
}
END_TEST

START_TEST(test_adamw) {
  enum { N = 23 }; /* not a multiple of the SIMD width */
  float p0[N], g[N], res[2][3][N];
  for (int i = 0; i < N; i++) {
    p0[i] = fval(i, 5);
    g[i] = fval(i, 6);
  }
  tpx__ms_adamw h = {0.999f, 0.1f, 0.999f, 0.001f, 0.03f, 1e-8f, -0.01f};
  for (int sim = 0; sim < 2; sim++) {
    const tpx__memspace *ms = space(sim);
    float *p = up(ms, p0, sizeof p0), *dg = up(ms, g, sizeof g),
          *m = up(ms, NULL, sizeof p0), *v = up(ms, NULL, sizeof p0);
    for (int step = 0; step < 2; step++)
      ck_assert_int_eq(tpx__ms_adamw_update(ms, p, dg, m, v, N, &h, NULL),
                       TPX_OK);
    down(ms, res[sim][0], p, sizeof p0);
    down(ms, res[sim][1], m, sizeof p0);
    down(ms, res[sim][2], v, sizeof p0);
    tpx__ms_free(ms, p), tpx__ms_free(ms, dg), tpx__ms_free(ms, m),
        tpx__ms_free(ms, v);
  }
  ck_assert_int_eq(memcmp(res[0], res[1], sizeof res[0]), 0);
  /* scalar torch order, two steps */
  for (int i = 0; i < N; i++) {
    float p = p0[i], m = 0, v = 0;
    for (int step = 0; step < 2; step++) {
      p = p * h.decay;
      m = m + h.w1 * (g[i] - m);
      v = v * h.b2 + h.w2 * g[i] * g[i];
      float denom = sqrtf(v) / h.bc2s + h.eps;
      p = p + h.step * m / denom;
    }
    ck_assert_msg(res[0][0][i] == p, "adamw[%d] %.9g vs %.9g", i, res[0][0][i],
                  p);
  }
}
END_TEST

START_TEST(test_index_check) {
  int64_t ids64[5] = {0, 4, 2, 5, 1};
  int32_t ids32[5] = {0, 4, -1, 3, 1};
  for (int sim = 0; sim < 2; sim++) {
    const tpx__memspace *ms = space(sim);
    void *d64 = up(ms, ids64, sizeof ids64), *d32 = up(ms, ids32, sizeof ids32);
    int64_t bad[2];
    ck_assert_int_eq(
        tpx__ms_index_check(ms, d64, TPX_DTYPE_I64, 5, 5, 0, 0, bad, NULL),
        TPX_OK);
    ck_assert_int_eq(bad[0], 3);
    ck_assert_int_eq(bad[1], 5);
    tpx__ms_index_check(ms, d64, TPX_DTYPE_I64, 5, 6, 0, 0, bad, NULL);
    ck_assert_int_eq(bad[0], -1);
    tpx__ms_index_check(ms, d32, TPX_DTYPE_I32, 5, 5, 0, 0, bad, NULL);
    ck_assert_int_eq(bad[0], 2);
    ck_assert_int_eq(bad[1], -1);
    /* -1 as ignore_index passes */
    tpx__ms_index_check(ms, d32, TPX_DTYPE_I32, 5, 5, 1, -1, bad, NULL);
    ck_assert_int_eq(bad[0], -1);
    tpx__ms_free(ms, d64);
    tpx__ms_free(ms, d32);
  }
}
END_TEST

START_TEST(test_embedding) {
  /* 6 ids over a weight of 4 local rows x 3 (global rows 2..5 when masked)
   */
  enum { R = 4, H = 3, N = 6 };
  int64_t ids[N] = {2, 0, 5, 3, 7, 2};
  float w[R * H], go[N * H];
  for (int i = 0; i < R * H; i++) w[i] = fval(i, 7);
  for (int i = 0; i < N * H; i++) go[i] = fval(i, 8);
  for (int masked = 0; masked < 2; masked++) {
    tpx__ms_rows rows = {2, R, masked};
    int64_t ids_ok[N];
    for (int i = 0; i < N; i++) ids_ok[i] = masked ? ids[i] : ids[i] % R;
    for (int bf = 0; bf < 2; bf++) {
      tpx_dtype dt = bf ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
      size_t es = tpx_dtype_size(dt);
      unsigned char wc[R * H * 4], gc[N * H * 4];
      tpx__ms_convert(&tpx__ms_host, wc, dt, w, TPX_DTYPE_F32, R * H, NULL);
      tpx__ms_convert(&tpx__ms_host, gc, dt, go, TPX_DTYPE_F32, N * H, NULL);
      unsigned char out[2][N * H * 4], wg[2][R * H * 4];
      for (int sim = 0; sim < 2; sim++) {
        const tpx__memspace *ms = space(sim);
        void *dw = up(ms, wc, R * H * es), *di = up(ms, ids_ok, sizeof ids_ok),
             *dout = up(ms, NULL, N * H * es), *dg = up(ms, gc, N * H * es),
             *dwg = up(ms, wc, R * H * es);
        ck_assert_int_eq(tpx__ms_embed_lookup(ms, dout, dw, H * es, di,
                                              TPX_DTYPE_I64, N, &rows, NULL),
                         TPX_OK);
        ck_assert_int_eq(tpx__ms_embed_scatter_add(ms, dwg, dt, dg, dt, H, di,
                                                   TPX_DTYPE_I64, N, &rows,
                                                   NULL),
                         TPX_OK);
        down(ms, out[sim], dout, N * H * es);
        down(ms, wg[sim], dwg, R * H * es);
        tpx__ms_free(ms, dw), tpx__ms_free(ms, di), tpx__ms_free(ms, dout),
            tpx__ms_free(ms, dg), tpx__ms_free(ms, dwg);
      }
      ck_assert_int_eq(memcmp(out[0], out[1], N * H * es), 0);
      ck_assert_int_eq(memcmp(wg[0], wg[1], R * H * es), 0);
      if (bf)
        continue;
      /* f32 semantics: masked rows zero, scatter-add in id order */
      const float *o = (const float *)out[0], *gw = (const float *)wg[0];
      float want[R * H];
      memcpy(want, w, sizeof want);
      for (int i = 0; i < N; i++) {
        int64_t r = masked ? ids_ok[i] - 2 : ids_ok[i];
        int in = r >= 0 && r < R;
        for (int j = 0; j < H; j++) {
          ck_assert(o[i * H + j] == (in ? w[r * H + j] : 0.0f));
          if (in)
            want[r * H + j] += go[i * H + j];
        }
      }
      ck_assert_int_eq(memcmp(gw, want, sizeof want), 0);
    }
  }
}
END_TEST

/* The norms' documented order (norm_tree_ref.h): the host kernel follows
 * it bit for bit, it is deterministic and near the plain sequential sum;
 * one, two and three levels of tiles, ragged last tiles. */
START_TEST(test_norm_tree_order) {
  static const size_t ns[] = {1, 255, 4095, 4096, 4097, 70001, 4096 * 4096 + 3};
  for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
    size_t n = ns[c];
    float *g = malloc(n * sizeof *g);
    ck_assert_ptr_nonnull(g);
    for (size_t i = 0; i < n; i++) g[i] = fval((int64_t)i, 3);
    double seq = 0.5, mx = 0.5;
    for (size_t i = 0; i < n; i++) {
      seq += (double)g[i] * (double)g[i];
      mx = fabs((double)g[i]) > mx ? fabs((double)g[i]) : mx;
    }
    for (int inf = 0; inf < 2; inf++) {
      double got = 0.5;
      ck_assert_int_eq(tpx__ms_norm_acc(&tpx__ms_host, &got, g, n, inf, NULL),
                       TPX_OK);
      double t1 = tpx__norm_tree_ref(0.5, g, n, inf);
      double t2 = tpx__norm_tree_ref(0.5, g, n, inf);
      ck_assert(memcmp(&t1, &t2, sizeof t1) == 0); /* deterministic */
      ck_assert_msg(memcmp(&got, &t1, sizeof t1) == 0,
                    "n %zu inf %d: host kernel %.17g, order %.17g", n, inf, got,
                    t1);
      if (inf)
        ck_assert(t1 == mx);
      else
        ck_assert_msg(fabs(t1 - seq) <= 1e-12 * seq, "n %zu: %.17g vs %.17g", n,
                      t1, seq);
    }
    /* NaN wins in both orders */
    g[n / 2] = NAN;
    ck_assert(isnan(tpx__norm_tree_ref(0.0, g, n, 1)));
    ck_assert(isnan(tpx__norm_tree_ref(0.0, g, n, 0)));
    free(g);
  }
}
END_TEST

/* The loss kernels on rows of uneven lengths (below, at and past the
 * 8-lane blocks) with -inf, NaN and far-below-max logits, a masked vocab
 * range (off 2: targets outside it), an ignored row: row max, sums and
 * gradient bit for bit those of loss_exp_ref.h, in both spaces. */
static const size_t loss_lens[] = {1, 3, 7, 8, 9, 15, 16, 17, 33, 4099};

static void loss_ref_row(const float *z, size_t len, int64_t t, float m,
                         double se, double c, float *o) {
  if (t == -100) {
    memset(o, 0, len * sizeof *o);
    return;
  }
  float k = (float)(c / se);
  for (size_t j = 0; j < len; j++) o[j] = k * ler_exp(z[j] - m);
  if (t >= 2 && t < 2 + (int64_t)len)
    o[t - 2] -= (float)c;
}

START_TEST(test_loss_rows) {
  enum { R = 5 };
  size_t len = loss_lens[_i];
  float *z = malloc(R * len * sizeof *z), *g[2];
  int64_t tg[R] = {2, 1 + (int64_t)len, -100, 3, 1};
  float gi[R] = {1.0f, 0.5f, 2.0f, -1.0f, 0.25f}, mx[2][R];
  double se[2][2 * R];
  ck_assert_ptr_nonnull(z);
  for (size_t i = 0; i < R * len; i++) z[i] = 8.0f * fval((int64_t)i, 4);
  z[len - 1] = -INFINITY;
  z[len + len / 2] = NAN;
  z[3 * len] = -1e30f;
  z[4 * len + len / 3] = 30.0f; /* the max: the others' exp underflow */
  for (int sim = 0; sim < 2; sim++) {
    const tpx__memspace *ms = space(sim);
    void *dz = up(ms, z, R * len * sizeof *z), *dt = up(ms, tg, sizeof tg),
         *dgi = up(ms, gi, sizeof gi), *dmx = up(ms, NULL, sizeof mx[0]),
         *dse = up(ms, NULL, sizeof se[0]),
         *dg = up(ms, NULL, R * len * sizeof(float));
    tpx__ms_loss l = {dz, TPX_DTYPE_F32, dt, TPX_DTYPE_I64, R, len, 2, -100};
    ck_assert_int_eq(tpx__ms_loss_row_max(ms, dmx, &l, NULL), TPX_OK);
    ck_assert_int_eq(tpx__ms_loss_row_sums(ms, dse, dmx, &l, 1, NULL), TPX_OK);
    ck_assert_int_eq(tpx__ms_loss_grad(ms, dg, TPX_DTYPE_F32, dmx, dse, dgi,
                                       0.5, -1.0, &l, NULL),
                     TPX_OK);
    g[sim] = malloc(R * len * sizeof(float));
    ck_assert_ptr_nonnull(g[sim]);
    down(ms, mx[sim], dmx, sizeof mx[0]);
    down(ms, se[sim], dse, sizeof se[0]);
    down(ms, g[sim], dg, R * len * sizeof(float));
    tpx__ms_free(ms, dz), tpx__ms_free(ms, dt), tpx__ms_free(ms, dgi),
        tpx__ms_free(ms, dmx), tpx__ms_free(ms, dse), tpx__ms_free(ms, dg);
  }
  ck_assert_int_eq(memcmp(mx[0], mx[1], sizeof mx[0]), 0);
  ck_assert_int_eq(memcmp(se[0], se[1], sizeof se[0]), 0);
  ck_assert_int_eq(memcmp(g[0], g[1], R * len * sizeof(float)), 0);
  float *want = malloc(len * sizeof *want);
  ck_assert_ptr_nonnull(want);
  for (int i = 0; i < R; i++) {
    const float *row = z + (size_t)i * len;
    float m = -INFINITY;
    for (size_t j = 0; j < len; j++) m = row[j] > m ? row[j] : m;
    ck_assert_msg(mx[0][i] == m, "len %zu row %d: max %g vs %g", len, i,
                  mx[0][i], m);
    double s = ler_sum_exp(row, len, mx[0][i]);
    ck_assert_msg(memcmp(&se[0][i], &s, sizeof s) == 0,
                  "len %zu row %d: sum %.17g vs %.17g", len, i, se[0][i], s);
    int in = tg[i] >= 2 && tg[i] < 2 + (int64_t)len;
    double tv = in ? (double)row[tg[i] - 2] : 0.0; /* NaN for len 1 */
    ck_assert(memcmp(&se[0][R + i], &tv, sizeof tv) == 0);
    loss_ref_row(row, len, tg[i], mx[0][i], se[0][i], gi[i] * 0.5 * -1.0, want);
    ck_assert_msg(memcmp(g[0] + (size_t)i * len, want, len * sizeof *want) == 0,
                  "len %zu row %d: gradient differs from the plain order", len,
                  i);
  }
  free(want), free(g[0]), free(g[1]), free(z);
}
END_TEST

/* ---- the checked wrappers (kernels.c) ---- */

/* A space whose kernels were not built (the cuda space without nvcc). */
static const tpx__memspace no_kernels = {&tpx__ms_host_buffers, NULL, NULL, -1};

START_TEST(test_wrappers_check) {
  const tpx__memspace *ms = &tpx__ms_host;
  float f[4] = {1, 2, 3, 4};
  double acc = 0;
  int64_t bad[2] = {7, 7}, ids[2] = {0, 1};
  tpx_error e = {0};
  /* n == 0: no-op, even with NULL buffers; index_check still answers */
  ck_assert_int_eq(tpx__ms_add_f32(ms, NULL, NULL, TPX_DTYPE_F32, 0, 1, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx__ms_norm_acc(&no_kernels, NULL, NULL, 0, 0, &e), TPX_OK);
  ck_assert_int_eq(
      tpx__ms_index_check(ms, NULL, TPX_DTYPE_I64, 0, 5, 0, 0, bad, &e),
      TPX_OK);
  ck_assert(bad[0] == -1 && bad[1] == 0);
  /* NULL buffers with n > 0 */
  ck_assert_int_eq(tpx__ms_scale_f32(ms, NULL, 4, 2.0f, 0, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "kernel scale_f32"));
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx__ms_norm_acc(ms, &acc, NULL, 4, 0, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "buffer g"));
  /* dtypes a kernel does not take */
  tpx_error_clear(&e);
  ck_assert_int_eq(
      tpx__ms_convert(ms, f, TPX_DTYPE_F64, f, TPX_DTYPE_F32, 2, &e),
      TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "f64"));
  tpx_error_clear(&e);
  ck_assert_int_eq(
      tpx__ms_index_check(ms, f, TPX_DTYPE_F32, 2, 5, 0, 0, bad, &e),
      TPX_INVALID_ARGUMENT);
  tpx__ms_loss l = {f, TPX_DTYPE_I8, ids, TPX_DTYPE_I64, 1, 4, 0, -100};
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx__ms_loss_row_max(ms, f, &l, &e), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "loss_row_max"));
  /* a kernel the space was built without: unsupported, named */
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx__ms_scale_f32(&no_kernels, f, 4, 2.0f, 0, &e),
                   TPX_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(e.message, "scale_f32"));
  ck_assert_ptr_nonnull(strstr(e.message, "host memory space"));
  /* convert of equal dtypes is a copy, kernels or not */
  float g[4] = {0};
  ck_assert_int_eq(
      tpx__ms_convert(&no_kernels, g, TPX_DTYPE_F32, f, TPX_DTYPE_F32, 4, &e),
      TPX_OK);
  ck_assert_int_eq(memcmp(f, g, sizeof f), 0);
}
END_TEST

static int under_asan(void) {
#if defined(__SANITIZE_ADDRESS__)
  return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return 1;
#else
  return 0;
#endif
#else
  return 0;
#endif
}

static Suite *suite(void) {
  Suite *s = suite_create("memspace");
  TCase *tc = tcase_create("ops");
  tcase_add_test(tc, test_alloc_tagged);
  tcase_add_test(tc, test_sim_catches_host_read);
  tcase_add_test(tc, test_sim_catches_host_write);
  if (!under_asan())
    tcase_add_test_raise_signal(tc, test_sim_segv, SIGSEGV);
  tcase_add_loop_test(tc, test_copy2d, 0,
                      (int)(sizeof c2d_cases / sizeof c2d_cases[0]));
  tcase_add_test(tc, test_copy_memset_overlap);
  tcase_add_test(tc, test_convert);
  tcase_add_test(tc, test_half_bits);
  tcase_add_test(tc, test_add_scale);
  tcase_add_test(tc, test_norm_acc);
  tcase_add_test(tc, test_adamw);
  tcase_add_test(tc, test_index_check);
  tcase_add_test(tc, test_embedding);
  tcase_add_test(tc, test_wrappers_check);
  tcase_add_test(tc, test_norm_tree_order);
  tcase_add_loop_test(tc, test_loss_rows, 0,
                      (int)(sizeof loss_lens / sizeof loss_lens[0]));
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
