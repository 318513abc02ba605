/* gpu_ops.c — tpx-gpu-check's "ops" and "big" groups: every memory-space
 * op and kernel on the cuda space against the host space, bit for bit, on
 * random data with NaN / inf / ties and every f16 / bf16 pattern; "big"
 * repeats the streaming kernels at n > 2^31 where the GPU's memory allows.
 * Both spaces run the same code: buffers are made and read back through
 * the space's own alloc / copy, so only the kernels differ. The one
 * documented exception (device/kernels.h): the loss's log-probs (CUDA's
 * log(): within 1e-12 relative). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/device/norm_tree_ref.h"
#include "device/elem.h"
#include "gpu_check.h"

/* A buffer of ms holding `bytes` from host h (zeroed when h is NULL). */
static void *up(const tpx__memspace *ms, const void *h, size_t bytes) {
  void *p = NULL;
  if (tpx__ms_alloc(ms, bytes, 1, &p, NULL) != TPX_OK)
    return NULL;
  if (h && tpx__ms_copy(ms, p, h, bytes, TPX__H2D, NULL) != TPX_OK) {
    tpx__ms_free(ms, p);
    return NULL;
  }
  return p;
}

/* Copy d back into host h and free d. */
static int down(const tpx__memspace *ms, void *h, void *d, size_t bytes) {
  int ok = d && tpx__ms_copy(ms, h, d, bytes, TPX__D2H, NULL) == TPX_OK;
  tpx__ms_free(ms, d);
  return ok;
}

static uint64_t rng = 88172645463325252ULL;
static uint32_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

/* Random f32 with the edge cases sprinkled in: NaN with payloads and both
 * signs, inf, -0, subnormals, f16 / bf16 ties and overflow. */
static float rf(size_t i) {
  static const uint32_t special[] = {
      0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u,
      0xff800000u, 0x80000000u, 0x00000001u, 0x807fffffu,
      0x3f808000u, 0x3f818000u, 0x477ff000u, 0x477fefffu,
      0x38800000u, 0x33800000u, 0x33000000u, 0x387fe000u};
  uint32_t u;
  if (i % 97 < sizeof special / sizeof special[0])
    u = special[i % 97];
  else
    u = (rnd() & 0x8000ffffu) | ((100u + rnd() % 60u) << 23);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* n elements of dtype dt as bytes: 16-bit types walk every pattern. */
static void *rdata(tpx_dtype dt, size_t n) {
  size_t es = tpx_dtype_size(dt);
  unsigned char *b = malloc(n * es > 0 ? n * es : 1);
  for (size_t i = 0; b && i < n; i++) {
    if (es == 2) {
      uint16_t h = (uint16_t)i;
      memcpy(b + 2 * i, &h, 2);
    } else {
      float f = rf(i);
      memcpy(b + 4 * i, &f, 4);
    }
  }
  return b;
}

static const tpx__memspace *host(void) { return &tpx__ms_host; }

static const tpx_dtype fdts[3] = {TPX_DTYPE_F32, TPX_DTYPE_BF16, TPX_DTYPE_F16};

/* Every pair of f32 / bf16 / f16 (big: f32 <-> bf16 only). */
static void ops_convert(gc_group *g, const tpx__memspace *cu, size_t n,
                        int big) {
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      if (big && (a == 2 || b == 2))
        continue;
      size_t ib = n * tpx_dtype_size(fdts[a]), ob = n * tpx_dtype_size(fdts[b]);
      void *in = rdata(fdts[a], n);
      unsigned char *out[2] = {malloc(ob), malloc(ob)};
      for (int k = 0; k < 2; k++) {
        const tpx__memspace *ms = k ? cu : host();
        void *di = up(ms, in, ib), *dout = up(ms, NULL, ob);
        int ok =
            di && dout &&
            tpx__ms_convert(ms, dout, fdts[b], di, fdts[a], n, NULL) == TPX_OK;
        ok = down(ms, out[k], dout, ob) && ok;
        tpx__ms_free(ms, di);
        if (!ok)
          memset(out[k], k ? 0xa5 : 0x5a, ob);
      }
      gc_check(g, memcmp(out[0], out[1], ob) == 0, "convert %s -> %s n=%zu",
               tpx_dtype_short_name(fdts[a]), tpx_dtype_short_name(fdts[b]), n);
      free(in), free(out[0]), free(out[1]);
    }
}

