/* main.c — tpx-train: the reference trainer's command line. Loads an HF
 * checkpoint, lets tpx choose the TP plan through its plugins (as `tpx plan`
 * does), applies it with FSDP2 on a (dp_replicate, dp_shard, cp, tp) mesh,
 * and trains K AdamW steps on one token batch, ranks as threads (local) or
 * processes (mpi). Prints per-step loss and pre-clip grad norm. */
#include <errno.h>
#include <fcntl.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blas_kernel.h"
#include "dump.h"
#include "glue.h"
#include "outfile.h"
#include "startup.h"
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
  const char *cp_layout;  /* --cp-layout head-tail | contiguous */
  const char *dispatcher; /* --moe-dispatcher all-gather | all-to-all */
  int64_t batch, seq, steps;
  int64_t tp, dp_shard, dp_replicate;
  int64_t ep; /* expert parallelism: ranks sharing an MoE layer's experts */
  int64_t cp; /* context parallel: ranks sharing each sequence */
  double lr, clip, wd; /* clip <= 0: no clipping */
  double diverge;      /* --diverge-factor: stop when a step's loss is
                          above this x step 0's (0: never) */
  int sp;              /* sequence parallel */
  int offload;         /* --offload: FSDP2's CPUOffloadPolicy */
  tr_ckpt ckpt;        /* --activation-checkpointing[-modules] */
} args;

/* What rank 0 records of each step, for the report. */
typedef struct step_record {
  double loss, grad_norm;
  double seconds; /* wall, rank 0 */
  double comm;    /* of which in collectives */
  double cp;      /* of which in cp's K/V collectives */
  double moe;     /* of which in the MoE dispatch over ep (runtime_moe.h) */
  double cpu;     /* CPU seconds of the whole process */
} step_record;

/* What the ranks share: the inputs and rank 0's results. */
typedef struct job {
  const args *a;
  const tpx_model *model;
  const tpx_sharding *sh;
  const int32_t *tokens;
  const tpx_checkpoint_reader *reader;
  int mpi;
  step_record *steps;  /* [a->steps], filled by rank 0 */
  int has_memory;      /* rank 0's runtime reported its memory */
  tr_memory memory;    /* rank 0, after the last step (so the AdamW state
                          exists) */
  int64_t activations; /* rank 0's activation arena, bytes */
  int *out_errno;      /* rank 0's first failed flush of stdout (outfile.h) */
} job;

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: tpx-train --model DIR --tokens FILE --batch B --seq T --steps K"
      " --lr LR\n"
      "                 [--clip C] [--weight-decay W] [--tp N] [--dp-shard M]\n"
      "                 [--dp-replicate R] [--cp C] [--cp-layout head-tail|"
      "contiguous]\n"
      "                 [--ep N] [--moe-dispatcher all-gather|all-to-all]\n"
      "                 [--sp] [--offload] [--activation-checkpointing]\n"
      "                 [--activation-checkpointing-modules]"
      " [--backend local|mpi]\n"
      "                 [--format text|json] [--dump-params FILE]"
      " [--dump-grads FILE]\n"
      "                 [--diverge-factor F]\n"
      "       tpx-train --blas-info\n\n"
      "Train K AdamW steps (betas 0.9/0.999, eps 1e-8) of an HF"
      " LlamaForCausalLM,\n"
      "Qwen2ForCausalLM, Qwen3ForCausalLM, or MoE Qwen3MoeForCausalLM,\n"
      "MixtralForCausalLM or Glm4MoeForCausalLM checkpoint (config.json +\n"
      "model.safetensors) in f32 on CPU, on the mesh dp_replicate x dp_shard"
      " x cp x tp with\n"
      "the TP plan tpx selects. FILE holds little-endian int32 [B, T+1]:"
      " inputs\n"
      "[:, :T], targets [:, 1:], the same batch every step, split over the"
      " data-parallel\n"
      "ranks; with --cp each sequence is split over C ranks (head-tail: 2C"
      " chunks, rank i\n"
      "holds chunks i and 2C-1-i; contiguous: chunk i of C), FSDP shards"
      " over\n"
      "dp_shard x cp. --dump-params writes the parameters after the last step"
      " (gathered) as an\n"
      "f32 safetensors file, for comparisons; --dump-grads the gathered"
      " pre-clip\n"
      "gradients of every step k, tensors named PARAM@k. --offload keeps"
      " the sharded\n"
      "parameters, gradients and AdamW state in host memory (FSDP2's"
      " CPUOffloadPolicy;\n"
      "FSDP on even without data-parallel ranks); the memory report splits"
      " device and\n"
      "host bytes. --activation-checkpointing keeps each decoder layer's"
      " input only and\n"
      "runs the layer forward again in its backward (torch's"
      " checkpoint_wrapper, as\n"
      "Automodel wraps transformers' decoder layers);"
      " --activation-checkpointing-modules\n"
      "does it for each layer's self_attn and mlp on their own"
      " (Automodel's submodule\n"
      "wrapping). Either gives the same numbers as without, bit for bit;"
      " the memory\n"
      "report's activations (the arena's peak) drop.\n"
      "--ep N spreads an MoE model's routed experts over groups of N"
      " ranks (the MoE mesh\n"
      "ep_shard x ep over the same ranks; not Mixtral, whose experts"
      " tpx plans at ep 1);\n"
      "--moe-dispatcher says how tokens reach them: all-gather"
      " (Automodel's default)\n"
      "or all-to-all. MoE layers run at tp 1.\n"
      "A loss that is not finite, or above F x step 0's loss\n"
      "(--diverge-factor F, default 4; 0: no limit), stops the run as"
      " diverged.\n"
      "The header names the BLAS, its version, kernel and threads"
      " (--blas-info: that line\n"
      "alone); an OpenBLAS kernel older than the CPU (a fallback) is said"
      " and fixed by\n"
      "running again with OPENBLAS_CORETYPE (TPX_BLAS_FIX=0: said only).\n"
      "Exit status: 0 ok, 1 bad input or a failed run (diverged, output not"
      " written),\n"
      "2 bad arguments.\n");
}

