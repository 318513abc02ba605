/* safetensors.c — import tensor names, shapes and dtypes from safetensors
 * headers (one model.safetensors, or a model.safetensors.index.json and its
 * shards) into a tpx_model. Reads only the 8-byte length and the JSON header
 * of each file, never tensor data, and validates the header against the file
 * size. Not a safetensors reader/writer: no data access at all (the parser
 * is shared with the checkpoint reader through model/st_header.h).
 *
 * Order: tensors are added in natural name order ("layers.2" before
 * "layers.10"), because files list them alphabetically and torch's module
 * order is not recorded; layer containers then come out in index order. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/grow.h"
#include "model/config.h"
#include "model/conversion_load.h"
#include "model/buffer_rules.h"
#include "model/expert_fold.h"
#include "model/model_impl.h"
#include "model/fp8_view.h"
#include "model/st_header.h"
#include "model/st_members.h"
#include "model/strmap.h"

#define HEADER_MAX ((uint64_t)100 * 1024 * 1024)
#define INDEX_MAX ((size_t)100 * 1024 * 1024)

void tpx__st_load_free(tpx__st_load *l) {
  for (size_t i = 0; i < l->num_files; i++) json_decref(l->files[i].metadata);
  free(l->t);
  free(l->files);
  tpx__arena_free(&l->arena);
  tpx__strmap_free(&l->names);
}

static tpx_status oom(tpx_error *err) {
  return tpx_error_set(err, TPX_NO_MEMORY,
                       "out of memory reading safetensors headers");
}

/* ---- one file's header ---- */

static uint64_t le64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

/* Reads the header bytes of `path` (malloc'd into *out, *len bytes) and the
 * file size. */
static tpx_status read_header(const char *path, char **out, size_t *len,
                              uint64_t *file_size, tpx_error *err) {
  *out = NULL;
  int fd;
  struct stat sb;
  tpx_status st = tpx__file_open(path, &fd, &sb, err);
  if (st != TPX_OK)
    return st;
  uint64_t size = (uint64_t)sb.st_size;
  unsigned char lenbuf[8];
  if (size < 8 || pread(fd, lenbuf, 8, 0) != 8) {
    close(fd);
    return tpx_error_set(err, TPX_PARSE,
                         "%s: file of %llu bytes is too short for a "
                         "safetensors header (8-byte length + JSON)",
                         path, (unsigned long long)size);
  }
  uint64_t n = le64(lenbuf);
  if (n > HEADER_MAX) {
    close(fd);
    return tpx_error_set(err, TPX_PARSE,
                         "%s: header length %llu exceeds the 100 MB limit "
                         "(not a safetensors file?)",
                         path, (unsigned long long)n);
  }
  if (n > size - 8) {
    close(fd);
    return tpx_error_set(err, TPX_PARSE,
                         "%s: header length %llu is beyond the end of the "
                         "file (%llu bytes)",
                         path, (unsigned long long)n, (unsigned long long)size);
  }
  char *buf = malloc(n ? (size_t)n : 1);
  if (buf == NULL) {
    close(fd);
    return oom(err);
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, (size_t)n - got, (off_t)(8 + got));
    if (r <= 0) {
      free(buf);
      close(fd);
      return tpx_error_set(err, TPX_IO, "%s: cannot read the header", path);
    }
    got += (size_t)r;
  }
  close(fd);
  *out = buf;
  *len = (size_t)n;
  *file_size = size;
  return TPX_OK;
}

static int json_nonneg_int(const json_t *v, int64_t *out) {
  if (!json_is_integer(v))
    return 0;
  *out = (int64_t)json_integer_value(v);
  return 1;
}

