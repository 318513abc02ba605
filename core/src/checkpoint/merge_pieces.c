/* merge_pieces.c — the first half of a merge of tpx-shard/1 rank files:
 * list and open the rank files of a directory, check they form one
 * complete mesh, collect the merged tensors and every rank's pieces, and
 * check every tensor is covered exactly (identical boxes are replicas,
 * written once). Not the writing (merge.c). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "checkpoint/rankfile_impl.h"

static tpx_status oom(tpx_error *err) {
  return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const tpx__merge_file *)a)->path,
                ((const tpx__merge_file *)b)->path);
}

/* The rank file paths of `dir`, sorted. */
static tpx_status list_files(tpx__merge_set *s, tpx_error *err) {
  DIR *d = opendir(s->dir);
  if (d == NULL)
    return tpx_error_set(err, TPX_IO, "%s: cannot open the directory: %s",
                         s->dir, strerror(errno));
  size_t cap = 0;
  struct dirent *de;
  tpx_status st = TPX_OK;
  while ((de = readdir(d)) != NULL && st == TPX_OK) {
    if (!tpx_shard_is_file_name(de->d_name))
      continue;
    if (TPX_GROW(s->files, cap, s->num_files + 1, 16) != 0) {
      st = oom(err);
      break;
    }
    tpx__merge_file *f = &s->files[s->num_files];
    memset(f, 0, sizeof *f);
    size_t len = strlen(s->dir) + strlen(de->d_name) + 2;
    f->path = malloc(len);
    if (f->path == NULL) {
      st = oom(err);
      break;
    }
    snprintf(f->path, len, "%s/%s", s->dir, de->d_name);
    s->num_files++;
  }
  closedir(d);
  if (st == TPX_OK && s->num_files == 0)
    st = tpx_error_set(err, TPX_NOT_FOUND,
                       "%s: no rank-0000r-of-0000W.safetensors files", s->dir);
  if (st == TPX_OK)
    qsort(s->files, s->num_files, sizeof *s->files, by_path);
  return st;
}

/* 1 when metadata `key` is the same (or absent) in files a and b. */
static int same_value(const tpx__merge_set *s, size_t a, size_t b,
                      const char *key) {
  const char *x = tpx_checkpoint_metadata(s->files[a].rd, key);
  const char *y = tpx_checkpoint_metadata(s->files[b].rd, key);
  return x == y || (x && y && strcmp(x, y) == 0);
}

/* The identity keys every rank file of one merge shares, with what a
 * mismatch means (values are quoted up to `width` characters). */
static const struct {
  const char *key, *what, *remedy;
  int width;
} run_keys[] = {
    {"tpx.source", "cut from another source checkpoint than",
     "different sources do not merge", 40},
    {"tpx.run_id", "written by another tpx shard run than",
     "different runs do not merge (runs that each write some ranks take the "
     "same --run-id)",
     70},
};

/* File i comes from the same source, run and config as file 0. */
static tpx_status same_run(const tpx__merge_set *s, size_t i, tpx_error *err) {
  const char *p = s->files[i].path, *p0 = s->files[0].path;
  for (size_t k = 0; k < sizeof run_keys / sizeof *run_keys; k++) {
    const char *key = run_keys[k].key;
    if (same_value(s, i, 0, key))
      continue;
    const char *v = tpx_checkpoint_metadata(s->files[i].rd, key);
    const char *v0 = tpx_checkpoint_metadata(s->files[0].rd, key);
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: %s %s (\"%s\" %.*s, not %.*s): rank files of %s",
                         p, run_keys[k].what, p0, key, run_keys[k].width,
                         v ? v : "(none)", run_keys[k].width,
                         v0 ? v0 : "(none)", run_keys[k].remedy);
  }
  if (!same_value(s, i, 0, "tpx.config"))
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: its \"tpx.config\" (the model's config.json) "
                         "differs from %s's",
                         p, p0);
  return TPX_OK;
}

