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

#include "glue.h"
#include "tpx_config.h"

#if TPX_HAVE_MPI
#include <mpi.h>
#endif

typedef struct args {
  const char *model, *tokens, *backend, *format, *dump, *dump_grads;
  int64_t batch, seq, steps, tp, dp_shard, dp_replicate;
  double lr, clip, wd;
  int sp;
} args;

typedef struct job {
  const args *a;
  const tpx_model *model;
  const tpx_sharding *sh;
  const int32_t *tokens;
  const tpx_checkpoint_reader *reader;
  double *loss, *gnorm; /* [steps], filled by rank 0 */
  double *step_s, *comm_s; /* [steps], wall seconds on rank 0 */
  double *cpu_s;           /* [steps], CPU seconds of the whole process */
  tpx_error rank_err;
  int has_state;      /* rank 0's runtime reported its state bytes */
  int64_t state[3];   /* rank 0: params, grads, optimizer bytes (after the
                         last step, so the AdamW state exists) */
} job;

static void usage(FILE *f) {
  fprintf(f,
          "usage: tpx-train --model DIR --tokens FILE --batch B --seq T --steps K --lr LR\n"
          "                 [--clip C] [--weight-decay W] [--tp N] [--dp-shard M]\n"
          "                 [--dp-replicate R] [--sp] [--backend local|mpi]\n"
          "                 [--format text|json] [--dump-params FILE] [--dump-grads FILE]\n\n"
          "Train K AdamW steps (betas 0.9/0.999, eps 1e-8) of an HF LlamaForCausalLM,\n"
          "Qwen2ForCausalLM or Qwen3ForCausalLM checkpoint (config.json +\n"
          "model.safetensors) in f32 on CPU, on the mesh dp_replicate x dp_shard x tp with\n"
          "the TP plan tpx selects. FILE holds little-endian int32 [B, T+1]: inputs\n"
          "[:, :T], targets [:, 1:], the same batch every step, split over the data-parallel\n"
          "ranks. --dump-params writes the parameters after the last step (gathered) as an\n"
          "f32 safetensors file, for comparisons; --dump-grads the gathered pre-clip\n"
          "gradients of every step k, tensors named PARAM@k.\n"
          "Exit status: 0 ok, 1 bad input or a failed run, 2 bad arguments.\n");
}

static int parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end) return -1;
  *out = v;
  return 0;
}

static int parse_f64(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end) return -1;
  *out = v;
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
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage(stdout); exit(0); }
    if (!strcmp(o, "--sp")) { a->sp = 1; continue; }
    if (i + 1 >= argc) { fprintf(stderr, "tpx-train: %s needs a value\n", o); return -1; }
    const char *v = argv[++i];
    int bad = 0;
    if (!strcmp(o, "--model")) a->model = v;
    else if (!strcmp(o, "--tokens")) a->tokens = v;
    else if (!strcmp(o, "--backend")) a->backend = v;
    else if (!strcmp(o, "--format")) a->format = v;
    else if (!strcmp(o, "--dump-params")) a->dump = v;
    else if (!strcmp(o, "--dump-grads")) a->dump_grads = v;
    else if (!strcmp(o, "--batch")) bad = parse_i64(v, &a->batch) || a->batch <= 0;
    else if (!strcmp(o, "--seq")) bad = parse_i64(v, &a->seq) || a->seq <= 0;
    else if (!strcmp(o, "--steps")) bad = parse_i64(v, &a->steps) || a->steps < 0;
    else if (!strcmp(o, "--tp")) bad = parse_i64(v, &a->tp) || a->tp <= 0;
    else if (!strcmp(o, "--dp-shard")) bad = parse_i64(v, &a->dp_shard) || a->dp_shard <= 0;
    else if (!strcmp(o, "--dp-replicate")) bad = parse_i64(v, &a->dp_replicate) || a->dp_replicate <= 0;
    else if (!strcmp(o, "--lr")) { bad = parse_f64(v, &a->lr) || a->lr < 0; have_lr = 1; }
    else if (!strcmp(o, "--clip")) bad = parse_f64(v, &a->clip) || a->clip <= 0;
    else if (!strcmp(o, "--weight-decay")) bad = parse_f64(v, &a->wd) || a->wd < 0;
    else { fprintf(stderr, "tpx-train: unknown option %s\n", o); return -1; }
    if (bad) { fprintf(stderr, "tpx-train: bad value for %s: '%s'\n", o, v); return -1; }
  }
  const char *miss = !a->model ? "--model" : !a->tokens ? "--tokens" : !a->batch ? "--batch"
                     : !a->seq ? "--seq" : !have_lr ? "--lr" : NULL;
  if (miss) { fprintf(stderr, "tpx-train: %s is required\n", miss); return -1; }
  if (strcmp(a->backend, "local") && strcmp(a->backend, "mpi")) {
    fprintf(stderr, "tpx-train: --backend must be local or mpi, not '%s'\n", a->backend);
    return -1;
  }
  if (strcmp(a->format, "text") && strcmp(a->format, "json")) {
    fprintf(stderr, "tpx-train: --format must be text or json, not '%s'\n", a->format);
    return -1;
  }
  if (a->tp * a->dp_shard * a->dp_replicate > TPX_LOCAL_MAX_RANKS) {
    fprintf(stderr, "tpx-train: world larger than %d ranks\n", TPX_LOCAL_MAX_RANKS);
    return -1;
  }
  return 0;
}

