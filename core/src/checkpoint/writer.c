/* writer.c — a consolidated safetensors checkpoint written in place by one
 * or several processes, without a gather.
 *
 * Layout (a pure function of the entries and options, so every process
 * computes the same): entries sorted by name; one file, or files filled in
 * that order up to max_shard_size data bytes (a tensor that does not fit
 * starts the next file; a tensor larger than the limit gets a file of its
 * own), as Hugging Face's save_pretrained shards. Each file is the 8-byte
 * header length, the JSON header padded with spaces to 8 bytes, and the
 * tensors back to back.
 *
 * Completion protocol: every process writes its pieces into hidden
 * temporaries (writer 0 also writes the headers; no pre-sizing, so a full
 * disk or a file-size limit fails on the write of a named tensor); finish
 * fsyncs them and drops a marker ".FIRST.tpx-done-RANK"; the process that
 * sees all num_writers markers checks every temporary has its full size,
 * renames each to its final name, then writes the index (its own
 * temporary + fsync + rename) and fsyncs the directory. A final name thus
 * only ever names a complete file. A writer destroyed before finishing
 * removes the temporaries.
 *
 * Temporaries in a directory others can write to: a single writer's are
 * ".NAME.tpx-tmp.PID.N" created with O_CREAT|O_EXCL|O_NOFOLLOW (a new
 * name on a clash), so two writers never share one and a link planted at
 * the name is never followed; the processes of one multi-process write
 * must share theirs, ".NAME.tpx-tmp", opened with O_NOFOLLOW and refused
 * unless a regular file with one link (stale ones of a crashed run must be
 * removed before the next). rename() replaces whatever is at a final name, a
 * link included, without following it. */
#define _GNU_SOURCE /* sync_file_range */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/writer_impl.h"

static tpx_status oom(tpx_error *err) {
  return tpx_error_set(err, TPX_NO_MEMORY,
                       "out of memory writing a checkpoint");
}

static char *path_join(const char *dir, const char *prefix, const char *name,
                       const char *suffix) {
  size_t n = strlen(dir) + strlen(prefix) + strlen(name) + strlen(suffix) + 2;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%s%s%s", dir, prefix, name, suffix);
  return p;
}

static int by_entry_name(const void *a, const void *b) {
  return strcmp(((const tpx__wentry *)a)->e.name,
                ((const tpx__wentry *)b)->e.name);
}

void tpx_checkpoint_writer_destroy(tpx_checkpoint_writer *w) {
  if (w == NULL)
    return;
  for (size_t i = 0; i < w->num_files; i++) {
    tpx__wfile *f = &w->files[i];
    if (f->fd >= 0)
      close(f->fd);
    if (!w->finished && f->tmp_path)
      unlink(f->tmp_path);
    free(f->name);
    free(f->final_path);
    free(f->tmp_path);
    free(f->header);
  }
  for (size_t i = 0; i < w->num_entries; i++)
    free((char *)w->entries[i].e.name);
  free(w->entries);
  free(w->files);
  tpx__strmap_free(&w->names);
  free(w->dir);
  free(w);
}

