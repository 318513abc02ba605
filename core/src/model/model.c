/* model.c — the module tree of a tpx_model: builder (modules, parameters,
 * ties), queries and totals. Config JSON lives in config.c, safetensors
 * import in safetensors.c. Lookups by FQN go through two hash maps, so
 * building a model of a million parameters is linear. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/model_impl.h"
#include "model/strmap.h"
#include "tpx/model.h"

/* ---- arena ---- */

struct tpx__arena_chunk {
  tpx__arena_chunk *next;
  size_t used, cap;
  int mapped; /* 1: mmap'd (munmap), 0: malloc'd */
  char data[];
};

/* Small models get 64 KiB malloc'd chunks. Past 1 MiB of strings, chunks
 * are 2 MiB from mmap with a huge-page hint: a million FQNs fill ~100 MB,
 * and with 4 KiB pages the page faults were a fifth of the build time.
 * Strings too big for a quarter chunk get a malloc'd chunk of their own. */
enum { SMALL_CHUNK = 64 * 1024, BIG_CHUNK = 2 * 1024 * 1024 };

static void chunk_free(tpx__arena_chunk *c) {
  if (c->mapped)
    munmap(c, BIG_CHUNK);
  else
    free(c);
}

void tpx__arena_free(tpx__arena *arena) {
  tpx__arena_chunk *c = arena->head;
  while (c != NULL) {
    tpx__arena_chunk *next = c->next;
    chunk_free(c);
    c = next;
  }
  arena->head = NULL;
  arena->total = 0;
}

static tpx__arena_chunk *chunk_new(size_t len, size_t total) {
  tpx__arena_chunk *n;
  size_t size = total < BIG_CHUNK / 2 ? SMALL_CHUNK : BIG_CHUNK;
  if (len > (size - sizeof *n) / 4 || size == SMALL_CHUNK) {
    size_t cap = len > (size - sizeof *n) / 4 ? len : size - sizeof *n;
    n = malloc(sizeof *n + cap);
    if (n == NULL)
      return NULL;
    n->cap = cap;
    n->mapped = 0;
  } else {
    void *p = mmap(NULL, BIG_CHUNK, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, BIG_CHUNK, MADV_HUGEPAGE);
#endif
    n = p;
    n->cap = BIG_CHUNK - sizeof *n;
    n->mapped = 1;
  }
  n->used = 0;
  n->next = NULL;
  return n;
}

char *tpx__arena_alloc(tpx__arena *arena, size_t len) {
  tpx__arena_chunk *c = arena->head;
  if (c == NULL || c->cap - c->used < len) {
    tpx__arena_chunk *n = chunk_new(len, arena->total);
    if (n == NULL)
      return NULL;
    if (n->cap == len && c != NULL) {
      /* A big string's own chunk goes behind the head, so the head's free
       * space stays usable for the small strings that follow. */
      n->next = c->next;
      c->next = n;
    } else {
      n->next = c;
      arena->head = n;
    }
    c = n;
  }
  char *p = c->data + c->used;
  c->used += len;
  arena->total += len;
  return p;
}

