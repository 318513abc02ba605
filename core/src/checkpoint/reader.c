/* reader.c — the checkpoint reader object: open and validate (headers via
 * model/st_header.h, the parser tpx_model_add_safetensors uses) and
 * queries. The byte reads are in read.c, the parameter reads (and the
 * model check they start with) in read_params.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "checkpoint/ckpt_internal.h"
#include "model/aliases.h"

void tpx_checkpoint_reader_destroy(tpx_checkpoint_reader *rd) {
  if (rd == NULL)
    return;
  for (size_t i = 0; i < rd->load.num_files; i++) {
    if (rd->maps && rd->maps[i])
      munmap((void *)rd->maps[i], (size_t)rd->load.files[i].size);
    if (rd->fds && rd->fds[i] >= 0)
      close(rd->fds[i]);
  }
  free((void *)rd->maps);
  free(rd->fds);
  tpx__st_load_free(&rd->load);
  free(rd);
}

/* Opens every file of the load, checking it is still the size its header
 * was validated against. */
static tpx_status open_files(tpx_checkpoint_reader *rd, tpx_error *err) {
  size_t n = rd->load.num_files;
  rd->fds = malloc((n ? n : 1) * sizeof *rd->fds);
  if (rd->fds == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory opening files");
  for (size_t i = 0; i < n; i++) rd->fds[i] = -1;
  if (rd->io_method == TPX_CHECKPOINT_IO_MMAP) {
    rd->maps = calloc(n ? n : 1, sizeof *rd->maps);
    if (rd->maps == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory opening files");
  }
  for (size_t i = 0; i < n; i++) {
    const tpx__st_file *f = &rd->load.files[i];
    /* the header was read from a regular file; what is there now may
     * have been swapped for a FIFO, which must not block the open */
    struct stat sb;
    tpx_status st = tpx__file_open(f->path, &rd->fds[i], &sb, err);
    if (st != TPX_OK)
      return st;
    if ((int64_t)sb.st_size != f->size)
      return tpx_error_set(err, TPX_IO,
                           "%s: changed size while being opened (%lld bytes, "
                           "header checked against %lld)",
                           f->path, (long long)sb.st_size, (long long)f->size);
    if (rd->maps && f->size > 0) {
      void *m =
          mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, rd->fds[i], 0);
      if (m == MAP_FAILED)
        return tpx_error_set(err, TPX_IO, "%s: cannot mmap: %s", f->path,
                             strerror(errno));
      rd->maps[i] = m;
    }
  }
  return TPX_OK;
}

tpx_status
tpx_checkpoint_reader_create(const char *path,
                             const tpx_checkpoint_reader_options *opts,
                             tpx_checkpoint_reader **out, tpx_error *err) {
  if (out)
    *out = NULL;
  if (path == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_reader_create: NULL argument");
  tpx_checkpoint_reader_options o = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof o)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_checkpoint_reader_create: options "
                           "struct_size %zu is too small",
                           opts->struct_size);
    o = *opts;
  }
  if (o.num_threads < 0 || o.num_threads > 256 || o.io_method < 0 ||
      o.io_method > TPX_CHECKPOINT_IO_MMAP)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_reader_create: num_threads must be "
                         "0..256 and io_method 0..2");
  tpx_checkpoint_reader *rd = calloc(1, sizeof *rd);
  if (rd == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx__st_load_init(&rd->load);
  rd->num_threads = o.num_threads ? o.num_threads : 4;
  /* mmap by default: see read.c for the measurement. */
  rd->io_method = o.io_method ? o.io_method : TPX_CHECKPOINT_IO_MMAP;
  atomic_init(&rd->bytes_read, 0);
  atomic_init(&rd->read_calls, 0);
  tpx_status st = tpx__st_load_path(&rd->load, path, err);
  if (st == TPX_OK)
    st = open_files(rd, err);
  if (st != TPX_OK) {
    tpx_checkpoint_reader_destroy(rd);
    return st;
  }
  *out = rd;
  return TPX_OK;
}

