/* tpxp_common.h — helpers shared by the bundled model-family plugins.
 *
 * A static, position-independent helper library linked into each family
 * plugin (plugins/<family>/). It wraps the host function table of
 * tpx/plugin.h: ABI negotiation, error messages, config reads with
 * defaults, table-driven plan entries, and skeleton builders for the common
 * decoder layouts. It is NOT part of the ABI and not visible outside a
 * plugin (hidden symbols); it keeps no state, so every helper is safe to call
 * from several threads with different ctx. Includes only tpx/plugin.h and
 * standard C headers. Prefix: tpxp_ (TPX Plugin). */
#ifndef TPXP_COMMON_H
#define TPXP_COMMON_H

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
#define TPXP_MSG_MAX 512

#if defined(__GNUC__)
#define TPXP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TPXP_PRINTF(f, a)
#endif

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

/* ---- one dispatch table per plugin ----
 * A plugin serving several architectures lists them once, with what each
 * entry point does for it (the NCCL ext-net shape: one table, looked up by
 * name; no ABI change, the exported functions forward to tpxp_family_*). */
typedef int (*tpxp_req_fn)(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const tpx_plugin_plan_request *req);
typedef int (*tpxp_arch_fn)(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture);

typedef struct tpxp_arch_ops {
  const char *bare;        /* bare class name (tpxp_arch_is) */
  tpxp_req_fn plan;        /* get_plan; NULL: not served */
  tpxp_arch_fn skeleton;   /* tpx_plugin_get_skeleton; NULL: not served */
  tpxp_req_fn validate;    /* tpx_plugin_validate; NULL: nothing to say */
  tpxp_arch_fn fsdp_units; /* tpx_plugin_fsdp_units; NULL: tpx's rule */
  tpxp_arch_fn fp32;       /* tpx_plugin_fp32_params; NULL: none */
  tpxp_arch_fn strategy;   /* tpx_plugin_strategy; NULL: nothing to set */
} tpxp_arch_ops;

typedef struct tpxp_family {
  const char *name; /* starts every message: "<name>: ..." */
  const tpxp_arch_ops *archs;
  size_t n_archs;
} tpxp_family;

/* The row serving `arch`, or NULL. */
const tpxp_arch_ops *tpxp_family_find(const tpxp_family *f, const char *arch);
/* The entry points. Each answers TPX_PLUGIN_INVALID for a NULL host and
 * refuses an architecture the table lacks (tpxp_not_served). get_plan first
 * runs tpxp_plain_plan_request; validate refuses a malformed request with
 * "<name>: malformed validate request". */
int tpxp_family_plan(const tpxp_family *f, const tpx_plugin_host *host,
                     tpx_plugin_ctx *ctx, const tpx_plugin_plan_request *req);
int tpxp_family_skeleton(const tpxp_family *f, const tpx_plugin_host *host,
                         tpx_plugin_ctx *ctx, const char *arch);
int tpxp_family_validate(const tpxp_family *f, const tpx_plugin_host *host,
                         tpx_plugin_ctx *ctx,
                         const tpx_plugin_plan_request *req);
int tpxp_family_fsdp_units(const tpxp_family *f, const tpx_plugin_host *host,
                           tpx_plugin_ctx *ctx, const char *arch);
int tpxp_family_fp32(const tpxp_family *f, const tpx_plugin_host *host,
                     tpx_plugin_ctx *ctx, const char *arch);
int tpxp_family_strategy(const tpxp_family *f, const tpx_plugin_host *host,
                         tpx_plugin_ctx *ctx, const char *arch);

/* Define one exported entry point that forwards to the family table `fam`
 * (a tpxp_family). A plugin writes one line per entry point it exports:
 * the optional ones it leaves out stay absent, as before. */
#define TPXP_EXPORT_GET_PLAN(fam)                                              \
  int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,               \
               const tpx_plugin_plan_request *req) {                           \
    return tpxp_family_plan(&(fam), host, ctx, req);                           \
  }
#define TPXP_EXPORT_SKELETON(fam)                                              \
  int tpx_plugin_get_skeleton(const tpx_plugin_host *host,                     \
                              tpx_plugin_ctx *ctx, const char *architecture) { \
    return tpxp_family_skeleton(&(fam), host, ctx, architecture);              \
  }
#define TPXP_EXPORT_VALIDATE(fam)                                              \
  int tpx_plugin_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,    \
                          const tpx_plugin_plan_request *req) {                \
    return tpxp_family_validate(&(fam), host, ctx, req);                       \
  }
