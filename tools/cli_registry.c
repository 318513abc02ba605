/* cli_registry.c — what every tpx command says about the plugin search
 * itself: directories named by --dir or TPX_PLUGIN_PATH that could not be
 * searched, and plugins refused while loading (plugin-failed: a crash,
 * exit() or hang in the load probe, a wrong ABI version, ...), are printed
 * on stderr, so neither passes silently. Not the plugin listing
 * (cmd_plugins.c, which lists refusals itself). */
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
    if (tpx_diag_get(dl, i, &d, NULL) != TPX_OK)
      continue;
    if (strcmp(d.code, "plugin-failed") == 0 &&
        strcmp(cmd, "tpx plugins") != 0) {
      fprintf(stderr, "%s: warning: %s\n", cmd, d.message);
      continue;
    }
    if (strcmp(d.code, "plugin-dir-unusable") != 0)
      continue;
    fprintf(stderr, "%s: warning: %s\n", cmd, d.message);
    n++;
  }
  return n;
}

tpx_status cli_registry_warnings_into(const tpx_registry *reg,
                                      tpx_diag_list *diags, tpx_error *err) {
  const tpx_diag_list *dl = tpx_registry_diagnostics(reg);
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    if (tpx_diag_get(dl, i, &d, NULL) != TPX_OK ||
        strcmp(d.code, "plugin-failed") != 0)
      continue;
    tpx_status s = tpx_diag_add(diags, d.level, d.code, d.subject, d.fix,
                                "%s", d.message);
    if (s != TPX_OK)
      return tpx_error_set(err, s, "out of memory");
  }
  return TPX_OK;
}
