/* cmd_shard.c — `tpx shard`: cut a Hugging Face checkpoint into one
 * safetensors file per rank, rank-0000r-of-0000W.safetensors, each holding
 * that rank's local piece of every stored tensor under its global name,
 * with tpx-shard/1 metadata (docs/CHECKPOINT.md). The plan is selected
 * exactly as `tpx plan` selects it (tools/plan_setup.c); the pieces are
 * read with the per-rank checkpoint reader (only the slice's bytes) and
 * written with the checkpoint writer (temporary + fsync + rename).
 *
 * Exit status: 0 done, 1 failed (message on stderr), 2 bad arguments. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_cli.h"
#include "cli.h"
#include "plan_setup.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: tpx shard --weights SRC --tp N --out DIR [options]\n"
          "\n"
          "Write one safetensors file per rank (rank-0000r-of-0000W."
          "safetensors) holding\nthat rank's slice of every tensor of a "
          "Hugging Face checkpoint, under the\nplan `tpx plan` selects "
          "for the same options.\n"
          "\n"
          "options:\n"
          "  --weights SRC        model.safetensors, its index.json, or "
          "their directory\n"
          "  --config PATH        config.json (default: config.json beside "
          "the weights)\n"
          "  --tp N               tensor-parallel size (default 1)\n"
          "  --dp-shard N         FSDP shard size (default 1)\n"
          "  --dp-replicate N     HSDP replicate size (default 1)\n"
          "  --sp                 sequence parallelism\n"
          "  --plan PATH|NAME     a tpx-plan/1 file or a plugin's named plan\n"
          "  --rank R             write only rank R (default: every rank)\n"
          "  --no-fsdp            TP only: no dp sharding of the parameters\n"
          "  --no-isolation       call plugins in this process\n"
          "  --out DIR            output directory (created if missing)\n"
          "  -h, --help           this help\n"
          "\n"
          "Exit status: 0 done, 1 failed, 2 bad arguments.\n");
}

typedef struct {
  tpx_cli_plan_args p;
  const char *out;
  int64_t rank; /* -1: all */
  char config_buf[4096];
} shard_args;

static int parse_count(const char *opt, const char *text, int64_t min,
                       int64_t *out) {
  char *end = NULL;
  errno = 0;
  int digits = text && *text >= '0' && *text <= '9';
  long long v = digits ? strtoll(text, &end, 10) : 0;
  if (!digits || *end || errno || v < min || v > (1LL << 20)) {
    fprintf(stderr, "tpx shard: %s expects an integer >= %lld, got '%s'\n",
            opt, (long long)min, text ? text : "");
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}

/* config.json in the weights' directory (the weights may be the dir). */
static void default_config(shard_args *a) {
  struct stat sb;
  const char *w = a->p.weights;
  if (stat(w, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(a->config_buf, sizeof a->config_buf, "%s/config.json", w);
  } else {
    const char *slash = strrchr(w, '/');
    if (slash)
      snprintf(a->config_buf, sizeof a->config_buf, "%.*s/config.json",
               (int)(slash - w), w);
    else
      snprintf(a->config_buf, sizeof a->config_buf, "config.json");
  }
  a->p.config = a->config_buf;
}

static int parse_args(int argc, char **argv, shard_args *a) {
  memset(a, 0, sizeof *a);
  a->p.tp = a->p.dp_shard = a->p.dp_replicate = 1;
  a->p.fsdp = a->p.isolate = 1;
  a->rank = -1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(arg, "--sp")) {
      a->p.sp = 1;
    } else if (!strcmp(arg, "--no-fsdp")) {
      a->p.fsdp = 0;
    } else if (!strcmp(arg, "--no-isolation")) {
      a->p.isolate = 0;
    } else if (val && (!strcmp(arg, "--weights") || !strcmp(arg, "--config") ||
                       !strcmp(arg, "--plan") || !strcmp(arg, "--out"))) {
      i++;
      if (!strcmp(arg, "--weights")) a->p.weights = val;
      else if (!strcmp(arg, "--config")) a->p.config = val;
      else if (!strcmp(arg, "--plan")) a->p.plan = val;
      else a->out = val;
    } else if (val && !strcmp(arg, "--tp")) {
      if (parse_count(arg, argv[++i], 1, &a->p.tp)) return -1;
    } else if (val && !strcmp(arg, "--dp-shard")) {
      if (parse_count(arg, argv[++i], 1, &a->p.dp_shard)) return -1;
    } else if (val && !strcmp(arg, "--dp-replicate")) {
      if (parse_count(arg, argv[++i], 1, &a->p.dp_replicate)) return -1;
    } else if (val && !strcmp(arg, "--rank")) {
      if (parse_count(arg, argv[++i], 0, &a->rank)) return -1;
    } else {
      fprintf(stderr,
              "tpx shard: unknown or incomplete argument '%s' (see tpx shard "
              "--help)\n",
              arg);
      return -1;
    }
  }
  if (!a->p.weights || !a->out) {
    fprintf(stderr, "tpx shard: --weights SRC and --out DIR are required\n");
    return -1;
  }
  if (a->p.tp * a->p.dp_shard * a->p.dp_replicate > (1LL << 20)) {
    fprintf(stderr, "tpx shard: the mesh is too large\n");
    return -1;
  }
  if (a->rank >= a->p.tp * a->p.dp_shard * a->p.dp_replicate) {
    fprintf(stderr, "tpx shard: --rank %lld is outside the mesh of %lld\n",
            (long long)a->rank,
            (long long)(a->p.tp * a->p.dp_shard * a->p.dp_replicate));
    return -1;
  }
  if (!a->p.config)
    default_config(a);
  return 0;
}

