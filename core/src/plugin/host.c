/* plugin/host.c — the host side of the plugin ABI: the function table a
 * plugin calls (tpx_plugin_host) and the per-call context behind it.
 *
 * Every value a plugin hands over is checked here (NULL, length, style and
 * layout names, dims, dtype, kebab-case codes) and copied before the call
 * returns; a refused value is answered with TPX_PLUGIN_INVALID and also
 * remembered in the ctx, so a plugin that ignores the status still fails
 * the call instead of producing a silently incomplete result.
 *
 * Not the loader (loader.c) and not the calls into the plugin (call.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/log_view.h"
#include "model/config.h"
#include "plugin/plugin_internal.h"
#include "tpx/dtype.h"
#include "tpx_config.h"

/* ---- small helpers ---------------------------------------------------- */

const char *tpx__plugin_status_name(int status) {
  switch (status) {
  case TPX_PLUGIN_OK: return "TPX_PLUGIN_OK";
  case TPX_PLUGIN_NOT_FOUND: return "TPX_PLUGIN_NOT_FOUND";
  case TPX_PLUGIN_TYPE_MISMATCH: return "TPX_PLUGIN_TYPE_MISMATCH";
  case TPX_PLUGIN_REFUSED: return "TPX_PLUGIN_REFUSED";
  case TPX_PLUGIN_INVALID: return "TPX_PLUGIN_INVALID";
  case TPX_PLUGIN_ABI_UNSUPPORTED: return "TPX_PLUGIN_ABI_UNSUPPORTED";
  case TPX_PLUGIN_NO_MEMORY: return "TPX_PLUGIN_NO_MEMORY";
  case TPX_PLUGIN_ERROR: return "TPX_PLUGIN_ERROR";
  default: return "unknown status";
  }
}

void tpx__ctx_init(tpx_plugin_ctx *ctx, tpx__plugin_op op,
                   const tpx__plugin *plugin, const tpx_model *model) {
  memset(ctx, 0, sizeof *ctx);
  ctx->magic = TPX__CTX_MAGIC;
  ctx->op = op;
  ctx->plugin = plugin;
  ctx->model = model;
}

void tpx__ctx_release(tpx_plugin_ctx *ctx) {
  tpx__strvec_free(&ctx->strings);
  free(ctx->function);
  ctx->function = NULL;
  ctx->magic = 0;
}

static int ctx_ok(const tpx_plugin_ctx *ctx) {
  return ctx != NULL && ctx->magic == TPX__CTX_MAGIC;
}