char *tpx__arena_strndup(tpx__arena *arena, const char *s, size_t len) {
  char *p = tpx__arena_alloc(arena, len + 1);
  if (p == NULL)
    return NULL;
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

/* ---- dtypes ----
 * From the X-macro list in tpx/dtype.h, so the model does not depend on
 * dtype.c and safetensors names are matched strictly (no aliases). */

size_t tpx__model_dtype_size(tpx_dtype dtype) {
  switch (dtype) {
#define TPX__DTYPE_SIZE(name, size, st, hf)                                    \
  case TPX_DTYPE_##name:                                                       \
    return size;
    TPX_DTYPE_LIST(TPX__DTYPE_SIZE)
#undef TPX__DTYPE_SIZE
  default:
    return 0;
  }
}

const char *tpx__model_dtype_st_name(tpx_dtype dtype) {
  switch (dtype) {
#define TPX__DTYPE_ST(name, size, st, hf)                                      \
  case TPX_DTYPE_##name:                                                       \
    return st;
    TPX_DTYPE_LIST(TPX__DTYPE_ST)
#undef TPX__DTYPE_ST
  default:
    return "INVALID";
  }
}

tpx_dtype tpx__model_dtype_from_st(const char *text) {
#define TPX__DTYPE_CMP(name, size, st, hf)                                     \
  if (strcmp(text, st) == 0)                                                   \
    return TPX_DTYPE_##name;
  TPX_DTYPE_LIST(TPX__DTYPE_CMP)
#undef TPX__DTYPE_CMP
  return TPX_DTYPE_INVALID;
}

/* ---- kinds ---- */

static const char *const kind_names[] = {
    "container", "linear", "embedding", "norm", "rotary", "other",
};

const char *tpx_module_kind_name(tpx_module_kind kind) {
  if ((int)kind < 0 || (size_t)kind >= sizeof kind_names / sizeof *kind_names)
    return "invalid";
  return kind_names[kind];
}

tpx_status tpx_module_kind_parse(const char *text, tpx_module_kind *out,
                                 tpx_error *err) {
  if (text == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_module_kind_parse: NULL argument");
  for (size_t i = 0; i < sizeof kind_names / sizeof *kind_names; i++) {
    if (strcmp(text, kind_names[i]) == 0) {
      *out = (tpx_module_kind)i;
      return TPX_OK;
    }
  }
  return tpx_error_set(err, TPX_PARSE,
                       "unknown module kind '%s' (expected container, linear, "
                       "embedding, norm, rotary or other)",
                       text);
}

static int kind_valid(tpx_module_kind kind) {
  return (int)kind >= 0 && (int)kind <= (int)TPX_MODULE_OTHER;
}

/* ---- helpers ---- */

tpx_status tpx__model_check_fqn(const char *fqn, size_t len, const char *what,
                                tpx_error *err) {
  if (len == 0)
    return TPX_OK;
  if (len > UINT32_MAX / 2)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s name is too long",
                         what);
  /* memchr, not a byte loop: this runs on every FQN of a million-tensor
   * model. */
  int bad = fqn[0] == '.' || fqn[len - 1] == '.';
  const char *p = fqn, *end = fqn + len;
  while (!bad && (p = memchr(p, '.', (size_t)(end - p))) != NULL) {
    bad = p[1] == '.';
    p++;
  }
  if (bad)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s '%.*s' has an empty name component (leading, "
                         "trailing or double dot)",
                         what, (int)(len > 200 ? 200 : len), fqn);
  return TPX_OK;
}

int64_t tpx__shape_numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return -1;
    if (shape[i] > 0 && n > INT64_MAX / 8 / shape[i])
      return -1;
    n *= shape[i];
  }
  return n;
}

const char *tpx__format_shape(char *buf, size_t size, const int64_t *shape,
                              int ndim) {
  size_t pos = 0;
  if (size == 0)
    return buf;
  buf[0] = '\0';
#define PUT(...)                                                               \
  do {                                                                         \
    if (pos < size) {                                                          \
      int w_ = snprintf(buf + pos, size - pos, __VA_ARGS__);                   \
      pos += w_ > 0 ? (size_t)w_ : 0;                                          \
    }                                                                          \
  } while (0)
  PUT("[");
  for (int i = 0; i < ndim; i++)
    PUT(i ? ", %lld" : "%lld", (long long)shape[i]);
  PUT("]");
#undef PUT
  if (pos >= size && size > 4)
    memcpy(buf + size - 4, "...", 4);
  return buf;
}

static tpx_status no_memory(tpx_error *err) {
  return tpx_error_set(err, TPX_NO_MEMORY, "out of memory building the model");
}

/* The module, parameter and shape arrays reach tens of MB for big models:
 * past BIG_CHUNK they live in mmap'd memory with the huge-page hint (see
 * the arena), below it in malloc'd memory. */
static void array_free(void *p, size_t bytes) {
  if (p == NULL)
    return;
  if (bytes >= BIG_CHUNK)
    munmap(p, bytes);
  else
    free(p);
}

