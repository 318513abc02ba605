/* tpx/plugin.h — the tpx model-family plugin ABI, version 1.
 *
 * Self-contained: depends only on <stdint.h> and <stddef.h>, usable from C
 * and C++. A third party may copy this header into its own tree. A plugin
 * links nothing of tpx: everything it needs from the host comes through the
 * tpx_plugin_host function table handed to every entry point.
 *
 * Required exports (both, exactly these names, extern "C"):
 *   TPX_PLUGIN_REGISTER_SYMBOL  "register_parallel_strategy"
 *   TPX_PLUGIN_GET_PLAN_SYMBOL  "get_plan"
 * Optional exports, found with dlsym (see the typedefs below):
 *   "tpx_plugin_get_skeleton"   model skeleton (every parameter) from a config
 *   "tpx_plugin_validate"       extra validation, reported as diagnostics
 *   "tpx_plugin_fsdp_units"     which modules become FSDP units
 *   "tpx_plugin_fp32_params"    parameters kept in fp32 under mixed precision
 *   "tpx_plugin_strategy"       the upstream strategy's properties (mixed
 *                               precision default, activation checkpointing,
 *                               tensor parallelism); added in 1.0, see below
 *
 * Negotiation (like Vulkan's loader/driver handshake): the host offers the
 * range [abi_min, abi_max] it speaks; the plugin answers with the one version
 * it will use in info->abi_version, or returns TPX_PLUGIN_ABI_UNSUPPORTED. The
 * host refuses a plugin whose answer is outside its range, naming both.
 *
 * Ownership: memory never crosses the border to be freed on the other side.
 * Strings the plugin hands over (names, architectures, keys, messages) are
 * copied by the host before the call returns. Strings the host hands out
 * (config values) are borrowed and valid until the plugin's entry point
 * returns. The plan, skeleton, diagnostics and FSDP units are host objects the
 * plugin fills through the table.
 *
 * Threading: the host may call get_plan and the optional entry points from
 * several threads at once, each with its own ctx. A plugin must therefore keep
 * no mutable global state; everything it needs arrives as arguments.
 * register_parallel_strategy is called once per load, before anything else.
 *
 * Stability: the two symbol names never change. Structs start with
 * struct_size and only grow at the end; a plugin checks host->struct_size
 * before using a member added in a later minor version. An incompatible change
 * bumps TPX_PLUGIN_ABI_MAJOR. */
#ifndef TPX_PLUGIN_H
#define TPX_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPX_PLUGIN_ABI_MAJOR 1
#define TPX_PLUGIN_ABI_MINOR 0
#define TPX_PLUGIN_ABI_VERSION(major, minor)                                   \
  ((uint32_t)(((uint32_t)(major) << 16) | (uint32_t)(minor)))
#define TPX_PLUGIN_ABI_CURRENT                                                 \
  TPX_PLUGIN_ABI_VERSION(TPX_PLUGIN_ABI_MAJOR, TPX_PLUGIN_ABI_MINOR)
#define TPX_PLUGIN_ABI_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define TPX_PLUGIN_ABI_VERSION_MINOR(v) ((uint32_t)(v)&0xffffu)

#define TPX_PLUGIN_REGISTER_SYMBOL "register_parallel_strategy"
#define TPX_PLUGIN_GET_PLAN_SYMBOL "get_plan"
#define TPX_PLUGIN_SKELETON_SYMBOL "tpx_plugin_get_skeleton"
#define TPX_PLUGIN_VALIDATE_SYMBOL "tpx_plugin_validate"
#define TPX_PLUGIN_FSDP_UNITS_SYMBOL "tpx_plugin_fsdp_units"
#define TPX_PLUGIN_FP32_PARAMS_SYMBOL "tpx_plugin_fp32_params"
#define TPX_PLUGIN_STRATEGY_SYMBOL "tpx_plugin_strategy"

/* Status codes returned by plugin entry points and host functions. */
typedef enum tpx_plugin_status {
  TPX_PLUGIN_OK = 0,
  TPX_PLUGIN_NOT_FOUND = 1,       /* config key / module absent */
  TPX_PLUGIN_TYPE_MISMATCH = 2,   /* config value has another JSON type */
  TPX_PLUGIN_REFUSED = 3,         /* the plugin declines (message set) */
  TPX_PLUGIN_INVALID = 4,         /* a bad argument (message set by host) */
  TPX_PLUGIN_ABI_UNSUPPORTED = 5, /* no common ABI version */
  TPX_PLUGIN_NO_MEMORY = 6,
  TPX_PLUGIN_ERROR = 7 /* any other failure (message set) */
} tpx_plugin_status;

