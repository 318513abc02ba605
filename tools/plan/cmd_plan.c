/* cmd_plan.c — `tpx plan`: choose a TP plan for a model, apply it on a
 * (dp_replicate, dp_shard, [cp,] tp) mesh with FSDP, and print the report.
 *
 * Flow: config -> registry (default plugin path; every plugin call in a
 * child process with a timeout unless --no-isolation) -> module tree (the
 * family plugin's skeleton; with --weights checked against / completed by the
 * safetensors headers, or the headers alone without a skeleton) -> custom plan
 * (--plan FILE, or a named plugin plan) -> selection (+ validation) ->
 * sharding (match, apply, FSDP, bytes) -> report (text or tpx-report/1 JSON).
 *
 * Exit status (docs/tpx.1): 0 when the report has no error-level
 * diagnostic, 1 when it has one or planning failed, 2 on bad arguments or
 * an input that cannot be used (a config, weights or plan file missing,
 * unreadable or malformed, an --html path that cannot be written). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "plan_extra.h"
#include "plan_setup.h"
#include "tpx/fsdp.h"
#include "tpx/registry.h"
#include "tpx/report.h"
#include "tpx/sharding.h"
#include "tpx/tpx.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx plan --config PATH [options]\n"
          "\n"
          "Choose the tensor-parallel plan for a model, apply it with FSDP2 "
          "on a\n"
          "(dp_replicate, dp_shard, cp, tp) mesh, and report placements, "
          "per-rank "
          "memory\nand diagnostics.\n"
          "\n"
          "options:\n"
          "  --config PATH        the model's Hugging Face config.json "
          "(required)\n"
          "  --weights PATH       read tensor names/shapes from safetensors "
          "headers\n"
          "                       (model.safetensors, its index.json, or "
          "their dir),\n"
          "                       checked against the family plugin's "
          "skeleton if any;\n"
          "                       default: the skeleton alone\n"
          "  --dtype DT           without --weights: the parameters' dtype "
          "(bf16, f16,\n"
          "                       f32), in place of the config's torch_dtype "
          "or the\n"
          "                       family's assumed one (Diffusers configs "
          "name none),\n"
          "                       and the activations' (default: the FSDP "
          "compute dtype)\n"
          "  --tp N               tensor-parallel size (default 1)\n"
          "  --dp-shard N         FSDP shard size (default 1)\n"
          "  --dp-replicate N     HSDP replicate size (default 1)\n"
          "  --cp N               context-parallel size (default 1): each "
          "rank holds\n"
          "                       1/N of every sequence; FSDP shards over "
          "dp_shard x cp\n"
          "  --ep N               expert parallelism (default 1): routed "
          "experts on the\n"
          "                       MoE mesh (ep_shard, ep); custom MoE models\n"
          "  --offload            FSDP2 CPU offload: sharded params, grads "
          "and optimizer\n"
          "                       state in host memory (the memory report "
          "splits device\n"
          "                       and host bytes)\n"
          "  --sp                 sequence parallelism\n"
          "  --plan PATH|NAME     a custom plan: a tpx-plan/1 file, a "
          "Hugging Face\n"
          "                       tp_plan file ({pattern: \"colwise\", "
          "...}, translated),\n"
          "                       or the name of a plugin's named plan "
          "(e.g.\n"
          "                       llama_nemotron_super_tp_plan); `--plan hf`: "
          "the model's\n"
          "                       Hugging Face plan, transformers' styles "
          "translated\n"
          "  --no-fsdp            TP only: no FSDP units or dp sharding\n"
          "  --no-isolation       call plugins in this process (faster; a "
          "plugin that\n"
          "                       crashes or hangs then takes tpx down). "
          "By default each\n"
          "                       plugin call runs in a child process with "
          "a %d s timeout,\n"
          "                       and a failing plugin is a plugin-failed "
          "diagnostic\n"
          "  --format text|json   output format (default text; json is "
          "tpx-report/1)\n"
          "  --html FILE          also write the report as one self-contained "
          "HTML page\n"
          "  --summary            text: print only the verdict screen (plan "
          "source,\n"
          "                       per-rank memory, errors) that opens the "
          "report\n"
          "  -h, --help           this help\n",
          PLUGIN_TIMEOUT_S);
  plan_extra_usage(out);
  fprintf(out, "\nExit status: 0 without error diagnostics, 1 with errors "
               "(or planning failed),\n2 on bad arguments or an input file "
               "that is missing, unreadable or malformed.\n");
}

static int parse_size(const char *opt, const char *text, int64_t *out) {
  char *end = NULL;
  errno = 0;
  /* digits only: strtoll alone would also take " 2", "+2" and "-0" */
  int digits = text && *text >= '0' && *text <= '9';
  long long v = digits ? strtoll(text, &end, 10) : 0;
  if (!digits || *end || errno || v < 1 || v > (1LL << 20)) {
    fprintf(stderr,
            "tpx plan: %s expects a positive integer of at most %lld, got "
            "'%s'\n",
            opt, 1LL << 20, text ? text : "");
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}

