/* cmd_merge.c — `tpx merge`: the per-rank files `tpx shard` wrote
 * (tpx-shard/1) back into one Hugging Face checkpoint: model.safetensors,
 * or model-0000k-of-0000n.safetensors + model.safetensors.index.json with
 * --max-shard-size. Each distinct piece is written once straight into its
 * place (replicated pieces are skipped after the first); every tensor must
 * be covered exactly. Files appear under their final names only when
 * complete (checkpoint writer: temporary + fsync + rename).
 *
 * Exit status: 0 done, 1 failed (message on stderr), 2 bad arguments or an
 * input that cannot be used (docs/tpx.1 "EXIT STATUS"). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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

/* One rank file. */
typedef struct rank_file {
  char *path;
  tpx_checkpoint_reader *rd;
  tpx_cli_shard_meta meta;
} rank_file;

/* One local piece: tensor `tensor` of rank file `file`. */
typedef struct piece {
  size_t file, tensor; /* tensor: index in the reader and the meta */
  size_t entry;        /* index in the merged entries */
  tpx_slice box;       /* in the global tensor */
} piece;

static int by_box(const void *a, const void *b) {
  const piece *x = a, *y = b;
  if (x->entry != y->entry)
    return x->entry < y->entry ? -1 : 1;
  int c = memcmp(x->box.offset, y->box.offset, sizeof x->box.offset);
  if (c)
    return c;
  c = memcmp(x->box.length, y->box.length, sizeof x->box.length);
  if (c)
    return c;
  return (x->file > y->file) - (x->file < y->file);
}

static int is_rank_file(const char *name) {
  long long r, w;
  int end = 0;
  return sscanf(name, "rank-%5lld-of-%5lld.safetensors%n", &r, &w, &end) ==
             2 &&
         name[end] == '\0';
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const rank_file *)a)->path, ((const rank_file *)b)->path);
}

/* Lists and opens the rank files; checks they form one complete mesh. */
static int open_ranks(const char *dir, rank_file **out, size_t *count) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    fprintf(stderr, "tpx merge: %s: cannot open the directory: %s\n", dir,
            strerror(errno));
    return -1;
  }
  rank_file *f = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d)) != NULL) {
    if (!is_rank_file(de->d_name))
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      rank_file *nf = realloc(f, cap * sizeof *f);
      if (nf == NULL) {
        rc = -1;
        break;
      }
      f = nf;
    }
    memset(&f[n], 0, sizeof f[n]);
    size_t len = strlen(dir) + strlen(de->d_name) + 2;
    f[n].path = malloc(len);
    if (f[n].path == NULL) {
      rc = -1;
      break;
    }
    snprintf(f[n].path, len, "%s/%s", dir, de->d_name);
    n++;
  }
  closedir(d);
  *out = f;
  *count = n;
  if (rc != 0) {
    fprintf(stderr, "tpx merge: out of memory\n");
    return -1;
  }
  if (n == 0) {
    fprintf(stderr, "tpx merge: %s: no rank-0000r-of-0000W.safetensors "
                    "files\n", dir);
    return -1;
  }
  qsort(f, n, sizeof *f, by_path);
  for (size_t i = 0; i < n; i++) {
    tpx_error err;
    tpx_error_clear(&err);
    if (tpx_checkpoint_reader_create(f[i].path, NULL, &f[i].rd, &err) !=
        TPX_OK) {
      fprintf(stderr, "tpx merge: %s\n", err.message);
      return -1;
    }
    const char *fmt = tpx_checkpoint_metadata(f[i].rd, "format");
    const char *mesh = tpx_checkpoint_metadata(f[i].rd, "tpx.mesh");
    const char *ts = tpx_checkpoint_metadata(f[i].rd, "tpx.tensors");
    char msg[256];
    if (fmt == NULL || strcmp(fmt, TPX_SHARD_FORMAT) != 0) {
      fprintf(stderr, "tpx merge: %s: __metadata__ format is '%s', not "
                      "'%s'\n", f[i].path, fmt ? fmt : "(none)",
              TPX_SHARD_FORMAT);
      return -1;
    }
    if (tpx_cli_shard_meta_parse(mesh, mesh ? strlen(mesh) : 0, ts,
                                 ts ? strlen(ts) : 0,
                                 tpx_checkpoint_metadata(f[i].rd, "tpx.rank"),
                                 &f[i].meta, msg, sizeof msg) != 0) {
      fprintf(stderr, "tpx merge: %s: %s\n", f[i].path, msg);
      return -1;
    }
    const tpx_cli_shard_meta *m = &f[i].meta, *m0 = &f[0].meta;
    if (m->mesh_ndim != m0->mesh_ndim ||
        memcmp(m->mesh_sizes, m0->mesh_sizes, sizeof m->mesh_sizes) != 0 ||
        memcmp(m->mesh_names, m0->mesh_names, sizeof m->mesh_names) != 0) {
      fprintf(stderr, "tpx merge: %s: its mesh differs from %s's\n",
              f[i].path, f[0].path);
      return -1;
    }
    if (m->rank != (int64_t)i) {
      fprintf(stderr,
              "tpx merge: %s: rank file %zu holds rank %lld: rank %zu of %lld "
              "is missing or doubled\n",
              f[i].path, i, (long long)m->rank, i, (long long)m->world_size);
      return -1;
    }
    size_t nt = tpx_checkpoint_num_tensors(f[i].rd);
    if (nt != m->num_tensors) {
      fprintf(stderr, "tpx merge: %s: \"tpx.tensors\" lists %zu tensors, the "
                      "file holds %zu\n", f[i].path, m->num_tensors, nt);
      return -1;
    }
  }
  if ((int64_t)n != f[0].meta.world_size) {
    fprintf(stderr, "tpx merge: %s: %zu rank files for a mesh of %lld ranks "
                    "(rank %zu is missing)\n", dir, n,
            (long long)f[0].meta.world_size, n);
    return -1;
  }
  return 0;
}