/* Checks and copies the entries, sorted by name. */
static tpx_status copy_entries(tpx_checkpoint_writer *w,
                               const tpx_checkpoint_entry *entries,
                               const int64_t *sources, size_t n,
                               tpx_error *err) {
  w->entries = calloc(n ? n : 1, sizeof *w->entries);
  if (w->entries == NULL)
    return oom(err);
  for (size_t i = 0; i < n; i++) {
    const tpx_checkpoint_entry *e = &entries[i];
    if (e->name == NULL || e->name[0] == '\0' || e->ndim < 0 ||
        e->ndim > TPX_MAX_TENSOR_DIMS || tpx_dtype_size(e->dtype) == 0)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "checkpoint entry %zu ('%s'): needs a name, a "
                           "dtype and 0..%d dims",
                           i, e->name ? e->name : "", TPX_MAX_TENSOR_DIMS);
    int64_t numel = tpx__shape_numel(e->shape, e->ndim);
    if (numel < 0)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "checkpoint entry '%s': negative or too large "
                           "shape",
                           e->name);
    tpx__wentry *we = &w->entries[i];
    we->e = *e;
    we->source = sources ? sources[i] : -1;
    we->e.name = strdup(e->name);
    w->num_entries = i + 1;
    if (we->e.name == NULL)
      return oom(err);
    we->nbytes = numel * (int64_t)tpx_dtype_size(e->dtype);
  }
  qsort(w->entries, n, sizeof *w->entries, by_entry_name);
  for (size_t i = 0; i < n; i++) {
    const char *nm = w->entries[i].e.name;
    int r = tpx__strmap_put(&w->names, nm, strlen(nm), (int64_t)i, NULL);
    if (r < 0)
      return oom(err);
    if (r == 1)
      return tpx_error_set(err, TPX_ALREADY_EXISTS,
                           "checkpoint entry '%s' is listed twice", nm);
  }
  return TPX_OK;
}

/* Assigns entries to files and data offsets. */
static tpx_status plan_files(tpx_checkpoint_writer *w, int64_t max_shard,
                             const char *single, tpx_error *err) {
  size_t nf = 0;
  int64_t cur = 0;
  for (size_t i = 0; i < w->num_entries; i++) {
    tpx__wentry *e = &w->entries[i];
    if (nf == 0 || (max_shard > 0 && cur > 0 && cur + e->nbytes > max_shard)) {
      nf++;
      cur = 0;
    }
    e->file = (int)nf - 1;
    e->offset = cur; /* relative to the data section for now */
    cur += e->nbytes;
  }
  if (nf == 0)
    nf = 1; /* an empty checkpoint is one empty file */
  w->files = calloc(nf, sizeof *w->files);
  if (w->files == NULL)
    return oom(err);
  w->num_files = nf;
  w->sharded = nf > 1;
  for (size_t f = 0; f < nf; f++) {
    w->files[f].fd = -1;
    char name[64];
    if (w->sharded)
      snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", f + 1,
               nf);
    w->files[f].name = strdup(w->sharded ? name : single);
    if (w->files[f].name == NULL)
      return oom(err);
    w->files[f].final_path = path_join(w->dir, "", w->files[f].name, "");
    /* a single writer's temporary is named when it is created */
    w->files[f].tmp_path =
        w->num_writers > 1
            ? path_join(w->dir, ".", w->files[f].name, ".tpx-tmp")
            : NULL;
    if (!w->files[f].final_path ||
        (w->num_writers > 1 && !w->files[f].tmp_path))
      return oom(err);
  }
  return TPX_OK;
}

/* Page size the copies align to (tpx__ckpt_writer_create_from). */
#define COPY_PAGE 4096

/* The padded header length of file f whose JSON is `len` bytes: a
 * multiple of 8, plus the spaces that put the most kernel-copied bytes at
 * their source's offset modulo the page (in 8-byte steps: the data section
 * stays 8-aligned). */
static size_t header_padding(const tpx_checkpoint_writer *w, size_t f,
                             size_t len) {
  size_t padded = (len + 7) / 8 * 8;
  int64_t *weight = NULL;
  for (size_t i = 0; i < w->num_entries; i++) {
    const tpx__wentry *e = &w->entries[i];
    if (e->file != (int)f || e->source < 0)
      continue;
    if (weight == NULL &&
        (weight = calloc(COPY_PAGE / 8, sizeof *weight)) == NULL)
      return padded; /* best effort */
    /* the data section's start that lands e on its source's page offset */
    int64_t want =
        ((e->source - e->offset) % COPY_PAGE + COPY_PAGE) % COPY_PAGE;
    if (want % 8 == 0)
      weight[want / 8] += e->nbytes;
  }
  if (weight == NULL)
    return padded;
  size_t best = 0;
  for (size_t r = 1; r < COPY_PAGE / 8; r++)
    if (weight[r] > weight[best])
      best = r;
  if (weight[best] > 0) {
    size_t at = (8 + padded) % COPY_PAGE, to = best * 8;
    padded += (to + COPY_PAGE - at) % COPY_PAGE;
  }
  free(weight);
  return padded;
}