static void ops_add_scale(gc_group *g, const tpx__memspace *cu, size_t n) {
  for (int a = 0; a < 3; a++) {
    void *src = rdata(fdts[a], n);
    float *dst0 = rdata(TPX_DTYPE_F32, n);
    size_t sb = n * tpx_dtype_size(fdts[a]);
    float *out[2] = {malloc(n * 4), malloc(n * 4)};
    for (int k = 0; k < 2; k++) {
      const tpx__memspace *ms = k ? cu : host();
      float *d = up(ms, dst0, n * 4);
      void *s = up(ms, src, sb);
      int ok = d && s &&
               tpx__ms_add_f32(ms, d, s, fdts[a], n, 3.0f, NULL) == TPX_OK &&
               tpx__ms_add_f32(ms, d, s, fdts[a], n, 1.0f, NULL) == TPX_OK &&
               tpx__ms_scale_f32(ms, d, n, 0.75f, 0, NULL) == TPX_OK &&
               tpx__ms_scale_f32(ms, d, n, 3.0f, 1, NULL) == TPX_OK;
      ok = down(ms, out[k], d, n * 4) && ok;
      tpx__ms_free(ms, s);
      if (!ok)
        memset(out[k], k ? 0xa5 : 0x5a, n * 4);
    }
    gc_check(g, memcmp(out[0], out[1], n * 4) == 0,
             "add_f32 (%s) + scale_f32 n=%zu", tpx_dtype_short_name(fdts[a]),
             n);
    free(src), free(dst0), free(out[0]), free(out[1]);
  }
}

/* f32 data without NaN (the sum's value is compared). */
static float *finite_f32(size_t n) {
  float *g = malloc(n * 4);
  for (size_t i = 0; g && i < n; i++) {
    g[i] = rf(i);
    if (!isfinite(g[i]))
      g[i] = 1.5f;
  }
  return g;
}

static void ops_norm(gc_group *g, const tpx__memspace *cu, size_t n) {
  float *x = finite_f32(n);
  for (int inf = 0; inf < 2; inf++) {
    double acc[2] = {0.25, 0.25};
    for (int k = 0; k < 2; k++) {
      const tpx__memspace *ms = k ? cu : host();
      float *d = up(ms, x, n * 4);
      double *a = up(ms, &acc[k], sizeof(double));
      if (!d || !a || tpx__ms_norm_acc(ms, a, d, n, inf, NULL) != TPX_OK)
        acc[k] = NAN;
      if (!down(ms, &acc[k], a, sizeof(double)))
        acc[k] = NAN;
      tpx__ms_free(ms, d);
    }
    double ref = tpx__norm_tree_ref(0.25, x, n, inf);
    gc_check(g,
             memcmp(&acc[1], &acc[0], 8) == 0 && memcmp(&acc[1], &ref, 8) == 0,
             "norm_acc %s n=%zu: device %.17g, host %.17g, order %.17g",
             inf ? "inf" : "sum", n, acc[1], acc[0], ref);
  }
  free(x);
}

