/* bench_coll.c — tpx-bench-coll: collective bandwidth of a tpx backend, in
 * the nccl-tests format.
 *
 *   tpx-bench-coll --backend local|mpi|nccl --op all_reduce|all_gather|
 *                  reduce_scatter|all_to_all --ranks N --bytes SIZE
 *                  --iters N [--warmup N] [--json]
 *
 * SIZE is the nccl-tests "size": the full buffer (all_reduce: each rank's
 * buffer; all_gather: the gathered result; reduce_scatter: each rank's
 * input; all_to_all: each rank's send buffer); K/M/G suffixes are binary.
 * algbw = size / time; busbw = algbw x 2(n-1)/n for all_reduce and
 * (n-1)/n for the others, so figures compare across rank counts. Every rank
 * checks the result of the last timed iteration (#wrong = wrong elements
 * over all ranks) and the exit status is non-zero when any is wrong. The
 * baseline printed next to it is a single-thread memcpy of `size` bytes
 * measured in the same run. For mpi, run under mpirun; --ranks is then the
 * MPI world size (a different value is an error). For nccl, run under
 * mpirun too (one GPU per rank; MPI bootstraps NCCL and carries the result
 * check): the buffers live on the GPU. Without a GPU, or in a libtpx built
 * without NCCL, nccl says why and exits 77 (skipped, for meson). f32, sum.
 *
 * A benchmark, not a test: meson never runs it. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpx/comm.h"
#if TPX_BENCH_CUDA
#include <cuda_runtime.h>
#endif

/* Exit status of a run that could not happen on this machine (meson: skip). */
#define EXIT_SKIP 77

typedef enum {
  OP_ALL_REDUCE,
  OP_ALL_GATHER,
  OP_REDUCE_SCATTER,
  OP_ALL_TO_ALL
} op_t;
static const char *op_names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                 "all_to_all"};

typedef struct opts {
  const char *backend;
  op_t op;
  int ranks;
  size_t bytes;
  int iters, warmup, json;
} opts;

typedef struct shared {
  const opts *o;
  double time_s;   /* per iteration, measured by rank 0 */
  long long wrong; /* over all ranks */
  int bad_ranks;   /* --ranks is not the MPI world size */
} shared;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
  fprintf(f, "usage: tpx-bench-coll --backend local|mpi|nccl --op all_reduce|"
             "all_gather|reduce_scatter|all_to_all\n"
             "                      --ranks N --bytes SIZE[K|M|G] --iters N "
             "[--warmup N] [--json]\n");
}

static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s)
    return -1;
  switch (*end) {
  case 'K':
  case 'k':
    v <<= 10;
    end++;
    break;
  case 'M':
  case 'm':
    v <<= 20;
    end++;
    break;
  case 'G':
  case 'g':
    v <<= 30;
    end++;
    break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end)
    return -1;
  *out = (size_t)v;
  return 0;
}

static int parse(int argc, char **argv, opts *o) {
  o->backend = "local";
  o->op = OP_ALL_REDUCE;
  o->ranks = 4;
  o->bytes = (size_t)64 << 20;
  o->iters = 20;
  o->warmup = 5;
  o->json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      o->json = 1;
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "tpx-bench-coll: %s needs a value\n", a);
      return -1;
    }
    i++;
    if (!strcmp(a, "--backend")) {
      if (strcmp(v, "local") && strcmp(v, "mpi") && strcmp(v, "nccl")) {
        fprintf(stderr,
                "tpx-bench-coll: unknown backend '%s' (local, mpi, nccl)\n", v);
        return -1;
      }
      o->backend = v;
    } else if (!strcmp(a, "--op")) {
      int k = -1;
      for (int j = 0; j < 4; j++)
        if (!strcmp(v, op_names[j]))
          k = j;
      if (k < 0) {
        fprintf(stderr, "tpx-bench-coll: unknown op '%s'\n", v);
        return -1;
      }
      o->op = (op_t)k;
    } else if (!strcmp(a, "--ranks")) {
      o->ranks = atoi(v);
    } else if (!strcmp(a, "--bytes")) {
      if (parse_size(v, &o->bytes)) {
        fprintf(stderr, "tpx-bench-coll: bad size '%s'\n", v);
        return -1;
      }
    } else if (!strcmp(a, "--iters")) {
      o->iters = atoi(v);
    } else if (!strcmp(a, "--warmup")) {
      o->warmup = atoi(v);
    } else {
      fprintf(stderr, "tpx-bench-coll: unknown option '%s'\n", a);
      return -1;
    }
  }
  if (o->ranks < 1 || o->iters < 1 || o->warmup < 0) {
    fprintf(stderr, "tpx-bench-coll: need --ranks >= 1, --iters >= 1, "
                    "--warmup >= 0\n");
    return -1;
  }
  return 0;
}