/* Header JSON of every file, padded to 8 bytes (and to the copies' page
 * offset: header_padding); absolute offsets. */
static tpx_status build_headers(tpx_checkpoint_writer *w,
                                const tpx_checkpoint_writer_options *o,
                                tpx_error *err) {
  for (size_t f = 0; f < w->num_files; f++) {
    json_t *root = json_object(), *meta = json_object();
    int bad = root == NULL || meta == NULL;
    if (o->num_metadata == 0)
      bad |= json_object_set_new(meta, "format", json_string("pt"));
    for (size_t k = 0; k < o->num_metadata && !bad; k++)
      bad |= json_object_set_new(meta, o->metadata_keys[k],
                                 json_string(o->metadata_values[k]));
    if (!bad)
      bad |= json_object_set_new(root, "__metadata__", meta);
    else
      json_decref(meta);
    for (size_t i = 0; i < w->num_entries && !bad; i++) {
      const tpx__wentry *e = &w->entries[i];
      if (e->file != (int)f)
        continue;
      json_t *shape = json_array();
      for (int d = 0; d < e->e.ndim && shape; d++)
        bad |= json_array_append_new(shape, json_integer(e->e.shape[d]));
      json_t *t = json_pack("{s:s, s:o, s:[I,I]}", "dtype",
                            tpx_dtype_safetensors_name(e->e.dtype), "shape",
                            shape, "data_offsets", (json_int_t)e->offset,
                            (json_int_t)(e->offset + e->nbytes));
      bad |= t == NULL || json_object_set_new(root, e->e.name, t);
    }
    char *text = bad ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (text == NULL)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "cannot build the header of %s (metadata keys and "
                           "values must be UTF-8 strings)",
                           w->files[f].name);
    size_t len = strlen(text), padded = header_padding(w, f, len);
    tpx__wfile *wf = &w->files[f];
    wf->header = malloc(8 + padded);
    if (wf->header == NULL) {
      free(text);
      return oom(err);
    }
    for (int b = 0; b < 8; b++)
      wf->header[b] = (char)(((uint64_t)padded >> (8 * b)) & 0xff);
    memcpy(wf->header + 8, text, len);
    memset(wf->header + 8 + len, ' ', padded - len);
    free(text);
    wf->header_len = 8 + padded;
    wf->size = (int64_t)wf->header_len;
  }
  for (size_t i = 0; i < w->num_entries; i++) {
    tpx__wentry *e = &w->entries[i];
    tpx__wfile *wf = &w->files[e->file];
    e->offset += (int64_t)wf->header_len;
    if (e->offset + e->nbytes > wf->size)
      wf->size = e->offset + e->nbytes;
  }
  return TPX_OK;
}

static tpx_status write_all(int fd, const void *buf, size_t len, int64_t off,
                            const char *file, const char *what,
                            tpx_error *err) {
  size_t done = 0;
  while (done < len) {
    ssize_t r = pwrite(fd, (const char *)buf + done, len - done,
                       (off_t)(off + (int64_t)done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return tpx_error_set(err, TPX_IO,
                           "%s: %s: writing %zu bytes at offset %lld: %s", file,
                           what, len - done, (long long)(off + (int64_t)done),
                           r < 0 ? strerror(errno) : "no progress");
    done += (size_t)r;
  }
  return TPX_OK;
}

int tpx__ckpt_create_unique(const char *dir, const char *name,
                            char **path_out) {
  static atomic_uint counter;
  *path_out = NULL;
  for (int tries = 0; tries < 100; tries++) {
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".tpx-tmp.%ld.%u", (long)getpid(),
             atomic_fetch_add(&counter, 1u));
    char *p = path_join(dir, ".", name, suffix);
    if (p == NULL) {
      errno = ENOMEM;
      return -1;
    }
    int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      *path_out = p;
      return fd;
    }
    int e = errno;
    free(p);
    errno = e;
    if (e != EEXIST)
      return -1;
  }
  return -1;
}