/* Opens rank file i and parses its metadata; checks it against file 0. */
static tpx_status open_file(tpx__merge_set *s, size_t i, tpx_error *err) {
  tpx__merge_file *f = &s->files[i];
  tpx_status st = tpx_checkpoint_reader_create(f->path, NULL, &f->rd, err);
  if (st != TPX_OK)
    return st;
  const char *fmt = tpx_checkpoint_metadata(f->rd, "format");
  const char *mesh = tpx_checkpoint_metadata(f->rd, "tpx.mesh");
  const char *ts = tpx_checkpoint_metadata(f->rd, "tpx.tensors");
  if (fmt == NULL || (strcmp(fmt, TPX_SHARD_FORMAT) != 0 &&
                      strcmp(fmt, TPX_SHARD_FORMAT_1_1) != 0))
    return tpx_error_set(
        err, TPX_PARSE, "%s: __metadata__ format is '%s', not '%s' or '%s'",
        f->path, fmt ? fmt : "(none)", TPX_SHARD_FORMAT, TPX_SHARD_FORMAT_1_1);
  tpx_error perr;
  tpx_error_clear(&perr);
  if (tpx_shard_meta_parse(mesh, mesh ? strlen(mesh) : 0, ts,
                           ts ? strlen(ts) : 0,
                           tpx_checkpoint_metadata(f->rd, "tpx.rank"), &f->meta,
                           &perr) != TPX_OK)
    return tpx_error_set(err, perr.status, "%s: %s", f->path, perr.message);
  const tpx_shard_meta *m = &f->meta, *m0 = &s->files[0].meta;
  const char *ws = tpx_checkpoint_metadata(f->rd, "tpx.world_size");
  char want[32];
  snprintf(want, sizeof want, "%lld", (long long)m->world_size);
  if (ws == NULL || strcmp(ws, want) != 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: \"tpx.world_size\" is '%.40s' but its mesh has "
                         "%lld ranks",
                         f->path, ws ? ws : "(missing)",
                         (long long)m->world_size);
  if (m->mesh_ndim != m0->mesh_ndim || m->ep != m0->ep ||
      memcmp(m->mesh_sizes, m0->mesh_sizes, sizeof m->mesh_sizes) != 0 ||
      memcmp(m->mesh_names, m0->mesh_names, sizeof m->mesh_names) != 0)
    return tpx_error_set(err, TPX_VALIDATION, "%s: its mesh differs from %s's",
                         f->path, s->files[0].path);
  tpx_status st2 = same_run(s, i, err);
  if (st2 != TPX_OK)
    return st2;
  if (m->rank != (int64_t)i)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: rank file %zu holds rank %lld: rank %zu of "
                         "%lld is missing or doubled",
                         f->path, i, (long long)m->rank, i,
                         (long long)m->world_size);
  size_t nt = tpx_checkpoint_num_tensors(f->rd);
  if (nt != m->num_tensors)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: \"tpx.tensors\" lists %zu tensors, the file "
                         "holds %zu",
                         f->path, m->num_tensors, nt);
  return TPX_OK;
}

/* Two ranks' entries of a tensor name the same per-expert sources. */
static int same_fold(const tpx_shard_tensor *a, const tpx_shard_tensor *b) {
  if (a->num_fold != b->num_fold)
    return 0;
  for (size_t k = 0; k < a->num_fold; k++)
    if (strcmp(a->fold[k].name, b->fold[k].name) != 0 ||
        a->fold[k].ndim != b->fold[k].ndim ||
        a->fold[k].transpose != b->fold[k].transpose ||
        memcmp(a->fold[k].shape, b->fold[k].shape, sizeof a->fold[k].shape) ||
        memcmp(a->fold[k].offsets, b->fold[k].offsets,
               sizeof a->fold[k].offsets))
      return 0;
  return 1;
}

/* "[o0:o0+l0, o1:o1+l1]" of a box into buf. Offsets and lengths are
 * non-negative (the metadata parser's and the header's checks), but a
 * crafted file may put them anywhere up to 2^63 - 1: the end is summed
 * unsigned, where it always fits. */
static void box_text(const int64_t *off, const int64_t *len, int ndim,
                     char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < ndim && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld:%llu",
                             d ? ", " : "", (long long)off[d],
                             (unsigned long long)off[d] +
                                 (unsigned long long)len[d]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
}

/* The piece of tensor k of file i (stored as `t`, merged entry ei) is
 * exactly the box its rank owns under its placements (the layout
 * function), and the placements are rank 0's: so the distinct pieces
 * tile every tensor, without overlap or hole. */