/* ---- the command line ---- */

/* The options that take a value: where it goes and what it must be. */
typedef enum kind { TEXT, COUNT, POSITIVE, REAL_POSITIVE, REAL_NONNEG } kind;
static const struct option {
  const char *name;
  kind kind;
  size_t offset; /* in args */
} options[] = {
    {"--model", TEXT, offsetof(args, model)},
    {"--tokens", TEXT, offsetof(args, tokens)},
    {"--backend", TEXT, offsetof(args, backend)},
    {"--format", TEXT, offsetof(args, format)},
    {"--dump-params", TEXT, offsetof(args, dump)},
    {"--dump-grads", TEXT, offsetof(args, dump_grads)},
    {"--cp-layout", TEXT, offsetof(args, cp_layout)},
    {"--moe-dispatcher", TEXT, offsetof(args, dispatcher)},
    {"--ep", POSITIVE, offsetof(args, ep)},
    {"--batch", POSITIVE, offsetof(args, batch)},
    {"--seq", POSITIVE, offsetof(args, seq)},
    {"--steps", COUNT, offsetof(args, steps)},
    {"--tp", POSITIVE, offsetof(args, tp)},
    {"--dp-shard", POSITIVE, offsetof(args, dp_shard)},
    {"--dp-replicate", POSITIVE, offsetof(args, dp_replicate)},
    {"--cp", POSITIVE, offsetof(args, cp)},
    {"--lr", REAL_POSITIVE, offsetof(args, lr)},
    {"--clip", REAL_POSITIVE, offsetof(args, clip)},
    {"--weight-decay", REAL_NONNEG, offsetof(args, wd)},
    {"--diverge-factor", REAL_NONNEG, offsetof(args, diverge)},
};

/* Store v as option o's value; NULL, or why v is not one. */
static const char *set_value(args *a, const struct option *o, const char *v) {
  void *dst = (char *)a + o->offset;
  char *end;
  errno = 0;
  if (o->kind == TEXT) {
    *(const char **)dst = v;
    return NULL;
  }
  if (o->kind == COUNT || o->kind == POSITIVE) {
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end)
      return "not an integer";
    if (o->kind == POSITIVE && n <= 0)
      return "must be > 0";
    if (n < 0)
      return "must be >= 0";
    *(int64_t *)dst = n;
    return NULL;
  }
  double x = strtod(v, &end);
  if (errno || end == v || *end)
    return "not a number";
  if (!isfinite(x))
    return "must be a finite number";
  if (o->kind == REAL_POSITIVE && x <= 0)
    return "must be > 0";
  if (x < 0)
    return "must be >= 0";
  *(double *)dst = x;
  return NULL;
}

/* A bad command line: one line saying why, not the whole usage. */
static void bad_arg(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static void bad_arg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tpx-train: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "; see tpx-train --help\n");
  va_end(ap);
}

