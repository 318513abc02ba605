/* comm_cases.c — collective and redistribute cases shared by the local and
 * mpi test programs (see comm_cases.h). References are computed serially on
 * every rank from the same deterministic inputs, in double precision. */
#include "comm_cases.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/layout.h"

/* ---- failure recording: first one wins, ranks keep going --------------- */

static tpx_status failed(tpx_error *err, const char *fmt, ...) {
  if (err && err->status == TPX_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = TPX_VALIDATION;
  }
  return TPX_VALIDATION;
}

static tpx_status result(tpx_error *err) { return err ? err->status : TPX_OK; }

/* ---- values ------------------------------------------------------------- */

static const tpx_dtype reduce_types[] = {
    TPX_DTYPE_F32, TPX_DTYPE_F16, TPX_DTYPE_BF16, TPX_DTYPE_F64,
    TPX_DTYPE_I64, TPX_DTYPE_I32, TPX_DTYPE_I16,  TPX_DTYPE_I8,
    TPX_DTYPE_U64, TPX_DTYPE_U32, TPX_DTYPE_U16,  TPX_DTYPE_U8};
#define N_REDUCE_TYPES (sizeof reduce_types / sizeof reduce_types[0])

static const tpx_dtype move_types[] = {
    TPX_DTYPE_F32, TPX_DTYPE_F16,  TPX_DTYPE_BF16,
    TPX_DTYPE_F64, TPX_DTYPE_I64,  TPX_DTYPE_I8,
    TPX_DTYPE_U16, TPX_DTYPE_BOOL, TPX_DTYPE_F8_E4M3};
#define N_MOVE_TYPES (sizeof move_types / sizeof move_types[0])

static int is_unsigned(tpx_dtype t) {
  return t == TPX_DTYPE_U64 || t == TPX_DTYPE_U32 || t == TPX_DTYPE_U16 ||
         t == TPX_DTYPE_U8;
}
static int is_float(tpx_dtype t) {
  return t == TPX_DTYPE_F32 || t == TPX_DTYPE_F16 || t == TPX_DTYPE_BF16 ||
         t == TPX_DTYPE_F64;
}

/* Small integers, exact in every type: [-5, 5] (or [0, 10] unsigned). */
static double val(tpx_dtype t, int rank, size_t i, int salt) {
  int v = (int)((rank * 7 + (int)(i % 1009) * 3 + salt) % 11);
  return is_unsigned(t) ? v : v - 5;
}

static uint16_t enc_f16(double v) { /* exact for representable normals */
  if (v == 0)
    return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  double m = frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1) */
  uint16_t exp = (uint16_t)(e - 1 + 15);
  uint16_t man = (uint16_t)lround((m * 2 - 1) * 1024);
  return (uint16_t)(sign | (exp << 10) | man);
}
static double dec_f16(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}
static uint16_t enc_bf16(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* exact for the small integers used */
}
static double dec_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void put(tpx_dtype t, void *buf, size_t i, double v) {
  switch (t) {
  case TPX_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
  case TPX_DTYPE_F64: ((double *)buf)[i] = v; break;
  case TPX_DTYPE_F16: ((uint16_t *)buf)[i] = enc_f16(v); break;
  case TPX_DTYPE_BF16: ((uint16_t *)buf)[i] = enc_bf16(v); break;
  case TPX_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case TPX_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case TPX_DTYPE_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
  case TPX_DTYPE_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
  case TPX_DTYPE_U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
  case TPX_DTYPE_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
  case TPX_DTYPE_U16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
  case TPX_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  default: break;
  }
}

static double get(tpx_dtype t, const void *buf, size_t i) {
  switch (t) {
  case TPX_DTYPE_F32: return ((const float *)buf)[i];
  case TPX_DTYPE_F64: return ((const double *)buf)[i];
  case TPX_DTYPE_F16: return dec_f16(((const uint16_t *)buf)[i]);
  case TPX_DTYPE_BF16: return dec_bf16(((const uint16_t *)buf)[i]);
  case TPX_DTYPE_I64: return (double)((const int64_t *)buf)[i];
  case TPX_DTYPE_I32: return ((const int32_t *)buf)[i];
  case TPX_DTYPE_I16: return ((const int16_t *)buf)[i];
  case TPX_DTYPE_I8: return ((const int8_t *)buf)[i];
  case TPX_DTYPE_U64: return (double)((const uint64_t *)buf)[i];
  case TPX_DTYPE_U32: return ((const uint32_t *)buf)[i];
  case TPX_DTYPE_U16: return ((const uint16_t *)buf)[i];
  case TPX_DTYPE_U8: return ((const uint8_t *)buf)[i];
  default: return NAN;
  }
}

