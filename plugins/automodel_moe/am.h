/* am.h — the tpx_automodel_moe plugin's shared declarations: the mixture-of-
 * experts architectures NeMo Automodel 0.7.0 trains with its OWN model
 * classes (its MODEL_ARCH_MAPPING), read from a Hugging Face config into one
 * description (am_config.c) and built as Automodel's module tree
 * (am_skeleton.c). Not: transformers' classes for the same configs (they
 * name and shape the experts differently), expert parallelism itself (the
 * host's, from this plugin's moe_custom / expert_param traits). */
#ifndef TPX_AUTOMODEL_MOE_AM_H
#define TPX_AUTOMODEL_MOE_AM_H

#include <stdint.h>

#include "tpxp_common.h"

#define AM_F32 "float32"

/* The self-attention Automodel builds for a family. */
typedef enum am_attn {
  AM_ATTN_GQA = 1, /* q/k/v/o projections (+ optional biases, qk norms) */
  AM_ATTN_MLA,     /* DeepSeek's multi-head latent attention */
  AM_ATTN_HYBRID,  /* Qwen3-Next: gated-delta-net or gated full attention */
  AM_ATTN_MIMO     /* MiMo-V2: full or sliding-window sizes per layer
                      (am_mimo.c) */
} am_attn;

/* How a family's config says which layers are MoE layers. */
typedef enum am_sparse_rule {
  AM_SPARSE_ALL = 1,     /* every layer (GPT-OSS, MiniMax-M2) */
  AM_SPARSE_FIRST_K,     /* i >= first_k_dense_replace (DeepSeek-V3/V3.2,
                            GLM-4-MoE) */
  AM_SPARSE_LAYER_TYPES, /* mlp_layer_types[i] == "sparse", else first_k
                            (GLM-4-MoE-Lite, GLM-MoE-DSA) */
  AM_SPARSE_STEP,        /* not in mlp_only_layers and (i + 1) %
                            decoder_sparse_step == 0 (Qwen3-MoE, -Next) */
  AM_SPARSE_ERNIE,       /* (i + 1) % moe_layer_interval == 0 and
                            moe_layer_start_index <= i <= end_index */
  AM_SPARSE_FREQ,        /* moe_layer_freq[i] (MiMo-V2) */
  AM_SPARSE_LAGUNA       /* as STEP; mlp_only_layers when absent: the
                            "dense" entries of mlp_layer_types, else [0] */
} am_sparse_rule;

/* Which tie_word_embeddings values Automodel's class accepts (its
 * tie_word_embeddings_support, printed by tools/upstream/tie_support.py);
 * it refuses the other at construction. */
typedef enum am_tie_support {
  AM_TIE_BOTH = 0, /* either (also: undeclared) */
  AM_TIE_UNTIED,   /* UNTIED_ONLY: separate lm_head */
  AM_TIE_TIED      /* TIED_ONLY: lm_head shares the embedding */
} am_tie_support;

/* One architecture: its config keys and module-tree features. */
typedef struct am_arch {
  const char *bare;             /* "DeepseekV3ForCausalLM" */
  am_attn attn;                 /* the attention block */
  am_sparse_rule sparse;        /* which layers are MoE */
  const char *experts_key;      /* the routed-expert count key */
  const char *moe_inter_key;    /* per-expert intermediate size key; NULL:
                                   intermediate_size */
  const char *shared_key;       /* shared-expert count key; NULL: none */
  const char *shared_inter_key; /* NULL: moe_inter * shared count */
  int64_t shared_default;       /* shared_key's value when absent */
  int64_t first_k_default;      /* first_k_dense_replace when absent */
  const char *gate_dtype;       /* router weight dtype; NULL: the config's */
  int indexer;     /* DeepSeek-V3.2 / GLM-MoE-DSA lightning indexer */
  int tie_default; /* tie_word_embeddings when absent */
  am_tie_support tie_support; /* what the class accepts */
  const char *tie_class;      /* the class's name in its refusal; NULL: bare */
  const char *bias_key;       /* config key of the q/k/v biases (GQA);
                                 NULL: none (GPT-OSS: always, see gpt_oss) */
  int o_bias;                 /* o_proj takes the same bias as q/k/v */
  const char *o_bias_key;     /* config key of o_proj's own bias (Ling-V2
                                 use_bias); NULL: as o_bias says */
  int gpt_oss;                /* biases everywhere, sinks, router bias */
  int ernie;                  /* use_bias on the MLPs and experts too */
  int shared_gate;            /* Qwen3-Next's shared_expert_gate [1, H] */
  int qk_norm;                /* 0: none; 1: per head [head_dim] (Qwen3,
                                 GLM-4 use_qk_norm); 2: over the flattened
                                 projections (MiniMax-M2 use_qk_norm) */
  const char *qk_norm_key;    /* key that enables qk_norm; NULL: always */
  int qk_norm_default;        /* qk_norm_key's value when absent */
  int fp32_linear_attn;       /* Qwen3-Next: A_log / dt_bias in _fp32_params */
  int minimax_names;          /* checkpoint: block_sparse_moe, w1 / w3 / w2 */
  int fused_in_ckpt;          /* checkpoint already holds fused experts */
  const char *ckpt_prefix;    /* Mistral-4: every checkpoint name begins with
                                 this ("language_model."); the experts are
                                 stored fused in transformers' layout,
                                 mlp.experts.gate_up_proj [E, 2I, H] and
                                 down_proj [E, H, I] (each box transposed) */
  int mimo_fused;             /* MiMo-V2.5: qkv_proj when
                                 attention_projection_layout is fused_qkv */
  int fused_qkv_ckpt;         /* Ling-V2: the checkpoint stores q/k/v weights
                                 fused, attention.query_key_value [q+2kv, H] */
  const char *sec;            /* the text config's section ("thinker_config.
                                 text_config"); NULL: the root */
  const char *tie_key;        /* tie_word_embeddings' full key; NULL: under
                                 sec */
  const char *src_prefix;     /* prefix of the per-expert checkpoint names
                                 ("thinker."); NULL: none */
  const char *src_strip;      /* taken off the front of a layer's name in its
                                 per-expert checkpoint names ("model."); NULL:
                                 none */
  const char *stack;          /* the decoder's prefix; NULL: "model" */
  const char *head;           /* the output head; NULL: "lm_head" */
  int kimi_vision;            /* Kimi K2.5's MoonViT tower and projector
                                 (am_kimi.c) */
  int minimax3;               /* MiniMax-M3's decoder, MTP blocks and vision
                                 tower (am_minimax3.c) */
  int inkling;                /* Inkling's decoder, audio and vision towers
                                 (am_inkling.c, am_inkling_vit.c) */
  int step;                   /* Step-3.7's decoder, MTP blocks, vision tower
                                 (am_step.c, am_step_vit.c) */
  int glm5;                   /* GLM-5-Next's decoder and vision tower
                                 (am_glm5.c) */
  int laguna;                 /* per-layer heads (num_attention_heads_per_
                                 layer), output gate g_proj (gating /
                                 gating_types) */
} am_arch;