/* Log levels for host->log. */
typedef enum tpx_plugin_log_level {
  TPX_PLUGIN_LOG_ERROR = 0,
  TPX_PLUGIN_LOG_WARN = 1,
  TPX_PLUGIN_LOG_INFO = 2,
  TPX_PLUGIN_LOG_TRACE = 3
} tpx_plugin_log_level;

/* Diagnostic levels for host->diagnose. */
typedef enum tpx_plugin_diag_level {
  TPX_PLUGIN_DIAG_INFO = 0,
  TPX_PLUGIN_DIAG_WARNING = 1,
  TPX_PLUGIN_DIAG_ERROR = 2
} tpx_plugin_diag_level;

/* Opaque host object for one call into the plugin: it carries the model
 * config, the model tree, the plan / skeleton / units being filled and the
 * error slot. Valid only during that call. */
typedef struct tpx_plugin_ctx tpx_plugin_ctx;

/* Integer fields meaning "use the style's torch default". */
#define TPX_PLUGIN_DEFAULT (-0x7fffffff - 1)

/* One plan entry, as the plugin describes it to host->plan_add. Layout
 * strings use the tpx-plan/1 text forms ("replicate", "shard(-1)",
 * "partial"). A NULL list pointer means the style's default; within a
 * prepare_module_input/output list a NULL item means "None" (pass-through).
 * Styles: colwise, rowwise, sequence_parallel, prepare_module_input,
 * prepare_module_output, rotary_embed_parallel, qk_norm_sequence_parallel,
 * vocab_parallel_embedding, sequence_parallel_allgather_activation,
 * gemma4_vocab_parallel_embedding, gemma4_rowwise_parallel. Any other name
 * is refused with TPX_PLUGIN_INVALID. */
typedef struct tpx_plugin_entry {
  size_t struct_size; /* sizeof(tpx_plugin_entry) as the plugin knows it */
  const char *module; /* dotted FQN pattern; atoms may hold * ? [..] */
  const char *style;  /* one of the style names above */
  const char *const *input_layouts;
  int32_t n_input_layouts;
  const char *const *output_layouts;
  int32_t n_output_layouts;
  const char *const *desired_layouts; /* desired_input_layouts (prepare
                                         input) or desired_output_layouts
                                         (prepare output) */
  int32_t n_desired_layouts;
  int32_t use_local_output; /* 0, 1 or TPX_PLUGIN_DEFAULT */
  int32_t sequence_dim;     /* sequence styles; TPX_PLUGIN_DEFAULT = 1 */
  int32_t optional;         /* 1: the key exists only in some variants of the
                               architecture; matching nothing is not an error */
} tpx_plugin_entry;

/* What the host asks a plan for. */
typedef struct tpx_plugin_plan_request {
  size_t struct_size;
  const char *architecture;  /* the string that selected this plugin */
  const char *plan_name;     /* NULL: the default plan; else a named plan the
                                plugin listed in info->plan_names */
  int32_t sequence_parallel; /* 0 or 1 */
  int64_t tp_size;           /* >= 1 */
} tpx_plugin_plan_request;

/* The host's function table. Every function is safe to call from any thread
 * with the ctx of the current call. Functions added later are appended; check
 * struct_size before using one that is newer than ABI 1.0. */