/* ---- inputs ---- */

static int32_t *read_tokens(const args *a, int64_t vocab, tpx_error *err) {
  FILE *f = fopen(a->tokens, "rb");
  if (!f) { tpx_error_set(err, TPX_IO, "%s: cannot open: %s", a->tokens, strerror(errno)); return NULL; }
  struct stat sb;
  int64_t want = a->batch * (a->seq + 1);
  if (fstat(fileno(f), &sb) || (int64_t)sb.st_size != want * 4) {
    fclose(f);
    tpx_error_set(err, TPX_VALIDATION,
                  "%s: %lld bytes, but --batch %lld --seq %lld needs int32 [%lld, %lld] = %lld bytes",
                  a->tokens, (long long)sb.st_size, (long long)a->batch, (long long)a->seq,
                  (long long)a->batch, (long long)(a->seq + 1), (long long)(want * 4));
    return NULL;
  }
  unsigned char *raw = malloc((size_t)want * 4);
  int32_t *t = malloc((size_t)want * sizeof(int32_t));
  if (!raw || !t || fread(raw, 4, (size_t)want, f) != (size_t)want) {
    fclose(f); free(raw); free(t);
    tpx_error_set(err, TPX_IO, "%s: short read", a->tokens);
    return NULL;
  }
  fclose(f);
  for (int64_t i = 0; i < want; i++) {
    uint32_t u = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                 (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
    t[i] = (int32_t)u;
    if (t[i] < 0 || t[i] >= vocab) {
      tpx_error_set(err, TPX_VALIDATION, "%s: token %lld (row %lld, col %lld) is %d, outside [0, %lld)",
                    a->tokens, (long long)i, (long long)(i / (a->seq + 1)),
                    (long long)(i % (a->seq + 1)), t[i], (long long)vocab);
      free(raw); free(t);
      return NULL;
    }
  }
  free(raw);
  return t;
}

/* The model tree: the family plugin's skeleton checked against the
 * safetensors headers (as `tpx plan --weights` does), else the headers. */
static tpx_status load_model(const args *a, tpx_registry *reg, tpx_model **model, tpx_error *err) {
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "%s/config.json", a->model);
  tpx_status st = tpx_model_load_config(cfg, model, err);
  if (st) return st;
  tpx_error serr = {0};
  if (tpx_registry_build_skeleton(reg, *model, &serr) == TPX_OK &&
      tpx_model_add_safetensors(*model, a->model, &serr) == TPX_OK)
    return TPX_OK;
  tpx_model_destroy(*model);
  *model = NULL;
  if ((st = tpx_model_load_config(cfg, model, err))) return st;
  return tpx_model_add_safetensors(*model, a->model, err);
}

/* ---- one rank ---- */

/* Each rank reads only its own bytes: its slice of every parameter, straight
 * into the storage the glue names (the runtime's shard buffers). */
