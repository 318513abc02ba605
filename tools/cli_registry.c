/* cli_registry.c — what every tpx command says about the plugin search
 * itself: directories named by --dir or TPX_PLUGIN_PATH that could not be
 * searched are printed on stderr, and plugins that failed (refused while
 * loading: a crash, exit() or hang in the load probe, a wrong ABI version;
 * or failing a call) are plugin-failed diagnostics (plugin-untrusted when
 * the file or its directory is writable by others) of the report, or lines
 * on stderr for commands without one: neither passes silently. Not the
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

int cli_is_refusal_code(const char *code) {
  return strcmp(code, "plugin-failed") == 0 ||
         strcmp(code, "plugin-untrusted") == 0;
}

tpx_status cli_registry_warnings_into(const tpx_registry *reg,
                                      tpx_diag_list *diags, tpx_error *err) {
  const tpx_diag_list *dl = tpx_registry_diagnostics(reg);
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    if (tpx_diag_get(dl, i, &d, NULL) != TPX_OK || !cli_is_refusal_code(d.code))
      continue;
    tpx_status s =
        tpx_diag_add(diags, d.level, d.code, d.subject, d.fix, "%s", d.message);
    if (s != TPX_OK)
      return tpx_error_set(err, s, "out of memory");
  }
  return TPX_OK;
}

size_t cli_report_plugin_failures(const tpx_diag_list *diags, const char *cmd) {
  size_t n = 0;
  for (size_t i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    if (tpx_diag_get(diags, i, &d, NULL) != TPX_OK ||
        !cli_is_refusal_code(d.code))
      continue;
    if (d.level >= TPX_DIAG_ERROR)
      continue; /* a failed get_plan: among the plan's errors */
    fprintf(stderr, "%s: warning: %s\n", cmd, d.message);
    n++;
  }
  return n;
}