typedef struct tpx_plugin_host {
  size_t struct_size;
  uint32_t abi_min;         /* oldest ABI version the host speaks */
  uint32_t abi_max;         /* newest ABI version the host speaks */
  const char *host_version; /* tpx version string, e.g. "0.1.0" */

  /* Logging through the host's logger (never printf from a plugin). */
  void (*log)(tpx_plugin_ctx *ctx, int level, const char *message);
  /* Record why the current call fails or refuses; the first message wins.
   * Returns TPX_PLUGIN_OK. */
  int (*set_error)(tpx_plugin_ctx *ctx, const char *message);

  /* ---- config reads ----
   * `path` addresses the model's config.json: dotted keys, array items as
   * [i]: "text_config.num_attention_heads", "block_configs[3].ffn.ffn_mult".
   * Return TPX_PLUGIN_OK and fill *out; TPX_PLUGIN_NOT_FOUND if absent or
   * JSON null; TPX_PLUGIN_TYPE_MISMATCH if of another type. Integers are
   * accepted by config_get_float; integral floats (2.0) by config_get_int. */
  int (*config_has)(tpx_plugin_ctx *ctx, const char *path); /* 1 or 0 */
  int (*config_get_int)(tpx_plugin_ctx *ctx, const char *path, int64_t *out);
  int (*config_get_float)(tpx_plugin_ctx *ctx, const char *path, double *out);
  int (*config_get_bool)(tpx_plugin_ctx *ctx, const char *path, int *out);
  /* *out is borrowed, valid until the plugin's entry point returns. */
  int (*config_get_string)(tpx_plugin_ctx *ctx, const char *path,
                           const char **out);
  /* Number of items of an array, or of keys of an object. */
  int (*config_get_length)(tpx_plugin_ctx *ctx, const char *path, int64_t *out);
  /* The idx-th key of an object (insertion order); borrowed as above. */
  int (*config_get_key)(tpx_plugin_ctx *ctx, const char *path, int64_t idx,
                        const char **out);

  /* ---- model tree queries (get_plan, validate, fsdp_units) ---- */
  /* 1 if a module with exactly this FQN exists, else 0. */
  int (*model_has_module)(tpx_plugin_ctx *ctx, const char *fqn);
  /* Number of direct children of the module at fqn ("" is the root);
   * -1 if there is no such module. For a layer list, its layer count. */
  int64_t (*model_count_children)(tpx_plugin_ctx *ctx, const char *fqn);

  /* ---- plan building (get_plan) ----
   * Adds an entry to the host-owned plan. Adding a module key already in the
   * plan replaces that entry in place (a Python dict update); new keys are
   * appended. Invalid style or layouts: TPX_PLUGIN_INVALID with a message. */
  int (*plan_add)(tpx_plugin_ctx *ctx, const tpx_plugin_entry *entry);
  /* The same, from one tpx-plan/1 entry object as JSON text. */
  int (*plan_add_json)(tpx_plugin_ctx *ctx, const char *entry_json);
  /* Remove a key; TPX_PLUGIN_NOT_FOUND if it is not in the plan. */
  int (*plan_remove)(tpx_plugin_ctx *ctx, const char *module);
  /* Name the plan (free text shown in reports, e.g. "llama" or
   * "llama_nemotron_super_tp_plan"). Optional. */
  int (*plan_set_function)(tpx_plugin_ctx *ctx, const char *function);

  /* ---- model skeleton (tpx_plugin_get_skeleton) ----
   * Kinds: "linear", "embedding", "norm", "rotary", "container", "other".
   * Parent modules are created as containers when missing. */
  int (*skeleton_add_module)(tpx_plugin_ctx *ctx, const char *fqn,
                             const char *kind);
  /* Adds parameter `module_fqn + "." + name`. dtype in any spelling tpx
   * parses ("bfloat16", "BF16", "bf16"); NULL = the config's torch_dtype. */
  int (*skeleton_add_param)(tpx_plugin_ctx *ctx, const char *module_fqn,
                            const char *name, const int64_t *shape,
                            int32_t ndim, const char *dtype);
  /* Parameter `param_fqn` is the same tensor as `target_fqn` (tied); it is
   * not stored in the checkpoint and counted once. */
  int (*skeleton_tie)(tpx_plugin_ctx *ctx, const char *param_fqn,
                      const char *target_fqn);

  /* ---- validation (tpx_plugin_validate) ----
   * code: a stable kebab-case identifier, e.g. "heads-not-divisible". */
  int (*diagnose)(tpx_plugin_ctx *ctx, int level, const char *code,
                  const char *message);

  /* ---- FSDP units (tpx_plugin_fsdp_units) ----
   * reshard_after_forward: 0, 1 or TPX_PLUGIN_DEFAULT (tpx's rule). Units are
   * listed bottom-up; the root unit is always added by the host. */
  int (*fsdp_add_unit)(tpx_plugin_ctx *ctx, const char *fqn,
                       int32_t reshard_after_forward);

  /* ---- fp32 parameters (tpx_plugin_fp32_params) ----
   * Parameters matching this pattern (FQN pattern, per-atom fnmatch) keep
   * fp32 under mixed precision. */
  int (*fp32_add)(tpx_plugin_ctx *ctx, const char *param_pattern);

  /* ---- strategy (tpx_plugin_strategy) ----
   * Added after fp32_add (ABI 1.0, additive): use it only when
   * host->struct_size > offsetof(tpx_plugin_host, strategy_set). Records one
   * property of the upstream parallelization strategy serving the
   * architecture; setting a key again replaces its value. key: [a-z0-9_],
   * at most 48 bytes; value: non-empty text. Keys the host acts on:
   *   name                      the strategy's name ("Wan", "Hunyuan")
   *   mp_param_dtype, mp_reduce_dtype, mp_output_dtype
   *                             the strategy's default MixedPrecisionPolicy
   *                             (a dtype spelling tpx parses, or "none");
   *                             tpx plan uses it instead of bf16/f32/f32
   * Keys the host reports as they are (free text):
   *   tensor_parallel           e.g. "none: the strategy applies no TP"
   *   activation_checkpointing  e.g. "whole block: each blocks[i]"
   *   sequence_parallel, tp_shard_plan, validate_tp_mesh, fsdp, ... */
  int (*strategy_set)(tpx_plugin_ctx *ctx, const char *key, const char *value);

  /* ---- stored sources of a parameter (tpx_plugin_get_skeleton) ----
   * Added after strategy_set (ABI 1.0, additive): use it only when
   * host->struct_size > offsetof(tpx_plugin_host, skeleton_add_source) and
   * the pointer is not NULL. Declares that parameter `param_fqn` (already
   * added) is stored in the checkpoint, in part, as tensor `source_name`:
   * the source fills the box start[0..ndim) + len[0..ndim) of the parameter
   * (ndim = the parameter's ndim). With transpose 0 the source's shape is the
   * box's lengths without leading length-1 dims; with transpose 1 it is
   * that shape with its last two dims swapped (the box holds source^T, as
   * NeMo Automodel's grouped experts hold gate_proj.weight^T). Sources of
   * one parameter are declared in a run, must not overlap and must cover
   * the parameter whole. `tpx shard` reads a rank's slice from them and
   * `tpx merge` writes them back, byte for byte. */
  int (*skeleton_add_source)(tpx_plugin_ctx *ctx, const char *param_fqn,
                             const char *source_name, const int64_t *start,
                             const int64_t *len, int32_t ndim,
                             int32_t transpose);

  /* ---- a stored tensor cut into parameters (tpx_plugin_get_skeleton) ----
   * Added after skeleton_add_source (ABI 1.0, additive): use it only when
   * host->struct_size > offsetof(tpx_plugin_host, skeleton_add_split_source)
   * and the pointer is not NULL. Declares that checkpoint tensor
   * `source_name` is cut along `dim` (negative counts from the end) into
   * the parameters param_fqns[0..num_params) (already added; one ndim and
   * dtype, the same shape off `dim`): parameter i is the slice starting at
   * offsets[i] along `dim` (offsets NULL: one after the other, in order),
   * and the slices must tile the tensor (as transformers' Split cuts a
   * fused qkv projection into q, k and v). `tpx shard` reads each rank's
   * slice from the tensor, `tpx merge` writes it back whole. */
  int (*skeleton_add_split_source)(tpx_plugin_ctx *ctx, const char *source_name,
                                   int32_t dim, const char *const *param_fqns,
                                   const int64_t *offsets, int32_t num_params);
} tpx_plugin_host;