/* Record a refused value and answer TPX_PLUGIN_INVALID. */
static int invalid(tpx_plugin_ctx *ctx, const char *fn, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int invalid(tpx_plugin_ctx *ctx, const char *fn, const char *fmt, ...) {
  if (!ctx_ok(ctx))
    return TPX_PLUGIN_INVALID;
  char buf[TPX_ERROR_MESSAGE_SIZE - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (!ctx->has_invalid) {
    snprintf(ctx->invalid, sizeof ctx->invalid, "host->%s: %s", fn, buf);
    ctx->has_invalid = 1;
  }
  tpx__log(TPX_LOG_WARN, "plugin %s: %s: host->%s refused: %s",
           ctx->plugin ? ctx->plugin->name : "?",
           tpx__plugin_op_symbol(ctx->op), fn, buf);
  return TPX_PLUGIN_INVALID;
}

/* A string the plugin hands over: non-NULL, NUL within the cap. */
static int str_ok(const char *s) {
  return s != NULL && memchr(s, '\0', TPX__PLUGIN_MAX_STRING) != NULL;
}

#define CHECK_CTX(ctx)                                                         \
  do {                                                                         \
    if (!ctx_ok(ctx))                                                          \
      return TPX_PLUGIN_INVALID;                                               \
  } while (0)

#define REQUIRE_OP(ctx, fn, want)                                              \
  do {                                                                         \
    if ((ctx)->op != (want))                                                   \
      return invalid((ctx), (fn), "only available during %s, not %s",          \
                     tpx__plugin_op_symbol(want),                              \
                     tpx__plugin_op_symbol((ctx)->op));                        \
  } while (0)

/* ---- logging and errors ------------------------------------------------ */

/* Messages logged with a NULL ctx during registration end up here, so a
 * registration failure can be reported with the plugin's own words.
 *
 * The one piece of state outside the registry object, and why: the ABI's
 * register_parallel_strategy gets no ctx (plugins log with NULL), so the
 * loader's buffer can only reach host_log through the thread. It is
 * thread-local, points at the loader's stack only for the duration of one
 * register call, and is NULL otherwise; two threads loading at once do not
 * share it. */
static _Thread_local char *registration_log;
static _Thread_local size_t registration_log_size;

void tpx__plugin_capture_registration_log(char *buf, size_t size) {
  registration_log = buf;
  registration_log_size = size;
  if (buf && size)
    buf[0] = '\0';
}

static void host_log(tpx_plugin_ctx *ctx, int level, const char *message) {
  if (!str_ok(message))
    return;
  if (level < TPX_PLUGIN_LOG_ERROR)
    level = TPX_PLUGIN_LOG_ERROR;
  if (level > TPX_PLUGIN_LOG_TRACE)
    level = TPX_PLUGIN_LOG_TRACE;
  const char *name = ctx_ok(ctx) && ctx->plugin ? ctx->plugin->name : NULL;
  if (!ctx_ok(ctx) && registration_log && registration_log_size &&
      level <= TPX_PLUGIN_LOG_WARN && registration_log[0] == '\0')
    snprintf(registration_log, registration_log_size, "%s", message);
  /* The plugin log levels equal the library's (tpx/log.h). */
  tpx__log(level, "plugin %s: %s", name ? name : "(registering)", message);
}

static int host_set_error(tpx_plugin_ctx *ctx, const char *message) {
  CHECK_CTX(ctx);
  if (!str_ok(message))
    return invalid(ctx, "set_error", "message is NULL or too long");
  if (!ctx->has_message) {
    snprintf(ctx->message, sizeof ctx->message, "%s", message);
    ctx->has_message = 1;
  }
  return TPX_PLUGIN_OK;
}

/* ---- config reads ------------------------------------------------------ */

static json_t *config_node(tpx_plugin_ctx *ctx, const char *path, int *rc) {
  if (!str_ok(path)) {
    *rc = invalid(ctx, "config_get", "path is NULL or too long");
    return NULL;
  }
  json_t *root = ctx->model ? tpx__model_config(ctx->model) : NULL;
  if (!root) {
    *rc = TPX_PLUGIN_NOT_FOUND;
    return NULL;
  }
  json_t *node = path[0] == '\0' ? root : tpx__config_lookup(root, path);
  if (!node || json_is_null(node)) {
    *rc = TPX_PLUGIN_NOT_FOUND;
    return NULL;
  }
  *rc = TPX_PLUGIN_OK;
  return node;
}

static int host_config_has(tpx_plugin_ctx *ctx, const char *path) {
  if (!ctx_ok(ctx))
    return 0;
  int rc;
  return config_node(ctx, path, &rc) != NULL;
}

static int host_config_get_int(tpx_plugin_ctx *ctx, const char *path,
                               int64_t *out) {
  CHECK_CTX(ctx);
  if (!out)
    return invalid(ctx, "config_get_int", "out is NULL");
  int rc;
  json_t *n = config_node(ctx, path, &rc);
  if (!n)
    return rc;
  if (tpx__config_integer(n, out))
    return TPX_PLUGIN_OK;
  return TPX_PLUGIN_TYPE_MISMATCH;
}

static int host_config_get_float(tpx_plugin_ctx *ctx, const char *path,
                                 double *out) {
  CHECK_CTX(ctx);
  if (!out)
    return invalid(ctx, "config_get_float", "out is NULL");
  int rc;
  json_t *n = config_node(ctx, path, &rc);
  if (!n)
    return rc;
  /* Non-finite numbers (Infinity, NaN) are stored as sentinels. */
  if (!tpx__config_number(n, out))
    return TPX_PLUGIN_TYPE_MISMATCH;
  return TPX_PLUGIN_OK;
}

static int host_config_get_bool(tpx_plugin_ctx *ctx, const char *path,
                                int *out) {
  CHECK_CTX(ctx);
  if (!out)
    return invalid(ctx, "config_get_bool", "out is NULL");
  int rc;
  json_t *n = config_node(ctx, path, &rc);
  if (!n)
    return rc;
  if (!json_is_boolean(n))
    return TPX_PLUGIN_TYPE_MISMATCH;
  *out = json_is_true(n) ? 1 : 0;
  return TPX_PLUGIN_OK;
}

static int host_config_get_string(tpx_plugin_ctx *ctx, const char *path,
                                  const char **out) {
  CHECK_CTX(ctx);
  if (!out)
    return invalid(ctx, "config_get_string", "out is NULL");
  int rc;
  json_t *n = config_node(ctx, path, &rc);
  if (!n)
    return rc;
  if (!json_is_string(n) || tpx__config_is_nonfinite(n))
    return TPX_PLUGIN_TYPE_MISMATCH;
  *out = json_string_value(n);
  return TPX_PLUGIN_OK;
}

static int host_config_get_length(tpx_plugin_ctx *ctx, const char *path,
                                  int64_t *out) {
  CHECK_CTX(ctx);
  if (!out)
    return invalid(ctx, "config_get_length", "out is NULL");
  int rc;
  json_t *n = config_node(ctx, path, &rc);
  if (!n)
    return rc;
  if (json_is_array(n))
    *out = (int64_t)json_array_size(n);
  else if (json_is_object(n))
    *out = (int64_t)json_object_size(n);
  else
    return TPX_PLUGIN_TYPE_MISMATCH;
  return TPX_PLUGIN_OK;
}

static int host_config_get_key(tpx_plugin_ctx *ctx, const char *path,
                               int64_t idx, const char **out) {
  CHECK_CTX(ctx);
  if (!out)
    return invalid(ctx, "config_get_key", "out is NULL");
  int rc;
  json_t *n = config_node(ctx, path, &rc);
  if (!n)
    return rc;
  if (!json_is_object(n))
    return TPX_PLUGIN_TYPE_MISMATCH;
  if (idx < 0 || (size_t)idx >= json_object_size(n))
    return TPX_PLUGIN_NOT_FOUND;
  int64_t i = 0;
  for (void *it = json_object_iter(n); it; it = json_object_iter_next(n, it)) {
    if (i++ == idx) {
      *out = json_object_iter_key(it);
      return TPX_PLUGIN_OK;
    }
  }
  return TPX_PLUGIN_NOT_FOUND;
}

/* ---- model tree -------------------------------------------------------- */

static const tpx_model *tree(tpx_plugin_ctx *ctx) {
  /* During the skeleton call the tree being built is the one to ask. */
  return ctx->op == TPX__OP_SKELETON && ctx->skeleton ? ctx->skeleton
                                                      : ctx->model;
}

static int host_model_has_module(tpx_plugin_ctx *ctx, const char *fqn) {
  if (!ctx_ok(ctx) || !str_ok(fqn) || !tree(ctx))
    return 0;
  return tpx_model_find_module(tree(ctx), fqn) >= 0;
}

static int64_t host_model_count_children(tpx_plugin_ctx *ctx, const char *fqn) {
  if (!ctx_ok(ctx) || !str_ok(fqn) || !tree(ctx))
    return -1;
  int64_t m = tpx_model_find_module(tree(ctx), fqn);
  if (m < 0)
    return -1;
  return (int64_t)tpx_model_module_num_children(tree(ctx), m);
}

/* ---- plan building ----------------------------------------------------- */

/* Fill a layout list from the plugin's strings. allow_none: NULL items mean
 * None (prepare_module_* only). */
static int parse_layouts(tpx_plugin_ctx *ctx, const char *label,
                         const char *field, const char *const *items, int32_t n,
                         int allow_none, tpx_layout_list *out) {
  if (n < 0 || n > TPX_STYLE_MAX_LAYOUTS)
    return invalid(ctx, "plan_add", "%s: n_%s=%d is outside 0..%d", label,
                   field, (int)n, TPX_STYLE_MAX_LAYOUTS);
  memset(out, 0, sizeof *out);
  out->count = n;
  for (int32_t i = 0; i < n; i++) {
    if (items[i] == NULL) {
      if (!allow_none)
        return invalid(ctx, "plan_add",
                       "%s: %s[%d] is NULL (None is only allowed in "
                       "prepare_module_input/output)",
                       label, field, (int)i);
      out->is_none[i] = 1;
      continue;
    }
    if (!str_ok(items[i]))
      return invalid(ctx, "plan_add", "%s: %s[%d] is too long", label, field,
                     (int)i);
    tpx_error e = {0};
    if (tpx_placement_parse(items[i], &out->items[i], &e) != TPX_OK)
      return invalid(ctx, "plan_add",
                     "%s: %s[%d] '%s' is not a layout (replicate, "
                     "shard(N), partial)",
                     label, field, (int)i, items[i]);
  }
  return TPX_PLUGIN_OK;
}

/* Whether `kind` takes plain input/output layouts. */
static int takes_io_layouts(tpx_style_kind k) {
  return tpx_style_kind_traits(k).shards_params;
}

static int is_sequence_kind(tpx_style_kind k) {
  return tpx_style_kind_traits(k).family == TPX_STYLE_FAMILY_SEQUENCE;
}

/* Does the entry struct the plugin knows reach past `field`? */
#define HAS_FIELD(e, field)                                                    \
  ((e)->struct_size >= offsetof(tpx_plugin_entry, field) + sizeof((e)->field))

static int host_plan_add(tpx_plugin_ctx *ctx, const tpx_plugin_entry *e) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "plan_add", TPX__OP_GET_PLAN);
  if (!e)
    return invalid(ctx, "plan_add", "entry is NULL");
  if (!HAS_FIELD(e, style))
    return invalid(
        ctx, "plan_add", "entry struct_size %zu is too small (at least %zu)",
        e->struct_size, offsetof(tpx_plugin_entry, style) + sizeof(e->style));
  if (!str_ok(e->module))
    return invalid(ctx, "plan_add", "module is NULL or too long");
  if (!str_ok(e->style))
    return invalid(ctx, "plan_add", "key '%s': style is NULL", e->module);
  tpx_style_kind kind;
  tpx_error perr = {0};
  if (tpx_style_kind_parse(e->style, &kind, &perr) != TPX_OK)
    return invalid(ctx, "plan_add", "key '%s': unknown style '%s'", e->module,
                   e->style);
  /* Every refusal below names the entry: its key and its style. */
  char label[2 * TPX__PLUGIN_MAX_STRING + 32];
  snprintf(label, sizeof label, "key '%s', style '%s'", e->module, e->style);
  tpx_style st = tpx_style_default(kind);
  const int prep_in = kind == TPX_STYLE_PREPARE_MODULE_INPUT;
  const int prep_out = kind == TPX_STYLE_PREPARE_MODULE_OUTPUT;

  const char *const *in =
      HAS_FIELD(e, n_input_layouts) ? e->input_layouts : NULL;
  const char *const *outl =
      HAS_FIELD(e, n_output_layouts) ? e->output_layouts : NULL;
  const char *const *des =
      HAS_FIELD(e, n_desired_layouts) ? e->desired_layouts : NULL;
  int rc;
  if (in) {
    if (!takes_io_layouts(kind) && !prep_in)
      return invalid(ctx, "plan_add",
                     "%s: the style takes no "
                     "input_layouts",
                     label);
    rc = parse_layouts(ctx, label, "input_layouts", in, e->n_input_layouts,
                       prep_in, &st.input_layouts);
    if (rc)
      return rc;
  }
  if (outl) {
    if (!takes_io_layouts(kind) && !prep_out)
      return invalid(ctx, "plan_add",
                     "%s: the style takes no "
                     "output_layouts",
                     label);
    rc = parse_layouts(ctx, label, "output_layouts", outl, e->n_output_layouts,
                       prep_out, &st.output_layouts);
    if (rc)
      return rc;
  }
  if (des) {
    if (!prep_in && !prep_out)
      return invalid(ctx, "plan_add",
                     "%s: the style takes no "
                     "desired_layouts",
                     label);
    rc = parse_layouts(
        ctx, label, "desired_layouts", des, e->n_desired_layouts, 1,
        prep_in ? &st.desired_input_layouts : &st.desired_output_layouts);
    if (rc)
      return rc;
  }
  if (HAS_FIELD(e, use_local_output) &&
      e->use_local_output != TPX_PLUGIN_DEFAULT) {
    if (e->use_local_output != 0 && e->use_local_output != 1)
      return invalid(ctx, "plan_add",
                     "%s: use_local_output=%d (expected 0, 1 or "
                     "TPX_PLUGIN_DEFAULT)",
                     label, (int)e->use_local_output);
    st.use_local_output = e->use_local_output;
  }
  if (HAS_FIELD(e, sequence_dim) && e->sequence_dim != TPX_PLUGIN_DEFAULT) {
    if (!is_sequence_kind(kind))
      return invalid(ctx, "plan_add", "%s: the style takes no sequence_dim",
                     label);
    if (e->sequence_dim < -TPX_MAX_TENSOR_DIMS ||
        e->sequence_dim >= TPX_MAX_TENSOR_DIMS)
      return invalid(ctx, "plan_add",
                     "%s: sequence_dim=%d is out of "
                     "range",
                     label, (int)e->sequence_dim);
    st.sequence_dim = e->sequence_dim;
  }
  int optional = 0;
  if (HAS_FIELD(e, optional)) {
    if (e->optional != 0 && e->optional != 1)
      return invalid(ctx, "plan_add",
                     "%s: optional=%d (expected 0 or "
                     "1)",
                     label, (int)e->optional);
    optional = e->optional;
  }
  tpx_error serr = {0};
  tpx_status s = tpx_plan_set(ctx->plan, e->module, &st, optional, &serr);
  if (s == TPX_NO_MEMORY)
    return TPX_PLUGIN_NO_MEMORY;
  if (s != TPX_OK)
    return invalid(ctx, "plan_add", "%s: %s", label, serr.message);
  return TPX_PLUGIN_OK;
}