typedef struct {
  const char *config, *weights, *plan, *format;
  const char *html;  /* --html FILE, or NULL */
  const char *dtype; /* --dtype: parameters' dtype of a config-only plan */
  int64_t tp, dp_shard, dp_replicate, cp, ep;
  int sp, fsdp, isolate, summary;
  /* --help: the errno of a write of the usage that failed (a usage longer
   * than stdout's buffer meets the failure before the final flush, which
   * then has no reason left to tell) */
  int help_errno;
  plan_extra x; /* memory, advisor, picture, slices (plan_extra.c) */
} args_t;

/* 0 ok, 1 help printed, -1 bad arguments (message printed). */
static int parse_args(int argc, char **argv, args_t *a) {
  memset(a, 0, sizeof *a);
  a->tp = a->dp_shard = a->dp_replicate = a->cp = a->ep = 1;
  a->format = "text";
  a->fsdp = 1;
  a->isolate = 1;
  plan_extra_init(&a->x);
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    int took = plan_extra_arg(&a->x, arg, val);
    if (took < 0)
      return -1;
    if (took) {
      i += took - 1;
    } else if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      errno = 0;
      usage(stdout);
      a->help_errno = ferror(stdout) ? errno : 0;
      return 1;
    } else if (!strcmp(arg, "--sp")) {
      a->sp = 1;
    } else if (!strcmp(arg, "--no-fsdp")) {
      a->fsdp = 0;
    } else if (!strcmp(arg, "--offload")) {
      a->x.mem.offload = 1;
    } else if (!strcmp(arg, "--no-isolation")) {
      a->isolate = 0;
    } else if (!strcmp(arg, "--summary")) {
      a->summary = 1;
    } else if (!strcmp(arg, "--config") || !strcmp(arg, "--weights") ||
               !strcmp(arg, "--plan") || !strcmp(arg, "--format") ||
               !strcmp(arg, "--tp") || !strcmp(arg, "--dp-shard") ||
               !strcmp(arg, "--dp-replicate") || !strcmp(arg, "--html") ||
               !strcmp(arg, "--dtype") || !strcmp(arg, "--cp") ||
               !strcmp(arg, "--ep")) {
      if (!val) {
        fprintf(stderr, "tpx plan: %s needs a value\n", arg);
        return -1;
      }
      i++;
      if (!strcmp(arg, "--config"))
        a->config = val;
      else if (!strcmp(arg, "--weights"))
        a->weights = val;
      else if (!strcmp(arg, "--plan"))
        a->plan = val;
      else if (!strcmp(arg, "--format"))
        a->format = val;
      else if (!strcmp(arg, "--html"))
        a->html = val;
      else if (!strcmp(arg, "--dtype"))
        a->dtype = val;
      else if (!strcmp(arg, "--tp")) {
        if (parse_size(arg, val, &a->tp))
          return -1;
      } else if (!strcmp(arg, "--dp-shard")) {
        if (parse_size(arg, val, &a->dp_shard))
          return -1;
      } else if (!strcmp(arg, "--cp")) {
        if (parse_size(arg, val, &a->cp))
          return -1;
      } else if (!strcmp(arg, "--ep")) {
        if (parse_size(arg, val, &a->ep))
          return -1;
      } else if (parse_size(arg, val, &a->dp_replicate)) {
        return -1;
      }
    } else {
      fprintf(stderr, "tpx plan: unknown argument '%s' (see tpx plan --help)\n",
              arg);
      return -1;
    }
  }
  if (!a->config) {
    fprintf(stderr, "tpx plan: --config PATH is required (see tpx plan "
                    "--help)\n");
    return -1;
  }
  if (a->dtype && cli_check_dtype("plan", a->dtype, a->weights) != 0)
    return -1;
  /* --dtype is also the activations' dtype (docs/MEMORY.md) */
  if (a->dtype)
    tpx_dtype_parse(a->dtype, &a->x.mem.activation_dtype, NULL);
  if (strcmp(a->format, "text") != 0 && strcmp(a->format, "json") != 0) {
    fprintf(stderr, "tpx plan: --format must be 'text' or 'json', got '%s'\n",
            a->format);
    return -1;
  }
  if (a->tp * a->dp_shard * a->dp_replicate * a->cp > (1LL << 20)) {
    if (a->cp > 1)
      fprintf(stderr,
              "tpx plan: the mesh (%lld x %lld x %lld x %lld) is too large: "
              "at most %lld ranks\n",
              (long long)a->dp_replicate, (long long)a->dp_shard,
              (long long)a->cp, (long long)a->tp, 1LL << 20);
    else
      fprintf(stderr,
              "tpx plan: the mesh (%lld x %lld x %lld) is too large: at most "
              "%lld ranks\n",
              (long long)a->dp_replicate, (long long)a->dp_shard,
              (long long)a->tp, 1LL << 20);
    return -1;
  }
  if (a->summary && strcmp(a->format, "text") != 0) {
    fprintf(stderr,
            "tpx plan: --summary is a text view; it cannot be "
            "combined with --format %s\n",
            a->format);
    return -1;
  }
  /* --gpus prints the advice and --show the picture instead of the report:
   * an option that shapes the report would be ignored without a word */
  if ((a->x.gpus || a->x.show) && (a->html || a->summary)) {
    fprintf(stderr,
            "tpx plan: %s cannot be combined with %s (%s prints %s instead "
            "of the report)\n",
            a->html ? "--html" : "--summary", a->x.gpus ? "--gpus" : "--show",
            a->x.gpus ? "--gpus" : "--show",
            a->x.gpus ? "the mesh advice" : "the block picture");
    return -1;
  }
  if (!a->fsdp && a->dp_shard > 1)
    fprintf(stderr,
            "tpx plan: warning: --no-fsdp with --dp-shard %lld: nothing is "
            "sharded over dp_shard, so its %lld ranks hold replicas (use "
            "--dp-replicate for plain data parallelism)\n",
            (long long)a->dp_shard, (long long)a->dp_shard);
  if (a->x.gpus && a->ep > 1 && a->x.gpus % a->ep != 0) {
    fprintf(stderr, "tpx plan: --ep %lld does not divide --gpus %lld\n",
            (long long)a->ep, (long long)a->x.gpus);
    return -1;
  }
  if (a->x.gpus && a->cp > 1 && a->x.gpus % a->cp != 0) {
    fprintf(stderr, "tpx plan: --cp %lld does not divide --gpus %lld\n",
            (long long)a->cp, (long long)a->x.gpus);
    return -1;
  }
  /* --rank is checked against the whole mesh; with --gpus, --cp only
   * restricts the advice (the mesh is not chosen yet). */
  return plan_extra_check(&a->x, a->tp, a->dp_shard * (a->x.gpus ? 1 : a->cp),
                          a->dp_replicate, a->format);
}

