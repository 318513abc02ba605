/* cli_registry.c — what every tpx command says about the plugin search
 * itself: directories named by --dir or TPX_PLUGIN_PATH that could not be
 * searched are printed on stderr, so a typo never passes silently. Not the
 * plugin listing (cmd_plugins.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tpx/diag.h"
#include "tpx/registry.h"

size_t cli_report_unusable_dirs(const tpx_registry *reg, const char *cmd) {
  const tpx_diag_list *dl = tpx_registry_diagnostics(reg);
  size_t n = 0;
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    if (tpx_diag_get(dl, i, &d, NULL) != TPX_OK ||
        strcmp(d.code, "plugin-dir-unusable") != 0)
      continue;
    fprintf(stderr, "%s: warning: %s\n", cmd, d.message);
    n++;
  }
  return n;
}