static int host_plan_add_json(tpx_plugin_ctx *ctx, const char *entry_json) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "plan_add_json", TPX__OP_GET_PLAN);
  if (!entry_json || !memchr(entry_json, '\0', 1 << 20))
    return invalid(ctx, "plan_add_json", "entry_json is NULL or too long");
  /* Wrap the one entry into a tpx-plan/1 document and let the plan parser
   * do the checking, so both ways in accept exactly the same entries. */
  static const char head[] = "{\"format\":\"tpx-plan/1\",\"entries\":[";
  static const char tail[] = "]}";
  size_t n = strlen(entry_json);
  char *doc = malloc(sizeof head + n + sizeof tail);
  if (!doc)
    return TPX_PLUGIN_NO_MEMORY;
  memcpy(doc, head, sizeof head - 1);
  memcpy(doc + sizeof head - 1, entry_json, n);
  memcpy(doc + sizeof head - 1 + n, tail, sizeof tail);
  tpx_plan *one = NULL;
  tpx_error e = {0};
  tpx_status s =
      tpx_plan_from_json(doc, strlen(doc), "plan_add_json", &one, &e);
  free(doc);
  if (s != TPX_OK) {
    tpx_plan_destroy(one);
    return invalid(ctx, "plan_add_json", "%s", e.message);
  }
  if (tpx_plan_size(one) != 1) {
    tpx_plan_destroy(one);
    return invalid(ctx, "plan_add_json", "expected exactly one entry object");
  }
  s = tpx_plan_update(ctx->plan, one, &e);
  tpx_plan_destroy(one);
  if (s != TPX_OK)
    return invalid(ctx, "plan_add_json", "%s", e.message);
  return TPX_PLUGIN_OK;
}