/* Check the parsed arguments as a whole: -1 (with a message) when wrong. */
static int check_args(const args *a) {
  const char *miss = !a->model      ? "--model"
                     : !a->tokens   ? "--tokens"
                     : !a->batch    ? "--batch"
                     : !a->seq      ? "--seq"
                     : isnan(a->lr) ? "--lr"
                                    : NULL;
  if (miss) {
    bad_arg("%s is required", miss);
    return -1;
  }
  if (strcmp(a->backend, "local") && strcmp(a->backend, "mpi")) {
    bad_arg("--backend must be local or mpi, not '%s'", a->backend);
    return -1;
  }
  if (strcmp(a->format, "text") && strcmp(a->format, "json")) {
    bad_arg("--format must be text or json, not '%s'", a->format);
    return -1;
  }
  const int64_t max = TPX_LOCAL_MAX_RANKS;
  if (a->tp > max || a->dp_shard > max || a->dp_replicate > max ||
      a->cp > max || a->tp * a->dp_shard * a->dp_replicate * a->cp > max) {
    bad_arg("the mesh dp_replicate x dp_shard x cp x tp = %lld x "
            "%lld x %lld x %lld has more than %lld ranks",
            (long long)a->dp_replicate, (long long)a->dp_shard,
            (long long)a->cp, (long long)a->tp, (long long)max);
    return -1;
  }
  tpx_cp_layout l;
  tpx_error e = {0};
  if (tpx_cp_layout_parse(a->cp_layout, &l, &e)) {
    bad_arg("--cp-layout: %s", e.message);
    return -1;
  }
  tpx_moe_dispatcher k;
  if (tpx_moe_dispatcher_parse(a->dispatcher, &k, &e)) {
    bad_arg("--moe-dispatcher: %s", e.message);
    return -1;
  }
  return 0;
}

/* 0: run; 1: --help asked; 2: --blas-info; -1: wrong (message printed). */
static int parse_args(int argc, char **argv, args *a) {
  memset(a, 0, sizeof *a);
  a->tp = a->dp_shard = a->dp_replicate = a->cp = 1;
  a->cp_layout = "head-tail";
  a->dispatcher = "all-gather";
  a->ep = 1;
  a->backend = "local";
  a->format = "text";
  a->lr = NAN; /* required */
  a->clip = -1;
  a->diverge = 4;
  for (int i = 1; i < argc; i++) {
    const char *name = argv[i];
    if (!strcmp(name, "-h") || !strcmp(name, "--help"))
      return 1;
    if (!strcmp(name, "--blas-info"))
      return 2;
    if (!strcmp(name, "--sp")) {
      a->sp = 1;
      continue;
    }
    if (!strcmp(name, "--offload")) {
      a->offload = 1;
      continue;
    }
    if (!strcmp(name, "--activation-checkpointing") ||
        !strcmp(name, "--activation-checkpointing-modules")) {
      a->ckpt = strcmp(name, "--activation-checkpointing") ? TR_CKPT_MODULES
                                                           : TR_CKPT_LAYER;
      continue;
    }
    const struct option *o = NULL;
    for (size_t k = 0; k < sizeof options / sizeof *options; k++)
      if (!strcmp(name, options[k].name))
        o = &options[k];
    if (!o) {
      bad_arg("unknown option %s", name);
      return -1;
    }
    if (i + 1 >= argc) {
      bad_arg("%s needs a value", name);
      return -1;
    }
    const char *v = argv[++i], *why = set_value(a, o, v);
    if (why) {
      bad_arg("bad value for %s: '%s' (%s)", name, v, why);
      return -1;
    }
  }
  return check_args(a);
}

/* ---- inputs ---- */

/* --tokens opened as libtpx opens its inputs: O_NONBLOCK, so a FIFO
 * cannot hang the open, and only a regular file is read. */
static FILE *open_tokens(const char *path, struct stat *sb, tpx_error *err) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fstat(fd, sb) != 0) {
    tpx_error_set(err, TPX_IO, "%s: cannot open: %s", path, strerror(errno));
  } else if (!S_ISREG(sb->st_mode)) {
    tpx_error_set(err, TPX_IO, "%s: not a regular file (%s)", path,
                  S_ISDIR(sb->st_mode)    ? "a directory"
                  : S_ISFIFO(sb->st_mode) ? "a FIFO"
                                          : "a device or socket");
  } else {
    FILE *f = fdopen(fd, "rb");
    if (f)
      return f;
    tpx_error_set(err, TPX_IO, "%s: cannot open: %s", path, strerror(errno));
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}

