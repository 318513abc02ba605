/* cmd_merge.c — `tpx merge`: the per-rank files `tpx shard` wrote
 * (tpx-shard/1) back into one Hugging Face checkpoint: model.safetensors,
 * or model-0000k-of-0000n.safetensors + model.safetensors.index.json with
 * --max-shard-size. The options and the messages; the merge itself is the
 * library's (tpx_shard_merge, core/src/checkpoint/merge.c).
 *
 * Exit status: 0 done, 1 failed (message on stderr), 2 bad arguments or an
 * --in that cannot be used: missing, no rank files, malformed or
 * inconsistent rank files (docs/tpx.1 "EXIT STATUS"). */
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
          "  -h, --help             this help\n");
}

int tpx_cmd_merge(int argc, char **argv) {
  const char *in = NULL, *outdir = NULL;
  int64_t max_shard = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      usage(stdout);
      return 0;
    } else if (val && !strcmp(arg, "--in")) {
      in = argv[++i];
    } else if (val && !strcmp(arg, "--out")) {
      outdir = argv[++i];
    } else if (val && !strcmp(arg, "--max-shard-size")) {
      if (tpx_cli_parse_bytes(argv[++i], &max_shard) != 0) {
        fprintf(stderr, "tpx merge: --max-shard-size '%s' is not a size "
                        "(e.g. 5GB, 500MiB, 1000000)\n", val);
        return 2;
      }
    } else {
      fprintf(stderr, "tpx merge: unknown or incomplete argument '%s' (see "
                      "tpx merge --help)\n", arg);
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
  signal(SIGXFSZ, SIG_IGN); /* report EFBIG instead of dying */
  tpx_cli_progress prog;
  memset(&prog, 0, sizeof prog);
  prog.what = "tpx merge";
  tpx_shard_merge_options mo = TPX_SHARD_MERGE_OPTIONS_INIT;
  mo.max_shard_size = max_shard;
  mo.progress = tpx_cli_progress_cb;
  mo.progress_user = &prog;
  tpx_error err;
  tpx_error_clear(&err);
  tpx_status st = tpx_shard_merge(in, outdir, &mo, &err);
  if (st != TPX_OK) {
    fprintf(stderr, "tpx merge: %s\n", err.message);
    /* what the rank files say (missing, unparsable, inconsistent) is a bad
     * input; an I/O failure may be the output's, so it stays 1 */
    return st == TPX_NOT_FOUND || st == TPX_PARSE || st == TPX_VALIDATION
               ? 2
               : 1;
  }
  tpx_cli_progress_update(&prog, prog.items, prog.bytes, 1);
  return 0;
}
