/* main.c — tpx-train: the reference trainer's command line. Loads an HF
 * checkpoint, lets tpx choose the TP plan through its plugins (as `tpx plan`
 * does), applies it with FSDP2 on a (dp_replicate, dp_shard, tp) mesh, and
 * trains K AdamW steps on one token batch, ranks as threads (local) or
 * processes (mpi). Prints per-step loss and pre-clip grad norm. */
#include <errno.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dump.h"
#include "glue.h"
#include "tpx_config.h"

#if TPX_HAVE_MPI
#include <mpi.h>
#endif

typedef struct args {
  const char *model;      /* --model DIR: config.json + safetensors */
  const char *tokens;     /* --tokens FILE: int32 [batch, seq + 1] */
  const char *backend;    /* local | mpi */
  const char *format;     /* text | json */
  const char *dump;       /* --dump-params FILE */
  const char *dump_grads; /* --dump-grads FILE */
  int64_t batch, seq, steps;
  int64_t tp, dp_shard, dp_replicate;
  double lr, clip, wd; /* clip <= 0: no clipping */
  int sp;              /* sequence parallel */
} args;

/* What rank 0 records of each step, for the report. */
typedef struct step_record {
  double loss, grad_norm;
  double seconds; /* wall, rank 0 */
  double comm;    /* of which in collectives */
  double cpu;     /* CPU seconds of the whole process */
} step_record;

/* What the ranks share: the inputs and rank 0's results. */
typedef struct job {
  const args *a;
  const tpx_model *model;
  const tpx_sharding *sh;
  const int32_t *tokens;
  const tpx_checkpoint_reader *reader;
  step_record *steps; /* [a->steps], filled by rank 0 */
  int has_state;      /* rank 0's runtime reported its state bytes */
  int64_t state[3];   /* rank 0: params, grads, optimizer bytes (after the
                         last step, so the AdamW state exists) */
} job;

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: tpx-train --model DIR --tokens FILE --batch B --seq T --steps K"
      " --lr LR\n"
      "                 [--clip C] [--weight-decay W] [--tp N] [--dp-shard M]\n"
      "                 [--dp-replicate R] [--sp] [--backend local|mpi]\n"
      "                 [--format text|json] [--dump-params FILE]"
      " [--dump-grads FILE]\n\n"
      "Train K AdamW steps (betas 0.9/0.999, eps 1e-8) of an HF"
      " LlamaForCausalLM,\n"
      "Qwen2ForCausalLM or Qwen3ForCausalLM checkpoint (config.json +\n"
      "model.safetensors) in f32 on CPU, on the mesh dp_replicate x dp_shard"
      " x tp with\n"
      "the TP plan tpx selects. FILE holds little-endian int32 [B, T+1]:"
      " inputs\n"
      "[:, :T], targets [:, 1:], the same batch every step, split over the"
      " data-parallel\n"
      "ranks. --dump-params writes the parameters after the last step"
      " (gathered) as an\n"
      "f32 safetensors file, for comparisons; --dump-grads the gathered"
      " pre-clip\n"
      "gradients of every step k, tensors named PARAM@k.\n"
      "Exit status: 0 ok, 1 bad input or a failed run, 2 bad arguments.\n");
}

/* ---- the command line ---- */

static int parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end)
    return -1;
  *out = v;
  return 0;
}

static int parse_f64(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end)
    return -1;
  *out = v;
  return 0;
}

