/* plugin/call.c — calling into a loaded plugin: one fresh ctx per call, the
 * plugin's status and messages turned into a tpx_status and an error naming
 * the plugin, its path and its words; results copied out of the ctx.
 *
 * Calls are reentrant: nothing here is shared between two calls, so several
 * threads may ask the same plugin at once (the ABI's threading promise).
 *
 * With isolation on (tpx_registry_set_isolation) each entry point hands the
 * call to isolate.c, whose child comes back here through the _direct
 * functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/config.h"
#include "plugin/plugin_internal.h"

/* The message of a failed call: the plugin's own, else the first refused
 * value, else the bare status. */
static const char *call_message(const tpx_plugin_ctx *ctx) {
  if (ctx->has_message)
    return ctx->message;
  if (ctx->has_invalid)
    return ctx->invalid;
  return "(the plugin gave no message)";
}

static tpx_status call_result(const tpx__plugin *p, const char *what, int rc,
                              const tpx_plugin_ctx *ctx, int *refused,
                              tpx_error *err) {
  if (refused)
    *refused = 0;
  if (rc == TPX_PLUGIN_OK && !ctx->has_invalid)
    return TPX_OK;
  if (rc == TPX_PLUGIN_OK)
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s): %s handed over an invalid value: "
                         "%s",
                         p->name, p->path, what, ctx->invalid);
  if (rc == TPX_PLUGIN_REFUSED) {
    if (refused)
      *refused = 1;
    return tpx_error_set(err, TPX_PLUGIN, "plugin '%s' (%s) refused %s: %s",
                         p->name, p->path, what, call_message(ctx));
  }
  if (rc == TPX_PLUGIN_NO_MEMORY)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "plugin '%s' (%s): %s ran out of memory", p->name,
                         p->path, what);
  return tpx_error_set(err, TPX_PLUGIN, "plugin '%s' (%s): %s failed (%s): %s",
                       p->name, p->path, what, tpx__plugin_status_name(rc),
                       call_message(ctx));
}

static void fill_request(tpx_plugin_plan_request *req, const char *arch,
                         const char *plan_name, int sp, int64_t tp) {
  memset(req, 0, sizeof *req);
  req->struct_size = sizeof *req;
  req->architecture = arch;
  req->plan_name = plan_name;
  req->sequence_parallel = sp ? 1 : 0;
  req->tp_size = tp;
}

tpx_status tpx__plugin_get_plan(const tpx__plugin *p, const tpx_model *model,
                                const char *architecture,
                                const char *plan_name, int sequence_parallel,
                                int64_t tp_size, tpx_plan **out,
                                char **function_out, int *refused,
                                tpx_error *err) {
  if (!p->isolate)
    return tpx__plugin_get_plan_direct(p, model, architecture, plan_name,
                                       sequence_parallel, tp_size, out,
                                       function_out, refused, err);
  *out = NULL;
  if (function_out)
    *function_out = NULL;
  if (refused)
    *refused = 0;
  return tpx__isolate_get_plan(p, model, architecture, plan_name,
                               sequence_parallel, tp_size, out, function_out,
                               refused, err);
}

tpx_status tpx__plugin_get_plan_direct(const tpx__plugin *p,
                                       const tpx_model *model,
                                       const char *architecture,
                                       const char *plan_name,
                                       int sequence_parallel, int64_t tp_size,
                                       tpx_plan **out, char **function_out,
                                       int *refused, tpx_error *err) {
  *out = NULL;
  if (function_out)
    *function_out = NULL;
  if (refused)
    *refused = 0;
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, TPX__OP_GET_PLAN, p, model);
  tpx_status s = tpx_plan_create(&ctx.plan, err);
  if (s != TPX_OK)
    return s;
  tpx_plugin_plan_request req;
  fill_request(&req, architecture, plan_name, sequence_parallel, tp_size);
  int rc = p->get_plan_fn(tpx__plugin_host_table(), &ctx, &req);
  s = call_result(p, "get_plan", rc, &ctx, refused, err);
  if (s == TPX_OK) {
    *out = ctx.plan;
    ctx.plan = NULL;
    if (function_out) {
      *function_out = ctx.function;
      ctx.function = NULL;
    }
  }
  tpx_plan_destroy(ctx.plan);
  tpx__ctx_release(&ctx);
  return s;
}