static void ops_adamw(gc_group *g, const tpx__memspace *cu, size_t n) {
  float *x[4] = {finite_f32(n), finite_f32(n), finite_f32(n), finite_f32(n)};
  for (size_t i = 0; i < n; i++) x[3][i] = fabsf(x[3][i]); /* v >= 0 */
  tpx__ms_adamw h = {0.999f, 0.1f, 0.999f, 0.001f, 0.03f, 1e-8f, -0.01f};
  float *out[2][3];
  for (int k = 0; k < 2; k++) {
    const tpx__memspace *ms = k ? cu : host();
    float *d[4];
    for (int j = 0; j < 4; j++) d[j] = up(ms, x[j], n * 4);
    int ok =
        d[0] && d[1] && d[2] && d[3] &&
        tpx__ms_adamw_update(ms, d[0], d[1], d[2], d[3], n, &h, NULL) == TPX_OK;
    int o = 0;
    for (int j = 0; j < 4; j++) {
      if (j == 1) {
        tpx__ms_free(ms, d[1]);
        continue;
      }
      out[k][o] = malloc(n * 4);
      if (!down(ms, out[k][o], d[j], n * 4) || !ok)
        memset(out[k][o], k ? 0xa5 : 0x5a, n * 4);
      o++;
    }
  }
  int same = 1;
  for (int o = 0; o < 3; o++) {
    same = same && memcmp(out[0][o], out[1][o], n * 4) == 0;
    free(out[0][o]), free(out[1][o]);
  }
  gc_check(g, same, "adamw (p, m, v) n=%zu", n);
  for (int j = 0; j < 4; j++) free(x[j]);
}

/* ids valid, with ignored ones, with bad ones late (big: i32, bad only). */
static void ops_index(gc_group *g, const tpx__memspace *cu, size_t n, int big) {
  for (int wide = 0; wide < (big ? 1 : 2); wide++)
    for (int c = big ? 2 : 0; c < 3; c++) {
      tpx_dtype dt = wide ? TPX_DTYPE_I64 : TPX_DTYPE_I32;
      size_t es = wide ? 8 : 4;
      unsigned char *ids = malloc(n * es);
      for (size_t i = 0; i < n; i++) {
        int64_t v = (int64_t)(rnd() % 1000);
        if (c == 1 && i % 7 == 3)
          v = -100; /* ignored */
        if (c == 2 && (i == n - 1 || i == n / 2 + 1))
          v = 1000 + (int64_t)i;
        if (wide)
          memcpy(ids + 8 * i, &v, 8);
        else {
          int32_t w = (int32_t)v;
          memcpy(ids + 4 * i, &w, 4);
        }
      }
      int64_t bad[2][2];
      for (int k = 0; k < 2; k++) {
        const tpx__memspace *ms = k ? cu : host();
        void *d = up(ms, ids, n * es);
        if (!d || tpx__ms_index_check(ms, d, dt, n, 1000, c == 1, -100, bad[k],
                                      NULL) != TPX_OK)
          bad[k][0] = -7, bad[k][1] = k;
        tpx__ms_free(ms, d);
      }
      gc_check(g, bad[0][0] == bad[1][0] && bad[0][1] == bad[1][1],
               "index_check %s case %d n=%zu: device (%lld, %lld) host "
               "(%lld, %lld)",
               tpx_dtype_short_name(dt), c, n, (long long)bad[1][0],
               (long long)bad[1][1], (long long)bad[0][0],
               (long long)bad[0][1]);
      free(ids);
    }
}