static int32_t *read_tokens(const args *a, int64_t vocab, tpx_error *err) {
  struct stat sb;
  FILE *f = open_tokens(a->tokens, &sb, err);
  if (!f)
    return NULL;
  int64_t want = a->batch * (a->seq + 1);
  if ((int64_t)sb.st_size != want * 4) {
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

/* ---- the report (rank 0) ----
 * Each step's line is printed, flushed, as the step completes; the JSON
 * format's lines are objects, the last one the whole run's. */

static void json_number(char *buf, size_t size, double v) {
  /* JSON has no NaN / inf: a non-finite value is null */
  if (isfinite(v))
    snprintf(buf, size, "%.17g", v);
  else
    snprintf(buf, size, "null");
}

static void print_step(const job *j, int64_t i, const step_record *s) {
  const args *a = j->a;
  if (!strcmp(a->format, "json")) {
    char l[32], g[32];
    json_number(l, sizeof l, s->loss);
    json_number(g, sizeof g, s->grad_norm);
    printf("{\"step\":%lld,\"loss\":%s,\"grad_norm\":%s}\n", (long long)i, l,
           g);
  } else {
    printf("step %lld  loss %.6f  grad_norm %.6f  time %.3f s  "
           "collectives %.3f s  cpu %.3f s\n",
           (long long)i, s->loss, s->grad_norm, s->seconds, s->comm, s->cpu);
  }
  tr_stdout_flush(j->out_errno); /* a failure is reported at the end */
}

/* Rank 0's memory beside `tpx plan`'s per-rank figures (docs/MEMORY.md):
 * params, grads and optimizer as allocated after the last step, the
 * gather peak, the activation arena, and peak = the runtime's peak plus
 * the activations (as the plan adds them: an upper bound of the two at
 * once). */
static int64_t peak_bytes(const job *j) {
  return j->memory.peak[TPX_RUNTIME_MEM_TOTAL] + j->activations;
}

/* Rank 0's memory figures in the order both formats print them: params,
 * grads, optimizer, gather peak, activations, peak, device peak (the
 * runtime's device bytes + the activations), host peak. */
enum { MEM_N = 8 };
static void memory_figures(const job *j, long long m[MEM_N]) {
  m[0] = (long long)j->memory.allocated[TPX_RUNTIME_MEM_PARAMS];
  m[1] = (long long)j->memory.allocated[TPX_RUNTIME_MEM_GRADS];
  m[2] = (long long)j->memory.allocated[TPX_RUNTIME_MEM_OPTIMIZER];
  m[3] = (long long)j->memory.peak[TPX_RUNTIME_MEM_GATHER];
  m[4] = (long long)j->activations;
  m[5] = (long long)peak_bytes(j);
  m[6] = (long long)(j->memory.device_peak + j->activations);
  m[7] = (long long)j->memory.host_peak;
}

/* The steady state: sums over the steps after the first (warm-up). */
typedef struct steady {
  int64_t n;
  double step, comm, cp, moe, cpu;
} steady;

static steady steady_state(const args *a, const job *j) {
  steady t = {0};
  for (int64_t i = a->steps > 1 ? 1 : 0; i < a->steps; i++, t.n++) {
    t.step += j->steps[i].seconds;
    t.comm += j->steps[i].comm;
    t.cp += j->steps[i].cp;
    t.moe += j->steps[i].moe;
    t.cpu += j->steps[i].cpu;
  }
  return t;
}

/* JSON's "time": rank 0's steady-state seconds per step, as the text
 * summary's throughput line gives them (moe_dispatch 0 at ep 1). */
static void print_json_time(const args *a, const job *j) {
  steady t = steady_state(a, j);
  if (!t.n || !(t.step > 0))
    return;
  double n = (double)t.n;
  printf(",\"time\":{\"rank\":0,\"steady_steps\":%lld,\"step_s\":%.6g,"
         "\"collectives_s\":%.6g,\"cp_s\":%.6g,\"moe_dispatch_s\":%.6g,"
         "\"moe_dispatch_share\":%.6g}",
         (long long)t.n, t.step / n, t.comm / n, t.cp / n, t.moe / n,
         t.moe / t.step);
}

static void print_json(const args *a, const job *j) {
  printf("{\"steps\":[");
  for (int64_t i = 0; i < a->steps; i++) {
    const step_record *s = &j->steps[i];
    char l[32], g[32];
    json_number(l, sizeof l, s->loss);
    json_number(g, sizeof g, s->grad_norm);
    printf("%s{\"step\":%lld,\"loss\":%s,\"grad_norm\":%s}", i ? "," : "",
           (long long)i, l, g);
  }
  printf("]");
  tr_blas_info b;
  tr_blas_info_get(&b, tr_threads(INT64_MAX));
  printf(",\"blas\":{\"name\":\"%s\",\"version\":\"%s\",\"kernel\":\"%s\","
         "\"chosen_by\":\"%s\",\"threads\":%d}",
         b.name, b.version, b.kernel, b.chosen_by, b.threads);
  if (j->has_memory) {
    long long m[MEM_N];
    memory_figures(j, m);
    printf(",\"memory\":{\"rank\":0,\"params\":%lld,\"grads\":%lld,"
           "\"optimizer\":%lld,\"gather_peak\":%lld,\"activations\":%lld,"
           "\"peak\":%lld,\"device_peak\":%lld,\"host_peak\":%lld}",
           m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]);
  }
  print_json_time(a, j);
  printf("}\n");
}

static void print_header(const args *a, const tpx_model *model,
                         int *out_errno) {
  if (!strcmp(a->format, "json"))
    return;
  tr_blas_info b;
  char line[384];
  tr_blas_info_get(&b, tr_threads(INT64_MAX));
  tr_blas_info_line(&b, line, sizeof line);
  printf("tpx-train: %s, mesh dp_replicate=%lld dp_shard=%lld",
         tpx_model_architecture(model, 0), (long long)a->dp_replicate,
         (long long)a->dp_shard);
  if (a->cp > 1)
    printf(" cp=%lld (%s)", (long long)a->cp, a->cp_layout);
  if (a->ep > 1)
    printf(" ep=%lld (%s)", (long long)a->ep, a->dispatcher);
  printf(" tp=%lld%s, %s backend%s%s\n", (long long)a->tp, a->sp ? " sp" : "",
         a->backend, a->offload ? ", CPU offload" : "",
         a->ckpt == TR_CKPT_LAYER     ? ", activation checkpointing (layers)"
         : a->ckpt == TR_CKPT_MODULES ? ", activation checkpointing "
                                        "(self_attn, mlp)"
                                      : "");
  printf("%s\n", line);
  tr_stdout_flush(out_errno);
}

static void print_summary(const args *a, const job *j) {
  if (!strcmp(a->format, "json")) {
    print_json(a, j);
    return;
  }
  steady t = steady_state(a, j);
  if (t.n && t.step > 0) {
    printf("throughput %.1f tokens/s  step %.4f s  collectives %.1f%% of the "
           "step (rank 0)  cpu %.4f s/step%s",
           (double)(a->batch * a->seq) * (double)t.n / t.step,
           t.step / (double)t.n, 100.0 * t.comm / t.step, t.cpu / (double)t.n,
           j->mpi ? " (this process)" : " (all ranks)");
    /* of the collectives, cp's K/V all-gathers and reduce-scatters */
    if (a->cp > 1)
      printf("  cp collectives %.1f%% of the step", 100.0 * t.cp / t.step);
    /* and the MoE dispatch over ep (dispatch, combine, their backward) */
    if (a->ep > 1)
      printf("  moe dispatch %.1f%% of the step (%.6f s/step)",
             100.0 * t.moe / t.step, t.moe / (double)t.n);
    printf("\n");
  }
  if (j->has_memory) {
    long long m[MEM_N];
    memory_figures(j, m);
    printf("memory (rank 0, bytes): params %lld  grads %lld  optimizer %lld  "
           "gather peak %lld  activations %lld  peak %lld  (device peak %lld, "
           "host peak %lld)\n",
           m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]);
  }
}

