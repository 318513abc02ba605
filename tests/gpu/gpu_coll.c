/* gpu_coll.c — tpx-gpu-check's "coll" and "nccl" groups: every collective
 * of tpx/comm.h on local worlds of 1..4 ranks whose buffers are CUDA
 * device memory (ranks as threads sharing the GPU, tpx_local_options
 * .cuda_memory) against the same program on host memory, byte for byte;
 * and the nccl backend at world 1 (NCCL refuses two ranks on one GPU)
 * against a host world of one rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/local_test.h"
#include "device/cuda_api.h"
#include "device/sim_tag.h"
#include "gpu_check.h"
#include "tpx/tpx.h"

enum { MAXR = 4, RC = 100003, TOTAL = 1000003 };

typedef struct carg {
  int dev;  /* buffers in device memory */
  int nccl; /* only the dtypes NCCL reduces */
  unsigned char *out[MAXR];
  size_t cap;
} carg;

static void *put(int dev, const void *h, size_t bytes) {
  void *p = NULL;
  if (!dev || gc_sim) {
    p = calloc(1, bytes ? bytes : 1);
    if (p && h)
      memcpy(p, h, bytes);
    return dev ? tpx__sim_tag(p) : p;
  }
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
    return NULL;
  if (h)
    cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice);
  else
    cudaMemset(p, 0, bytes ? bytes : 1);
  return p;
}

/* Append `bytes` of p to rank r's record and free p. */
static void take(carg *a, int r, void *p, size_t bytes, size_t *at) {
  int cuda = a->dev && !gc_sim;
  void *h = a->dev && gc_sim ? tpx__sim_untag(p) : p;
  if (*at + bytes <= a->cap && p) {
    if (cuda)
      cudaMemcpy(a->out[r] + *at, p, bytes, cudaMemcpyDeviceToHost);
    else
      memcpy(a->out[r] + *at, h, bytes);
  }
  *at += bytes;
  if (cuda)
    cudaFree(p);
  else
    free(h);
}

static void fill(unsigned char *b, size_t bytes, int r, int salt) {
  uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(r * 131 + salt + 1);
  for (size_t i = 0; i < bytes; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b[i] = (unsigned char)(x >> 24);
  }
}

static const tpx_dtype dts[] = {TPX_DTYPE_F64,  TPX_DTYPE_F32, TPX_DTYPE_F16,
                                TPX_DTYPE_BF16, TPX_DTYPE_I64, TPX_DTYPE_I32,
                                TPX_DTYPE_I16,  TPX_DTYPE_I8,  TPX_DTYPE_U64,
                                TPX_DTYPE_U32,  TPX_DTYPE_U16, TPX_DTYPE_U8};

#define TRY(x)                                                                 \
  do {                                                                         \
    tpx_status st_ = (x);                                                      \
    if (st_ != TPX_OK)                                                         \
      return st_;                                                              \
  } while (0)

/* all_reduce in place and reduce_scatter, every dtype and op. */
static tpx_status reductions(tpx_comm *w, carg *a, size_t *at, tpx_error *err) {
  int r = tpx_comm_rank(w), n = tpx_comm_size(w);
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (int op = TPX_REDUCE_SUM; op <= TPX_REDUCE_MIN; op++) {
      int integer = tpx_dtype_size(dts[d]) && dts[d] != TPX_DTYPE_F64 &&
                    dts[d] != TPX_DTYPE_F32 && dts[d] != TPX_DTYPE_F16 &&
                    dts[d] != TPX_DTYPE_BF16;
      if (a->nccl && (dts[d] == TPX_DTYPE_I16 || dts[d] == TPX_DTYPE_U16 ||
                      (integer && op == TPX_REDUCE_AVG)))
        continue; /* NCCL: no 16-bit integers; avg is for floats */
      size_t es = tpx_dtype_size(dts[d]), bytes = RC * es * (size_t)n;
      unsigned char *h = malloc(bytes);
      fill(h, bytes, r, (int)d * 7 + op);
      void *buf = put(a->dev, h, bytes), *rs = put(a->dev, NULL, RC * es);
      TRY(tpx_comm_all_reduce(w, buf, buf, RC * (size_t)n, dts[d],
                              (tpx_reduce_op)op, err));
      TRY(tpx_comm_reduce_scatter(w, buf, rs, RC, dts[d], (tpx_reduce_op)op,
                                  err));
      take(a, r, buf, bytes, at);
      take(a, r, rs, RC * es, at);
      free(h);
    }
  return TPX_OK;
}