static int fail(const char *what, const tpx_error *err) {
  fprintf(stderr, "tpx plan: %s: %s\n", what, err->message);
  return 1;
}

/* --html FILE: the page, written whole or not at all (message printed). */
static int write_html(const char *path, const tpx_sharding *sh,
                      const tpx_report_options *ro) {
  tpx_error err = {0};
  char *page = NULL;
  if (tpx_report_html(sh, ro, &page, &err) != TPX_OK) {
    fprintf(stderr, "tpx plan: --html: %s\n", err.message);
    return -1;
  }
  FILE *f = fopen(path, "w");
  /* only a regular file is removed when the write fails: the path may be a
   * device (/dev/full) or a link to one, which is not ours to delete */
  struct stat sb, lsb;
  int regular = f && fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
                lstat(path, &lsb) == 0 && S_ISREG(lsb.st_mode);
  int bad = !f || fputs(page, f) < 0;
  if (f && fclose(f) != 0)
    bad = 1;
  if (bad) {
    fprintf(stderr, "tpx plan: --html %s: %s\n", path, strerror(errno));
    if (regular)
      remove(path);
  }
  free(page);
  return bad ? -1 : 0;
}

/* --html FILE is checked before any planning, so a path that cannot be
 * written fails at once (exit 2) instead of after a whole report: opened
 * for appending (nothing truncated yet); *created says the file did not
 * exist, so it is removed again if no page is written after all. */
static int html_check(const char *path, int *created) {
  struct stat sb;
  int existed = stat(path, &sb) == 0;
  FILE *f = fopen(path, "a");
  if (!f) {
    fprintf(stderr, "tpx plan: --html %s: %s\n", path, strerror(errno));
    return -1;
  }
  fclose(f);
  *created = !existed;
  return 0;
}

