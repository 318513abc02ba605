/* tpx/model.h — a model description: module tree, parameters, config.
 *
 * A model is a tree of modules addressed by FQN ("model.layers.0.mlp.up_proj",
 * the root is ""), each with a kind and its own parameters (name, shape,
 * dtype), plus tied parameters (one tensor under two names, e.g. lm_head.weight
 * tied to model.embed_tokens.weight), the model's config JSON and its
 * architecture names. Children keep insertion order (torch's named_children
 * order), which plan matching relies on.
 *
 * Three ways in: the builder calls below (trainers), an HF config.json
 * (tpx_model_load_config; the modules come from the family plugin's skeleton,
 * see tpx/registry.h), and safetensors headers (tpx_model_add_safetensors).
 *
 * Not thread-safe for writes; concurrent reads are fine. */
#ifndef TPX_MODEL_H
#define TPX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/layout.h"

TPX_BEGIN_DECLS

typedef struct tpx_model tpx_model;

typedef enum tpx_module_kind {
  TPX_MODULE_CONTAINER = 0, /* holds children only (incl. ModuleList) */
  TPX_MODULE_LINEAR = 1,
  TPX_MODULE_EMBEDDING = 2,
  TPX_MODULE_NORM = 3,
  TPX_MODULE_ROTARY = 4,
  TPX_MODULE_OTHER = 5,
} tpx_module_kind;

/* "linear", "embedding", ...; static. */
TPX_API const char *tpx_module_kind_name(tpx_module_kind kind);
TPX_API tpx_status tpx_module_kind_parse(const char *text, tpx_module_kind *out,
                                         tpx_error *err);

/* Borrowed view of one parameter; pointers valid while the model lives and
 * is not modified. */
typedef struct tpx_param_info {
  const char *fqn;  /* "model.layers.0.mlp.up_proj.weight" */
  const char *name; /* "weight" */
  int64_t module;   /* index of the owning module */
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS];
  tpx_dtype dtype;
  int64_t tied_to; /* index of the parameter this one aliases, or -1 */
} tpx_param_info;

/* ---- building ---- */

