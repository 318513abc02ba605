/* model/family_view.h — what a family's plugin declares about one model
 * class beyond its plan (sdk/include/tpx/plugin.h, the traits `layers`,
 * `text_config_heads`, `hf_prefix`, `inner_model`, `block_configs`),
 * parsed once: where its FSDP layer lists are, where its head counts live,
 * the inner model its Hugging Face tp plan applies to, the module holding
 * the real model of a wrapper, and its per-layer block configs. The core
 * names no model class; these facts are what it reads instead.
 *
 * A model keeps the facts of its primary architecture (tpx_model_add_trait,
 * tpx_registry_describe_model); selection builds the same struct from the
 * loaded plugins when the model was given none. Not the plugin traits that
 * steer selection itself (select/traits.c). */
#ifndef TPX_MODEL_FAMILY_VIEW_H
#define TPX_MODEL_FAMILY_VIEW_H

#include <stddef.h>

#include "tpx/error.h"
#include "tpx/model.h"

#define TPX__FAMILY_MAX_CANDIDATES 8

typedef struct tpx__family {
  /* `layers`: candidate FQNs of the language and vision layer lists, in
   * order (the first that exists wins); has_layers once either is given. */
  char *language[TPX__FAMILY_MAX_CANDIDATES];
  char *vision[TPX__FAMILY_MAX_CANDIDATES];
  size_t num_language, num_vision;
  int has_layers;
  int text_config_heads; /* head counts in text_config (a VLM's) */
  char *hf_prefix;       /* the HF tp plan's inner model, or NULL */
  char *inner_model;     /* the wrapped model's module, or NULL */
  char *block_configs;   /* model_type whose layers are block_configs */
} tpx__family;

/* 1 when `trait` ("key=value") has one of the keys above. */
int tpx__family_is_trait(const char *trait);

/* Parse one family trait. When `arch` is NULL only its form is checked;
 * else it is applied to *f when its class is `arch` (bare names compared)
 * and *applied says whether it was. TPX_INVALID_ARGUMENT naming the trait
 * when its value is malformed; TPX_NOT_FOUND when it is no family trait. */
tpx_status tpx__family_add(tpx__family *f, const char *trait, const char *arch,
                           int *applied, tpx_error *err);

void tpx__family_free(tpx__family *f);

/* The facts the model was given (never NULL). */
const tpx__family *tpx__model_family(const tpx_model *model);

/* `own` when it holds any fact, else `fallback` (may be NULL). */
static inline const tpx__family *tpx__family_pick(const tpx__family *own,
                                                  const tpx__family *fallback) {
  if (own && (own->has_layers || own->text_config_heads || own->hf_prefix ||
              own->inner_model || own->block_configs))
    return own;
  return fallback ? fallback : own;
}

#endif /* TPX_MODEL_FAMILY_VIEW_H */
