/* fuzz_placement.c — libFuzzer target: placement text forms ("shard(-1)",
 * "replicate", "partial(avg)", "strided_shard(0,2)") through
 * tpx_placement_parse and HF style strings through
 * tpx_plan_translate_hf_style. A parsed placement must format and parse
 * back to itself. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = tpx_fuzz_cstr(data, size);
  if (text == NULL)
    return 0;
  tpx_placement p, q;
  if (tpx_placement_parse(text, &p, NULL) == TPX_OK) {
    char buf[64];
    int n = tpx_placement_format(p, buf, sizeof buf);
    if (n < 0 || (size_t)n >= sizeof buf ||
        tpx_placement_parse(buf, &q, NULL) != TPX_OK ||
        !tpx_placement_equal(p, q))
      abort(); /* format must round-trip */
  }
  tpx_style style;
  int skip = 0;
  (void)tpx_plan_translate_hf_style("model.layers.0.mlp", text, &style, &skip,
                                    NULL);
  free(text);
  return 0;
}
