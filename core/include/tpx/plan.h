/* tpx/plan.h — parallel styles and TP plans.
 *
 * A plan is an ordered list of (module pattern, style) entries, as a Python
 * dict of FQN pattern -> ParallelStyle: adding an existing key replaces it in
 * place, new keys are appended. Styles carry torch's defaults
 * (docs/SEMANTICS.md "Parallel styles") and the upstream variants. Text form:
 * tpx-plan/1 JSON (docs/PLAN_FORMAT.md). Hugging Face style strings
 * ("colwise", "rowwise_rep", ...) translate as docs/SEMANTICS.md "Plans and
 * matching" says.
 *
 * Not a matcher: see tpx/match.h for resolving keys against a model. */
#ifndef TPX_PLAN_H
#define TPX_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/placement.h"

TPX_BEGIN_DECLS

/* The family of a style: which fields it uses and what it does to a
 * module's parameters (docs/SEMANTICS.md "Parallel styles"). */
typedef enum tpx_style_family {
  TPX_STYLE_FAMILY_INVALID = 0,
  TPX_STYLE_FAMILY_COLWISE,        /* colwise */
  TPX_STYLE_FAMILY_ROWWISE,        /* rowwise, vocab / gemma4 variants */
  TPX_STYLE_FAMILY_SEQUENCE,       /* sequence_parallel and its variants */
  TPX_STYLE_FAMILY_PREPARE_INPUT,  /* prepare_module_input */
  TPX_STYLE_FAMILY_PREPARE_OUTPUT, /* prepare_module_output */
  TPX_STYLE_FAMILY_REPLICATED,     /* replicated_with_grad_allreduce */
} tpx_style_family;

/* Every style: enum name, text name, family (the traits column; code asks
 * tpx_style_kind_traits instead of switching on kinds). */
#define TPX_STYLE_LIST(X)                                                      \
  X(COLWISE, "colwise", COLWISE)                                               \
  X(ROWWISE, "rowwise", ROWWISE)                                               \
  X(SEQUENCE_PARALLEL, "sequence_parallel", SEQUENCE)                          \
  X(PREPARE_MODULE_INPUT, "prepare_module_input", PREPARE_INPUT)               \
  X(PREPARE_MODULE_OUTPUT, "prepare_module_output", PREPARE_OUTPUT)            \
  X(ROTARY_EMBED_PARALLEL, "rotary_embed_parallel", SEQUENCE)                  \
  X(QK_NORM_SEQUENCE_PARALLEL, "qk_norm_sequence_parallel", SEQUENCE)          \
  X(VOCAB_PARALLEL_EMBEDDING, "vocab_parallel_embedding", ROWWISE)             \
  X(SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION,                                    \
    "sequence_parallel_allgather_activation", SEQUENCE)                        \
  X(GEMMA4_VOCAB_PARALLEL_EMBEDDING, "gemma4_vocab_parallel_embedding",        \
    ROWWISE)                                                                   \
  X(GEMMA4_ROWWISE_PARALLEL, "gemma4_rowwise_parallel", ROWWISE)               \
  X(REPLICATED_WITH_GRAD_ALLREDUCE, "replicated_with_grad_allreduce",          \
    REPLICATED)

typedef enum tpx_style_kind {
#define TPX__STYLE_ENUM(name, str, family) TPX_STYLE_##name,
  TPX_STYLE_LIST(TPX__STYLE_ENUM)
#undef TPX__STYLE_ENUM
      TPX_STYLE_COUNT
} tpx_style_kind;

/* What code needs to know of a style kind, from its family. */
typedef struct tpx_style_traits {
  tpx_style_family family;
  /* Shards parameters on tp (colwise / rowwise families); torch accepts
   * these only on nn.Linear and nn.Embedding. */
  int shards_params;
  /* Runs distribute_module: places the parameters of the module and of
   * every submodule (colwise, rowwise, sequence and replicated families). */
  int distributes_params;
  /* Its parameters' gradients are summed over tp after backward (the
   * replicated family: a per-head norm between colwise and rowwise). */
  int sums_grad_over_tp;
} tpx_style_traits;

/* The traits of `kind`; family TPX_STYLE_FAMILY_INVALID and no flags for a
 * kind out of range. */
TPX_API tpx_style_traits tpx_style_kind_traits(tpx_style_kind kind);

#define TPX_STYLE_MAX_LAYOUTS 8

/* A list of layouts; an item may be None (pass-through) in the
 * prepare_module_* styles. count == -1 means "not given" (torch None). */
