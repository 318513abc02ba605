/* cmd_shard.c — `tpx shard`: cut a Hugging Face checkpoint into one
 * safetensors file per rank, rank-0000r-of-0000W.safetensors, each holding
 * that rank's local piece of every stored tensor under its global name
 * (fused MoE expert parameters stored per expert: the fused parameter's
 * piece, with the per-expert names in its "fold" metadata, so that
 * `tpx merge` writes the original tensors back), with tpx-shard/1 metadata
 * (docs/CHECKPOINT.md). The plan is selected
 * exactly as `tpx plan` selects it (tools/plan_setup.c); the pieces are
 * read with the per-rank checkpoint reader (only the slice's bytes) and
 * written with the checkpoint writer (temporary + fsync + rename).
 *
 * Exit status: 0 done, 1 failed (message on stderr), 2 bad arguments or an
 * input that cannot be used (docs/tpx.1 "EXIT STATUS"). */
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
          "Exit status: 0 done, 1 failed, 2 bad arguments or an input that "
          "cannot be used.\n");
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

/* One tensor of a rank file: a stored tensor cut to the rank's slice, or a
 * fused expert parameter (tensor -1) read from its per-expert tensors. */
typedef struct out_tensor {
  const char *name;
  tpx_dtype dtype;
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS]; /* global */
  int64_t tensor, param;
  tpx_slice slice;
} out_tensor;

static json_t *int_array(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int d = 0; a && d < n; d++)
    if (json_array_append_new(a, json_integer(v[d])) != 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

/* The "fold" list of fused parameter `param`: its stored tensors in order,
 * each with its offsets in the parameter and its own shape. */
static json_t *fold_json(const tpx_checkpoint_reader *rd,
                         const tpx_model *model, int64_t param) {
  json_t *fold = json_array();
  int64_t n = tpx_checkpoint_param_num_sources(rd, model, param);
  for (int64_t k = 0; fold && k < n; k++) {
    tpx_checkpoint_source src;
    tpx_checkpoint_tensor t;
    json_t *e = NULL;
    if (tpx_checkpoint_param_source(rd, model, param, k, &src, NULL) ==
            TPX_OK &&
        tpx_checkpoint_tensor_info(rd, (size_t)src.tensor, &t, NULL) ==
            TPX_OK)
      e = json_pack("{s:s, s:o*, s:o*}", "name", t.name, "offsets",
                    int_array(src.box.offset, src.box.ndim), "shape",
                    int_array(t.shape, t.ndim));
    if (e == NULL || json_array_append_new(fold, e) != 0) {
      json_decref(fold);
      fold = NULL;
    }
  }
  return fold;
}

/* The tpx.mesh and tpx.tensors metadata values of one rank. */
static int rank_metadata(const tpx_sharding *sh,
                         const tpx_checkpoint_reader *rd,
                         const out_tensor *ts_in, size_t n, char **mesh_out,
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
  for (size_t i = 0; i < n && !bad; i++) {
    const out_tensor *t = &ts_in[i];
    tpx_param_sharding ps;
    if (tpx_sharding_param(sh, t->param, &ps, NULL) != TPX_OK) {
      bad = 1;
      break;
    }
    json_t *e = json_object(), *gs = json_array(), *off = json_array(),
           *pl = json_array();
    bad |= !e || !gs || !off || !pl;
    for (int d = 0; d < t->ndim && !bad; d++) {
      bad |= json_array_append_new(gs, json_integer(t->shape[d]));
      bad |= json_array_append_new(off, json_integer(t->slice.offset[d]));
    }
    for (int d = 0; d < tpx_mesh_ndim(mesh) && !bad; d++) {
      char buf[64];
      tpx_placement_format(ps.placements[d], buf, sizeof buf);
      bad |= json_array_append_new(pl, json_string(buf));
    }
    json_t *fold = t->tensor < 0 && !bad ? fold_json(rd, model, t->param)
                                         : NULL;
    bad |= t->tensor < 0 && fold == NULL;
    if (!bad) {
      json_object_set_new(e, "global_shape", gs);
      json_object_set_new(e, "offsets", off);
      json_object_set_new(e, "placements", pl);
      if (fold)
        json_object_set_new(e, "fold", fold);
      bad |= json_object_set_new(ts, t->name, e);
    } else {
      json_decref(e);
      json_decref(gs);
      json_decref(off);
      json_decref(pl);
      json_decref(fold);
    }
  }
  *mesh_out = bad ? NULL : json_dumps(m, JSON_COMPACT);
  *tensors_out = bad ? NULL : json_dumps(ts, JSON_COMPACT);
  json_decref(dims);
  json_decref(sizes);
  json_decref(m);
  json_decref(ts);
  return *mesh_out && *tensors_out ? 0 : -1;
}

/* The rank file's tensors: every stored tensor that is a parameter, then
 * every fused expert parameter stored per expert (its per-expert tensors
 * are not written on their own). */
static int list_tensors(const tpx_sharding *sh,
                        const tpx_checkpoint_reader *rd, int64_t rank,
                        out_tensor *out, size_t *count) {
  const tpx_model *model = tpx_sharding_model(sh);
  size_t nt = tpx_checkpoint_num_tensors(rd), np = tpx_model_num_params(model);
  size_t k = 0;
  tpx_error err;
  tpx_error_clear(&err);
  char *is_source = calloc(nt ? nt : 1, 1);
  if (is_source == NULL) {
    fprintf(stderr, "tpx shard: out of memory\n");
    return -1;
  }
  int rc = -1;
  for (size_t p = 0; p < np; p++) {
    if (tpx_checkpoint_param_tensor(rd, model, (int64_t)p) >= 0)
      continue;
    tpx_param_info info;
    int64_t ns = tpx_checkpoint_param_num_sources(rd, model, (int64_t)p);
    if (tpx_model_param(model, (int64_t)p, &info, &err) != TPX_OK)
      goto fail;
    for (int64_t s = 0; s < ns; s++) {
      tpx_checkpoint_source src;
      if (tpx_checkpoint_param_source(rd, model, (int64_t)p, s, &src, &err) !=
          TPX_OK)
        goto fail;
      is_source[src.tensor] = 1;
    }
    out[nt + k] = (out_tensor){info.fqn, info.dtype, info.ndim, {0}, -1,
                               (int64_t)p, {0}};
    memcpy(out[nt + k].shape, info.shape, sizeof out[nt + k].shape);
    k++;
  }
  size_t n = 0;
  for (size_t i = 0; i < nt; i++) {
    tpx_checkpoint_tensor t;
    tpx_checkpoint_tensor_info(rd, i, &t, NULL);
    if (is_source[i])
      continue;
    int64_t p = tpx_model_find_param(model, t.name);
    if (p < 0) {
      fprintf(stderr, "tpx shard: %s: tensor '%s' is not a parameter of the "
                      "model\n", t.file, t.name);
      goto out;
    }
    out[n] = (out_tensor){t.name, t.dtype, t.ndim, {0}, (int64_t)i, p, {0}};
    memcpy(out[n].shape, t.shape, sizeof out[n].shape);
    n++;
  }
  memmove(out + n, out + nt, k * sizeof *out);
  n += k;
  for (size_t i = 0; i < n; i++)
    if (tpx_sharding_local_slice(sh, out[i].param, rank, &out[i].slice,
                                 &err) != TPX_OK)
      goto fail;
  *count = n;
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "tpx shard: %s\n", err.message);
out:
  free(is_source);
  return rc;
}