static void *array_resize(void *p, size_t old_bytes, size_t new_bytes) {
  if (new_bytes < BIG_CHUNK)
    return realloc(p, new_bytes);
  void *q = mmap(NULL, new_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED)
    return NULL;
#ifdef MADV_HUGEPAGE
  madvise(q, new_bytes, MADV_HUGEPAGE);
#endif
  if (old_bytes > 0)
    memcpy(q, p, old_bytes);
  array_free(p, old_bytes);
  return q;
}

/* Grow *array (element size `elem`) to hold `need` elements. */
static int grow(void **array, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : 8;
  while (n < need) {
    if (n > SIZE_MAX / 2 / elem)
      return -1;
    n *= 2;
  }
  void *p = array_resize(*array, *cap * elem, n * elem);
  if (p == NULL)
    return -1;
  *array = p;
  *cap = n;
  return 0;
}

/* Append a module whose parent exists; `fqn` already in the arena. */
static int64_t new_module(tpx_model *model, const char *fqn, size_t len,
                          uint64_t hash, int64_t parent, tpx_module_kind kind) {
  if (grow((void **)&model->modules, &model->cap_modules,
           model->num_modules + 1, sizeof *model->modules) != 0)
    return -1;
  int64_t index = (int64_t)model->num_modules;
  if (parent >= 0) {
    tpx__module *p = &model->modules[parent];
    if (p->num_children == p->cap_children) {
      uint32_t cap = p->cap_children ? 2 * p->cap_children : 4;
      int64_t *c = cap > p->cap_children && cap < UINT32_MAX / 2
                       ? realloc(p->children, cap * sizeof *c)
                       : NULL;
      if (c == NULL)
        return -1;
      p->children = c;
      p->cap_children = cap;
    }
  }
  if (tpx__strmap_put_h(&model->module_map, fqn, len, hash, index, NULL) != 0)
    return -1;
  if (parent >= 0) {
    tpx__module *p = &model->modules[parent];
    p->children[p->num_children++] = index;
  }
  tpx__module *m = &model->modules[index];
  memset(m, 0, sizeof *m);
  m->fqn = fqn;
  m->fqn_len = (uint32_t)len;
  m->parent = parent;
  m->kind = (uint8_t)kind;
  model->num_modules++;
  return index;
}

/* Length of fqn[0..len) up to and including its last dot; 0 without one. */
static size_t after_last_dot(const char *fqn, size_t len) {
  while (len > 0 && fqn[len - 1] != '.') /* memrchr is a GNU extension */
    len--;
  return len;
}

/* Index of the module at fqn[0..len), creating it (as `kind`) and its missing
 * parents (as containers). `*created` tells whether the module itself is
 * new. -1 when out of memory. The FQN must be valid. */
static int64_t get_or_create_module(tpx_model *model, const char *fqn,
                                    size_t len, uint64_t hash,
                                    tpx_module_kind kind, int *created) {
  int64_t found;
  *created = 0;
  const tpx__module *last = &model->modules[model->last_module];
  if (last->fqn_len == len && memcmp(last->fqn, fqn, len) == 0)
    return model->last_module;
  if (tpx__strmap_find_h(&model->module_map, fqn, len, hash, &found)) {
    model->last_module = found;
    model->last_parent = model->modules[found].parent;
    return found;
  }
  /* Walk up to the deepest existing ancestor, then create downwards.
   * fqn[0..cut) is always a candidate ancestor's FQN plus its dot. */
  size_t cut = after_last_dot(fqn, len);
  int64_t parent = 0;
  const tpx__module *lp =
      model->last_parent >= 0 ? &model->modules[model->last_parent] : NULL;
  if (cut > 0 && lp != NULL && lp->fqn_len == cut - 1 &&
      memcmp(lp->fqn, fqn, cut - 1) == 0) {
    parent = model->last_parent;
  } else {
    while (cut > 0 &&
           !tpx__strmap_find(&model->module_map, fqn, cut - 1, &parent))
      cut = after_last_dot(fqn, cut - 1);
    if (cut == 0)
      parent = 0;
  }
  /* fqn[0..cut) is the existing ancestor's FQN plus a dot (or empty). */
  for (;;) {
    const char *dot = memchr(fqn + cut, '.', len - cut);
    size_t end = dot ? (size_t)(dot - fqn) : len;
    char *copy = tpx__arena_strndup(&model->arena, fqn, end);
    if (copy == NULL)
      return -1;
    int64_t index = new_module(
        model, copy, end,
        end == len ? hash : tpx__strmap_hash(copy, end), parent,
        end == len ? kind : TPX_MODULE_CONTAINER);
    if (index < 0)
      return -1;
    if (end == len) {
      *created = 1;
      model->last_module = index;
      model->last_parent = parent;
      return index;
    }
    parent = index;
    cut = end + 1;
  }
}

