/* fuzz_hf_plan.c — libFuzzer target: a Hugging Face tp_plan dict ({key: style
 * string}) through tpx_plan_from_hf, which translates every string
 * (docs/SEMANTICS.md "Plans and matching"). The first input byte picks the
 * prefix. */
#include <stdint.h>

#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  static const char *prefixes[] = {"model", "", "model.language_model", NULL};
  const char *prefix = prefixes[data[0] % 4];
  tpx_diag_list *diags = NULL;
  if (tpx_diag_list_create(&diags, NULL) != TPX_OK)
    return 0;
  tpx_plan *plan = NULL;
  if (tpx_plan_from_hf((const char *)data + 1, size - 1, prefix, &plan, diags,
                       NULL) == TPX_OK)
    (void)tpx_plan_size(plan);
  tpx_plan_destroy(plan);
  tpx_diag_list_destroy(diags);
  return 0;
}
