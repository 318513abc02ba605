/* fuzz_plan_json.c — libFuzzer target: tpx-plan/1 JSON through
 * tpx_plan_from_json. An accepted plan must survive its own round trip:
 * tpx_plan_to_json's output parses again to the same normalized text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tpx_plan *plan = NULL;
  if (tpx_plan_from_json((const char *)data, size, "fuzz.json", &plan, NULL) !=
      TPX_OK)
    return 0;
  char *text = NULL, *again = NULL;
  tpx_plan *plan2 = NULL;
  if (tpx_plan_to_json(plan, 0, &text, NULL) != TPX_OK)
    abort(); /* an accepted plan must serialize */
  if (tpx_plan_from_json(text, strlen(text), "roundtrip", &plan2, NULL) !=
          TPX_OK ||
      tpx_plan_to_json(plan2, 0, &again, NULL) != TPX_OK ||
      strcmp(text, again) != 0)
    abort(); /* normalized output must parse back to itself */
  free(text);
  free(again);
  tpx_plan_destroy(plan2);
  tpx_plan_destroy(plan);
  return 0;
}
