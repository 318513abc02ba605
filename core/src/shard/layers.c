/* layers.c — layer extraction (docs/SEMANTICS.md "FSDP2", layer groups):
 * which modules are the language and vision layers of a model, by the
 * layer lists its class's plugin declares (trait `layers`, the upstream
 * table; model/family_view.h), then model.layers / layers, then the
 * largest module list.
 *
 * Reads the module tree only. Not the FSDP unit rule (fsdp.c). */
#include <stdio.h>
#include <string.h>

#include "base/fqn.h"
#include "model/family_view.h"
#include "tpx/fsdp.h"

const char *tpx_layer_group_name(tpx_layer_group group) {
  switch (group) {
  case TPX_LAYERS_LANGUAGE: return "language";
  case TPX_LAYERS_VISION: return "vision";
  case TPX_LAYERS_UNKNOWN: return "unknown";
  default: return "invalid";
  }
}

/* A ModuleList (or digit-keyed ModuleDict): a container whose children are
 * all named by digits. */
static int is_list(const tpx_model *m, int64_t mod) {
  if (mod < 0 || tpx_model_module_kind(m, mod) != TPX_MODULE_CONTAINER)
    return 0;
  size_t n = tpx_model_module_num_children(m, mod);
  if (!n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!tpx__fqn_is_digits(tpx__fqn_last_atom(
            tpx_model_module_fqn(m, tpx_model_module_child(m, mod, i)))))
      return 0;
  return 1;
}

typedef struct {
  int64_t *modules;
  tpx_layer_group *groups;
  size_t cap, count;
} out_t;

static void emit(out_t *o, int64_t mod, tpx_layer_group g) {
  if (o->count < o->cap) {
    if (o->modules)
      o->modules[o->count] = mod;
    if (o->groups)
      o->groups[o->count] = g;
  }
  o->count++;
}

/* Expand one resolved FQN: a list gives its children, any module itself. */
static void expand(const tpx_model *m, int64_t mod, tpx_layer_group g,
                   out_t *o) {
  if (is_list(m, mod)) {
    size_t n = tpx_model_module_num_children(m, mod);
    for (size_t i = 0; i < n; i++)
      emit(o, tpx_model_module_child(m, mod, i), g);
  } else {
    emit(o, mod, g);
  }
}

static int first_resolving(const tpx_model *m, const char *prefix,
                           const char *const *cands, size_t n,
                           tpx_layer_group g, out_t *o) {
  char fqn[512];
  for (size_t i = 0; i < n && cands[i]; i++) {
    snprintf(fqn, sizeof fqn, "%s%s", prefix, cands[i]);
    int64_t mod = tpx_model_find_module(m, fqn);
    if (mod > 0) {
      expand(m, mod, g, o);
      return 1;
    }
  }
  return 0;
}

/* Depth-first, children in order; the first list with the strictly
 * largest number of children wins; lists are searched inside too. */
static void largest(const tpx_model *m, int64_t mod, int64_t *best,
                    size_t *best_n, int depth) {
  if (depth > 256)
    return;
  if (is_list(m, mod)) {
    size_t n = tpx_model_module_num_children(m, mod);
    if (n > *best_n) {
      *best = mod;
      *best_n = n;
    }
  }
  size_t nc = tpx_model_module_num_children(m, mod);
  for (size_t i = 0; i < nc; i++)
    largest(m, tpx_model_module_child(m, mod, i), best, best_n, depth + 1);
}

tpx_status tpx_model_layer_groups(const tpx_model *model, int64_t *modules,
                                  tpx_layer_group *groups, size_t cap,
                                  size_t *count, tpx_error *err) {
  if (!model || !count || (cap && !modules && !groups))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_layer_groups: NULL argument");
  out_t o = {modules, groups, cap, 0};
  const tpx__family *f = tpx__model_family(model);
  const char *arch = tpx_model_architecture(model, 0);
  const char *prefix = "";
  char inner[256];
  *count = 0;
  /* A wrapper (its plugin declares inner_model) holds the real model at a
   * module of its own: its lists are searched there, by the heuristics. */
  if (f->inner_model && tpx_model_find_module(model, f->inner_model) > 0 &&
      (size_t)snprintf(inner, sizeof inner, "%s.", f->inner_model) <
          sizeof inner) {
    prefix = inner;
  } else if (f->has_layers) {
    first_resolving(model, prefix, (const char *const *)f->language,
                    f->num_language, TPX_LAYERS_LANGUAGE, &o);
    first_resolving(model, prefix, (const char *const *)f->vision,
                    f->num_vision, TPX_LAYERS_VISION, &o);
    *count = o.count; /* Automodel warns and returns nothing when 0 */
    return TPX_OK;
  }
  static const char *const std_lists[2] = {"model.layers", "layers"};
  for (size_t i = 0; i < 2; i++)
    if (first_resolving(model, prefix, &std_lists[i], 1, TPX_LAYERS_LANGUAGE,
                        &o)) {
      *count = o.count;
      return TPX_OK;
    }
  int64_t root = *prefix ? tpx_model_find_module(model, f->inner_model) : 0;
  int64_t best = -1;
  size_t best_n = 0;
  largest(model, root, &best, &best_n, 0);
  if (best < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "unknown model type %s and no module list found in "
                         "the model structure",
                         arch && !*prefix ? arch : "(no architecture)");
  expand(model, best, TPX_LAYERS_UNKNOWN, &o);
  *count = o.count;
  return TPX_OK;
}