/* Validates one tensor entry of `path`'s header into *t. */
static tpx_status parse_entry(const char *path, const char *name, json_t *v,
                              int64_t data_len, tpx__st_tensor *t,
                              tpx_error *err) {
  char sbuf[200];
  if (!json_is_object(v))
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': entry must be an object with "
                         "dtype, shape and data_offsets",
                         path, name);
  json_t *dtype = json_object_get(v, "dtype");
  json_t *shape = json_object_get(v, "shape");
  json_t *offs = json_object_get(v, "data_offsets");
  if (!json_is_string(dtype))
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': \"dtype\" must be a string", path,
                         name);
  t->dtype = tpx__model_dtype_from_st(json_string_value(dtype));
  if (t->dtype == TPX_DTYPE_INVALID)
    return tpx_error_set(err, TPX_PARSE, "%s: tensor '%s': unknown dtype '%s'",
                         path, name, json_string_value(dtype));
  if (!json_is_array(shape))
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': \"shape\" must be a list of "
                         "integers",
                         path, name);
  size_t ndim = json_array_size(shape);
  if (ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': \"shape\" has %zu dims (at most %d "
                         "supported)",
                         path, name, ndim, TPX_MAX_TENSOR_DIMS);
  t->ndim = (int)ndim;
  for (size_t i = 0; i < ndim; i++) {
    if (!json_nonneg_int(json_array_get(shape, i), &t->shape[i]))
      return tpx_error_set(err, TPX_PARSE,
                           "%s: tensor '%s': \"shape\"[%zu] must be an "
                           "integer",
                           path, name, i);
    if (t->shape[i] < 0)
      return tpx_error_set(err, TPX_PARSE,
                           "%s: tensor '%s': \"shape\"[%zu] is negative "
                           "(%lld)",
                           path, name, i, (long long)t->shape[i]);
  }
  int64_t numel = tpx__shape_numel(t->shape, t->ndim);
  if (numel < 0)
    return tpx_error_set(
        err, TPX_PARSE, "%s: tensor '%s': shape %s is too large", path, name,
        tpx__format_shape(sbuf, sizeof sbuf, t->shape, t->ndim));
  if (!json_is_array(offs) || json_array_size(offs) != 2 ||
      !json_nonneg_int(json_array_get(offs, 0), &t->begin) ||
      !json_nonneg_int(json_array_get(offs, 1), &t->end))
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': \"data_offsets\" must be [begin, "
                         "end] integers",
                         path, name);
  if (t->begin < 0 || t->begin > t->end)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': \"data_offsets\" [%lld, %lld] "
                         "need 0 <= begin <= end",
                         path, name, (long long)t->begin, (long long)t->end);
  if (t->end > data_len)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': \"data_offsets\" [%lld, %lld] are "
                         "beyond the end of the file (data section holds "
                         "%lld bytes)",
                         path, name, (long long)t->begin, (long long)t->end,
                         (long long)data_len);
  int64_t bytes = numel * (int64_t)tpx__model_dtype_size(t->dtype);
  if (t->end - t->begin != bytes)
    return tpx_error_set(
        err, TPX_PARSE,
        "%s: tensor '%s': \"data_offsets\" [%lld, %lld] span "
        "%lld bytes but shape %s of %s needs %lld",
        path, name, (long long)t->begin, (long long)t->end,
        (long long)(t->end - t->begin),
        tpx__format_shape(sbuf, sizeof sbuf, t->shape, t->ndim),
        tpx__model_dtype_st_name(t->dtype), (long long)bytes);
  return TPX_OK;
}

/* qsort has no context argument, and a global would make two imports on two
 * threads race, so the sort keys travel with the elements. */
typedef struct span {
  int64_t begin, end;
  size_t tensor;
} span;