/* The shared temporary of a multi-process write: never through a link,
 * never anything but a regular file of one name (a hard link planted at
 * the name would make the writes land in another file). */
static int open_shared(const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  struct stat sb;
  if (fd >= 0 &&
      (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 1)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

static tpx_status open_temps(tpx_checkpoint_writer *w, tpx_error *err) {
  for (size_t f = 0; f < w->num_files; f++) {
    tpx__wfile *wf = &w->files[f];
    wf->fd = w->num_writers > 1
                 ? open_shared(wf->tmp_path)
                 : tpx__ckpt_create_unique(w->dir, wf->name, &wf->tmp_path);
    if (wf->fd < 0)
      return tpx_error_set(
          err, TPX_IO, "%s: cannot create %s: %s", wf->final_path,
          wf->tmp_path ? wf->tmp_path : "its temporary", strerror(errno));
    if (w->writer_rank == 0) {
      tpx_status st = write_all(wf->fd, wf->header, wf->header_len, 0,
                                wf->final_path, "header", err);
      if (st != TPX_OK)
        return st;
    }
  }
  return TPX_OK;
}

tpx_status tpx_checkpoint_writer_create(
    const char *dir, const tpx_checkpoint_entry *entries, size_t num_entries,
    const tpx_checkpoint_writer_options *opts, tpx_checkpoint_writer **out,
    tpx_error *err) {
  return tpx__ckpt_writer_create_from(dir, entries, NULL, num_entries, opts,
                                      out, err);
}

tpx_status
tpx__ckpt_writer_create_from(const char *dir,
                             const tpx_checkpoint_entry *entries,
                             const int64_t *sources, size_t num_entries,
                             const tpx_checkpoint_writer_options *opts,
                             tpx_checkpoint_writer **out, tpx_error *err) {
  if (out)
    *out = NULL;
  if (dir == NULL || out == NULL || (entries == NULL && num_entries > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_writer_create: NULL argument");
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof o)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_checkpoint_writer_create: options "
                           "struct_size %zu is too small",
                           opts->struct_size);
    o = *opts;
  }
  if (o.max_shard_size < 0 || o.num_writers < 1 || o.writer_rank < 0 ||
      o.writer_rank >= o.num_writers ||
      (o.num_metadata && (!o.metadata_keys || !o.metadata_values)))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_writer_create: max_shard_size >= 0, "
                         "0 <= writer_rank < num_writers, metadata arrays "
                         "needed");
  const char *single = o.file_name ? o.file_name : "model.safetensors";
  if (single[0] == '\0' || strchr(single, '/'))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_writer_create: file name '%s' must "
                         "be a plain name",
                         single);
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return tpx_error_set(err, TPX_IO, "%s: cannot use the directory: %s", dir,
                         strerror(errno));
  if (!S_ISDIR(sb.st_mode)) /* errno says nothing here */
    return tpx_error_set(err, TPX_IO, "%s: not a directory", dir);
  tpx_checkpoint_writer *w = calloc(1, sizeof *w);
  if (w == NULL)
    return oom(err);
  tpx__strmap_init(&w->names);
  atomic_init(&w->bytes, 0);
  w->num_writers = o.num_writers;
  w->writer_rank = o.writer_rank;
  w->dir = strdup(dir);
  tpx_status st = w->dir ? TPX_OK : oom(err);
  if (st == TPX_OK)
    st = copy_entries(w, entries, sources, num_entries, err);
  if (st == TPX_OK)
    st = plan_files(w, o.max_shard_size, single, err);
  if (st == TPX_OK)
    st = build_headers(w, &o, err);
  if (st == TPX_OK)
    st = open_temps(w, err);
  if (st != TPX_OK) {
    tpx_checkpoint_writer_destroy(w);
    return st;
  }
  *out = w;
  return TPX_OK;
}

