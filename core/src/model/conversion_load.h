/* model/conversion_load.h — transformers' conversion applied to a
 * safetensors load (conversion_load.c), for tpx_model_add_safetensors.
 * Not public. */
#ifndef TPX_MODEL_CONVERSION_LOAD_H
#define TPX_MODEL_CONVERSION_LOAD_H

#include "model/conversion.h"
#include "model/st_header.h"

/* Before the names are read through the model's aliases: when the model
 * holds nothing yet (no skeleton) and the table has rules for the
 * config's model_type, add the alias rules that take the load's renamed
 * checkpoint names to module names, and hand back the rules in *out
 * (NULL when none apply; free with tpx__conv_free). */
tpx_status tpx__conv_load_renames(tpx_model *model, const tpx__st_load *l,
                                  tpx__conv **out, tpx_error *err);
/* conversion_alias.c: the alias rules taking the load's renamed checkpoint
 * names to module names (*renamed: how many tensors the renames touch),
 * each as general as it can be without renaming another tensor of the load
 * wrongly, most specific first. */
tpx_status tpx__conv_add_aliases(tpx_model *model, const tpx__conv *c,
                                 const tpx__st_load *l, size_t *renamed,
                                 tpx_error *err);
/* After: converters make their fused parameters (sources marked skip) and
 * buffers are recorded (marked skip); the model's conversion note set. */
tpx_status tpx__conv_load_convert(tpx_model *model, const tpx__conv *c,
                                  tpx__st_load *l, tpx_error *err);

#endif /* TPX_MODEL_CONVERSION_LOAD_H */