#define TPXP_EXPORT_FSDP_UNITS(fam)                                            \
  int tpx_plugin_fsdp_units(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,  \
                            const char *architecture) {                        \
    return tpxp_family_fsdp_units(&(fam), host, ctx, architecture);            \
  }
#define TPXP_EXPORT_FP32(fam)                                                  \
  int tpx_plugin_fp32_params(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, \
                             const char *architecture) {                       \
    return tpxp_family_fp32(&(fam), host, ctx, architecture);                  \
  }
#define TPXP_EXPORT_STRATEGY(fam)                                              \
  int tpx_plugin_strategy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,    \
                          const char *architecture) {                          \
    return tpxp_family_strategy(&(fam), host, ctx, architecture);              \
  }

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
  {.key = (k), .type = TPXP_KEY_INT, .out = (out_), .dflt_int = (d)}
#define TPXP_KEY_Z(k, out_, d)                                                 \
  {.key = (k), .type = TPXP_KEY_SIZE, .out = (out_), .dflt_int = (d)}
#define TPXP_KEY_B(k, out_, d)                                                 \
  {.key = (k), .type = TPXP_KEY_BOOL, .out = (out_), .dflt_int = (d)}
#define TPXP_KEY_F(k, out_, d)                                                 \
  {.key = (k), .type = TPXP_KEY_FLOAT, .out = (out_), .dflt_float = (d)}
#define TPXP_KEY_S(k, out_, d)                                                 \
  {.key = (k), .type = TPXP_KEY_STR, .out = (out_), .dflt_str = (d)}

/* A key renamed upstream: `k`, else (when absent) its old name `old`. */
#define TPXP_KEY_I_OR(k, old, out_, d)                                         \
  {.key = (k), .alt = (old), .type = TPXP_KEY_INT, .out = (out_),             \
   .dflt_int = (d)}
#define TPXP_KEY_B_OR(k, old, out_, d)                                         \
  {.key = (k), .alt = (old), .type = TPXP_KEY_BOOL, .out = (out_),            \
   .dflt_int = (d)}

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

/* ---- plan entries ---- */

/* use_local_output of a rule; zero (the field left out) is the style's
 * default. */
#define TPXP_KEEP_DTENSOR 1 /* use_local_output = 0 */
#define TPXP_TO_LOCAL 2     /* use_local_output = 1 */

/* One plan entry relative to a prefix. Layout fields hold one layout string
 * or NULL (the style's default). Every field left out of a designated
 * initialiser means "the default", so rows say only what differs: write
 * them with the TPXP_RULE family of macros below. */
typedef struct tpxp_rule {
  const char *suffix; /* appended to "<prefix>." unless `rooted` */
  const char *style;  /* tpx-plan/1 style name */
  const char *in;     /* input_layouts[0] or NULL */
  const char *out;    /* output_layouts[0] or NULL */
  int32_t local;      /* 0 (style default), TPXP_KEEP_DTENSOR, TPXP_TO_LOCAL */
  int32_t optional;   /* 1: variant-only key */
  int32_t rooted;     /* 1: `suffix` is the whole module FQN */
} tpxp_rule;

/* A rule row: style, suffix, then any other fields by name, e.g.
 *   TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR),
 *   TPXP_COL("model.layers.*.mlp.gate_up_proj", .optional = 1), */
#define TPXP_RULE(style_, ...) {.style = (style_), .suffix = __VA_ARGS__}
#define TPXP_COL(...) TPXP_RULE("colwise", __VA_ARGS__)
#define TPXP_ROW(...) TPXP_RULE("rowwise", __VA_ARGS__)
#define TPXP_VOCAB(...) TPXP_RULE("vocab_parallel_embedding", __VA_ARGS__)
#define TPXP_SEQ(...) TPXP_RULE("sequence_parallel", __VA_ARGS__)
#define TPXP_SEQ_AG(...)                                                       \
  TPXP_RULE("sequence_parallel_allgather_activation", __VA_ARGS__)

/* Elements of a static array. */
#define TPXP_N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Evaluate a call returning a tpx_plugin_status; return it unless OK. */
#define TPXP_CHK(call)                                                         \
  do {                                                                         \
    int st_ = (call);                                                          \
    if (st_ != TPX_PLUGIN_OK)                                                  \
      return st_;                                                              \
  } while (0)

/* Add every rule of `rules` under `prefix` as a variant-only key (optional),
 * whatever the row says: for a plan whose keys may all match nothing. */
int tpxp_add_rules_optional(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *prefix, const tpxp_rule *rules,
                            size_t n);