/* Set option o to value v; 1 when v is bad, -1 for an unknown option. */
static int set_option(args *a, const char *o, const char *v, int *have_lr) {
  if (!strcmp(o, "--model"))
    a->model = v;
  else if (!strcmp(o, "--tokens"))
    a->tokens = v;
  else if (!strcmp(o, "--backend"))
    a->backend = v;
  else if (!strcmp(o, "--format"))
    a->format = v;
  else if (!strcmp(o, "--dump-params"))
    a->dump = v;
  else if (!strcmp(o, "--dump-grads"))
    a->dump_grads = v;
  else if (!strcmp(o, "--batch"))
    return parse_i64(v, &a->batch) || a->batch <= 0;
  else if (!strcmp(o, "--seq"))
    return parse_i64(v, &a->seq) || a->seq <= 0;
  else if (!strcmp(o, "--steps"))
    return parse_i64(v, &a->steps) || a->steps < 0;
  else if (!strcmp(o, "--tp"))
    return parse_i64(v, &a->tp) || a->tp <= 0;
  else if (!strcmp(o, "--dp-shard"))
    return parse_i64(v, &a->dp_shard) || a->dp_shard <= 0;
  else if (!strcmp(o, "--dp-replicate"))
    return parse_i64(v, &a->dp_replicate) || a->dp_replicate <= 0;
  else if (!strcmp(o, "--lr")) {
    *have_lr = 1;
    return parse_f64(v, &a->lr) || a->lr < 0;
  } else if (!strcmp(o, "--clip"))
    return parse_f64(v, &a->clip) || a->clip <= 0;
  else if (!strcmp(o, "--weight-decay"))
    return parse_f64(v, &a->wd) || a->wd < 0;
  else
    return -1;
  return 0;
}

/* Check the parsed arguments as a whole: -1 (with a message) when wrong. */
static int check_args(const args *a, int have_lr) {
  const char *miss = !a->model    ? "--model"
                     : !a->tokens ? "--tokens"
                     : !a->batch  ? "--batch"
                     : !a->seq    ? "--seq"
                     : !have_lr   ? "--lr"
                                  : NULL;
  if (miss) {
    fprintf(stderr, "tpx-train: %s is required\n", miss);
    return -1;
  }
  if (strcmp(a->backend, "local") && strcmp(a->backend, "mpi")) {
    fprintf(stderr, "tpx-train: --backend must be local or mpi, not '%s'\n",
            a->backend);
    return -1;
  }
  if (strcmp(a->format, "text") && strcmp(a->format, "json")) {
    fprintf(stderr, "tpx-train: --format must be text or json, not '%s'\n",
            a->format);
    return -1;
  }
  if (a->tp * a->dp_shard * a->dp_replicate > TPX_LOCAL_MAX_RANKS) {
    fprintf(stderr, "tpx-train: world larger than %d ranks\n",
            TPX_LOCAL_MAX_RANKS);
    return -1;
  }
  return 0;
}

static int parse_args(int argc, char **argv, args *a) {
  memset(a, 0, sizeof *a);
  a->tp = a->dp_shard = a->dp_replicate = 1;
  a->backend = "local";
  a->format = "text";
  a->clip = -1;
  int have_lr = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (!strcmp(o, "--sp")) {
      a->sp = 1;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "tpx-train: %s needs a value\n", o);
      return -1;
    }
    const char *v = argv[++i];
    int bad = set_option(a, o, v, &have_lr);
    if (bad < 0) {
      fprintf(stderr, "tpx-train: unknown option %s\n", o);
      return -1;
    }
    if (bad) {
      fprintf(stderr, "tpx-train: bad value for %s: '%s'\n", o, v);
      return -1;
    }
  }
  return check_args(a, have_lr);
}

/* ---- inputs ---- */

