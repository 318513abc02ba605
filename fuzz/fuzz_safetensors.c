/* fuzz_safetensors.c — libFuzzer target: a model.safetensors file (8-byte
 * length, JSON header, data) through tpx_model_add_safetensors, which reads
 * and checks the header against the file size. Any crash, leak or sanitizer
 * report is a bug. */
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
  if (tpx_model_add_safetensors(model, path, NULL) == TPX_OK)
    (void)tpx_model_total_bytes(model);
  tpx_model_destroy(model);
  return 0;
}
