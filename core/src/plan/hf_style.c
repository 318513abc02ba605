/* hf_style.c — Hugging Face tp-plan strings to tpx styles, as NeMo
 * Automodel does it (docs/SEMANTICS.md "Plans and matching": the HF plan
 * of a model and the translation of its style strings).
 *
 * Accepted: colwise, rowwise, colwise_rep, rowwise_rep, sequence_parallel.
 * Dropped: replicated_with_grad_allreduce (translator returns None), and the
 * strings get_hf_tp_shard_plan skips before translating (ep_*, local_colwise,
 * local_rowwise, gather). Everything else is rejected, as Automodel raises.
 *
 * Not the choice of prefix per model class (the caller knows the class). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "plan/hf_style_view.h"
#include "plan/plan_internal.h"
#include "plan/style_internal.h"
#include "tpx/plan.h"

/* Strings get_hf_tp_shard_plan drops before translation (HF MoE styles that
 * leave the experts replicated). */
static int hf_skipped_early(const char *s) {
  return strncmp(s, "ep_", 3) == 0 || strcmp(s, "local_colwise") == 0 ||
         strcmp(s, "local_rowwise") == 0 || strcmp(s, "gather") == 0;
}

tpx_status tpx_plan_translate_hf_style(const char *key, const char *hf_style,
                                       tpx_style *out, int *skip,
                                       tpx_error *err) {
  if (!hf_style || !out || !skip)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_translate_hf_style: NULL argument");
  if (!key)
    key = "?";
  *skip = 0;
  if (hf_skipped_early(hf_style) ||
      strcmp(hf_style, "replicated_with_grad_allreduce") == 0) {
    *skip = 1;
    return TPX_OK;
  }
  if (strcmp(hf_style, "colwise") == 0) {
    *out = tpx_style_default(TPX_STYLE_COLWISE);
  } else if (strcmp(hf_style, "rowwise") == 0) {
    *out = tpx_style_default(TPX_STYLE_ROWWISE);
  } else if (strcmp(hf_style, "colwise_rep") == 0) {
    *out = tpx_style_default(TPX_STYLE_COLWISE);
    out->output_layouts.items[0] = tpx_placement_replicate();
  } else if (strcmp(hf_style, "rowwise_rep") == 0) {
    *out = tpx_style_default(TPX_STYLE_ROWWISE);
    out->input_layouts.items[0] = tpx_placement_replicate();
  } else if (strcmp(hf_style, "sequence_parallel") == 0) {
    *out = tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
  } else {
    return tpx_error_set(
        err, TPX_UNSUPPORTED,
        "plan key '%s': Hugging Face style '%s' has no faithful translation "
        "(Automodel accepts colwise, rowwise, colwise_rep, rowwise_rep, "
        "sequence_parallel; skips replicated_with_grad_allreduce, ep_*, "
        "local_colwise, local_rowwise, gather); provide a custom plan",
        key, hf_style);
  }
  return TPX_OK;
}

/* transformers' own strings (TPX__HF_TRANSFORMERS), as transformers 5.25's
 * tensor_parallel.py applies them: *skip for the styles that hold no
 * parameter of their own; 0 when `hf_style` is none of them. */
static int transformers_style(const char *hf_style, tpx_style *out, int *skip) {
  /* local_params: the owner's forward runs on local tensors; the
   * parameters are placed by their own entries, so this entry places
   * nothing */
  static const char *const dropped[] = {"gather", "local", "replicate",
                                        "all_reduce", "local_params"};
  for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
    if (strcmp(hf_style, dropped[i]) == 0) {
      *skip = 1;
      return 1;
    }
  if (strcmp(hf_style, "embedding_rowwise") == 0 ||
      strcmp(hf_style, "rowwise_split_input") == 0) {
    /* vocab-sharded table, masked lookup, all-reduced output: torch's
     * RowwiseParallel on an Embedding; rowwise_split_input: a replicated
     * input split locally, i.e. rowwise_rep */
    *out = tpx_style_default(TPX_STYLE_ROWWISE);
    out->input_layouts.items[0] = tpx_placement_replicate();
  } else if (strcmp(hf_style, "colwise_gather_output") == 0) {
    *out = tpx_style_default(TPX_STYLE_COLWISE);
    out->output_layouts.items[0] = tpx_placement_replicate();
  } else if (strcmp(hf_style, "embedding_colwise") == 0) {
    /* EmbeddingParallel(shard_dim=1): the table sharded on the hidden dim
     * (a colwise style on an Embedding places shard(1)), replicated ids,
     * the output's hidden slices gathered to Replicate */
    *out = tpx_style_default(TPX_STYLE_COLWISE);
    out->output_layouts.items[0] = tpx_placement_replicate();
  } else if (strcmp(hf_style, "local_colwise") == 0) {
    *out = tpx_style_default(TPX_STYLE_COLWISE); /* the same slices */
  } else if (strcmp(hf_style, "local_rowwise") == 0) {
    *out = tpx_style_default(TPX_STYLE_ROWWISE);
  } else {
    return 0;
  }
  return 1;
}