static int by_begin(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* Non-empty tensors t[first..l->n) of one file must not share bytes. */
static tpx_status check_overlaps(tpx__st_load *l, size_t first,
                                 const char *path, tpx_error *err) {
  size_t count = l->n - first, k = 0;
  if (count < 2)
    return TPX_OK;
  span *sp = malloc(count * sizeof *sp);
  if (sp == NULL)
    return oom(err);
  for (size_t i = first; i < l->n; i++)
    if (l->t[i].end > l->t[i].begin)
      sp[k++] = (span){l->t[i].begin, l->t[i].end, i};
  qsort(sp, k, sizeof *sp, by_begin);
  tpx_status st = TPX_OK;
  for (size_t i = 1; i < k && st == TPX_OK; i++) {
    const tpx__st_tensor *a = &l->t[sp[i - 1].tensor], *b = &l->t[sp[i].tensor];
    if (b->begin < a->end)
      st = tpx_error_set(err, TPX_PARSE,
                         "%s: tensors '%s' [%lld, %lld] and '%s' [%lld, %lld] "
                         "have overlapping data_offsets",
                         path, a->name, (long long)a->begin, (long long)a->end,
                         b->name, (long long)b->begin, (long long)b->end);
  }
  free(sp);
  return st;
}

void tpx__st_load_init(tpx__st_load *l) {
  memset(l, 0, sizeof *l);
  tpx__strmap_init(&l->names);
}

/* Appends file `path` to the load: its index, or -1 when out of memory. */
static int add_file(tpx__st_load *l, const char *path, size_t len,
                    uint64_t file_size) {
  tpx__st_file *files =
      realloc(l->files, (l->num_files + 1) * sizeof *l->files);
  if (files == NULL)
    return -1;
  l->files = files;
  char *pcopy = tpx__arena_strndup(&l->arena, path, strlen(path));
  if (pcopy == NULL)
    return -1;
  files[l->num_files] =
      (tpx__st_file){pcopy, (int64_t)(8 + len), (int64_t)file_size, NULL};
  return (int)l->num_files++;
}

/* One member of file `file`'s header: "__metadata__", or tensor `key`
 * (klen bytes, NUL-terminated, in the load's arena) with entry v. */
static tpx_status add_member(tpx__st_load *l, const char *path, int file,
                             const char *key, size_t klen, json_t *v,
                             int64_t data_len, tpx_error *err) {
  if (strcmp(key, "__metadata__") == 0) {
    if (!json_is_object(v))
      return tpx_error_set(err, TPX_PARSE,
                           "%s: \"__metadata__\" must be an object", path);
    if (l->files[file].metadata != NULL)
      return tpx_error_set(err, TPX_PARSE,
                           "%s: header has a duplicate object key: "
                           "\"__metadata__\" appears twice",
                           path);
    l->files[file].metadata = json_incref(v);
    return TPX_OK;
  }
  if (klen == 0 || strlen(key) != klen ||
      tpx__model_check_fqn(key, klen, "tensor", NULL) != TPX_OK)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%s': invalid name (empty, or an empty "
                         "component between dots)",
                         path, key);
  size_t depth = 1;
  for (size_t i = 0; i < klen; i++) depth += key[i] == '.';
  if (depth > TPX__ST_MAX_NAME_DEPTH)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: tensor '%.60s...' (%zu characters): its name "
                         "has %zu dot-separated components, more than the "
                         "%d tpx accepts",
                         path, key, klen, depth, TPX__ST_MAX_NAME_DEPTH);
  if (TPX_GROW(l->t, l->cap, l->n + 1, 256))
    return oom(err);
  tpx__st_tensor *t = &l->t[l->n];
  memset(t, 0, sizeof *t);
  tpx_status st = parse_entry(path, key, v, data_len, t, err);
  if (st != TPX_OK)
    return st;
  t->name = key;
  t->name_len = klen;
  t->file = file;
  int64_t other;
  int r = tpx__strmap_put(&l->names, t->name, klen, (int64_t)l->n, &other);
  if (r < 0)
    return oom(err);
  if (r == 1 && l->t[other].file == file)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: header has a duplicate object key: tensor "
                         "'%s' appears twice",
                         path, key);
  if (r == 1)
    return tpx_error_set(err, TPX_PARSE, "%s: tensor '%s' also appears in %s",
                         path, key, l->files[l->t[other].file].path);
  l->n++;
  return TPX_OK;
}

static tpx_status json_fault(const char *path, size_t at,
                             const json_error_t *jerr, tpx_error *err) {
  return tpx_error_set(
      err, TPX_PARSE, "%s: header is not valid JSON (byte %zu: %s)", path,
      at + (size_t)(jerr->position > 0 ? jerr->position : 0), jerr->text);
}

/* The header's members one at a time (st_members.h), each value parsed
 * on its own and dropped once read. */
static tpx_status parse_members(tpx__st_load *l, const char *path,
                                const char *header, size_t len, int file,
                                int64_t data_len, tpx_error *err) {
  size_t pos = 0;
  tpx__st_member m;
  tpx_status st = TPX_OK;
  while (st == TPX_OK && tpx__st_next_member(header, len, &pos, &m) == 1) {
    json_error_t jerr;
    const char *key = header + m.key;
    size_t klen = m.key_len;
    json_t *k = NULL;
    if (!m.plain) { /* escapes or UTF-8: jansson decodes (and checks) it */
      k = json_loadb(header + m.key - 1, m.key_len + 2, JSON_DECODE_ANY, &jerr);
      if (k == NULL)
        return json_fault(path, m.key - 1, &jerr, err);
      key = json_string_value(k);
      klen = json_string_length(k);
    }
    char *name = tpx__arena_strndup(&l->arena, key, klen);
    json_decref(k);
    if (name == NULL)
      return oom(err);
    /* A repeated key inside an entry would otherwise keep the last. */
    json_t *v = json_loadb(header + m.value, m.value_len,
                           JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL)
      return json_fault(path, m.value, &jerr, err);
    st = add_member(l, path, file, name, klen, v, data_len, err);
    json_decref(v);
  }
  return st;
}