/* The tpx.mesh and tpx.tensors metadata values of one rank. */
static int rank_metadata(const tpx_sharding *sh,
                         const tpx_checkpoint_reader *rd, int64_t rank,
                         const tpx_slice *slices, char **mesh_out,
                         char **tensors_out) {
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  const tpx_model *model = tpx_sharding_model(sh);
  json_t *m = json_object(), *dims = json_array(), *sizes = json_array();
  json_t *ts = json_object();
  int bad = !m || !dims || !sizes || !ts;
  for (int d = 0; d < tpx_mesh_ndim(mesh) && !bad; d++) {
    bad |= json_array_append_new(dims, json_string(tpx_mesh_dim_name(mesh, d)));
    bad |= json_array_append_new(sizes, json_integer(tpx_mesh_dim_size(mesh, d)));
  }
  if (!bad) {
    bad |= json_object_set(m, "dims", dims);
    bad |= json_object_set(m, "sizes", sizes);
  }
  size_t n = tpx_checkpoint_num_tensors(rd);
  for (size_t i = 0; i < n && !bad; i++) {
    tpx_checkpoint_tensor t;
    tpx_param_sharding ps;
    tpx_checkpoint_tensor_info(rd, i, &t, NULL);
    int64_t p = tpx_model_find_param(model, t.name);
    if (tpx_sharding_param(sh, p, &ps, NULL) != TPX_OK) {
      bad = 1;
      break;
    }
    json_t *e = json_object(), *gs = json_array(), *off = json_array(),
           *pl = json_array();
    bad |= !e || !gs || !off || !pl;
    for (int d = 0; d < t.ndim && !bad; d++) {
      bad |= json_array_append_new(gs, json_integer(t.shape[d]));
      bad |= json_array_append_new(off, json_integer(slices[i].offset[d]));
    }
    for (int d = 0; d < tpx_mesh_ndim(mesh) && !bad; d++) {
      char buf[64];
      tpx_placement_format(ps.placements[d], buf, sizeof buf);
      bad |= json_array_append_new(pl, json_string(buf));
    }
    if (!bad) {
      json_object_set_new(e, "global_shape", gs);
      json_object_set_new(e, "offsets", off);
      json_object_set_new(e, "placements", pl);
      bad |= json_object_set_new(ts, t.name, e);
    } else {
      json_decref(e);
      json_decref(gs);
      json_decref(off);
      json_decref(pl);
    }
  }
  *mesh_out = bad ? NULL : json_dumps(m, JSON_COMPACT);
  *tensors_out = bad ? NULL : json_dumps(ts, JSON_COMPACT);
  json_decref(dims);
  json_decref(sizes);
  json_decref(m);
  json_decref(ts);
  (void)rank;
  return *mesh_out && *tensors_out ? 0 : -1;
}

