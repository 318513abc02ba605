/* cmd_shard.c — `tpx shard`: cut a Hugging Face checkpoint into one
 * tpx-shard/1 file per rank, rank-0000r-of-0000W.safetensors
 * (docs/CHECKPOINT.md). The options, the plan (selected exactly as
 * `tpx plan` selects it: tools/plan/plan_setup.c) and the messages; the rank
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
          "  --cp N               context-parallel size (default 1): FSDP "
          "shards over\n"
          "                       dp_shard x cp, so every cp rank gets its "
          "own file\n"
          "  --ep N               expert parallelism (default 1): each rank "
          "file holds\n"
          "                       its EP rank's experts (the MoE mesh "
          "ep_shard x ep)\n"
          "  --sp                 sequence parallelism\n"
          "  --plan PATH|NAME     a tpx-plan/1 file or a plugin's named plan\n"
          "  --rank R             write only rank R (default: every rank)\n"
          "  --no-fsdp            TP only: no dp sharding of the parameters\n"
          "  --no-isolation       call plugins in this process\n"
          "  --out DIR            output directory (created if missing)\n"
          "  --allow-errors       write the shards even when `tpx plan` "
          "reports errors for\n"
          "                       this mesh (heads not divisible by tp, "
          "...)\n"
          "  --run-id ID          the run id kept in every file (default: a "
          "new random one);\n"
          "                       runs that each write some --rank of one "
          "set share it\n"
          "  --force              replace rank files of another mesh size "
          "in DIR\n"
          "  -h, --help           this help\n"
          "\n"
          "Exit status: 0 done, 1 failed, 2 bad arguments or an input that "
          "cannot be used.\n");
}

typedef struct {
  tpx_cli_plan_args p;
  const char *out, *run_id;
  int64_t rank; /* -1: all */
  int allow_errors, force;
  char config_buf[4096];
} shard_args;

