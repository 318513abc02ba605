/* plugin/call.c — calling into a loaded plugin: one fresh ctx per call, the
 * plugin's status and messages turned into a tpx_status and an error naming
 * the plugin, its path and its words; results copied out of the ctx.
 *
 * Calls are reentrant: nothing here is shared between two calls, so several
 * threads may ask the same plugin at once (the ABI's threading promise).
 *
 * Every call is one tpx__call request (plugin_view.h; the helpers of its
 * data in call_result.c). With isolation
 * on (tpx_registry_set_isolation) the in-process call runs in a child
 * (child.c) and comes back over isolate.c's protocol. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/config.h"
#include "plugin/child.h"
#include "plugin/plugin_internal.h"

/* The message of a failed call. A call that failed after the host refused
 * one of its values: the host's reason (it names the key, the style, the
 * value), with the plugin's words after it — a plugin's message then is
 * often generic ("the host refused a plan entry"). A refusal is the
 * plugin's decision: its words first. Else the bare status. */
static const char *call_message(const tpx_plugin_ctx *ctx, int rc, char *buf,
                                size_t size) {
  if (ctx->has_invalid && rc != TPX_PLUGIN_REFUSED) {
    if (!ctx->has_message || strcmp(ctx->message, ctx->invalid) == 0)
      return ctx->invalid;
    snprintf(buf, size, "%s (the plugin said: %s)", ctx->invalid, ctx->message);
    return buf;
  }
  if (ctx->has_message)
    return ctx->message;
  if (ctx->has_invalid)
    return ctx->invalid;
  return "(the plugin gave no message)";
}

static tpx_status call_result(const tpx__plugin *p, const char *what, int rc,
                              const tpx_plugin_ctx *ctx, int *refused,
                              tpx_error *err) {
  char buf[2 * TPX_ERROR_MESSAGE_SIZE + 32];
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
                         p->name, p->path, what,
                         call_message(ctx, rc, buf, sizeof buf));
  }
  if (rc == TPX_PLUGIN_NO_MEMORY)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "plugin '%s' (%s): %s ran out of memory", p->name,
                         p->path, what);
  return tpx_error_set(err, TPX_PLUGIN, "plugin '%s' (%s): %s failed (%s): %s",
                       p->name, p->path, what, tpx__plugin_status_name(rc),
                       call_message(ctx, rc, buf, sizeof buf));
}

static void fill_request(tpx_plugin_plan_request *req, const tpx__call *c) {
  memset(req, 0, sizeof *req);
  req->struct_size = sizeof *req;
  req->architecture = c->arch;
  req->plan_name = c->plan_name;
  req->sequence_parallel = c->sp ? 1 : 0;
  req->tp_size = c->tp;
}

static tpx_status direct_get_plan(const tpx__plugin *p, tpx__call *c,
                                  tpx_error *err) {
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, TPX__OP_GET_PLAN, p, c->model);
  tpx_status s = tpx_plan_create(&ctx.plan, err);
  if (s != TPX_OK)
    return s;
  tpx_plugin_plan_request req;
  fill_request(&req, c);
  int rc = p->get_plan_fn(tpx__plugin_host_table(), &ctx, &req);
  s = call_result(p, "get_plan", rc, &ctx, &c->refused, err);
  if (s == TPX_OK) {
    c->plan = ctx.plan;
    ctx.plan = NULL;
    c->function = ctx.function;
    ctx.function = NULL;
  }
  tpx_plan_destroy(ctx.plan);
  tpx__ctx_release(&ctx);
  return s;
}

static tpx_status direct_skeleton(const tpx__plugin *p, tpx__call *c,
                                  tpx_error *err) {
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, TPX__OP_SKELETON, p, c->model);
  tpx_status s = tpx_model_create(&ctx.skeleton, err);
  if (s != TPX_OK)
    return s;
  int rc = p->skeleton_fn(tpx__plugin_host_table(), &ctx, c->arch);
  s = call_result(p, TPX_PLUGIN_SKELETON_SYMBOL, rc, &ctx, NULL, err);
  tpx_error cerr = {0};
  if (s == TPX_OK &&
      tpx_model_check_param_sources(ctx.skeleton, &cerr) != TPX_OK)
    s = tpx_error_set(err, TPX_PLUGIN,
                      "plugin '%s' (%s): %s declared stored sources "
                      "(host->skeleton_add_source / "
                      "skeleton_add_split_source) that do not tile their "
                      "parameter or tensor: %s",
                      p->name, p->path, TPX_PLUGIN_SKELETON_SYMBOL,
                      cerr.message);
  if (s == TPX_OK) {
    c->skeleton = ctx.skeleton;
    ctx.skeleton = NULL;
  }
  tpx_model_destroy(ctx.skeleton);
  tpx__ctx_release(&ctx);
  return s;
}