/* Two ranks' entries of a tensor name the same per-expert sources. */
static int same_fold(const tpx_cli_shard_tensor *a,
                     const tpx_cli_shard_tensor *b) {
  if (a->num_fold != b->num_fold)
    return 0;
  for (size_t k = 0; k < a->num_fold; k++)
    if (strcmp(a->fold[k].name, b->fold[k].name) != 0 ||
        a->fold[k].ndim != b->fold[k].ndim ||
        memcmp(a->fold[k].shape, b->fold[k].shape, sizeof a->fold[k].shape) ||
        memcmp(a->fold[k].offsets, b->fold[k].offsets,
               sizeof a->fold[k].offsets))
      return 0;
  return 1;
}

/* Merged entries from every rank's metadata (global shapes must agree) and
 * every piece. */
static int collect(rank_file *f, size_t nf, tpx_checkpoint_entry **entries_out,
                   size_t *ne_out, piece **pieces_out, size_t *np_out) {
  size_t total = 0;
  for (size_t i = 0; i < nf; i++)
    total += f[i].meta.num_tensors;
  tpx_checkpoint_entry *e = calloc(f[0].meta.num_tensors + 1, sizeof *e);
  piece *p = calloc(total + 1, sizeof *p);
  *entries_out = e;
  *pieces_out = p;
  if (!e || !p) {
    fprintf(stderr, "tpx merge: out of memory\n");
    return -1;
  }
  size_t ne = f[0].meta.num_tensors, np = 0;
  for (size_t i = 0; i < nf; i++) {
    const tpx_cli_shard_meta *m = &f[i].meta;
    if (m->num_tensors != ne) {
      fprintf(stderr, "tpx merge: %s holds %zu tensors, %s %zu\n", f[i].path,
              m->num_tensors, f[0].path, ne);
      return -1;
    }
    for (size_t k = 0; k < m->num_tensors; k++) {
      const tpx_cli_shard_tensor *st = &m->tensors[k];
      tpx_checkpoint_tensor t;
      int64_t ti = tpx_checkpoint_find(f[i].rd, st->name);
      if (ti < 0 ||
          tpx_checkpoint_tensor_info(f[i].rd, (size_t)ti, &t, NULL) != TPX_OK ||
          t.ndim != st->ndim) {
        fprintf(stderr, "tpx merge: %s: tensor '%s' of \"tpx.tensors\" is "
                        "missing or has another rank\n", f[i].path, st->name);
        return -1;
      }
      /* entries follow rank 0's order; other ranks are matched by name */
      size_t ei = k;
      if (i > 0)
        for (ei = 0; ei < ne; ei++)
          if (strcmp(e[ei].name, st->name) == 0)
            break;
      if (i == 0) {
        e[k].name = st->name;
        e[k].dtype = t.dtype;
        e[k].ndim = st->ndim;
        memcpy(e[k].shape, st->global_shape, sizeof e[k].shape);
      } else if (ei == ne || e[ei].dtype != t.dtype ||
                 memcmp(e[ei].shape, st->global_shape,
                        sizeof e[ei].shape) != 0 ||
                 !same_fold(st, &f[0].meta.tensors[ei])) {
        fprintf(stderr, "tpx merge: %s: tensor '%s' disagrees with %s in "
                        "name, dtype or global shape\n", f[i].path, st->name,
                f[0].path);
        return -1;
      }
      piece *pc = &p[np++];
      pc->file = i;
      pc->tensor = (size_t)ti;
      pc->entry = ei;
      pc->box.ndim = st->ndim;
      for (int d = 0; d < st->ndim; d++) {
        pc->box.offset[d] = st->offsets[d];
        pc->box.length[d] = t.shape[d];
        if (st->offsets[d] > st->global_shape[d] ||
            t.shape[d] > st->global_shape[d] - st->offsets[d]) {
          fprintf(stderr, "tpx merge: %s: tensor '%s': the piece at offset "
                          "%lld of dim %d lies outside the global shape\n",
                  f[i].path, st->name, (long long)st->offsets[d], d);
          return -1;
        }
      }
    }
  }
  *ne_out = ne;
  *np_out = np;
  return 0;
}