typedef struct tpx_layout_list {
  int32_t count;
  tpx_placement items[TPX_STYLE_MAX_LAYOUTS];
  uint8_t is_none[TPX_STYLE_MAX_LAYOUTS];
} tpx_layout_list;

#define TPX_STYLE_MAX_KWARGS 4
#define TPX_STYLE_KWARG_NAME_SIZE 64

/* One keyword-argument layout of prepare_module_input ({name: layout}); the
 * layout may be None (is_none = 1: the kwarg passes through). */
typedef struct tpx_kwarg_layout {
  char name[TPX_STYLE_KWARG_NAME_SIZE]; /* NUL-terminated, non-empty */
  tpx_placement layout;
  uint8_t is_none;
  uint8_t reserved[3]; /* zero; keeps the struct free of padding */
} tpx_kwarg_layout;

/* A {kwarg name: layout} dict in insertion order; count 0 is {} (torch's
 * default). Names are unique within one list. */
typedef struct tpx_kwarg_layout_list {
  int32_t count; /* 0..TPX_STYLE_MAX_KWARGS */
  tpx_kwarg_layout items[TPX_STYLE_MAX_KWARGS];
} tpx_kwarg_layout_list;

/* A parallel style with every field resolved to its value (defaults filled).
 * Which fields are meaningful depends on kind (docs/PLAN_FORMAT.md):
 *  - colwise, rowwise, vocab_parallel_embedding, gemma4_*: input_layouts and
 *    output_layouts (exactly one layout each, never None), use_local_output;
 *  - sequence_parallel and its variants: sequence_dim, use_local_output;
 *  - prepare_module_input: input_layouts / desired_input_layouts (count -1 =
 *    None; when input_layouts is given desired_input_layouts must be given
 *    with the same length), input_kwarg_layouts /
 *    desired_input_kwarg_layouts (same length), use_local_output;
 *  - prepare_module_output: output_layouts and desired_output_layouts (both
 *    required, same length), use_local_output.
 * Layout items are replicate, shard(d) or partial(op); never strided_shard. */
typedef struct tpx_style {
  tpx_style_kind kind;
  tpx_layout_list input_layouts;
  tpx_layout_list output_layouts;
  tpx_layout_list desired_input_layouts;  /* prepare_module_input */
  tpx_layout_list desired_output_layouts; /* prepare_module_output */
  int use_local_output;                   /* 0 or 1 */
  int32_t sequence_dim;                   /* sequence-parallel family */
  /* prepare_module_input keyword layouts ({} unless given). */
  tpx_kwarg_layout_list input_kwarg_layouts;
  tpx_kwarg_layout_list desired_input_kwarg_layouts;
} tpx_style;

/* "colwise", ...; static; NULL for out-of-range kinds. */
TPX_API const char *tpx_style_kind_name(tpx_style_kind kind);
TPX_API tpx_status tpx_style_kind_parse(const char *text, tpx_style_kind *out,
                                        tpx_error *err);
/* A style of `kind` with torch's defaults for every field. */
TPX_API tpx_style tpx_style_default(tpx_style_kind kind);
/* True if the two styles are equal in every meaningful field. */
TPX_API int tpx_style_equal(const tpx_style *a, const tpx_style *b);
/* Check a style's arity and values for its kind (the rules above).
 * TPX_INVALID_ARGUMENT naming the field at fault. */
TPX_API tpx_status tpx_style_validate(const tpx_style *style, tpx_error *err);

typedef struct tpx_plan tpx_plan;

/* Borrowed view of one entry; valid until the plan is modified. */
typedef struct tpx_plan_entry {
  const char *module; /* FQN pattern */
  tpx_style style;
  int optional; /* matching nothing is info, not an error */
} tpx_plan_entry;

