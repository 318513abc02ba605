/* fuzz_config.c — libFuzzer target: HF config.json text (with the
 * Infinity/NaN pre-pass) through tpx_model_set_config, then the reads the
 * planner does on a config. Any crash, leak or sanitizer report is a bug. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tpx_model *model = NULL;
  if (tpx_model_create(&model, NULL) != TPX_OK)
    return 0;
  if (tpx_model_set_config(model, (const char *)data, size, "fuzz.json",
                           NULL) == TPX_OK) {
    static const char *keys[] = {"num_attention_heads",
                                 "num_key_value_heads",
                                 "hidden_size",
                                 "text_config.num_attention_heads",
                                 "tie_word_embeddings",
                                 "rope_theta",
                                 "block_configs[2].attention.no_op"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
      int64_t iv;
      double dv;
      int bv;
      const char *sv;
      (void)tpx_model_config_int(model, keys[i], &iv, NULL);
      (void)tpx_model_config_float(model, keys[i], &dv, NULL);
      (void)tpx_model_config_bool(model, keys[i], &bv, NULL);
      (void)tpx_model_config_string(model, keys[i], &sv, NULL);
    }
    size_t count = 0;
    (void)tpx_model_layer_groups(model, NULL, NULL, 0, &count, NULL);
  }
  tpx_model_destroy(model);
  return 0;
}