/* ---- lifecycle ---- */

tpx_status tpx_model_create(tpx_model **out, tpx_error *err) {
  if (out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_create: out is NULL");
  *out = NULL;
  tpx_model *model = calloc(1, sizeof *model);
  if (model == NULL)
    return no_memory(err);
  tpx__strmap_init(&model->module_map);
  tpx__strmap_init(&model->param_map);
  char *root = tpx__arena_strndup(&model->arena, "", 0);
  if (root == NULL ||
      new_module(model, root, 0, tpx__strmap_hash(root, 0), -1,
                 TPX_MODULE_CONTAINER) != 0) {
    tpx_model_destroy(model);
    return no_memory(err);
  }
  model->last_module = 0;
  model->last_parent = -1;
  *out = model;
  return TPX_OK;
}

void tpx_model_destroy(tpx_model *model) {
  if (model == NULL)
    return;
  for (size_t i = 0; i < model->num_modules; i++)
    free(model->modules[i].children);
  array_free(model->modules, model->cap_modules * sizeof *model->modules);
  array_free(model->params, model->cap_params * sizeof *model->params);
  array_free(model->dims, model->cap_dims * sizeof *model->dims);
  tpx__strmap_free(&model->module_map);
  tpx__strmap_free(&model->param_map);
  tpx__arena_free(&model->arena);
  if (model->config != NULL)
    json_decref(model->config);
  for (size_t i = 0; i < model->num_architectures; i++)
    free(model->architectures[i]);
  free(model->architectures);
  free(model->source);
  free(model);
}

/* ---- building ---- */

tpx_status tpx_model_add_module(tpx_model *model, const char *fqn,
                                tpx_module_kind kind, int64_t *index_out,
                                tpx_error *err) {
  if (model == NULL || fqn == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_module: NULL argument");
  if (!kind_valid(kind))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "module '%s': invalid kind %d", fqn, (int)kind);
  size_t len = strlen(fqn);
  tpx_status st = tpx__model_check_fqn(fqn, len, "module", err);
  if (st != TPX_OK)
    return st;
  int created;
  int64_t index = get_or_create_module(
      model, fqn, len, tpx__strmap_hash(fqn, len), kind, &created);
  if (index < 0)
    return no_memory(err);
  model->modules[index].kind = (uint8_t)kind;
  if (index_out != NULL)
    *index_out = index;
  return TPX_OK;
}

static tpx_status check_dtype(tpx_dtype dtype, const char *fqn,
                              tpx_error *err) {
  if ((int)dtype <= (int)TPX_DTYPE_INVALID || (int)dtype >= (int)TPX_DTYPE_COUNT)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "parameter '%s': invalid dtype %d", fqn, (int)dtype);
  return TPX_OK;
}