static int host_plan_remove(tpx_plugin_ctx *ctx, const char *module) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "plan_remove", TPX__OP_GET_PLAN);
  if (!str_ok(module))
    return invalid(ctx, "plan_remove", "module is NULL or too long");
  if (tpx_plan_find(ctx->plan, module) < 0)
    return TPX_PLUGIN_NOT_FOUND;
  tpx_error e = {0};
  if (tpx_plan_remove(ctx->plan, module, &e) != TPX_OK)
    return invalid(ctx, "plan_remove", "key '%s': %s", module, e.message);
  return TPX_PLUGIN_OK;
}

static int host_plan_set_function(tpx_plugin_ctx *ctx, const char *function) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "plan_set_function", TPX__OP_GET_PLAN);
  if (!str_ok(function) || function[0] == '\0' || strlen(function) > 256)
    return invalid(ctx, "plan_set_function",
                   "function is NULL, empty or longer than 256 bytes");
  char *copy = strdup(function);
  if (!copy)
    return TPX_PLUGIN_NO_MEMORY;
  free(ctx->function);
  ctx->function = copy;
  return TPX_PLUGIN_OK;
}

/* ---- skeleton ---------------------------------------------------------- */

static int host_skeleton_add_module(tpx_plugin_ctx *ctx, const char *fqn,
                                    const char *kind) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "skeleton_add_module", TPX__OP_SKELETON);
  if (!str_ok(fqn) || fqn[0] == '\0')
    return invalid(ctx, "skeleton_add_module",
                   "fqn is NULL, empty or too "
                   "long");
  if (!str_ok(kind))
    return invalid(ctx, "skeleton_add_module", "module '%s': kind is NULL",
                   fqn);
  tpx_module_kind k;
  tpx_error e = {0};
  if (tpx_module_kind_parse(kind, &k, &e) != TPX_OK)
    return invalid(ctx, "skeleton_add_module",
                   "module '%s': unknown kind '%s' (linear, embedding, norm, "
                   "rotary, container, other)",
                   fqn, kind);
  tpx_status s = tpx_model_add_module(ctx->skeleton, fqn, k, NULL, &e);
  if (s == TPX_NO_MEMORY)
    return TPX_PLUGIN_NO_MEMORY;
  if (s != TPX_OK)
    return invalid(ctx, "skeleton_add_module", "module '%s': %s", fqn,
                   e.message);
  return TPX_PLUGIN_OK;
}