static int grow(void **buf, size_t *cap, size_t n) {
  if (n <= *cap)
    return 0;
  void *nb = realloc(*buf, n);
  if (nb == NULL)
    return -1;
  *buf = nb;
  *cap = n;
  return 0;
}

/* Copies the dense piece `part` (the box `box` of tensor `e`) into its
 * place in the dense whole tensor `full` (to_full), or cuts it out of
 * `full` (!to_full): one contiguous run per index of the leading dims. The
 * box comes from the rank file's metadata, checked to lie inside the
 * tensor. */
static void copy_box(void *full, const tpx_checkpoint_entry *e,
                     const tpx_slice *box, void *part, int to_full) {
  size_t esz = tpx_dtype_size(e->dtype);
  int nd = e->ndim;
  if (tpx_slice_numel(box) == 0)
    return;
  if (nd == 0) {
    memcpy(to_full ? full : part, to_full ? part : full, esz);
    return;
  }
  size_t run = (size_t)box->length[nd - 1] * esz;
  int64_t idx[TPX_MAX_TENSOR_DIMS] = {0};
  char *in = part;
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++)
      off = off * e->shape[d] + box->offset[d] + (d < nd - 1 ? idx[d] : 0);
    char *at = (char *)full + (size_t)off * esz;
    memcpy(to_full ? at : in, to_full ? in : at, run);
    in += run;
    int d = nd - 2;
    while (d >= 0 && ++idx[d] == box->length[d])
      idx[d--] = 0;
    if (d < 0)
      break;
  }
}

/* The tensors of the merged checkpoint: each entry, or for a fused
 * expert parameter its per-expert source tensors (rank 0's "fold"), in the
 * dtype of the fused parameter. *out is malloc'd; names borrowed. */
static int out_entries(const rank_file *f, const tpx_checkpoint_entry *e,
                       size_t ne, tpx_checkpoint_entry **out, size_t *n_out) {
  size_t n = 0;
  for (size_t i = 0; i < ne; i++)
    n += f[0].meta.tensors[i].num_fold ? f[0].meta.tensors[i].num_fold : 1;
  tpx_checkpoint_entry *o = calloc(n + 1, sizeof *o);
  if (o == NULL) {
    fprintf(stderr, "tpx merge: out of memory\n");
    return -1;
  }
  n = 0;
  for (size_t i = 0; i < ne; i++) {
    const tpx_cli_shard_tensor *st = &f[0].meta.tensors[i];
    if (st->num_fold == 0)
      o[n++] = e[i];
    for (size_t k = 0; k < st->num_fold; k++, n++) {
      o[n].name = st->fold[k].name;
      o[n].dtype = e[i].dtype;
      o[n].ndim = st->fold[k].ndim;
      memcpy(o[n].shape, st->fold[k].shape, sizeof o[n].shape);
    }
  }
  *out = o;
  *n_out = n;
  return 0;
}