static tpx_status direct_validate(const tpx__plugin *p, tpx__call *c,
                                  tpx_error *err) {
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, TPX__OP_VALIDATE, p, c->model);
  /* Collect into a private list first: a failed validation adds nothing. */
  tpx_status s = tpx_diag_list_create(&ctx.diags, err);
  if (s != TPX_OK)
    return s;
  tpx_plugin_plan_request req;
  fill_request(&req, c);
  int rc = p->validate_fn(tpx__plugin_host_table(), &ctx, &req);
  s = call_result(p, TPX_PLUGIN_VALIDATE_SYMBOL, rc, &ctx, NULL, err);
  if (s == TPX_OK && c->diags) {
    for (size_t i = 0; i < tpx_diag_count(ctx.diags) && s == TPX_OK; i++) {
      tpx_diag d;
      if (tpx_diag_get(ctx.diags, i, &d, NULL) != TPX_OK)
        continue;
      s = tpx_diag_add(c->diags, d.level, d.code, d.subject, d.fix, "%s",
                       d.message);
    }
  }
  tpx_diag_list_destroy(ctx.diags);
  tpx__ctx_release(&ctx);
  return s;
}

typedef int (*strings_fn)(const tpx_plugin_host *, tpx_plugin_ctx *,
                          const char *);

static strings_fn strings_entry(const tpx__plugin *p, tpx__plugin_op op) {
  return op == TPX__OP_FSDP_UNITS ? p->fsdp_fn
         : op == TPX__OP_FP32     ? p->fp32_fn
         : op == TPX__OP_STRATEGY ? p->strategy_fn
                                  : NULL;
}

static tpx_status direct_strings(const tpx__plugin *p, tpx__call *c,
                                 tpx_error *err) {
  const char *sym = tpx__plugin_op_symbol(c->op);
  tpx_plugin_ctx ctx;
  tpx__ctx_init(&ctx, c->op, p, c->model);
  int rc = strings_entry(p, c->op)(tpx__plugin_host_table(), &ctx, c->arch);
  tpx_status s = call_result(p, sym, rc, &ctx, NULL, err);
  if (s == TPX_OK) {
    c->strings = ctx.strings;
    memset(&ctx.strings, 0, sizeof ctx.strings);
  }
  tpx__ctx_release(&ctx);
  return s;
}

/* TPX_NOT_FOUND (with its message) when `p` lacks the op's entry point. */
static tpx_status check_capability(const tpx__plugin *p, tpx__plugin_op op,
                                   tpx_error *err) {
  switch (op) {
  case TPX__OP_GET_PLAN: return TPX_OK;
  case TPX__OP_SKELETON:
    if (p->skeleton_fn)
      return TPX_OK;
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "plugin '%s' (%s) has no model skeleton (it does not "
                         "export %s)",
                         p->name, p->path, TPX_PLUGIN_SKELETON_SYMBOL);
  case TPX__OP_VALIDATE:
    if (p->validate_fn)
      return TPX_OK;
    return tpx_error_set(err, TPX_NOT_FOUND, "plugin '%s' has no validate",
                         p->name);
  default:
    if (strings_entry(p, op))
      return TPX_OK;
    return tpx_error_set(err, TPX_NOT_FOUND, "plugin '%s' does not export %s",
                         p->name, tpx__plugin_op_symbol(op));
  }
}

/* Clear the result half of `c`. */
static void reset_results(tpx__call *c) {
  c->plan = NULL;
  c->function = NULL;
  c->refused = 0;
  c->skeleton = NULL;
  memset(&c->strings, 0, sizeof c->strings);
}

tpx_status tpx__plugin_call_direct(const tpx__plugin *p, tpx__call *c,
                                   tpx_error *err) {
  reset_results(c);
  tpx_status s = check_capability(p, c->op, err);
  if (s != TPX_OK)
    return s;
  tpx__quiet_begin(); /* plugin output never reaches the host's stdout */
  switch (c->op) {
  case TPX__OP_GET_PLAN: s = direct_get_plan(p, c, err); break;
  case TPX__OP_SKELETON: s = direct_skeleton(p, c, err); break;
  case TPX__OP_VALIDATE: s = direct_validate(p, c, err); break;
  default: s = direct_strings(p, c, err); break;
  }
  tpx__quiet_end();
  return s;
}

