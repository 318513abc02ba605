/* tpx/validate.h — config-level validation of a TP degree against a model
 * (validate_tp_mesh, docs/SEMANTICS.md "Plan selection") and the
 * head-sharding rule with the local head counts after TP.
 *
 * validate_tp_mesh: at tp == 1 nothing is checked. Otherwise the KV-head count
 * and then the attention-head count (read from text_config for VLMs; a missing
 * attention-head count is 0 and passes, a missing or 0 KV-head count is the
 * attention-head count) must be divisible by tp; a failure adds the error
 * diagnostic "heads-not-divisible" with NeMo Automodel 0.7.0's message, the
 * counts and the tp sizes that would work; a given count of 0 or less (KV:
 * below 0) is the error "heads-invalid". Plan selection runs it at tp > 1
 * for every plan, before choosing one, as upstream does. Nemotron-NAS
 * ("DeciLMForCausalLM" + model_type "nemotron-nas") is validated per block
 * config instead.
 *
 * Not plan selection (tpx/registry.h) and not application (tpx/sharding.h). */
#ifndef TPX_VALIDATE_H
#define TPX_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/model.h"
#include "tpx/plan.h"

TPX_BEGIN_DECLS

/* Validate `tp` against the model's config. Problems are added to `diags`
 * (error "heads-not-divisible" or "heads-invalid", or "nemotron-nas-invalid"
 * for a malformed Nemotron-NAS block config); the return is an error only on
 * bad arguments (NULL model / diags, tp < 1) or out of memory. */
TPX_API tpx_status tpx_validate_tp_mesh(const tpx_model *model, int64_t tp,
                                        tpx_diag_list *diags, tpx_error *err);

/* 1 when attention is head-sharded by `plan` (docs/SEMANTICS.md "Plan
 * selection"): some key ends with
 * "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj" or
 * "self_attn.qkv_proj" and its style is colwise-family (colwise) whose output
 * layouts are not given or contain a Shard. Only the plan is inspected. */
TPX_API int tpx_plan_is_head_sharded(const tpx_plan *plan);

/* Head counts after TP (docs/SEMANTICS.md "Plan selection"). `heads`/`kv_heads`
 * are the config values
 * (-1 when absent), `local_*` the per-rank values (-1 when unknown), and
 * `head_dim` the config head_dim or hidden_size // num_attention_heads
 * (-1 when neither is known). `rewritten` is 1 when torch would rewrite the
 * module head counts (tp > 1 and a non-empty head-sharded plan and the config
 * has num_attention_heads). */
typedef struct tpx_head_counts {
  size_t struct_size;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t local_heads;
  int64_t local_kv_heads;
  int rewritten;
} tpx_head_counts;

#define TPX_HEAD_COUNTS_INIT                                                   \
  { sizeof(tpx_head_counts), -1, -1, -1, -1, -1, 0 }

/* Fill *out (struct_size set by the caller via TPX_HEAD_COUNTS_INIT). `plan`
 * may be NULL (then never rewritten). Reads text_config for VLMs. */
TPX_API tpx_status tpx_head_counts_after_tp(const tpx_model *model,
                                            const tpx_plan *plan, int64_t tp,
                                            tpx_head_counts *out,
                                            tpx_error *err);

TPX_END_DECLS

#endif /* TPX_VALIDATE_H */