static int shard_rank(const tpx_sharding *sh, const tpx_checkpoint_reader *rd,
                      int64_t rank, const char *outdir,
                      tpx_cli_progress *prog, int64_t *items,
                      int64_t *bytes) {
  const tpx_model *model = tpx_sharding_model(sh);
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  size_t n = tpx_checkpoint_num_tensors(rd);
  tpx_checkpoint_entry *entries = calloc(n ? n : 1, sizeof *entries);
  tpx_slice *slices = calloc(n ? n : 1, sizeof *slices);
  char *mesh_json = NULL, *tensors_json = NULL;
  tpx_checkpoint_writer *w = NULL;
  void *buf = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  int rc = 1;
  if (!entries || !slices) {
    fprintf(stderr, "tpx shard: out of memory\n");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    tpx_checkpoint_tensor t;
    tpx_checkpoint_tensor_info(rd, i, &t, NULL);
    int64_t p = tpx_model_find_param(model, t.name);
    if (p < 0) {
      fprintf(stderr, "tpx shard: %s: tensor '%s' is not a parameter of the "
                      "model\n", t.file, t.name);
      goto out;
    }
    if (tpx_sharding_local_slice(sh, p, rank, &slices[i], &err) != TPX_OK) {
      fprintf(stderr, "tpx shard: %s\n", err.message);
      goto out;
    }
    entries[i].name = t.name;
    entries[i].dtype = t.dtype;
    entries[i].ndim = t.ndim;
    memcpy(entries[i].shape, slices[i].length, sizeof entries[i].shape);
  }
  if (rank_metadata(sh, rd, rank, slices, &mesh_json, &tensors_json) != 0) {
    fprintf(stderr, "tpx shard: out of memory building the metadata\n");
    goto out;
  }
  char fname[96], rank_text[32], world_text[32];
  snprintf(fname, sizeof fname, "rank-%05lld-of-%05lld.safetensors",
           (long long)rank, (long long)world);
  snprintf(rank_text, sizeof rank_text, "%lld", (long long)rank);
  snprintf(world_text, sizeof world_text, "%lld", (long long)world);
  const char *keys[] = {"format", "tpx.mesh", "tpx.rank", "tpx.world_size",
                        "tpx.tensors"};
  const char *vals[] = {TPX_SHARD_FORMAT, mesh_json, rank_text, world_text,
                        tensors_json};
  tpx_checkpoint_writer_options wo = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  wo.file_name = fname;
  wo.num_metadata = 5;
  wo.metadata_keys = keys;
  wo.metadata_values = vals;
  if (tpx_checkpoint_writer_create(outdir, entries, n, &wo, &w, &err) !=
      TPX_OK) {
    fprintf(stderr, "tpx shard: %s\n", err.message);
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    tpx_checkpoint_tensor t;
    tpx_checkpoint_tensor_info(rd, i, &t, NULL);
    size_t nb = (size_t)tpx_slice_nbytes(&slices[i], t.dtype);
    void *nbuf = realloc(buf, nb ? nb : 1);
    if (nbuf == NULL) {
      fprintf(stderr, "tpx shard: out of memory for tensor '%s'\n", t.name);
      goto out;
    }
    buf = nbuf;
    tpx_slice local = slices[i];
    memset(local.offset, 0, sizeof local.offset);
    if (tpx_checkpoint_read_slice(rd, (int64_t)i, &slices[i], t.dtype, buf,
                                  nb, &err) != TPX_OK ||
        tpx_checkpoint_write_slice(w, t.name, &local, t.dtype, buf, &err) !=
            TPX_OK) {
      fprintf(stderr, "tpx shard: %s\n", err.message);
      goto out;
    }
    *items += 1;
    *bytes += (int64_t)nb;
    tpx_cli_progress_update(prog, *items, *bytes, 0);
  }
  if (tpx_checkpoint_writer_finish(w, NULL, &err) != TPX_OK) {
    fprintf(stderr, "tpx shard: %s\n", err.message);
    goto out;
  }
  rc = 0;
out:
  tpx_checkpoint_writer_destroy(w);
  free(buf);
  free(mesh_json);
  free(tensors_json);
  free(entries);
  free(slices);
  return rc;
}