/* ---- one rank ---- */

/* CPU seconds of the process (every rank thread with the local backend) */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This rank's rows of the batch: those of its data-parallel coordinate
 * (the cp ranks of one share them, each computing its positions). */
static tpx_status my_rows(const job *j, int64_t rank, const int32_t **rows,
                          tpx_error *err) {
  const args *a = j->a;
  const tpx_mesh *mesh = tpx_sharding_mesh(j->sh);
  int64_t c[TPX_MESH_MAX_DIMS] = {0};
  tpx_status s = tpx_mesh_coords(mesh, rank, c, err);
  int dr = tpx_mesh_dim_index(mesh, "dp_replicate");
  int ds = tpx_mesh_dim_index(mesh, "dp_shard");
  int64_t dp = (dr >= 0 ? c[dr] : 0) * a->dp_shard + (ds >= 0 ? c[ds] : 0);
  int64_t rows_per_rank = a->batch / (a->dp_replicate * a->dp_shard);
  *rows = j->tokens + dp * rows_per_rank * (a->seq + 1);
  return s;
}

/* Whether the run stops after `step`, whose mean loss and grad norm every
 * rank holds alike (so all stop at once): a non-finite loss or norm, or a
 * loss above --diverge-factor x step 0's `first` (a loss that rises far
 * above its start while staying finite, as a too-large learning rate
 * makes it). */