/* Why a transformers 5.25 style string has no tpx translation (what
 * transformers' tensor_parallel.py does that tpx's styles cannot say). */
static const char *why_untranslated(const char *hf_style) {
  if (strncmp(hf_style, "packed_", 7) == 0 ||
      strcmp(hf_style, "local_packed_rowwise") == 0)
    return "it places the fused gate|up weight as _StridedShard(split_factor "
           "2), each rank holding its chunk of both halves; a tpx style "
           "places only shard(d) on tp";
  if (strcmp(hf_style, "moe_tp_experts") == 0 ||
      strcmp(hf_style, "grouped_gemm") == 0 ||
      strncmp(hf_style, "megamoe_", 8) == 0 ||
      strcmp(hf_style, "moe_identity_expert") == 0)
    return "fused 3-D expert parameters and their routed forward are not "
           "planned by tpx's styles, which shard nn.Linear / nn.Embedding "
           "weights";
  if (strcmp(hf_style, "mla_kv_a_proj") == 0)
    return "it keeps the weight replicated but all-reduces the gradient of "
           "the rope slice of its output only; replicated_with_grad_allreduce "
           "would sum the whole gradient";
  if (strncmp(hf_style, "unit_", 5) == 0)
    return "it shards whole heads over a 2-D unit mesh, replicating heads "
           "when they are fewer than tp ranks; a tpx style places one "
           "shard(d) on tp";
  return "not one of transformers 5.25's styles tpx knows";
}

static tpx_status load_object(const char *text, size_t len, const char *what,
                              json_t **out, tpx_error *err) {
  json_error_t je;
  *out = NULL;
  json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!v)
    return tpx_error_set(err, TPX_PARSE,
                         "%s tp plan: invalid JSON at line %d column %d: %s",
                         what, je.line, je.column, je.text);
  if (!json_is_object(v)) {
    json_decref(v);
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s tp plan: expected a JSON object {key: style}",
                         what);
  }
  *out = v;
  return TPX_OK;
}

/* Keys "lm_head" / "language_model.lm_head" with colwise_rep keep a
 * vocab-sharded DTensor output (Automodel: "for speed"). */
static int is_lm_head_key(const char *k) {
  return strcmp(k, "lm_head") == 0 || strcmp(k, "language_model.lm_head") == 0;
}

static char *join_key(const char *prefix, const char *key) {
  size_t lp = prefix ? strlen(prefix) : 0, lk = strlen(key);
  char *s = malloc(lp + lk + 2);
  if (!s)
    return NULL;
  if (lp) {
    memcpy(s, prefix, lp);
    s[lp] = '.';
    memcpy(s + lp + 1, key, lk + 1);
  } else {
    memcpy(s, key, lk + 1);
  }
  return s;
}