#define TPXP_ADD_RULES_OPTIONAL(host, ctx, prefix, rules)                      \
  tpxp_add_rules_optional((host), (ctx), (prefix), (rules), TPXP_N_OF(rules))

/* Add the whole table `rules` under `prefix`. */
#define TPXP_ADD_RULES(host, ctx, prefix, rules)                               \
  tpxp_add_rules((host), (ctx), (prefix), (rules), TPXP_N_OF(rules))

/* Add (or replace in place) one entry. */
int tpxp_add(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const char *module, const char *style, const char *in,
             const char *out, int32_t local, int32_t optional);
/* The use_local_output a rule asks for: 0, 1 or TPXP_DEF. */
int32_t tpxp_rule_local(const tpxp_rule *r);
/* Add every rule of `rules` in order under `prefix`. */
int tpxp_add_rules(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *prefix, const tpxp_rule *rules, size_t n);

/* ---- shared plan tables (tpxp_plans.c) ---- */

/* The Ministral3-shaped decoder body, relative to a prefix: embed_tokens
 * vocab-parallel (replicated input), q/k/v colwise, o rowwise, up/gate
 * colwise, down rowwise, in upstream insertion order. */
#define TPXP_M3_BODY 8
extern const tpxp_rule tpxp_m3_sp0[TPXP_M3_BODY];
/* Its sequence-parallel dict update: embed_tokens, o_proj and down_proj
 * with sequence-sharded DTensor outputs. */
#define TPXP_M3_SP 3
extern const tpxp_rule tpxp_m3_sp1[TPXP_M3_SP];
/* Its sequence-parallel norms: norm, input_layernorm and
 * post_attention_layernorm as plain SequenceParallel (the default base
 * plan's, DeciLM's) or with the activation all-gathered and a DTensor
 * output (Ministral3's). */
extern const tpxp_rule tpxp_m3_norms_seq[3];
extern const tpxp_rule tpxp_m3_norms_sp[3];

/* An output head's two rows for tpxp_add_m3_plan ([0] sp off, [1] sp on),
 * `name` a whole FQN: colwise with vocab-sharded DTensor logits, or colwise
 * gathered to a replicated output. */
#define TPXP_HEAD_VOCAB(name)                                                  \
  {TPXP_COL(name, .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR, .rooted = 1), \
   TPXP_COL(name, .in = TPXP_S1, .out = TPXP_SM1,                              \
            .local = TPXP_KEEP_DTENSOR, .rooted = 1)}
#define TPXP_HEAD_REPLICATED(name)                                             \
  {TPXP_COL(name, .out = TPXP_R, .rooted = 1),                                 \
   TPXP_COL(name, .in = TPXP_S1, .out = TPXP_R, .rooted = 1)}

/* The whole plan: the body under `prefix` and head[0]; with `sp`, the dict
 * update tpxp_m3_sp1, head[1], then `sp_tail` under `prefix` (e.g.
 * tpxp_m3_norms_sp). */
int tpxp_add_m3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *prefix, const tpxp_rule head[2], int sp,
                     const tpxp_rule *sp_tail, size_t n_tail);

/* ---- skeleton ----
 * dtype NULL means the config's torch_dtype. */
int tpxp_sk_module(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *fqn, const char *kind);
/* nn.Linear(in, out): weight [out, in], bias [out] when `bias`. */
int tpxp_sk_linear(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *fqn, int64_t in, int64_t out, int bias,
                   const char *dtype);
/* A norm: weight [dim], bias [dim] when `bias` (LayerNorm). */
int tpxp_sk_norm(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *fqn, int64_t dim, int bias, const char *dtype);
/* nn.Embedding(vocab, dim): weight [vocab, dim]. */
int tpxp_sk_embedding(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *fqn, int64_t vocab, int64_t dim,
                      const char *dtype);
/* A parameter with a 1- or 2-D shape on an existing module (dim1 < 0: 1-D). */
int tpxp_sk_param(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *module, const char *name, int64_t dim0,
                  int64_t dim1, const char *dtype);

/* Table-driven skeletons: one row a module under a prefix, in HF module
 * order, so a block is one table instead of three lines per tensor. */
typedef enum tpxp_sk_kind {
  TPXP_SK_LINEAR = 1, /* a, b = in, out; bias */
  TPXP_SK_NORM,       /* a = dim; bias (LayerNorm) */
  TPXP_SK_EMBEDDING,  /* a, b = vocab, dim */
  TPXP_SK_MODULE,     /* name = the module kind ("other", "container", ...) */
  TPXP_SK_PARAM,      /* name = parameter; a, b = dims (b < 0: 1-D) */
  TPXP_SK_PARAM_ND,   /* name = parameter; shape[0..a) */
  TPXP_SK_WHEN        /* the next row only when a != 0 */
} tpxp_sk_kind;

