/* cli.h — shared declarations of the tpx command line (tools/). One
 * subcommand per file; each returns the process exit code. */
#ifndef TPX_TOOLS_CLI_H
#define TPX_TOOLS_CLI_H

int tpx_cmd_plan(int argc, char **argv);
int tpx_cmd_plugins(int argc, char **argv);
int tpx_cmd_check_plugin(int argc, char **argv);
int tpx_cmd_shard(int argc, char **argv);
int tpx_cmd_merge(int argc, char **argv);

#endif