static tpx_status diverged(const args *a, int64_t step, double loss, double gn,
                           double first, tpx_error *err) {
  if (!isfinite(loss) || !isfinite(gn))
    return tpx_error_set(err, TPX_VALIDATION,
                         "step %lld: the %s is %g: training diverged (a "
                         "non-finite loss or gradient norm stops the run)",
                         (long long)step,
                         isfinite(loss) ? "gradient norm" : "loss",
                         isfinite(loss) ? gn : loss);
  if (a->diverge > 0 && loss > a->diverge * first)
    return tpx_error_set(err, TPX_VALIDATION,
                         "step %lld: the loss is %g, above %g x step 0's loss "
                         "%g = %g: training diverged (--diverge-factor sets "
                         "the factor, 0 turns the check off)",
                         (long long)step, loss, a->diverge, first,
                         a->diverge * first);
  return TPX_OK;
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
  tr_file gf = {0};
  tpx_status ws = TPX_OK;
  double first = 0; /* step 0's loss */
  if (!s && a->dump_grads)
    ws = tr_dump_open(a->dump_grads, j->model, a->steps, r, &gf, err);
  for (int64_t step = 0; !s && step < a->steps; step++) {
    double loss = 0, gn = 0;
    double t0 = tr_now(), p0 = cpu_now();
    tpx_comm_time c0 = tr_rank_comm_time(r);
    s = tr_net_step(net, r, rows, b, a->seq, &loss, err);
    double tg = tr_now(), cg = tr_rank_comm_time(r).seconds;
    if (!s && a->dump_grads)
      s = tr_dump_append(&gf, j->model, r, 1, s, &ws, err);
    t0 += tr_now() - tg; /* not timed */
    c0.seconds += tr_rank_comm_time(r).seconds - cg;
    if (!s)
      s = tr_optimizer_step(r, a->clip, a->lr, a->wd, step + 1, &gn, err);
    double t1 = tr_now();
    tpx_comm_time c1 = tr_rank_comm_time(r);
    if (!s)
      s = tr_dp_mean(r, &loss, err); /* reporting only: not timed */
    if (s)
      break;
    step_record rec = {loss,
                       gn,
                       t1 - t0,
                       c1.seconds - c0.seconds,
                       c1.cp_seconds - c0.cp_seconds,
                       c1.moe_seconds - c0.moe_seconds,
                       cpu_now() - p0};
    if (rank == 0) {
      j->steps[step] = rec;
      print_step(j, step, &rec);
    }
    if (step == 0)
      first = loss;
    s = diverged(a, step, loss, gn, first, err);
  }
  if (a->dump_grads)
    s = tr_dump_close(&gf, s ? s : ws, err);
  return s;
}