/* Serial reference: op over ranks 0..n-1 of val(t, r, i, salt). */
static double reference(tpx_dtype t, tpx_reduce_op op, int n, size_t i,
                        int salt) {
  double acc = val(t, 0, i, salt);
  for (int r = 1; r < n; r++) {
    double v = val(t, r, i, salt);
    if (op == TPX_REDUCE_MAX)
      acc = v > acc ? v : acc;
    else if (op == TPX_REDUCE_MIN)
      acc = v < acc ? v : acc;
    else
      acc += v;
  }
  if (op == TPX_REDUCE_AVG)
    acc = is_float(t) ? acc / n : (double)((long long)acc / n);
  return acc;
}

static int close_enough(tpx_dtype t, double got, double want) {
  double tol = t == TPX_DTYPE_F16    ? 1.0 / 1024
               : t == TPX_DTYPE_BF16 ? 1.0 / 128
               : t == TPX_DTYPE_F32  ? 1e-6
                                     : 1e-12;
  if (!is_float(t))
    return got == want;
  return fabs(got - want) <= tol * fabs(want) + 1e-30;
}

/* Byte pattern of element e of rank r's buffer (for data movement). */
static unsigned char pat(int r, size_t e, size_t b, int salt) {
  return (unsigned char)(r * 31 + (int)(e % 4093) * 7 + (int)b * 3 + salt);
}
static void fill_pat(unsigned char *buf, int r, size_t first, size_t n,
                     size_t es, int salt) {
  for (size_t e = 0; e < n; e++)
    for (size_t b = 0; b < es; b++)
      buf[e * es + b] = pat(r, first + e, b, salt);
}
/* Index of the first element of buf (n elements) that differs from rank r's
 * pattern starting at element `first`, or n. */
static size_t diff_pat(const unsigned char *buf, int r, size_t first, size_t n,
                       size_t es, int salt) {
  for (size_t e = 0; e < n; e++)
    for (size_t b = 0; b < es; b++)
      if (buf[e * es + b] != pat(r, first + e, b, salt))
        return e;
  return n;
}

static const size_t counts[] = {0, 1, 7, 33, 1000, 4099};
#define N_COUNTS (sizeof counts / sizeof counts[0])

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

/* ---- collective cases --------------------------------------------------- */

/* Compare `out[0..cnt)` with the serial reduction of elements
 * first..first+cnt of every rank's input; the first mismatch fails. */
static void check_reduced(tpx_error *err, const char *what, tpx_dtype t,
                          tpx_reduce_op op, size_t cnt, int inplace, int n,
                          int me, const unsigned char *out, size_t first,
                          int salt) {
  for (size_t i = 0; i < cnt; i++) {
    double want = reference(t, op, n, first + i, salt);
    double got = get(t, out, i);
    if (!close_enough(t, got, want)) {
      failed(err,
             "%s %s %s count=%zu %s ranks=%d rank %d: element %zu is %g, "
             "want %g",
             what, tpx_dtype_short_name(t), tpx_reduce_op_name(op), cnt,
             inplace ? "in-place" : "out-of-place", n, me, i, got, want);
      return;
    }
  }
}

tpx_status case_all_reduce(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  int n = tpx_comm_size(world), me = tpx_comm_rank(world);
  for (size_t ti = 0; ti < N_REDUCE_TYPES; ti++)
    for (int op = 0; op < 4; op++)
      for (size_t ci = 0; ci < N_COUNTS; ci++)
        for (int inplace = 0; inplace < 2; inplace++) {
          tpx_dtype t = reduce_types[ti];
          size_t cnt = counts[ci], es = tpx_dtype_size(t);
          int salt = (int)(ti + ci + (size_t)op);
          unsigned char *send = xmalloc(cnt * es), *recv = xmalloc(cnt * es);
          for (size_t i = 0; i < cnt; i++) put(t, send, i, val(t, me, i, salt));
          tpx_error e = {0};
          tpx_status st =
              tpx_comm_all_reduce(world, send, inplace ? send : recv, cnt, t,
                                  (tpx_reduce_op)op, &e);
          const unsigned char *out = inplace ? send : recv;
          if (st != TPX_OK)
            failed(err, "all_reduce %s %s n=%zu: %s", tpx_dtype_short_name(t),
                   tpx_reduce_op_name((tpx_reduce_op)op), cnt, e.message);
          if (st == TPX_OK)
            check_reduced(err, "all_reduce", t, (tpx_reduce_op)op, cnt, inplace,
                          n, me, out, 0, salt);
          free(send);
          free(recv);
        }
  return result(err);
}