/* The dtype a parameter gets when the plugin passes NULL: the config's. */
static tpx_dtype config_dtype(tpx_plugin_ctx *ctx) {
  static const char *const keys[] = {
      "torch_dtype", "dtype", "text_config.torch_dtype", "text_config.dtype"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    const char *s = NULL;
    if (host_config_get_string(ctx, keys[i], &s) == TPX_PLUGIN_OK) {
      tpx_dtype d;
      tpx_error e = {0};
      if (tpx_dtype_parse(s, &d, &e) == TPX_OK)
        return d;
    }
  }
  return TPX_DTYPE_F32; /* torch's default dtype */
}

static int host_skeleton_add_param(tpx_plugin_ctx *ctx, const char *module_fqn,
                                   const char *name, const int64_t *shape,
                                   int32_t ndim, const char *dtype) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "skeleton_add_param", TPX__OP_SKELETON);
  if (!str_ok(module_fqn))
    return invalid(ctx, "skeleton_add_param",
                   "module_fqn is NULL or too "
                   "long");
  if (!str_ok(name) || name[0] == '\0' || strchr(name, '.'))
    return invalid(ctx, "skeleton_add_param",
                   "module '%s': parameter name is NULL, empty or dotted",
                   module_fqn);
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return invalid(ctx, "skeleton_add_param",
                   "parameter '%s.%s': ndim=%d is outside 0..%d", module_fqn,
                   name, (int)ndim, TPX_MAX_TENSOR_DIMS);
  if (ndim > 0 && !shape)
    return invalid(ctx, "skeleton_add_param",
                   "parameter '%s.%s': shape is NULL", module_fqn, name);
  for (int32_t i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return invalid(ctx, "skeleton_add_param",
                     "parameter '%s.%s': shape[%d]=%lld is negative",
                     module_fqn, name, (int)i, (long long)shape[i]);
  tpx_dtype dt;
  tpx_error e = {0};
  if (dtype == NULL) {
    dt = config_dtype(ctx);
  } else {
    if (!str_ok(dtype) || tpx_dtype_parse(dtype, &dt, &e) != TPX_OK)
      return invalid(ctx, "skeleton_add_param",
                     "parameter '%s.%s': unknown dtype '%s'", module_fqn, name,
                     str_ok(dtype) ? dtype : "(too long)");
  }
  tpx_status s = tpx_model_add_param(ctx->skeleton, module_fqn, name, shape,
                                     (int)ndim, dt, NULL, &e);
  if (s == TPX_NO_MEMORY)
    return TPX_PLUGIN_NO_MEMORY;
  if (s != TPX_OK)
    return invalid(ctx, "skeleton_add_param", "parameter '%s.%s': %s",
                   module_fqn, name, e.message);
  return TPX_PLUGIN_OK;
}

