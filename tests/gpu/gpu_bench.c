/* gpu_bench.c — tpx-gpu-check's "bench" group: the cuda memory space's
 * copy and kernel bandwidth against the GPU's own cudaMemcpy D2D, measured
 * in the same run (nccl-tests style: '#' header, one row per op: bytes
 * moved, time, GB/s, fraction of cudaMemcpy). Bytes moved count every
 * read and write of the op (cudaMemcpy: 2 x size). */
#include <stdio.h>

#include "device/cuda_api.h"
#include "gpu_check.h"

enum { ITERS = 20 };

typedef struct bufs {
  float *a, *b, *c, *d;
  size_t n;
} bufs;

/* Average seconds of `what` over ITERS runs on the space's stream, timed
 * with events (after one warm-up run). */
#define TIMED(secs, cu, what)                                                  \
  do {                                                                         \
    cudaEvent_t e0, e1;                                                        \
    cudaEventCreate(&e0), cudaEventCreate(&e1);                                \
    what;                                                                      \
    cudaEventRecord(e0, (cudaStream_t)(cu)->stream);                           \
    for (int it_ = 0; it_ < ITERS; it_++) what;                                \
    cudaEventRecord(e1, (cudaStream_t)(cu)->stream);                           \
    cudaEventSynchronize(e1);                                                  \
    float ms_ = 0;                                                             \
    cudaEventElapsedTime(&ms_, e0, e1);                                        \
    secs = 1e-3 * ms_ / ITERS;                                                 \
    cudaEventDestroy(e0), cudaEventDestroy(e1);                                \
  } while (0)

static void row(const char *op, double bytes, double secs, double base) {
  double gbs = bytes / secs / 1e9;
  printf("%-26s %14.0f %10.3f %9.1f %8.2f\n", op, bytes, secs * 1e6, gbs,
         base > 0 ? gbs / base : 1.0);
}

void gc_bench_run(gc_group *g, const tpx__memspace *cu) {
  bufs b = {NULL, NULL, NULL, NULL, (size_t)1 << 28}; /* 1 GiB of f32 */
  size_t bytes = b.n * 4;
  cudaStream_t s = (cudaStream_t)cu->stream;
  int ok = cudaMalloc((void **)&b.a, bytes) == cudaSuccess &&
           cudaMalloc((void **)&b.b, bytes) == cudaSuccess &&
           cudaMalloc((void **)&b.c, bytes) == cudaSuccess &&
           cudaMalloc((void **)&b.d, bytes) == cudaSuccess;
  gc_check(g, ok, "bench: 4 GiB of device buffers");
  if (!ok)
    goto out;
  cudaMemsetAsync(b.a, 0, bytes, s), cudaMemsetAsync(b.b, 0, bytes, s);
  cudaMemsetAsync(b.c, 0, bytes, s), cudaMemsetAsync(b.d, 0, bytes, s);
  double t, base;
  TIMED(t, cu, cudaMemcpyAsync(b.a, b.b, bytes, cudaMemcpyDeviceToDevice, s));
  base = 2.0 * bytes / t / 1e9;
  printf("#\n# %-24s %14s %10s %9s %8s\n", "op (1 GiB of f32)", "bytes moved",
         "time(us)", "GB/s", "of D2D");
  row("cudaMemcpy D2D", 2.0 * bytes, t, base);
  TIMED(t, cu, tpx__ms_copy(cu, b.a, b.b, bytes, TPX__D2D, NULL));
  row("memspace copy D2D", 2.0 * bytes, t, base);
  tpx__ms_adamw h = {0.999f, 0.1f, 0.999f, 0.001f, 0.03f, 1e-8f, -0.01f};
  TIMED(t, cu, tpx__ms_adamw_update(cu, b.a, b.b, b.c, b.d, b.n, &h, NULL));
  row("adamw (p,g,m,v)", 7.0 * bytes, t, base);
  TIMED(
      t, cu,
      tpx__ms_convert(cu, b.a, TPX_DTYPE_BF16, b.b, TPX_DTYPE_F32, b.n, NULL));
  row("convert f32->bf16", 1.5 * bytes, t, base);
  TIMED(t, cu,
        tpx__ms_convert(cu, b.a, TPX_DTYPE_F32, b.b, TPX_DTYPE_BF16, b.n / 2,
                        NULL));
  row("convert bf16->f32", 0.75 * bytes, t, base);
  const void *srcs[4] = {b.a, b.b, b.c, b.d};
  void *dst = b.a;
  size_t q = b.n / 2;
  TIMED(t, cu,
        tpx__ms_reduce(cu, &dst, 1, srcs, 4, q, TPX_DTYPE_F32, TPX_REDUCE_SUM,
                       4, NULL));
  row("reduce f32 sum, 4 -> 1", 5.0 * q * 4, t, base);
  TIMED(t, cu, tpx__ms_add_f32(cu, b.a, b.b, TPX_DTYPE_F32, b.n, 1.0f, NULL));
  row("add_f32", 3.0 * bytes, t, base);
  double *acc = (double *)b.d; /* the sum lands in d's first word */
  TIMED(t, cu, tpx__ms_norm_acc(cu, acc, b.a, b.n, 0, NULL));
  row("norm_acc (sum of squares)", 1.0 * bytes, t, base);
  gc_check(g, cudaStreamSynchronize(s) == cudaSuccess, "bench: stream");
out:
  cudaFree(b.a), cudaFree(b.b), cudaFree(b.c), cudaFree(b.d);
}