tpx_status tpx_model_add_param(tpx_model *model, const char *module_fqn,
                               const char *name, const int64_t *shape,
                               int ndim, tpx_dtype dtype, int64_t *index_out,
                               tpx_error *err) {
  if (model == NULL || module_fqn == NULL || name == NULL ||
      (shape == NULL && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_param: NULL argument");
  size_t mlen = strlen(module_fqn), nlen = strlen(name);
  tpx_status st = tpx__model_check_fqn(module_fqn, mlen, "module", err);
  if (st != TPX_OK)
    return st;
  if (nlen == 0 || memchr(name, '.', nlen) != NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "parameter name '%s' of module '%s' must be one "
                         "non-empty atom without dots",
                         name, module_fqn);
  if (nlen > UINT32_MAX / 2)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "parameter name is too long");
  size_t flen = mlen ? mlen + 1 + nlen : nlen;
  char *fqn = tpx__arena_alloc(&model->arena, flen + 1);
  if (fqn == NULL)
    return no_memory(err);
  if (mlen) {
    memcpy(fqn, module_fqn, mlen);
    fqn[mlen] = '.';
  }
  memcpy(fqn + flen - nlen, name, nlen);
  fqn[flen] = '\0';
  /* Both map probes miss the cache in big models: start them now, and let
   * the checks below run while the slots load. */
  uint64_t phash = tpx__strmap_hash(fqn, flen);
  tpx__strmap_prefetch(&model->param_map, phash);
  const tpx__module *last = &model->modules[model->last_module];
  uint64_t mhash = 0; /* unused when the module is the last one used */
  if (!(last->fqn_len == mlen && memcmp(last->fqn, module_fqn, mlen) == 0)) {
    mhash = tpx__strmap_hash(module_fqn, mlen);
    tpx__strmap_prefetch(&model->module_map, mhash);
  }
  /* Everything is checked before the first change, so a failed call leaves
   * the model as it was (bar some unused arena bytes). */
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "parameter '%s': ndim %d outside 0..%d", fqn, ndim,
                         TPX_MAX_TENSOR_DIMS);
  if (tpx__shape_numel(shape, ndim) < 0) {
    char sbuf[160];
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "parameter '%s': shape %s has a negative or too "
                         "large dimension",
                         fqn, tpx__format_shape(sbuf, sizeof sbuf, shape, ndim));
  }
  st = check_dtype(dtype, fqn, err);
  if (st != TPX_OK)
    return st;
  if (tpx__strmap_find_h(&model->param_map, fqn, flen, phash, NULL))
    return tpx_error_set(err, TPX_ALREADY_EXISTS,
                         "parameter '%s' already exists", fqn);

  if (grow((void **)&model->params, &model->cap_params, model->num_params + 1,
           sizeof *model->params) != 0 ||
      grow((void **)&model->dims, &model->cap_dims,
           model->num_dims + (size_t)ndim, sizeof *model->dims) != 0)
    return no_memory(err);
  int created;
  int64_t module = get_or_create_module(model, module_fqn, mlen, mhash,
                                        TPX_MODULE_OTHER, &created);
  if (module < 0)
    return no_memory(err);
  int64_t index = (int64_t)model->num_params;
  if (tpx__strmap_put_h(&model->param_map, fqn, flen, phash, index, NULL) != 0)
    return no_memory(err);
  tpx__param *p = &model->params[index];
  p->fqn = fqn;
  p->name_off = (uint32_t)(flen - nlen);
  p->module = module;
  p->dims = (int64_t)model->num_dims;
  p->ndim = (uint8_t)ndim;
  p->dtype = (uint8_t)dtype;
  p->tied_to = -1;
  p->is_tie_target = 0;
  if (ndim > 0)
    memcpy(model->dims + model->num_dims, shape, (size_t)ndim * sizeof *shape);
  model->num_dims += (size_t)ndim;
  model->num_params++;
  if (index_out != NULL)
    *index_out = index;
  return TPX_OK;
}

static int same_shape(const tpx_model *model, const tpx__param *a,
                      const tpx__param *b) {
  return a->ndim == b->ndim &&
         (a->ndim == 0 || memcmp(model->dims + a->dims, model->dims + b->dims,
                                 a->ndim * sizeof(int64_t)) == 0);
}