/* The whole header as one document: only for a header st_members.h finds
 * misshapen, so the message is jansson's. */
static tpx_status parse_whole(tpx__st_load *l, const char *path,
                              const char *header, size_t len,
                              uint64_t file_size, int64_t data_len,
                              tpx_error *err) {
  json_error_t jerr;
  json_t *hdr = json_loadb(header, len, JSON_REJECT_DUPLICATES, &jerr);
  if (hdr == NULL)
    return json_fault(path, 0, &jerr, err);
  if (!json_is_object(hdr)) {
    json_decref(hdr);
    return tpx_error_set(err, TPX_PARSE, "%s: header must be a JSON object",
                         path);
  }
  size_t first = l->n;
  int file = add_file(l, path, len, file_size);
  tpx_status st = file < 0 ? oom(err) : TPX_OK;
  const char *key;
  json_t *v;
  json_object_foreach(hdr, key, v) {
    if (st != TPX_OK)
      break;
    size_t klen = strlen(key);
    char *name = tpx__arena_strndup(&l->arena, key, klen);
    st = name ? add_member(l, path, file, name, klen, v, data_len, err)
              : oom(err);
  }
  json_decref(hdr);
  if (st == TPX_OK)
    st = check_overlaps(l, first, path, err);
  return st;
}

tpx_status tpx__st_parse_header(tpx__st_load *l, const char *path,
                                const char *header, size_t len,
                                uint64_t file_size, tpx_error *err) {
  if (len > file_size || file_size - len < 8)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: header length %zu is beyond the end of the "
                         "file (%llu bytes)",
                         path, len, (unsigned long long)file_size);
  int64_t data_len = (int64_t)(file_size - 8 - len);
  /* Count the entries first: a header over the limit is refused before
   * anything of it is parsed. */
  size_t pos = 0, count = 0;
  tpx__st_member m;
  int r;
  while ((r = tpx__st_next_member(header, len, &pos, &m)) == 1) count++;
  if (r < 0)
    return parse_whole(l, path, header, len, file_size, data_len, err);
  if (count > TPX__ST_MAX_TENSORS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: header lists %zu entries, more than the %d "
                         "tensors tpx reads from one checkpoint",
                         path, count, TPX__ST_MAX_TENSORS);
  if (l->n > TPX__ST_MAX_TENSORS - count)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: header lists %zu entries; with the %zu tensors "
                         "of the files read before it, more than the %d "
                         "tensors tpx reads from one checkpoint",
                         path, count, l->n, TPX__ST_MAX_TENSORS);
  int file = add_file(l, path, len, file_size);
  if (file < 0)
    return oom(err);
  size_t first = l->n;
  tpx_status st = parse_members(l, path, header, len, file, data_len, err);
  if (st == TPX_OK)
    st = check_overlaps(l, first, path, err);
  return st;
}

/* Reads one safetensors file and appends its tensors to the load. */
static tpx_status load_file(tpx__st_load *l, const char *path, tpx_error *err) {
  char *buf = NULL;
  size_t len = 0;
  uint64_t size = 0;
  tpx_status st = read_header(path, &buf, &len, &size, err);
  if (st != TPX_OK)
    return st;
  st = tpx__st_parse_header(l, path, buf, len, size, err);
  free(buf);
  return st;
}

/* ---- index ---- */

static char *join_path(const char *dir, size_t dlen, const char *name) {
  size_t nlen = strlen(name);
  char *p = malloc(dlen + 1 + nlen + 1);
  if (p == NULL)
    return NULL;
  memcpy(p, dir, dlen);
  p[dlen] = '/';
  memcpy(p + dlen + 1, name, nlen + 1);
  return p;
}

