/* model/buffer_rules.h — does a tensor name match one of the model's buffer
 * rules (buffer_rules.c)? For the safetensors loader. Not public. */
#ifndef TPX_MODEL_BUFFER_RULES_H
#define TPX_MODEL_BUFFER_RULES_H

#include "tpx/model.h"

/* 1 when `name` matches a rule added with tpx_model_add_buffer_rule. */
int tpx__model_buffer_rule_matches(const tpx_model *model, const char *name);

#endif /* TPX_MODEL_BUFFER_RULES_H */
