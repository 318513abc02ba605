/* cmd_check_plugin.c — `tpx check-plugin PATH.so...`: run the conformance
 * harness (tpx/harness.h) on each plugin and print, per plugin, a first line
 * naming the file, one line per check, then "N passed, N failed"; exit 0 iff
 * every check of every plugin passed. The plugins run in child processes, so
 * a crashing or hanging plugin is a failed check. A path that is missing or
 * not a regular file is bad usage (exit 2), checked before anything runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tpx/harness.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx check-plugin PATH.so... [--config CONFIG.json]... "
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
          "Several plugins are checked one after the other; in text each "
          "block starts\nwith a line 'plugin: PATH'. In json one plugin "
          "prints one result object,\nseveral print an array of them.\n"
          "\n"
          "Exit status: 0 when every check passed, 1 when some failed, 2 on "
          "bad usage\n(including a PATH that is missing or not a regular "
          "file).\n");
}

/* Run the harness on one plugin and print its result; returns the number
 * of failed checks, or -1 when the harness itself could not run. */
static long check_one(const char *path, const tpx_harness_options *opts,
                      int json) {
  tpx_harness_result *res = NULL;
  tpx_error err = {0};
  if (tpx_harness_run(path, opts, &res, &err) != TPX_OK) {
    fprintf(stderr, "tpx check-plugin: %s: %s\n", path, err.message);
    return -1;
  }
  char *text = NULL;
  tpx_status s = json ? tpx_harness_to_json(res, 2, &text, &err)
                      : tpx_harness_to_text(res, &text, &err);
  if (s != TPX_OK) {
    fprintf(stderr, "tpx check-plugin: %s: %s\n", path, err.message);
    tpx_harness_result_destroy(res);
    return -1;
  }
  if (!json)
    printf("plugin: %s\n", path);
  fputs(text, stdout);
  free(text);
  long failed = (long)tpx_harness_num_failed(res);
  tpx_harness_result_destroy(res);
  return failed;
}

int tpx_cmd_check_plugin(int argc, char **argv) {
  int json = 0;
  tpx_harness_options opts = TPX_HARNESS_OPTIONS_INIT;
  const char **configs = calloc((size_t)argc + 1, sizeof *configs);
  const char **paths = calloc((size_t)argc + 1, sizeof *paths);
  if (!configs || !paths) {
    free(configs);
    free(paths);
    fprintf(stderr, "tpx check-plugin: out of memory\n");
    return 2;
  }
  size_t nconf = 0, npaths = 0;
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
        fprintf(stderr,
                "tpx check-plugin: --timeout '%s' is not a number of "
                "seconds in (0, 86400]\n",
                next);
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
    } else {
      paths[npaths++] = a;
    }
  }
  if (!npaths) {
    fprintf(stderr, "tpx check-plugin: no plugin given\n\n");
    usage(stderr);
    goto out;
  }
  /* A path that is not there is a typo, not a plugin failing its checks. */
  for (size_t i = 0; i < npaths; i++) {
    struct stat st;
    if (stat(paths[i], &st) != 0) {
      fprintf(stderr, "tpx check-plugin: %s: %s\n", paths[i], strerror(errno));
      goto out;
    }
    if (!S_ISREG(st.st_mode)) {
      fprintf(stderr, "tpx check-plugin: %s: %s\n", paths[i],
              S_ISDIR(st.st_mode) ? strerror(EISDIR) : "not a regular file");
      goto out;
    }
  }
  opts.configs = configs;
  opts.num_configs = nconf;
  long failed = 0;
  if (json && npaths > 1)
    fputs("[\n", stdout);
  for (size_t i = 0; i < npaths; i++) {
    if (!json && i)
      fputc('\n', stdout);
    long f = check_one(paths[i], &opts, json);
    if (f < 0)
      goto out;
    failed += f;
    if (json)
      fputs(npaths > 1 && i + 1 < npaths ? ",\n" : "\n", stdout);
  }
  if (json && npaths > 1)
    fputs("]\n", stdout);
  rc = failed ? 1 : 0;
out:
  free(configs);
  free(paths);
  return rc;
}