static int parse_count(const char *opt, const char *text, int64_t min,
                       int64_t *out) {
  char *end = NULL;
  errno = 0;
  int digits = text && *text >= '0' && *text <= '9';
  long long v = digits ? strtoll(text, &end, 10) : 0;
  if (!digits || *end || errno || v < min || v > (1LL << 20)) {
    fprintf(stderr, "tpx shard: %s expects an integer >= %lld, got '%s'\n", opt,
            (long long)min, text ? text : "");
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
  a->p.tp = a->p.dp_shard = a->p.dp_replicate = a->p.cp = a->p.ep = 1;
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
    } else if (!strcmp(arg, "--allow-errors")) {
      a->allow_errors = 1;
    } else if (!strcmp(arg, "--force")) {
      a->force = 1;
    } else if (val && !strcmp(arg, "--run-id")) {
      a->run_id = argv[++i];
    } else if (val && (!strcmp(arg, "--weights") || !strcmp(arg, "--config") ||
                       !strcmp(arg, "--plan") || !strcmp(arg, "--out"))) {
      i++;
      if (!strcmp(arg, "--weights"))
        a->p.weights = val;
      else if (!strcmp(arg, "--config"))
        a->p.config = val;
      else if (!strcmp(arg, "--plan"))
        a->p.plan = val;
      else
        a->out = val;
    } else if (val && !strcmp(arg, "--tp")) {
      if (parse_count(arg, argv[++i], 1, &a->p.tp))
        return -1;
    } else if (val && !strcmp(arg, "--dp-shard")) {
      if (parse_count(arg, argv[++i], 1, &a->p.dp_shard))
        return -1;
    } else if (val && !strcmp(arg, "--dp-replicate")) {
      if (parse_count(arg, argv[++i], 1, &a->p.dp_replicate))
        return -1;
    } else if (val && !strcmp(arg, "--cp")) {
      if (parse_count(arg, argv[++i], 1, &a->p.cp))
        return -1;
    } else if (val && !strcmp(arg, "--ep")) {
      if (parse_count(arg, argv[++i], 1, &a->p.ep))
        return -1;
    } else if (val && !strcmp(arg, "--rank")) {
      if (parse_count(arg, argv[++i], 0, &a->rank))
        return -1;
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
  int64_t world = a->p.tp * a->p.dp_shard * a->p.dp_replicate * a->p.cp;
  if (world > (1LL << 20)) {
    fprintf(stderr, "tpx shard: the mesh is too large\n");
    return -1;
  }
  if (a->rank >= world) {
    fprintf(stderr, "tpx shard: --rank %lld is outside the mesh of %lld\n",
            (long long)a->rank, (long long)world);
    return -1;
  }
  if (!a->p.config)
    default_config(a);
  return 0;
}

/* `tpx plan`'s verdict for the same options: its errors, printed, stop
 * the shard unless --allow-errors. 0 go on, -1 stop. */
static int plan_errors(const shard_args *a, const tpx_cli_planned *pl) {
  tpx_report_options ro = TPX_REPORT_OPTIONS_INIT;
  ro.selection_diags = pl->diags;
  if (tpx_report_ok(pl->sh, &ro))
    return 0;
  const tpx_diag_list *lists[2] = {pl->diags, tpx_sharding_diagnostics(pl->sh)};
  size_t n = 0;
  for (int l = 0; l < 2; l++)
    for (size_t i = 0; lists[l] && i < tpx_diag_count(lists[l]); i++) {
      tpx_diag d;
      if (tpx_diag_get(lists[l], i, &d, NULL) != TPX_OK ||
          d.level < TPX_DIAG_ERROR)
        continue;
      n++;
      fprintf(stderr, "tpx shard: %s [%s] %s\n",
              a->allow_errors ? "warning: plan error" : "error", d.code,
              d.message);
    }
  if (a->allow_errors)
    return 0;
  fprintf(stderr,
          "tpx shard: `tpx plan` reports %zu error%s for this mesh; nothing "
          "written (--allow-errors writes the shards anyway)\n",
          n, n == 1 ? "" : "s");
  return -1;
}

/* The config.json text to keep in the rank files (malloc'd); NULL when it
 * cannot be read (the files then carry none). */
static char *read_config(const char *path) {
  FILE *f = fopen(path, "rb");
  char *text = NULL;
  size_t n = 0, cap = 0, r;
  char buf[65536];
  while (f && (r = fread(buf, 1, sizeof buf, f)) > 0) {
    if (n + r + 1 > cap) {
      cap = (n + r + 1) * 2;
      char *t = cap <= (64u << 20) ? realloc(text, cap) : NULL;
      if (t == NULL) {
        free(text);
        fclose(f);
        return NULL;
      }
      text = t;
    }
    memcpy(text + n, buf, r);
    n += r;
    text[n] = '\0';
  }
  if (f)
    fclose(f);
  return text;
}

typedef struct shard_run {
  const shard_args *a;
  const tpx_cli_planned *pl;
  const tpx_checkpoint_reader *rd;
  tpx_shard_write_options wo;
  tpx_error err;
} shard_run;

static int run_write(void *ctx) {
  shard_run *r = ctx;
  return tpx_shard_write(r->rd, r->pl->sh, r->a->out, &r->wo, &r->err) == TPX_OK
             ? 0
             : -1;
}

/* Reader, options and the guarded write; the process exit code. */
static int write_shards(const shard_args *a, const tpx_cli_planned *pl) {
  tpx_checkpoint_reader *rd = NULL;
  shard_run run = {a, pl, NULL, TPX_SHARD_WRITE_OPTIONS_INIT, {TPX_OK, ""}};
  if (tpx_checkpoint_reader_create(a->p.weights, NULL, &rd, &run.err) !=
          TPX_OK ||
      tpx_checkpoint_check_model(rd, pl->model, &run.err) != TPX_OK) {
    fprintf(stderr, "tpx shard: %s\n", run.err.message);
    tpx_checkpoint_reader_destroy(rd);
    return 1;
  }
  char *config = read_config(a->p.config);
  tpx_cli_progress prog;
  memset(&prog, 0, sizeof prog);
  prog.what = "tpx shard";
  run.rd = rd;
  run.wo.rank = a->rank;
  run.wo.progress = tpx_cli_progress_cb;
  run.wo.progress_user = &prog;
  run.wo.run_id = a->run_id;
  run.wo.config_json = config;
  run.wo.replace = a->force;
  run.wo.note = tpx_cli_note_cb;
  run.wo.note_user = "tpx shard";
  int rc = tpx_cli_guard_sigbus(run_write, &run);
  if (rc == -2)
    tpx_cli_report_sigbus("tpx shard", a->p.weights);
  else if (rc != 0)
    fprintf(stderr, "tpx shard: %s\n", run.err.message);
  else {
    tpx_cli_progress_update(&prog, prog.items, prog.bytes, 1);
    tpx_cli_summary("tpx shard", prog.files, prog.bytes, a->out);
    size_t nq = tpx_model_num_quantized(pl->model);
    if (nq > 0)
      fprintf(stderr,
              "tpx shard: %zu FP8 weights cut as stored (F8), each with its "
              "_scale_inv whole in every rank file: dequantize a slice with "
              "the scale blocks its offsets fall in (docs/CHECKPOINT.md "
              "\"FP8 checkpoints\")\n",
              nq);
  }
  free(config);
  tpx_checkpoint_reader_destroy(rd);
  return rc == 0 ? 0 : 1;
}

int tpx_cmd_shard(int argc, char **argv) {
  shard_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc == 1)
    return 0;
  if (rc < 0)
    return 2;
  /* Over a file-size limit, report EFBIG instead of dying of SIGXFSZ. */
  signal(SIGXFSZ, SIG_IGN);
  struct stat sb;
  if (stat(a.p.weights, &sb) != 0) { /* before the config beside it */
    fprintf(stderr, "tpx shard: --weights %s: %s\n", a.p.weights,
            strerror(errno));
    return 2; /* an input that cannot be used (docs/tpx.1) */
  }
  if (tpx_cli_check_out_dir("tpx shard", a.out) != 0)
    return 2;
  tpx_cli_planned pl;
  int code = tpx_cli_plan_build("shard", &a.p, &pl); /* 2: bad input */
  if (code != 0)
    goto out;
  code = 1;
  cli_report_plugin_failures(pl.diags, "tpx shard");
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
  if (plan_errors(&a, &pl) == 0)
    code = write_shards(&a, &pl);
out:
  tpx_cli_planned_free(&pl);
  return code;
}
