/* cli.h — shared declarations of the tpx command line (tools/). One
 * subcommand per file; each returns the process exit code. */
#ifndef TPX_TOOLS_CLI_H
#define TPX_TOOLS_CLI_H

int tpx_cmd_plan(int argc, char **argv);
int tpx_cmd_plugins(int argc, char **argv);
int tpx_cmd_check_plugin(int argc, char **argv);

#include <stddef.h>
typedef struct tpx_registry tpx_registry;
/* cli_registry.c: print each plugin-dir-unusable warning of `reg` on stderr
 * prefixed with `cmd`; returns how many there were. */
size_t cli_report_unusable_dirs(const tpx_registry *reg, const char *cmd);

#endif