/* Element counts: per-rank count passed to the collective, and the sizes of
 * the send / recv buffers in elements. */
static void shape(const opts *o, int n, size_t *count, size_t *nsend,
                  size_t *nrecv) {
  size_t total = o->bytes / sizeof(float);
  switch (o->op) {
  case OP_ALL_REDUCE:
    *count = total;
    *nsend = *nrecv = total;
    break;
  case OP_ALL_GATHER:
    *count = total / (size_t)n;
    *nsend = *count;
    *nrecv = *count * (size_t)n;
    break;
  case OP_REDUCE_SCATTER:
    *count = total / (size_t)n;
    *nsend = *count * (size_t)n;
    *nrecv = *count;
    break;
  case OP_ALL_TO_ALL:
    *count = total / (size_t)n;
    *nsend = *nrecv = *count * (size_t)n;
    break;
  }
}

/* Inputs and expected outputs: small integers, exact in f32. */
static float in_val(op_t op, int r, size_t i, size_t count) {
  switch (op) {
  case OP_ALL_GATHER: return (float)(r * 1000 + (int)(i % 1000));
  case OP_ALL_TO_ALL:
    return (float)(r * 1000 + (int)(i / (count ? count : 1)) * 10 +
                   (int)(i % (count ? count : 1) % 7));
  default: return (float)(r + 1 + (int)(i % 7));
  }
}
static float want_val(op_t op, int n, int me, size_t i, size_t count) {
  switch (op) {
  case OP_ALL_REDUCE: return (float)(n * (n + 1) / 2 + n * (int)(i % 7));
  case OP_REDUCE_SCATTER:
    return (float)(n * (n + 1) / 2 + n * (int)(((size_t)me * count + i) % 7));
  case OP_ALL_GATHER: {
    size_t j = i / count, k = i % count;
    return (float)((int)j * 1000 + (int)(k % 1000));
  }
  case OP_ALL_TO_ALL: {
    size_t j = i / count, k = i % count;
    return (float)((int)j * 1000 + me * 10 + (int)(k % 7));
  }
  }
  return 0;
}

static tpx_status run_op(tpx_comm *c, const opts *o, const float *send,
                         float *recv, size_t count, tpx_error *err) {
  switch (o->op) {
  case OP_ALL_REDUCE:
    return tpx_comm_all_reduce(c, send, recv, count, TPX_DTYPE_F32,
                               TPX_REDUCE_SUM, err);
  case OP_ALL_GATHER:
    return tpx_comm_all_gather(c, send, recv, count, TPX_DTYPE_F32, err);
  case OP_REDUCE_SCATTER:
    return tpx_comm_reduce_scatter(c, send, recv, count, TPX_DTYPE_F32,
                                   TPX_REDUCE_SUM, err);
  case OP_ALL_TO_ALL:
    return tpx_comm_all_to_all(c, send, recv, count, TPX_DTYPE_F32, err);
  }
  return TPX_INVALID_ARGUMENT;
}

/* Device buffers for the nccl backend (collectives take device pointers);
 * without CUDA they are never asked for. */
static void *dev_alloc(size_t bytes) {
#if TPX_BENCH_CUDA
  void *p = NULL;
  return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
#else
  (void)bytes;
  return NULL;
#endif
}
static int dev_copy(void *dst, const void *src, size_t bytes, int to_device) {
#if TPX_BENCH_CUDA
  return cudaMemcpy(dst, src, bytes,
                    to_device ? cudaMemcpyHostToDevice
                              : cudaMemcpyDeviceToHost) == cudaSuccess
             ? 0
             : -1;
#else
  (void)dst, (void)src, (void)bytes, (void)to_device;
  return -1;
#endif
}
static void dev_free(void *p) {
#if TPX_BENCH_CUDA
  if (p)
    cudaFree(p);
#else
  (void)p;
#endif
}

/* One rank's part: allocate (first touch on this rank), warm up, time,
 * check. The collectives run on `c`; the bookkeeping (agreeing on
 * allocations, counting wrong elements) on `ctl`, which takes host
 * buffers (the same comm except for nccl, whose `ctl` is the MPI world).
 * With `device`, the timed buffers are on the GPU. */
