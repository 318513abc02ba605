/* select/default_plan.c — the default base plan, the last resort of plan
 * selection (docs/SEMANTICS.md "Plan selection"): embedding vocab-parallel,
 * attention and MLP projections colwise/rowwise, lm_head colwise with a
 * replicated output; with sequence parallelism the norms become
 * sequence_parallel and the rowwise outputs sequence-sharded.
 *
 * Not the HF plan (hf_plan.c) and not selection (select.c). */
#include <string.h>

#include "plan/style_view.h"
#include "select/select_internal.h"

static tpx_style col(void) { return tpx_style_default(TPX_STYLE_COLWISE); }
static tpx_style row(void) { return tpx_style_default(TPX_STYLE_ROWWISE); }

tpx_status tpx__default_base_plan(int sequence_parallel, tpx_plan **out,
                                  tpx_error *err) {
  *out = NULL;
  tpx_plan *plan = NULL;
  tpx_status s = tpx_plan_create(&plan, err);
  if (s != TPX_OK)
    return s;
  const tpx_placement R = tpx_placement_replicate();

  tpx_style embed = tpx_style_default(TPX_STYLE_VOCAB_PARALLEL_EMBEDDING);
  embed.input_layouts = tpx__layout_one(R);
  tpx_style head = col();
  head.output_layouts = tpx__layout_one(R);

  /* sp0, in upstream insertion order. */
  /* The fused qkv_proj / gate_up_proj keys exist only in some variants
   * (Phi-3-style checkpoints), so they are optional: a model with separate
   * projections does not get an unmatched-key warning from the last resort
   * (torch itself only warns that such a key could not be resolved). */
  struct {
    const char *key;
    tpx_style style;
    int optional;
  } base[] = {
      {"model.embed_tokens", embed, 0},
      {"model.layers.*.self_attn.q_proj", col(), 0},
      {"model.layers.*.self_attn.k_proj", col(), 0},
      {"model.layers.*.self_attn.v_proj", col(), 0},
      {"model.layers.*.self_attn.qkv_proj", col(), 1},
      {"model.layers.*.self_attn.o_proj", row(), 0},
      {"model.layers.*.mlp.gate_up_proj", col(), 1},
      {"model.layers.*.mlp.up_proj", col(), 0},
      {"model.layers.*.mlp.gate_proj", col(), 0},
      {"model.layers.*.mlp.down_proj", row(), 0},
      {"lm_head", head, 0},
  };
  for (size_t i = 0; i < sizeof base / sizeof base[0] && s == TPX_OK; i++)
    s = tpx_plan_set(plan, base[i].key, &base[i].style, base[i].optional, err);

  if (s == TPX_OK && sequence_parallel) {
    tpx_style sp_embed = embed;
    sp_embed.output_layouts = tpx__layout_one(tpx_placement_shard(1));
    sp_embed.use_local_output = 0;
    tpx_style sp_row = row();
    sp_row.output_layouts = tpx__layout_one(tpx_placement_shard(1));
    sp_row.use_local_output = 0;
    tpx_style sp_head = head;
    sp_head.input_layouts = tpx__layout_one(tpx_placement_shard(1));
    tpx_style sp = tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
    struct {
      const char *key;
      tpx_style style;
    } over[] = {
        {"model.embed_tokens", sp_embed},
        {"model.layers.*.self_attn.o_proj", sp_row},
        {"model.layers.*.mlp.down_proj", sp_row},
        {"lm_head", sp_head},
        {"model.norm", sp},
        {"model.layers.*.input_layernorm", sp},
        {"model.layers.*.post_attention_layernorm", sp},
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0] && s == TPX_OK; i++)
      s = tpx_plan_set(plan, over[i].key, &over[i].style, 0, err);
  }
  if (s != TPX_OK) {
    tpx_plan_destroy(plan);
    return s;
  }
  *out = plan;
  return TPX_OK;
}
