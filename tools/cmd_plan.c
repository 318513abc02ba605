/* cmd_plan.c — `tpx plan`: choose a TP plan for a model, apply it on a
 * (dp_replicate, dp_shard, tp) mesh with FSDP, and print the report.
 *
 * Flow: config -> registry (default plugin path; every plugin call in a
 * child process with a timeout unless --no-isolation) -> module tree (the family
 * plugin's skeleton; with --weights checked against / completed by the
 * safetensors headers, or the headers alone without a skeleton) -> custom plan
 * (--plan FILE, or a named plugin plan) -> selection (+ validation) ->
 * sharding (match, apply, FSDP, bytes) -> report (text or tpx-report/1 JSON).
 *
 * Exit status: 0 when the report has no error-level diagnostic, 1 when it
 * has one or planning failed, 2 on bad arguments. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tpx/fsdp.h"
#include "tpx/registry.h"
#include "tpx/report.h"
#include "tpx/sharding.h"
#include "tpx/tpx.h"

/* Seconds a plugin call may take before its child is killed. */
#define PLUGIN_TIMEOUT_S 30

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx plan --config PATH [options]\n"
          "\n"
          "Choose the tensor-parallel plan for a model, apply it with FSDP2 "
          "on a\n"
          "(dp_replicate, dp_shard, tp) mesh, and report placements, per-rank "
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
          "  --tp N               tensor-parallel size (default 1)\n"
          "  --dp-shard N         FSDP shard size (default 1)\n"
          "  --dp-replicate N     HSDP replicate size (default 1)\n"
          "  --sp                 sequence parallelism\n"
          "  --plan PATH|NAME     a custom plan: a tpx-plan/1 file, a "
          "Hugging Face\n"
          "                       tp_plan file ({pattern: \"colwise\", "
          "...}, translated),\n"
          "                       or the name of a plugin's named plan "
          "(e.g.\n"
          "                       llama_nemotron_super_tp_plan)\n"
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
          "  --summary            text: print only the verdict screen (plan "
          "source,\n"
          "                       per-rank memory, errors) that opens the "
          "report\n"
          "  -h, --help           this help\n"
          "\n"
          "Exit status: 0 without error diagnostics, 1 with errors, 2 on bad "
          "arguments.\n",
          PLUGIN_TIMEOUT_S);
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
  int64_t tp, dp_shard, dp_replicate;
  int sp, fsdp, isolate, summary;
} args_t;

