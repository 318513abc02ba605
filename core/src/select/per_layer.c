/* select/per_layer.c — a head count or head_dim set per layer
 * (transformers 5.25's per_layer_config: Gemma-4 text, dots3) against the
 * global reads NeMo Automodel 0.7.0 makes at tp > 1 (docs/SEMANTICS.md
 * "Per-layer attributes").
 *
 * transformers 5.25 keeps, of a config's per_layer_config, only the entries
 * that differ from the global value; an attribute some layer still sets is
 * a per-layer attribute, and reading it from the global config raises
 * AmbiguousGlobalPerLayerAttributeError unless the config sets
 * allow_global_per_layer_attribute_access. Automodel's generic flow reads,
 * at tp > 1 and in this order:
 *   validate_tp_mesh (every plan): num_attention_heads of the model's config
 *     and of its text_config, then num_attention_heads and
 *     num_key_value_heads of the attention config (the text_config when it
 *     has the heads, else the model's config);
 *   the head-count update after a head-sharded plan is applied:
 *     num_attention_heads, head_dim, num_key_value_heads of the model's
 *     config.
 * The first per-layer one of those is upstream's refusal, and tpx's: an
 * error naming the attribute. select.c calls this twice: for the reads of
 * validate_tp_mesh before the plan is chosen, and for the update's reads
 * once a head-sharded plan is chosen (only when validation passed). With the
 * access allowed upstream reads the global value and goes on; tpx plans each
 * layer with its own values and says so (an info).
 *
 * Not the head-count validation itself (validate.c), and not attribute_map
 * aliases: no config class with a per_layer_config aliases these names. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/config.h"
#include "select/select_internal.h"

/* Whether two JSON values are equal as Python compares them (16 == 16.0). */
static int py_equal(json_t *a, json_t *b) {
  if (json_is_number(a) && json_is_number(b))
    return json_number_value(a) == json_number_value(b);
  return json_equal(a, b);
}

/* The key of the first layer whose per_layer_config entry sets `attr` to a
 * value other than the global one in `cfg` (transformers drops the equal
 * ones), with that value in *val; NULL when `attr` is not per-layer. */
static const char *per_layer_key(json_t *cfg, const char *attr, json_t **val) {
  json_t *per = json_object_get(cfg, "per_layer_config");
  json_t *global = json_object_get(cfg, attr);
  const char *layer;
  json_t *lc;
  if (!json_is_object(per))
    return NULL;
  json_object_foreach(per, layer, lc) {
    json_t *v = json_is_object(lc) ? json_object_get(lc, attr) : NULL;
    if (v && !(global && py_equal(v, global))) {
      *val = v;
      return layer;
    }
  }
  return NULL;
}

typedef struct read_site {
  int cfg;          /* 0 the model's config, 1 text_config, 2 attention's */
  const char *attr; /* the attribute Automodel reads */
  int head_sharded; /* read only after a head-sharded plan is applied */
} read_site;

static const read_site sites[] = {
    {0, "num_attention_heads", 0}, {1, "num_attention_heads", 0},
    {2, "num_attention_heads", 0}, {2, "num_key_value_heads", 0},
    {0, "num_attention_heads", 1}, {0, "head_dim", 1},
    {0, "num_key_value_heads", 1},
};

static tpx_status add(tpx_diag_list *diags, int allowed, const read_site *r,
                      const char *cfg_name, const char *layer, json_t *val,
                      json_t *global, tpx_error *err) {
  char *v = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
  char *g = global ? json_dumps(global, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  const char *where = r->head_sharded
                          ? "where it updates the attention head counts "
                            "after applying a head-sharded plan"
                          : "in validate_tp_mesh, for every plan at tp > 1";
  tpx_status s;
  if (allowed)
    s = tpx_diag_add(
        diags, TPX_DIAG_INFO, "upstream-per-layer-config", r->attr,
        "nothing to fix for tpx; upstream uses the global value for every "
        "layer's head counts, which is wrong where a layer differs",
        "'%s' is a per-layer attribute (%sper_layer_config, layer %s: %s, "
        "global %s): tpx plans each layer with its own value; NeMo Automodel "
        "0.7.0 reads the global value %s (the config sets "
        "allow_global_per_layer_attribute_access)",
        r->attr, cfg_name, layer, v ? v : "?", g ? g : "unset", where);
  else
    s = tpx_diag_add(
        diags, TPX_DIAG_ERROR, "upstream-per-layer-config", r->attr,
        "use tp 1, or set \"allow_global_per_layer_attribute_access\": true "
        "in the config (upstream then reads the global value for every "
        "layer, which is wrong where a layer's head counts differ)",
        "'%s' is a per-layer attribute (%sper_layer_config, layer %s: %s, "
        "global %s): NeMo Automodel 0.7.0 reads the global value %s, and "
        "transformers 5.25 raises AmbiguousGlobalPerLayerAttributeError; "
        "tpx refuses as upstream does",
        r->attr, cfg_name, layer, v ? v : "?", g ? g : "unset", where);
  free(v);
  free(g);
  return s == TPX_OK ? TPX_OK
                     : tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
}

/* 1 when a validate_tp_mesh site already read r's attribute of the same
 * config (the update re-reads num_attention_heads): said once, there. */
static int read_in_validate(json_t *const cfgs[3], const read_site *r) {
  for (size_t i = 0; r->head_sharded && i < sizeof sites / sizeof sites[0]; i++)
    if (!sites[i].head_sharded && cfgs[sites[i].cfg] == cfgs[r->cfg] &&
        strcmp(sites[i].attr, r->attr) == 0)
      return 1;
  return 0;
}

tpx_status tpx__sel_per_layer(const tpx_model *model, int after_plan,
                              tpx_diag_list *diags, tpx_error *err) {
  json_t *root = tpx__model_config(model);
  json_t *text = json_object_get(root, "text_config");
  if (!json_is_object(text))
    text = NULL;
  json_t *cfgs[3] = {
      root, text,
      text && json_object_get(text, "num_attention_heads") ? text : root};
  const read_site *info = NULL;
  const char *info_layer = NULL;
  json_t *info_val = NULL;
  for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++) {
    const read_site *r = &sites[i];
    json_t *cfg = cfgs[r->cfg];
    json_t *val = NULL;
    if (!cfg || r->head_sharded != !!after_plan || read_in_validate(cfgs, r))
      continue;
    const char *layer = per_layer_key(cfg, r->attr, &val);
    if (!layer)
      continue;
    if (!json_is_true(
            json_object_get(cfg, "allow_global_per_layer_attribute_access")))
      return add(diags, 0, r, cfg == root ? "" : "text_config.", layer, val,
                 json_object_get(cfg, r->attr), err);
    if (!info) {
      info = r;
      info_layer = layer;
      info_val = val;
    }
  }
  if (!info)
    return TPX_OK;
  json_t *cfg = cfgs[info->cfg];
  return add(diags, 1, info, cfg == root ? "" : "text_config.", info_layer,
             info_val, json_object_get(cfg, info->attr), err);
}
