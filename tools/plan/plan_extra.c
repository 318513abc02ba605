/* plan_extra.c — the options of `tpx plan` for training memory, the mesh
 * advisor, the block picture and per-rank slices: parsing, help and the
 * checks across them. The work is in the library (tpx/memory.h) and in
 * cmd_plan_advise.c / show.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_extra.h"

void plan_extra_init(plan_extra *x) {
  tpx_memory_options mo = TPX_MEMORY_OPTIONS_INIT;
  memset(x, 0, sizeof *x);
  x->mem = mo;
  x->gpu_mem = (int64_t)80 << 30;
  /* 1 TiB of host memory for a node of 8 GPUs */
  x->host_mem = (int64_t)128 << 30;
  x->rank = -1;
}

/* Digits only, min..max. */
static int parse_count(const char *opt, const char *text, int64_t min,
                       int64_t max, int64_t *out) {
  char *end = NULL;
  errno = 0;
  int digits = text && *text >= '0' && *text <= '9';
  long long v = digits ? strtoll(text, &end, 10) : 0;
  if (!digits || *end || errno || v < min || v > max) {
    fprintf(stderr,
            "tpx plan: %s expects an integer from %lld to %lld, got '%s'\n",
            opt, (long long)min, (long long)max, text ? text : "");
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}

/* "80GiB", "80GB", "80G" (= GiB), "1.5TiB", "85899345920". */
static int parse_bytes(const char *opt, const char *text, int64_t *out) {
  static const struct {
    const char *suffix;
    double mult;
  } units[] = {{"", 1},
               {"B", 1},
               {"KiB", 1024.0},
               {"K", 1024.0},
               {"KB", 1e3},
               {"MiB", 1048576.0},
               {"M", 1048576.0},
               {"MB", 1e6},
               {"GiB", 1073741824.0},
               {"G", 1073741824.0},
               {"GB", 1e9},
               {"TiB", 1099511627776.0},
               {"T", 1099511627776.0},
               {"TB", 1e12}};
  char *end = NULL;
  errno = 0;
  /* decimal digits with at most one '.': strtod alone would also take
   * "0x10" (16 bytes), "1e3" and "1p4" */
  int digits = text && *text >= '0' && *text <= '9';
  size_t span = text ? strspn(text, "0123456789.") : 0;
  for (size_t i = 0, dots = 0; digits && i < span; i++)
    if (text[i] == '.' && ++dots > 1)
      digits = 0;
  double v = digits ? strtod(text, &end) : 0;
  if (digits && end != text + span)
    digits = 0;
  if (digits && !errno && isfinite(v) && v > 0)
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strcmp(end, units[i].suffix) == 0 && v * units[i].mult < 9.2e18 &&
          v * units[i].mult >= 1) {
        *out = (int64_t)(v * units[i].mult);
        return 0;
      }
  fprintf(stderr,
          "tpx plan: %s expects a size such as 80GiB, 80GB or a byte count, "
          "got '%s'\n",
          opt, text ? text : "");
  return -1;
}

int plan_extra_arg(plan_extra *x, const char *arg, const char *val) {
  if (!strcmp(arg, "--activation-checkpointing")) {
    x->mem.activation_checkpointing = 1;
    return 1;
  }
  if (!strcmp(arg, "--loss-in-place")) {
    x->mem.loss_in_place = 1;
    return 1;
  }
  static const char *const valued[] = {
      "--optimizer", "--batch", "--seq",       "--gpus",    "--gpu-mem",
      "--show",      "--rank",  "--attention", "--host-mem"};
  size_t i = 0;
  while (i < sizeof valued / sizeof valued[0] && strcmp(arg, valued[i])) i++;
  if (i == sizeof valued / sizeof valued[0])
    return 0;
  if (!val) {
    fprintf(stderr, "tpx plan: %s needs a value\n", arg);
    return -1;
  }
  int rc = 0;
  switch (i) {
  case 0: {
    tpx_error e;
    tpx_error_clear(&e);
    if (tpx_optimizer_parse(val, &x->mem.optimizer, &e) != TPX_OK) {
      fprintf(stderr, "tpx plan: --optimizer: %s\n", e.message);
      rc = -1;
    }
    break;
  }
  case 1: rc = parse_count(arg, val, 1, (int64_t)1 << 24, &x->mem.batch); break;
  case 2:
    rc = parse_count(arg, val, 1, (int64_t)1 << 24, &x->mem.seq);
    x->seq_given = 1;
    break;
  case 3: rc = parse_count(arg, val, 1, (int64_t)1 << 20, &x->gpus); break;
  case 4:
    rc = parse_bytes(arg, val, &x->gpu_mem);
    x->gpu_mem_given = 1;
    break;
  case 5:
    if (!*val) {
      fprintf(stderr, "tpx plan: --show needs a non-empty pattern\n");
      rc = -1;
    }
    x->show = val;
    break;
  case 6:
    rc = parse_count(arg, val, 0, ((int64_t)1 << 20) - 1, &x->rank);
    break;
  case 8:
    rc = parse_bytes(arg, val, &x->host_mem);
    x->host_mem_given = 1;
    break;
  default: {
    tpx_error e;
    tpx_error_clear(&e);
    if (tpx_attention_parse(val, &x->mem.attention, &e) != TPX_OK) {
      fprintf(stderr, "tpx plan: --attention: %s\n", e.message);
      rc = -1;
    }
  }
  }
  return rc < 0 ? -1 : 2;
}