int tpx_cmd_shard(int argc, char **argv) {
  shard_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc == 1) return 0;
  if (rc < 0) return 2;
  /* Over a file-size limit, report EFBIG instead of dying of SIGXFSZ. */
  signal(SIGXFSZ, SIG_IGN);
  tpx_cli_planned pl;
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  int code = 1;
  if (tpx_cli_plan_build("shard", &a.p, &pl) != 0)
    goto out;
  /* `tpx plan` falls back to the headers alone when the config's skeleton
   * disagrees with them; a shard of such a checkpoint would not fit the
   * model the config describes, so here it is an error. */
  for (size_t i = 0; i < tpx_diag_count(pl.diags); i++) {
    tpx_diag d;
    if (tpx_diag_get(pl.diags, i, &d, NULL) == TPX_OK &&
        strcmp(d.code, "skeleton-fallback") == 0) {
      fprintf(stderr, "tpx shard: %s: the checkpoint does not match %s: %s\n",
              a.p.weights, a.p.config, d.message);
      goto out;
    }
  }
  if (tpx_checkpoint_reader_create(a.p.weights, NULL, &rd, &err) != TPX_OK ||
      tpx_checkpoint_check_model(rd, pl.model, &err) != TPX_OK) {
    fprintf(stderr, "tpx shard: %s\n", err.message);
    goto out;
  }
  for (size_t i = 0; i < tpx_model_num_params(pl.model); i++) {
    if (tpx_checkpoint_param_tensor(rd, pl.model, (int64_t)i) >= 0)
      continue;
    tpx_param_info info;
    tpx_model_param(pl.model, (int64_t)i, &info, NULL);
    fprintf(stderr,
            "tpx shard: %s: parameter '%s' is stored as %lld per-expert "
            "tensors (or renamed); the per-rank reader reads it, but tpx "
            "shard does not write such checkpoints yet\n",
            a.p.weights, info.fqn,
            (long long)tpx_checkpoint_param_num_sources(rd, pl.model,
                                                        (int64_t)i));
    goto out;
  }
  if (mkdir(a.out, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "tpx shard: %s: cannot create the directory: %s\n", a.out,
            strerror(errno));
    goto out;
  }
  int64_t world = tpx_mesh_world_size(pl.mesh);
  int64_t first = a.rank >= 0 ? a.rank : 0;
  int64_t last = a.rank >= 0 ? a.rank : world - 1;
  int64_t total_bytes = 0, total_items = 0, items = 0, bytes = 0;
  for (int64_t r = first; r <= last; r++) {
    total_bytes += tpx_sharding_rank_param_bytes(pl.sh, r);
    total_items += (int64_t)tpx_checkpoint_num_tensors(rd);
  }
  tpx_cli_progress prog;
  tpx_cli_progress_start(&prog, "tpx shard", total_items, total_bytes);
  for (int64_t r = first; r <= last; r++)
    if (shard_rank(pl.sh, rd, r, a.out, &prog, &items, &bytes) != 0)
      goto out;
  tpx_cli_progress_update(&prog, items, bytes, 1);
  code = 0;
out:
  tpx_checkpoint_reader_destroy(rd);
  tpx_cli_planned_free(&pl);
  return code;
}
