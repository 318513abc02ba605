/* model/model_impl.h — the inside of tpx_model, shared by the files of the
 * model area (model.c: tree + builder + queries; config.c: config JSON;
 * safetensors.c: header import). Not for other areas: they use tpx/model.h,
 * for raw config JSON model/config.h, and for read-only per-module and
 * per-parameter loops model/model_view.h. */
#ifndef TPX_MODEL_MODEL_IMPL_H
#define TPX_MODEL_MODEL_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "model/family_view.h"
#include "model/strmap.h"
#include "tpx/layout.h"
#include "tpx/model.h"

/* Bump allocator for strings that live as long as the model. Strings never
 * move, which is what lets the FQN maps borrow them. */
typedef struct tpx__arena_chunk tpx__arena_chunk;
typedef struct tpx__arena {
  tpx__arena_chunk *head;
  size_t total; /* bytes handed out; small arenas use small chunks */
} tpx__arena;

void tpx__arena_free(tpx__arena *arena);
/* `len` bytes (not NUL-terminated), 1-byte aligned; NULL when out of memory. */
char *tpx__arena_alloc(tpx__arena *arena, size_t len);
/* A NUL-terminated copy of s[0..len). */
char *tpx__arena_strndup(tpx__arena *arena, const char *s, size_t len);

typedef struct tpx__module { /* 48 bytes: big models have ~1M modules */
  const char *fqn;           /* arena; "" for the root */
  int64_t *children;         /* insertion order; the first few in the arena (cap
                                <= 4), bigger arrays malloc'd */
  int64_t first_param;       /* newest parameter of this module, or -1 */
  uint32_t fqn_len;          /* FQNs are checked to be < 2 GiB */
  uint32_t num_children, cap_children;
  uint32_t kid_map;   /* 1 + index in tpx_model.kid_maps, or 0 */
  uint32_t param_map; /* the same for the parameter names, or 0 */
  uint8_t kind;       /* tpx_module_kind (also in tpx_model.kinds) */
} tpx__module;        /* the parent is in tpx_model.parents */

/* A module with more children than this gets a map from child name to
 * child index (tpx_model.kid_maps), and one with more parameters a map from
 * parameter name to parameter index (in the same pool); a smaller family is
 * scanned. */
#define TPX__MODEL_FANOUT 8

typedef struct tpx__param {
  const char *fqn; /* arena; "<module fqn>.<name>" */
  int64_t module;
  int64_t dims;      /* offset of the shape in tpx_model.dims */
  int64_t tied_to;   /* -1, or the parameter holding the storage (never tied) */
  uint32_t name_off; /* name = fqn + name_off */
  uint8_t ndim;
  uint8_t dtype;
  uint8_t is_tie_target; /* some parameter has tied_to == this one */
  int64_t next_param;    /* the module's previous parameter, or -1 */
} tpx__param;

