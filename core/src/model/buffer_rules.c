/* model/buffer_rules.c — which checkpoint tensors a model's module tree
 * keeps as buffers although its skeleton does not name them: dotted FQN
 * patterns ('*', '?', '[..]' per atom, never across a dot) a family's
 * plugin declares (trait buffer, docs/PLUGIN_ABI.md), e.g. NeMo Automodel's
 * MoE routers' e_score_correction_bias. tpx_model_add_safetensors records a
 * header tensor that is no parameter of the model and matches a rule (under
 * its canonical name) as a buffer: listed, never sharded, not counted. Not
 * transformers' own buffer tables (conversion_load.c), which apply to trees
 * built from headers alone. */
#include <fnmatch.h>
#include <string.h>

#include "base/grow.h"
#include "model/buffer_rules.h"
#include "model/model_impl.h"

tpx_status tpx_model_add_buffer_rule(tpx_model *model, const char *pattern,
                                     tpx_error *err) {
  if (model == NULL || pattern == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_buffer_rule: NULL argument");
  size_t len = strlen(pattern);
  tpx_status st = tpx__model_check_fqn(pattern, len, "buffer rule", err);
  if (st != TPX_OK)
    return st;
  if (len == 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "buffer rule: the pattern is empty");
  const char *p = tpx__arena_strndup(&model->arena, pattern, len);
  if (p == NULL || TPX_GROW(model->buffer_rules, model->cap_buffer_rules,
                            model->num_buffer_rules + 1, 4))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (buffer rule)");
  model->buffer_rules[model->num_buffer_rules++] = p;
  return TPX_OK;
}

size_t tpx_model_num_buffer_rules(const tpx_model *model) {
  return model ? model->num_buffer_rules : 0;
}

const char *tpx_model_buffer_rule(const tpx_model *model, size_t index) {
  return model && index < model->num_buffer_rules ? model->buffer_rules[index]
                                                  : NULL;
}

/* `name` matches `pattern` atom by atom (same number of atoms). */
static int match_atoms(const char *pattern, const char *name) {
  char pa[256], na[256];
  for (;;) {
    const char *pd = strchr(pattern, '.'), *nd = strchr(name, '.');
    size_t pl = pd ? (size_t)(pd - pattern) : strlen(pattern);
    size_t nl = nd ? (size_t)(nd - name) : strlen(name);
    if (pl >= sizeof pa || nl >= sizeof na || (pd == NULL) != (nd == NULL))
      return 0;
    memcpy(pa, pattern, pl);
    pa[pl] = '\0';
    memcpy(na, name, nl);
    na[nl] = '\0';
    if (fnmatch(pa, na, FNM_NOESCAPE) != 0)
      return 0;
    if (pd == NULL)
      return 1;
    pattern = pd + 1;
    name = nd + 1;
  }
}

int tpx__model_buffer_rule_matches(const tpx_model *model, const char *name) {
  for (size_t i = 0; model && name && i < model->num_buffer_rules; i++)
    if (match_atoms(model->buffer_rules[i], name))
      return 1;
  return 0;
}