static tpx_status translate_all(json_t *combined, tpx__hf_mode mode,
                                tpx_plan *plan, tpx_diag_list *diags,
                                tpx_error *err) {
  const char *k;
  json_t *v;
  json_object_foreach(combined, k, v) {
    if (!json_is_string(v))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "plan key '%s': Hugging Face style must be a "
                           "string",
                           k);
    const char *hs = json_string_value(v);
    tpx_style style;
    int skip = 0, by_transformers = 0;
    if (is_lm_head_key(k) && strcmp(hs, "colwise_rep") == 0) {
      style = tpx_style_default(TPX_STYLE_COLWISE);
      style.use_local_output = 0;
    } else if (mode == TPX__HF_TRANSFORMERS &&
               transformers_style(hs, &style, &skip)) {
      by_transformers = 1;
      if (diags && !skip)
        tpx_diag_add(diags, TPX_DIAG_INFO, "hf-style-translated", k, NULL,
                     "plan key '%s': Hugging Face style '%s' is applied as "
                     "transformers applies it (NeMo Automodel 0.7.0 cannot "
                     "translate it and would fall back to its default plan)",
                     k, hs);
    } else {
      tpx_error why = {0}; /* the first error set wins: keep it local */
      tpx_status st = tpx_plan_translate_hf_style(k, hs, &style, &skip, &why);
      if (st != TPX_OK &&
          (st != TPX_UNSUPPORTED || mode != TPX__HF_TRANSFORMERS))
        return tpx_error_set(err, st, "%s", why.message);
      if (st == TPX_UNSUPPORTED)
        return tpx_error_set(err, st,
                             "plan key '%s': transformers style '%s' has no "
                             "tpx translation (%s); provide a custom plan",
                             k, hs, why_untranslated(hs));
    }
    if (skip) {
      if (diags && by_transformers)
        tpx_diag_add(diags, TPX_DIAG_INFO, "hf-style-skipped", k, NULL,
                     "plan key '%s': transformers style '%s' is dropped: "
                     "transformers places no parameter with it",
                     k, hs);
      else if (diags)
        tpx_diag_add(diags, TPX_DIAG_INFO, "hf-style-skipped", k, NULL,
                     "plan key '%s': Hugging Face style '%s' is dropped "
                     "(the module stays replicated), as Automodel does",
                     k, hs);
      continue;
    }
    tpx_status st = tpx_plan_set(plan, k, &style, 0, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

tpx_status tpx_plan_from_hf_class_and_base(const char *top_json, size_t top_len,
                                           const char *inner_json,
                                           size_t inner_len, const char *prefix,
                                           tpx_plan **out, tpx_diag_list *diags,
                                           tpx_error *err) {
  return tpx__plan_from_hf_mode(top_json, top_len, inner_json, inner_len,
                                prefix, TPX__HF_AUTOMODEL, out, diags, err);
}

tpx_status tpx__plan_from_hf_mode(const char *top_json, size_t top_len,
                                  const char *inner_json, size_t inner_len,
                                  const char *prefix, tpx__hf_mode mode,
                                  tpx_plan **out, tpx_diag_list *diags,
                                  tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_from_hf: NULL out");
  *out = NULL;
  if (prefix && !prefix[0])
    prefix = NULL;
  json_t *top = NULL, *inner = NULL, *combined = json_object();
  tpx_plan *plan = NULL;
  char *pk = NULL;
  tpx_status st = TPX_OK;
  if (!combined)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (top_json &&
      (st = load_object(top_json, top_len, "model-class", &top, err)) != TPX_OK)
    goto done;
  if (inner_json && (st = load_object(inner_json, inner_len, "inner-model",
                                      &inner, err)) != TPX_OK)
    goto done;
  /* Later sources override earlier ones; jansson keeps an existing key's
   * position when its value is replaced, as a dict update does. */
  const char *k;
  json_t *v;
  if (top)
    json_object_foreach(top, k, v) json_object_set(combined, k, v);
  if (inner) {
    json_object_foreach(inner, k, v) {
      pk = join_key(prefix, k);
      if (!pk) {
        st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
        goto done;
      }
      json_object_set(combined, pk, v);
      free(pk);
      pk = NULL;
    }
  }
  if (json_object_size(combined) == 0) {
    st = tpx_error_set(err, TPX_NOT_FOUND,
                       "the Hugging Face tp plan is empty: set "
                       "tensor_parallel_size to 1 or provide a custom plan");
    goto done;
  }
  pk = join_key(prefix, "embed_tokens");
  if (!pk) {
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    goto done;
  }
  if (!json_object_get(combined, pk))
    json_object_set_new(combined, pk, json_string("rowwise_rep"));
  st = tpx_plan_create(&plan, err);
  if (st == TPX_OK)
    st = translate_all(combined, mode, plan, diags, err);
done:
  free(pk);
  json_decref(top);
  json_decref(inner);
  json_decref(combined);
  if (st != TPX_OK) {
    tpx_plan_destroy(plan);
    return st;
  }
  *out = plan;
  return TPX_OK;
}

tpx_status tpx_plan_from_hf(const char *hf_json, size_t len, const char *prefix,
                            tpx_plan **out, tpx_diag_list *diags,
                            tpx_error *err) {
  if (!hf_json) {
    if (out)
      *out = NULL;
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_from_hf: NULL JSON");
  }
  return tpx_plan_from_hf_class_and_base(NULL, 0, hf_json, len, prefix, out,
                                         diags, err);
}