/* What the plugin tells the host at registration. The host zero-fills it and
 * sets struct_size; the plugin fills the rest. Pointed-to strings must stay
 * valid until register_parallel_strategy returns (static storage is fine);
 * the host copies them. */
typedef struct tpx_plugin_info {
  size_t struct_size;
  uint32_t abi_version; /* the version the plugin speaks (in range) */
  const char *name;     /* short family name, e.g. "llama" */
  const char *version;  /* the plugin's own version, e.g. "1.0.0" */
  const char *description;
  /* NULL-terminated. Bare class names ("LlamaForCausalLM") and qualified
   * names ("transformers.models.llama.modeling_llama.LlamaForCausalLM"), both
   * matched as whole strings. */
  const char *const *architectures;
  /* NULL-terminated named plans get_plan accepts in plan_name (may be NULL).
   */
  const char *const *plan_names;
  /* Added after plan_names (ABI 1.0, additive): write it only when
   * info->struct_size > offsetof(tpx_plugin_info, traits); an older host
   * passes a shorter struct and an older plugin leaves it NULL (zero-filled).
   * What the upstream strategies the plugin serves do beyond their plan, as
   * NULL-terminated "key=value" strings without spaces (may be NULL):
   *   own_flow=<architecture>
   *       the strategy for <architecture> has its own flow: it ignores
   *       tp_shard_plan (a custom or named plan is not applied; the host
   *       warns custom-plan-ignored) and never runs validate_tp_mesh.
   *   lm_head_sharded_only=arch:<class> | model_type:<type> |
   *                        name_or_path:<substring>
   *       after selection, whatever the plan's source, the plan's lm_head
   *       keys ("lm_head", "language_model.lm_head") whose output is not
   *       sharded are removed, for a model whose architecture is <class>,
   *       whose config model_type is <type>, or whose config _name_or_path
   *       holds <substring> (ASCII case-insensitive). Any loaded plugin's
   *       declaration applies, not only the one serving the model.
   *   name_alias=<class>:<alias>=<canonical>
   *       another naming of <class>'s tensors (e.g. the module names of
   *       NeMo Automodel's own class beside the checkpoint's): a tensor
   *       name whose leading dotted atoms match <alias> ('*' matches one
   *       atom) is the one whose leading atoms are <canonical> (its '*'
   *       atoms filled in order), the rest of the name kept. The host adds
   *       the serving plugin's rules to the model after its skeleton, in
   *       the order declared (the first that matches applies), reads
   *       safetensors headers through them and reports them.
   *   buffer=<class>:<pattern>
   *       checkpoint tensors of <class> whose name (through the name
   *       aliases) matches <pattern> (dotted FQN pattern, per-atom fnmatch)
   *       and that the skeleton has no parameter of are buffers of
   *       upstream's module tree (e.g. NeMo Automodel's MoE routers'
   *       e_score_correction_bias): reading safetensors headers, the host
   *       records them as buffers, never parameters, never sharded.
   *   tp_grad_sync=<architecture>
   *       upstream's strategy for <architecture>, with the plan this plugin
   *       gives for it, sums over tp the gradients that plan leaves partial
   *       on replicated parameters (NeMo Automodel 0.7.0: Qwen3's q_norm /
   *       k_norm ReplicatedWithGradAllReduce plus the recipe's tp replica
   *       sync). When the serving plugin's own plan is selected, the host
   *       reports them in one info line instead of partial-grad-replicated
   *       warnings (tpx_selection_tp_grad_sync).
   *   moe_custom=<architecture>
   *       upstream serves <architecture> with NeMo Automodel's own MoE
   *       implementation and its MoE parallelizer (expert parallelism):
   *       `ep` > 1 is accepted for it and for no other architecture, and
   *       tp > 1 is refused with upstream's messages unless this plugin
   *       gives a plan for <architecture> (at ep > 1 not one whose
   *       plan_set_function text starts "get_hf_tp_shard_plan": the class's own
   *       _tp_plan, which upstream's MoE path does not count as
   *       registered).
   *   expert_param=<architecture>:<pattern>
   *       parameters of <architecture> matching <pattern> (dotted FQN
   *       pattern, per-atom fnmatch) are routed-expert parameters, dim 0
   *       the expert dim: with ep > 1 they live on the MoE mesh
   *       (ep_shard, ep), Shard(0) over ep and Shard(1) over ep_shard, and
   *       their module is an FSDP unit of its own over ep_shard (none when
   *       ep_shard is 1); with ep 1 they stay on the main mesh.
   * The family facts, each about one model class (any loaded plugin's
   * declaration about the model's class counts; a malformed one refuses the
   * plugin at load):
   *   layers=<class>:language:<fqn>[,<fqn>...]
   *   layers=<class>:vision:<fqn>[,<fqn>...]
   *       <class>'s FSDP layer lists, candidates in order (the first
   *       module that exists wins; a module list gives its children); a
   *       class with layers gets no other guess.
   *   text_config_heads=<class>
   *       <class>'s head counts live in its config's text_config.
   *   hf_prefix=<class>:<prefix>
   *       the inner model <class>'s Hugging Face tp plan applies to
   *       (default "model").
   *   inner_model=<class>:<module>
   *       <class> wraps the real model at <module>: its layers are there.
   *   block_configs=<class>:<model_type>
   *       a <class> config of that model_type lists every layer in
   *       block_configs (heterogeneous blocks, validated per block).
   * An unknown key is ignored (newer plugin, older host). */
  const char *const *traits;
} tpx_plugin_info;