tpx_status tpx_model_tie(tpx_model *model, const char *param_fqn,
                         const char *target_fqn, tpx_error *err) {
  if (model == NULL || param_fqn == NULL || target_fqn == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_tie: NULL argument");
  int64_t target = tpx_model_find_param(model, target_fqn);
  if (target < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "cannot tie '%s' to '%s': no parameter '%s'",
                         param_fqn, target_fqn, target_fqn);
  /* Ties always point at the parameter that holds the storage. */
  int64_t root = model->params[target].tied_to >= 0
                     ? model->params[target].tied_to
                     : target;
  int64_t param = tpx_model_find_param(model, param_fqn);
  if (param == root)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "cannot tie '%s' to '%s': that is the same tensor",
                         param_fqn, target_fqn);
  if (param < 0) {
    const char *dot = strrchr(param_fqn, '.');
    size_t mlen = dot ? (size_t)(dot - param_fqn) : 0;
    char *module_fqn = malloc(mlen + 1);
    if (module_fqn == NULL)
      return no_memory(err);
    memcpy(module_fqn, param_fqn, mlen);
    module_fqn[mlen] = '\0';
    const tpx__param *r = &model->params[root];
    int64_t shape[TPX_MAX_TENSOR_DIMS];
    if (r->ndim)
      memcpy(shape, model->dims + r->dims, r->ndim * sizeof *shape);
    tpx_status st =
        tpx_model_add_param(model, module_fqn, dot ? dot + 1 : param_fqn,
                            shape, r->ndim, (tpx_dtype)r->dtype, &param, err);
    free(module_fqn);
    if (st != TPX_OK)
      return st;
  } else {
    const tpx__param *p = &model->params[param], *r = &model->params[root];
    if (!same_shape(model, p, r) || p->dtype != r->dtype) {
      char a[160], b[160];
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT,
          "cannot tie '%s' %s %s to '%s' %s %s: shapes and dtypes must agree",
          param_fqn,
          tpx__format_shape(a, sizeof a, model->dims + p->dims, p->ndim),
          tpx__model_dtype_st_name((tpx_dtype)p->dtype), target_fqn,
          tpx__format_shape(b, sizeof b, model->dims + r->dims, r->ndim),
          tpx__model_dtype_st_name((tpx_dtype)r->dtype));
    }
  }
  tpx__param *p = &model->params[param];
  if (p->is_tie_target) {
    /* Parameters tied to `param` follow it to the new storage. */
    for (size_t i = 0; i < model->num_params; i++)
      if (model->params[i].tied_to == param)
        model->params[i].tied_to = root;
    p->is_tie_target = 0;
  }
  p->tied_to = root;
  model->params[root].is_tie_target = 1;
  return TPX_OK;
}

tpx_status tpx_model_add_architecture(tpx_model *model, const char *arch,
                                      tpx_error *err) {
  if (model == NULL || arch == NULL || arch[0] == '\0')
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_architecture: NULL or empty name");
  for (size_t i = 0; i < model->num_architectures; i++)
    if (strcmp(model->architectures[i], arch) == 0)
      return TPX_OK;
  char *copy = strdup(arch);
  char **list = realloc(model->architectures,
                        (model->num_architectures + 1) * sizeof *list);
  if (copy == NULL || list == NULL) {
    free(copy);
    if (list != NULL)
      model->architectures = list;
    return no_memory(err);
  }
  model->architectures = list;
  list[model->num_architectures++] = copy;
  return TPX_OK;
}

tpx_status tpx__model_set_architectures(tpx_model *model,
                                        const char *const *names, size_t n,
                                        tpx_error *err) {
  char **list = n ? calloc(n, sizeof *list) : NULL;
  if (n && list == NULL)
    return no_memory(err);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    int dup = 0;
    for (size_t j = 0; j < kept; j++)
      dup |= strcmp(list[j], names[i]) == 0;
    if (dup)
      continue;
    list[kept] = strdup(names[i]);
    if (list[kept] == NULL) {
      for (size_t j = 0; j < kept; j++)
        free(list[j]);
      free(list);
      return no_memory(err);
    }
    kept++;
  }
  for (size_t i = 0; i < model->num_architectures; i++)
    free(model->architectures[i]);
  free(model->architectures);
  model->architectures = list;
  model->num_architectures = kept;
  return TPX_OK;
}

