/* plan_setup.c — options -> sharding, the one path `tpx plan` and
 * `tpx shard` share (see plan_setup.h). Moved out of cmd_plan.c unchanged
 * in behaviour; messages are prefixed with the calling command. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "plan_extra.h"
#include "plan_setup.h"
#include "tpx/fsdp.h"
#include "tpx/registry.h"
#include "tpx/sharding.h"

#define TRACE_SIZE sizeof(((tpx_cli_planned *)0)->model_trace)

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

/* --weights: the module tree from the plugin's skeleton when a plugin
 * serving the architecture has one (modules without parameters, such as
 * rotary embeddings, and the real module kinds), then the safetensors
 * headers, which must agree with it tensor for tensor and add what it
 * lacks. A skeleton that fails or disagrees with the headers is dropped:
 * the tree then comes from the headers alone (a warning says so). *model
 * may be replaced by a fresh one. */
static tpx_status model_with_weights(const tpx_registry *reg, tpx_model **model,
                                     const tpx_cli_plan_args *a, char *trace,
                                     tpx_diag_list *diags, tpx_error *err) {
  tpx_error serr;
  tpx_error_clear(&serr);
  const char *arch = tpx_model_num_architectures(*model)
                         ? tpx_model_architecture(*model, 0)
                         : NULL;
  int64_t pi = arch ? tpx_registry_find(reg, arch) : -1;
  tpx_plugin_desc info;
  int has_skeleton =
      pi >= 0 && tpx_registry_plugin(reg, (size_t)pi, &info, NULL) == TPX_OK &&
      info.has_skeleton;
  if (!has_skeleton) {
    snprintf(trace, TRACE_SIZE,
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
    snprintf(trace, TRACE_SIZE,
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
  if (checking && cli_weights_shape_conflict(*model, a->weights, conflict,
                                             sizeof conflict) > 0)
    return tpx_error_set(err, TPX_VALIDATION, "%s", conflict);
  /* Start over from the config: the failed attempt may have left part of
   * a tree behind. */
  tpx_model *fresh = NULL;
  st = tpx_model_load_config(a->config, &fresh, err);
  if (st != TPX_OK)
    return st;
  tpx_model_destroy(*model);
  *model = fresh;
  arch = tpx_model_num_architectures(fresh) ? tpx_model_architecture(fresh, 0)
                                            : NULL;
  snprintf(trace, TRACE_SIZE,
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

int cli_check_dtype(const char *cmd, const char *dtype, const char *weights) {
  tpx_dtype d;
  tpx_error err = {0};
  if (tpx_dtype_parse(dtype, &d, &err) != TPX_OK || !tpx_dtype_is_float(d)) {
    fprintf(stderr,
            "tpx %s: --dtype expects a floating-point dtype (bf16, "
            "f16, f32, or torch's bfloat16, float16, float32), got '%s'\n",
            cmd, dtype);
    return -1;
  }
  if (weights) {
    fprintf(stderr,
            "tpx %s: --dtype sets the dtype of a config-only plan; "
            "with --weights every tensor has the checkpoint's own dtype\n",
            cmd);
    return -1;
  }
  return 0;
}

/* The config, with its torch_dtype replaced by --dtype when given
 * (tpx_model_set_config_dtype): the skeleton gives every parameter the
 * plugin does not pin that dtype. */
static tpx_status load_config(const tpx_cli_plan_args *a, tpx_model **out,
                              char *trace, tpx_error *err) {
  tpx_status st = tpx_model_load_config(a->config, out, err);
  if (st != TPX_OK || !a->dtype)
    return st;
  tpx_dtype d = TPX_DTYPE_INVALID;
  st = tpx_dtype_parse(a->dtype, &d, err);
  if (st == TPX_OK)
    st = tpx_model_set_config_dtype(*out, d, err);
  if (st != TPX_OK) {
    tpx_model_destroy(*out);
    *out = NULL;
    return st;
  }
  snprintf(trace, TRACE_SIZE,
           "model: parameters in %s (--dtype, in place of "
           "the config's torch_dtype or the family's assumed dtype; the "
           "plugin's fp32 parameters stay fp32)",
           a->dtype);
  return TPX_OK;
}

/* Exit status 2: an input named on the command line cannot be used
 * (missing, unreadable, malformed, or inconsistent with another input);
 * 1: tpx itself could not go on (docs/tpx.1 "EXIT STATUS"). */
static int fail_input(const char *cmd, const char *what, const tpx_error *err) {
  fprintf(stderr, "tpx %s: %s: %s\n", cmd, what, err->message);
  return 2;
}

static int fail(const char *cmd, const char *what, const tpx_error *err) {
  fprintf(stderr, "tpx %s: %s: %s\n", cmd, what, err->message);
  return 1;
}

void tpx_cli_planned_free(tpx_cli_planned *p) {
  tpx_sharding_destroy(p->sh);
  tpx_mesh_destroy(p->mesh);
  tpx_selection_destroy(p->sel);
  tpx_diag_list_destroy(p->diags);
  tpx_plan_destroy(p->custom);
  tpx_registry_destroy(p->reg);
  tpx_model_destroy(p->model);
  memset(p, 0, sizeof *p);
}

int tpx_cli_plan_build(const char *cmd, const tpx_cli_plan_args *a,
                       tpx_cli_planned *p) {
  int rc = tpx_cli_plan_prepare(cmd, a, p);
  return rc ? rc : tpx_cli_plan_finish(cmd, a, p);
}

int tpx_cli_plan_prepare(const char *cmd, const tpx_cli_plan_args *a,
                         tpx_cli_planned *p) {
  memset(p, 0, sizeof *p);
  tpx_error err;
  tpx_error_clear(&err);
  if (load_config(a, &p->model, p->model_trace, &err) != TPX_OK)
    return fail_input(cmd, "reading the config", &err);
  if (tpx_registry_create(&p->reg, &err) != TPX_OK ||
      tpx_registry_set_isolation(p->reg, a->isolate, PLUGIN_TIMEOUT_S, &err) !=
          TPX_OK ||
      tpx_registry_load_default(p->reg, &err) != TPX_OK)
    return fail(cmd, "loading plugins", &err);
  char who[32];
  snprintf(who, sizeof who, "tpx %s", cmd);
  cli_report_unusable_dirs(p->reg, who);
  if (tpx_diag_list_create(&p->diags, &err) != TPX_OK ||
      cli_registry_warnings_into(p->reg, p->diags, &err) != TPX_OK)
    return fail(cmd, "planning", &err);
  if (a->weights) {
    if (model_with_weights(p->reg, &p->model, a, p->model_trace, p->diags,
                           &err) != TPX_OK)
      return fail_input(cmd, "reading safetensors headers", &err);
    if (cli_fp8_diag(p->model, p->diags) != 0)
      return fail(cmd, "planning", &err);
  } else if (tpx_registry_build_skeleton(p->reg, p->model, &err) != TPX_OK) {
    const char *arch = tpx_model_num_architectures(p->model)
                           ? tpx_model_architecture(p->model, 0)
                           : NULL;
    fprintf(stderr,
            "tpx %s: no module skeleton is available for %s%s%s: %s\n"
            "  pass --weights PATH (model.safetensors, "
            "model.safetensors.index.json, or their directory) to read the "
            "module tree from the safetensors headers\n",
            cmd, arch ? "'" : "", arch ? arch : "this config", arch ? "'" : "",
            err.message);
    return 1;
  }
  /* What the plugins declare about the class (its layer lists, ...), also
   * for a module tree read from the safetensors headers alone. */
  if (tpx_registry_describe_model(p->reg, p->model, &err) != TPX_OK)
    return fail(cmd, "planning", &err);
  if (a->plan && is_file(a->plan)) {
    if (cli_load_plan_file(a->plan, p->model, p->diags, &p->custom,
                           p->plan_trace, sizeof p->plan_trace, &err) != TPX_OK)
      return fail_input(cmd, "reading the plan", &err);
  } else if (a->plan && looks_like_path(a->plan)) {
    struct stat pst;
    int e = stat(a->plan, &pst) == 0 ? 0 : errno;
    fprintf(stderr,
            "tpx %s: --plan '%s': %s (give a tpx-plan/1 file, a Hugging "
            "Face tp_plan file, or the name of a plugin's named plan; see "
            "`tpx plugins`)\n",
            cmd, a->plan, e ? strerror(e) : "not a regular file");
    return 2;
  }
  tpx_select_options so = TPX_SELECT_OPTIONS_INIT;
  so.tp_size = a->tp;
  so.sequence_parallel = a->sp;
  so.custom = p->custom;
  so.plan_name = (a->plan && !p->custom) ? a->plan : NULL;
  so.ep = a->ep > 1 ? a->ep : 1;
  p->so = so;
  return 0;
}

int tpx_cli_plan_finish(const char *cmd, const tpx_cli_plan_args *a,
                        tpx_cli_planned *p) {
  tpx_error err;
  tpx_error_clear(&err);
  tpx_status sst =
      tpx_select_plan(p->reg, p->model, &p->so, &p->sel, p->diags, &err);
  if (sst == TPX_NOT_FOUND && p->so.plan_name) /* --plan NAME nobody serves */
    return fail_input(cmd, "selecting a plan", &err);
  if (sst != TPX_OK)
    return fail(cmd, "selecting a plan", &err);
  if (plan_mesh(a->dp_replicate, a->dp_shard, a->cp, a->tp, &p->mesh, &err) !=
      TPX_OK)
    return fail(cmd, "building the mesh", &err);
  if (a->ep > 1) { /* upstream builds the MoE mesh before it plans */
    tpx_mesh *moe = NULL;
    tpx_status mst = tpx_mesh_create_moe(p->mesh, a->ep, &moe, &err);
    tpx_mesh_destroy(moe);
    if (mst != TPX_OK)
      return fail(cmd, "building the MoE mesh", &err);
  }
  if (plan_shard(p->model, p->sel, p->mesh, a->fsdp, &p->sh, &err) != TPX_OK)
    return fail(cmd, "applying the plan", &err);
  return 0;
}
