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
  const char *path = tpx_fuzz_write_index(data, size);
  tpx_model *model = NULL;
  if (path == NULL || tpx_model_create(&model, NULL) != TPX_OK)
    return 0;
  (void)tpx_model_add_safetensors(model, path, NULL);
  tpx_model_destroy(model);
  return 0;
}