tpx_status tpx__model_set_source(tpx_model *model, const char *source,
                                 tpx_error *err) {
  char *copy = NULL;
  if (source != NULL && (copy = strdup(source)) == NULL)
    return no_memory(err);
  free(model->source);
  model->source = copy;
  return TPX_OK;
}

/* ---- queries ---- */

size_t tpx_model_num_modules(const tpx_model *model) {
  return model ? model->num_modules : 0;
}

static int module_ok(const tpx_model *model, int64_t index) {
  return model != NULL && index >= 0 && (size_t)index < model->num_modules;
}

const char *tpx_model_module_fqn(const tpx_model *model, int64_t index) {
  return module_ok(model, index) ? model->modules[index].fqn : NULL;
}

tpx_module_kind tpx_model_module_kind(const tpx_model *model, int64_t index) {
  return module_ok(model, index) ? (tpx_module_kind)model->modules[index].kind
                                 : TPX_MODULE_CONTAINER;
}

int64_t tpx_model_module_parent(const tpx_model *model, int64_t index) {
  return module_ok(model, index) ? model->modules[index].parent : -1;
}

size_t tpx_model_module_num_children(const tpx_model *model, int64_t index) {
  return module_ok(model, index) ? model->modules[index].num_children : 0;
}

int64_t tpx_model_module_child(const tpx_model *model, int64_t index,
                               size_t i) {
  if (!module_ok(model, index) || i >= model->modules[index].num_children)
    return -1;
  return model->modules[index].children[i];
}

int64_t tpx_model_find_module(const tpx_model *model, const char *fqn) {
  if (model == NULL || fqn == NULL)
    return -1;
  return tpx__strmap_get(&model->module_map, fqn, -1);
}

size_t tpx_model_num_params(const tpx_model *model) {
  return model ? model->num_params : 0;
}

tpx_status tpx_model_param(const tpx_model *model, int64_t index,
                           tpx_param_info *out, tpx_error *err) {
  if (model == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_param: NULL argument");
  if (index < 0 || (size_t)index >= model->num_params)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "parameter index %lld outside 0..%zu",
                         (long long)index, model->num_params);
  const tpx__param *p = &model->params[index];
  memset(out, 0, sizeof *out);
  out->fqn = p->fqn;
  out->name = p->fqn + p->name_off;
  out->module = p->module;
  out->ndim = p->ndim;
  if (p->ndim)
    memcpy(out->shape, model->dims + p->dims, p->ndim * sizeof *out->shape);
  out->dtype = (tpx_dtype)p->dtype;
  out->tied_to = p->tied_to;
  return TPX_OK;
}

int64_t tpx_model_find_param(const tpx_model *model, const char *fqn) {
  if (model == NULL || fqn == NULL)
    return -1;
  return tpx__strmap_get(&model->param_map, fqn, -1);
}

size_t tpx_model_num_architectures(const tpx_model *model) {
  return model ? model->num_architectures : 0;
}

const char *tpx_model_architecture(const tpx_model *model, size_t i) {
  if (model == NULL || i >= model->num_architectures)
    return NULL;
  return model->architectures[i];
}

const char *tpx_model_source(const tpx_model *model) {
  return model ? model->source : NULL;
}

/* ---- totals ---- */

static int64_t sat_add(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

int64_t tpx_model_total_params(const tpx_model *model) {
  if (model == NULL)
    return 0;
  int64_t total = 0;
  for (size_t i = 0; i < model->num_params; i++) {
    const tpx__param *p = &model->params[i];
    if (p->tied_to < 0)
      total = sat_add(total, tpx__shape_numel(model->dims + p->dims, p->ndim));
  }
  return total;
}

int64_t tpx_model_total_bytes(const tpx_model *model) {
  if (model == NULL)
    return 0;
  int64_t total = 0;
  for (size_t i = 0; i < model->num_params; i++) {
    const tpx__param *p = &model->params[i];
    if (p->tied_to < 0)
      total = sat_add(total, tpx__shape_numel(model->dims + p->dims, p->ndim) *
                                 (int64_t)tpx__model_dtype_size((tpx_dtype)p->dtype));
  }
  return total;
}
