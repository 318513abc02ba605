/* cmd_shard.c — `tpx shard`: cut a Hugging Face checkpoint into one
 * tpx-shard/1 file per rank, rank-0000r-of-0000W.safetensors
 * (docs/CHECKPOINT.md). The options, the plan (selected exactly as
 * `tpx plan` selects it: tools/plan_setup.c) and the messages; the rank
 * files are the library's (tpx_shard_write, core/src/checkpoint/).
 *
 * Exit status: 0 done, 1 failed (message on stderr), 2 bad arguments or an
 * input that cannot be used (docs/tpx.1 "EXIT STATUS"). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_cli.h"
#include "cli.h"
#include "plan_setup.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx shard --weights SRC --tp N --out DIR [options]\n"
          "\n"
          "Write one safetensors file per rank (rank-0000r-of-0000W."
          "safetensors) holding\nthat rank's slice of every tensor of a "
          "Hugging Face checkpoint, under the\nplan `tpx plan` selects "
          "for the same options.\n"
          "\n"
          "options:\n"
          "  --weights SRC        model.safetensors, its index.json, or "
          "their directory\n"
          "  --config PATH        config.json (default: config.json beside "
          "the weights)\n"
          "  --tp N               tensor-parallel size (default 1)\n"
          "  --dp-shard N         FSDP shard size (default 1)\n"
          "  --dp-replicate N     HSDP replicate size (default 1)\n"
          "  --sp                 sequence parallelism\n"
          "  --plan PATH|NAME     a tpx-plan/1 file or a plugin's named plan\n"
          "  --rank R             write only rank R (default: every rank)\n"
          "  --no-fsdp            TP only: no dp sharding of the parameters\n"
          "  --no-isolation       call plugins in this process\n"
          "  --out DIR            output directory (created if missing)\n"
          "  -h, --help           this help\n"
          "\n"
          "Exit status: 0 done, 1 failed, 2 bad arguments or an input that "
          "cannot be used.\n");
}

typedef struct {
  tpx_cli_plan_args p;
  const char *out;
  int64_t rank; /* -1: all */
  char config_buf[4096];
} shard_args;

static int parse_count(const char *opt, const char *text, int64_t min,
                       int64_t *out) {
  char *end = NULL;
  errno = 0;
  int digits = text && *text >= '0' && *text <= '9';
  long long v = digits ? strtoll(text, &end, 10) : 0;
  if (!digits || *end || errno || v < min || v > (1LL << 20)) {
    fprintf(stderr, "tpx shard: %s expects an integer >= %lld, got '%s'\n",
            opt, (long long)min, text ? text : "");
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}

/* config.json in the weights' directory (the weights may be the dir). */
static void default_config(shard_args *a) {
  struct stat sb;
  const char *w = a->p.weights;
  if (stat(w, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(a->config_buf, sizeof a->config_buf, "%s/config.json", w);
  } else {
    const char *slash = strrchr(w, '/');
    if (slash)
      snprintf(a->config_buf, sizeof a->config_buf, "%.*s/config.json",
               (int)(slash - w), w);
    else
      snprintf(a->config_buf, sizeof a->config_buf, "config.json");
  }
  a->p.config = a->config_buf;
}

static int parse_args(int argc, char **argv, shard_args *a) {
  memset(a, 0, sizeof *a);
  a->p.tp = a->p.dp_shard = a->p.dp_replicate = 1;
  a->p.fsdp = a->p.isolate = 1;
  a->rank = -1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(arg, "--sp")) {
      a->p.sp = 1;
    } else if (!strcmp(arg, "--no-fsdp")) {
      a->p.fsdp = 0;
    } else if (!strcmp(arg, "--no-isolation")) {
      a->p.isolate = 0;
    } else if (val && (!strcmp(arg, "--weights") || !strcmp(arg, "--config") ||
                       !strcmp(arg, "--plan") || !strcmp(arg, "--out"))) {
      i++;
      if (!strcmp(arg, "--weights")) a->p.weights = val;
      else if (!strcmp(arg, "--config")) a->p.config = val;
      else if (!strcmp(arg, "--plan")) a->p.plan = val;
      else a->out = val;
    } else if (val && !strcmp(arg, "--tp")) {
      if (parse_count(arg, argv[++i], 1, &a->p.tp)) return -1;
    } else if (val && !strcmp(arg, "--dp-shard")) {
      if (parse_count(arg, argv[++i], 1, &a->p.dp_shard)) return -1;
    } else if (val && !strcmp(arg, "--dp-replicate")) {
      if (parse_count(arg, argv[++i], 1, &a->p.dp_replicate)) return -1;
    } else if (val && !strcmp(arg, "--rank")) {
      if (parse_count(arg, argv[++i], 0, &a->rank)) return -1;
    } else {
      fprintf(stderr,
              "tpx shard: unknown or incomplete argument '%s' (see tpx shard "
              "--help)\n",
              arg);
      return -1;
    }
  }
  if (!a->p.weights || !a->out) {
    fprintf(stderr, "tpx shard: --weights SRC and --out DIR are required\n");
    return -1;
  }
  if (a->p.tp * a->p.dp_shard * a->p.dp_replicate > (1LL << 20)) {
    fprintf(stderr, "tpx shard: the mesh is too large\n");
    return -1;
  }
  if (a->rank >= a->p.tp * a->p.dp_shard * a->p.dp_replicate) {
    fprintf(stderr, "tpx shard: --rank %lld is outside the mesh of %lld\n",
            (long long)a->rank,
            (long long)(a->p.tp * a->p.dp_shard * a->p.dp_replicate));
    return -1;
  }
  if (!a->p.config)
    default_config(a);
  return 0;
}