static tpx_status load_weights(const tpx_checkpoint_reader *rd, const tpx_model *model,
                               const tpx_sharding *sh, int64_t rank, tr_rank *r,
                               tpx_error *err) {
  size_t np = tpx_model_num_params(model);
  tpx_checkpoint_dest *d = calloc(np ? np : 1, sizeof *d);
  if (!d) return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t p = 0; p < np; p++) d[p] = tr_rank_dest(r, (int64_t)p);
  tpx_status s = tpx_checkpoint_read_rank(rd, sh, rank, d, err);
  free(d);
  return s;
}

/* Header of a safetensors file holding every non-tied parameter in f32:
 * once (steps 0, named as the parameters) or for each of `steps` steps k
 * (named PARAM@k, step-major). */
static char *dump_header(const tpx_model *model, int64_t steps, size_t *len) {
  size_t cap = 4096, n = 0;
  char *h = malloc(cap);
  int64_t off = 0;
  if (!h) return NULL;
  n += (size_t)snprintf(h, cap, "{");
  for (int64_t k = 0; k < (steps ? steps : 1); k++)
  for (size_t p = 0; p < tpx_model_num_params(model); p++) {
    tpx_param_info pi;
    tpx_model_param(model, (int64_t)p, &pi, NULL);
    if (pi.tied_to >= 0) continue;
    char dims[256] = "";
    int64_t numel = 1;
    for (int d = 0; d < pi.ndim; d++) {
      size_t dl = strlen(dims);
      snprintf(dims + dl, sizeof dims - dl, "%s%lld", d ? "," : "", (long long)pi.shape[d]);
      numel *= pi.shape[d];
    }
    char item[1024], suffix[32] = "";
    if (steps) snprintf(suffix, sizeof suffix, "@%lld", (long long)k);
    int il = snprintf(item, sizeof item, "%s\"%s%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%lld,%lld]}",
                      n > 1 ? "," : "", pi.fqn, suffix, dims, (long long)off, (long long)(off + 4 * numel));
    off += 4 * numel;
    if (n + (size_t)il + 16 > cap) {
      char *nh = realloc(h, cap = 2 * cap + (size_t)il);
      if (!nh) { free(h); return NULL; }
      h = nh;
    }
    memcpy(h + n, item, (size_t)il);
    n += (size_t)il;
  }
  h[n++] = '}';
  while (n % 8) h[n++] = ' ';
  *len = n;
  return h;
}

/* Rank 0 creates `path` and writes the header (of `steps` steps, see
 * dump_header); the other ranks get NULL and TPX_OK. */
static tpx_status dump_open(const char *path, const tpx_model *model, int64_t steps, tr_rank *r,
                            FILE **out, tpx_error *err) {
  *out = NULL;
  if (!tr_rank_is_root(r)) return TPX_OK;
  size_t hl = 0;
  char *h = dump_header(model, steps, &hl);
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  tpx_status s = TPX_OK;
  if (!h) s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  else if (!(*out = fopen(path, "wb")) || fwrite(len8, 1, 8, *out) != 8 ||
           fwrite(h, 1, hl, *out) != hl)
    s = tpx_error_set(err, TPX_IO, "%s: cannot write", path);
  free(h);
  return s;
}

/* Append every non-tied parameter (grads 0) or its gradient (grads 1),
 * gathered, to f (rank 0; f NULL elsewhere). Collective: every rank calls
 * it, and every rank joins each gather even after an error. A write error
 * (rank 0 alone) goes to *ws, not to the returned status, so it never
 * takes rank 0 out of collectives the other ranks still run. */
