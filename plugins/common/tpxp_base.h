/* tpxp_base.h — the base of the bundled plugins' helper library (see
 * tpxp_common.h): layout strings, TPXP_CHK / TPXP_N_OF, registration,
 * messages, config reads one at a time or as typed tables (tpxp_common.c).
 * Includes only tpx/plugin.h and standard C headers. */
#ifndef TPXP_BASE_H
#define TPXP_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Layout strings of tpx-plan/1. */
#define TPXP_R "replicate"
#define TPXP_S1 "shard(1)"
#define TPXP_SM1 "shard(-1)"
/* "use the style's default" for use_local_output. */
#define TPXP_DEF TPX_PLUGIN_DEFAULT

/* Longest FQN / message the helpers build. */
#define TPXP_FQN_MAX 256
#define TPXP_MSG_MAX 1024

#if defined(__GNUC__)
#define TPXP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TPXP_PRINTF(f, a)
#endif

/* Elements of a static array. */
#define TPXP_N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Evaluate a call returning a tpx_plugin_status; return it unless OK. */
#define TPXP_CHK(call)                                                         \
  do {                                                                         \
    int st_ = (call);                                                          \
    if (st_ != TPX_PLUGIN_OK)                                                  \
      return st_;                                                              \
  } while (0)

/* ---- registration ---- */

/* Answer the one version the plugin will use, always inside
 * [host->abi_min, host->abi_max]: TPX_PLUGIN_ABI_CURRENT when it lies in the
 * range; the host's abi_max when that is an older minor of the same major;
 * otherwise (another major, or a host insisting on a newer minor than ours)
 * TPX_PLUGIN_ABI_UNSUPPORTED. */
int tpxp_negotiate(const tpx_plugin_host *host, tpx_plugin_info *info);

/* What a family plugin says about itself in register_parallel_strategy.
 * All strings and arrays must outlive the plugin (string literals and
 * static tables); plans may be NULL (no named plans). */
typedef struct tpxp_plugin_desc {
  const char *name;
  const char *version;
  const char *description;
  const char *const *architectures; /* NULL-terminated */
  const char *const *plans;         /* NULL-terminated, or NULL */
  /* tpx_plugin_info.traits ("own_flow=<arch>", ...): NULL-terminated, or
   * NULL; handed over only to a host whose info has the field. */
  const char *const *traits;
} tpxp_plugin_desc;

/* The whole of a family's register_parallel_strategy: tpxp_negotiate, then,
 * only if that succeeded, copy `desc` into `info`. Returns what
 * tpxp_negotiate returned; on failure `info` is left as negotiation left
 * it. */
int tpxp_register(const tpx_plugin_host *host, tpx_plugin_info *info,
                  const tpxp_plugin_desc *desc);

/* 1 if `arch` is `bare` or a qualified name ending in "." + bare. */
int tpxp_arch_is(const char *arch, const char *bare);

/* 1 if the plan request is usable (non-NULL, struct_size large enough). */
int tpxp_request_ok(const tpx_plugin_plan_request *req);

/* Format a message, hand it to host->set_error and return `status`. */
int tpxp_fail(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, int status,
              const char *fmt, ...) TPXP_PRINTF(4, 5);

/* The opening checks of get_plan for a family with no named plans:
 * TPX_PLUGIN_INVALID for a NULL host; "<family>: malformed plan request"
 * (TPX_PLUGIN_INVALID) when tpxp_request_ok fails; "<family>: no named plan
 * '<plan_name>' (this plugin has none)" (TPX_PLUGIN_REFUSED) for a named
 * plan. TPX_PLUGIN_OK when get_plan may go on. */
int tpxp_plain_plan_request(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const tpx_plugin_plan_request *req,
                            const char *family);

/* Refuse `arch` (may be NULL) with "<family>: architecture '<arch>' is not
 * served by this plugin"; returns TPX_PLUGIN_REFUSED. */
int tpxp_not_served(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *family, const char *arch);

/* Log a formatted message through host->log. */
void tpxp_log(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, int level,
              const char *fmt, ...) TPXP_PRINTF(4, 5);

