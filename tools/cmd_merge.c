/* cmd_merge.c — `tpx merge`: the per-rank files `tpx shard` wrote
 * (tpx-shard/1) back into one Hugging Face checkpoint: model.safetensors,
 * or model-0000k-of-0000n.safetensors + model.safetensors.index.json with
 * --max-shard-size. The options and the messages; the merge itself is the
 * library's (tpx_shard_merge, core/src/checkpoint/merge.c).
 *
 * Exit status: 0 done, 1 failed (message on stderr), 2 bad arguments or an
 * --in that cannot be used: missing, no rank files, malformed or
 * inconsistent rank files (docs/tpx.1 "EXIT STATUS"). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_cli.h"
#include "cli.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx merge --in DIR --out DIR [--max-shard-size SIZE]\n"
          "\n"
          "Merge the rank-0000r-of-0000W.safetensors files of `tpx shard` "
          "into a Hugging\nFace checkpoint (tensor data byte-identical to "
          "the original).\n"
          "\n"
          "options:\n"
          "  --in DIR               directory of the rank files\n"
          "  --out DIR              output directory (created if missing)\n"
          "  --max-shard-size SIZE  split into model-0000k-of-0000n files of "
          "at most SIZE\n"
          "                         bytes each (5GB = 5*10^9, 500MiB = "
          "500*2^20) + index\n"
          "  --force                replace an older checkpoint in --out "
          "(its files the\n"
          "                         merge does not rewrite are removed once "
          "the new ones\n"
          "                         are complete); without it, one is an "
          "error\n"
          "  -h, --help             this help\n");
}

typedef struct merge_run {
  const char *in, *out;
  tpx_shard_merge_options mo;
  tpx_error err;
} merge_run;

static int run_merge(void *ctx) {
  merge_run *r = ctx;
  return tpx_shard_merge(r->in, r->out, &r->mo, &r->err) == TPX_OK ? 0 : -1;
}

/* After a SIGBUS: the rank file of `dir` that shrank. */
static void report_shrunk(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char path[4096];
  int named = 0;
  while (d && !named && (de = readdir(d)) != NULL) {
    if (!tpx_shard_is_file_name(de->d_name))
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    tpx_checkpoint_reader *rd = NULL;
    if (tpx_checkpoint_reader_create(path, NULL, &rd, NULL) != TPX_OK) {
      tpx_cli_report_sigbus("tpx merge", path);
      named = 1;
    }
    tpx_checkpoint_reader_destroy(rd);
  }
  if (d)
    closedir(d);
  if (!named)
    tpx_cli_report_sigbus("tpx merge", dir);
}

int tpx_cmd_merge(int argc, char **argv) {
  const char *in = NULL, *outdir = NULL;
  int64_t max_shard = 0;
  int force = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(arg, "--force")) {
      force = 1;
    } else if (val && !strcmp(arg, "--in")) {
      in = argv[++i];
    } else if (val && !strcmp(arg, "--out")) {
      outdir = argv[++i];
    } else if (val && !strcmp(arg, "--max-shard-size")) {
      if (tpx_cli_parse_bytes(argv[++i], &max_shard) != 0) {
        fprintf(stderr,
                "tpx merge: --max-shard-size '%s' is not a size "
                "(e.g. 5GB, 500MiB, 1000000)\n",
                val);
        return 2;
      }
    } else {
      fprintf(stderr,
              "tpx merge: unknown or incomplete argument '%s' (see "
              "tpx merge --help)\n",
              arg);
      return 2;
    }
  }
  if (!in || !outdir) {
    fprintf(stderr, "tpx merge: --in DIR and --out DIR are required\n");
    return 2;
  }
  struct stat sb;
  if (stat(in, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "tpx merge: %s: cannot open the directory: %s\n", in,
            stat(in, &sb) != 0 ? strerror(errno) : "not a directory");
    return 2;
  }
  if (tpx_cli_check_out_dir("tpx merge", outdir) != 0)
    return 2;
  signal(SIGXFSZ, SIG_IGN); /* report EFBIG instead of dying */
  tpx_cli_progress prog;
  memset(&prog, 0, sizeof prog);
  prog.what = "tpx merge";
  merge_run run = {in, outdir, TPX_SHARD_MERGE_OPTIONS_INIT, {TPX_OK, ""}};
  run.mo.max_shard_size = max_shard;
  run.mo.progress = tpx_cli_progress_cb;
  run.mo.progress_user = &prog;
  run.mo.replace = force;
  run.mo.note = tpx_cli_note_cb;
  run.mo.note_user = "tpx merge";
  int rc = tpx_cli_guard_sigbus(run_merge, &run);
  if (rc == -2) {
    report_shrunk(in);
    return 1;
  }
  if (rc != 0) {
    fprintf(stderr, "tpx merge: %s\n", run.err.message);
    /* what the rank files say (missing, not regular files, unparsable,
     * inconsistent) is a bad input; an I/O failure may be the output's, so
     * it stays 1 */
    return run.err.status == TPX_NOT_FOUND || run.err.status == TPX_PARSE ||
                   run.err.status == TPX_VALIDATION ||
                   run.err.status == TPX_INVALID_ARGUMENT
               ? 2
               : 1;
  }
  tpx_cli_progress_update(&prog, prog.items, prog.bytes, 1);
  tpx_cli_summary("tpx merge", prog.files, prog.bytes, outdir);
  return 0;
}
