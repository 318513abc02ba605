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

typedef struct tpx_model tpx_model;
/* weights_check.c: 1 when a tensor of the safetensors at `weights` is in
 * `model` with another shape (message in msg), 0 when none is, -1 when the
 * weights cannot be read. */
int cli_weights_shape_conflict(const tpx_model *model, const char *weights,
                               char *msg, size_t size);

#endif