/* A config read for one architecture. */
typedef struct am_cfg {
  const am_arch *a;
  int64_t layers, hidden, heads, kv_heads, head_dim, inter, vocab;
  int tie, attn_bias, o_bias, use_bias, qk_norm;
  /* MLA */
  int64_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
  int64_t idx_heads, idx_dim;
  /* MoE */
  int64_t experts, moe_inter, shared_inter;
  /* Qwen3-Next gated delta net */
  int64_t lin_kh, lin_kd, lin_vh, lin_vd, conv_k;
} am_cfg;

/* `key` under the text config's section of c->a (the key itself at the
 * root), formatted into buf. */
const char *am_key(const am_cfg *c, const char *key, char *buf, size_t n);

/* The architecture row for `arch` (bare or qualified), or NULL. */
const am_arch *am_find(const char *arch);
/* All rows, for registration. */
const am_arch *am_archs(size_t *n);

/* Read the config for `a` into c (errors name the key). */
int am_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, const am_arch *a,
            am_cfg *c);
/* Is layer i an MoE layer? */
int am_layer_sparse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, int64_t i, int *sparse);
/* 1 in *has when the integer list at `key` holds i (absent: 0). */
int am_list_has(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const char *key, int64_t i, int *has);
/* The string at "<key>[i]", or NULL when the list is absent. */
int am_list_str(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const char *key, int64_t i, const char **out);

/* Laguna (am_laguna.c): the configs Automodel's class refuses; is layer i
 * MoE. */
int am_laguna_refusals(const tpx_plugin_host *host, tpx_plugin_ctx *ctx);
int am_laguna_sparse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c, int64_t i, int *sparse);
/* Laguna's layer i: its query heads and its g_proj width (0: none). */
int am_laguna_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c, int64_t i, int64_t *heads, int64_t *g_out);
/* Is layer i a Qwen3-Next linear-attention layer (layer_types)? */
int am_layer_linear(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, int64_t i, int *linear);

/* MiMo-V2 (am_mimo.c): is layer i MoE (moe_layer_freq); its attention
 * at `attn`. */
int am_mimo_sparse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c, int64_t i, int *sparse);
int am_sk_mimo_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, const char *attn, int64_t i);

/* Kimi K2.5 (am_kimi.c): model.vision_tower, model.multi_modal_projector
 * and the model.language_model module, before the text decoder. */
int am_sk_kimi_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const am_cfg *c);

/* MiniMax-M3 (am_minimax3.c): the whole tree after the config read. */
int am_sk_minimax3(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c);

/* Inkling (am_inkling.c): the whole tree after the config read; its
 * vision tower (am_inkling_vit.c), whose last stage outputs text_hidden. */
int am_sk_inkling(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const am_cfg *c);
int am_sk_inkling_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         int64_t text_hidden);

/* Step-3.7 (am_step.c): the whole tree after the config read; its vision
 * tower and projector (am_step_vit.c). */
int am_sk_step(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const am_cfg *c);
int am_sk_step_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      int64_t text_hidden);

/* GLM-5-Next (am_glm5.c): the whole tree after the config read; its
 * vision tower model.visual. */
int am_sk_glm5(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const am_cfg *c);
int am_sk_glm5_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx);

/* The whole skeleton (tpx_plugin_get_skeleton). */
int am_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const char *arch);
/* The text decoder stack at `prefix` (am_moe_block.c): embedding, the
 * layers through `layer`, norm (+ embed_norm), head. */
int am_sk_text_stack(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c, const char *prefix, const char *head,
                     tpxp_layer_fn layer, const void *user, int embed_norm);
/* Automodel's MLP at `fqn` (am_moe_block.c): up, gate, down. */
int am_sk_mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, const char *fqn,
              int64_t h, int64_t inter, int bias);
/* The MoE block at "<layer>.mlp" (am_moe_block.c): router, grouped
 * experts (with their checkpoint sources), shared experts. */
int am_sk_moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, const am_cfg *c,
              const char *layer);

#endif /* TPX_AUTOMODEL_MOE_AM_H */