int tpx_cmd_shard(int argc, char **argv) {
  shard_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc == 1) return 0;
  if (rc < 0) return 2;
  /* Over a file-size limit, report EFBIG instead of dying of SIGXFSZ. */
  signal(SIGXFSZ, SIG_IGN);
  tpx_cli_planned pl;
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  int code = tpx_cli_plan_build("shard", &a.p, &pl); /* 2: bad input */
  if (code != 0)
    goto out;
  code = 1;
  /* `tpx plan` falls back to the headers alone when the config's skeleton
   * disagrees with them; a shard of such a checkpoint would not fit the
   * model the config describes, so here it is an error. */
  for (size_t i = 0; i < tpx_diag_count(pl.diags); i++) {
    tpx_diag d;
    if (tpx_diag_get(pl.diags, i, &d, NULL) == TPX_OK &&
        strcmp(d.code, "skeleton-fallback") == 0) {
      fprintf(stderr, "tpx shard: %s: the checkpoint does not match %s: %s\n",
              a.p.weights, a.p.config, d.message);
      goto out;
    }
  }
  if (tpx_checkpoint_reader_create(a.p.weights, NULL, &rd, &err) != TPX_OK ||
      tpx_checkpoint_check_model(rd, pl.model, &err) != TPX_OK) {
    fprintf(stderr, "tpx shard: %s\n", err.message);
    goto out;
  }
  tpx_cli_progress prog;
  memset(&prog, 0, sizeof prog);
  prog.what = "tpx shard";
  tpx_shard_write_options wo = TPX_SHARD_WRITE_OPTIONS_INIT;
  wo.rank = a.rank;
  wo.progress = tpx_cli_progress_cb;
  wo.progress_user = &prog;
  if (tpx_shard_write(rd, pl.sh, a.out, &wo, &err) != TPX_OK) {
    fprintf(stderr, "tpx shard: %s\n", err.message);
    goto out;
  }
  tpx_cli_progress_update(&prog, prog.items, prog.bytes, 1);
  code = 0;
out:
  tpx_checkpoint_reader_destroy(rd);
  tpx_cli_planned_free(&pl);
  return code;
}