static tpx_status rank_body_on(tpx_comm *c, tpx_comm *ctl, int device,
                               shared *sh, tpx_error *err) {
  const opts *o = sh->o;
  int n = tpx_comm_size(c), me = tpx_comm_rank(c);
  size_t count, nsend, nrecv;
  shape(o, n, &count, &nsend, &nrecv);
  float *send = malloc((nsend ? nsend : 1) * sizeof *send);
  float *recv = malloc((nrecv ? nrecv : 1) * sizeof *recv);
  float *dsend = device ? dev_alloc(nsend * sizeof *send) : send;
  float *drecv = device ? dev_alloc(nrecv * sizeof *recv) : recv;
  tpx_status st = TPX_OK;
  int have = send && recv && dsend && drecv;
  int64_t ok_local = have, ok_all = 0;
  /* Agree on allocation success so no rank skips the collectives alone. */
  st = tpx_comm_all_reduce(ctl, &ok_local, &ok_all, 1, TPX_DTYPE_I64,
                           TPX_REDUCE_MIN, err);
  if (st == TPX_OK && !ok_all)
    st = tpx_error_set(err, TPX_NO_MEMORY, "buffers of %zu bytes%s",
                       (nsend + nrecv) * sizeof(float),
                       device ? " on the GPU" : "");
  if (st == TPX_OK) {
    for (size_t i = 0; i < nsend; i++) send[i] = in_val(o->op, me, i, count);
    memset(recv, 0, nrecv * sizeof *recv);
    if (device && (dev_copy(dsend, send, nsend * sizeof *send, 1) ||
                   dev_copy(drecv, recv, nrecv * sizeof *recv, 1)))
      st = tpx_error_set(err, TPX_COMM, "copying the buffers to the GPU");
  }
  for (int i = 0; st == TPX_OK && i < o->warmup; i++)
    st = run_op(c, o, dsend, drecv, count, err);
  if (st == TPX_OK)
    st = tpx_comm_barrier(c, err);
  double t0 = now();
  for (int i = 0; st == TPX_OK && i < o->iters; i++)
    st = run_op(c, o, dsend, drecv, count, err);
  if (st == TPX_OK)
    st = tpx_comm_barrier(c, err);
  double t1 = now();
  if (st == TPX_OK && device && dev_copy(recv, drecv, nrecv * sizeof *recv, 0))
    st = tpx_error_set(err, TPX_COMM, "copying the result from the GPU");
  int64_t wrong = 0, wrong_all = 0;
  for (size_t i = 0; st == TPX_OK && i < nrecv; i++)
    if (recv[i] != want_val(o->op, n, me, i, count))
      wrong++;
  if (st == TPX_OK)
    st = tpx_comm_all_reduce(ctl, &wrong, &wrong_all, 1, TPX_DTYPE_I64,
                             TPX_REDUCE_SUM, err);
  if (st == TPX_OK && me == 0) {
    sh->time_s = (t1 - t0) / o->iters;
    sh->wrong = (long long)wrong_all;
  }
  if (device) {
    dev_free(dsend);
    dev_free(drecv);
  }
  free(send);
  free(recv);
  return st;
}

static tpx_status rank_body(tpx_comm *c, void *arg, tpx_error *err) {
  return rank_body_on(c, c, 0, arg, err);
}

/* Single-thread memcpy of `bytes`, GB/s (bytes copied per second). */
static double memcpy_gbps(size_t bytes, int iters) {
  unsigned char *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
  if (!a || !b) {
    free(a);
    free(b);
    return 0;
  }
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  memcpy(b, a, bytes);
  double t0 = now();
  for (int i = 0; i < iters; i++) {
    a[(size_t)i % (bytes ? bytes : 1)] ^= 1; /* keep the copies live */
    memcpy(b, a, bytes);
  }
  double t = (now() - t0) / iters;
  volatile unsigned char sink = b[bytes / 2];
  (void)sink;
  free(a);
  free(b);
  return t > 0 ? (double)bytes / t / 1e9 : 0;
}

/* mpi and nccl: the MPI world must have --ranks ranks; rank 0 measures the
 * memcpy reference, then every rank runs its part. */
static tpx_status run_world(tpx_comm *c, tpx_comm *ctl, int device, shared *sh,
                            int n, double *ref, int *me, tpx_error *e) {
  *me = tpx_comm_rank(c);
  if (tpx_comm_size(c) != n) {
    if (*me == 0)
      fprintf(stderr,
              "tpx-bench-coll: --ranks %d but the MPI world has %d "
              "ranks\n",
              n, tpx_comm_size(c));
    sh->bad_ranks = 1;
    return tpx_error_set(e, TPX_INVALID_ARGUMENT, "--ranks %d", n);
  }
  if (*me == 0)
    *ref = memcpy_gbps(sh->o->bytes, sh->o->iters);
  return rank_body_on(c, ctl, device, sh, e);
}