static tpx_status load_index(tpx__st_load *l, const char *path,
                             tpx_error *err) {
  char *text;
  size_t len;
  tpx_status st = tpx__file_read(path, INDEX_MAX, &text, &len, err);
  if (st != TPX_OK)
    return st;
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (root == NULL)
    return tpx_error_set(err, TPX_PARSE, "%s: invalid JSON at line %d: %s",
                         path, jerr.line, jerr.text);
  json_t *map = json_object_get(root, "weight_map");
  if (!json_is_object(root) || !json_is_object(map)) {
    json_decref(root);
    return tpx_error_set(err, TPX_PARSE,
                         "%s: an index must be a JSON object with a "
                         "\"weight_map\" object",
                         path);
  }
  const char *slash = strrchr(path, '/');
  const char *dir = slash ? path : ".";
  size_t dlen = slash ? (size_t)(slash - path) : 1;
  if (slash == path)
    dlen = 0; /* "/model.safetensors.index.json": files live in "/" */
  tpx__strmap shards = TPX__STRMAP_INIT;
  const char *key;
  json_t *v;
  /* Pass 1: check entries and read each distinct shard once. */
  json_object_foreach(map, key, v) {
    if (!json_is_string(v)) {
      st = tpx_error_set(err, TPX_PARSE,
                         "%s: weight_map[\"%s\"] must be a file name string",
                         path, key);
      break;
    }
    const char *shard = json_string_value(v);
    if (shard[0] == '\0' || strchr(shard, '/') != NULL ||
        strcmp(shard, ".") == 0 || strcmp(shard, "..") == 0) {
      st = tpx_error_set(err, TPX_PARSE,
                         "%s: weight_map[\"%s\"] = \"%s\" must be a file name "
                         "in the index's directory",
                         path, key, shard);
      break;
    }
    int r = tpx__strmap_put(&shards, shard, strlen(shard),
                            (int64_t)l->num_files, NULL);
    if (r < 0) {
      st = oom(err);
      break;
    }
    if (r == 1)
      continue;
    char *file = join_path(dir, dlen, shard);
    if (file == NULL) {
      st = oom(err);
      break;
    }
    struct stat sb;
    if (stat(file, &sb) != 0) {
      st = tpx_error_set(err, TPX_NOT_FOUND,
                         "%s: weight_map[\"%s\"] points to missing file %s",
                         path, key, file);
      free(file);
      break;
    }
    st = load_file(l, file, err);
    free(file);
    if (st != TPX_OK)
      break;
  }
  /* Pass 2: every listed tensor is where the index says. */
  if (st == TPX_OK) {
    json_object_foreach(map, key, v) {
      const char *shard = json_string_value(v);
      int64_t file = -1, t = -1;
      tpx__strmap_find(&shards, shard, strlen(shard), &file);
      if (!tpx__strmap_find(&l->names, key, strlen(key), &t) ||
          l->t[t].file != file) {
        st = tpx_error_set(err, TPX_PARSE,
                           "%s: weight_map lists tensor '%s' in %s, but that "
                           "file's header does not hold it",
                           path, key, shard);
        break;
      }
    }
  }
  tpx__strmap_free(&shards);
  json_decref(root);
  return st;
}

/* ---- into the model ---- */

/* Natural order: digit runs compare as numbers ("2" < "10"). */
static int natural_cmp(const char *a, const char *b) {
  const char *a0 = a, *b0 = b;
  while (*a && *b) {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      while (*a == '0') a++;
      while (*b == '0') b++;
      size_t la = 0, lb = 0;
      while (isdigit((unsigned char)a[la])) la++;
      while (isdigit((unsigned char)b[lb])) lb++;
      if (la != lb)
        return la < lb ? -1 : 1;
      int c = memcmp(a, b, la);
      if (c != 0)
        return c;
      a += la;
      b += lb;
      continue;
    }
    if (*a != *b)
      return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
    a++;
    b++;
  }
  if (*a || *b)
    return *a ? 1 : -1;
  return strcmp(a0, b0);
}

static int by_name(const void *a, const void *b) {
  return natural_cmp((*(const tpx__st_tensor *const *)a)->name,
                     (*(const tpx__st_tensor *const *)b)->name);
}

static int contains_ci(const char *s, size_t len, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; i + n <= len; i++) {
    size_t k = 0;
    while (k < n && tolower((unsigned char)s[i + k]) == needle[k]) k++;
    if (k == n)
      return 1;
  }
  return 0;
}

static int atom_is_embedding(const char *a, size_t n) {
  return contains_ci(a, n, "embed") ||
         (n == 3 && (memcmp(a, "wte", 3) == 0 || memcmp(a, "wpe", 3) == 0));
}

