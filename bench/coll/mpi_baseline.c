/* mpi_baseline.c — tpx-bench-mpi-baseline: a plain MPI collective loop, the
 * baseline that bench/coll/compare.sh puts next to tpx's local backend.
 *
 *   mpirun -np 4 tpx-bench-mpi-baseline --op all_reduce|all_gather|
 *          reduce_scatter --bytes SIZE --iters N [--warmup N] [--json]
 *
 * No tpx inside: MPI_Allreduce / MPI_Allgather / MPI_Reduce_scatter_block on
 * f32 buffers, out of place, sizes and busbw as tpx-bench-coll defines
 * them, so the two outputs compare line by line. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k')
    v <<= 10;
  if (*end == 'M' || *end == 'm')
    v <<= 20;
  if (*end == 'G' || *end == 'g')
    v <<= 30;
  return (size_t)v;
}

int main(int argc, char **argv) {
  const char *op = "all_reduce";
  size_t bytes = (size_t)64 << 20;
  int iters = 20, warmup = 5, json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      json = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--op"))
      op = argv[++i];
    else if (i + 1 < argc && !strcmp(argv[i], "--bytes"))
      bytes = parse_size(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--iters"))
      iters = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--warmup"))
      warmup = atoi(argv[++i]);
    else {
      fprintf(stderr, "tpx-bench-mpi-baseline: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  int kind = !strcmp(op, "all_reduce")       ? 0
             : !strcmp(op, "all_gather")     ? 1
             : !strcmp(op, "reduce_scatter") ? 2
                                             : -1;
  if (kind < 0 || iters < 1) {
    fprintf(stderr, "tpx-bench-mpi-baseline: bad --op or --iters\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int n, me;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  size_t total = bytes / sizeof(float);
  size_t count = kind == 0 ? total : total / (size_t)n;
  size_t nsend = kind == 1 ? count : kind == 2 ? count * (size_t)n : count;
  size_t nrecv = kind == 1 ? count * (size_t)n : count;
  float *send = malloc(nsend * sizeof(float) + 4);
  float *recv = malloc(nrecv * sizeof(float) + 4);
  for (size_t i = 0; i < nsend; i++) send[i] = (float)(me + 1 + (int)(i % 7));
  memset(recv, 0, nrecv * sizeof(float));
  double t0 = 0;
  for (int i = 0; i < warmup + iters; i++) {
    if (i == warmup) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
    }
    if (kind == 0)
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (kind == 1)
      MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT,
                    MPI_COMM_WORLD);
    else
      MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double t = (MPI_Wtime() - t0) / iters;
  /* Check the last result. */
  long long wrong = 0, wrong_all = 0;
  for (size_t i = 0; i < nrecv; i++) {
    float want;
    if (kind == 1)
      want = (float)((int)(i / count) + 1 + (int)((i % count) % 7));
    else if (kind == 0)
      want = (float)(n * (n + 1) / 2 + n * (int)(i % 7));
    else
      want = (float)(n * (n + 1) / 2 + n * (int)(((size_t)me * count + i) % 7));
    if (recv[i] != want)
      wrong++;
  }
  MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (me == 0) {
    size_t size = (kind == 0 ? count : count * (size_t)n) * sizeof(float);
    double factor = kind == 0 ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
    double algbw = (double)size / t / 1e9, busbw = algbw * factor;
    printf("# tpx-bench-mpi-baseline: plain MPI %s, ranks %d, float, iters "
           "%d, warmup %d\n",
           op, n, iters, warmup);
    printf("# %12s %12s %9s %9s %7s\n", "size (B)", "time (us)", "algbw",
           "busbw", "#wrong");
    printf("  %12zu %12.1f %9.2f %9.2f %7lld\n", size, t * 1e6, algbw, busbw,
           wrong_all);
    if (json)
      printf("{\"backend\":\"mpi-baseline\",\"op\":\"%s\",\"ranks\":%d,"
             "\"bytes\":%zu,\"time_us\":%.1f,\"algbw_gbps\":%.4f,"
             "\"busbw_gbps\":%.4f,\"wrong\":%lld}\n",
             op, n, size, t * 1e6, algbw, busbw, wrong_all);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return wrong_all ? 1 : 0;
}
