/* table_version.c — the `conversion-table-older` info (issue 26): the
 * config was written by a transformers release newer than the one tpx's
 * embedded conversion rules come from
 * (tpx_model_conversion_table_version), so a rename, fused layout or buffer
 * added since is unknown to tpx. docs/CONVERSION.md says how to regenerate
 * the table. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "shard/shard_internal.h"

/* -1, 0, 1 as release a is older than, the same as, newer than b, by the
 * leading dot-separated numbers ("5.26.0.dev0" is 5.26.0: newer than
 * 5.25.0; anything after the numbers is ignored). */
static int version_cmp(const char *a, const char *b) {
  while (isdigit((unsigned char)*a) || isdigit((unsigned char)*b)) {
    char *ea, *eb;
    unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
    if (ea == a)
      x = 0;
    if (eb == b)
      y = 0;
    if (x != y)
      return x < y ? -1 : 1;
    a = (*ea == '.' && isdigit((unsigned char)ea[1])) ? ea + 1 : "";
    b = (*eb == '.' && isdigit((unsigned char)eb[1])) ? eb + 1 : "";
  }
  return 0;
}

tpx_status tpx__table_version_diags(tpx_sharding *sh, tpx_error *err) {
  const char *v = NULL;
  if (tpx_model_config_string(sh->model, "transformers_version", &v, NULL) !=
          TPX_OK &&
      tpx_model_config_string(sh->model, "text_config.transformers_version", &v,
                              NULL) != TPX_OK)
    return TPX_OK;
  const char *table = tpx_model_conversion_table_version();
  if (!isdigit((unsigned char)v[0]) || version_cmp(v, table) <= 0)
    return TPX_OK;
  char fix[256];
  snprintf(fix, sizeof fix,
           "regenerate the tables with transformers %.40s "
           "(docs/CONVERSION.md, \"Regenerating for a new transformers "
           "release\") and rebuild tpx",
           v);
  if (tpx_diag_add(sh->diags, TPX_DIAG_INFO, "conversion-table-older",
                   "transformers_version", fix,
                   "the config was written by transformers %s, newer than "
                   "the %s tpx's conversion rules come from: renames, fused "
                   "experts or buffers added since are not applied",
                   v, table) != TPX_OK)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (diagnostics)");
  return TPX_OK;
}
