/* model/config.h — private access to a model's config JSON, for other areas
 * of tpx (plugin host, validation, report). Public typed reads are in
 * tpx/model.h (tpx_model_config_int/float/bool/string).
 *
 * Non-finite numbers. HF configs may hold the Python-json tokens Infinity,
 * -Infinity and NaN, which jansson (strict JSON) rejects and json_real cannot
 * hold. Before parsing, a pre-pass rewrites each such bare token (outside
 * string literals) into a sentinel JSON string: a NUL byte followed by
 * "tpx:inf", "tpx:-inf" or "tpx:nan" (written "\u0000tpx:inf"; parsed with
 * JSON_ALLOW_NUL). A real config string can only collide by containing that
 * exact NUL-prefixed text. So in the raw tree a non-finite number is a
 * json_string: read numbers through tpx__config_number(), which maps the
 * sentinels back to +-inf / NaN, instead of json_number_value(). */
#ifndef TPX_MODEL_CONFIG_H
#define TPX_MODEL_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "tpx/error.h"
#include "tpx/model.h"

/* The config object, BORROWED (valid until the model is destroyed or its
 * config replaced); NULL when no config was set. */
json_t *tpx__model_config(const tpx_model *model);

/* The value at `path` under `root`, BORROWED; NULL when absent or the path is
 * malformed. Path: keys separated by dots, each optionally followed by [i]
 * array indexes: "text_config.num_attention_heads",
 * "block_configs[3].attention.n_heads_in_group", "a[0][1]". "" is root.
 * A JSON null is returned as the json null value (not NULL). */
json_t *tpx__config_lookup(json_t *root, const char *path);

/* 1 and *out set when v is a JSON number or a non-finite sentinel, else 0. */
int tpx__config_number(const json_t *v, double *out);
/* 1 and *out set when v is a JSON integer or an integral real within int64
 * (2.0 -> 2), else 0. */
int tpx__config_integer(const json_t *v, int64_t *out);
/* 1 when v is a non-finite sentinel string (i.e. a number, not a string). */
int tpx__config_is_nonfinite(const json_t *v);

/* A config value as compact JSON text (malloc'd), non-finite sentinels
 * written back as the Python tokens they came from (NaN, Infinity): what a
 * message may quote. NULL when out of memory. */
char *tpx__config_dumps(const json_t *v);

/* Parse config text (Infinity/NaN accepted) into a new reference to an
 * object; `source` names the text in errors. */
tpx_status tpx__config_parse(const char *text, size_t len, const char *source,
                             json_t **out, tpx_error *err);

#endif /* TPX_MODEL_CONFIG_H */