static int atom_is_norm(const char *a, size_t n) {
  if (contains_ci(a, n, "norm"))
    return 1;
  /* ln, ln_f, ln_1, ln1 — but not "linear" or "lnx" */
  return n >= 2 && tolower((unsigned char)a[0]) == 'l' &&
         tolower((unsigned char)a[1]) == 'n' &&
         (n == 2 || a[2] == '_' || isdigit((unsigned char)a[2]));
}

enum { HAS_2D_WEIGHT = 1, NOT_ALL_1D = 2 };

static tpx_module_kind infer_kind(const char *fqn, size_t len, int flags) {
  size_t start = len;
  while (start > 0 && fqn[start - 1] != '.') start--;
  const char *atom = fqn + start;
  size_t n = len - start;
  if (flags & HAS_2D_WEIGHT)
    return atom_is_embedding(atom, n) ? TPX_MODULE_EMBEDDING
                                      : TPX_MODULE_LINEAR;
  if (!(flags & NOT_ALL_1D) && atom_is_norm(atom, n))
    return TPX_MODULE_NORM;
  return TPX_MODULE_OTHER;
}

static size_t module_len(const tpx__st_tensor *t) {
  size_t m = t->name_len;
  while (m > 0 && t->name[m - 1] != '.') m--;
  return m ? m - 1 : 0;
}

/* The config says the output embedding is tied (text_config for VLMs);
 * absent counts as false — a plugin skeleton that knows better ties itself. */
static int config_ties_embeddings(const tpx_model *model) {
  json_t *cfg = tpx__model_config(model);
  json_t *v = tpx__config_lookup(cfg, "tie_word_embeddings");
  if (v == NULL || json_is_null(v))
    v = tpx__config_lookup(cfg, "text_config.tie_word_embeddings");
  return json_is_true(v);
}

/* Ties the output projection to the input embedding when the config says
 * so and the files did not hold the projection: it is missing, or a plugin
 * skeleton declared it untied. */
static tpx_status tie_lm_head(tpx_model *model, const tpx__st_load *l,
                              tpx_error *err) {
  static const char *const known[] = {
      "model.embed_tokens.weight",
      "model.language_model.embed_tokens.weight",
      "language_model.model.embed_tokens.weight",
      "transformer.wte.weight",
      "transformer.word_embeddings.weight",
      "transformer.embedding.word_embeddings.weight",
      "model.embed_in.weight",
      "gpt_neox.embed_in.weight",
  };
  const char *emb = NULL;
  for (size_t i = 0; i < sizeof known / sizeof *known && emb == NULL; i++)
    if (tpx_model_find_param(model, known[i]) >= 0)
      emb = known[i];
  for (size_t i = 0; i < model->num_params && emb == NULL; i++) {
    const tpx__param *p = &model->params[i];
    const tpx__module *m = &model->modules[p->module];
    if (m->kind == TPX_MODULE_EMBEDDING && p->ndim == 2 &&
        strcmp(p->fqn + p->name_off, "weight") == 0 &&
        !contains_ci(m->fqn, m->fqn_len, "pos") &&
        !(m->fqn_len >= 3 && memcmp(m->fqn + m->fqn_len - 3, "wpe", 3) == 0))
      emb = p->fqn;
  }
  if (emb == NULL)
    return TPX_OK;
  const char *lm = strncmp(emb, "language_model.", 15) == 0
                       ? "language_model.lm_head.weight"
                       : "lm_head.weight";
  int64_t have = tpx_model_find_param(model, lm);
  if (have >= 0 &&
      (model->params[have].tied_to >= 0 ||
       model->params[tpx_model_find_param(model, emb)].tied_to == have ||
       tpx__strmap_find(&l->names, lm, strlen(lm), NULL)))
    return TPX_OK; /* already tied, or the checkpoint has its own lm_head */
  const char *mod = strncmp(lm, "language_model.", 15) == 0
                        ? "language_model.lm_head"
                        : "lm_head";
  int64_t mi = tpx_model_find_module(model, mod);
  tpx_status st = TPX_OK;
  if (mi < 0 || model->modules[mi].kind == TPX_MODULE_CONTAINER)
    st = tpx_model_add_module(model, mod, TPX_MODULE_LINEAR, NULL, err);
  if (st == TPX_OK)
    st = tpx_model_tie(model, lm, emb, err);
  return st;
}

