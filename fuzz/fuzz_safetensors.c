/* fuzz_safetensors.c — libFuzzer target: a model.safetensors file (8-byte
 * length, JSON header, data) through tpx_model_add_safetensors, which reads
 * and checks the header against the file size, into a model holding fused
 * MoE experts (so per-expert tensors are folded onto them). Any crash, leak
 * or sanitizer report is a bug. */
#include <stdint.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = tpx_fuzz_write_file("model.safetensors", data, size);
  tpx_model *model = NULL;
  if (path == NULL || tpx_model_create(&model, NULL) != TPX_OK)
    return 0;
  (void)tpx_model_set_config(model, "{\"tie_word_embeddings\": true}", 29,
                             "config.json", NULL);
  /* transformers-5 fused experts (4 experts, I 4, H 4) and a router, so
   * per-expert names (experts.{e}.gate_proj / w1 ..., block_sparse_moe.gate)
   * go through the folding of model/expert_fold.c */
  static const int64_t gu[3] = {4, 8, 4}, dn[3] = {4, 4, 4}, rt[2] = {4, 4};
  (void)tpx_model_add_param(model, "model.layers.0.mlp.experts", "gate_up_proj",
                            gu, 3, TPX_DTYPE_BF16, NULL, NULL);
  (void)tpx_model_add_param(model, "model.layers.0.mlp.experts", "down_proj",
                            dn, 3, TPX_DTYPE_BF16, NULL, NULL);
  (void)tpx_model_add_param(model, "model.layers.0.mlp.gate", "weight", rt, 2,
                            TPX_DTYPE_BF16, NULL, NULL);
  if (tpx_model_add_safetensors(model, path, NULL) == TPX_OK)
    (void)tpx_model_total_bytes(model);
  tpx_model_destroy(model);
  return 0;
}