static int32_t *read_tokens(const args *a, int64_t vocab, tpx_error *err) {
  FILE *f = fopen(a->tokens, "rb");
  if (!f) {
    tpx_error_set(err, TPX_IO, "%s: cannot open: %s", a->tokens,
                  strerror(errno));
    return NULL;
  }
  struct stat sb;
  int64_t want = a->batch * (a->seq + 1);
  if (fstat(fileno(f), &sb) || (int64_t)sb.st_size != want * 4) {
    fclose(f);
    tpx_error_set(err, TPX_VALIDATION,
                  "%s: %lld bytes, but --batch %lld --seq %lld needs int32 "
                  "[%lld, %lld] = %lld bytes",
                  a->tokens, (long long)sb.st_size, (long long)a->batch,
                  (long long)a->seq, (long long)a->batch,
                  (long long)(a->seq + 1), (long long)(want * 4));
    return NULL;
  }
  unsigned char *raw = malloc((size_t)want * 4);
  int32_t *t = malloc((size_t)want * sizeof(int32_t));
  if (!raw || !t || fread(raw, 4, (size_t)want, f) != (size_t)want) {
    fclose(f);
    free(raw);
    free(t);
    tpx_error_set(err, TPX_IO, "%s: short read", a->tokens);
    return NULL;
  }
  fclose(f);
  for (int64_t i = 0; i < want; i++) {
    const unsigned char *b = raw + 4 * i; /* little-endian */
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                 (uint32_t)b[3] << 24;
    t[i] = (int32_t)u;
    if (t[i] < 0 || t[i] >= vocab) {
      tpx_error_set(err, TPX_VALIDATION,
                    "%s: token %lld (row %lld, col %lld) is %d, outside "
                    "[0, %lld)",
                    a->tokens, (long long)i, (long long)(i / (a->seq + 1)),
                    (long long)(i % (a->seq + 1)), t[i], (long long)vocab);
      free(raw);
      free(t);
      return NULL;
    }
  }
  free(raw);
  return t;
}

/* The model tree: the family plugin's skeleton checked against the
 * safetensors headers (as `tpx plan --weights` does), else the headers. */
static tpx_status load_model(const args *a, tpx_registry *reg,
                             tpx_model **model, tpx_error *err) {
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "%s/config.json", a->model);
  tpx_status st = tpx_model_load_config(cfg, model, err);
  if (st)
    return st;
  tpx_error serr = {0};
  if (tpx_registry_build_skeleton(reg, *model, &serr) == TPX_OK &&
      tpx_model_add_safetensors(*model, a->model, &serr) == TPX_OK)
    return TPX_OK;
  tpx_model_destroy(*model);
  *model = NULL;
  if ((st = tpx_model_load_config(cfg, model, err)))
    return st;
  return tpx_model_add_safetensors(*model, a->model, err);
}

/* ---- one rank ---- */

/* Each rank reads only its own bytes: its slice of every parameter, straight
 * into the storage the glue names (the runtime's shard buffers). */
static tpx_status load_weights(const job *j, int64_t rank, tr_rank *r,
                               tpx_error *err) {
  size_t np = tpx_model_num_params(j->model);
  tpx_checkpoint_dest *d = calloc(np ? np : 1, sizeof *d);
  if (!d)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t p = 0; p < np; p++) d[p] = tr_rank_dest(r, (int64_t)p);
  tpx_status s = tpx_checkpoint_read_rank(j->reader, j->sh, rank, d, err);
  free(d);
  return s;
}

/* CPU seconds of the process (every rank thread with the local backend) */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This rank's rows of the batch: those of its data-parallel coordinate. */
static tpx_status my_rows(const job *j, int64_t rank, const int32_t **rows,
                          tpx_error *err) {
  const args *a = j->a;
  int64_t c[3] = {0, 0, 0}; /* dp_replicate, dp_shard, tp */
  tpx_status s = tpx_mesh_coords(tpx_sharding_mesh(j->sh), rank, c, err);
  int64_t dp = c[0] * a->dp_shard + c[1];
  int64_t rows_per_rank = a->batch / (a->dp_replicate * a->dp_shard);
  *rows = j->tokens + dp * rows_per_rank * (a->seq + 1);
  return s;
}

/* The training loop of one rank: forward + backward, (the gradients'
 * dump), the optimizer step, the step's mean loss for the report. */