static int host_skeleton_tie(tpx_plugin_ctx *ctx, const char *param_fqn,
                             const char *target_fqn) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "skeleton_tie", TPX__OP_SKELETON);
  if (!str_ok(param_fqn) || !str_ok(target_fqn))
    return invalid(ctx, "skeleton_tie", "param_fqn or target_fqn is NULL");
  tpx_error e = {0};
  tpx_status s = tpx_model_tie(ctx->skeleton, param_fqn, target_fqn, &e);
  if (s == TPX_NO_MEMORY)
    return TPX_PLUGIN_NO_MEMORY;
  if (s != TPX_OK)
    return invalid(ctx, "skeleton_tie", "'%s' -> '%s': %s", param_fqn,
                   target_fqn, e.message);
  return TPX_PLUGIN_OK;
}

/* Parameter `param_fqn` is stored, in part, as checkpoint tensor
 * `source_name` at the box start/len, transposed or not. The box and the
 * run are checked here (tpx_model_add_param_source); the cover of each
 * parameter once the skeleton is complete (call.c). */
static int host_skeleton_add_source(tpx_plugin_ctx *ctx, const char *param_fqn,
                                    const char *source_name,
                                    const int64_t *start, const int64_t *len,
                                    int32_t ndim, int32_t transpose) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "skeleton_add_source", TPX__OP_SKELETON);
  if (!str_ok(param_fqn) || !str_ok(source_name))
    return invalid(ctx, "skeleton_add_source",
                   "param_fqn or source_name is NULL or too long");
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS || (ndim > 0 && (!start || !len)))
    return invalid(ctx, "skeleton_add_source",
                   "source '%s' of parameter '%s': ndim=%d is outside 0..%d "
                   "or start / len is NULL",
                   source_name, param_fqn, (int)ndim, TPX_MAX_TENSOR_DIMS);
  if (transpose != 0 && transpose != 1)
    return invalid(ctx, "skeleton_add_source",
                   "source '%s' of parameter '%s': transpose=%d (expected 0 "
                   "or 1)",
                   source_name, param_fqn, (int)transpose);
  tpx_slice box;
  memset(&box, 0, sizeof box);
  box.ndim = (int)ndim;
  for (int32_t d = 0; d < ndim; d++) {
    box.offset[d] = start[d];
    box.length[d] = len[d];
  }
  tpx_error e = {0};
  tpx_status s = tpx_model_add_param_source(ctx->skeleton, param_fqn,
                                            source_name, &box, transpose, &e);
  if (s == TPX_NO_MEMORY)
    return TPX_PLUGIN_NO_MEMORY;
  if (s != TPX_OK)
    return invalid(ctx, "skeleton_add_source", "%s", e.message);
  return TPX_PLUGIN_OK;
}

