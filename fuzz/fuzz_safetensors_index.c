/* fuzz_safetensors_index.c — libFuzzer target: a
 * model.safetensors.index.json through tpx_model_add_safetensors. Two valid
 * shards sit beside it, so indexes that name them reach the cross-checks
 * (tensor listed in the wrong shard, missing tensor, duplicates). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    tpx_fuzz_write_shard("model-00001-of-00002.safetensors", "a.weight");
    tpx_fuzz_write_shard("model-00002-of-00002.safetensors", "b.weight");
    ready = 1;
  }
  const char *path =
      tpx_fuzz_write_file("model.safetensors.index.json", data, size);
  tpx_model *model = NULL;
  if (path == NULL || tpx_model_create(&model, NULL) != TPX_OK)
    return 0;
  (void)tpx_model_add_safetensors(model, path, NULL);
  tpx_model_destroy(model);
  return 0;
}
