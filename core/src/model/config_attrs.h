/* model/config_attrs.h — transformers' config attribute aliases
 * (attribute_map): a config class reads attribute `attribute` from the key
 * `stored`, which is what to_dict writes (Qwen3MoeConfig: num_experts ->
 * num_local_experts). The table is generated from transformers
 * (tools/upstream/config_attrs.py, config_attr_table.c); config.c applies it
 * when a config is set, so a reader finds a key under either name, in a
 * config written by the current transformers or by an older one.
 *
 * Private to core/src/model. */
#ifndef TPX_MODEL_CONFIG_ATTRS_H
#define TPX_MODEL_CONFIG_ATTRS_H

#include <stddef.h>

#include <jansson.h>

typedef struct tpx__config_attr {
  const char *model_type;
  const char *attribute; /* what code reads: "num_experts" */
  const char *stored;    /* what the config holds: "num_local_experts" */
} tpx__config_attr;

extern const tpx__config_attr tpx__config_attrs[];
extern const size_t tpx__num_config_attrs;
/* The transformers version the table was generated from ("5.25.0"). */
extern const char tpx__config_attr_version[];

/* For `root` and each of its object members with a "model_type" (a
 * text_config, ...): where one name of an alias of that model_type is
 * present and the other is not, the other is added with the same value.
 * Nothing is overwritten. Returns the number of keys added, or -1 when out
 * of memory (the config is then partly filled, still valid). */
int tpx__config_apply_attrs(json_t *root);

#endif /* TPX_MODEL_CONFIG_ATTRS_H */