static tpx_status dump_append(FILE *f, const char *path, const tpx_model *model, tr_rank *r,
                              int grads, tpx_status s, tpx_status *ws, tpx_error *err) {
  float *buf = NULL;
  for (size_t p = 0; p < tpx_model_num_params(model); p++) {
    tpx_param_info pi;
    tpx_model_param(model, (int64_t)p, &pi, NULL);
    if (pi.tied_to >= 0) continue;
    int64_t n = 1;
    for (int d = 0; d < pi.ndim; d++) n *= pi.shape[d];
    float *nb = realloc(buf, sizeof(float) * (size_t)(n ? n : 1));
    if (!nb) { s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory"); break; }
    buf = nb;
    tpx_status g = grads ? tr_rank_gather_grad(r, (int64_t)p, buf, err)
                         : tr_rank_gather(r, (int64_t)p, buf, err); /* collective */
    if (g && !s) s = g;
    if (f && !s && !*ws && fwrite(buf, sizeof(float), (size_t)n, f) != (size_t)n)
      *ws = tpx_error_set(err, TPX_IO, "%s: write failed", path);
  }
  free(buf);
  return s;
}

static tpx_status dump_close(FILE *f, const char *path, tpx_status s, tpx_error *err) {
  if (f && fclose(f) && !s) s = tpx_error_set(err, TPX_IO, "%s: write failed", path);
  return s;
}

/* --dump-params: the gathered parameters after the last step, as an f32
 * safetensors file (rank 0 writes; every rank joins each gather). */
static tpx_status dump_params(const args *a, const tpx_model *model, tr_rank *r, tpx_error *err) {
  FILE *f = NULL;
  tpx_status ws = dump_open(a->dump, model, 0, r, &f, err);
  tpx_status s = dump_append(f, a->dump, model, r, 0, TPX_OK, &ws, err);
  return dump_close(f, a->dump, s ? s : ws, err);
}

/* CPU seconds of the process (every rank thread with the local backend) */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tpx_status rank_main(tpx_comm *world, void *arg, tpx_error *err) {
  job *j = arg;
  const args *a = j->a;
  tr_net net;
  tr_rank *r = NULL;
  tpx_status s = tr_net_init(&net, j->model, err);
  int64_t world_size = tpx_mesh_world_size(tpx_sharding_mesh(j->sh));
  int64_t rank = world ? tpx_comm_rank(world) : 0;
  tr_rank_setup su = {j->model, j->sh, world, world_size, rank};
  if (!s) s = tr_rank_create(&su, &r, err);
  if (!s) s = load_weights(j->reader, j->model, j->sh, rank, r, err);
  /* this rank's rows of the batch: its data-parallel coordinate */
  int64_t coords[3] = {0, 0, 0};
  if (!s) s = tpx_mesh_coords(tpx_sharding_mesh(j->sh), rank, coords, err);
  int64_t ndp = a->dp_replicate * a->dp_shard, dp = coords[0] * a->dp_shard + coords[1];
  int64_t bl = a->batch / ndp;
  const int32_t *mine = j->tokens + dp * bl * (a->seq + 1);
  /* --dump-grads: the gathered pre-clip gradients of every step; rank 0's
   * open / write errors (ws) are reported after the run */
  FILE *gf = NULL;
  tpx_status ws = TPX_OK;
  if (!s && a->dump_grads) ws = dump_open(a->dump_grads, j->model, a->steps, r, &gf, err);
  for (int64_t step = 0; !s && step < a->steps; step++) {
    double loss = 0, gn = 0, t0 = tr_now(), c0 = tr_rank_comm_seconds(r), p0 = cpu_now();
    s = tr_net_step(&net, r, mine, bl, a->seq, &loss, err);
    double tg = tr_now();
    if (!s && a->dump_grads) s = dump_append(gf, a->dump_grads, j->model, r, 1, s, &ws, err);
    t0 += tr_now() - tg; /* not timed */
    if (!s) s = tr_optimizer_step(r, a->clip, a->lr, a->wd, step + 1, &gn, err);
    double t1 = tr_now(), c1 = tr_rank_comm_seconds(r);
    if (!s) s = tr_dp_mean(r, &loss, err); /* reporting only: not timed */
    if (!s && rank == 0) {
      j->loss[step] = loss; j->gnorm[step] = gn;
      j->step_s[step] = t1 - t0; j->comm_s[step] = c1 - c0; j->cpu_s[step] = cpu_now() - p0;
    }
  }
  if (a->dump_grads) s = dump_close(gf, a->dump_grads, s ? s : ws, err);
  if (!s && rank == 0) j->has_state = tr_rank_state_bytes(r, j->state);
  if (!s && a->dump) s = dump_params(a, j->model, r, err);
  tr_rank_destroy(r);
  tr_net_free(&net);
  return s;
}

/* ---- main ---- */

static int first_error(const tpx_diag_list *dl, const char *what, tpx_error *err) {
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    if (!tpx_diag_get(dl, i, &d, NULL) && d.level == TPX_DIAG_ERROR) {
      tpx_error_set(err, TPX_VALIDATION, "%s: %s: %s", what, d.code, d.message);
      return 1;
    }
  }
  return 0;
}

