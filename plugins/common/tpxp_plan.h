/* tpxp_plan.h — plan entries as designated-initialiser rule
 * rows, and the plan tables several families share (tpxp_common.c,
 * tpxp_plans.c). */
#ifndef TPXP_PLAN_H
#define TPXP_PLAN_H

#include "tpxp_base.h"

#ifdef __cplusplus
extern "C" {
#endif

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
#define TPXP_RULE(style_, ...)                                                 \
  { .style = (style_), .suffix = __VA_ARGS__ }
#define TPXP_COL(...) TPXP_RULE("colwise", __VA_ARGS__)
#define TPXP_ROW(...) TPXP_RULE("rowwise", __VA_ARGS__)
#define TPXP_VOCAB(...) TPXP_RULE("vocab_parallel_embedding", __VA_ARGS__)
#define TPXP_SEQ(...) TPXP_RULE("sequence_parallel", __VA_ARGS__)
#define TPXP_SEQ_AG(...)                                                       \
  TPXP_RULE("sequence_parallel_allgather_activation", __VA_ARGS__)

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
  {                                                                            \
    TPXP_COL(name, .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR, .rooted = 1),  \
        TPXP_COL(name, .in = TPXP_S1, .out = TPXP_SM1,                         \
                 .local = TPXP_KEEP_DTENSOR, .rooted = 1)                      \
  }
#define TPXP_HEAD_REPLICATED(name)                                             \
  {                                                                            \
    TPXP_COL(name, .out = TPXP_R, .rooted = 1),                                \
        TPXP_COL(name, .in = TPXP_S1, .out = TPXP_R, .rooted = 1)              \
  }

/* The whole plan: the body under `prefix` and head[0]; with `sp`, the dict
 * update tpxp_m3_sp1, head[1], then `sp_tail` under `prefix` (e.g.
 * tpxp_m3_norms_sp). */
int tpxp_add_m3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *prefix, const tpxp_rule head[2], int sp,
                     const tpxp_rule *sp_tail, size_t n_tail);

#ifdef __cplusplus
}
#endif

#endif /* TPXP_PLAN_H */
