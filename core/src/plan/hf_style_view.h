/* plan/hf_style_view.h — the Hugging Face plan translation with a choice of
 * whose rules translate the style strings (docs/SEMANTICS.md "Plans and
 * matching"), for plan selection (core/src/select).
 *
 * Not the public tpx_plan_from_hf* calls (tpx/plan.h), which are the
 * Automodel mode of this one. */
#ifndef TPX_PLAN_HF_STYLE_VIEW_H
#define TPX_PLAN_HF_STYLE_VIEW_H

#include <stddef.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/plan.h"

typedef enum tpx__hf_mode {
  /* as NeMo Automodel 0.7.0's translate_to_torch_parallel_style: colwise,
   * rowwise, colwise_rep, rowwise_rep, sequence_parallel; anything else
   * transformers writes is refused (TPX_UNSUPPORTED) */
  TPX__HF_AUTOMODEL = 0,
  /* besides those, transformers' own styles: embedding_rowwise,
   * embedding_colwise, colwise_gather_output, rowwise_split_input,
   * local_colwise, local_rowwise; gather, local, replicate, all_reduce and
   * local_params place no parameters of their own and are dropped
   * (`tpx plan --plan hf`); packed_*, MoE, unit_* and mla_kv_a_proj are
   * refused, the reason named */
  TPX__HF_TRANSFORMERS = 1,
} tpx__hf_mode;

/* tpx_plan_from_hf_class_and_base with the style strings translated by
 * `mode`'s rules. */
tpx_status tpx__plan_from_hf_mode(const char *top_json, size_t top_len,
                                  const char *inner_json, size_t inner_len,
                                  const char *prefix, tpx__hf_mode mode,
                                  tpx_plan **out, tpx_diag_list *diags,
                                  tpx_error *err);

#endif /* TPX_PLAN_HF_STYLE_VIEW_H */
