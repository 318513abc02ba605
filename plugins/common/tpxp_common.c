/* tpxp_common.c — registration, messages, config reads (tpxp_base.h) and
 * plan entries (tpxp_plan.h) for the bundled family plugins. Skeleton
 * builders live in tpxp_skeleton.c. No state: every function works on its
 * arguments only. */
#include "tpxp_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tpxp_negotiate(const tpx_plugin_host *host, tpx_plugin_info *info) {
  uint32_t v = TPX_PLUGIN_ABI_CURRENT;
  if (host == NULL || info == NULL)
    return TPX_PLUGIN_INVALID;
  /* A newer minor of our major can step down to the host's newest: minors
   * only add members, and the helpers check struct_size before using any. */
  if (v > host->abi_max) {
    if (TPX_PLUGIN_ABI_VERSION_MAJOR(host->abi_max) !=
        TPX_PLUGIN_ABI_VERSION_MAJOR(v))
      return TPX_PLUGIN_ABI_UNSUPPORTED;
    v = host->abi_max;
  }
  /* The answer must lie in the host's range: a host whose oldest version is
   * newer than ours (a later major, or a later minor it insists on) gets no
   * version we implement. */
  if (v < host->abi_min)
    return TPX_PLUGIN_ABI_UNSUPPORTED;
  info->abi_version = v;
  return TPX_PLUGIN_OK;
}

int tpxp_register(const tpx_plugin_host *host, tpx_plugin_info *info,
                  const tpxp_plugin_desc *desc) {
  int st = tpxp_negotiate(host, info);
  if (st != TPX_PLUGIN_OK)
    return st;
  info->name = desc->name;
  info->version = desc->version;
  info->description = desc->description;
  info->architectures = desc->architectures;
  info->plan_names = desc->plans;
  if (desc->traits != NULL &&
      info->struct_size > offsetof(tpx_plugin_info, traits))
    info->traits = desc->traits;
  return TPX_PLUGIN_OK;
}

int tpxp_arch_is(const char *arch, const char *bare) {
  size_t la, lb;
  if (arch == NULL || bare == NULL)
    return 0;
  if (strcmp(arch, bare) == 0)
    return 1;
  la = strlen(arch);
  lb = strlen(bare);
  return la > lb && arch[la - lb - 1] == '.' &&
         strcmp(arch + la - lb, bare) == 0;
}

int tpxp_request_ok(const tpx_plugin_plan_request *req) {
  return req != NULL &&
         req->struct_size >=
             offsetof(tpx_plugin_plan_request, tp_size) + sizeof(req->tp_size);
}

int tpxp_fail(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, int status,
              const char *fmt, ...) {
  char msg[TPXP_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (host != NULL && host->set_error != NULL)
    host->set_error(ctx, msg);
  return status;
}

int tpxp_plain_plan_request(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const tpx_plugin_plan_request *req,
                            const char *family) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "%s: malformed plan request", family);
  if (req->plan_name != NULL)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "%s: no named plan '%s' (this plugin has none)", family,
                     req->plan_name);
  return TPX_PLUGIN_OK;
}

int tpxp_not_served(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *family, const char *arch) {
  return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                   "%s: architecture '%s' is not served by this plugin", family,
                   arch != NULL ? arch : "(null)");
}

void tpxp_log(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, int level,
              const char *fmt, ...) {
  char msg[TPXP_MSG_MAX];
  va_list ap;
  if (host == NULL || host->log == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  host->log(ctx, level, msg);
}

/* ---- config reads ---- */

static int cfg_result(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *path, int st, const char *type) {
  if (st == TPX_PLUGIN_TYPE_MISMATCH)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config key '%s' is not a%s %s", path,
                     type[0] == 'i' ? "n" : "", type);
  if (st != TPX_PLUGIN_OK && st != TPX_PLUGIN_NOT_FOUND)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "reading config key '%s' failed (status %d)", path, st);
  return st;
}

int tpxp_cfg_int_req(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *path, int64_t *out) {
  int st = cfg_result(host, ctx, path, host->config_get_int(ctx, path, out),
                      "integer");
  if (st == TPX_PLUGIN_NOT_FOUND)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR, "config key '%s' is missing",
                     path);
  return st;
}

/* An optional read's answer: `dflt` (size bytes) into `out` when the key is
 * absent, else what cfg_result made of `st`. */
static int opt_result(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *path, int st, const char *type, void *out,
                      const void *dflt, size_t size) {
  st = cfg_result(host, ctx, path, st, type);
  if (st != TPX_PLUGIN_NOT_FOUND)
    return st;
  memcpy(out, dflt, size);
  return TPX_PLUGIN_OK;
}

int tpxp_cfg_int_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *path, int64_t dflt, int64_t *out) {
  return opt_result(host, ctx, path, host->config_get_int(ctx, path, out),
                    "integer", out, &dflt, sizeof dflt);
}

int tpxp_cfg_float_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *path, double dflt, double *out) {
  return opt_result(host, ctx, path, host->config_get_float(ctx, path, out),
                    "number", out, &dflt, sizeof dflt);
}