static void ops_embedding(gc_group *g, const tpx__memspace *cu) {
  enum { R = 37, H = 19, N = 300 };
  for (int dt = 0; dt < 2; dt++)
    for (int masked = 0; masked < 2; masked++) {
      tpx_dtype t = dt ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
      size_t es = tpx_dtype_size(t);
      unsigned char *w = rdata(t, (size_t)R * H), *gr = rdata(t, (size_t)N * H);
      for (size_t i = 0; !dt && i < (size_t)R * H; i++) /* finite weights */
        if (!isfinite(((float *)w)[i]))
          ((float *)w)[i] = 0.5f;
      int64_t ids[N];
      for (int i = 0; i < N; i++) /* masked: some ids on other ranks */
        ids[i] = (int64_t)(rnd() % (unsigned)(masked ? R + 8 : R));
      tpx__ms_rows rows = {masked ? 5 : 0, R, masked};
      unsigned char *out[2], *wg[2];
      for (int k = 0; k < 2; k++) {
        const tpx__memspace *ms = k ? cu : host();
        out[k] = malloc((size_t)N * H * es);
        wg[k] = malloc((size_t)R * H * es);
        void *dw = up(ms, w, (size_t)R * H * es), *di = up(ms, ids, sizeof ids);
        void *dg = up(ms, gr, (size_t)N * H * es);
        void *dout = up(ms, NULL, (size_t)N * H * es);
        void *dwg = up(ms, w, (size_t)R * H * es);
        int ok =
            tpx__ms_embed_lookup(ms, dout, dw, H * es, di, TPX_DTYPE_I64, N,
                                 &rows, NULL) == TPX_OK &&
            tpx__ms_embed_scatter_add(ms, dwg, t, dg, t, H, di, TPX_DTYPE_I64,
                                      N, &rows, NULL) == TPX_OK;
        ok = down(ms, out[k], dout, (size_t)N * H * es) && ok;
        ok = down(ms, wg[k], dwg, (size_t)R * H * es) && ok;
        tpx__ms_free(ms, dw), tpx__ms_free(ms, di), tpx__ms_free(ms, dg);
        if (!ok)
          memset(wg[k], k ? 0xa5 : 0x5a, (size_t)R * H * es);
      }
      gc_check(g,
               memcmp(out[0], out[1], (size_t)N * H * es) == 0 &&
                   memcmp(wg[0], wg[1], (size_t)R * H * es) == 0,
               "embed_lookup + embed_scatter_add %s masked=%d",
               tpx_dtype_short_name(t), masked);
      for (int k = 0; k < 2; k++) free(out[k]), free(wg[k]);
      free(w), free(gr);
    }
}

/* The loss pieces: row_max, row_sums and the gradient bit for bit;
 * log-probs and the loss sum within 1e-12 relative (CUDA's log() is within
 * an ulp of libm's). The gradient and log-probs are fed the host's row
 * values on both sides. */