typedef struct tpxp_sk_row {
  tpxp_sk_kind kind;
  const char *suffix; /* "<prefix>.<suffix>"; "" is the prefix itself */
  int64_t a, b;
  int bias;
  const char *name;  /* TPXP_SK_MODULE: module kind; TPXP_SK_PARAM: name */
  const char *dtype;    /* NULL: the table's dtype */
  const int64_t *shape; /* TPXP_SK_PARAM_ND */
} tpxp_sk_row;

#define TPXP_SK_LIN(sfx, in, out, bias_)                                       \
  {.kind = TPXP_SK_LINEAR, .suffix = (sfx), .a = (in), .b = (out),            \
   .bias = (bias_)}
#define TPXP_SK_NRM(sfx, dim, bias_)                                           \
  {.kind = TPXP_SK_NORM, .suffix = (sfx), .a = (dim), .bias = (bias_)}
#define TPXP_SK_EMB(sfx, vocab, dim)                                           \
  {.kind = TPXP_SK_EMBEDDING, .suffix = (sfx), .a = (vocab), .b = (dim)}
#define TPXP_SK_MOD(sfx, kind_)                                                \
  {.kind = TPXP_SK_MODULE, .suffix = (sfx), .name = (kind_)}
/* A parameter on the module at the row's FQN (d1 < 0: 1-D). */
#define TPXP_SK_PRM(sfx, pname, d0, d1)                                        \
  {.kind = TPXP_SK_PARAM, .suffix = (sfx), .name = (pname), .a = (d0),        \
   .b = (d1)}

/* A parameter of any rank (conv kernels, probes): `shape` has nd dims. */
#define TPXP_SK_PRM_ND(sfx, pname, nd, shape_)                                 \
  {.kind = TPXP_SK_PARAM_ND, .suffix = (sfx), .name = (pname), .a = (nd),     \
   .shape = (shape_)}

/* The row after this one is added only when `cond` holds (a row that
 * exists only in some configurations). */
#define TPXP_SK_WHEN(cond) {.kind = TPXP_SK_WHEN, .suffix = "", .a = !!(cond)}

/* Add every row of `rows` under `prefix` (NULL or "": suffixes are whole
 * FQNs); `dtype` applies to rows that name none (NULL: the config's). Stops
 * at the first failure and returns it. */
int tpxp_sk_rows(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *prefix, const tpxp_sk_row *rows, size_t n,
                 const char *dtype);
#define TPXP_SK_ROWS(host, ctx, prefix, rows, dtype)                           \
  tpxp_sk_rows((host), (ctx), (prefix), (rows), TPXP_N_OF(rows), (dtype))
/* The same rows under "<prefix>.layers.<i>" for every i < layers (a stack
 * of identical blocks). */
int tpxp_sk_layers(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *prefix, int64_t layers, const tpxp_sk_row *rows,
                   size_t n, const char *dtype);
#define TPXP_SK_LAYERS(host, ctx, prefix, layers, rows, dtype)                 \
  tpxp_sk_layers((host), (ctx), (prefix), (layers), (rows), TPXP_N_OF(rows),  \
                 (dtype))

/* A decoder stack whose layers differ: embedding, the layers container,
 * each layer built by a callback, then tail rows (norm, rotary_emb, ...). */
typedef int (*tpxp_layer_fn)(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                             const char *layer, int64_t i, const void *user);

typedef struct tpxp_stack {
  const char *prefix; /* "model" */
  const char *embed;  /* "embed_tokens" */
  int64_t vocab, hidden, layers;
  tpxp_layer_fn layer; /* builds layer i at "<prefix>.layers.<i>" */
  const void *user;    /* handed to `layer` */
  const tpxp_sk_row *tail; /* under prefix, after the layers */
  size_t n_tail;
  const char *dtype; /* the embedding's, tail's, head's; NULL: config's */
  const char *head;  /* a bias-free output head ("lm_head"), or NULL */
  int tie;           /* the head's weight is the embedding's */
} tpxp_stack;

/* <prefix>.<embed> [vocab, hidden], <prefix>.layers (a container), every
 * layer through s->layer, s->tail under the prefix, then the head (a whole
 * FQN; tied to <prefix>.<embed>.weight with s->tie). */