int tpxp_cfg_bool_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *path, int dflt, int *out) {
  return opt_result(host, ctx, path, host->config_get_bool(ctx, path, out),
                    "boolean", out, &dflt, sizeof dflt);
}

int tpxp_cfg_str_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *path, const char *dflt, const char **out) {
  return opt_result(host, ctx, path, host->config_get_string(ctx, path, out),
                    "string", out, &dflt, sizeof dflt);
}

/* Largest size a TPXP_KEY_SIZE row accepts. */
#define TPXP_SIZE_MAX ((int64_t)1 << 31)

static int read_key(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *path, const tpxp_key *k) {
  int64_t *i = k->out;
  switch (k->type) {
  case TPXP_KEY_INT:
  case TPXP_KEY_SIZE:
    TPXP_CHK(k->required ? tpxp_cfg_int_req(host, ctx, path, i)
                         : tpxp_cfg_int_opt(host, ctx, path, k->dflt_int, i));
    if (k->type == TPXP_KEY_SIZE && (*i <= 0 || *i > TPXP_SIZE_MAX))
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "config %s = %lld: expected a size in 1..%lld", path,
                       (long long)*i, (long long)TPXP_SIZE_MAX);
    return TPX_PLUGIN_OK;
  case TPXP_KEY_BOOL:
    return tpxp_cfg_bool_opt(host, ctx, path, (int)k->dflt_int, k->out);
  case TPXP_KEY_FLOAT:
    return tpxp_cfg_float_opt(host, ctx, path, k->dflt_float, k->out);
  case TPXP_KEY_STR: {
    const char **str = k->out;
    TPXP_CHK(tpxp_cfg_str_opt(host, ctx, path, k->dflt_str, str));
    if (*str == NULL)
      *str = k->dflt_str;
    return TPX_PLUGIN_OK;
  }
  }
  return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR, "config %s: bad key type %d",
                   path, (int)k->type);
}

int tpxp_cfg_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *section, const tpxp_key *keys, size_t n) {
  char p[TPXP_FQN_MAX];
  size_t i;
  for (i = 0; i < n; i++) {
    const tpxp_key *k = &keys[i];
    tpxp_path(p, sizeof p, section, k->key);
    if (k->alt != NULL && !host->config_has(ctx, p))
      tpxp_path(p, sizeof p, section, k->alt);
    TPXP_CHK(read_key(host, ctx, p, k));
  }
  return TPX_PLUGIN_OK;
}

int tpxp_cfg_key_present(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const char *section, const char *key) {
  int64_t n = 0, i;
  if (host->config_get_length(ctx, section, &n) != TPX_PLUGIN_OK)
    return 0;
  for (i = 0; i < n; i++) {
    const char *k = NULL;
    if (host->config_get_key(ctx, section, i, &k) == TPX_PLUGIN_OK &&
        k != NULL && strcmp(k, key) == 0)
      return 1;
  }
  return 0;
}

int tpxp_fmt(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

const char *tpxp_path(char *buf, size_t size, const char *section,
                      const char *key) {
  if (section == NULL || section[0] == '\0')
    snprintf(buf, size, "%s", key);
  else
    snprintf(buf, size, "%s.%s", section, key);
  return buf;
}

/* ---- plan entries ---- */

int tpxp_add(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const char *module, const char *style, const char *in,
             const char *out, int32_t local, int32_t optional) {
  const char *in_list[1], *out_list[1];
  tpx_plugin_entry e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.module = module;
  e.style = style;
  if (in != NULL) {
    in_list[0] = in;
    e.input_layouts = in_list;
    e.n_input_layouts = 1;
  }
  if (out != NULL) {
    out_list[0] = out;
    e.output_layouts = out_list;
    e.n_output_layouts = 1;
  }
  e.use_local_output = local;
  e.sequence_dim = TPX_PLUGIN_DEFAULT;
  e.optional = optional;
  return host->plan_add(ctx, &e);
}

int32_t tpxp_rule_local(const tpxp_rule *r) {
  return r->local == TPXP_KEEP_DTENSOR ? 0
         : r->local == TPXP_TO_LOCAL   ? 1
                                       : TPXP_DEF;
}

int tpxp_add_rules(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *prefix, const tpxp_rule *rules, size_t n) {
  char fqn[TPXP_FQN_MAX];
  const tpxp_rule *r;
  for (r = rules; r < rules + n; r++) {
    tpxp_path(fqn, sizeof fqn, r->rooted ? NULL : prefix, r->suffix);
    TPXP_CHK(tpxp_add(host, ctx, fqn, r->style, r->in, r->out,
                      tpxp_rule_local(r), r->optional));
  }
  return TPX_PLUGIN_OK;
}

int tpxp_add_rules_optional(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *prefix, const tpxp_rule *rules,
                            size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    tpxp_rule r = rules[i];
    r.optional = 1;
    TPXP_CHK(tpxp_add_rules(host, ctx, prefix, &r, 1));
  }
  return TPX_PLUGIN_OK;
}