/* Required. Return TPX_PLUGIN_OK after filling info; TPX_PLUGIN_ABI_UNSUPPORTED
 * when [host->abi_min, host->abi_max] holds no version the plugin speaks. */
typedef int (*tpx_plugin_register_fn)(const tpx_plugin_host *host,
                                      tpx_plugin_info *info);
/* Required. Fill the plan for req through host->plan_add. Return
 * TPX_PLUGIN_OK, or TPX_PLUGIN_REFUSED / TPX_PLUGIN_ERROR after
 * host->set_error with a message naming the reason (e.g. "DeciLM plan needs
 * model_type nemotron-nas"). Head counts against tp are checked by the host
 * (validate_tp_mesh), not here. */
typedef int (*tpx_plugin_get_plan_fn)(const tpx_plugin_host *host,
                                      tpx_plugin_ctx *ctx,
                                      const tpx_plugin_plan_request *req);
/* Optional. Build the model skeleton for `architecture` from the config
 * through host->skeleton_*: every parameter with the name, shape and dtype the
 * published checkpoint has, and tied parameters. */
typedef int (*tpx_plugin_skeleton_fn)(const tpx_plugin_host *host,
                                      tpx_plugin_ctx *ctx,
                                      const char *architecture);
/* Optional. Extra validation; report through host->diagnose. Return
 * TPX_PLUGIN_OK unless the check itself could not run. */
