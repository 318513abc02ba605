/* cli.h — shared declarations of the tpx command line (tools/). One
 * subcommand per file; each returns the process exit code. */
#ifndef TPX_TOOLS_CLI_H
#define TPX_TOOLS_CLI_H

/* `prog`: argv[0] of the tpx command, for the commands it suggests. */
int tpx_cmd_plan(const char *prog, int argc, char **argv);
int tpx_cmd_plugins(int argc, char **argv);
int tpx_cmd_check_plugin(int argc, char **argv);
int tpx_cmd_shard(int argc, char **argv);
int tpx_cmd_merge(int argc, char **argv);

/* cli_output.c: flush standard output; 1 after printing "CMD: cannot
 * write output to standard output: REASON" on stderr when anything printed
 * did not reach it (then cleared, so it is said once), else 0.
 * write_errno: the errno of a write the caller saw fail (0: none seen). */
int cli_output_failed(const char *cmd, int write_errno);

#include <stddef.h>
typedef struct tpx_registry tpx_registry;
/* cli_registry.c: print each plugin-dir-unusable warning of `reg` on stderr
 * prefixed with `cmd`; returns how many there were. */
size_t cli_report_unusable_dirs(const tpx_registry *reg, const char *cmd);
#include "tpx/diag.h"
/* cli_registry.c: 1 when `code` is one the registry gives a plugin file it
 * refused (plugin-failed, plugin-untrusted), else 0. */
int cli_is_refusal_code(const char *code);
/* cli_registry.c: copy the registry's plugin-failed and plugin-untrusted
 * warnings (plugins refused while loading) into `diags` (the report's), so
 * `tpx plan` names them in text and JSON. */
tpx_status cli_registry_warnings_into(const tpx_registry *reg,
                                      tpx_diag_list *diags, tpx_error *err);
/* cli_registry.c: for a command without a report (tpx shard), print each
 * plugin-failed / plugin-untrusted warning of `diags` on stderr (a failed
 * get_plan is an error, listed with the plan's errors); returns how many. */
size_t cli_report_plugin_failures(const tpx_diag_list *diags, const char *cmd);

typedef struct tpx_model tpx_model;
/* weights_check.c: 1 when a tensor of the safetensors at `weights` is in
 * `model` with another shape (message in msg), 0 when none is, -1 when the
 * weights cannot be read. */
int cli_weights_shape_conflict(const tpx_model *model, const char *weights,
                               char *msg, size_t size);

#include "tpx/diag.h"
#include "tpx/plan.h"
/* plan_file.c: read a --plan FILE, tpx-plan/1 or a Hugging Face tp_plan
 * (translated for `model`); `trace` (may be NULL) receives a line saying
 * how a Hugging Face plan was read, else "". */
tpx_status cli_load_plan_file(const char *path, const tpx_model *model,
                              tpx_diag_list *diags, tpx_plan **out, char *trace,
                              size_t trace_size, tpx_error *err);

#endif