TPX_API tpx_status tpx_plan_create(tpx_plan **out, tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_plan_destroy(tpx_plan *plan);
/* A deep copy. */
TPX_API tpx_status tpx_plan_clone(const tpx_plan *plan, tpx_plan **out,
                                  tpx_error *err);

/* Dict-update semantics: an existing key is replaced in place, a new one is
 * appended. The pattern is validated (no empty atom, no "..", no leading or
 * trailing dot, not empty unless it is "" meaning the root module). The
 * style is validated (tpx_style_validate) and stored canonical: colwise /
 * rowwise layouts with count -1 take their defaults, fields the kind does
 * not use are dropped. Strings are copied. On error the plan is unchanged. */
TPX_API tpx_status tpx_plan_set(tpx_plan *plan, const char *module,
                                const tpx_style *style, int optional,
                                tpx_error *err);
/* TPX_NOT_FOUND if absent. */
TPX_API tpx_status tpx_plan_remove(tpx_plan *plan, const char *module,
                                   tpx_error *err);
/* Apply every entry of `overrides` in order with tpx_plan_set. */
TPX_API tpx_status tpx_plan_update(tpx_plan *plan, const tpx_plan *overrides,
                                   tpx_error *err);

TPX_API size_t tpx_plan_size(const tpx_plan *plan);
TPX_API tpx_status tpx_plan_get(const tpx_plan *plan, size_t index,
                                tpx_plan_entry *out, tpx_error *err);
/* Index of the entry with exactly this key, or -1. */
TPX_API int64_t tpx_plan_find(const tpx_plan *plan, const char *module);

/* Parse tpx-plan/1 JSON. `source` (a file name, may be NULL) prefixes
 * errors, which name the entry index, key and offending value. Duplicate keys
 * in a document are an error. */
TPX_API tpx_status tpx_plan_from_json(const char *text, size_t len,
                                      const char *source, tpx_plan **out,
                                      tpx_error *err);
TPX_API tpx_status tpx_plan_load(const char *path, tpx_plan **out,
                                 tpx_error *err);
/* Normalized tpx-plan/1 JSON (every field written, in the order of
 * docs/PLAN_FORMAT.md's table; "not given" layout lists as null;
 * "optional" only when true). *out is malloc'd; the caller frees it with
 * free(). `indent` 1..31 as jansson's JSON_INDENT, with a trailing newline;
 * 0 = compact, one line, no newline. */
TPX_API tpx_status tpx_plan_to_json(const tpx_plan *plan, int indent,
                                    char **out, tpx_error *err);

/* Translate one Hugging Face style string for key `key`
 * (docs/SEMANTICS.md "Plans and matching").
 * *skip is set to 1 when the key is to be dropped (skipped strings such as
 * "local_colwise", "gather", "ep_*", or "replicated_with_grad_allreduce"),
 * else *out holds the style. Unknown / unsupported strings are TPX_UNSUPPORTED
 * naming key and string. `key` is only used in the message: the lm_head
 * special case belongs to tpx_plan_from_hf and
 * tpx_plan_from_hf_class_and_base. */
TPX_API tpx_status tpx_plan_translate_hf_style(const char *key,
                                               const char *hf_style,
                                               tpx_style *out, int *skip,
                                               tpx_error *err);

/* Build a plan from a Hugging Face model's tp plan (docs/SEMANTICS.md
 * "Plans and matching"), given as
 * a JSON object {key: style string} of the *inner* model (its
 * base_model_tp_plan). Every key is prefixed with `prefix` + "." (prefix
 * NULL or "" = keys used as they are), `<prefix>.embed_tokens: rowwise_rep`
 * is added when missing, then each value is translated in insertion order
 * with tpx_plan_translate_hf_style (skipped keys are dropped and reported as
 * info "hf-style-skipped" in `diags`, which may be NULL). A rejected string
 * fails the whole call with TPX_UNSUPPORTED naming key and string (callers
 * report it as "hf-style-unsupported"); an empty plan is TPX_NOT_FOUND; bad
 * JSON / non-string values are TPX_PARSE / TPX_INVALID_ARGUMENT. *out is a
 * new plan owned by the caller. */
TPX_API tpx_status tpx_plan_from_hf(const char *hf_json, size_t len,
                                    const char *prefix, tpx_plan **out,
                                    tpx_diag_list *diags, tpx_error *err);
/* As tpx_plan_from_hf, merging transformers' two levels of tp plan: the
 * model class's _tp_plan (`top_json`, keys used unprefixed, e.g.
 * {"lm_head": "colwise_rep"}) and the base model's base_model_tp_plan
 * (`inner_json`, keys prefixed with `prefix`); either may be NULL. Later
 * sources override earlier ones (dict update: top, then inner). A key exactly
 * "lm_head" or "language_model.lm_head" with "colwise_rep" becomes
 * colwise(output shard(-1), use_local_output false). */
TPX_API tpx_status tpx_plan_from_hf_class_and_base(
    const char *top_json, size_t top_len, const char *inner_json,
    size_t inner_len, const char *prefix, tpx_plan **out, tpx_diag_list *diags,
    tpx_error *err);

TPX_END_DECLS

#endif /* TPX_PLAN_H */