static int shard_rank(const tpx_sharding *sh, const tpx_checkpoint_reader *rd,
                      int64_t rank, const char *outdir,
                      tpx_cli_progress *prog, int64_t *items,
                      int64_t *bytes) {
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  size_t cap = tpx_checkpoint_num_tensors(rd) +
               tpx_model_num_params(tpx_sharding_model(sh)),
         n = 0;
  out_tensor *ts = calloc(cap ? cap : 1, sizeof *ts);
  tpx_checkpoint_entry *entries = calloc(cap ? cap : 1, sizeof *entries);
  char *mesh_json = NULL, *tensors_json = NULL;
  tpx_checkpoint_writer *w = NULL;
  void *buf = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  int rc = 1;
  if (!entries || !ts) {
    fprintf(stderr, "tpx shard: out of memory\n");
    goto out;
  }
  if (list_tensors(sh, rd, rank, ts, &n) != 0)
    goto out;
  for (size_t i = 0; i < n; i++) {
    entries[i].name = ts[i].name;
    entries[i].dtype = ts[i].dtype;
    entries[i].ndim = ts[i].ndim;
    memcpy(entries[i].shape, ts[i].slice.length, sizeof entries[i].shape);
  }
  if (rank_metadata(sh, rd, ts, n, &mesh_json, &tensors_json) != 0) {
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
    const out_tensor *t = &ts[i];
    size_t nb = (size_t)tpx_slice_nbytes(&t->slice, t->dtype);
    void *nbuf = realloc(buf, nb ? nb : 1);
    if (nbuf == NULL) {
      fprintf(stderr, "tpx shard: out of memory for tensor '%s'\n", t->name);
      goto out;
    }
    buf = nbuf;
    tpx_slice local = t->slice;
    memset(local.offset, 0, sizeof local.offset);
    tpx_status st =
        t->tensor >= 0
            ? tpx_checkpoint_read_slice(rd, t->tensor, &t->slice, t->dtype,
                                        buf, nb, &err)
            : tpx_checkpoint_read_param(rd, sh, t->param, rank, t->dtype, buf,
                                        nb, &err);
    if (st != TPX_OK ||
        tpx_checkpoint_write_slice(w, t->name, &local, t->dtype, buf, &err) !=
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
  free(ts);
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
  int code = tpx_cli_plan_build("shard", &a.p, &pl); /* 2: bad input */
  if (code != 0)
    goto out;
  code = 1;
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
  if (mkdir(a.out, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "tpx shard: %s: cannot create the directory: %s\n", a.out,
            strerror(errno));
    goto out;
  }
  int64_t world = tpx_mesh_world_size(pl.mesh);
  int64_t first = a.rank >= 0 ? a.rank : 0;
  int64_t last = a.rank >= 0 ? a.rank : world - 1;
  int64_t total_bytes = 0, total_items = 0, items = 0, bytes = 0;
  /* tensors per rank file: a fused expert parameter replaces its sources */
  int64_t per_rank = (int64_t)tpx_checkpoint_num_tensors(rd);
  for (size_t i = 0; i < tpx_model_num_params(pl.model); i++)
    if (tpx_checkpoint_param_tensor(rd, pl.model, (int64_t)i) < 0)
      per_rank += 1 - tpx_checkpoint_param_num_sources(rd, pl.model,
                                                        (int64_t)i);
  for (int64_t r = first; r <= last; r++) {
    total_bytes += tpx_sharding_rank_param_bytes(pl.sh, r);
    total_items += per_rank;
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
