/* cmd_check_plugin.c — `tpx check-plugin PATH.so`: run the conformance
 * harness (tpx/harness.h) on one plugin and print one line per check, then
 * "N passed, N failed"; exit 0 iff every check passed. The plugin runs in
 * child processes, so a crashing or hanging plugin is a failed check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpx/harness.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx check-plugin PATH.so [--config CONFIG.json]... "
          "[--format text|json]\n"
          "                        [--timeout SEC] [--threads N] [--help]\n"
          "\n"
          "Check that a model-family plugin conforms to the tpx plugin ABI. "
          "The plugin\nruns in child processes: a crash, abort, exit() or "
          "hang is a failed check.\n"
          "\n"
          "Checks: exports; load; registration fields; ABI negotiation with "
          "a host too\nnew and too old; then for every architecture served "
          "(synthetic config) or\nevery --config: the skeleton, and for "
          "sp in {0,1} x tp in {1,2,4,8} that\nget_plan succeeds or refuses "
          "with a message, is deterministic, uses valid\nstyles and layouts, "
          "has no duplicate keys, matches the skeleton's modules,\nkeeps tied "
          "weights consistent (a tp the head counts do not divide is\nnoted: "
          "the host's validate_tp_mesh reports it); concurrent get_plan "
          "calls;\nthe optional capabilities.\n"
          "\n"
          "options:\n"
          "  --config PATH   check against this HF config.json (repeatable)\n"
          "  --format FMT    text (default) or json\n"
          "  --timeout SEC   per child process (default 10)\n"
          "  --threads N     threads for the concurrency check (default 4)\n"
          "  -h, --help      show this help\n"
          "\n"
          "Exit status: 0 when every check passed, 1 when some failed, 2 on "
          "bad usage.\n");
}

int tpx_cmd_check_plugin(int argc, char **argv) {
  const char *path = NULL;
  int json = 0;
  tpx_harness_options opts = TPX_HARNESS_OPTIONS_INIT;
  const char **configs = calloc((size_t)argc + 1, sizeof *configs);
  if (!configs) {
    fprintf(stderr, "tpx check-plugin: out of memory\n");
    return 2;
  }
  size_t nconf = 0;
  int rc = 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      rc = 0;
      goto out;
    } else if (strcmp(a, "--config") == 0 && next) {
      configs[nconf++] = next;
      i++;
    } else if (strcmp(a, "--format") == 0 && next) {
      if (strcmp(next, "json") == 0) {
        json = 1;
      } else if (strcmp(next, "text") == 0) {
        json = 0;
      } else {
        fprintf(stderr, "tpx check-plugin: unknown format '%s' (text, json)\n",
                next);
        goto out;
      }
      i++;
    } else if (strcmp(a, "--timeout") == 0 && next) {
      char *end = NULL;
      double t = strtod(next, &end);
      if (!end || *end || !(t > 0) || t > 86400) {
        fprintf(stderr, "tpx check-plugin: --timeout '%s' is not a number of "
                "seconds in (0, 86400]\n", next);
        goto out;
      }
      opts.timeout_sec = t;
      i++;
    } else if (strcmp(a, "--threads") == 0 && next) {
      char *end = NULL;
      long n = strtol(next, &end, 10);
      if (!end || *end || n < 1 || n > 64) {
        fprintf(stderr, "tpx check-plugin: --threads '%s' is not in 1..64\n",
                next);
        goto out;
      }
      opts.threads = (int)n;
      i++;
    } else if (a[0] == '-') {
      fprintf(stderr, "tpx check-plugin: unknown or incomplete option '%s'\n\n",
              a);
      usage(stderr);
      goto out;
    } else if (!path) {
      path = a;
    } else {
      fprintf(stderr, "tpx check-plugin: only one plugin per run ('%s' and "
              "'%s')\n", path, a);
      goto out;
    }
  }
  if (!path) {
    fprintf(stderr, "tpx check-plugin: no plugin given\n\n");
    usage(stderr);
    goto out;
  }
  opts.configs = configs;
  opts.num_configs = nconf;
  tpx_harness_result *res = NULL;
  tpx_error err = {0};
  if (tpx_harness_run(path, &opts, &res, &err) != TPX_OK) {
    fprintf(stderr, "tpx check-plugin: %s\n", err.message);
    goto out;
  }
  char *text = NULL;
  tpx_status s = json ? tpx_harness_to_json(res, 2, &text, &err)
                      : tpx_harness_to_text(res, &text, &err);
  if (s != TPX_OK) {
    fprintf(stderr, "tpx check-plugin: %s\n", err.message);
    tpx_harness_result_destroy(res);
    goto out;
  }
  fputs(text, stdout);
  if (json)
    fputc('\n', stdout);
  free(text);
  rc = tpx_harness_num_failed(res) ? 1 : 0;
  tpx_harness_result_destroy(res);
out:
  free(configs);
  return rc;
}