static tpx_status rank_main(tpx_comm *world, void *arg, tpx_error *err) {
  job *j = arg;
  tr_net net;
  tr_rank *r = NULL;
  int64_t world_size = tpx_mesh_world_size(tpx_sharding_mesh(j->sh));
  int64_t rank = world ? tpx_comm_rank(world) : 0;
  tr_rank_setup su = {.model = j->model,
                      .sharding = j->sh,
                      .world_comm = world,
                      .world = world_size,
                      .rank = rank,
                      .cp_layout = TPX_CP_HEAD_TAIL,
                      .offload = j->a->offload};
  tpx_cp_layout_parse(j->a->cp_layout, &su.cp_layout, NULL);
  tpx_status s = tr_net_init(&net, j->model, err);
  net.ckpt = j->a->ckpt;
  tpx_moe_dispatcher_parse(j->a->dispatcher, &net.dispatcher, NULL);
  if (!s)
    s = tr_rank_create(&su, &r, err);
  if (!s)
    s = tr_rank_load(r, j->reader, err);
  if (!s)
    s = tr_moe_load_buffers(&net, j->reader, err);
  if (!s)
    s = train(j, &net, r, rank, err);
  if (!s && rank == 0) {
    j->has_memory = tr_rank_memory(r, &j->memory);
    j->activations = tr_net_activation_bytes(&net);
  }
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

/* Upstream's mesh (dp_replicate, dp_shard, cp, tp), torch's numbering;
 * at cp 1 without the cp dim. Under cp, FSDP shards over its flattened
 * dp_shard_cp view (docs/SEMANTICS.md "Context parallelism"): the runtime
 * gathers, reduce-scatters (summing the cp ranks' partial gradients),
 * averages and takes the grad norm over it. */
static int build_sharding(const args *a, tpx_registry *reg,
                          const tpx_model *model, tpx_mesh **mesh,
                          tpx_selection **sel, tpx_diag_list *diags,
                          tpx_sharding **sh, tpx_error *err) {
  tpx_select_options so = TPX_SELECT_OPTIONS_INIT;
  so.tp_size = a->tp;
  so.sequence_parallel = a->sp;
  so.ep = a->ep;
  if (tpx_select_plan(reg, model, &so, sel, diags, err))
    return 1;
  if (first_error(diags, "plan", err))
    return 1;
  if (tpx_mesh_create_fsdp2(a->dp_replicate, a->dp_shard, a->cp, a->tp, mesh,
                            err))
    return 1;
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.param_dtype = TPX_DTYPE_F32; /* f32 training: no mixed precision */
  if (a->cp > 1)
    opts.dp_shard_dim = "dp_shard_cp";
  /* no data-parallel or cp rank: nothing to shard, the runtime keeps the
   * TP-local tensors themselves (no gather copies); offload is an FSDP
   * policy, so --offload keeps FSDP on (units over a dp_shard of 1) */
  opts.fsdp = a->dp_shard * a->dp_replicate * a->cp > 1 || a->offload;
  /* the selection whole: plan, FSDP units, fp32 parameters */
  opts.selection = *sel;
  opts.ep = a->ep;
  if (tpx_sharding_create(model, NULL, *mesh, &opts, sh, err))
    return 1;
  return first_error(tpx_sharding_diagnostics(*sh), "sharding", err);
}

/* ---- main ---- */

/* --dump-grads is opened by rank 0 inside the ranks, before the first
 * step: failing there alone would leave the other ranks waiting in the
 * step's collectives. So check it can be created first (its temporary,
 * removed again: the final name is not touched), and let every process
 * know the root's verdict. */
static int dump_grads_writable(const args *a, int root, int mpi,
                               tpx_error *err) {
  int bad = 0;
  if (root) {
    tr_file f;
    bad = tr_file_open(&f, a->dump_grads, err) != TPX_OK;
    tr_file_discard(&f);
  }
#if TPX_HAVE_MPI
  if (mpi)
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
#else
  (void)mpi;
#endif
  return !bad;
}

/* --seq must split into the cp layout's equal chunks (as upstream's load
 * balancer requires): 1 (and the message) when it does not. */
static int cp_seq_bad(const args *a, tpx_error *err) {
  tpx_cp_layout l = TPX_CP_HEAD_TAIL;
  tpx_cp_layout_parse(a->cp_layout, &l, NULL);
  int64_t parts = l == TPX_CP_HEAD_TAIL ? 2 * a->cp : a->cp;
  if (a->seq % parts == 0)
    return 0;
  tpx_error_set(err, TPX_INVALID_ARGUMENT,
                "--seq %lld is not divisible by %s = %lld (--cp %lld, "
                "--cp-layout %s cuts each sequence into %lld equal chunks)",
                (long long)a->seq, l == TPX_CP_HEAD_TAIL ? "2 x cp" : "cp",
                (long long)parts, (long long)a->cp, a->cp_layout,
                (long long)parts);
  return 1;
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
  /* the decoder the config describes, its weights all there (each rank
   * finds them again) */
  tr_net probe;
  tpx_status st = tr_net_init(&probe, r->model, err);
  int64_t vocab = probe.cfg.vocab;
  int moe = probe.cfg.moe != TR_MOE_NONE;
  tr_net_free(&probe);
  if (st)
    return st;
  if (moe && a->tp > 1)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "--tp %lld: the MoE layers of tpx-train run at tp 1 "
                         "(their router and experts are not split over tp)",
                         (long long)a->tp);
  if (!(r->tokens = read_tokens(a, vocab, err)))
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

/* The number of processes an MPI launcher started, from the environment
 * it gives each (Open MPI, MPICH / Intel MPI's Hydra, MVAPICH); 1 when
 * none did. *var names the variable, *first is 1 on the launcher's rank 0
 * (or when the rank is not known). */
static long launcher_world(const char **var, int *first) {
  static const char *const vars[][2] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMI_SIZE", "PMI_RANK"},
      {"MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"},
  };
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *size = getenv(vars[i][0]), *rank = getenv(vars[i][1]);
    long n = size ? strtol(size, NULL, 10) : 0;
    if (n > 1) {
      *var = vars[i][0];
      *first = !rank || !strcmp(rank, "0");
      return n;
    }
  }
  return 1;
}

/* Under mpirun without --backend mpi every process would train alone on
 * its own copy of the mesh, N jobs instead of one: refused. */
static int launched_without_mpi(const args *a) {
  const char *var = NULL;
  int first = 1;
  long n = launcher_world(&var, &first);
  if (n <= 1 || !strcmp(a->backend, "mpi"))
    return 0;
  if (first)
    fprintf(stderr,
            "tpx-train: started as one of %ld processes by an MPI launcher "
            "(%s=%ld) without --backend mpi: each would train alone on the "
            "local backend; add --backend mpi (one process per rank), or "
            "start one process\n",
            n, var, n);
  return 1;
}

/* Initialise MPI (under the watchdog: MPI_Init has no timeout) and check
 * its world matches the mesh; the exit status to leave with (2) or 0. */
static int mpi_start(int *argc, char ***argv, int64_t world, int *root,
                     tr_watchdog *wd, tpx_comm **comm, tpx_error *err) {
#if TPX_HAVE_MPI
  tr_watchdog_enter(wd, "start-up phase MPI_Init", "MPI_Init", 0);
  MPI_Init(argc, argv);
  tr_watchdog_leave(wd);
  int ws = 0, wr = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ws);
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  tr_watchdog_set_rank(wd, wr);
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
  /* timed by libtpx (TPX_TIMEOUT, then MPI_Abort in main); the watchdog
   * is a backstop behind it */
  tr_watchdog_enter(wd, "start-up phase MPI_Comm_dup (the world)", "world", 5);
  tpx_comm_create_mpi(&c, comm, err);
  tr_watchdog_leave(wd);
  return 0;