int tpx_cmd_plan(const char *prog, int argc, char **argv) {
  args_t a;
  int rc = parse_args(argc, argv, &a);
  if (rc == 1)
    return a.help_errno && cli_output_failed("tpx plan", a.help_errno) ? 1 : 0;
  if (rc < 0)
    return 2;
  int html_created = 0, html_written = 0;
  if (a.html && html_check(a.html, &html_created) != 0)
    return 2;

  tpx_error err;
  tpx_error_clear(&err);
  char *text = NULL;
  const char **trace = NULL;
  tpx_cli_planned pl;
  memset(&pl, 0, sizeof pl);
  int code = 1;

  tpx_cli_plan_args pa = {a.config,   a.weights,      a.plan, a.tp,
                          a.dp_shard, a.dp_replicate, a.sp,   a.fsdp,
                          a.isolate,  a.dtype,        a.cp,   prog,
                          a.ep};
  if ((rc = tpx_cli_plan_prepare("plan", &pa, &pl)) != 0) {
    code = rc;
    goto out;
  }
  if (a.x.gpus) { /* the mesh advisor instead of one report */
    code = plan_advise(&pa, pl.reg, pl.model, &pl.so, &a.x,
                       strcmp(a.format, "json") == 0);
    goto out;
  }
  if ((rc = tpx_cli_plan_finish("plan", &pa, &pl)) != 0) {
    code = rc;
    goto out;
  }
  if (plan_cp_diags(&pa, &a.x, pl.diags) != 0) {
    fprintf(stderr, "tpx plan: out of memory\n");
    goto out;
  }
  tpx_selection *sel = pl.sel;
  tpx_sharding *sh = pl.sh;
  tpx_diag_list *diags = pl.diags;
  if (a.x.show) { /* the picture instead of the report */
    if (plan_show(stdout, sh, a.x.show, isatty(STDOUT_FILENO)) == 0) {
      fprintf(stderr,
              "tpx plan: --show '%s' matches no parameter or module "
              "(patterns are dotted FQNs, '*' within one atom)\n",
              a.x.show);
      code = 2;
      goto out;
    }
    code =
        !cli_output_failed("tpx plan", 0) && tpx_report_ok(sh, NULL) &&
                (!diags || tpx_diag_count_at_least(diags, TPX_DIAG_ERROR) == 0)
            ? 0
            : 1;
    goto out;
  }

  tpx_report_options ro = TPX_REPORT_OPTIONS_INIT;
  ro.selection = sel; /* plan source, plugin, function, strategy lines */
  ro.sequence_parallel = a.sp;
  size_t own = (pl.model_trace[0] ? 1 : 0) + (pl.plan_trace[0] ? 1 : 0);
  ro.num_trace = own + tpx_selection_trace_size(sel);
  if (ro.num_trace) {
    trace = calloc(ro.num_trace, sizeof *trace);
    if (!trace) {
      fprintf(stderr, "tpx plan: out of memory\n");
      goto out;
    }
    size_t t = 0;
    if (pl.model_trace[0])
      trace[t++] = pl.model_trace;
    if (pl.plan_trace[0])
      trace[t++] = pl.plan_trace;
    for (size_t i = own; i < ro.num_trace; i++)
      trace[i] = tpx_selection_trace(sel, i - own);
    ro.trace = trace;
  }
  ro.selection_diags = diags;
  ro.memory = &a.x.mem;
  ro.slices_rank = a.x.rank;
  tpx_status st = strcmp(a.format, "json") == 0
                      ? tpx_report_json(sh, &ro, &text, &err)
                  : a.summary ? tpx_report_summary(sh, &ro, &text, &err)
                              : tpx_report_text(sh, &ro, &text, &err);
  if (st != TPX_OK) {
    code = fail("writing the report", &err);
    goto out;
  }
  int werr = fputs(text, stdout) == EOF ? errno : 0;
  if (strcmp(a.format, "json") == 0 && fputc('\n', stdout) == EOF && !werr)
    werr = errno;
  /* A report that did not reach its reader (disk full, closed pipe) must not
   * exit 0: scripts take 0 as "planned, and the report is there". */
  if (cli_output_failed("tpx plan", werr)) {
    code = 1;
    goto out;
  }
  code = tpx_report_ok(sh, &ro) ? 0 : 1;
  if (a.html) {
    html_written = 1; /* written whole, or removed by write_html */
    if (write_html(a.html, sh, &ro) != 0)
      code = 1;
  }

out:
  if (a.html && html_created && !html_written)
    remove(a.html);
  free(text);
  free(trace);
  tpx_cli_planned_free(&pl);
  return code;
}