struct tpx_model {
  tpx__module *modules;
  size_t num_modules, cap_modules;
  /* Copies of modules[].parent and .kind, [cap_modules] each: the passes
   * of matching and sharding that only follow parents or read kinds then
   * stream 8 or 1 bytes per module instead of a 48-byte record (a big
   * model's records do not fit in the cache). */
  int64_t *parents;
  uint8_t *kinds;
  size_t cap_parents, cap_kinds;
  tpx__param *params;
  size_t num_params, cap_params;
  int64_t *dims; /* shape pool; each parameter owns ndim entries */
  size_t num_dims, cap_dims;
  /* Per module with more than TPX__MODEL_FANOUT children (layers,
   * experts): child name -> child index, the names borrowed from the
   * children's FQNs. Other modules are found by scanning their parent's few
   * children, and parameters through their module's list. A builder adding
   * one family at a time then probes one small, cached map, where a global
   * FQN map of a million-tensor model missed the cache on every probe.
   * The pool also holds the parameter maps of modules with more than
   * TPX__MODEL_FANOUT parameters (a header of a million tensors in one
   * module made each addition scan all the others). */
  tpx__strmap *kid_maps;
  size_t num_kid_maps, cap_kid_maps;
  tpx__arena arena;
  /* Builders add in tree order: the path from the root to the last module
   * used (chain[0] = root, chain[chain_len - 1] = last_module) is where the
   * next call's module usually branches off, so lookups start there. */
  int64_t last_module;
  int64_t *chain;
  size_t chain_len, chain_cap;
  json_t *config;       /* owned; NULL until a config is set */
  char **architectures; /* malloc'd strings */
  size_t num_architectures;
  char *source; /* malloc'd; may be NULL */
  /* Name aliases (aliases.c): each rule rewrites leading atoms matching
   * `from` into `to`; strings in the arena. */
  struct tpx__name_alias {
    const char *from, *to;
  } * aliases;
  size_t num_aliases, cap_aliases;
  /* Saved tensors that are buffers of the module tree (buffers.c): never
   * parameters, never sharded; fqn and shape in the arena. */
  struct tpx__buffer {
    const char *fqn;
    const int64_t *shape;
    int ndim;
    tpx_dtype dtype;
  } * buffers;
  size_t num_buffers, cap_buffers;
  /* Patterns of checkpoint tensors kept as buffers although the skeleton
   * does not name them (buffer_rules.c); strings in the arena. */
  const char **buffer_rules;
  size_t num_buffer_rules, cap_buffer_rules;
  char *conversion_note; /* malloc'd; what the conversion did, or NULL */
  /* Where a parameter stored as several checkpoint tensors takes them
   * from (fold_sources.c): the conversion rules' fused parameters and the
   * sources a plugin's skeleton (or the builder) declares. fold_srcs holds
   * each parameter's sources in a run (tensor name in the arena, its box in
   * the parameter, stored transposed or not); fold_params, in increasing
   * param order, where each run is; fold_names, source name -> index in
   * fold_srcs of its first source (the others chained by `next`). */
  struct tpx__fold_src {
    const char *name;
    tpx_slice box;
    int transpose; /* the tensor is the box's content with its last two
                      dims swapped */
    int64_t param;
    /* the next source (another parameter's) of the same stored tensor,
     * -1: a stored tensor bigger than each of its parameters, cut into
     * them (transformers' Split), has one source per parameter, each box
     * reaching past its parameter (split_sources.c) */
    int64_t next;
  } * fold_srcs;
  size_t num_fold_srcs, cap_fold_srcs;
  struct tpx__fold_param {
    int64_t param;
    size_t first, count;
  } * fold_params;
  size_t num_fold_params, cap_fold_params;
  tpx__strmap fold_names;
  /* What the primary architecture's plugin declares (family.c). */
  tpx__family family;
  /* FP8 block-quantized weights of the checkpoint (fp8.c): each stored
   * F8 weight with its `_scale_inv`, names in the arena. */
  tpx_quantized_weight *quant;
  size_t num_quant, cap_quant;
  tpx__strmap quant_names; /* weight and scale names -> index in quant */
};

/* Checks an FQN: "" or non-empty atoms separated by single dots. `len` is
 * its strlen (no NUL inside). `what` names it in the error ("module",
 * "tensor"). */
tpx_status tpx__model_check_fqn(const char *fqn, size_t len, const char *what,
                                tpx_error *err);

/* Element count of a shape, or -1 when a dim is negative or the count (times
 * 8 bytes, the widest dtype) does not fit in int64_t. */
int64_t tpx__shape_numel(const int64_t *shape, int ndim);

/* "[2560, 10240]" into buf (always NUL-terminated, truncated with "..."). */
const char *tpx__format_shape(char *buf, size_t size, const int64_t *shape,
                              int ndim);

/* Element size, safetensors name ("BF16", "INVALID") and strict parse of a
 * safetensors dtype name (TPX_DTYPE_INVALID when unknown). */
size_t tpx__model_dtype_size(tpx_dtype dtype);
const char *tpx__model_dtype_st_name(tpx_dtype dtype);
tpx_dtype tpx__model_dtype_from_st(const char *text);

/* Replace the architecture list (strings copied). */
tpx_status tpx__model_set_architectures(tpx_model *model,
                                        const char *const *names, size_t n,
                                        tpx_error *err);
tpx_status tpx__model_set_source(tpx_model *model, const char *source,
                                 tpx_error *err);

#endif /* TPX_MODEL_MODEL_IMPL_H */