/* Copy every module, parameter and tie of `src` into `dst`, in order. */
static tpx_status merge_model(tpx_model *dst, const tpx_model *src,
                              tpx_error *err) {
  size_t nm = tpx_model_num_modules(src);
  for (size_t i = 1; i < nm; i++) {
    const char *fqn = tpx_model_module_fqn(src, (int64_t)i);
    tpx_module_kind kind = tpx_model_module_kind(src, (int64_t)i);
    /* A parent the skeleton created implicitly must not turn a module the
     * model already knows (e.g. from safetensors) into a container. */
    if (kind == TPX_MODULE_CONTAINER && tpx_model_find_module(dst, fqn) >= 0)
      continue;
    tpx_status s = tpx_model_add_module(dst, fqn, kind, NULL, err);
    if (s != TPX_OK)
      return s;
  }
  size_t np = tpx_model_num_params(src);
  for (size_t pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < np; i++) {
      tpx_param_info pi;
      tpx_status s = tpx_model_param(src, (int64_t)i, &pi, err);
      if (s != TPX_OK)
        return s;
      if (pass == 0 && pi.tied_to < 0) {
        const char *mod = tpx_model_module_fqn(src, pi.module);
        if (tpx_model_find_param(dst, pi.fqn) >= 0)
          continue; /* already known (e.g. from safetensors): keep it */
        s = tpx_model_add_param(dst, mod ? mod : "", pi.name, pi.shape,
                                pi.ndim, pi.dtype, NULL, err);
      } else if (pass == 1 && pi.tied_to >= 0) {
        tpx_param_info target;
        s = tpx_model_param(src, pi.tied_to, &target, err);
        if (s == TPX_OK)
          s = tpx_model_tie(dst, pi.fqn, target.fqn, err);
      }
      if (s != TPX_OK)
        return s;
    }
  }
  return TPX_OK;
}

tpx_status tpx__plugin_skeleton_build(const tpx__plugin *p,
                                      const tpx_model *model,
                                      const char *architecture,
                                      tpx_model **out, tpx_error *err) {
  *out = NULL;
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, TPX__OP_SKELETON, p, model);
  tpx_status s = tpx_model_create(&ctx.skeleton, err);
  if (s != TPX_OK)
    return s;
  int rc = p->skeleton_fn(tpx__plugin_host_table(), &ctx, architecture);
  s = call_result(p, TPX_PLUGIN_SKELETON_SYMBOL, rc, &ctx, NULL, err);
  if (s == TPX_OK) {
    *out = ctx.skeleton;
    ctx.skeleton = NULL;
  }
  tpx_model_destroy(ctx.skeleton);
  tpx__ctx_release(&ctx);
  return s;
}

tpx_status tpx__plugin_skeleton(const tpx__plugin *p, tpx_model *model,
                                const char *architecture, tpx_error *err) {
  if (!p->skeleton_fn)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "plugin '%s' (%s) has no model skeleton (it does not "
                         "export %s)",
                         p->name, p->path, TPX_PLUGIN_SKELETON_SYMBOL);
  /* Build into a scratch model so a plugin failing halfway leaves the
   * caller's model untouched; merge only a complete skeleton. */
  tpx_model *skeleton = NULL;
  tpx_status s =
      p->isolate
          ? tpx__isolate_skeleton(p, model, architecture, &skeleton, err)
          : tpx__plugin_skeleton_build(p, model, architecture, &skeleton, err);
  if (s == TPX_OK) {
    tpx_error merr = {0};
    s = merge_model(model, skeleton, &merr);
    if (s != TPX_OK)
      tpx_error_set(err, s, "plugin '%s' (%s): skeleton does not fit the "
                    "model: %s", p->name, p->path, merr.message);
  }
  tpx_model_destroy(skeleton);
  return s;
}