#else
  (void)argc, (void)argv, (void)world, (void)root, (void)wd, (void)comm;
  (void)err;
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
  /* an OpenBLAS fallback kernel: said, and this program run again with
   * the right one (blas_kernel.h); before anything else */
  tr_blas_check(argv);
  if (argc < 2) { /* nothing asked: what could be */
    usage(stderr);
    return 2;
  }
  int pa = parse_args(argc, argv, &a), out_errno = 0;
  if (pa < 0)
    return 2;
  tpx_error err = {0};
  if (pa == 2) { /* --blas-info */
    tr_blas_info b;
    char line[384];
    tr_blas_info_get(&b, tr_threads(INT64_MAX));
    tr_blas_info_line(&b, line, sizeof line);
    printf("%s\n", line);
  } else if (pa > 0) { /* --help */
    usage(stdout);
  }
  if (pa > 0) {
    if (tr_stdout_check(&out_errno, &err) == TPX_OK)
      return 0;
    fprintf(stderr, "tpx-train: %s\n", err.message);
    return 1;
  }
  tr_threads_init(); /* before any rank thread starts */
  if (launched_without_mpi(&a))
    return 2;
  int mpi = !strcmp(a.backend, "mpi");
  int64_t world = a.tp * a.dp_shard * a.dp_replicate * a.cp;
  tpx_comm *mpi_world = NULL;
  int code = 1, root = 1, hung = 0;
  run r = {0};
  /* MPI_Init / MPI_Finalize under the collective timeout (startup.h); a
   * malformed TPX_COMM_TIMEOUT means 600 here, and tpx_comm_create_mpi
   * refuses it */
  tr_watchdog *wd = mpi ? tr_watchdog_start(tpx_comm_timeout(NULL)) : NULL;
  if (mpi) {
    int rc = mpi_start(&argc, &argv, world, &root, wd, &mpi_world, &err);
    if (rc) {
      tr_watchdog_stop(wd);
      return rc;
    }
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
  if (a.cp > 1 && cp_seq_bad(&a, &err)) {
    code = 2;
    goto out;
  }
  /* the root's verdict is an MPI_Bcast, which has no timeout */
  tr_watchdog_enter(wd, "start-up phase --dump-grads check (MPI_Bcast)",
                    "dump-grads", 0);
  int unwritable = a.dump_grads && !dump_grads_writable(&a, root, mpi, &err);
  tr_watchdog_leave(wd);
  if (unwritable) {
    if (!err.message[0])
      tpx_error_set(&err, TPX_IO, "%s: cannot write", a.dump_grads);
    goto out;
  }
  if (prepare(&a, &r, &err))
    goto out;
  job j = {.a = &a,
           .model = r.model,
           .sh = r.sh,
           .tokens = r.tokens,
           .reader = r.reader,
           .mpi = mpi,
           .steps = r.steps,
           .out_errno = &out_errno};
  if (root)
    print_header(&a, r.model, &out_errno);
  tpx_status s = mpi ? rank_main(mpi_world, &j, &err)
                     : tpx_local_run((int)world, rank_main, &j, &err);
  /* a rank thread tpx_local_run left running (hung) may still use the run:
   * the process exits without freeing it */
  hung = !mpi && s == TPX_TIMEOUT;
  if (s)
    goto out;
  code = 0;
  if (root) {
    print_summary(&a, &j);
    /* the log that did not reach its reader (a full disk, /dev/full) is a
     * failed run, not exit 0 */
    if (tr_stdout_check(&out_errno, &err))
      code = 1;
  }
out:
  if (code && root)
    fprintf(stderr, "tpx-train: %s\n", err.message[0] ? err.message : "failed");
#if TPX_HAVE_MPI
  /* A collective that timed out or was aborted (a peer hung or failed):
   * say so from this rank and end the whole job, since the hung peer will
   * never reach MPI_Finalize (docs/RUNTIME.md "A rank that fails or
   * hangs"). */
  if (mpi && code && (err.status == TPX_TIMEOUT || err.status == TPX_COMM)) {
    if (!root)
      fprintf(stderr, "tpx-train: %s\n", err.message);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
#endif
  if (!hung)
    run_free(&r);
  tpx_comm_destroy(mpi_world);
#if TPX_HAVE_MPI
  if (mpi) {
    /* waits for every rank too */
    tr_watchdog_enter(wd, "shut-down phase MPI_Finalize", "MPI_Finalize", 0);
    MPI_Finalize();
    tr_watchdog_leave(wd);
  }
#endif
  tr_watchdog_stop(wd);
  return code;
}