static tpx_status check_layout(const tpx__merge_set *s, size_t i, size_t k,
                               size_t ei, const tpx_checkpoint_tensor *t,
                               tpx_error *err) {
  const tpx__merge_file *f = &s->files[i];
  const tpx_shard_tensor *st = &f->meta.tensors[k];
  const tpx_shard_tensor *st0 = &s->files[0].meta.tensors[ei];
  if (st->num_placements == 0)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' has no \"placements\"", f->path,
                         st->name);
  if (st->on_moe != st0->on_moe || st->num_placements != st0->num_placements)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s': its mesh differs from %s's", f->path,
                         st->name, s->files[0].path);
  for (int d = 0; d < st->num_placements; d++)
    if (!tpx_placement_equal(st->placements[d], st0->placements[d]))
      return tpx_error_set(err, TPX_VALIDATION,
                           "%s: tensor '%s': its placement on mesh dim %d "
                           "differs from %s's",
                           f->path, st->name, d, s->files[0].path);
  tpx_slice want;
  tpx_error lerr;
  tpx_error_clear(&lerr);
  /* an expert parameter's placements are over the MoE mesh (ep > 1) */
  if (tpx_layout_local_slice(st->global_shape, st->ndim,
                             st->on_moe ? s->moe_mesh : s->mesh, st->placements,
                             (int64_t)i, &want, &lerr) != TPX_OK)
    return tpx_error_set(err, TPX_VALIDATION, "%s: tensor '%s': %s", f->path,
                         st->name, lerr.message);
  if (memcmp(want.offset, st->offsets,
             (size_t)st->ndim * sizeof *want.offset) ||
      memcmp(want.length, t->shape, (size_t)st->ndim * sizeof *want.length)) {
    char got[160], own[160];
    box_text(st->offsets, t->shape, st->ndim, got, sizeof got);
    box_text(want.offset, want.length, st->ndim, own, sizeof own);
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s': the piece %s is not the box %s "
                         "that rank %zu owns under its placements",
                         f->path, st->name, got, own, i);
  }
  return TPX_OK;
}

/* The piece of tensor k of file i: matched to its merged entry (rank 0's
 * order; other ranks by name, agreeing in dtype, global shape and fold). */
static tpx_status add_piece(tpx__merge_set *s, size_t i, size_t k,
                            tpx_error *err) {
  const tpx__merge_file *f = &s->files[i];
  const tpx_shard_tensor *st = &f->meta.tensors[k];
  tpx_checkpoint_entry *e = s->entries;
  size_t ne = s->num_entries;
  tpx_checkpoint_tensor t;
  int64_t ti = tpx_checkpoint_find(f->rd, st->name);
  if (ti < 0 ||
      tpx_checkpoint_tensor_info(f->rd, (size_t)ti, &t, NULL) != TPX_OK ||
      t.ndim != st->ndim)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' of \"tpx.tensors\" is missing or "
                         "has another rank",
                         f->path, st->name);
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
             memcmp(e[ei].shape, st->global_shape, sizeof e[ei].shape) != 0) {
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' disagrees with %s in name, dtype "
                         "or global shape",
                         f->path, st->name, s->files[0].path);
  } else if (!same_fold(st, &s->files[0].meta.tensors[ei])) {
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s': its \"fold\" (the stored tensors "
                         "it was read from, and where) differs from %s's",
                         f->path, st->name, s->files[0].path);
  }
  tpx_status lst = check_layout(s, i, k, ei, &t, err);
  if (lst != TPX_OK)
    return lst;
  tpx__merge_piece *pc = &s->pieces[s->num_pieces++];
  pc->file = i;
  pc->tensor = (size_t)ti;
  pc->entry = ei;
  pc->box.ndim = st->ndim;
  for (int d = 0; d < st->ndim; d++) {
    pc->box.offset[d] = st->offsets[d];
    pc->box.length[d] = t.shape[d];
    if (st->offsets[d] > st->global_shape[d] ||
        t.shape[d] > st->global_shape[d] - st->offsets[d])
      return tpx_error_set(err, TPX_VALIDATION,
                           "%s: tensor '%s': the piece at offset %lld of dim "
                           "%d lies outside the global shape",
                           f->path, st->name, (long long)st->offsets[d], d);
  }
  return TPX_OK;
}

/* Merged entries from every rank's metadata and every piece. */
static tpx_status collect(tpx__merge_set *s, tpx_error *err) {
  size_t total = 0;
  for (size_t i = 0; i < s->num_files; i++)
    total += s->files[i].meta.num_tensors;
  size_t ne = s->files[0].meta.num_tensors;
  s->entries = calloc(ne + 1, sizeof *s->entries);
  s->pieces = calloc(total + 1, sizeof *s->pieces);
  if (!s->entries || !s->pieces)
    return oom(err);
  s->num_entries = ne;
  for (size_t i = 0; i < s->num_files; i++) {
    const tpx_shard_meta *m = &s->files[i].meta;
    if (m->num_tensors != ne)
      return tpx_error_set(err, TPX_VALIDATION, "%s holds %zu tensors, %s %zu",
                           s->files[i].path, m->num_tensors, s->files[0].path,
                           ne);
    for (size_t k = 0; k < m->num_tensors; k++) {
      tpx_status st = add_piece(s, i, k, err);
      if (st != TPX_OK)
        return st;
    }
  }
  return TPX_OK;
}