/* Checkpoint tensor `source_name` is cut along `dim` into the parameters
 * param_fqns[0..num_params) (tpx_model_add_split_source checks the tiling). */
static int host_skeleton_add_split_source(tpx_plugin_ctx *ctx,
                                          const char *source_name, int32_t dim,
                                          const char *const *param_fqns,
                                          const int64_t *offsets,
                                          int32_t num_params) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "skeleton_add_split_source", TPX__OP_SKELETON);
  if (!str_ok(source_name) || param_fqns == NULL || num_params < 1 ||
      num_params > 4096)
    return invalid(ctx, "skeleton_add_split_source",
                   "source_name or param_fqns is NULL or too long, or "
                   "num_params=%d is outside 1..4096",
                   (int)num_params);
  for (int32_t i = 0; i < num_params; i++)
    if (!str_ok(param_fqns[i]))
      return invalid(ctx, "skeleton_add_split_source",
                     "split of '%s': param_fqns[%d] is NULL or too long",
                     source_name, (int)i);
  tpx_error e = {0};
  tpx_status s =
      tpx_model_add_split_source(ctx->skeleton, source_name, (int)dim,
                                 param_fqns, offsets, (size_t)num_params, &e);
  if (s == TPX_NO_MEMORY)
    return TPX_PLUGIN_NO_MEMORY;
  if (s != TPX_OK)
    return invalid(ctx, "skeleton_add_split_source", "%s", e.message);
  return TPX_PLUGIN_OK;
}

/* ---- diagnostics, FSDP units, fp32 ------------------------------------- */

static int kebab_ok(const char *code) {
  if (!code[0] || code[0] == '-' || strlen(code) > 64)
    return 0;
  for (const char *c = code; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
      return 0;
  return 1;
}

static int host_diagnose(tpx_plugin_ctx *ctx, int level, const char *code,
                         const char *message) {
  CHECK_CTX(ctx);
  if (level < TPX_PLUGIN_DIAG_INFO || level > TPX_PLUGIN_DIAG_ERROR)
    return invalid(ctx, "diagnose", "level %d is not info/warning/error",
                   level);
  if (!str_ok(code) || !kebab_ok(code))
    return invalid(ctx, "diagnose",
                   "code '%s' is not a kebab-case identifier ([a-z0-9-], at "
                   "most 64 bytes)",
                   str_ok(code) ? code : "(null)");
  if (!str_ok(message) || message[0] == '\0')
    return invalid(ctx, "diagnose", "code '%s': message is NULL or empty",
                   code);
  if (!ctx->diags)
    return TPX_PLUGIN_OK; /* nobody collects diagnostics for this call */
  if (tpx_diag_add(ctx->diags, (tpx_diag_level)level, code,
                   ctx->plugin ? ctx->plugin->name : NULL, NULL, "%s",
                   message) != TPX_OK)
    return TPX_PLUGIN_NO_MEMORY;
  return TPX_PLUGIN_OK;
}

static int host_fsdp_add_unit(tpx_plugin_ctx *ctx, const char *fqn,
                              int32_t reshard_after_forward) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "fsdp_add_unit", TPX__OP_FSDP_UNITS);
  if (!str_ok(fqn) || fqn[0] == '\0')
    return invalid(ctx, "fsdp_add_unit",
                   "fqn is NULL or empty (the root unit is added by the host)");
  if (reshard_after_forward != 0 && reshard_after_forward != 1 &&
      reshard_after_forward != TPX_PLUGIN_DEFAULT)
    return invalid(ctx, "fsdp_add_unit",
                   "unit '%s': reshard_after_forward=%d (expected 0, 1 or "
                   "TPX_PLUGIN_DEFAULT)",
                   fqn, (int)reshard_after_forward);
  for (size_t i = 0; i < ctx->strings.count; i++)
    if (strcmp(ctx->strings.items[i], fqn) == 0)
      return invalid(ctx, "fsdp_add_unit", "unit '%s' added twice", fqn);
  int v =
      reshard_after_forward == TPX_PLUGIN_DEFAULT ? -1 : reshard_after_forward;
  if (tpx__strvec_push(&ctx->strings, fqn, v) != 0)
    return TPX_PLUGIN_NO_MEMORY;
  return TPX_PLUGIN_OK;
}

