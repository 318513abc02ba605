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

/* vsnprintf into buf; returns 0, or -1 when the text did not fit (it is
 * truncated then). Used for FQNs and config paths. */
int tpxp_fmt(char *buf, size_t size, const char *fmt, ...) TPXP_PRINTF(3, 4);

/* Join `section` and `key` into buf ("text_config.hidden_size"; an empty or
 * NULL section gives the key alone). Returns buf. */
const char *tpxp_path(char *buf, size_t size, const char *section,
                      const char *key);

/* ---- plan entries ---- */

/* One plan entry relative to a prefix. Layout fields hold one layout string
 * or NULL (the style's default). */
typedef struct tpxp_rule {
  const char *suffix; /* appended to "<prefix>." unless `rooted` */
  const char *style;  /* tpx-plan/1 style name */
  const char *in;     /* input_layouts[0] or NULL */
  const char *out;    /* output_layouts[0] or NULL */
  int32_t local;      /* use_local_output: 0, 1 or TPXP_DEF */
  int32_t optional;   /* 1: variant-only key */
  int32_t rooted;     /* 1: `suffix` is the whole module FQN */
} tpxp_rule;

/* Add (or replace in place) one entry. */
int tpxp_add(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const char *module, const char *style, const char *in,
             const char *out, int32_t local, int32_t optional);
/* Add every rule of `rules` in order under `prefix`. */
int tpxp_add_rules(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *prefix, const tpxp_rule *rules, size_t n);

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