tpx_status case_reduce_scatter(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  int n = tpx_comm_size(world), me = tpx_comm_rank(world);
  for (size_t ti = 0; ti < N_REDUCE_TYPES; ti++)
    for (int op = 0; op < 4; op++)
      for (size_t ci = 0; ci < 5; ci++)
        for (int inplace = 0; inplace < 2; inplace++) {
          tpx_dtype t = reduce_types[ti];
          size_t cnt = counts[ci], es = tpx_dtype_size(t),
                 total = cnt * (size_t)n;
          int salt = (int)(ti * 3 + ci + (size_t)op);
          unsigned char *send = xmalloc(total * es), *recv = xmalloc(cnt * es);
          for (size_t i = 0; i < total; i++)
            put(t, send, i, val(t, me, i, salt));
          unsigned char *out = inplace ? send + (size_t)me * cnt * es : recv;
          tpx_error e = {0};
          tpx_status st = tpx_comm_reduce_scatter(world, send, out, cnt, t,
                                                  (tpx_reduce_op)op, &e);
          if (st != TPX_OK)
            failed(err, "reduce_scatter %s: %s", tpx_dtype_short_name(t),
                   e.message);
          if (st == TPX_OK)
            check_reduced(err, "reduce_scatter", t, (tpx_reduce_op)op, cnt,
                          inplace, n, me, out, (size_t)me * cnt, salt);
          free(send);
          free(recv);
        }
  return result(err);
}

tpx_status case_all_gather(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  int n = tpx_comm_size(world), me = tpx_comm_rank(world);
  for (size_t ti = 0; ti < N_MOVE_TYPES; ti++)
    for (size_t ci = 0; ci < N_COUNTS; ci++)
      for (int inplace = 0; inplace < 2; inplace++) {
        tpx_dtype t = move_types[ti];
        size_t cnt = counts[ci], es = tpx_dtype_size(t);
        int salt = (int)(ti + ci);
        unsigned char *send = xmalloc(cnt * es);
        unsigned char *recv = xmalloc(cnt * es * (size_t)n);
        memset(recv, 0xee, cnt * es * (size_t)n);
        unsigned char *s = inplace ? recv + (size_t)me * cnt * es : send;
        fill_pat(s, me, 0, cnt, es, salt);
        tpx_error e = {0};
        tpx_status st = tpx_comm_all_gather(world, s, recv, cnt, t, &e);
        if (st != TPX_OK)
          failed(err, "all_gather %s: %s", tpx_dtype_short_name(t), e.message);
        for (int j = 0; st == TPX_OK && j < n; j++) {
          size_t bad =
              diff_pat(recv + (size_t)j * cnt * es, j, 0, cnt, es, salt);
          if (bad < cnt) {
            failed(err,
                   "all_gather %s count=%zu %s ranks=%d rank %d: block %d "
                   "element %zu wrong",
                   tpx_dtype_short_name(t), cnt,
                   inplace ? "in-place" : "out-of-place", n, me, j, bad);
            break;
          }
        }
        free(send);
        free(recv);
      }
  return result(err);
}