static int by_box(const void *a, const void *b) {
  const tpx__merge_piece *x = a, *y = b;
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

/* Every element of every tensor exactly once: identical boxes are replicas
 * (marked, written once); the distinct boxes must add up. */
static tpx_status coverage(tpx__merge_set *s, tpx_error *err) {
  tpx__merge_piece *p = s->pieces;
  qsort(p, s->num_pieces, sizeof *p, by_box);
  int64_t *covered = calloc(s->num_entries + 1, sizeof *covered);
  if (covered == NULL)
    return oom(err);
  size_t last = 0;
  for (size_t k = 0; k < s->num_pieces; k++) {
    if (k > 0 && p[k].entry == p[last].entry &&
        !memcmp(&p[k].box, &p[last].box, sizeof p[k].box)) {
      p[k].entry = (size_t)-1; /* a replica: skip */
      continue;
    }
    last = k;
    int64_t n = tpx_slice_numel(&p[k].box);
    covered[p[k].entry] += n;
    s->total_bytes += n * (int64_t)tpx_dtype_size(s->entries[p[k].entry].dtype);
    s->distinct++;
  }
  tpx_status st = TPX_OK;
  for (size_t e = 0; e < s->num_entries && st == TPX_OK; e++) {
    int64_t want = 1;
    for (int d = 0; d < s->entries[e].ndim; d++) want *= s->entries[e].shape[d];
    if (covered[e] != want)
      st = tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s': the rank files hold %lld distinct "
                         "elements of its %lld (pieces missing or "
                         "overlapping)",
                         s->dir, s->entries[e].name, (long long)covered[e],
                         (long long)want);
  }
  free(covered);
  return st;
}

/* The mesh of the rank files (file 0's; the others were checked equal). */
static tpx_status make_mesh(tpx__merge_set *s, tpx_error *err) {
  const tpx_shard_meta *m = &s->files[0].meta;
  const char *names[TPX_MESH_MAX_DIMS];
  for (int d = 0; d < m->mesh_ndim; d++) names[d] = m->mesh_names[d];
  tpx_error merr;
  tpx_error_clear(&merr);
  if (tpx_mesh_create(names, m->mesh_sizes, m->mesh_ndim, &s->mesh, &merr) !=
          TPX_OK ||
      (m->ep > 1 &&
       tpx_mesh_create_moe(s->mesh, m->ep, &s->moe_mesh, &merr) != TPX_OK))
    return tpx_error_set(err, TPX_VALIDATION, "%s: \"tpx.mesh\": %s",
                         s->files[0].path, merr.message);
  return TPX_OK;
}

tpx_status tpx__merge_set_open(const char *dir, tpx__merge_set *s,
                               tpx_error *err) {
  memset(s, 0, sizeof *s);
  s->dir = dir;
  tpx_status st = list_files(s, err);
  for (size_t i = 0; i < s->num_files && st == TPX_OK; i++)
    st = open_file(s, i, err);
  if (st == TPX_OK && (int64_t)s->num_files != s->files[0].meta.world_size)
    st = tpx_error_set(err, TPX_VALIDATION,
                       "%s: %zu rank files for a mesh of %lld ranks (rank "
                       "%zu is missing)",
                       dir, s->num_files,
                       (long long)s->files[0].meta.world_size, s->num_files);
  if (st == TPX_OK)
    st = make_mesh(s, err);
  if (st == TPX_OK)
    st = collect(s, err);
  if (st == TPX_OK)
    st = coverage(s, err);
  return st;
}

void tpx__merge_set_free(tpx__merge_set *s) {
  for (size_t i = 0; i < s->num_files; i++) {
    tpx_checkpoint_reader_destroy(s->files[i].rd);
    tpx_shard_meta_free(&s->files[i].meta);
    free(s->files[i].path);
  }
  free(s->files);
  tpx_mesh_destroy(s->mesh);
  tpx_mesh_destroy(s->moe_mesh);
  free(s->entries);
  free(s->pieces);
  memset(s, 0, sizeof *s);
}