/* ---- config reads ----
 * The _req variants set an error naming the key when it is absent or of the
 * wrong type. The _opt variants store `dflt` when the key is absent or null
 * and fail (with a message) only on a type mismatch. All return a
 * tpx_plugin_status. */
int tpxp_cfg_int_req(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *path, int64_t *out);
int tpxp_cfg_int_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *path, int64_t dflt, int64_t *out);
int tpxp_cfg_float_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *path, double dflt, double *out);
int tpxp_cfg_bool_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *path, int dflt, int *out);
int tpxp_cfg_str_opt(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *path, const char *dflt, const char **out);

/* 1 when the object at `section` ("" = the top level) has `key`, even with
 * a JSON null value (config_has answers 0 for null, as for absent). */
int tpxp_cfg_key_present(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const char *section, const char *key);

/* A table of config reads: each row a key (relative to a section), its
 * type, where the value goes and the default for an absent (or null) key.
 * tpxp_cfg_read reads the rows in order and stops at the first failure,
 * whose message names the key. */
typedef enum tpxp_key_type {
  TPXP_KEY_INT = 1, /* int64_t */
  TPXP_KEY_SIZE,    /* int64_t in 1..2^31 ("expected a size") */
  TPXP_KEY_BOOL,    /* int */
  TPXP_KEY_FLOAT,   /* double */
  TPXP_KEY_STR      /* const char * (borrowed from the host) */
} tpxp_key_type;

typedef struct tpxp_key {
  const char *key;
  tpxp_key_type type;
  void *out;
  int64_t dflt_int; /* INT, SIZE, BOOL */
  double dflt_float;
  const char *dflt_str;
  int required;    /* INT / SIZE: absent is an error */
  const char *alt; /* an older name read when `key` is absent, or NULL */
} tpxp_key;

#define TPXP_KEY_I(k, out_, d)                                                 \
  { .key = (k), .type = TPXP_KEY_INT, .out = (out_), .dflt_int = (d) }
#define TPXP_KEY_Z(k, out_, d)                                                 \
  { .key = (k), .type = TPXP_KEY_SIZE, .out = (out_), .dflt_int = (d) }
#define TPXP_KEY_B(k, out_, d)                                                 \
  { .key = (k), .type = TPXP_KEY_BOOL, .out = (out_), .dflt_int = (d) }
#define TPXP_KEY_F(k, out_, d)                                                 \
  { .key = (k), .type = TPXP_KEY_FLOAT, .out = (out_), .dflt_float = (d) }
#define TPXP_KEY_S(k, out_, d)                                                 \
  { .key = (k), .type = TPXP_KEY_STR, .out = (out_), .dflt_str = (d) }

/* A key renamed upstream: `k`, else (when absent) its old name `old`. */
#define TPXP_KEY_I_OR(k, old, out_, d)                                         \
  {                                                                            \
    .key = (k), .alt = (old), .type = TPXP_KEY_INT, .out = (out_),             \
    .dflt_int = (d)                                                            \
  }
#define TPXP_KEY_B_OR(k, old, out_, d)                                         \
  {                                                                            \
    .key = (k), .alt = (old), .type = TPXP_KEY_BOOL, .out = (out_),            \
    .dflt_int = (d)                                                            \
  }

int tpxp_cfg_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *section, const tpxp_key *keys, size_t n);
#define TPXP_CFG_READ(host, ctx, section, keys)                                \
  tpxp_cfg_read((host), (ctx), (section), (keys), TPXP_N_OF(keys))

/* vsnprintf into buf; returns 0, or -1 when the text did not fit (it is
 * truncated then). Used for FQNs and config paths. */
int tpxp_fmt(char *buf, size_t size, const char *fmt, ...) TPXP_PRINTF(3, 4);

/* Join `section` and `key` into buf ("text_config.hidden_size"; an empty or
 * NULL section gives the key alone). Returns buf. */
const char *tpxp_path(char *buf, size_t size, const char *section,
                      const char *key);

#ifdef __cplusplus
}
#endif

#endif /* TPXP_BASE_H */