tpx_status tpx__plugin_validate(const tpx__plugin *p, const tpx_model *model,
                                const char *architecture,
                                const char *plan_name, int sequence_parallel,
                                int64_t tp_size, tpx_diag_list *diags,
                                tpx_error *err) {
  if (!p->validate_fn)
    return tpx_error_set(err, TPX_NOT_FOUND, "plugin '%s' has no validate",
                         p->name);
  if (p->isolate)
    return tpx__isolate_validate(p, model, architecture, plan_name,
                                 sequence_parallel, tp_size, diags, err);
  return tpx__plugin_validate_direct(p, model, architecture, plan_name,
                                     sequence_parallel, tp_size, diags, err);
}

tpx_status tpx__plugin_validate_direct(const tpx__plugin *p,
                                       const tpx_model *model,
                                       const char *architecture,
                                       const char *plan_name,
                                       int sequence_parallel, int64_t tp_size,
                                       tpx_diag_list *diags, tpx_error *err) {
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, TPX__OP_VALIDATE, p, model);
  /* Collect into a private list first: a failed validation adds nothing. */
  tpx_status s = tpx_diag_list_create(&ctx.diags, err);
  if (s != TPX_OK)
    return s;
  tpx_plugin_plan_request req;
  fill_request(&req, architecture, plan_name, sequence_parallel, tp_size);
  int rc = p->validate_fn(tpx__plugin_host_table(), &ctx, &req);
  s = call_result(p, TPX_PLUGIN_VALIDATE_SYMBOL, rc, &ctx, NULL, err);
  if (s == TPX_OK && diags) {
    for (size_t i = 0; i < tpx_diag_count(ctx.diags) && s == TPX_OK; i++) {
      tpx_diag d;
      if (tpx_diag_get(ctx.diags, i, &d, NULL) != TPX_OK)
        continue;
      s = tpx_diag_add(diags, d.level, d.code, d.subject, d.fix, "%s",
                       d.message);
    }
  }
  tpx_diag_list_destroy(ctx.diags);
  tpx__ctx_release(&ctx);
  return s;
}

tpx_status tpx__plugin_strings(const tpx__plugin *p, tpx__plugin_op op,
                               const tpx_model *model,
                               const char *architecture, tpx__strvec *out,
                               tpx_error *err) {
  memset(out, 0, sizeof *out);
  const int has = op == TPX__OP_FSDP_UNITS ? p->fsdp_fn != NULL
                  : op == TPX__OP_FP32     ? p->fp32_fn != NULL
                  : op == TPX__OP_STRATEGY ? p->strategy_fn != NULL
                                           : 0;
  if (p->isolate && has)
    return tpx__isolate_strings(p, op, model, architecture, out, err);
  return tpx__plugin_strings_direct(p, op, model, architecture, out, err);
}

tpx_status tpx__plugin_strings_direct(const tpx__plugin *p, tpx__plugin_op op,
                                      const tpx_model *model,
                                      const char *architecture,
                                      tpx__strvec *out, tpx_error *err) {
  memset(out, 0, sizeof *out);
  int (*fn)(const tpx_plugin_host *, tpx_plugin_ctx *, const char *) =
      op == TPX__OP_FSDP_UNITS ? p->fsdp_fn
      : op == TPX__OP_FP32     ? p->fp32_fn
      : op == TPX__OP_STRATEGY ? p->strategy_fn
                               : NULL;
  const char *sym = tpx__plugin_op_symbol(op);
  if (!fn)
    return tpx_error_set(err, TPX_NOT_FOUND, "plugin '%s' does not export %s",
                         p->name, sym);
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, op, p, model);
  int rc = fn(tpx__plugin_host_table(), &ctx, architecture);
  tpx_status s = call_result(p, sym, rc, &ctx, NULL, err);
  if (s == TPX_OK) {
    *out = ctx.strings;
    memset(&ctx.strings, 0, sizeof ctx.strings);
  }
  tpx__ctx_release(&ctx);
  return s;
}