static tpx_status train(const job *j, tr_net *net, tr_rank *r, int64_t rank,
                        tpx_error *err) {
  const args *a = j->a;
  const int32_t *rows;
  int64_t b = a->batch / (a->dp_replicate * a->dp_shard);
  tpx_status s = my_rows(j, rank, &rows, err);
  /* --dump-grads: the gathered pre-clip gradients of every step; rank 0's
   * open / write errors (ws) are reported after the run */
  FILE *gf = NULL;
  tpx_status ws = TPX_OK;
  if (!s && a->dump_grads)
    ws = tr_dump_open(a->dump_grads, j->model, a->steps, r, &gf, err);
  for (int64_t step = 0; !s && step < a->steps; step++) {
    double loss = 0, gn = 0;
    double t0 = tr_now(), c0 = tr_rank_comm_seconds(r), p0 = cpu_now();
    s = tr_net_step(net, r, rows, b, a->seq, &loss, err);
    double tg = tr_now();
    if (!s && a->dump_grads)
      s = tr_dump_append(gf, a->dump_grads, j->model, r, 1, s, &ws, err);
    t0 += tr_now() - tg; /* not timed */
    if (!s)
      s = tr_optimizer_step(r, a->clip, a->lr, a->wd, step + 1, &gn, err);
    double t1 = tr_now(), c1 = tr_rank_comm_seconds(r);
    if (!s)
      s = tr_dp_mean(r, &loss, err); /* reporting only: not timed */
    if (!s && rank == 0)
      j->steps[step] =
          (step_record){loss, gn, t1 - t0, c1 - c0, cpu_now() - p0};
  }
  if (a->dump_grads)
    s = tr_dump_close(gf, a->dump_grads, s ? s : ws, err);
  return s;
}

static tpx_status rank_main(tpx_comm *world, void *arg, tpx_error *err) {
  job *j = arg;
  tr_net net;
  tr_rank *r = NULL;
  int64_t world_size = tpx_mesh_world_size(tpx_sharding_mesh(j->sh));
  int64_t rank = world ? tpx_comm_rank(world) : 0;
  tr_rank_setup su = {j->model, j->sh, world, world_size, rank};
  tpx_status s = tr_net_init(&net, j->model, err);
  if (!s)
    s = tr_rank_create(&su, &r, err);
  if (!s)
    s = load_weights(j, rank, r, err);
  if (!s)
    s = train(j, &net, r, rank, err);
  if (!s && rank == 0)
    j->has_state = tr_rank_state_bytes(r, j->state);
  if (!s && j->a->dump)
    s = tr_dump_params(j->a->dump, j->model, r, err);
  tr_rank_destroy(r);
  tr_net_free(&net);
  return s;
}

/* ---- the plan and the sharding ---- */

static int first_error(const tpx_diag_list *dl, const char *what,
                       tpx_error *err) {
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    if (!tpx_diag_get(dl, i, &d, NULL) && d.level == TPX_DIAG_ERROR) {
      tpx_error_set(err, TPX_VALIDATION, "%s: %s: %s", what, d.code, d.message);
      return 1;
    }
  }
  return 0;
}

static int build_sharding(const args *a, tpx_registry *reg,
                          const tpx_model *model, tpx_mesh **mesh,
                          tpx_selection **sel, tpx_diag_list *diags,
                          tpx_sharding **sh, tpx_error *err) {
  tpx_select_options so = TPX_SELECT_OPTIONS_INIT;
  so.tp_size = a->tp;
  so.sequence_parallel = a->sp;
  if (tpx_select_plan(reg, model, &so, sel, diags, err))
    return 1;
  if (first_error(diags, "plan", err))
    return 1;
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {a->dp_replicate, a->dp_shard, a->tp};
  if (tpx_mesh_create(names, sizes, 3, mesh, err))
    return 1;
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.param_dtype = TPX_DTYPE_F32; /* f32 training: no mixed precision */
  /* no data-parallel rank: nothing to shard, the runtime keeps the TP-local
   * tensors themselves (no gather copies) */
  opts.fsdp = a->dp_shard * a->dp_replicate > 1;
  /* the selection whole: plan, FSDP units, fp32 parameters */
  opts.selection = *sel;
  if (tpx_sharding_create(model, NULL, *mesh, &opts, sh, err))
    return 1;
  return first_error(tpx_sharding_diagnostics(*sh), "sharding", err);
}

/* ---- the report (rank 0) ---- */