int tpxp_sk_stack(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const tpxp_stack *s);

/* A Llama-style decoder stack (Llama, Mistral, Qwen2/3, Ministral3): */
typedef struct tpxp_decoder {
  const char *prefix;   /* "model" or "model.language_model" */
  const char *section;  /* config section: "" or "text_config" */
  int64_t layers;       /* num_hidden_layers */
  int64_t hidden;       /* hidden_size */
  int64_t heads;        /* num_attention_heads */
  int64_t kv_heads;     /* num_key_value_heads (default heads) */
  int64_t head_dim;     /* head_dim (default hidden / heads) */
  int64_t intermediate; /* intermediate_size */
  int64_t vocab;        /* vocab_size */
  int tie;              /* tie_word_embeddings */
  int qkv_bias;         /* q/k/v biases (Qwen2, attention_bias) */
  int o_bias;           /* o_proj bias (attention_bias) */
  int mlp_bias;         /* mlp biases (mlp_bias) */
  int qk_norm;          /* q_norm / k_norm of size head_dim (Qwen3) */
  int rotary;           /* add <prefix>.rotary_emb (no params) */
  const char *dtype;    /* NULL: config torch_dtype */
} tpxp_decoder;

/* Read the common decoder keys from `d->section` of the config into d
 * (layers, hidden, heads, kv_heads, head_dim, intermediate, vocab;
 * attention_bias -> qkv_bias and o_bias; mlp_bias; tie_word_embeddings with
 * `tie_default`). prefix, qk_norm, rotary and dtype are left to the caller.
 * Errors name the missing key. */
int tpxp_decoder_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *section, int tie_default, tpxp_decoder *d);

/* The same for an MoE stack, whose configs may lack the dense
 * intermediate_size (then 0). */
int tpxp_decoder_read_moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *section, int tie_default,
                          tpxp_decoder *d);

/* One decoder layer at `<prefix>.layers.<i>` with the given sizes (kv_heads
 * and intermediate per layer so heterogeneous stacks can reuse it). */
int tpxp_sk_decoder_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const tpxp_decoder *d, int64_t i, int64_t kv_heads,
                          int64_t intermediate);
/* The self-attention of layer i alone (q, k, v, o and, with d->qk_norm,
 * q_norm / k_norm), as tpxp_sk_decoder_layer builds it. */
int tpxp_sk_self_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const tpxp_decoder *d, int64_t i, int64_t kv_heads);

/* ---- Hugging Face MoE blocks (tpxp_moe.c) ---- */

/* transformers' fused experts module at `fqn` (".../mlp.experts"):
 * gate_up_proj [experts, 2 * intermediate, hidden] (gate rows first, then
 * up) and down_proj [experts, hidden, intermediate], both 3-D parameters of
 * the module itself. Checkpoints store them one expert at a time
 * (experts.{e}.gate_proj / up_proj / down_proj.weight); the host's
 * safetensors reader folds those onto these two tensors. */
int tpxp_sk_fused_experts(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *fqn, int64_t experts, int64_t hidden,
                          int64_t intermediate, const char *dtype);
/* A top-k router at `fqn` (".../mlp.gate"): weight [experts, hidden], no
 * bias. */
int tpxp_sk_router(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *fqn, int64_t experts, int64_t hidden,
                   const char *dtype);

/* get_plan of an architecture upstream has no plan function for (not in
 * PARALLELIZE_FUNCTIONS): Automodel asks get_hf_tp_shard_plan, whose
 * transformers-5 plan it cannot translate (the class plan's lm_head
 * "colwise_gather_output", the experts' "packed_colwise" /
 * "moe_tp_experts"), and falls back to the default base plan. The plugin
 * refuses with that explanation, so the host takes the same path (HF plan,
 * then the default base plan) and says why. Returns TPX_PLUGIN_REFUSED. */
int tpxp_refuse_to_hf_flow(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *family, const char *arch,
                           const char *what);

/* The whole stack in HF module order: embed_tokens, layers.*, norm,
 * rotary_emb (if d->rotary). Not the lm_head. */
int tpxp_sk_decoder(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpxp_decoder *d);
/* `fqn` = nn.Linear(hidden, vocab, bias) head; when `tie`, its weight is
 * tied to `embed_weight_fqn`. */
int tpxp_sk_lm_head(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *fqn, int64_t hidden, int64_t vocab, int bias,
                    int tie, const char *embed_weight_fqn, const char *dtype);

#ifdef __cplusplus
}
#endif

#endif /* TPXP_COMMON_H */