tpx_status case_broadcast(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  int n = tpx_comm_size(world), me = tpx_comm_rank(world);
  for (size_t ti = 0; ti < N_MOVE_TYPES; ti += 2)
    for (int root = 0; root < n; root++)
      for (size_t ci = 0; ci < N_COUNTS; ci += 2)
        for (int inplace = 0; inplace < 2; inplace++) {
          tpx_dtype t = move_types[ti];
          size_t cnt = counts[ci], es = tpx_dtype_size(t);
          int salt = root + (int)ci;
          unsigned char *send = xmalloc(cnt * es), *recv = xmalloc(cnt * es);
          memset(recv, 0xee, cnt * es);
          if (me == root)
            fill_pat(inplace ? recv : send, root, 0, cnt, es, salt);
          tpx_error e = {0};
          tpx_status st = tpx_comm_broadcast(
              world, me == root ? (inplace ? recv : send) : NULL, recv, cnt, t,
              root, &e);
          if (st != TPX_OK)
            failed(err, "broadcast: %s", e.message);
          else if (diff_pat(recv, root, 0, cnt, es, salt) < cnt)
            failed(err,
                   "broadcast %s count=%zu root=%d ranks=%d: rank %d "
                   "got wrong data",
                   tpx_dtype_short_name(t), cnt, root, n, me);
          free(send);
          free(recv);
        }
  return result(err);
}

tpx_status case_all_to_all(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  int n = tpx_comm_size(world), me = tpx_comm_rank(world);
  for (size_t ti = 0; ti < N_MOVE_TYPES; ti++)
    for (size_t ci = 0; ci < N_COUNTS; ci++)
      for (int inplace = 0; inplace < 2; inplace++) {
        tpx_dtype t = move_types[ti];
        size_t cnt = counts[ci], es = tpx_dtype_size(t);
        size_t total = cnt * (size_t)n;
        int salt = (int)(ti * 5 + ci);
        unsigned char *send = xmalloc(total * es), *recv = xmalloc(total * es);
        fill_pat(send, me, 0, total, es, salt);
        tpx_error e = {0};
        tpx_status st =
            tpx_comm_all_to_all(world, send, inplace ? send : recv, cnt, t, &e);
        const unsigned char *out = inplace ? send : recv;
        if (st != TPX_OK)
          failed(err, "all_to_all: %s", e.message);
        for (int j = 0; st == TPX_OK && j < n; j++)
          if (diff_pat(out + (size_t)j * cnt * es, j, (size_t)me * cnt, cnt, es,
                       salt) < cnt) {
            failed(err,
                   "all_to_all %s count=%zu %s ranks=%d rank %d: block "
                   "from rank %d wrong",
                   tpx_dtype_short_name(t), cnt,
                   inplace ? "in-place" : "out-of-place", n, me, j);
            break;
          }
        free(send);
        free(recv);
      }
  return result(err);
}

tpx_status case_chunked(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  int n = tpx_comm_size(world), me = tpx_comm_rank(world);
  size_t totals[] = {
      0, 1, (size_t)n - 1, (size_t)n + 1, 10, 2 * (size_t)n + 3, 1001};
  for (size_t k = 0; k < sizeof totals / sizeof totals[0]; k++) {
    size_t total = totals[k];
    int64_t off = 0, len = 0;
    tpx_error e = {0};
    if (tpx_layout_chunk((int64_t)total, n, me, &off, &len, &e) != TPX_OK) {
      failed(err, "layout_chunk: %s", e.message);
      continue;
    }
    /* all_gather_chunked: pieces of one global pattern */
    tpx_dtype t = k % 2 ? TPX_DTYPE_F32 : TPX_DTYPE_BF16;
    size_t es = tpx_dtype_size(t);
    unsigned char *piece = xmalloc((size_t)len * es);
    unsigned char *full = xmalloc(total * es);
    fill_pat(piece, 0, (size_t)off, (size_t)len, es, 1);
    tpx_status st =
        tpx_comm_all_gather_chunked(world, piece, full, total, t, &e);
    if (st != TPX_OK)
      failed(err, "all_gather_chunked total=%zu: %s", total, e.message);
    else if (diff_pat(full, 0, 0, total, es, 1) < total)
      failed(err, "all_gather_chunked total=%zu ranks=%d rank %d: wrong", total,
             n, me);
    /* reduce_scatter_chunked (sum and max) */
    for (int op = 0; op < 4; op += 2) {
      for (size_t i = 0; i < total; i++) put(t, full, i, val(t, me, i, 3));
      st = tpx_comm_reduce_scatter_chunked(world, full, piece, total, t,
                                           (tpx_reduce_op)op, &e);
      if (st != TPX_OK) {
        failed(err, "reduce_scatter_chunked total=%zu: %s", total, e.message);
        continue;
      }
      for (int64_t i = 0; i < len; i++) {
        double want = reference(t, (tpx_reduce_op)op, n, (size_t)(off + i), 3);
        if (!close_enough(t, get(t, piece, (size_t)i), want)) {
          failed(err,
                 "reduce_scatter_chunked total=%zu ranks=%d rank %d: "
                 "element %lld wrong",
                 total, n, me, (long long)i);
          break;
        }
      }
    }
    free(piece);
    free(full);
  }
  return result(err);
}