static tpx_status apply(tpx_model *model, tpx__st_load *l, tpx_error *err) {
  const tpx__st_tensor **order = malloc((l->n ? l->n : 1) * sizeof *order);
  int *flags = calloc(l->n ? l->n : 1, sizeof *flags);
  char *scratch = NULL;
  size_t scratch_cap = 0;
  tpx__strmap mods = TPX__STRMAP_INIT; /* module fqn -> slot in flags */
  /* Per-expert tensors folded onto fused expert parameters, and tensors
   * recorded as buffers (by sorted position): checked in pass 1, never
   * added in pass 2. */
  char *folded = calloc(l->n ? l->n : 1, 1);
  tpx__expert_fold fold = {0};
  tpx_status st = TPX_OK;
  if (order == NULL || flags == NULL || folded == NULL) {
    st = oom(err);
    goto done;
  }
  for (size_t i = 0; i < l->n; i++) order[i] = &l->t[i];
  qsort(order, l->n, sizeof *order, by_name);

  /* Pass 1: agree with what the model already holds; gather kind hints. */
  size_t num_mods = 0;
  for (size_t k = 0; k < l->n && st == TPX_OK; k++) {
    const tpx__st_tensor *t = order[k];
    if (t->skip)
      continue; /* converted or a buffer (conversion_load.c) */
    int64_t pi = tpx_model_find_param(model, t->name);
    if (pi >= 0) {
      const tpx__param *p = &model->params[pi];
      if (p->ndim != t->ndim || p->dtype != t->dtype ||
          (t->ndim && memcmp(model->dims + p->dims, t->shape,
                             (size_t)t->ndim * sizeof *t->shape) != 0)) {
        char a[200], b[200];
        st = tpx_error_set(
            err, TPX_VALIDATION,
            "%s: tensor '%s' has shape %s %s, but the model already has "
            "shape %s %s",
            l->files[t->file].path, t->name,
            tpx__format_shape(a, sizeof a, t->shape, t->ndim),
            tpx__model_dtype_st_name(t->dtype),
            tpx__format_shape(b, sizeof b, model->dims + p->dims, p->ndim),
            tpx__model_dtype_st_name((tpx_dtype)p->dtype));
      }
      continue;
    }
    /* A tensor the plugin says is a buffer of the module tree (trait
     * buffer): recorded as one, never a parameter. */
    if (tpx__model_buffer_rule_matches(model, t->name)) {
      st = tpx_model_add_buffer(model, t->name, t->shape, t->ndim, t->dtype,
                                err);
      folded[k] = 1;
      continue;
    }
    int is_fold = 0;
    st = tpx__expert_fold_try(&fold, model, t->name, t->shape, t->ndim,
                              t->dtype, l->files[t->file].path, &is_fold, err);
    if (st != TPX_OK)
      break;
    if (is_fold) {
      folded[k] = 1;
      continue;
    }
    size_t mlen = module_len(t);
    int64_t slot;
    int r = tpx__strmap_put(&mods, t->name, mlen, (int64_t)num_mods, &slot);
    if (r < 0) {
      st = oom(err);
      break;
    }
    if (r == 0)
      slot = (int64_t)num_mods++;
    int is_weight = strcmp(t->name + (mlen ? mlen + 1 : 0), "weight") == 0;
    if (is_weight && t->ndim == 2)
      flags[slot] |= HAS_2D_WEIGHT;
    if (t->ndim != 1)
      flags[slot] |= NOT_ALL_1D;
  }

  /* Pass 2: add the new tensors. */
  for (size_t k = 0; k < l->n && st == TPX_OK; k++) {
    const tpx__st_tensor *t = order[k];
    if (t->skip || folded[k] || tpx_model_find_param(model, t->name) >= 0)
      continue;
    size_t mlen = module_len(t);
    if (t->name_len + 1 > scratch_cap) {
      free(scratch);
      scratch_cap = t->name_len + 64;
      scratch = malloc(scratch_cap);
      if (scratch == NULL) {
        st = oom(err);
        break;
      }
    }
    memcpy(scratch, t->name, t->name_len + 1);
    if (mlen > 0)
      scratch[mlen] = '\0'; /* "a.b.weight" -> "a.b" and "weight" */
    const char *pname = mlen ? scratch + mlen + 1 : scratch;
    const char *mname = mlen ? scratch : "";
    if (mlen > 0) {
      int64_t mi = tpx_model_find_module(model, mname);
      if (mi < 0 || model->modules[mi].kind == TPX_MODULE_CONTAINER) {
        int64_t slot = 0;
        tpx__strmap_find(&mods, t->name, mlen, &slot);
        st = tpx_model_add_module(
            model, mname, infer_kind(t->name, mlen, flags[slot]), NULL, err);
      }
    }
    if (st == TPX_OK)
      st = tpx_model_add_param(model, mname, pname, t->shape, t->ndim, t->dtype,
                               NULL, err);
  }
  if (st == TPX_OK)
    st = tpx__expert_fold_finish(&fold, model, err);
  if (st == TPX_OK && config_ties_embeddings(model))
    st = tie_lm_head(model, l, err);
done:
  free(folded);
  tpx__expert_fold_free(&fold);
  tpx__strmap_free(&mods);
  free(scratch);
  free(flags);
  free(order);
  return st;
}