/* Writes the whole tensor `full` of entry e: as itself, or cut into the
 * per-expert source tensors of its "fold". */
static tpx_status write_entry(tpx_checkpoint_writer *w,
                              const tpx_cli_shard_tensor *st,
                              const tpx_checkpoint_entry *e, void *full,
                              void **tmp, size_t *tcap, tpx_error *err) {
  tpx_slice whole;
  memset(&whole, 0, sizeof whole);
  whole.ndim = e->ndim;
  memcpy(whole.length, e->shape, sizeof whole.length);
  if (st->num_fold == 0)
    return tpx_checkpoint_write_slice(w, e->name, &whole, e->dtype, full, err);
  for (size_t k = 0; k < st->num_fold; k++) {
    const tpx_cli_fold_source *src = &st->fold[k];
    int drop = e->ndim - src->ndim;
    tpx_slice box, own;
    memset(&box, 0, sizeof box);
    memset(&own, 0, sizeof own);
    box.ndim = e->ndim;
    own.ndim = src->ndim;
    for (int d = 0; d < e->ndim; d++) {
      box.offset[d] = src->offsets[d];
      box.length[d] = d < drop ? 1 : src->shape[d - drop];
    }
    memcpy(own.length, src->shape, sizeof own.length);
    size_t nb = (size_t)tpx_slice_nbytes(&box, e->dtype);
    if (grow(tmp, tcap, nb ? nb : 1) != 0)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory for '%s'",
                           src->name);
    copy_box(full, e, &box, *tmp, 0);
    tpx_status s = tpx_checkpoint_write_slice(w, src->name, &own, e->dtype,
                                              *tmp, err);
    if (s != TPX_OK)
      return s;
  }
  return TPX_OK;
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
  signal(SIGXFSZ, SIG_IGN); /* report EFBIG instead of dying */
  rank_file *f = NULL;
  size_t nf = 0, ne = 0, np = 0;
  tpx_checkpoint_entry *entries = NULL, *wentries = NULL;
  size_t nw = 0;
  piece *pieces = NULL;
  tpx_checkpoint_writer *w = NULL;
  void *buf = NULL, *pbuf = NULL;
  int64_t *covered = NULL;
  tpx_error err;
  tpx_error_clear(&err);
  int code = 2; /* --in unusable: missing, no rank files, malformed */
  if (open_ranks(in, &f, &nf) != 0 ||
      collect(f, nf, &entries, &ne, &pieces, &np) != 0)
    goto out;
  code = 1;
  qsort(pieces, np, sizeof *pieces, by_box);
  /* Every element of every tensor exactly once: identical boxes are
   * replicas (written once); the distinct boxes must add up. */
  covered = calloc(ne + 1, sizeof *covered);
  if (covered == NULL) {
    fprintf(stderr, "tpx merge: out of memory\n");
    goto out;
  }
  int64_t total_bytes = 0, items = 0, bytes = 0;
  size_t distinct = 0, last = 0;
  for (size_t k = 0; k < np; k++) {
    if (k > 0 && pieces[k].entry == pieces[last].entry &&
        !memcmp(&pieces[k].box, &pieces[last].box, sizeof pieces[k].box)) {
      pieces[k].entry = (size_t)-1; /* a replica: skip */
      continue;
    }
    last = k;
    int64_t n = tpx_slice_numel(&pieces[k].box);
    covered[pieces[k].entry] += n;
    total_bytes += n * (int64_t)tpx_dtype_size(entries[pieces[k].entry].dtype);
    distinct++;
  }
  for (size_t e = 0; e < ne; e++) {
    int64_t want = 1;
    for (int d = 0; d < entries[e].ndim; d++)
      want *= entries[e].shape[d];
    if (covered[e] != want) {
      fprintf(stderr, "tpx merge: %s: tensor '%s': the rank files hold %lld "
                      "distinct elements of its %lld (pieces missing or "
                      "overlapping)\n", in, entries[e].name,
              (long long)covered[e], (long long)want);
      goto out;
    }
  }
  if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "tpx merge: %s: cannot create the directory: %s\n",
            outdir, strerror(errno));
    goto out;
  }
  tpx_checkpoint_writer_options wo = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  wo.max_shard_size = max_shard;
  if (out_entries(f, entries, ne, &wentries, &nw) != 0)
    goto out;
  if (tpx_checkpoint_writer_create(outdir, wentries, nw, &wo, &w, &err) !=
      TPX_OK) {
    fprintf(stderr, "tpx merge: %s\n", err.message);
    goto out;
  }
  tpx_cli_progress prog;
  tpx_cli_progress_start(&prog, "tpx merge", (int64_t)distinct, total_bytes);
  /* One tensor at a time: its pieces are placed in a whole-tensor buffer
   * and written with one sequential write. Writing each piece in place
   * instead (one write per row of a dim-1 piece) measured 2.9x slower than
   * cp in bench/ckpt (scattered small writes); this is ~cp speed. */
  size_t cap = 0, pcap = 0;
  for (size_t k = 0; k < np;) {
    size_t ent = pieces[k].entry, k1 = k + 1;
    if (ent == (size_t)-1) {
      k++;
      continue;
    }
    while (k1 < np && (pieces[k1].entry == ent ||
                       pieces[k1].entry == (size_t)-1))
      k1++;
    const tpx_checkpoint_entry *e = &entries[ent];
    tpx_slice whole;
    memset(&whole, 0, sizeof whole);
    whole.ndim = e->ndim;
    memcpy(whole.length, e->shape, sizeof whole.length);
    size_t nb = (size_t)tpx_slice_nbytes(&whole, e->dtype);
    if (grow(&buf, &cap, nb) != 0) {
      fprintf(stderr, "tpx merge: out of memory for '%s'\n", e->name);
      goto out;
    }
    for (; k < k1; k++) {
      const piece *pc = &pieces[k];
      if (pc->entry == (size_t)-1)
        continue;
      size_t pb = (size_t)tpx_slice_nbytes(&pc->box, e->dtype);
      tpx_slice local = pc->box;
      memset(local.offset, 0, sizeof local.offset);
      /* A piece covering whole rows (a dim-0 piece) is contiguous in the
       * tensor: read straight into its place, saving a copy. */
      int rows = 1;
      size_t at = 0;
      for (int d = 1; d < e->ndim; d++)
        rows &= pc->box.length[d] == e->shape[d];
      if (rows && e->ndim > 0 && e->shape[0] > 0)
        at = (size_t)pc->box.offset[0] * (nb / (size_t)e->shape[0]);
      if (!rows && grow(&pbuf, &pcap, pb) != 0) {
        fprintf(stderr, "tpx merge: out of memory for '%s'\n", e->name);
        goto out;
      }
      if (tpx_checkpoint_read_slice(f[pc->file].rd, (int64_t)pc->tensor,
                                    &local, e->dtype,
                                    rows ? (char *)buf + at : pbuf,
                                    rows ? nb - at : pb, &err) != TPX_OK) {
        fprintf(stderr, "tpx merge: %s\n", err.message);
        goto out;
      }
      if (!rows)
        copy_box(buf, e, &pc->box, pbuf, 1);
      items++;
      bytes += (int64_t)pb;
      tpx_cli_progress_update(&prog, items, bytes, 0);
    }
    if (write_entry(w, &f[0].meta.tensors[ent], e, buf, &pbuf, &pcap,
                    &err) != TPX_OK) {
      fprintf(stderr, "tpx merge: %s\n", err.message);
      goto out;
    }
  }
  free(pbuf);
  pbuf = NULL;
  if (tpx_checkpoint_writer_finish(w, NULL, &err) != TPX_OK) {
    fprintf(stderr, "tpx merge: %s\n", err.message);
    goto out;
  }
  tpx_cli_progress_update(&prog, items, bytes, 1);
  code = 0;
out:
  tpx_checkpoint_writer_destroy(w);
  free(pbuf);
  free(buf);
  free(covered);
  free(entries);
  free(wentries);
  free(pieces);
  for (size_t i = 0; i < nf; i++) {
    tpx_checkpoint_reader_destroy(f[i].rd);
    tpx_cli_shard_meta_free(&f[i].meta);
    free(f[i].path);
  }
  free(f);
  return code;
}