/* 0 ok, 1 help printed, -1 bad arguments (message printed). */
static int parse_args(int argc, char **argv, args_t *a) {
  memset(a, 0, sizeof *a);
  a->tp = a->dp_shard = a->dp_replicate = 1;
  a->format = "text";
  a->fsdp = 1;
  a->isolate = 1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(arg, "--sp")) {
      a->sp = 1;
    } else if (!strcmp(arg, "--no-fsdp")) {
      a->fsdp = 0;
    } else if (!strcmp(arg, "--no-isolation")) {
      a->isolate = 0;
    } else if (!strcmp(arg, "--summary")) {
      a->summary = 1;
    } else if (!strcmp(arg, "--config") || !strcmp(arg, "--weights") ||
               !strcmp(arg, "--plan") || !strcmp(arg, "--format") ||
               !strcmp(arg, "--tp") || !strcmp(arg, "--dp-shard") ||
               !strcmp(arg, "--dp-replicate")) {
      if (!val) {
        fprintf(stderr, "tpx plan: %s needs a value\n", arg);
        return -1;
      }
      i++;
      if (!strcmp(arg, "--config")) a->config = val;
      else if (!strcmp(arg, "--weights")) a->weights = val;
      else if (!strcmp(arg, "--plan")) a->plan = val;
      else if (!strcmp(arg, "--format")) a->format = val;
      else if (!strcmp(arg, "--tp")) {
        if (parse_size(arg, val, &a->tp)) return -1;
      } else if (!strcmp(arg, "--dp-shard")) {
        if (parse_size(arg, val, &a->dp_shard)) return -1;
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
  if (strcmp(a->format, "text") != 0 && strcmp(a->format, "json") != 0) {
    fprintf(stderr, "tpx plan: --format must be 'text' or 'json', got '%s'\n",
            a->format);
    return -1;
  }
  if (a->tp * a->dp_shard * a->dp_replicate > (1LL << 20)) {
    fprintf(stderr,
            "tpx plan: the mesh (%lld x %lld x %lld) is too large: at most "
            "%lld ranks\n",
            (long long)a->dp_replicate, (long long)a->dp_shard,
            (long long)a->tp, 1LL << 20);
    return -1;
  }
  if (a->summary && strcmp(a->format, "text") != 0) {
    fprintf(stderr, "tpx plan: --summary is a text view; it cannot be "
                    "combined with --format %s\n", a->format);
    return -1;
  }
  if (!a->fsdp && a->dp_shard > 1)
    fprintf(stderr,
            "tpx plan: warning: --no-fsdp with --dp-shard %lld: nothing is "
            "sharded over dp_shard, so its %lld ranks hold replicas (use "
            "--dp-replicate for plain data parallelism)\n",
            (long long)a->dp_shard, (long long)a->dp_shard);
  return 0;
}

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A --plan value that is meant as a file rather than a plugin's plan
 * name: plan names are identifiers, so a '/' or a ".json" suffix, or an
 * existing non-regular path (a directory), means a path. */
static int looks_like_path(const char *s) {
  size_t n = strlen(s);
  struct stat st;
  return strchr(s, '/') != NULL ||
         (n >= 5 && strcmp(s + n - 5, ".json") == 0) || stat(s, &st) == 0;
}

/* Trace lines of `tpx plan` itself (how the module tree was built), shown
 * before the selection trace. Static storage: one command per process. */
static char g_model_trace[1024];
/* How a --plan file was read when it is not tpx-plan/1. */
static char g_plan_trace[1024];

/* --weights: the module tree from the plugin's skeleton when a plugin
 * serving the architecture has one (modules without parameters, such as
 * rotary embeddings, and the real module kinds), then the safetensors
 * headers, which must agree with it tensor for tensor and add what it
 * lacks. A skeleton that fails or disagrees with the headers is dropped:
 * the tree then comes from the headers alone (a warning says so). *model
 * may be replaced by a fresh one. */
static tpx_status model_with_weights(const tpx_registry *reg,
                                     tpx_model **model, const args_t *a,
                                     tpx_diag_list *diags, tpx_error *err) {
  tpx_error serr;
  tpx_error_clear(&serr);
  const char *arch = tpx_model_num_architectures(*model)
                         ? tpx_model_architecture(*model, 0)
                         : NULL;
  int64_t pi = arch ? tpx_registry_find(reg, arch) : -1;
  tpx_plugin_desc info;
  int has_skeleton = pi >= 0 &&
                     tpx_registry_plugin(reg, (size_t)pi, &info, NULL) ==
                         TPX_OK &&
                     info.has_skeleton;
  if (!has_skeleton) {
    snprintf(g_model_trace, sizeof g_model_trace,
             "model: tensors from the safetensors headers (%s)",
             pi >= 0 ? "the serving plugin has no skeleton"
                     : "no plugin serves the architecture");
    return tpx_model_add_safetensors(*model, a->weights, err);
  }
  const char *stage = "building the plugin's skeleton";
  int checking = 0;
  tpx_status st = tpx_registry_build_skeleton(reg, *model, &serr);
  if (st == TPX_OK) {
    stage = "checking the skeleton against the safetensors headers";
    checking = 1;
    st = tpx_model_add_safetensors(*model, a->weights, &serr);
  }
  if (st == TPX_OK) {
    snprintf(g_model_trace, sizeof g_model_trace,
             "model: plugin '%s' skeleton, checked against the safetensors "
             "headers (tensors it lacks added from them)",
             info.name ? info.name : "?");
    return TPX_OK;
  }
  /* Only a skeleton that fails or disagrees with the headers (a
   * validation error) is dropped; an unreadable file is an error either
   * way, reported as it is. */
  if (st == TPX_NO_MEMORY || (checking && st != TPX_VALIDATION)) {
    *err = serr;
    return st;
  }
  /* Shapes that disagree: the config and the weights are different models. */
  char conflict[1536];
  if (checking &&
      cli_weights_shape_conflict(*model, a->weights, conflict,
                                 sizeof conflict) > 0)
    return tpx_error_set(err, TPX_VALIDATION, "%s", conflict);
  /* Start over from the config: the failed attempt may have left part of
   * a tree behind. */
  tpx_model *fresh = NULL;
  st = tpx_model_load_config(a->config, &fresh, err);
  if (st != TPX_OK) return st;
  tpx_model_destroy(*model);
  *model = fresh;
  arch = tpx_model_num_architectures(fresh) ? tpx_model_architecture(fresh, 0)
                                            : NULL;
  snprintf(g_model_trace, sizeof g_model_trace,
           "model: tensors from the safetensors headers only (%s failed: %s)",
           stage, serr.message);
  st = tpx_diag_add(diags, TPX_DIAG_WARNING, "skeleton-fallback",
                    arch ? arch : "",
                    "fix the plugin's skeleton for this config, or ignore "
                    "this if the checkpoint is a variant the plugin does not "
                    "know",
                    "plugin '%s': %s failed, so the module tree comes from "
                    "the safetensors headers alone (modules without "
                    "parameters are missing and module kinds are guessed "
                    "from names): %s",
                    info.name ? info.name : "?", stage, serr.message);
  if (st != TPX_OK)
    return tpx_error_set(err, st, "out of memory adding a diagnostic");
  return tpx_model_add_safetensors(*model, a->weights, err);
}

static int fail(const char *what, const tpx_error *err) {
  fprintf(stderr, "tpx plan: %s: %s\n", what, err->message);
  return 1;
}

int tpx_cmd_plan(int argc, char **argv) {
  args_t a;
  int rc = parse_args(argc, argv, &a);
  if (rc == 1) return 0;
  if (rc < 0) return 2;

  tpx_error err;
  tpx_error_clear(&err);
  tpx_model *model = NULL;
  tpx_registry *reg = NULL;
  tpx_plan *custom = NULL;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = NULL;
  char *text = NULL;
  const char **units = NULL;
  int *reshard = NULL;
  const char **fp32 = NULL;
  const char **trace = NULL;
  int code = 1;

  if (tpx_model_load_config(a.config, &model, &err) != TPX_OK) {
    code = fail("reading the config", &err);
    goto out;
  }
  if (tpx_registry_create(&reg, &err) != TPX_OK ||
      tpx_registry_set_isolation(reg, a.isolate, PLUGIN_TIMEOUT_S, &err) !=
          TPX_OK ||
      tpx_registry_load_default(reg, &err) != TPX_OK) {
    code = fail("loading plugins", &err);
    goto out;
  }
  cli_report_unusable_dirs(reg, "tpx plan");
  if (tpx_diag_list_create(&diags, &err) != TPX_OK) {
    code = fail("planning", &err);
    goto out;
  }
  if (a.weights) {
    if (model_with_weights(reg, &model, &a, diags, &err) != TPX_OK) {
      code = fail("reading safetensors headers", &err);
      goto out;
    }
  } else if (tpx_registry_build_skeleton(reg, model, &err) != TPX_OK) {
    const char *arch = tpx_model_num_architectures(model)
                           ? tpx_model_architecture(model, 0)
                           : NULL;
    fprintf(stderr,
            "tpx plan: no module skeleton is available for %s%s%s: %s\n"
            "  pass --weights PATH (model.safetensors, "
            "model.safetensors.index.json, or their directory) to read the "
            "module tree from the safetensors headers\n",
            arch ? "'" : "", arch ? arch : "this config", arch ? "'" : "",
            err.message);
    goto out;
  }
  if (a.plan && is_file(a.plan)) {
    if (cli_load_plan_file(a.plan, model, diags, &custom, g_plan_trace,
                           sizeof g_plan_trace, &err) != TPX_OK) {
      code = fail("reading the plan", &err);
      goto out;
    }
  } else if (a.plan && looks_like_path(a.plan)) {
    struct stat pst;
    int e = stat(a.plan, &pst) == 0 ? 0 : errno;
    fprintf(stderr,
            "tpx plan: --plan '%s': %s (give a tpx-plan/1 file, or the name "
            "of a plugin's named plan; see `tpx plugins`)\n",
            a.plan, e ? strerror(e) : "not a regular file");
    goto out;
  }
  tpx_select_options so = TPX_SELECT_OPTIONS_INIT;
  so.tp_size = a.tp;
  so.sequence_parallel = a.sp;
  so.custom = custom;
  so.plan_name = (a.plan && !custom) ? a.plan : NULL;
  if (tpx_select_plan(reg, model, &so, &sel, diags, &err) != TPX_OK) {
    code = fail("selecting a plan", &err);
    goto out;
  }

  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {a.dp_replicate, a.dp_shard, a.tp};
  if (tpx_mesh_create(names, sizes, 3, &mesh, &err) != TPX_OK) {
    code = fail("building the mesh", &err);
    goto out;
  }
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.fsdp = a.fsdp;
  size_t nu = tpx_selection_num_fsdp_units(sel);
  if (nu) {
    units = calloc(nu, sizeof *units);
    reshard = calloc(nu, sizeof *reshard);
    if (!units || !reshard) {
      fprintf(stderr, "tpx plan: out of memory\n");
      goto out;
    }
    for (size_t i = 0; i < nu; i++)
      units[i] = tpx_selection_fsdp_unit(sel, i, &reshard[i]);
    opts.num_fsdp_units = nu;
    opts.fsdp_units = units;
    opts.fsdp_unit_reshard = reshard;
  }
  size_t nf = tpx_selection_num_fp32(sel);
  if (nf) {
    fp32 = calloc(nf, sizeof *fp32);
    if (!fp32) {
      fprintf(stderr, "tpx plan: out of memory\n");
      goto out;
    }
    for (size_t i = 0; i < nf; i++) fp32[i] = tpx_selection_fp32(sel, i);
    opts.num_fp32_params = nf;
    opts.fp32_params = fp32;
  }
  if (tpx_sharding_create(model, tpx_selection_plan(sel), mesh, &opts, &sh,
                          &err) != TPX_OK) {
    code = fail("applying the plan", &err);
    goto out;
  }

  tpx_report_options ro = TPX_REPORT_OPTIONS_INIT;
  ro.plan_source = tpx_plan_source_name(tpx_selection_source(sel));
  ro.plugin_name = tpx_selection_plugin_name(sel);
  ro.plugin_path = tpx_selection_plugin_path(sel);
  ro.function = tpx_selection_function(sel);
  ro.sequence_parallel = a.sp;
  size_t own = (g_model_trace[0] ? 1 : 0) + (g_plan_trace[0] ? 1 : 0);
  ro.num_trace = own + tpx_selection_trace_size(sel);
  if (ro.num_trace) {
    trace = calloc(ro.num_trace, sizeof *trace);
    if (!trace) {
      fprintf(stderr, "tpx plan: out of memory\n");
      goto out;
    }
    size_t t = 0;
    if (g_model_trace[0]) trace[t++] = g_model_trace;
    if (g_plan_trace[0]) trace[t++] = g_plan_trace;
    for (size_t i = own; i < ro.num_trace; i++)
      trace[i] = tpx_selection_trace(sel, i - own);
    ro.trace = trace;
  }
  ro.selection_diags = diags;
  tpx_status st = strcmp(a.format, "json") == 0
                      ? tpx_report_json(sh, &ro, &text, &err)
                  : a.summary ? tpx_report_summary(sh, &ro, &text, &err)
                              : tpx_report_text(sh, &ro, &text, &err);
  if (st != TPX_OK) {
    code = fail("writing the report", &err);
    goto out;
  }
  fputs(text, stdout);
  if (strcmp(a.format, "json") == 0) fputc('\n', stdout);
  /* A report that did not reach its reader (disk full, closed pipe) must not
   * exit 0: scripts take 0 as "planned, and the report is there". */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "tpx plan: writing the report to standard output: %s\n",
            strerror(errno));
    code = 1;
    goto out;
  }
  code = tpx_report_ok(sh, &ro) ? 0 : 1;

out:
  free(text);
  free(trace);
  free(units);
  free(reshard);
  free(fp32);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_plan_destroy(custom);
  tpx_registry_destroy(reg);
  tpx_model_destroy(model);
  return code;
}