size_t tpx_checkpoint_num_tensors(const tpx_checkpoint_reader *rd) {
  return rd ? rd->load.n : 0;
}

tpx_status tpx_checkpoint_tensor_info(const tpx_checkpoint_reader *rd, size_t i,
                                      tpx_checkpoint_tensor *out,
                                      tpx_error *err) {
  if (rd == NULL || out == NULL || i >= rd->load.n)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "checkpoint tensor %zu is out of range", i);
  const tpx__st_tensor *t = &rd->load.t[i];
  const tpx__st_file *f = &rd->load.files[t->file];
  memset(out, 0, sizeof *out);
  out->name = t->name;
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  memcpy(out->shape, t->shape, sizeof out->shape);
  out->file = f->path;
  out->data_offset = f->data_start + t->begin;
  out->nbytes = t->end - t->begin;
  return TPX_OK;
}

int64_t tpx_checkpoint_find(const tpx_checkpoint_reader *rd, const char *name) {
  int64_t i;
  if (rd == NULL || name == NULL ||
      !tpx__strmap_find(&rd->load.names, name, strlen(name), &i))
    return -1;
  return i;
}

size_t tpx_checkpoint_num_files(const tpx_checkpoint_reader *rd) {
  return rd ? rd->load.num_files : 0;
}

const char *tpx_checkpoint_file(const tpx_checkpoint_reader *rd, size_t i) {
  return rd && i < rd->load.num_files ? rd->load.files[i].path : NULL;
}

const char *tpx_checkpoint_file_metadata(const tpx_checkpoint_reader *rd,
                                         size_t file, const char *key) {
  if (rd == NULL || key == NULL || file >= rd->load.num_files)
    return NULL;
  return json_string_value(json_object_get(rd->load.files[file].metadata, key));
}

const char *tpx_checkpoint_metadata(const tpx_checkpoint_reader *rd,
                                    const char *key) {
  return tpx_checkpoint_file_metadata(rd, 0, key);
}

size_t tpx__ckpt_threads(const tpx_checkpoint_reader *rd, size_t items) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t n = rd->num_threads > 0 ? (size_t)rd->num_threads : 1;
  if (cpus > 0 && n > (size_t)cpus)
    n = (size_t)cpus;
  return n > items ? (items ? items : 1) : n;
}

int64_t tpx__ckpt_find_param_name(const tpx_checkpoint_reader *rd,
                                  const tpx_model *model, const char *name) {
  int64_t t = tpx_checkpoint_find(rd, name);
  size_t n = tpx_model_num_name_aliases(model);
  char buf[1024];
  for (size_t r = 0; t < 0 && r < n; r++)
    if (tpx__model_alias_name(model, r, name, buf, sizeof buf) == 1)
      t = tpx_checkpoint_find(rd, buf);
  return t;
}

int64_t tpx_checkpoint_param_tensor(const tpx_checkpoint_reader *rd,
                                    const tpx_model *model, int64_t param) {
  tpx_param_info p;
  if (rd == NULL || tpx_model_param(model, param, &p, NULL) != TPX_OK)
    return -1;
  int64_t t = tpx__ckpt_find_param_name(rd, model, p.fqn);
  if (t < 0 && p.tied_to >= 0 &&
      tpx_model_param(model, p.tied_to, &p, NULL) == TPX_OK)
    t = tpx__ckpt_find_param_name(rd, model, p.fqn);
  return t;
}

int64_t tpx_checkpoint_bytes_read(const tpx_checkpoint_reader *rd) {
  return rd ? (int64_t)atomic_load(&rd->bytes_read) : 0;
}

int64_t tpx_checkpoint_read_calls(const tpx_checkpoint_reader *rd) {
  return rd ? (int64_t)atomic_load(&rd->read_calls) : 0;
}