void plan_extra_usage(FILE *out) {
  fprintf(out,
          "\ntraining memory per rank (docs/MEMORY.md):\n"
          "  --optimizer adamw|sgd|none   optimizer state (default adamw: "
          "two f32 states,\n"
          "                       plus an f32 master copy of low-precision "
          "params)\n"
          "  --batch B            sequences per micro-batch per rank "
          "(default 1)\n"
          "  --seq T              tokens per sequence: adds activations "
          "(default: none)\n"
          "  --activation-checkpointing   every layer checkpointed\n"
          "  --attention flash|sdpa|eager what attention saves for backward "
          "(default\n"
          "                       flash; eager also keeps the seq x seq "
          "probabilities)\n"
          "  --loss-in-place      a loss that writes its gradient over the "
          "logits\n"
          "mesh advisor:\n"
          "  --gpus N             rank every (dp_replicate, dp_shard, tp) "
          "with product N\n"
          "                       by fit and traffic; activations and TP "
          "traffic use\n"
          "                       --batch/--seq (default --seq 4096)\n"
          "  --gpu-mem SIZE       memory per GPU (default 80GiB; also GB, "
          "MiB, bytes)\n"
          "  --host-mem SIZE      host memory per rank for --offload meshes "
          "(default\n"
          "                       128GiB: 1 TiB per node of 8 GPUs)\n"
          "pictures and slices:\n"
          "  --show PATTERN       draw each matching parameter's blocks "
          "with the ranks\n"
          "                       holding them (FQN or module pattern, '*' "
          "per atom)\n"
          "  --rank R             with --format json: every parameter "
          "gets local_shape,\n"
          "                       global_offset and local_bytes of rank R\n");
}

int plan_extra_check(const plan_extra *x, int64_t tp, int64_t dp_shard,
                     int64_t dp_replicate, const char *format) {
  if (x->gpus && (tp != 1 || dp_shard != 1 || dp_replicate != 1)) {
    fprintf(stderr, "tpx plan: --gpus chooses the mesh; leave out --tp, "
                    "--dp-shard and --dp-replicate\n");
    return -1;
  }
  if (x->gpu_mem_given && !x->gpus) {
    fprintf(stderr, "tpx plan: --gpu-mem is the memory of one GPU for the "
                    "mesh advisor; add --gpus N (the report of one mesh "
                    "does not use it)\n");
    return -1;
  }
  if (x->host_mem_given && !x->gpus) {
    fprintf(stderr, "tpx plan: --host-mem is the host memory of one rank "
                    "for the mesh advisor's --offload meshes; add --gpus N "
                    "(the report of one mesh does not use it)\n");
    return -1;
  }
  if (x->gpus && (x->show || x->rank >= 0)) {
    fprintf(stderr, "tpx plan: --gpus cannot be combined with --show or "
                    "--rank (pick a mesh first)\n");
    return -1;
  }
  if (x->rank >= 0 && strcmp(format, "json") != 0) {
    fprintf(stderr, "tpx plan: --rank R adds per-rank slices to the JSON "
                    "report: add --format json\n");
    return -1;
  }
  if (x->show && strcmp(format, "json") == 0) {
    fprintf(stderr, "tpx plan: --show draws a picture for the terminal; it "
                    "has no JSON form (use --rank R --format json)\n");
    return -1;
  }
  if (x->rank >= 0 && x->rank >= tp * dp_shard * dp_replicate) {
    fprintf(stderr,
            "tpx plan: --rank %lld is outside the mesh of %lld ranks "
            "(ranks 0..%lld)\n",
            (long long)x->rank, (long long)(tp * dp_shard * dp_replicate),
            (long long)(tp * dp_shard * dp_replicate - 1));
    return -1;
  }
  return 0;
}
