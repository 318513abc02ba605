/* select/hf_plan.c — the Hugging Face tp plan of a model (docs/SEMANTICS.md
 * "Plan selection"), the fourth step of plan selection: the config's own
 * base_model_tp_plan / tp_plan when it carries one, else the bundled table
 * of transformers' base_model_tp_plan for its model_type, else the bundled
 * _tp_plan of the model class itself (Diffusers classes); the inner-model
 * plan is prefixed by the class's inner-model path and the class-level
 * _tp_plan of *ForCausalLM / *ForConditionalGeneration ({"lm_head":
 * "colwise_rep"}) is added, as transformers defines it.
 *
 * The translation of style strings is tpx_plan_from_hf_class_and_base
 * (plan area). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/config.h"
#include "select/select_internal.h"

/* The module the class's HF tp plan is prefixed with: the inner model its
 * plugin declares (hf_prefix), else "model"; where the tree has no "model"
 * module, the base model that holds the layer list (gpt_neox.layers,
 * transformer.h), as Automodel finds it (docs/SEMANTICS.md "Plan
 * selection"). A found name is written to buf. */
const char *tpx__hf_prefix_for_model(const tpx_model *model,
                                     const char *declared, char *buf,
                                     size_t size) {
  const char *p = declared ? declared : "model";
  if (strcmp(p, "model") != 0 || !model ||
      tpx_model_find_module(model, "model") >= 0)
    return p;
  for (size_t i = 0; i < tpx_model_num_modules(model); i++) {
    const char *fqn = tpx_model_module_fqn(model, (int64_t)i);
    const char *dot = fqn ? strchr(fqn, '.') : NULL;
    if (!dot || dot == fqn || (size_t)(dot - fqn) >= size ||
        (strcmp(dot, ".layers") != 0 && strcmp(dot, ".h") != 0))
      continue;
    memcpy(buf, fqn, (size_t)(dot - fqn));
    buf[dot - fqn] = '\0';
    return buf;
  }
  return p;
}

/* model_type -> the config class whose hand-kept base_model_tp_plan
 * (hf_tp_plans/) is bundled. */
static const struct {
  const char *model_type;
  const char *config_class;
} bundled[] = {
    {"llama", "LlamaConfig"},
    {"qwen2", "Qwen2Config"},
    {"qwen3", "Qwen3Config"},
    {"gemma3_text", "Gemma3TextConfig"},
    {"gemma3", "Gemma3TextConfig"},
    {"phi", "PhiConfig"},
    {"phi3", "Phi3Config"},
    {"mistral", "MistralConfig"},
    {"mixtral", "MixtralConfig"},
    {"qwen3_moe", "Qwen3MoeConfig"},
    {"qwen3_5_moe", "Qwen3_5MoeTextConfig"},
    {"qwen3_5_moe_text", "Qwen3_5MoeTextConfig"},
    {"deepseek_v4", "DeepseekV4Config"},
};

/* The hand-kept map first (its tables predate the generated ones and keep
 * their results), then transformers 5.25's own (tp_plans.json). */
