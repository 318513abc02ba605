/* select/hf_plan_file.c — a Hugging Face tp_plan given as a file (`tpx plan
 * --plan FILE` with a {module pattern: style string} object, as found in a
 * config's base_model_tp_plan / tp_plan or a model class's _tp_plan):
 * recognising one, and translating it for a given model with the same rules
 * as the HF step of plan selection (hf_plan.c): keys relative to the base
 * model get the prefix transformers uses for the architecture, keys that
 * start at the model's root are used as they are, and the strings are
 * translated by tpx_plan_from_hf_class_and_base. Not tpx-plan/1 files
 * (plan_json.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/file.h"
#include "model/family_view.h"
#include "select/select_internal.h"

/* The JSON of file `path` (a new reference), or NULL: with *st (may be
 * NULL) set and err filled. Read through the one file opener, so a FIFO or
 * a device is refused instead of blocking. */
static json_t *load(const char *path, tpx_status *st, tpx_error *err) {
  char *text;
  size_t len;
  tpx_status s = tpx__file_read(path, SIZE_MAX - 1, &text, &len, err);
  json_t *root = NULL;
  if (s == TPX_OK) {
    json_error_t je;
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root)
      s = tpx_error_set(err, TPX_PARSE, "%s: invalid JSON at line %d: %s", path,
                        je.line, je.text);
  }
  if (st)
    *st = s;
  return root;
}

int tpx_plan_file_is_hf(const char *path) {
  if (!path)
    return 0;
  json_t *root = load(path, NULL, NULL);
  /* Not tpx-plan/1 (which has "format" and "entries"): whether its values
   * are all style strings is for tpx_plan_load_hf to say, naming the key. */
  int yes = json_is_object(root) && json_object_size(root) > 0 &&
            !json_object_get(root, "format") &&
            !json_object_get(root, "entries");
  json_decref(root);
  return yes;
}

/* The key's first atom names a direct child of the model's root. */
static int starts_at_root(const tpx_model *model, const char *key) {
  const char *dot = strchr(key, '.');
  size_t n = dot ? (size_t)(dot - key) : strlen(key);
  char atom[256];
  if (n == 0 || n >= sizeof atom)
    return 0;
  memcpy(atom, key, n);
  atom[n] = '\0';
  return tpx_model_find_module(model, atom) > 0;
}

tpx_status tpx_plan_load_hf(const char *path, const tpx_model *model,
                            tpx_plan **out, tpx_diag_list *diags, char *summary,
                            size_t summary_size, tpx_error *err) {
  if (!path || !model || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_load_hf: NULL path, model or out");
  *out = NULL;
  if (summary && summary_size)
    summary[0] = '\0';
  tpx_status st;
  json_t *root = load(path, &st, err);
  if (!root)
    return st;
  json_t *top = json_object(), *inner = json_object();
  char *top_text = NULL, *inner_text = NULL;
  if (!top || !inner) {
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    goto done;
  }
  if (!json_is_object(root) || json_object_get(root, "format")) {
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "%s: not a Hugging Face tp_plan (expected a JSON "
                       "object {module pattern: style string} without a "
                       "\"format\" field)",
                       path);
    goto done;
  }
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    if (!json_is_string(v)) {
      st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: key '%s': a Hugging Face tp_plan maps module "
                         "patterns to style strings (colwise, rowwise, ...); "
                         "a tpx-plan/1 file has \"format\": \"tpx-plan/1\" "
                         "and \"entries\" (docs/PLAN_FORMAT.md)",
                         path, k);
      goto done;
    }
    json_object_set(starts_at_root(model, k) ? top : inner, k, v);
  }
  const char *arch = tpx_model_architecture(model, 0);
  /* The inner model the class's plugin declares (hf_prefix), else "model"
   * or the base model holding the layers (model/family_view.h). */
  char base[128];
  const char *prefix = tpx__hf_prefix_for_model(
      model, tpx__model_family(model)->hf_prefix, base, sizeof base);
  top_text = json_object_size(top) ? json_dumps(top, JSON_COMPACT) : NULL;
  inner_text = json_object_size(inner) ? json_dumps(inner, JSON_COMPACT) : NULL;
  if ((json_object_size(top) && !top_text) ||
      (json_object_size(inner) && !inner_text)) {
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    goto done;
  }
  tpx_error e2 = {0};
  st = tpx_plan_from_hf_class_and_base(
      top_text, top_text ? strlen(top_text) : 0, inner_text,
      inner_text ? strlen(inner_text) : 0, prefix, out, diags, &e2);
  if (st != TPX_OK) {
    tpx_error_set(err, st, "%s: %s", path, e2.message);
    goto done;
  }
  if (summary && summary_size)
    snprintf(summary, summary_size,
             "a Hugging Face tp_plan: %zu key(s) from the model's root used "
             "as given, %zu relative to the base model prefixed with '%s.' "
             "(as transformers does for %s), translated as Automodel does",
             json_object_size(top), json_object_size(inner), prefix,
             arch ? arch : "this model");
done:
  free(top_text);
  free(inner_text);
  json_decref(top);
  json_decref(inner);
  json_decref(root);
  return st;
}