static void print_json(const args *a, const job *j) {
  printf("{\"steps\":[");
  for (int64_t i = 0; i < a->steps; i++) {
    /* JSON has no NaN / inf: a non-finite value is null */
    const step_record *s = &j->steps[i];
    char l[32] = "null", g[32] = "null";
    if (isfinite(s->loss))
      snprintf(l, sizeof l, "%.17g", s->loss);
    if (isfinite(s->grad_norm))
      snprintf(g, sizeof g, "%.17g", s->grad_norm);
    printf("%s{\"step\":%lld,\"loss\":%s,\"grad_norm\":%s}", i ? "," : "",
           (long long)i, l, g);
  }
  printf("]");
  /* what rank 0 allocated, comparable with tpx plan's per_rank memory */
  if (j->has_state)
    printf(",\"memory\":{\"rank\":0,\"params\":%lld,\"grads\":%lld,"
           "\"optimizer\":%lld}",
           (long long)j->state[0], (long long)j->state[1],
           (long long)j->state[2]);
  printf("}\n");
}

static void print_text(const args *a, const job *j, int mpi) {
  printf("tpx-train: %s, mesh dp_replicate=%lld dp_shard=%lld tp=%lld%s, "
         "%s backend\n",
         tpx_model_architecture(j->model, 0), (long long)a->dp_replicate,
         (long long)a->dp_shard, (long long)a->tp, a->sp ? " sp" : "",
         a->backend);
  for (int64_t i = 0; i < a->steps; i++) {
    const step_record *s = &j->steps[i];
    printf("step %lld  loss %.6f  grad_norm %.6f  time %.3f s  "
           "collectives %.3f s  cpu %.3f s\n",
           (long long)i, s->loss, s->grad_norm, s->seconds, s->comm, s->cpu);
  }
  /* steady state: the steps after the first (warm-up) */
  double ts = 0, cs = 0, ps = 0;
  int64_t n = 0;
  for (int64_t i = a->steps > 1 ? 1 : 0; i < a->steps; i++, n++) {
    ts += j->steps[i].seconds;
    cs += j->steps[i].comm;
    ps += j->steps[i].cpu;
  }
  if (n && ts > 0)
    printf("throughput %.1f tokens/s  step %.4f s  collectives %.1f%% of the "
           "step (rank 0)  cpu %.4f s/step%s\n",
           (double)(a->batch * a->seq) * (double)n / ts, ts / (double)n,
           100.0 * cs / ts, ps / (double)n,
           mpi ? " (this process)" : " (all ranks)");
}

/* ---- main ---- */

/* --dump-grads is opened by rank 0 inside the ranks, before the first
 * step: failing there alone would leave the other ranks waiting in the
 * step's collectives. So check it can be created first, and let every
 * process know the root's verdict. */
static int dump_grads_writable(const args *a, int root, int mpi) {
  int bad = 0;
  if (root) {
    FILE *f = fopen(a->dump_grads, "wb");
    bad = !f || fclose(f) != 0;
  }
#if TPX_HAVE_MPI
  if (mpi)
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
#else
  (void)mpi;
#endif
  return !bad;
}

/* Everything a run holds, released by run_free. */
typedef struct run {
  tpx_registry *reg;
  tpx_model *model;
  tpx_mesh *mesh;
  tpx_selection *sel;
  tpx_diag_list *diags;
  tpx_sharding *sh;
  tpx_checkpoint_reader *reader;
  int32_t *tokens;
  step_record *steps;
} run;

static void run_free(run *r) {
  tpx_checkpoint_reader_destroy(r->reader);
  tpx_sharding_destroy(r->sh);
  tpx_selection_destroy(r->sel);
  tpx_diag_list_destroy(r->diags);
  tpx_mesh_destroy(r->mesh);
  tpx_model_destroy(r->model);
  tpx_registry_destroy(r->reg);
  free(r->tokens);
  free(r->steps);
}

/* Load the model, the tokens, the plan and its sharding, and open the
 * checkpoint: everything the ranks need. */
