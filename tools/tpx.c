/* tpx.c — the `tpx` command line: global options and subcommand dispatch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpx/tpx.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx [--version] [--help] <command> [<args>]\n"
          "\n"
          "Decide and check tensor-parallel and FSDP sharding for transformer "
          "models.\n"
          "\n"
          "commands:\n"
          "  plan          choose a TP plan for a model, apply it on a mesh, "
          "report\n"
          "                placements, per-rank memory and diagnostics\n"
          "  plugins       list the model-family plugins found, and those "
          "refused\n"
          "  check-plugin  run the conformance harness on a plugin .so\n"
          "  shard         write each rank's slices of a safetensors "
          "checkpoint\n"
          "  merge         merge `tpx shard` rank files into a Hugging Face "
          "checkpoint\n"
          "\n"
          "Run 'tpx <command> --help' for a command's options.\n");
}

/* TPX_DEBUG=warn|info|trace (or 1, debug, ...: tpx/log.h): the library's
 * log on stderr (the library itself never prints; its log goes to the
 * handler the program sets, which also hears once of a value that names no
 * level). */
static void log_to_stderr(void *user, int level, const char *message) {
  (void)user;
  fprintf(stderr, "tpx: %s: %s\n", tpx_log_level_name(level), message);
}

/* The subcommands: the name typed, the name messages give, the handler
 * (which returns the exit code; run_self also gets argv[0], for commands
 * that print command lines to paste). */
static const struct command {
  const char *name, *prog;
  int (*run)(int argc, char **argv);
  int (*run_self)(const char *self, int argc, char **argv);
} commands[] = {
    {"plan", "tpx plan", NULL, tpx_cmd_plan},
    {"plugins", "tpx plugins", tpx_cmd_plugins, NULL},
    {"check-plugin", "tpx check-plugin", tpx_cmd_check_plugin, NULL},
    {"shard", "tpx shard", tpx_cmd_shard, NULL},
    {"merge", "tpx merge", tpx_cmd_merge, NULL},
};

static int dispatch(int argc, char **argv, const char **prog) {
  *prog = "tpx";
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    printf("tpx %s\n", tpx_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (strcmp(cmd, commands[i].name) == 0) {
      *prog = commands[i].prog;
      if (commands[i].run_self) /* wants the path the user ran */
        return commands[i].run_self(argv[0], argc - 1, argv + 1);
      return commands[i].run(argc - 1, argv + 1);
    }
  fprintf(stderr, "tpx: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}

int main(int argc, char **argv) {
  const char *debug = getenv("TPX_DEBUG");
  if (debug && debug[0])
    tpx_log_set_handler(log_to_stderr, NULL);
  const char *prog;
  int code = dispatch(argc, argv, &prog);
  /* every command: output that did not reach stdout is a failure (exit 1,
   * docs/tpx.1), whatever the command thought of its result */
  if (cli_output_failed(prog, 0) && code == 0)
    code = 1;
  return code;
}