/* ---- isolated calls -------------------------------------------------------
 */

typedef struct isolated_arg {
  const tpx__plugin *p;
  tpx__call *c;
} isolated_arg;

/* The child: the in-process call against its own objects, sent back. */
static void isolated_body(int fd, void *arg) {
  isolated_arg *a = arg;
  tpx_error e = {0};
  tpx_diag_list *own = NULL;
  tpx_status s = TPX_OK;
  if (a->c->op == TPX__OP_VALIDATE) {
    s = tpx_diag_list_create(&own, &e);
    a->c->diags = own;
  }
  if (s == TPX_OK)
    s = tpx__plugin_call_direct(a->p, a->c, &e);
  tpx__isolate_send(fd, a->c, s, &e);
}

tpx_status tpx__plugin_call(const tpx__plugin *p, tpx__call *c,
                            tpx_error *err) {
  if (!p->isolate)
    return tpx__plugin_call_direct(p, c, err);
  reset_results(c);
  tpx_status s = check_capability(p, c->op, err);
  if (s != TPX_OK)
    return s;
  const char *what = tpx__plugin_op_symbol(c->op);
  isolated_arg a = {p, c};
  tpx__child_spec spec = {isolated_body, &a, p->isolate_timeout,
                          p->child_memory, p->child_cpu};
  tpx__child_result res;
  tpx_error cerr = {0};
  s = tpx__child_run(&spec, &res, &cerr);
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(err, s,
                         "out of memory reading the result of %s from "
                         "plugin '%s' (%s)",
                         what, p->name, p->path);
  if (s != TPX_OK)
    return tpx_error_set(err, s, "plugin '%s' (%s): cannot isolate %s: %s",
                         p->name, p->path, what, cerr.message);
  s = tpx__isolate_receive(p, c, &res, err);
  tpx__child_result_free(&res);
  return s;
}

/* The stored sources `src` declares (host->skeleton_add_source), onto the
 * parameters of the same names in `dst`; a parameter `dst` already has
 * sources for keeps them. */
static tpx_status merge_sources(tpx_model *dst, const tpx_model *src,
                                tpx_error *err) {
  size_t np = tpx_model_num_params(src);
  for (size_t i = 0; i < np; i++) {
    size_t n = tpx_model_num_param_sources(src, (int64_t)i);
    tpx_param_info pi;
    if (n == 0)
      continue;
    tpx_status s = tpx_model_param(src, (int64_t)i, &pi, err);
    int64_t di = s == TPX_OK ? tpx_model_find_param(dst, pi.fqn) : -1;
    if (s == TPX_OK && di >= 0 && tpx_model_num_param_sources(dst, di) > 0)
      continue;
    for (size_t k = 0; s == TPX_OK && k < n; k++) {
      const char *name = NULL;
      tpx_slice box;
      int tr = 0;
      s = tpx_model_param_source(src, (int64_t)i, k, &name, &box, &tr, err);
      if (s == TPX_OK)
        s = tpx_model_add_param_source_box(dst, pi.fqn, name, &box, tr, err);
    }
    if (s != TPX_OK)
      return s;
  }
  return TPX_OK;
}

/* Copy every module, parameter, tie and stored source of `src` into
 * `dst`, in order. */
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
        s = tpx_model_add_param(dst, mod ? mod : "", pi.name, pi.shape, pi.ndim,
                                pi.dtype, NULL, err);
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
  return merge_sources(dst, src, err);
}

/* What a skeleton costs, about: a layer's modules and parameters (measured
 * for Llama: ~5 KiB, rounded up) plus an expert's, per layer. A config
 * asking for more than TPX__SKELETON_MAX_BYTES is refused before the plugin
 * builds anything (num_hidden_layers: 1000000 grew to 6.6 GB). */
#define TPX__SKELETON_LAYER_BYTES 8192.0
#define TPX__SKELETON_EXPERT_BYTES 2048.0
#define TPX__SKELETON_MAX_BYTES (1024.0 * 1024.0 * 1024.0)

/* The largest integer among `keys` (top level and text_config.), with the
 * key that holds it; 0 when none. */
static int64_t config_max(json_t *cfg, const char *const *keys, size_t n,
                          char *which, size_t which_size) {
  int64_t best = 0;
  for (size_t i = 0; i < n; i++)
    for (int nested = 0; nested < 2; nested++) {
      char path[96];
      snprintf(path, sizeof path, "%s%s", nested ? "text_config." : "",
               keys[i]);
      int64_t v = 0;
      if (tpx__config_integer(tpx__config_lookup(cfg, path), &v) && v > best) {
        best = v;
        snprintf(which, which_size, "%s", path);
      }
    }
  return best;
}

