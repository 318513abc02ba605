/* config_attrs.c — transformers' config attribute aliases applied to a
 * config.json (model/config_attrs.h; docs/SEMANTICS.md "Config keys").
 * transformers 5.25 writes Qwen3-MoE's expert count as num_local_experts
 * (its attribute_map sends num_experts there), older releases wrote
 * num_experts: both names then hold the value, as transformers' config
 * object answers both.
 *
 * Not the table (config_attr_table.c, generated) nor the parsing
 * (config.c). */
#include <string.h>

#include "model/config_attrs.h"

/* The first alias row of `model_type` (the table is sorted by it), or
 * tpx__num_config_attrs. A binary search: the table has ~500 rows. */
static size_t first_row(const char *model_type) {
  size_t lo = 0, hi = tpx__num_config_attrs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(tpx__config_attrs[mid].model_type, model_type) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int apply_one(json_t *obj) {
  json_t *mt = json_object_get(obj, "model_type");
  if (!json_is_string(mt))
    return 0;
  const char *type = json_string_value(mt);
  int added = 0;
  for (size_t i = first_row(type);
       i < tpx__num_config_attrs &&
       strcmp(tpx__config_attrs[i].model_type, type) == 0;
       i++) {
    const tpx__config_attr *a = &tpx__config_attrs[i];
    json_t *attr = json_object_get(obj, a->attribute);
    json_t *stored = json_object_get(obj, a->stored);
    if ((attr == NULL) == (stored == NULL))
      continue; /* both present, or neither */
    const char *missing = attr ? a->stored : a->attribute;
    if (json_object_set(obj, missing, attr ? attr : stored) != 0)
      return -1;
    added++;
  }
  return added;
}

int tpx__config_apply_attrs(json_t *root) {
  if (!json_is_object(root))
    return 0;
  int added = apply_one(root);
  if (added < 0)
    return -1;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (!json_is_object(v) || !json_object_get(v, "model_type"))
      continue;
    int n = apply_one(v);
    if (n < 0)
      return -1;
    added += n;
  }
  return added;
}