/* A new, empty model holding only the root module "" (a container). */
TPX_API tpx_status tpx_model_create(tpx_model **out, tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_model_destroy(tpx_model *model);

/* Add the module at `fqn` (atoms non-empty). Missing parents are created as
 * containers. Adding an existing module sets its kind (a container may become
 * a leaf kind); returns its index in *index_out (may be NULL). */
TPX_API tpx_status tpx_model_add_module(tpx_model *model, const char *fqn,
                                        tpx_module_kind kind,
                                        int64_t *index_out, tpx_error *err);

/* Add parameter `name` to the module at `module_fqn` (created as OTHER if
 * missing). Dims >= 0, ndim 0..TPX_MAX_TENSOR_DIMS. A duplicate FQN is
 * TPX_ALREADY_EXISTS. */
TPX_API tpx_status tpx_model_add_param(tpx_model *model, const char *module_fqn,
                                       const char *name, const int64_t *shape,
                                       int ndim, tpx_dtype dtype,
                                       int64_t *index_out, tpx_error *err);

/* Parameter `param_fqn` is the tensor `target_fqn` (tied weights). If
 * param_fqn does not exist yet it is created with the target's shape and
 * dtype. Shapes and dtypes must agree. tied_to always names the parameter
 * holding the storage (tying to a tied parameter follows it there). */
TPX_API tpx_status tpx_model_tie(tpx_model *model, const char *param_fqn,
                                 const char *target_fqn, tpx_error *err);

/* Replace the config with the JSON object in `json_text` (Python-style
 * Infinity, -Infinity and NaN accepted). `source` names it in errors. Sets
 * the architectures from its "architectures" list, or, when the config has
 * none (a Diffusers component config), from its "_class_name" string. */
TPX_API tpx_status tpx_model_set_config(tpx_model *model, const char *json_text,
                                        size_t len, const char *source,
                                        tpx_error *err);

/* The parameters' dtype of a model built from its config: the config's
 * torch_dtype becomes `dtype` (a floating-point one; its Hugging Face
 * name), so a plugin skeleton built afterwards gives it to every parameter
 * the plugin does not pin (fp32 router weights stay fp32), as if
 * config.json said so (`tpx plan --dtype`). TPX_INVALID_ARGUMENT for
 * another dtype or a model without a config. */
TPX_API tpx_status tpx_model_set_config_dtype(tpx_model *model, tpx_dtype dtype,
                                              tpx_error *err);

/* Add an architecture name ("LlamaForCausalLM"); the first is the primary. */
TPX_API tpx_status tpx_model_add_architecture(tpx_model *model,
                                              const char *arch, tpx_error *err);

/* ---- loading ---- */

/* A model with the config of an HF config.json at `path` (no modules yet).
 * Handles Infinity/NaN and VLM configs (text_config / vision_config). */
TPX_API tpx_status tpx_model_load_config(const char *path, tpx_model **out,
                                         tpx_error *err);

/* Add every tensor listed in safetensors headers: `path` is one
 * model.safetensors, a model.safetensors.index.json (its shards are read from
 * the same directory), or a directory holding either. Only headers are read,
 * and checked against the file size (TPX_PARSE naming the file and tensor).
 * New tensors are added in natural name order ("layers.2" before
 * "layers.10"). Module kinds of new modules are inferred from names and
 * shapes (2-D "weight": embedding if the module name holds "embed" or is
 * wte/wpe, else linear; only 1-D tensors and a norm/ln name: norm; else
 * other). Tensors already present must agree in shape and dtype
 * (TPX_VALIDATION naming the tensor and both shapes); after a header or
 * agreement error nothing has been added. When the config's
 * tie_word_embeddings (or text_config.tie_word_embeddings) is true — absent
 * counts as false — and the files lack lm_head.weight, it is tied to the
 * input embedding (created if missing, or tied if a skeleton declared it
 * untied; shapes must agree). */
TPX_API tpx_status tpx_model_add_safetensors(tpx_model *model, const char *path,
                                             tpx_error *err);

/* ---- name aliases ----
 * Another naming of this model's tensors, e.g. the module names of a
 * different implementation of the architecture (NeMo Automodel's own
 * class) beside the checkpoint's. A rule rewrites the leading dotted atoms
 * of a name that match `alias` (each '*' atom matches one atom) into
 * `canonical` (its '*' atoms take the matched atoms in order); the rest of
 * the name is kept. Rules are tried in the order added; the first that
 * matches applies. tpx_model_add_safetensors reads every header name
 * through them, so a checkpoint under either naming matches the model.
 * Both strings copied; each must hold as many '*' atoms as the other. */
TPX_API tpx_status tpx_model_add_name_alias(tpx_model *model, const char *alias,
                                            const char *canonical,
                                            tpx_error *err);
TPX_API size_t tpx_model_num_name_aliases(const tpx_model *model);
/* Borrowed strings valid while the model lives; TPX_OUT_OF_RANGE past the
 * end. */
TPX_API tpx_status tpx_model_name_alias(const tpx_model *model, size_t index,
                                        const char **alias,
                                        const char **canonical, tpx_error *err);
/* `name` through the rules into buf: 1 when a rule rewrote it, 0 when none
 * matched (buf holds `name`), -1 when buf is too small or an argument is
 * NULL. */
TPX_API int tpx_model_canonical_name(const tpx_model *model, const char *name,
                                     char *buf, size_t size);

/* ---- family traits ----
 * What a model class's plugin declares about it beyond its plan, as the
 * plugin ABI spells it ("layers=<class>:language:<fqn>[,...]",
 * "text_config_heads=<class>", "hf_prefix=<class>:<prefix>",
 * "inner_model=<class>:<module>", "block_configs=<class>:<model_type>";
 * docs/PLUGIN_ABI.md "Traits"): where the FSDP layer lists are
 * (tpx_model_layer_groups), where the head counts live
 * (tpx_validate_tp_mesh), the inner model of the Hugging Face tp plan. The
 * trait's class must be the model's primary architecture
 * (TPX_INVALID_ARGUMENT otherwise, or when malformed; TPX_NOT_FOUND for
 * another key). tpx_registry_build_skeleton and
 * tpx_registry_describe_model add the loaded plugins' traits. */
TPX_API tpx_status tpx_model_add_trait(tpx_model *model, const char *trait,
                                       tpx_error *err);

/* ---- buffers ----
 * Tensors a checkpoint holds that the module tree keeps as buffers, not
 * parameters (e.g. a MoE router's e_score_correction_bias): listed with
 * their bytes, never sharded, never counted as parameters.
 * tpx_model_add_safetensors records them from transformers' tables
 * (docs/CONVERSION.md); a builder may add its own. The name is copied; it
 * must not name a parameter. */
TPX_API tpx_status tpx_model_add_buffer(tpx_model *model, const char *fqn,
                                        const int64_t *shape, int ndim,
                                        tpx_dtype dtype, tpx_error *err);
TPX_API size_t tpx_model_num_buffers(const tpx_model *model);
/* Borrowed name and shape valid while the model lives; any out pointer
 * may be NULL; TPX_OUT_OF_RANGE past the end. */
TPX_API tpx_status tpx_model_buffer(const tpx_model *model, size_t index,
                                    const char **fqn, const int64_t **shape,
                                    int *ndim, tpx_dtype *dtype,
                                    tpx_error *err);
/* Bytes of buffer `index` (0 out of range). */
TPX_API int64_t tpx_model_buffer_bytes(const tpx_model *model, size_t index);
/* A buffer rule: a checkpoint tensor that is no parameter of the model and
 * whose name (through the name aliases) matches `pattern` (dotted atoms;
 * '*', '?', '[..]' match within one atom) is recorded as a buffer by
 * tpx_model_add_safetensors, not added as a parameter. A family's plugin
 * declares them (trait buffer, docs/PLUGIN_ABI.md), e.g. NeMo Automodel's
 * MoE routers' e_score_correction_bias, which its skeleton cannot name as
 * a parameter. The pattern is copied. */
TPX_API tpx_status tpx_model_add_buffer_rule(tpx_model *model,
                                             const char *pattern,
                                             tpx_error *err);
TPX_API size_t tpx_model_num_buffer_rules(const tpx_model *model);
/* Rule `index`, borrowed while the model lives; NULL out of range. */
TPX_API const char *tpx_model_buffer_rule(const tpx_model *model, size_t index);
/* One sentence on the checkpoint conversion tpx_model_add_safetensors
 * applied (transformers version, rules), or NULL when none did. */
TPX_API const char *tpx_model_conversion_note(const tpx_model *model);
/* The transformers release the embedded conversion rules were generated
 * from ("5.25.0"; static). A config whose `transformers_version` is newer
 * gets the info diagnostic `conversion-table-older` when planned. */
TPX_API const char *tpx_model_conversion_table_version(void);

/* ---- stored sources ----
 * A parameter that checkpoints store as several tensors, e.g. NeMo
 * Automodel's grouped experts (experts.gate_and_up_projs [E, H, 2I], whose
 * [e, :, 0:I] is the Hugging Face tensor experts.{e}.gate_proj.weight
 * [I, H] transposed). Source `source_name` fills the box `box` of the
 * parameter (box->ndim = the parameter's ndim, inside it, no length 0):
 * with transpose 0 the stored tensor's shape is the box's lengths without
 * leading length-1 dims; with transpose 1 it is that shape with its last
 * two dims swapped (at least 2 dims kept; the parameter needs ndim >= 2).
 * Declared by a family plugin's skeleton (host->skeleton_add_source), by
 * transformers' conversion rules, or by a builder. tpx_model_add_safetensors
 * checks such tensors against their boxes instead of adding them; the
 * checkpoint reader reads a rank's slice from them, `tpx merge` writes
 * them back. A parameter's sources are added in a run (TPX_INVALID_ARGUMENT
 * after another parameter's); a source name is used once and never names a
 * parameter; the name is copied. TPX_NOT_FOUND naming an unknown
 * parameter. */
TPX_API tpx_status tpx_model_add_param_source(tpx_model *model,
                                              const char *param_fqn,
                                              const char *source_name,
                                              const tpx_slice *box,
                                              int transpose, tpx_error *err);
/* A stored tensor bigger than the parameter: the parameter is a box of
 * it, and other parameters take the rest (transformers' Split / Chunk:
 * one saved tensor cut into several parameters). As
 * tpx_model_add_param_source, except that `box` (in the parameter's
 * coordinates, its lengths the stored tensor's shape as there) may reach
 * past the parameter on any dim, offsets negative included: what it
 * covers of the parameter is this parameter's part of the tensor. It must
 * meet the parameter. Several parameters may name the same source (the
 * same box lengths and transpose, parameters of one dtype); their parts
 * must tile the tensor (tpx_model_check_param_sources). A box inside the
 * parameter is an ordinary source. */
TPX_API tpx_status tpx_model_add_param_source_box(
    tpx_model *model, const char *param_fqn, const char *source_name,
    const tpx_slice *box, int transpose, tpx_error *err);
/* Stored tensor `source_name` is cut along `dim` (negative counts from the
 * end) into the parameters param_fqns[0..num_params) (added first): all
 * of one ndim and dtype, of the same shape off `dim`; parameter i is the
 * slice [offsets[i], offsets[i] + its length) of the tensor along `dim`
 * (offsets NULL: one after the other, in order). The tensor's shape is
 * theirs with the sum of their lengths along `dim`. The slices must tile
 * it (TPX_VALIDATION naming the tensor and the parameters at a gap or an
 * overlap; nothing is recorded then). Each parameter gets the tensor as a
 * source (tpx_model_add_param_source_box): the checkpoint's headers accept
 * the tensor, `tpx shard` reads each rank's slice from its offset in it
 * and `tpx merge` writes it back whole. */
TPX_API tpx_status tpx_model_add_split_source(tpx_model *model,
                                              const char *source_name, int dim,
                                              const char *const *param_fqns,
                                              const int64_t *offsets,
                                              size_t num_params,
                                              tpx_error *err);
/* Number of sources of parameter `param` (0: none, or out of range). */
TPX_API size_t tpx_model_num_param_sources(const tpx_model *model,
                                           int64_t param);
/* Source k of parameter `param`: its name (borrowed, valid while the model
 * lives), box and transpose flag (any out pointer may be NULL);
 * TPX_OUT_OF_RANGE past the end. */
TPX_API tpx_status tpx_model_param_source(const tpx_model *model, int64_t param,
                                          size_t k, const char **source_name,
                                          tpx_slice *box, int *transpose,
                                          tpx_error *err);
/* Every parameter with sources is covered by them exactly: no two boxes
 * overlap and together they fill the parameter; and every stored tensor
 * cut into several parameters (tpx_model_add_param_source_box) is tiled by
 * their parts. TPX_VALIDATION naming the parameter or tensor and the
 * sources at fault. */
TPX_API tpx_status tpx_model_check_param_sources(const tpx_model *model,
                                                 tpx_error *err);

/* ---- queries ---- */

TPX_API size_t tpx_model_num_modules(const tpx_model *model);
/* Module 0 is the root "". Borrowed string; NULL when out of range. */
TPX_API const char *tpx_model_module_fqn(const tpx_model *model, int64_t index);
TPX_API tpx_module_kind tpx_model_module_kind(const tpx_model *model,
                                              int64_t index);
/* Parent index; -1 for the root or out of range. */
TPX_API int64_t tpx_model_module_parent(const tpx_model *model, int64_t index);
TPX_API size_t tpx_model_module_num_children(const tpx_model *model,
                                             int64_t index);
/* The i-th child in insertion order, or -1. */
TPX_API int64_t tpx_model_module_child(const tpx_model *model, int64_t index,
                                       size_t i);
/* Index of the module at fqn, or -1. */
TPX_API int64_t tpx_model_find_module(const tpx_model *model, const char *fqn);

TPX_API size_t tpx_model_num_params(const tpx_model *model);
TPX_API tpx_status tpx_model_param(const tpx_model *model, int64_t index,
                                   tpx_param_info *out, tpx_error *err);
/* Index of the parameter at fqn, or -1. */
TPX_API int64_t tpx_model_find_param(const tpx_model *model, const char *fqn);

/* Architecture names; borrowed; NULL when out of range. */
TPX_API size_t tpx_model_num_architectures(const tpx_model *model);
TPX_API const char *tpx_model_architecture(const tpx_model *model, size_t i);
/* Where the model came from (config path); borrowed, may be NULL. */
TPX_API const char *tpx_model_source(const tpx_model *model);

/* Config reads by path: dotted keys with [i] for array items,
 * e.g. "text_config.num_attention_heads", "block_configs[2].attention.no_op".
 * TPX_NOT_FOUND when absent or null, TPX_INVALID_ARGUMENT on a type
 * mismatch. _int accepts integral reals (2.0); _float accepts integers and
 * Python-style Infinity/-Infinity/NaN. Strings are borrowed while the model
 * lives (and its config is not replaced). */
TPX_API tpx_status tpx_model_config_int(const tpx_model *model,
                                        const char *path, int64_t *out,
                                        tpx_error *err);
TPX_API tpx_status tpx_model_config_float(const tpx_model *model,
                                          const char *path, double *out,
                                          tpx_error *err);
TPX_API tpx_status tpx_model_config_bool(const tpx_model *model,
                                         const char *path, int *out,
                                         tpx_error *err);
TPX_API tpx_status tpx_model_config_string(const tpx_model *model,
                                           const char *path, const char **out,
                                           tpx_error *err);

/* FP8 block-quantized checkpoints (docs/CHECKPOINT.md "FP8 checkpoints").
 * tpx_model_add_safetensors pairs every stored `<w>_scale_inv` with its
 * weight `<w>` (stored F8_E4M3 or F8_E5M2) when config.json declares
 * `quantization_config.quant_method`: the weight becomes (or is checked
 * against) a parameter of the dtype upstream dequantizes it into (the
 * skeleton's, else the config's torch_dtype, else bf16), the scale is no
 * parameter; activation scales (`.activation_scale`) are dropped as
 * upstream drops them. A scale without its weight, of the wrong shape, an
 * F8 weight without its scale, or scales under a config without
 * quantization_config are TPX_VALIDATION errors naming the tensor. */
typedef struct tpx_quantized_weight {
  const char *weight; /* stored name, borrowed while the model lives */
  const char *scale;  /* its `_scale_inv` tensor's stored name */
  tpx_dtype stored_dtype, scale_dtype, train_dtype;
  int64_t numel;       /* the weight's elements */
  int64_t scale_numel; /* the scale's elements */
  int64_t block[2];    /* [rows, cols] of a scale block; 0, 0 when the
                          scale is one per tensor (or per expert) */
} tpx_quantized_weight;
TPX_API size_t tpx_model_num_quantized(const tpx_model *model);
TPX_API tpx_status tpx_model_quantized(const tpx_model *model, size_t index,
                                       tpx_quantized_weight *out,
                                       tpx_error *err);

/* Totals counting a tied parameter once. */
TPX_API int64_t tpx_model_total_params(const tpx_model *model);
TPX_API int64_t tpx_model_total_bytes(const tpx_model *model);

TPX_END_DECLS

#endif /* TPX_MODEL_H */
