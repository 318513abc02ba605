/* ckpt_test.c — `tpx-ckpt-test`, a helper of the checkpoint tests and
 * benchmark (not installed):
 *   gen CONFIG OUTDIR [MAX_SHARD_BYTES]   a checkpoint for the config's
 *        module skeleton (family plugin), deterministic bytes per tensor
 *        (splitmix64 of the name and byte index), config.json copied
 *   gen-list CONFIG LIST OUTDIR [MAX_SHARD_BYTES]   the same for the
 *        tensors listed in LIST ("NAME DTYPE DIM..." lines)
 *   cmp A B                               tensor names, dtypes, shapes and
 *        bytes of two checkpoints are identical (any file layout)
 *   check-ranks WEIGHTS RANKDIR TP DP_SHARD DP_REPLICATE [sp] [ep=N]
 *        every rank file holds exactly rank r's slice (layout function,
 *        plan selected as `tpx plan` does; an expert parameter's on the
 *        MoE mesh with ep=N) of every tensor, bytes equal
 *   sigbus FILE   opens FILE with the reader (mapped), truncates it to its
 *        header, and reads every tensor under the CLI's SIGBUS guard (the
 *        one `tpx shard` and `tpx merge` read under): exit 1 with the
 *        message naming the file, where unguarded it dies of SIGBUS
 * Exit 0 ok, 1 mismatch or failure (message on stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_cli.h"
#include "plan_setup.h"

static uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t name_seed(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static int die(const char *what, const tpx_error *err) {
  fprintf(stderr, "tpx-ckpt-test: %s: %s\n", what, err ? err->message : "");
  return 1;
}

static int copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  char buf[65536];
  size_t n;
  int rc = in && out ? 0 : -1;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n)
      rc = -1;
  if (in)
    fclose(in);
  if (out && fclose(out) != 0)
    rc = -1;
  return rc;
}

/* Writes `entries` with deterministic bytes into outdir (+ config.json). */
static int write_entries(const tpx_checkpoint_entry *entries, size_t n,
                         const char *config, const char *outdir,
                         int64_t max_shard) {
  tpx_error err;
  tpx_error_clear(&err);
  tpx_checkpoint_writer *w = NULL;
  unsigned char *buf = NULL;
  int rc = 1;
  tpx_checkpoint_writer_options wo = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  wo.max_shard_size = max_shard;
  if (tpx_checkpoint_writer_create(outdir, entries, n, &wo, &w, &err) !=
      TPX_OK) {
    rc = die(outdir, &err);
    goto out;
  }
  const size_t slab = (size_t)16 << 20;
  buf = malloc(slab);
  if (buf == NULL)
    goto out;
  for (size_t i = 0; i < n; i++) {
    const tpx_checkpoint_entry *e = &entries[i];
    uint64_t seed = name_seed(e->name);
    size_t esz = tpx_dtype_size(e->dtype);
    int64_t row = esz; /* bytes of one dim-0 row */
    for (int d = 1; d < e->ndim; d++) row *= e->shape[d];
    int64_t rows = e->ndim ? e->shape[0] : 1;
    int64_t per = row > 0 && (int64_t)slab / row > 0 ? (int64_t)slab / row : 1;
    if (row > (int64_t)slab) {
      fprintf(stderr, "tpx-ckpt-test: '%s': rows too large\n", e->name);
      goto out;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
      int64_t nr = rows - r0 < per ? rows - r0 : per;
      int64_t base = r0 * row;
      for (int64_t b = 0; b < nr * row; b += 8) {
        uint64_t v = splitmix(seed ^ (uint64_t)((base + b) / 8));
        memcpy(buf + b, &v, nr * row - b < 8 ? (size_t)(nr * row - b) : 8);
      }
      tpx_slice s;
      memset(&s, 0, sizeof s);
      s.ndim = e->ndim;
      for (int d = 0; d < e->ndim; d++) s.length[d] = e->shape[d];
      if (e->ndim) {
        s.offset[0] = r0;
        s.length[0] = nr;
      }
      if (tpx_checkpoint_write_slice(w, e->name, &s, e->dtype, buf, &err) !=
          TPX_OK) {
        rc = die("writing", &err);
        goto out;
      }
    }
  }
  if (tpx_checkpoint_writer_finish(w, NULL, &err) != TPX_OK) {
    rc = die("finishing", &err);
    goto out;
  }
  char dst[4096];
  snprintf(dst, sizeof dst, "%s/config.json", outdir);
  if (copy_file(config, dst) != 0) {
    fprintf(stderr, "tpx-ckpt-test: cannot copy %s to %s\n", config, dst);
    goto out;
  }
  printf("%zu tensors, %lld bytes, %zu file(s)\n", n,
         (long long)tpx_checkpoint_bytes_written(w),
         tpx_checkpoint_writer_num_files(w));
  rc = 0;
out:
  free(buf);
  tpx_checkpoint_writer_destroy(w);
  return rc;
}