int main(int argc, char **argv) {
  opts o;
  if (parse(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  shared sh = {&o, 0, 0, 0};
  tpx_error e = {0};
  tpx_status st;
  int n = o.ranks, me = 0;
  double ref = 0;
  if (!strcmp(o.backend, "local")) {
    ref = memcpy_gbps(o.bytes, o.iters);
    st = tpx_local_run(n, rank_body, &sh, &e);
  } else if (!strcmp(o.backend, "nccl")) {
    /* Say why nccl cannot run here before anything else. */
    if (!tpx_comm_backend_compiled("nccl")) {
      fprintf(stderr, "tpx-bench-coll: skipped: libtpx was built without "
                      "the nccl backend (CUDA and NCCL not found at "
                      "configure time; see -Dgpu_root, -Dnccl)\n");
      return EXIT_SKIP;
    }
#if TPX_BENCH_CUDA
    /* No GPU: say so before starting MPI for nothing. */
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev < 1) {
      fprintf(stderr,
              "tpx-bench-coll: skipped: the nccl backend needs a "
              "CUDA device and none is usable here (%s); use "
              "--backend local or mpi on this machine\n",
              ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
      return EXIT_SKIP;
    }
#endif
    tpx_comm *world = NULL, *gpu = NULL;
    st = tpx_comm_create_mpi(NULL, &world, &e);
    if (st == TPX_OK)
      st = tpx_comm_create_nccl(NULL, &gpu, &e);
    if (st == TPX_NO_DEVICE || st == TPX_UNSUPPORTED) {
      fprintf(stderr, "tpx-bench-coll: skipped: %s\n", e.message);
      tpx_comm_destroy(world);
      return EXIT_SKIP;
    }
    if (st == TPX_OK)
      st = run_world(gpu, world, 1, &sh, n, &ref, &me, &e);
    tpx_comm_destroy(gpu);
    tpx_comm_destroy(world);
  } else {
    tpx_comm *world = NULL;
    st = tpx_comm_create_mpi(NULL, &world, &e);
    if (st == TPX_OK)
      st = run_world(world, world, 0, &sh, n, &ref, &me, &e);
    tpx_comm_destroy(world);
  }
  if (sh.bad_ranks)
    return 2; /* said on rank 0 */
  if (st != TPX_OK) {
    fprintf(stderr, "tpx-bench-coll: %s: %s\n", tpx_status_name(st), e.message);
    return 1;
  }
  if (me != 0)
    return 0;
  size_t count, nsend, nrecv;
  shape(&o, n, &count, &nsend, &nrecv);
  size_t size =
      (o.op == OP_ALL_REDUCE ? count : count * (size_t)n) * sizeof(float);
  double factor =
      o.op == OP_ALL_REDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
  double algbw = sh.time_s > 0 ? (double)size / sh.time_s / 1e9 : 0;
  double busbw = algbw * factor;
  printf("# tpx-bench-coll: backend %s, op %s, ranks %d, dtype float, "
         "iters %d, warmup %d\n",
         o.backend, op_names[o.op], n, o.iters, o.warmup);
  printf("# memcpy reference (1 thread, %zu B): %.2f GB/s\n", size, ref);
  printf("#\n");
  printf("# %12s %12s %6s %6s %12s %9s %9s %7s\n", "size", "count", "type",
         "redop", "time", "algbw", "busbw", "#wrong");
  printf("# %12s %12s %6s %6s %12s %9s %9s %7s\n", "(B)", "(elements)", "", "",
         "(us)", "(GB/s)", "(GB/s)", "");
  printf("  %12zu %12zu %6s %6s %12.1f %9.2f %9.2f %7lld\n", size,
         o.op == OP_ALL_REDUCE ? count : count * (size_t)n, "float",
         o.op == OP_ALL_REDUCE || o.op == OP_REDUCE_SCATTER ? "sum" : "none",
         sh.time_s * 1e6, algbw, busbw, sh.wrong);
  printf("# busbw / memcpy reference: %.2f\n", ref > 0 ? busbw / ref : 0);
  printf("# Out of bounds values : %lld %s\n", sh.wrong,
         sh.wrong ? "FAILED" : "OK");
  if (o.json) {
    json_t *j = json_pack(
        "{s:s, s:s, s:i, s:I, s:I, s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, "
        "s:I}",
        "backend", o.backend, "op", op_names[o.op], "ranks", n, "bytes",
        (json_int_t)size, "count",
        (json_int_t)(o.op == OP_ALL_REDUCE ? count : count * (size_t)n),
        "dtype", "f32", "iters", o.iters, "warmup", o.warmup, "time_us",
        sh.time_s * 1e6, "algbw_gbps", algbw, "busbw_gbps", busbw,
        "memcpy_gbps", ref, "busbw_over_memcpy", ref > 0 ? busbw / ref : 0.0,
        "wrong", (json_int_t)sh.wrong);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (s)
      printf("%s\n", s);
    free(s);
    json_decref(j);
  }
  fflush(stdout);
  return sh.wrong ? 1 : 0;
}
