/* bench_ckpt.c — `tpx-bench-ckpt`: per-rank checkpoint reads.
 *
 *   tpx-bench-ckpt WEIGHTS_DIR TP DP_SHARD [--io pread|mmap] [--threads N]
 *                  [--dump-slices PATH]
 *
 * Selects the plan as `tpx plan` does (tools/plan/plan_setup.c) for the config
 * beside the weights, then reads every rank's slices of every parameter
 * (tpx_checkpoint_read_rank, one rank after the other, N threads each) into
 * buffers of the model dtype. Prints per-rank bytes read against slice
 * bytes, the total time and throughput (best of 3). --dump-slices writes
 * every rank's boxes for the Python get_slice baseline (get_slice.py).
 * A benchmark, never a test; run.sh runs it next to its baselines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan_setup.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tpx-bench-ckpt WEIGHTS_DIR TP DP_SHARD [--io "
                    "pread|mmap] [--threads N] [--dump-slices PATH]\n");
    return 2;
  }
  tpx_checkpoint_reader_options ro = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  const char *dump = NULL;
  for (int i = 4; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--io"))
      ro.io_method = !strcmp(argv[i + 1], "mmap") ? TPX_CHECKPOINT_IO_MMAP
                                                  : TPX_CHECKPOINT_IO_PREAD;
    else if (!strcmp(argv[i], "--threads"))
      ro.num_threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--dump-slices"))
      dump = argv[i + 1];
  }
  char config[4096];
  snprintf(config, sizeof config, "%s/config.json", argv[1]);
  tpx_cli_plan_args pa;
  memset(&pa, 0, sizeof pa);
  pa.config = config;
  pa.weights = argv[1];
  pa.tp = atoll(argv[2]);
  pa.dp_shard = atoll(argv[3]);
  pa.dp_replicate = 1;
  pa.fsdp = pa.isolate = 1;
  tpx_cli_planned pl;
  if (tpx_cli_plan_build("bench-ckpt", &pa, &pl) != 0)
    return 1;
  tpx_error err;
  tpx_error_clear(&err);
  tpx_checkpoint_reader *rd = NULL;
  if (tpx_checkpoint_reader_create(argv[1], &ro, &rd, &err) != TPX_OK) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  size_t np = tpx_model_num_params(pl.model);
  int64_t world = tpx_mesh_world_size(pl.mesh);
  tpx_checkpoint_dest *dests = calloc(np, sizeof *dests);
  FILE *df = dump ? fopen(dump, "w") : NULL;
  if (df)
    fprintf(df, "{\"ranks\": [");
  /* buffers sized for the largest rank */
  for (size_t p = 0; p < np; p++) {
    tpx_param_info info;
    tpx_model_param(pl.model, (int64_t)p, &info, NULL);
    if (info.tied_to >= 0)
      continue; /* storage is the target's */
    size_t most = 0;
    for (int64_t r = 0; r < world; r++) {
      tpx_slice s;
      tpx_sharding_local_slice(pl.sh, (int64_t)p, r, &s, NULL);
      size_t b = (size_t)tpx_slice_nbytes(&s, info.dtype);
      if (b > most)
        most = b;
    }
    dests[p].data = malloc(most ? most : 1);
    memset(dests[p].data, 0, most ? most : 1); /* fault the pages in once */
    dests[p].bytes = most;
    dests[p].dtype = info.dtype;
  }
  double best = 1e30;
  int64_t total_slice = 0, total_read = 0, worst_pct = 0;
  for (int rep = 0; rep < 3; rep++) {
    int64_t before = tpx_checkpoint_bytes_read(rd);
    double t0 = now();
    for (int64_t r = 0; r < world; r++) {
      int64_t r0 = tpx_checkpoint_bytes_read(rd);
      if (tpx_checkpoint_read_rank(rd, pl.sh, r, dests, &err) != TPX_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
      }
      if (rep == 0) {
        int64_t slice = 0;
        if (df)
          fprintf(df, "%s{", r ? "," : "");
        int first = 1;
        for (size_t p = 0; p < np; p++) {
          if (dests[p].data == NULL)
            continue;
          tpx_slice s;
          tpx_param_info info;
          tpx_model_param(pl.model, (int64_t)p, &info, NULL);
          tpx_sharding_local_slice(pl.sh, (int64_t)p, r, &s, NULL);
          slice += tpx_slice_nbytes(&s, info.dtype);
          if (df) {
            fprintf(df, "%s\"%s\": [", first ? "" : ",", info.fqn);
            for (int d = 0; d < s.ndim; d++)
              fprintf(df, "%s[%lld, %lld]", d ? "," : "",
                      (long long)s.offset[d],
                      (long long)(s.offset[d] + s.length[d]));
            fprintf(df, "]");
            first = 0;
          }
        }
        if (df)
          fprintf(df, "}");
        int64_t got = tpx_checkpoint_bytes_read(rd) - r0;
        int64_t pct = slice ? (got * 1000 + slice / 2) / slice : 1000;
        if (pct > worst_pct)
          worst_pct = pct;
        total_slice += slice;
        printf("  rank %lld: read %lld bytes for %lld slice bytes (%.3fx)\n",
               (long long)r, (long long)got, (long long)slice,
               (double)pct / 1000.0);
      }
    }
    double t = now() - t0;
    if (rep == 0)
      total_read = tpx_checkpoint_bytes_read(rd) - before;
    if (t < best)
      best = t;
  }
  if (df) {
    fprintf(df, "]}\n");
    fclose(df);
  }
  printf("tpx read_rank tp=%s dp_shard=%s io=%s threads=%d: %lld slice "
         "bytes (%lld read, worst rank %.3fx) in %.3f s = %.0f MB/s\n",
         argv[2], argv[3],
         ro.io_method == TPX_CHECKPOINT_IO_PREAD ? "pread" : "mmap",
         ro.num_threads ? ro.num_threads : 4, (long long)total_slice,
         (long long)total_read, (double)worst_pct / 1000.0, best,
         (double)total_slice / best / 1e6);
  for (size_t p = 0; p < np; p++) free(dests[p].data);
  free(dests);
  tpx_checkpoint_reader_destroy(rd);
  tpx_cli_planned_free(&pl);
  return 0;
}