/* The entries of the config's module skeleton (family plugin). */
static int gen(const char *config, const char *outdir, int64_t max_shard) {
  tpx_error err;
  tpx_error_clear(&err);
  tpx_model *model = NULL;
  tpx_registry *reg = NULL;
  tpx_checkpoint_entry *entries = NULL;
  size_t n = 0;
  int rc;
  if (tpx_model_load_config(config, &model, &err) != TPX_OK ||
      tpx_registry_create(&reg, &err) != TPX_OK ||
      tpx_registry_load_default(reg, &err) != TPX_OK ||
      tpx_registry_build_skeleton(reg, model, &err) != TPX_OK ||
      tpx_checkpoint_model_entries(model, &entries, &n, &err) != TPX_OK)
    rc = die(config, &err);
  else
    rc = write_entries(entries, n, config, outdir, max_shard);
  free(entries);
  tpx_registry_destroy(reg);
  tpx_model_destroy(model);
  return rc;
}

/* The entries listed in `list`, one "NAME DTYPE DIM..." per line (for
 * families without a skeleton: the tensors as their HF files name them). */
static int gen_list(const char *config, const char *list, const char *outdir,
                    int64_t max_shard) {
  FILE *f = fopen(list, "r");
  if (f == NULL) {
    fprintf(stderr, "tpx-ckpt-test: %s: %s\n", list, strerror(errno));
    return 1;
  }
  tpx_checkpoint_entry *e = NULL;
  size_t n = 0, cap = 0;
  char line[1024];
  int rc = 1;
  while (fgets(line, sizeof line, f)) {
    char *save = NULL, *name = strtok_r(line, " \t\n", &save);
    char *dt = name ? strtok_r(NULL, " \t\n", &save) : NULL;
    if (name == NULL)
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      tpx_checkpoint_entry *ne = realloc(e, cap * sizeof *e);
      if (ne == NULL)
        goto out;
      e = ne;
    }
    memset(&e[n], 0, sizeof e[n]);
    e[n].name = strdup(name);
    if (dt == NULL || tpx_dtype_parse(dt, &e[n].dtype, NULL) != TPX_OK) {
      fprintf(stderr, "tpx-ckpt-test: %s: bad line for '%s'\n", list, name);
      n++;
      goto out;
    }
    char *d;
    while ((d = strtok_r(NULL, " \t\n", &save)) &&
           e[n].ndim < TPX_MAX_TENSOR_DIMS)
      e[n].shape[e[n].ndim++] = atoll(d);
    n++;
  }
  rc = write_entries(e, n, config, outdir, max_shard);
out:
  fclose(f);
  for (size_t i = 0; i < n; i++) free((char *)e[i].name);
  free(e);
  return rc;
}

/* Reads a whole tensor (malloc'd). */
static void *read_all(const tpx_checkpoint_reader *rd, int64_t i,
                      tpx_checkpoint_tensor *t, tpx_error *err) {
  tpx_checkpoint_tensor_info(rd, (size_t)i, t, err);
  tpx_slice s;
  memset(&s, 0, sizeof s);
  s.ndim = t->ndim;
  memcpy(s.length, t->shape, sizeof s.length);
  void *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
  if (buf && tpx_checkpoint_read_slice(rd, i, &s, t->dtype, buf,
                                       (size_t)t->nbytes, err) != TPX_OK) {
    free(buf);
    buf = NULL;
  }
  return buf;
}

static int cmp(const char *a, const char *b) {
  tpx_error err;
  tpx_error_clear(&err);
  tpx_checkpoint_reader *ra = NULL, *rb = NULL;
  int rc = 1;
  if (tpx_checkpoint_reader_create(a, NULL, &ra, &err) != TPX_OK ||
      tpx_checkpoint_reader_create(b, NULL, &rb, &err) != TPX_OK) {
    rc = die("opening", &err);
    goto out;
  }
  size_t n = tpx_checkpoint_num_tensors(ra);
  if (n != tpx_checkpoint_num_tensors(rb)) {
    fprintf(stderr, "tpx-ckpt-test: %s holds %zu tensors, %s %zu\n", a, n, b,
            tpx_checkpoint_num_tensors(rb));
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    tpx_checkpoint_tensor ta, tb;
    tpx_checkpoint_tensor_info(ra, i, &ta, NULL);
    int64_t j = tpx_checkpoint_find(rb, ta.name);
    if (j < 0) {
      fprintf(stderr, "tpx-ckpt-test: '%s' is missing from %s\n", ta.name, b);
      goto out;
    }
    void *da = read_all(ra, (int64_t)i, &ta, &err);
    void *db = read_all(rb, j, &tb, &err);
    int same = da && db && ta.dtype == tb.dtype && ta.ndim == tb.ndim &&
               !memcmp(ta.shape, tb.shape, sizeof ta.shape) &&
               ta.nbytes == tb.nbytes && !memcmp(da, db, (size_t)ta.nbytes);
    free(da);
    free(db);
    if (!same) {
      fprintf(stderr,
              "tpx-ckpt-test: tensor '%s' differs between %s and %s "
              "%s\n",
              ta.name, a, b, err.message);
      goto out;
    }
  }
  printf("%zu tensors identical\n", n);
  rc = 0;
out:
  tpx_checkpoint_reader_destroy(ra);
  tpx_checkpoint_reader_destroy(rb);
  return rc;
}

