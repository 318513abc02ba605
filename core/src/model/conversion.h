/* model/conversion.h — transformers' checkpoint -> module conversion rules
 * for the pinned transformers version (hf_conversion/ conversion.json and
 * buffers.json, embedded by embed_conversion.py as conversion_table.c):
 * renames, fused experts and other converters, and which saved tensors are
 * buffers. conversion.c is the rule engine; conversion_load.c applies it to a
 * safetensors load. Not public. */
#ifndef TPX_MODEL_CONVERSION_H
#define TPX_MODEL_CONVERSION_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "tpx/error.h"

/* One model type's rules as compact JSON (see embed_conversion.py). */
typedef struct tpx__conv_entry {
  const char *model_type;
  const char *json;
} tpx__conv_entry;

extern const char tpx__conv_version[]; /* "5.25.0" */
extern const tpx__conv_entry tpx__conv_entries[];
extern const size_t tpx__conv_num_entries;

/* Operations of a converter this engine knows. */
enum {
  TPX__CONV_MERGE = 1,
  TPX__CONV_CONCAT = 2,
  TPX__CONV_CHUNK = 3,
  TPX__CONV_SPLIT = 4 /* one tensor into the targets, sized from the config */
};

typedef struct tpx__conv tpx__conv;

/* The compiled rules of `model_type`: *out NULL (and TPX_OK) when the table
 * has none for it. `json` NULL: the embedded table; else that text (tests). */
tpx_status tpx__conv_open(const char *model_type, const char *json,
                          tpx__conv **out, tpx_error *err);
void tpx__conv_free(tpx__conv *c);

/* Every renaming rule, in order, each once, on `name` into buf: 1 when some
 * rule changed it, 0 when not (buf holds name), -1 when buf is too small. */
int tpx__conv_rename(const tpx__conv *c, const char *name, char *buf,
                     size_t size);

/* The converter that takes (renamed) tensor `name`: its rule index into
 * *rule, which of its sources matched into *source (the source's position
 * as the rule writes it), the expert/layer index its '*' matched (-1 when
 * the source has none) into *index, and the converted name for target
 * `target` into buf. Returns 1 on a match, 0 when no converter takes the
 * name, -1 when buf is too small. */
int tpx__conv_convert(const tpx__conv *c, const char *name, size_t target,
                      char *buf, size_t size, int *rule, int *source,
                      int64_t *index);
/* Converter `rule`: its number of targets and sources, and operation k
 * (TPX__CONV_*, 0 past the end) with its dim. */
size_t tpx__conv_num_targets(const tpx__conv *c, int rule);
size_t tpx__conv_num_sources(const tpx__conv *c, int rule);
int tpx__conv_op(const tpx__conv *c, int rule, size_t k, int *dim);

/* A Split converter's size of target `target` along its dim, from the
 * config (the table's products of config attributes, as transformers' built
 * module has it): > 0; -2 for the target that takes the rest of the source;
 * -1 when the config lacks an attribute (the split is then not applied). */
int64_t tpx__conv_split_size(const tpx__conv *c, int rule, size_t target,
                             json_t *config);

/* 1 when module-side tensor name `name` is a persistent buffer. */
int tpx__conv_is_buffer(const tpx__conv *c, const char *name);
/* Rules of this model type the engine leaves out (unknown kinds/ops). */
size_t tpx__conv_num_skipped(const tpx__conv *c);

#endif /* TPX_MODEL_CONVERSION_H */