size_t tpx_checkpoint_writer_num_files(const tpx_checkpoint_writer *w) {
  return w ? w->num_files : 0;
}

const char *tpx_checkpoint_writer_file(const tpx_checkpoint_writer *w,
                                       size_t i) {
  return w && i < w->num_files ? w->files[i].name : NULL;
}

int64_t tpx_checkpoint_bytes_written(const tpx_checkpoint_writer *w) {
  return w ? (int64_t)atomic_load(&w->bytes) : 0;
}

/* Starts writing a large written range to disk now, without waiting, so
 * that finish's fsync finds most of the data there already: the disk works
 * while the caller reads and cuts the next pieces (as `cp` followed by
 * `sync` lets it), instead of idling until the fsync. Best effort: an
 * error here surfaces at the fsync. */
void tpx__ckpt_start_writeback(int fd, int64_t off, int64_t len) {
#ifdef SYNC_FILE_RANGE_WRITE
  if (len >= (1 << 20))
    (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
#else
  (void)fd;
  (void)off;
  (void)len;
#endif
}

tpx_status tpx_checkpoint_write_slice(tpx_checkpoint_writer *w,
                                      const char *name, const tpx_slice *slice,
                                      tpx_dtype dtype, const void *src,
                                      tpx_error *err) {
  int64_t idx;
  if (w == NULL || name == NULL ||
      !tpx__strmap_find(&w->names, name, strlen(name), &idx))
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "tpx_checkpoint_write_slice: '%s' is not an entry of "
                         "the checkpoint",
                         name ? name : "(null)");
  if (w->finished)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tensor '%s': the writer has finished", name);
  const tpx__wentry *e = &w->entries[idx];
  tpx__wfile *wf = &w->files[e->file];
  if (!tpx__ckpt_can_convert(dtype, e->e.dtype))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "%s: tensor '%s': cannot write %s data as %s",
                         wf->final_path, name, tpx_dtype_short_name(dtype),
                         tpx_dtype_short_name(e->e.dtype));
  tpx__box_runs g;
  tpx_status st =
      tpx__box_runs_init(e->e.shape, e->e.ndim, slice, name, &g, err);
  if (st != TPX_OK || g.numel == 0)
    return st;
  if (src == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "tensor '%s': NULL source",
                         name);
  size_t esz = tpx_dtype_size(e->e.dtype), ssz = tpx_dtype_size(dtype);
  size_t run_bytes = (size_t)g.run_elems * esz;
  char *bounce = NULL;
  if (dtype != e->e.dtype && (bounce = malloc(run_bytes)) == NULL)
    return oom(err);
  char what[300];
  snprintf(what, sizeof what, "tensor '%s' (temporary %s)", name, wf->tmp_path);
  const char *in = src;
  for (int64_t r = 0; r < g.num_runs && st == TPX_OK; r++) {
    const void *buf = in;
    if (bounce) {
      st = tpx_checkpoint_convert(bounce, e->e.dtype, in, dtype,
                                  (size_t)g.run_elems, err);
      buf = bounce;
    }
    if (st == TPX_OK)
      st = write_all(wf->fd, buf, run_bytes,
                     e->offset + tpx__box_run_start(&g, r) * (int64_t)esz,
                     wf->final_path, what, err);
    in += (size_t)g.run_elems * ssz;
  }
  free(bounce);
  if (st == TPX_OK) {
    atomic_fetch_add(&w->bytes, (long long)(g.numel * (int64_t)esz));
    int64_t first = e->offset + tpx__box_run_start(&g, 0) * (int64_t)esz;
    int64_t end = e->offset +
                  tpx__box_run_start(&g, g.num_runs - 1) * (int64_t)esz +
                  (int64_t)run_bytes;
    tpx__ckpt_start_writeback(wf->fd, first, end - first);
  }
  return st;
}