static int check_ranks(int argc, char **argv) {
  tpx_cli_plan_args pa;
  memset(&pa, 0, sizeof pa);
  char config[4096];
  const char *weights = argv[0], *dir = argv[1];
  snprintf(config, sizeof config, "%s/config.json", weights);
  pa.config = config;
  pa.weights = weights;
  pa.tp = atoll(argv[2]);
  pa.dp_shard = atoll(argv[3]);
  pa.dp_replicate = atoll(argv[4]);
  for (int k = 5; k < argc; k++) { /* [sp] [ep=N] */
    if (!strcmp(argv[k], "sp"))
      pa.sp = 1;
    else if (!strncmp(argv[k], "ep=", 3))
      pa.ep = atoll(argv[k] + 3);
  }
  pa.fsdp = pa.isolate = 1;
  tpx_cli_planned pl;
  tpx_checkpoint_reader *src = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  int rc = 1;
  if (tpx_cli_plan_build("ckpt-test", &pa, &pl) != 0)
    goto out;
  if (tpx_checkpoint_reader_create(weights, NULL, &src, &err) != TPX_OK) {
    rc = die(weights, &err);
    goto out;
  }
  int64_t world = tpx_mesh_world_size(pl.mesh), checked = 0, uneven = 0;
  for (int64_t r = 0; r < world; r++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/rank-%05lld-of-%05lld.safetensors", dir,
             (long long)r, (long long)world);
    tpx_checkpoint_reader *rf = NULL;
    if (tpx_checkpoint_reader_create(path, NULL, &rf, &err) != TPX_OK) {
      rc = die(path, &err);
      goto out;
    }
    const char *ms = tpx_checkpoint_metadata(rf, "tpx.mesh");
    const char *ts = tpx_checkpoint_metadata(rf, "tpx.tensors");
    tpx_shard_meta meta;
    if (tpx_shard_meta_parse(ms, ms ? strlen(ms) : 0, ts, ts ? strlen(ts) : 0,
                             tpx_checkpoint_metadata(rf, "tpx.rank"), &meta,
                             &err) != TPX_OK ||
        meta.rank != r || meta.num_tensors != tpx_checkpoint_num_tensors(src) ||
        tpx_checkpoint_num_tensors(rf) != tpx_checkpoint_num_tensors(src)) {
      fprintf(stderr, "tpx-ckpt-test: %s: bad metadata %s\n", path,
              err.message);
      tpx_shard_meta_free(&meta);
      tpx_checkpoint_reader_destroy(rf);
      goto out;
    }
    int bad = 0;
    for (size_t k = 0; k < meta.num_tensors && !bad; k++) {
      const tpx_shard_tensor *mt = &meta.tensors[k];
      int64_t p = tpx_model_find_param(pl.model, mt->name);
      int64_t si = tpx_checkpoint_find(src, mt->name);
      int64_t li = tpx_checkpoint_find(rf, mt->name);
      tpx_slice s;
      tpx_checkpoint_tensor st, lt;
      if (p < 0 || si < 0 || li < 0 ||
          tpx_sharding_local_slice(pl.sh, p, r, &s, &err) != TPX_OK) {
        bad = 1;
        break;
      }
      tpx_checkpoint_tensor_info(src, (size_t)si, &st, NULL);
      void *local = read_all(rf, li, &lt, &err);
      size_t nb = (size_t)tpx_slice_nbytes(&s, st.dtype);
      void *want = malloc(nb ? nb : 1);
      bad = !local || !want || lt.ndim != s.ndim || lt.dtype != st.dtype ||
            memcmp(lt.shape, s.length, sizeof s.length) ||
            memcmp(mt->offsets, s.offset, sizeof s.offset) ||
            memcmp(mt->global_shape, st.shape, sizeof st.shape) ||
            tpx_checkpoint_read_slice(src, si, &s, st.dtype, want, nb, &err) !=
                TPX_OK ||
            memcmp(local, want, nb);
      for (int d = 0; d < s.ndim; d++)
        if (s.length[d] != st.shape[d] &&
            (s.length[d] == 0 || st.shape[d] % s.length[d] != 0))
          uneven = 1; /* short or empty piece */
      if (bad)
        fprintf(stderr,
                "tpx-ckpt-test: %s: tensor '%s' is not rank %lld's "
                "slice %s\n",
                path, mt->name, (long long)r, err.message);
      free(local);
      free(want);
      checked++;
    }
    tpx_shard_meta_free(&meta);
    tpx_checkpoint_reader_destroy(rf);
    if (bad)
      goto out;
  }
  printf("%lld rank tensors hold exactly their slices (%s shards seen)\n",
         (long long)checked, uneven ? "uneven" : "only even");
  rc = 0;