static tpx_status check_skeleton_size(const tpx_model *model, tpx_error *err) {
  json_t *cfg = tpx__model_config(model);
  if (!cfg)
    return TPX_OK;
  static const char *const layer_keys[] = {"num_hidden_layers", "n_layer",
                                           "num_layers", "n_layers"};
  static const char *const expert_keys[] = {"num_local_experts", "num_experts",
                                            "n_routed_experts",
                                            "moe_num_experts"};
  char lkey[112] = "", ekey[112] = "";
  int64_t layers = config_max(cfg, layer_keys, 4, lkey, sizeof lkey);
  int64_t experts = config_max(cfg, expert_keys, 4, ekey, sizeof ekey);
  double bytes =
      (double)layers * (TPX__SKELETON_LAYER_BYTES +
                        (double)experts * TPX__SKELETON_EXPERT_BYTES);
  if (bytes <= TPX__SKELETON_MAX_BYTES)
    return TPX_OK;
  char per[160] = "";
  if (experts > 0)
    snprintf(per, sizeof per, " of %lld experts each (%s)", (long long)experts,
             ekey);
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "config %s %lld: the skeleton for %lld layers%s needs "
                       "about %.1f GiB; tpx builds skeletons of at most "
                       "%.0f GiB (check the config)",
                       lkey, (long long)layers, (long long)layers, per,
                       bytes / (1024.0 * 1024.0 * 1024.0),
                       TPX__SKELETON_MAX_BYTES / (1024.0 * 1024.0 * 1024.0));
}

tpx_status tpx__plugin_skeleton(const tpx__plugin *p, tpx_model *model,
                                const char *architecture, tpx_error *err) {
  tpx_status bound = check_skeleton_size(model, err);
  if (bound != TPX_OK)
    return bound;
  /* Build into a scratch model so a plugin failing halfway leaves the
   * caller's model untouched; merge only a complete skeleton. */
  tpx__call c = {.op = TPX__OP_SKELETON, .model = model, .arch = architecture};
  tpx_status s = tpx__plugin_call(p, &c, err);
  if (s == TPX_OK) {
    tpx_error merr = {0};
    s = merge_model(model, c.skeleton, &merr);
    if (s != TPX_OK)
      tpx_error_set(err, s,
                    "plugin '%s' (%s): skeleton does not fit the "
                    "model: %s",
                    p->name, p->path, merr.message);
  }
  tpx__call_release(&c);
  return s;
}

/* ---- shorthands for selection -------------------------------------------- */

tpx_status tpx__plugin_get_plan(const tpx__plugin *p, const tpx_model *model,
                                const char *architecture, const char *plan_name,
                                int sequence_parallel, int64_t tp_size,
                                tpx_plan **out, char **function_out,
                                int *refused, tpx_error *err) {
  tpx__call c = {.op = TPX__OP_GET_PLAN,
                 .model = model,
                 .arch = architecture,
                 .plan_name = plan_name,
                 .sp = sequence_parallel,
                 .tp = tp_size};
  tpx_status s = tpx__plugin_call(p, &c, err);
  *out = c.plan;
  c.plan = NULL;
  if (function_out) {
    *function_out = c.function;
    c.function = NULL;
  }
  if (refused)
    *refused = c.refused;
  tpx__call_release(&c);
  return s;
}

tpx_status tpx__plugin_validate(const tpx__plugin *p, const tpx_model *model,
                                const char *architecture, const char *plan_name,
                                int sequence_parallel, int64_t tp_size,
                                tpx_diag_list *diags, tpx_error *err) {
  tpx__call c = {.op = TPX__OP_VALIDATE,
                 .model = model,
                 .arch = architecture,
                 .plan_name = plan_name,
                 .sp = sequence_parallel,
                 .tp = tp_size,
                 .diags = diags};
  tpx_status s = tpx__plugin_call(p, &c, err);
  tpx__call_release(&c);
  return s;
}

tpx_status tpx__plugin_strings(const tpx__plugin *p, tpx__plugin_op op,
                               const tpx_model *model, const char *architecture,
                               tpx__strvec *out, tpx_error *err) {
  tpx__call c = {.op = op, .model = model, .arch = architecture};
  tpx_status s = tpx__plugin_call(p, &c, err);
  *out = c.strings;
  memset(&c.strings, 0, sizeof c.strings);
  tpx__call_release(&c);
  return s;
}
