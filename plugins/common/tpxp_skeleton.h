/* tpxp_skeleton.h — skeleton builders: single modules, row
 * tables, decoder stacks and the Hugging Face MoE blocks (tpxp_skeleton.c,
 * tpxp_moe.c). */
#ifndef TPXP_SKELETON_H
#define TPXP_SKELETON_H

#include "tpxp_base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  const char *name;     /* TPXP_SK_MODULE: module kind; TPXP_SK_PARAM: name */
  const char *dtype;    /* NULL: the table's dtype */
  const int64_t *shape; /* TPXP_SK_PARAM_ND */
} tpxp_sk_row;

#define TPXP_SK_LIN(sfx, in, out, bias_)                                       \
  {                                                                            \
    .kind = TPXP_SK_LINEAR, .suffix = (sfx), .a = (in), .b = (out),            \
    .bias = (bias_)                                                            \
  }
#define TPXP_SK_NRM(sfx, dim, bias_)                                           \
  { .kind = TPXP_SK_NORM, .suffix = (sfx), .a = (dim), .bias = (bias_) }
#define TPXP_SK_EMB(sfx, vocab, dim)                                           \
  { .kind = TPXP_SK_EMBEDDING, .suffix = (sfx), .a = (vocab), .b = (dim) }
#define TPXP_SK_MOD(sfx, kind_)                                                \
  { .kind = TPXP_SK_MODULE, .suffix = (sfx), .name = (kind_) }
/* A parameter on the module at the row's FQN (d1 < 0: 1-D). */
#define TPXP_SK_PRM(sfx, pname, d0, d1)                                        \
  {                                                                            \
    .kind = TPXP_SK_PARAM, .suffix = (sfx), .name = (pname), .a = (d0),        \
    .b = (d1)                                                                  \
  }

/* A parameter of any rank (conv kernels, probes): `shape` has nd dims. */
#define TPXP_SK_PRM_ND(sfx, pname, nd, shape_)                                 \
  {                                                                            \
    .kind = TPXP_SK_PARAM_ND, .suffix = (sfx), .name = (pname), .a = (nd),     \
    .shape = (shape_)                                                          \
  }

/* The row after this one is added only when `cond` holds (a row that
 * exists only in some configurations). */
#define TPXP_SK_WHEN(cond)                                                     \
  { .kind = TPXP_SK_WHEN, .suffix = "", .a = !!(cond) }

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
  tpxp_sk_layers((host), (ctx), (prefix), (layers), (rows), TPXP_N_OF(rows),   \
                 (dtype))

/* A decoder stack whose layers differ: embedding, the layers container,
 * each layer built by a callback, then tail rows (norm, rotary_emb, ...). */
typedef int (*tpxp_layer_fn)(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                             const char *layer, int64_t i, const void *user);

typedef struct tpxp_stack {
  const char *prefix; /* "model" */
  const char *embed;  /* "embed_tokens" */
  int64_t vocab, hidden, layers;
  tpxp_layer_fn layer;     /* builds layer i at "<prefix>.layers.<i>" */
  const void *user;        /* handed to `layer` */
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

#endif /* TPXP_SKELETON_H */