static int host_fp32_add(tpx_plugin_ctx *ctx, const char *pattern) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "fp32_add", TPX__OP_FP32);
  if (!str_ok(pattern) || pattern[0] == '\0')
    return invalid(ctx, "fp32_add", "pattern is NULL or empty");
  for (size_t i = 0; i < ctx->strings.count; i++)
    if (strcmp(ctx->strings.items[i], pattern) == 0)
      return TPX_PLUGIN_OK; /* a set: adding twice is harmless */
  if (tpx__strvec_push(&ctx->strings, pattern, 0) != 0)
    return TPX_PLUGIN_NO_MEMORY;
  return TPX_PLUGIN_OK;
}

/* A strategy property, kept as "key=value"; a key set again is replaced. */
static int host_strategy_set(tpx_plugin_ctx *ctx, const char *key,
                             const char *value) {
  CHECK_CTX(ctx);
  REQUIRE_OP(ctx, "strategy_set", TPX__OP_STRATEGY);
  size_t n = str_ok(key) ? strlen(key) : 0;
  int good = n > 0 && n <= 48;
  for (size_t i = 0; good && i < n; i++)
    good = (key[i] >= 'a' && key[i] <= 'z') ||
           (key[i] >= '0' && key[i] <= '9') || key[i] == '_';
  if (!good)
    return invalid(ctx, "strategy_set",
                   "key '%s' is not [a-z0-9_] of 1 to 48 bytes",
                   str_ok(key) ? key : "(null)");
  if (!str_ok(value) || value[0] == '\0')
    return invalid(ctx, "strategy_set", "key '%s': value is NULL or empty",
                   key);
  size_t len = n + 1 + strlen(value) + 1;
  char *kv = malloc(len);
  if (!kv)
    return TPX_PLUGIN_NO_MEMORY;
  snprintf(kv, len, "%s=%s", key, value);
  for (size_t i = 0; i < ctx->strings.count; i++)
    if (strncmp(ctx->strings.items[i], kv, n + 1) == 0) {
      free(ctx->strings.items[i]);
      ctx->strings.items[i] = kv;
      return TPX_PLUGIN_OK;
    }
  int rc = tpx__strvec_push(&ctx->strings, kv, 0) != 0 ? TPX_PLUGIN_NO_MEMORY
                                                       : TPX_PLUGIN_OK;
  free(kv);
  return rc;
}

/* ---- the table ----------------------------------------------------------- */

static const tpx_plugin_host host_table = {
    sizeof(tpx_plugin_host),
    TPX_PLUGIN_ABI_VERSION(TPX_PLUGIN_ABI_MAJOR, 0),
    TPX_PLUGIN_ABI_CURRENT,
    TPX_VERSION,
    host_log,
    host_set_error,
    host_config_has,
    host_config_get_int,
    host_config_get_float,
    host_config_get_bool,
    host_config_get_string,
    host_config_get_length,
    host_config_get_key,
    host_model_has_module,
    host_model_count_children,
    host_plan_add,
    host_plan_add_json,
    host_plan_remove,
    host_plan_set_function,
    host_skeleton_add_module,
    host_skeleton_add_param,
    host_skeleton_tie,
    host_diagnose,
    host_fsdp_add_unit,
    host_fp32_add,
    host_strategy_set,
    host_skeleton_add_source,
    host_skeleton_add_split_source,
};

const tpx_plugin_host *tpx__plugin_host_table(void) { return &host_table; }

void tpx__plugin_host_table_with_range(uint32_t abi_min, uint32_t abi_max,
                                       tpx_plugin_host *out) {
  *out = host_table;
  out->abi_min = abi_min;
  out->abi_max = abi_max;
}