static void ops_loss(gc_group *g, const tpx__memspace *cu) {
  enum { ROWS = 67, LEN = 5003 };
  for (int dt = 0; dt < 2; dt++) {
    tpx_dtype t = dt ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
    size_t es = tpx_dtype_size(t), zb = (size_t)ROWS * LEN * es;
    float *z32 = finite_f32((size_t)ROWS * LEN);
    void *z = malloc(zb);
    tpx__ms_convert(host(), z, t, z32, TPX_DTYPE_F32, (size_t)ROWS * LEN, NULL);
    int64_t tg[ROWS];
    for (int i = 0; i < ROWS; i++)
      tg[i] = i % 5 == 0 ? -100 : 2000 + (int64_t)(rnd() % LEN);
    float mx[2][ROWS], lp[2][ROWS];
    double se[2][2 * ROWS], sc[2][2];
    unsigned char *grad[2];
    for (int k = 0; k < 2; k++) {
      const tpx__memspace *ms = k ? cu : host();
      tpx__ms_loss l = {up(ms, z, zb), t,    up(ms, tg, sizeof tg),
                        TPX_DTYPE_I64, ROWS, LEN,
                        2000,          -100};
      float *dmx = up(ms, NULL, sizeof mx[0]),
            *dlp = up(ms, NULL, sizeof lp[0]);
      double *dse = up(ms, NULL, sizeof se[0]), *dsc = up(ms, NULL, 16);
      void *dgr = up(ms, NULL, zb);
      int ok = tpx__ms_loss_row_max(ms, dmx, &l, NULL) == TPX_OK &&
               tpx__ms_loss_row_sums(ms, dse, dmx, &l, 1, NULL) == TPX_OK;
      ok = ok &&
           tpx__ms_copy(ms, se[k], dse, sizeof se[0], TPX__D2H, NULL) == TPX_OK;
      /* the gradient and log-probs from the host's row values */
      if (k)
        ok = ok && tpx__ms_copy(ms, dse, se[0], sizeof se[0], TPX__H2D, NULL) ==
                       TPX_OK;
      ok = ok &&
           tpx__ms_loss_grad(ms, dgr, t, dmx, dse, NULL, 0.5, 1.0, &l, NULL) ==
               TPX_OK &&
           tpx__ms_loss_logprobs(ms, dlp, dsc, dmx, dse, &l, NULL) == TPX_OK;
      grad[k] = malloc(zb);
      ok = down(ms, mx[k], dmx, sizeof mx[0]) && ok;
      ok = down(ms, lp[k], dlp, sizeof lp[0]) && ok;
      ok = down(ms, sc[k], dsc, 16) && ok;
      ok = down(ms, grad[k], dgr, zb) && ok;
      tpx__ms_free(ms, dse), tpx__ms_free(ms, (void *)l.logits);
      tpx__ms_free(ms, (void *)l.targets);
      if (!ok)
        memset(grad[k], k ? 0xa5 : 0x5a, zb), se[k][0] = NAN;
    }
    int near = 1;
    for (int i = 0; i < ROWS; i++)
      near = near && fabsf(lp[1][i] - lp[0][i]) <= 1e-6f * fabsf(lp[0][i]);
    near = near && fabs(sc[1][0] - sc[0][0]) <= 1e-12 * fabs(sc[0][0]) &&
           sc[1][1] == sc[0][1];
    gc_check(g, memcmp(mx[0], mx[1], sizeof mx[0]) == 0, "loss_row_max %s",
             tpx_dtype_short_name(t));
    gc_check(g, memcmp(se[0], se[1], sizeof se[0]) == 0, "loss_row_sums %s",
             tpx_dtype_short_name(t));
    gc_check(g, near, "loss_logprobs %s (within 1e-12 relative)",
             tpx_dtype_short_name(t));
    gc_check(g, memcmp(grad[0], grad[1], zb) == 0, "loss_grad %s",
             tpx_dtype_short_name(t));
    free(grad[0]), free(grad[1]), free(z), free(z32);
  }
}

static const tpx_dtype rdts[] = {TPX_DTYPE_F64,  TPX_DTYPE_F32, TPX_DTYPE_F16,
                                 TPX_DTYPE_BF16, TPX_DTYPE_I64, TPX_DTYPE_I32,
                                 TPX_DTYPE_I16,  TPX_DTYPE_I8,  TPX_DTYPE_U64,
                                 TPX_DTYPE_U32,  TPX_DTYPE_U16, TPX_DTYPE_U8};

/* reduce against tpx__reduce_into: every dtype and op, 1..4 sources into
 * 1..3 destinations, the first destination in place over source 0. */
static void ops_reduce(gc_group *g, const tpx__memspace *cu, size_t n) {
  for (size_t d = 0; d < sizeof rdts / sizeof rdts[0]; d++)
    for (int op = TPX_REDUCE_SUM; op <= TPX_REDUCE_MIN; op++) {
      int ns = 1 + (int)(d + (size_t)op) % 4, nd = 1 + op % 3;
      size_t bytes = n * tpx_dtype_size(rdts[d]);
      unsigned char *src[4], *out[2][3];
      for (int s = 0; s < ns; s++) {
        src[s] = malloc(bytes);
        for (size_t i = 0; i < bytes; i++) src[s][i] = (unsigned char)rnd();
      }
      for (int k = 0; k < 2; k++) {
        const tpx__memspace *ms = k ? cu : host();
        const void *ds[4];
        void *dd[3];
        for (int s = 0; s < ns; s++) ds[s] = up(ms, src[s], bytes);
        dd[0] = (void *)(uintptr_t)ds[0];
        for (int j = 1; j < nd; j++) dd[j] = up(ms, NULL, bytes);
        int ok = tpx__ms_reduce(ms, dd, nd, ds, ns, n, rdts[d],
                                (tpx_reduce_op)op, ns, NULL) == TPX_OK;
        for (int j = 0; j < nd; j++) {
          out[k][j] = malloc(bytes);
          if (!down(ms, out[k][j], dd[j], bytes) || !ok)
            memset(out[k][j], k ? 0xa5 : 0x5a, bytes);
        }
        for (int s = 1; s < ns; s++) tpx__ms_free(ms, (void *)ds[s]);
      }
      int same = 1;
      for (int j = 0; j < nd; j++) {
        same = same && memcmp(out[0][j], out[1][j], bytes) == 0;
        free(out[0][j]), free(out[1][j]);
      }
      gc_check(g, same, "reduce %s %s %d sources -> %d destinations n=%zu",
               tpx_dtype_short_name(rdts[d]),
               tpx_reduce_op_name((tpx_reduce_op)op), ns, nd, n);
      for (int s = 0; s < ns; s++) free(src[s]);
    }
}