/* Present at all: a FIFO or directory in its place is then refused by
 * the reader with a message naming it, not skipped. */
static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

tpx_status tpx__st_load_path(tpx__st_load *l, const char *path,
                             tpx_error *err) {
  tpx_status st;
  struct stat sb;
  if (stat(path, &sb) != 0) {
    return tpx_error_set(err, TPX_NOT_FOUND, "%s: cannot open: %s", path,
                         strerror(errno));
  } else if (S_ISDIR(sb.st_mode)) {
    size_t dlen = strlen(path);
    while (dlen > 1 && path[dlen - 1] == '/') dlen--;
    char *index = join_path(path, dlen, "model.safetensors.index.json");
    char *single = join_path(path, dlen, "model.safetensors");
    if (index == NULL || single == NULL)
      st = oom(err);
    else if (exists(index))
      st = load_index(l, index, err);
    else if (exists(single))
      st = load_file(l, single, err);
    else
      st = tpx_error_set(err, TPX_NOT_FOUND,
                         "%s: directory holds neither "
                         "model.safetensors.index.json nor model.safetensors",
                         path);
    free(index);
    free(single);
  } else if (ends_with(path, ".json")) {
    st = load_index(l, path, err);
  } else {
    st = load_file(l, path, err);
  }
  return st;
}

/* Header names under one of the model's name aliases become its canonical
 * names (the rewritten names live in the load's arena). l->names keeps the
 * files' own names: after loading, only the tied-head check reads it (for
 * lm_head.weight), so a rule renaming the head is not seen there. */
static tpx_status rename_through_aliases(const tpx_model *model,
                                         tpx__st_load *l, tpx_error *err) {
  char buf[1024];
  for (size_t k = 0; model->num_aliases && k < l->n; k++) {
    tpx__st_tensor *t = &l->t[k];
    int r = tpx_model_canonical_name(model, t->name, buf, sizeof buf);
    if (r < 0)
      return tpx_error_set(err, TPX_VALIDATION,
                           "tensor '%s': its name under the model's name "
                           "aliases is too long",
                           t->name);
    if (r == 0)
      continue;
    size_t n = strlen(buf);
    char *copy = tpx__arena_strndup(&l->arena, buf, n);
    if (copy == NULL)
      return oom(err);
    t->name = copy;
    t->name_len = n;
  }
  return TPX_OK;
}

tpx_status tpx_model_add_safetensors(tpx_model *model, const char *path,
                                     tpx_error *err) {
  if (model == NULL || path == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_safetensors: NULL argument");
  tpx__st_load l;
  tpx__st_load_init(&l);
  tpx__conv *conv = NULL;
  tpx_status st = tpx__st_load_path(&l, path, err);
  if (st == TPX_OK) /* the checkpoint's own names pair weight and scale */
    st = tpx__fp8_mark(model, &l, err);
  if (st == TPX_OK)
    st = tpx__conv_load_renames(model, &l, &conv, err);
  if (st == TPX_OK)
    st = rename_through_aliases(model, &l, err);
  if (st == TPX_OK && conv != NULL)
    st = tpx__conv_load_convert(model, conv, &l, err);
  if (st == TPX_OK)
    st = apply(model, &l, err);
  tpx__conv_free(conv);
  tpx__st_load_free(&l);
  return st;
}