static tpx_status prepare(const args *a, run *r, tpx_error *err) {
  if (tpx_registry_create(&r->reg, err) ||
      tpx_registry_set_isolation(r->reg, 0, 30, err) ||
      tpx_registry_load_default(r->reg, err) ||
      tpx_diag_list_create(&r->diags, err) ||
      load_model(a, r->reg, &r->model, err))
    return TPX_VALIDATION;
  tr_config cfg;
  if (tr_config_read(r->model, &cfg, err))
    return TPX_VALIDATION;
  if (!(r->tokens = read_tokens(a, cfg.vocab, err)))
    return TPX_VALIDATION;
  if (build_sharding(a, r->reg, r->model, &r->mesh, &r->sel, r->diags, &r->sh,
                     err))
    return TPX_VALIDATION;
  tpx_checkpoint_reader_options ro = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  ro.num_threads = 2;
  if (tpx_checkpoint_reader_create(a->model, &ro, &r->reader, err) ||
      tpx_checkpoint_check_model(r->reader, r->model, err))
    return TPX_VALIDATION;
  return TPX_OK;
}

/* Initialise MPI and check its world matches the mesh; the exit status
 * to leave with (2) or 0. */
static int mpi_start(int *argc, char ***argv, int64_t world, int *root,
                     tpx_comm **comm, tpx_error *err) {
#if TPX_HAVE_MPI
  MPI_Init(argc, argv);
  int ws = 0, wr = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ws);
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  *root = wr == 0;
  if (ws != world) {
    if (*root)
      fprintf(stderr,
              "tpx-train: mpirun started %d ranks, the mesh needs %lld\n", ws,
              (long long)world);
    MPI_Finalize();
    return 2;
  }
  MPI_Comm c = MPI_COMM_WORLD;
  tpx_comm_create_mpi(&c, comm, err);
  return 0;
#else
  (void)argc, (void)argv, (void)world, (void)root, (void)comm, (void)err;
  fprintf(stderr, "tpx-train: built without MPI (--backend mpi unavailable)\n");
  return 2;
#endif
}

int main(int argc, char **argv) {
  args a;
#if defined(M_MMAP_THRESHOLD)
  /* the runtime's buffers are large and long-lived: keep freed blocks in
   * the heap instead of a fresh mmap (page faults) for each */
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  if (parse_args(argc, argv, &a)) {
    usage(stderr);
    return 2;
  }
  int mpi = !strcmp(a.backend, "mpi");
  int64_t world = a.tp * a.dp_shard * a.dp_replicate;
  tpx_comm *mpi_world = NULL;
  int code = 1, root = 1;
  tpx_error err = {0};
  run r = {0};
  if (mpi) {
    int rc = mpi_start(&argc, &argv, world, &root, &mpi_world, &err);
    if (rc)
      return rc;
    if (!mpi_world)
      goto out;
  }
  r.steps = calloc((size_t)(a.steps + 1), sizeof *r.steps);
  if (!r.steps) {
    tpx_error_set(&err, TPX_NO_MEMORY, "out of memory");
    goto out;
  }
  if (a.batch % (a.dp_replicate * a.dp_shard)) {
    tpx_error_set(&err, TPX_INVALID_ARGUMENT,
                  "--batch %lld is not divisible by dp_replicate x dp_shard = "
                  "%lld",
                  (long long)a.batch, (long long)(a.dp_replicate * a.dp_shard));
    code = 2;
    goto out;
  }
  if (a.dump_grads && !dump_grads_writable(&a, root, mpi)) {
    tpx_error_set(&err, TPX_IO, "%s: cannot write", a.dump_grads);
    goto out;
  }
  if (prepare(&a, &r, &err))
    goto out;
  job j = {&a, r.model, r.sh, r.tokens, r.reader, r.steps, 0, {0}};
  tpx_status s = mpi ? rank_main(mpi_world, &j, &err)
                     : tpx_local_run((int)world, rank_main, &j, &err);
  if (s)
    goto out;
  code = 0;
  if (root && !strcmp(a.format, "json"))
    print_json(&a, &j);
  else if (root)
    print_text(&a, &j, mpi);
out:
  if (code && root)
    fprintf(stderr, "tpx-train: %s\n", err.message[0] ? err.message : "failed");
  run_free(&r);
  tpx_comm_destroy(mpi_world);
#if TPX_HAVE_MPI
  if (mpi)
    MPI_Finalize();
#endif
  return code;
}