static const char *bundled_class(const char *model_type) {
  for (size_t i = 0; model_type && i < sizeof bundled / sizeof bundled[0]; i++)
    if (strcmp(bundled[i].model_type, model_type) == 0)
      return bundled[i].config_class;
  return tpx__hf_model_type_class(model_type);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *config_string(json_t *root, const char *path) {
  json_t *v = root ? tpx__config_lookup(root, path) : NULL;
  return v && json_is_string(v) ? json_string_value(v) : NULL;
}

static json_t *config_object(json_t *root, const char *path) {
  json_t *v = root ? tpx__config_lookup(root, path) : NULL;
  return v && json_is_object(v) && json_object_size(v) ? v : NULL;
}

/* The model class's own _tp_plan when one is bundled (Diffusers classes,
 * "<Class>._tp_plan"): its keys start at the model's root. The
 * `<prefix>.embed_tokens: rowwise_rep` the HF step adds matches nothing in
 * a model without that module, which torch's parallelize_module only warns
 * about, so it is optional there. */
static tpx_status class_plan(const tpx_model *model, const char *bare,
                             const char *prefix, const char *mt,
                             tpx__hf_mode mode, tpx_plan **out, char *what,
                             size_t what_size, tpx_diag_list *diags,
                             tpx_error *err) {
  char name[256];
  snprintf(name, sizeof name, "%s._tp_plan", bare);
  const tpx__hf_table *t = tpx__hf_table_find(name);
  if (!t) {
    return tpx_error_set(
        err, TPX_NOT_FOUND,
        "the config has no base_model_tp_plan or tp_plan, model_type '%s' "
        "has no bundled Hugging Face plan and class '%s' no bundled _tp_plan "
        "(%zu tables bundled: every base_model_tp_plan of transformers 5.25 "
        "and the Diffusers classes' _tp_plan; docs/MODEL_TYPES.md)",
        mt ? mt : "(none)", bare[0] ? bare : "(none)", tpx__num_hf_tables);
  }
  tpx_status s = tpx__plan_from_hf_mode(t->json, strlen(t->json), NULL, 0,
                                        prefix, mode, out, diags, err);
  if (s != TPX_OK) {
    snprintf(what, what_size, "the bundled %s", t->config_class);
    return s;
  }
  char key[256];
  snprintf(key, sizeof key, "%s.embed_tokens", prefix);
  int64_t i = tpx_plan_find(*out, key);
  if (i >= 0 && tpx_model_find_module(model, key) < 0) {
    tpx_plan_entry e;
    s = tpx_plan_get(*out, (size_t)i, &e, err);
    if (s == TPX_OK)
      s = tpx_plan_set(*out, key, &e.style, 1, err);
    if (s != TPX_OK) {
      tpx_plan_destroy(*out);
      *out = NULL;
      return s;
    }
  }
  snprintf(what, what_size,
           "the bundled %s (the model class's own plan, "
           "keys from the root)",
           t->config_class);
  return TPX_OK;
}

/* transformers 5.x (distributed/mixin.py, init_parallel_plans): a base
 * model whose plan is non-empty and whose embed_tokens is an nn.Embedding
 * gets {"embed_tokens": "embedding_rowwise", **plan} when it is built, so
 * the key comes first and a plan that names embed_tokens keeps its own
 * style. The inner plan as transformers 5.25 holds it, as new JSON text in
 * *out (NULL when nothing is added). */
static tpx_status with_embedding_rowwise(const tpx_model *model,
                                         const char *prefix, const char *inner,
                                         char **out, tpx_error *err) {
  *out = NULL;
  char key[256];
  snprintf(key, sizeof key, "%s.embed_tokens", prefix);
  int64_t mod = tpx_model_find_module(model, key);
  if (!inner || mod < 0 ||
      tpx_model_module_kind(model, mod) != TPX_MODULE_EMBEDDING)
    return TPX_OK;
  json_t *plan = json_loads(inner, JSON_REJECT_DUPLICATES, NULL);
  if (!plan || !json_is_object(plan) || json_object_size(plan) == 0 ||
      json_object_get(plan, "embed_tokens")) {
    json_decref(plan);
    return TPX_OK; /* a bad plan is reported by the translation */
  }
  json_t *merged = json_object();
  if (!merged ||
      json_object_set_new(merged, "embed_tokens",
                          json_string("embedding_rowwise")) != 0 ||
      json_object_update(merged, plan) != 0 ||
      !(*out = tpx__config_dumps(merged))) {
    json_decref(merged);
    json_decref(plan);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  json_decref(merged);
  json_decref(plan);
  return TPX_OK;
}

/* The class-level _tp_plan transformers 5.25 gives its *ForCausalLM /
 * *ForConditionalGeneration classes: colwise_gather_output, except the
 * Inkling ones (rowwise_split_input). */
static const char *head_plan_for(json_t *root) {
  const char *mt = config_string(root, "model_type");
  if (!mt)
    mt = config_string(root, "text_config.model_type");
  return mt && strncmp(mt, "inkling", 7) == 0
             ? "{\"lm_head\":\"rowwise_split_input\"}"
             : "{\"lm_head\":\"colwise_gather_output\"}";
}

tpx_status tpx__hf_plan_for_model(const tpx_model *model, const char *arch,
                                  const char *prefix, tpx__hf_mode mode,
                                  tpx_plan **out, char *what, size_t what_size,
                                  tpx_diag_list *diags, tpx_error *err) {
  *out = NULL;
  snprintf(what, what_size, "none");
  json_t *root = tpx__model_config(model);
  const char *bare =
      arch ? (strrchr(arch, '.') ? strrchr(arch, '.') + 1 : arch) : "";
  int has_head = ends_with(bare, "ForCausalLM") ||
                 ends_with(bare, "ForConditionalGeneration");

  json_t *own_inner = config_object(root, "base_model_tp_plan");
  if (!own_inner)
    own_inner = config_object(root, "text_config.base_model_tp_plan");
  json_t *own_top = config_object(root, "tp_plan");

  char *inner_text = NULL, *top_text = NULL;
  const char *inner_json = NULL;
  if (own_inner || own_top) {
    if (own_inner && !(inner_text = tpx__config_dumps(own_inner)))
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    if (own_top && !(top_text = tpx__config_dumps(own_top))) {
      free(inner_text);
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    }
    inner_json = inner_text;
    snprintf(what, what_size, "the config's own %s%s%s",
             own_inner ? "base_model_tp_plan" : "",
             own_inner && own_top ? " and " : "", own_top ? "tp_plan" : "");
  } else {
    const char *mt = config_string(root, "model_type");
    const char *cls = bundled_class(mt);
    if (!cls) {
      const char *tmt = config_string(root, "text_config.model_type");
      if ((cls = bundled_class(tmt)))
        mt = tmt;
    }
    const tpx__hf_table *t = tpx__hf_table_find(cls);
    if (!t)
      return class_plan(model, bare, prefix, mt, mode, out, what, what_size,
                        diags, err);
    inner_json = t->json;
    snprintf(what, what_size,
             "the bundled %s.base_model_tp_plan (model_type "
             "'%s')",
             t->config_class, mt ? mt : "(none)");
  }
  /* The class-level plan of the model with a head, as transformers 5.25
   * has it; a config tp_plan replaces it. */
  const char *head_plan = head_plan_for(root);
  const char *top_json = top_text ? top_text : has_head ? head_plan : NULL;
  const int added_head = !top_text && has_head;
  char *embedded = NULL;
  tpx_status s =
      with_embedding_rowwise(model, prefix, inner_json, &embedded, err);
  if (s == TPX_OK && embedded)
    inner_json = embedded;
  if (s == TPX_OK)
    s = tpx__plan_from_hf_mode(top_json, top_json ? strlen(top_json) : 0,
                               inner_json, inner_json ? strlen(inner_json) : 0,
                               prefix, mode, out, diags, err);
  free(embedded);
  free(inner_text);
  free(top_text);
  size_t n = strlen(what);
  snprintf(
      what + n, what_size - n, ", prefix '%s'%s%s%s", prefix,
      added_head ? ", with the class plan " : "", added_head ? head_plan : "",
      embedded ? ", with transformers 5's embed_tokens embedding_rowwise" : "");
  return s;
}