static int build_sharding(const args *a, tpx_registry *reg, const tpx_model *model,
                          tpx_mesh **mesh, tpx_selection **sel, tpx_diag_list *diags,
                          tpx_sharding **sh, tpx_error *err) {
  tpx_select_options so = TPX_SELECT_OPTIONS_INIT;
  so.tp_size = a->tp;
  so.sequence_parallel = a->sp;
  if (tpx_select_plan(reg, model, &so, sel, diags, err)) return 1;
  if (first_error(diags, "plan", err)) return 1;
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {a->dp_replicate, a->dp_shard, a->tp};
  if (tpx_mesh_create(names, sizes, 3, mesh, err)) return 1;
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.param_dtype = TPX_DTYPE_F32; /* f32 training: no mixed precision */
  /* no data-parallel rank: nothing to shard, the runtime keeps the TP-local
   * tensors themselves (no gather copies) */
  opts.fsdp = a->dp_shard * a->dp_replicate > 1;
  /* the selection whole: plan, FSDP units, fp32 parameters */
  opts.selection = *sel;
  tpx_status st = tpx_sharding_create(model, NULL, *mesh, &opts, sh, err);
  if (st) return 1;
  return first_error(tpx_sharding_diagnostics(*sh), "sharding", err);
}

int main(int argc, char **argv) {
  args a;
#if defined(M_MMAP_THRESHOLD)
  /* activations are large and short-lived: keep freed blocks in the heap
   * instead of a fresh mmap (page faults) for every one */
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  if (parse_args(argc, argv, &a)) { usage(stderr); return 2; }
  int mpi = !strcmp(a.backend, "mpi");
  int64_t world = a.tp * a.dp_shard * a.dp_replicate;
  tpx_comm *mpi_world = NULL;
  int code = 1, root = 1;
  tpx_error err = {0};
  tpx_registry *reg = NULL;
  tpx_model *model = NULL;
  tpx_mesh *mesh = NULL;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_sharding *sh = NULL;
  tpx_checkpoint_reader *reader = NULL;
  int32_t *tokens = NULL;
  double *loss = calloc((size_t)(a.steps + 1), sizeof(double));
  double *gnorm = calloc((size_t)(a.steps + 1), sizeof(double));
  double *step_s = calloc((size_t)(a.steps + 1), sizeof(double));
  double *comm_s = calloc((size_t)(a.steps + 1), sizeof(double));
  double *cpu_s = calloc((size_t)(a.steps + 1), sizeof(double));
  if (mpi) {
#if TPX_HAVE_MPI
    MPI_Init(&argc, &argv);
    int ws = 0, wr = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    root = wr == 0;
    if (ws != world) {
      if (root)
        fprintf(stderr, "tpx-train: mpirun started %d ranks, the mesh needs %lld\n", ws,
                (long long)world);
      MPI_Finalize();
      return 2;
    }
    MPI_Comm c = MPI_COMM_WORLD;
    if (tpx_comm_create_mpi(&c, &mpi_world, &err)) goto out;
#else
    fprintf(stderr, "tpx-train: built without MPI (--backend mpi unavailable)\n");
    return 2;
#endif
  }
  if (!loss || !gnorm || !step_s || !comm_s || !cpu_s) { tpx_error_set(&err, TPX_NO_MEMORY, "out of memory"); goto out; }
  if (a.batch % (a.dp_replicate * a.dp_shard)) {
    tpx_error_set(&err, TPX_INVALID_ARGUMENT,
                  "--batch %lld is not divisible by dp_replicate x dp_shard = %lld",
                  (long long)a.batch, (long long)(a.dp_replicate * a.dp_shard));
    code = 2;
    goto out;
  }
  /* --dump-grads is opened by rank 0 inside the ranks, before the first
   * step: failing there alone would leave the other ranks waiting in the
   * step's collectives. So check it can be created first, and let every
   * process know the root's verdict. */
  if (a.dump_grads) {
    int bad = 0;
    if (root) {
      FILE *f = fopen(a.dump_grads, "wb");
      bad = !f || fclose(f) != 0;
    }
#if TPX_HAVE_MPI
    if (mpi) MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
    if (bad) {
      tpx_error_set(&err, TPX_IO, "%s: cannot write", a.dump_grads);
      goto out;
    }
  }
  if (tpx_registry_create(&reg, &err) || tpx_registry_set_isolation(reg, 0, 30, &err) ||
      tpx_registry_load_default(reg, &err) || tpx_diag_list_create(&diags, &err) ||
      load_model(&a, reg, &model, &err))
    goto out;
  tr_net probe;
  if (tr_net_init(&probe, model, &err)) { tr_net_free(&probe); goto out; }
  int64_t vocab = probe.cfg.vocab;
  tr_net_free(&probe);
  if (!(tokens = read_tokens(&a, vocab, &err))) goto out;
  if (build_sharding(&a, reg, model, &mesh, &sel, diags, &sh, &err)) goto out;
  tpx_checkpoint_reader_options ro = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  ro.num_threads = 2;
  if (tpx_checkpoint_reader_create(a.model, &ro, &reader, &err) ||
      tpx_checkpoint_check_model(reader, model, &err))
    goto out;
  job j = {&a, model, sh, tokens, reader, loss, gnorm, step_s, comm_s, cpu_s, {0}, 0, {0}};
  tpx_status s = mpi ? rank_main(mpi_world, &j, &err) : tpx_local_run((int)world, rank_main, &j, &err);
  if (s) goto out;
  code = 0;
  if (root) {
    if (!strcmp(a.format, "json")) {
      printf("{\"steps\":[");
      /* JSON has no NaN / inf: a non-finite value is null */
      for (int64_t i = 0; i < a.steps; i++) {
        char l[32] = "null", g[32] = "null";
        if (isfinite(loss[i])) snprintf(l, sizeof l, "%.17g", loss[i]);
        if (isfinite(gnorm[i])) snprintf(g, sizeof g, "%.17g", gnorm[i]);
        printf("%s{\"step\":%lld,\"loss\":%s,\"grad_norm\":%s}", i ? "," : "",
               (long long)i, l, g);
      }
      printf("]");
      /* what rank 0 allocated, comparable with tpx plan's per_rank memory */
      if (j.has_state)
        printf(",\"memory\":{\"rank\":0,\"params\":%lld,\"grads\":%lld,\"optimizer\":%lld}",
               (long long)j.state[0], (long long)j.state[1], (long long)j.state[2]);
      printf("}\n");
    } else {
      printf("tpx-train: %s, mesh dp_replicate=%lld dp_shard=%lld tp=%lld%s, %s backend\n",
             tpx_model_architecture(model, 0), (long long)a.dp_replicate,
             (long long)a.dp_shard, (long long)a.tp, a.sp ? " sp" : "", a.backend);
      for (int64_t i = 0; i < a.steps; i++)
        printf("step %lld  loss %.6f  grad_norm %.6f  time %.3f s  collectives %.3f s  cpu %.3f s\n",
               (long long)i, loss[i], gnorm[i], step_s[i], comm_s[i], cpu_s[i]);
      /* steady state: the steps after the first (warm-up) */
      double ts = 0, cs = 0, ps = 0;
      int64_t n = 0;
      for (int64_t i = a.steps > 1 ? 1 : 0; i < a.steps; i++, n++) {
        ts += step_s[i]; cs += comm_s[i]; ps += cpu_s[i];
      }
      if (n && ts > 0)
        printf("throughput %.1f tokens/s  step %.4f s  collectives %.1f%% of the step (rank 0)"
               "  cpu %.4f s/step%s\n",
               (double)(a.batch * a.seq) * (double)n / ts, ts / (double)n, 100.0 * cs / ts,
               ps / (double)n, mpi ? " (this process)" : " (all ranks)");
    }
  }
out:
  if (code && root) fprintf(stderr, "tpx-train: %s\n", err.message[0] ? err.message : "failed");
  tpx_checkpoint_reader_destroy(reader);
  tpx_sharding_destroy(sh); tpx_selection_destroy(sel); tpx_diag_list_destroy(diags);
  tpx_mesh_destroy(mesh); tpx_model_destroy(model); tpx_registry_destroy(reg);
  tpx_comm_destroy(mpi_world);
  free(tokens); free(loss); free(gnorm); free(step_s); free(comm_s); free(cpu_s);
#if TPX_HAVE_MPI
  if (mpi) MPI_Finalize();
#endif
  return code;
}