tpx_status case_barrier(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  for (int i = 0; i < 50; i++) {
    tpx_error e = {0};
    if (tpx_comm_barrier(world, &e) != TPX_OK)
      return failed(err, "barrier %d: %s", i, e.message);
  }
  return result(err);
}

/* Sub-groups of a 2-D mesh (a, b) with a * b = world size: each group's sum
 * of world ranks equals the sum of tpx_mesh_group_ranks. */
tpx_status case_split(tpx_comm *world, void *arg, tpx_error *err) {
  (void)arg;
  int n = tpx_comm_size(world), me = tpx_comm_rank(world);
  int b = 1;
  for (int d = 2; d <= n; d++)
    if (n % d == 0) {
      b = d;
      break;
    }
  const char *names[] = {"dp", "tp"};
  int64_t sizes[] = {n / b, b};
  tpx_mesh *mesh = NULL;
  tpx_mesh_comm *mc = NULL;
  tpx_error e = {0};
  if (tpx_mesh_create(names, sizes, 2, &mesh, &e) != TPX_OK)
    return failed(err, "mesh_create: %s", e.message);
  if (tpx_mesh_comm_create(world, mesh, &mc, &e) != TPX_OK) {
    tpx_mesh_destroy(mesh);
    return failed(err, "mesh_comm_create: %s", e.message);
  }
  for (int m = 0; m < 2; m++) {
    tpx_comm *sub = tpx_mesh_comm_dim(mc, m);
    int64_t group[8] = {0}, idx = -1, want = 0;
    tpx_mesh_group_ranks(mesh, names[m], me, group, &idx, &e);
    for (int j = 0; j < sizes[m]; j++) want += group[j];
    int64_t mine = me, got = 0;
    if (tpx_comm_size(sub) != sizes[m] || tpx_comm_rank(sub) != idx)
      failed(err, "split %s: size %d rank %d, want %lld / %lld", names[m],
             tpx_comm_size(sub), tpx_comm_rank(sub), (long long)sizes[m],
             (long long)idx);
    if (tpx_comm_all_reduce(sub, &mine, &got, 1, TPX_DTYPE_I64, TPX_REDUCE_SUM,
                            &e) != TPX_OK)
      failed(err, "all_reduce on %s: %s", names[m], e.message);
    else if (got != want)
      failed(err, "group %s of rank %d: sum of ranks %lld, want %lld", names[m],
             me, (long long)got, (long long)want);
  }
  if (tpx_mesh_comm_dim(mc, 2) != NULL || tpx_mesh_comm_world(mc) != world ||
      tpx_mesh_comm_mesh(mc) != mesh)
    failed(err, "mesh_comm getters");
  tpx_mesh_comm_destroy(mc);
  tpx_mesh_destroy(mesh);
  return result(err);
}

/* ---- redistribute ------------------------------------------------------- */

#define MAXK 2

static const tpx_placement *tuple_tables(int k, int full, int *count);

/* Global tensor value at linear index li: integers in [-11, 11]. */
static double gval(size_t li) { return (double)((int)((li * 7) % 23) - 11); }

static size_t linear(const int64_t *shape, int ndim, const int64_t *idx) {
  size_t li = 0;
  for (int i = 0; i < ndim; i++) li = li * (size_t)shape[i] + (size_t)idx[i];
  return li;
}

/* Fill `buf` holding box `s` with what this rank holds under placements pl:
 * the global value, turned into partial pieces on Partial mesh dims so that
 * reducing over them gives the global value back (see the comments). */