typedef int (*tpx_plugin_validate_fn)(const tpx_plugin_host *host,
                                      tpx_plugin_ctx *ctx,
                                      const tpx_plugin_plan_request *req);
/* Optional. List the FSDP units through host->fsdp_add_unit. */
typedef int (*tpx_plugin_fsdp_units_fn)(const tpx_plugin_host *host,
                                        tpx_plugin_ctx *ctx,
                                        const char *architecture);
/* Optional. List fp32 parameter patterns through host->fp32_add. */
typedef int (*tpx_plugin_fp32_params_fn)(const tpx_plugin_host *host,
                                         tpx_plugin_ctx *ctx,
                                         const char *architecture);

/* Optional (added in 1.0 with host->strategy_set). Describe the upstream
 * strategy serving `architecture` through host->strategy_set. A host older
 * than strategy_set never calls it. */
typedef int (*tpx_plugin_strategy_fn)(const tpx_plugin_host *host,
                                      tpx_plugin_ctx *ctx,
                                      const char *architecture);

/* Export helper for plugin sources. */
#if defined(_WIN32)
#define TPX_PLUGIN_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define TPX_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TPX_PLUGIN_EXPORT
#endif

/* Opt-in prototypes of the entry points (ABI 1.0, additive): define
 * TPX_PLUGIN_DECLARE_ENTRY_POINTS before including this header and the
 * entry points are declared with default visibility, so a plugin built with
 * -fvisibility=hidden and -Wmissing-prototypes needs nothing else. Declaring
 * an optional entry point the plugin does not define is harmless. */
#ifdef TPX_PLUGIN_DECLARE_ENTRY_POINTS
TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info);
TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req);
TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *host,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture);
TPX_PLUGIN_EXPORT int tpx_plugin_validate(const tpx_plugin_host *host,
                                          tpx_plugin_ctx *ctx,
                                          const tpx_plugin_plan_request *req);
TPX_PLUGIN_EXPORT int tpx_plugin_fsdp_units(const tpx_plugin_host *host,
                                            tpx_plugin_ctx *ctx,
                                            const char *architecture);
TPX_PLUGIN_EXPORT int tpx_plugin_fp32_params(const tpx_plugin_host *host,
                                             tpx_plugin_ctx *ctx,
                                             const char *architecture);
TPX_PLUGIN_EXPORT int tpx_plugin_strategy(const tpx_plugin_host *host,
                                          tpx_plugin_ctx *ctx,
                                          const char *architecture);
#endif

#ifdef __cplusplus
}
#endif

#endif /* TPX_PLUGIN_H */