static tpx_status body(tpx_comm *w, void *arg, tpx_error *err) {
  carg *a = arg;
  int r = tpx_comm_rank(w), n = tpx_comm_size(w);
  size_t at = 0;
  TRY(reductions(w, a, &at, err));
  float *x = malloc((size_t)TOTAL * MAXR * 4);
  for (size_t i = 0; i < (size_t)TOTAL * MAXR; i++)
    x[i] = (float)(r * 100 + (int)(i % 1000)) * 0.5f;
  int64_t off = 0, len = 0;
  TRY(tpx_layout_chunk(TOTAL, n, r, &off, &len, err));
  /* uneven all-gather and reduce-scatter (torch.chunk pieces) */
  void *s = put(a->dev, x, (size_t)len * 4), *g = put(a->dev, NULL, TOTAL * 4);
  TRY(tpx_comm_all_gather_chunked(w, s, g, TOTAL, TPX_DTYPE_F32, err));
  take(a, r, s, 0, &at);
  take(a, r, g, TOTAL * 4, &at);
  s = put(a->dev, x, TOTAL * 4);
  g = put(a->dev, NULL, (size_t)len * 4);
  TRY(tpx_comm_reduce_scatter_chunked(w, s, g, TOTAL, TPX_DTYPE_F32,
                                      TPX_REDUCE_AVG, err));
  take(a, r, s, 0, &at);
  take(a, r, g, (size_t)len * 4, &at);
  /* in-place all-to-all, broadcast from the last rank, barrier */
  s = put(a->dev, x, (size_t)RC * n * 4);
  TRY(tpx_comm_all_to_all(w, s, s, RC, TPX_DTYPE_F32, err));
  take(a, r, s, (size_t)RC * n * 4, &at);
  s = put(a->dev, x, RC * 4);
  g = put(a->dev, NULL, RC * 4);
  TRY(tpx_comm_broadcast(w, s, g, RC, TPX_DTYPE_F32, n - 1, err));
  take(a, r, s, 0, &at);
  take(a, r, g, RC * 4, &at);
  free(x);
  return tpx_comm_barrier(w, err);
}

static size_t cap_of(int n) {
  size_t c = (size_t)TOTAL * 4 * 3 + (size_t)RC * 4 * (n + 1);
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    c += 4 * (size_t)RC * tpx_dtype_size(dts[d]) * (size_t)(n + 1);
  return c;
}

static void record_init(carg *a, int dev, int nccl, int n) {
  a->dev = dev, a->nccl = nccl, a->cap = cap_of(n);
  for (int r = 0; r < MAXR; r++) a->out[r] = calloc(1, a->cap);
}

static void record_free(carg *a) {
  for (int r = 0; r < MAXR; r++) free(a->out[r]);
}

void gc_coll_run(gc_group *g) {
  for (int n = 1; n <= MAXR; n++) {
    carg a[2];
    tpx_status st[2];
    tpx_error e[2] = {{0}, {0}};
    for (int dev = 0; dev < 2; dev++) {
      record_init(&a[dev], dev, 0, n);
      tpx_local_options lo = TPX_LOCAL_OPTIONS_INIT;
      lo.cuda_memory = dev;
      st[dev] = gc_sim ? tpx__local_run_sim(n, dev, body, &a[dev], &e[dev])
                       : tpx_local_run_opts(n, &lo, body, &a[dev], &e[dev]);
    }
    gc_check(g, st[0] == TPX_OK && st[1] == TPX_OK,
             "%d ranks: host %s / "
             "cuda %s",
             n, e[0].message, e[1].message);
    for (int r = 0; st[1] == TPX_OK && r < n; r++)
      gc_check(g, memcmp(a[0].out[r], a[1].out[r], a[0].cap) == 0,
               "%d ranks, rank %d: device results differ from host", n, r);
    record_free(&a[0]), record_free(&a[1]);
  }
}

void gc_nccl_run(gc_group *g) {
  tpx_nccl_options o = TPX_NCCL_OPTIONS_INIT;
  tpx_error e = {0};
  tpx_comm *w = NULL;
  o.has_unique_id = 1, o.rank = 0, o.nranks = 1;
  tpx_status st = tpx_nccl_unique_id(o.unique_id, &e);
  if (st == TPX_OK)
    st = tpx_comm_create_nccl(&o, &w, &e);
  gc_check(g, st == TPX_OK, "nccl world of 1: %s", e.message);
  if (st != TPX_OK)
    return;
  carg a[2];
  record_init(&a[0], 0, 1, 1);
  record_init(&a[1], 1, 1, 1);
  tpx_error eh = {0};
  tpx_status sh = tpx_local_run(1, body, &a[0], &eh);
  st = body(w, &a[1], &e);
  gc_check(g, sh == TPX_OK && st == TPX_OK, "nccl %s / host %s", e.message,
           eh.message);
  if (st == TPX_OK && sh == TPX_OK)
    gc_check(g, memcmp(a[0].out[0], a[1].out[0], a[0].cap) == 0,
             "nccl world of 1: results differ from host");
  record_free(&a[0]), record_free(&a[1]);
  tpx_comm_destroy(w);
}