static void fill_src(const int64_t *shape, int ndim, const tpx_mesh *mesh,
                     const tpx_placement *pl, int64_t me, const tpx_slice *s,
                     tpx_dtype t, void *buf) {
  int k = tpx_mesh_ndim(mesh);
  int64_t coords[TPX_MESH_MAX_DIMS];
  tpx_mesh_coords(mesh, me, coords, NULL);
  int all_zero = 1;
  double shift = 0;
  int op = -1;
  for (int m = 0; m < k; m++) {
    if (pl[m].kind != TPX_PARTIAL)
      continue;
    int64_t j = coords[m], g = tpx_mesh_dim_size(mesh, m);
    op = (int)pl[m].op;
    if (j != 0)
      all_zero = 0;
    switch (pl[m].op) {
    case TPX_REDUCE_SUM: shift += j == 0 ? -(double)(g - 1) : 1; break;
    case TPX_REDUCE_AVG: shift += (double)(2 * j - (g - 1)); break;
    case TPX_REDUCE_MAX: shift -= j == 0 ? 0 : (double)(1 + j); break;
    case TPX_REDUCE_MIN: shift += j == 0 ? 0 : (double)(1 + j); break;
    }
  }
  size_t n = (size_t)tpx_slice_numel(s);
  int64_t idx[TPX_MAX_TENSOR_DIMS];
  for (size_t e = 0; e < n; e++) {
    size_t rem = e;
    for (int i = ndim - 1; i >= 0; i--) {
      idx[i] = s->offset[i] + (int64_t)(rem % (size_t)s->length[i]);
      rem /= (size_t)s->length[i];
    }
    double g = gval(linear(shape, ndim, idx));
    double v = op == TPX_REDUCE_SUM ? (all_zero ? g : 0) + shift : g + shift;
    put(t, buf, e, v);
  }
}

/* First element of `buf` (box s) that differs from the global tensor, or
 * -1. */
static long long check_box(const int64_t *shape, int ndim, const tpx_slice *s,
                           tpx_dtype t, const void *buf, double *got,
                           double *want) {
  size_t n = (size_t)tpx_slice_numel(s);
  int64_t idx[TPX_MAX_TENSOR_DIMS];
  for (size_t e = 0; e < n; e++) {
    size_t rem = e;
    for (int i = ndim - 1; i >= 0; i--) {
      idx[i] = s->offset[i] + (int64_t)(rem % (size_t)s->length[i]);
      rem /= (size_t)s->length[i];
    }
    *want = gval(linear(shape, ndim, idx));
    *got = get(t, buf, e);
    if (*got != *want)
      return (long long)e;
  }
  return -1;
}

static void fmt_tuple(const tpx_placement *pl, int k, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = 0;
  for (int m = 0; m < k && used < n; m++) {
    char one[48];
    tpx_placement_format(pl[m], one, sizeof one);
    used += (size_t)snprintf(buf + used, n - used, "%s%s", m ? "," : "(", one);
  }
  if (used < n)
    snprintf(buf + used, n - used, ")");
}

static int valid_for(const tpx_placement *pl, int k, int ndim) {
  for (int m = 0; m < k; m++)
    if (pl[m].kind == TPX_SHARD && (pl[m].dim >= ndim || pl[m].dim < -ndim))
      return 0;
  return 1;
}

static int has_partial(const tpx_placement *pl, int k) {
  for (int m = 0; m < k; m++)
    if (pl[m].kind == TPX_PARTIAL)
      return 1;
  return 0;
}