out:
  tpx_checkpoint_reader_destroy(src);
  tpx_cli_planned_free(&pl);
  return rc;
}

/* What read_everything holds while it reads: the buffer lives here, not in
 * a local, so the caller can free it when the SIGBUS guard jumps out of a
 * read. */
typedef struct read_ctx {
  const tpx_checkpoint_reader *rd;
  void *data;
} read_ctx;

static int read_everything(void *ctx) {
  read_ctx *c = ctx;
  tpx_error err;
  tpx_error_clear(&err);
  for (size_t i = 0; i < tpx_checkpoint_num_tensors(c->rd); i++) {
    tpx_checkpoint_tensor t;
    if (tpx_checkpoint_tensor_info(c->rd, i, &t, &err) != TPX_OK)
      return -1;
    tpx_slice s;
    memset(&s, 0, sizeof s);
    s.ndim = t.ndim;
    memcpy(s.length, t.shape, sizeof s.length);
    c->data = malloc(t.nbytes ? (size_t)t.nbytes : 1);
    if (c->data == NULL ||
        tpx_checkpoint_read_slice(c->rd, (int64_t)i, &s, t.dtype, c->data,
                                  (size_t)t.nbytes, &err) != TPX_OK)
      return -1;
    free(c->data);
    c->data = NULL;
  }
  return 0;
}

static int sigbus_check(const char *path) {
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  if (tpx_checkpoint_reader_create(path, NULL, &rd, &err) != TPX_OK)
    return die(path, &err);
  tpx_checkpoint_tensor t;
  int64_t header_end = -1;
  for (size_t i = 0; i < tpx_checkpoint_num_tensors(rd); i++)
    if (tpx_checkpoint_tensor_info(rd, i, &t, NULL) == TPX_OK &&
        (header_end < 0 || t.data_offset < header_end))
      header_end = t.data_offset;
  if (header_end < 0 || truncate(path, (off_t)header_end) != 0) {
    fprintf(stderr, "tpx-ckpt-test: %s: cannot truncate\n", path);
    tpx_checkpoint_reader_destroy(rd);
    return 1;
  }
  read_ctx ctx = {rd, NULL};
  int rc = tpx_cli_guard_sigbus(read_everything, &ctx);
  free(ctx.data);
  tpx_checkpoint_reader_destroy(rd);
  if (rc == -2)
    tpx_cli_report_sigbus("tpx-ckpt-test", path);
  else
    fprintf(stderr, "tpx-ckpt-test: %s: read %s after the truncation\n", path,
            rc == 0 ? "everything" : "with an error");
  return rc == -2 ? 1 : 3;
}

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "gen")) {
    int64_t max = 0;
    if (argc > 4 && tpx_cli_parse_bytes(argv[4], &max) != 0)
      return 2;
    return gen(argv[2], argv[3], max);
  }
  if (argc >= 5 && !strcmp(argv[1], "gen-list")) {
    int64_t max = 0;
    if (argc > 5 && tpx_cli_parse_bytes(argv[5], &max) != 0)
      return 2;
    return gen_list(argv[2], argv[3], argv[4], max);
  }
  if (argc == 4 && !strcmp(argv[1], "cmp"))
    return cmp(argv[2], argv[3]);
  if (argc == 3 && !strcmp(argv[1], "sigbus"))
    return sigbus_check(argv[2]);
  if (argc >= 7 && !strcmp(argv[1], "check-ranks"))
    return check_ranks(argc - 2, argv + 2);
  fprintf(stderr, "usage: tpx-ckpt-test gen CONFIG OUTDIR [MAX_SHARD] | "
                  "gen-list CONFIG LIST OUTDIR [MAX_SHARD] | cmp "
                  "A B | check-ranks WEIGHTS RANKDIR TP DP_SHARD DP_REPLICATE "
                  "[sp] [ep=N] | sigbus FILE\n");
  return 2;
}