/* memset, copies (overlapping D2D both ways), 2-D copies with pitches. */
static void ops_copies(gc_group *g, const tpx__memspace *cu) {
  enum { B = 1 << 20 };
  unsigned char *src = malloc(B), *out[2] = {malloc(B), malloc(B)};
  for (size_t i = 0; i < B; i++) src[i] = (unsigned char)rnd();
  for (int k = 0; k < 2; k++) {
    const tpx__memspace *ms = k ? cu : host();
    unsigned char *d = up(ms, src, B);
    int ok =
        d && tpx__ms_copy(ms, d + 1000, d, B / 2, TPX__D2D, NULL) == TPX_OK &&
        tpx__ms_copy(ms, d + 7, d + 4000, B / 3, TPX__D2D, NULL) == TPX_OK &&
        tpx__ms_memset(ms, d + 333, 0xab, 4097, NULL) == TPX_OK &&
        tpx__ms_copy2d(ms, d + B / 2, 301, d + 11, 257, 250, 900, TPX__D2D,
                       NULL) == TPX_OK &&
        tpx__ms_copy2d(ms, d + 5, 64, src + 100, 77, 60, 30, TPX__H2D, NULL) ==
            TPX_OK;
    if (!down(ms, out[k], d, B) || !ok)
      memset(out[k], k ? 0xa5 : 0x5a, B);
  }
  gc_check(g, memcmp(out[0], out[1], B) == 0,
           "memset, copy (overlapping), copy2d (D2D, H2D)");
  free(src), free(out[0]), free(out[1]);
}

void gc_ops_run(gc_group *g, const tpx__memspace *cu) {
  static const size_t ns[] = {1, 1000, 65536, 4096 * 300 + 17};
  ops_copies(g, cu);
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    ops_convert(g, cu, ns[i] < 65536 ? 65536 : ns[i], 0);
    ops_add_scale(g, cu, ns[i]);
    ops_norm(g, cu, ns[i]);
    ops_adamw(g, cu, ns[i]);
    ops_index(g, cu, ns[i] < 8 ? 8 : ns[i], 0);
    ops_reduce(g, cu, ns[i]);
  }
  ops_embedding(g, cu);
  ops_loss(g, cu);
}

/* n > 2^31 elements: convert, add, norm and the index check (the kernels
 * whose index arithmetic could wrap), when free memory allows. */
void gc_big_run(gc_group *g, const tpx__memspace *cu, size_t free_bytes) {
  size_t n = ((size_t)1 << 31) + 4099;
  if (free_bytes < n * 14 + ((size_t)1 << 30)) {
    gc_note(g,
            "skipped: n = 2^31 + 4099 needs %.1f GiB free, the GPU has "
            "%.1f GiB",
            (double)(n * 14) / (1 << 30), (double)free_bytes / (1 << 30));
    return;
  }
  ops_convert(g, cu, n, 1);
  ops_add_scale(g, cu, n);
  ops_norm(g, cu, n);
  ops_index(g, cu, n, 1);
}