/* One src -> dst check on this rank; returns 0 on success. */
static int one_pair(tpx_mesh_comm *mc, const int64_t *shape, int ndim,
                    tpx_dtype t, const tpx_placement *src,
                    const tpx_placement *dst, tpx_error *err) {
  const tpx_mesh *mesh = tpx_mesh_comm_mesh(mc);
  int k = tpx_mesh_ndim(mesh);
  int64_t me = tpx_comm_rank(tpx_mesh_comm_world(mc));
  size_t es = tpx_dtype_size(t);
  tpx_slice s_in, s_out, s_full;
  tpx_error e = {0};
  char a[96], b[96];
  fmt_tuple(src, k, a, sizeof a);
  fmt_tuple(dst, k, b, sizeof b);
  tpx_placement rep[TPX_MESH_MAX_DIMS];
  for (int m = 0; m < k; m++) rep[m] = tpx_placement_replicate();
  if (tpx_layout_local_slice(shape, ndim, mesh, src, me, &s_in, &e) ||
      tpx_layout_local_slice(shape, ndim, mesh, dst, me, &s_out, &e) ||
      tpx_layout_local_slice(shape, ndim, mesh, rep, me, &s_full, &e)) {
    failed(err, "layout %s -> %s: %s", a, b, e.message);
    return 1;
  }
  void *in = xmalloc((size_t)tpx_slice_numel(&s_in) * es);
  void *out = xmalloc((size_t)tpx_slice_numel(&s_out) * es);
  void *full = xmalloc((size_t)tpx_slice_numel(&s_full) * es);
  fill_src(shape, ndim, mesh, src, me, &s_in, t, in);
  int bad = 0;
  tpx_status st = tpx_redistribute(mc, shape, ndim, t, src, in, dst, out, &e);
  /* A Partial result is checked by reducing it back to Replicate. */
  const void *check = out;
  const tpx_slice *cs = &s_out;
  if (st == TPX_OK && has_partial(dst, k)) {
    st = tpx_redistribute(mc, shape, ndim, t, dst, out, rep, full, &e);
    check = full;
    cs = &s_full;
  }
  if (st != TPX_OK) {
    failed(err, "redistribute %s %s -> %s: %s", tpx_dtype_short_name(t), a, b,
           e.message);
    bad = 1;
  } else {
    double got = 0, want = 0;
    long long at = check_box(shape, ndim, cs, t, check, &got, &want);
    if (at >= 0) {
      failed(err,
             "redistribute %s %s -> %s, shape [%lld,%lld,%lld] ndim %d, "
             "rank %lld: local element %lld is %g, want %g",
             tpx_dtype_short_name(t), a, b, (long long)shape[0],
             (long long)(ndim > 1 ? shape[1] : 0),
             (long long)(ndim > 2 ? shape[2] : 0), ndim, (long long)me, at, got,
             want);
      bad = 1;
    }
  }
  free(in);
  free(out);
  free(full);
  return bad;
}

tpx_status case_redistribute(tpx_comm *world, void *arg, tpx_error *err) {
  const redist_arg *ra = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_error e = {0};
  if (tpx_mesh_comm_create(world, ra->mesh, &mc, &e) != TPX_OK)
    return failed(err, "mesh_comm_create: %s", e.message);
  int k = tpx_mesh_ndim(ra->mesh), ntuples = 0;
  const tpx_placement *tab = tuple_tables(k, ra->full, &ntuples);
  static const int64_t shapes[][3] = {
      {5, 7, 3}, {8, 4, 6}, {10, 1, 1}, {0, 4, 1}};
  static const int ndims[] = {3, 3, 1, 2};
  for (size_t si = 0; si < 4; si++)
    for (int i = 0; i < ntuples; i++)
      for (int j = 0; j < ntuples; j++) {
        const tpx_placement *src = tab + i * k, *dst = tab + j * k;
        int nd = ndims[si];
        if (!valid_for(src, k, nd) || !valid_for(dst, k, nd))
          continue;
        tpx_dtype t =
            (i + j + (int)si) % 3 == 0 ? TPX_DTYPE_I32 : TPX_DTYPE_F32;
        one_pair(mc, shapes[si], nd, t, src, dst, err);
      }
  tpx_mesh_comm_destroy(mc);
  return result(err);
}

/* Tables of placement tuples (k entries each); constant, so rank threads
 * may share them. */
#define P_R                                                                    \
  { TPX_REPLICATE, 0, TPX_REDUCE_SUM, 0 }
#define P_S(d)                                                                 \
  { TPX_SHARD, d, TPX_REDUCE_SUM, 0 }
#define P_P(op)                                                                \
  { TPX_PARTIAL, 0, op, 0 }
static const tpx_placement one_dim[8][1] = {{P_R},
                                            {P_S(0)},
                                            {P_S(1)},
                                            {P_S(-1)},
                                            {P_P(TPX_REDUCE_SUM)},
                                            {P_P(TPX_REDUCE_AVG)},
                                            {P_P(TPX_REDUCE_MAX)},
                                            {P_P(TPX_REDUCE_MIN)}};
#define ROW(a)                                                                 \
  {a, P_R}, {a, P_S(0)}, {a, P_S(1)}, {a, P_S(-1)}, { a, P_P(TPX_REDUCE_SUM) }
static const tpx_placement two_dim[25][2] = {
    ROW(P_R), ROW(P_S(0)), ROW(P_S(1)), ROW(P_S(-1)), ROW(P_P(TPX_REDUCE_SUM))};

static const tpx_placement *tuple_tables(int k, int full, int *count) {
  if (k == 1) {
    *count = full ? 8 : 5;
    return &one_dim[0][0];
  }
  *count = 25;
  return &two_dim[0][0];
}
