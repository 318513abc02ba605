/* model.c — the module tree of a tpx_model: builder (modules, parameters,
 * ties), queries and totals. Config JSON lives in config.c, safetensors
 * import in safetensors.c. Lookups by FQN walk the tree atom by atom: a
 * module's children are scanned when few, else found through the module's
 * own name map; parameters through their module's list. A builder adding
 * in tree order starts from the last path it used, so building a model of
 * a million parameters is linear and touches little memory at random. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* mremap */
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/grow.h"
#include "model/huge_map.h"
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
    n = tpx__huge_map(BIG_CHUNK);
    if (n == NULL)
      return NULL;
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
  case TPX_DTYPE_##name: return size;
    TPX_DTYPE_LIST(TPX__DTYPE_SIZE)
#undef TPX__DTYPE_SIZE
  default: return 0;
  }
}

const char *tpx__model_dtype_st_name(tpx_dtype dtype) {
  switch (dtype) {
#define TPX__DTYPE_ST(name, size, st, hf)                                      \
  case TPX_DTYPE_##name: return st;
    TPX_DTYPE_LIST(TPX__DTYPE_ST)
#undef TPX__DTYPE_ST
  default: return "INVALID";
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
  int bad = fqn[0] == '.' || fqn[len - 1] == '.';
  size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* Eight bytes at a time: this runs on every FQN of a million-tensor
   * model, and a memchr per dot cost a tenth of the build. m has 0x80 in
   * each byte that is a dot (exact, no borrow between bytes); a dot whose
   * next byte is a dot is a bit of m & (m >> 8), or of m & carry across
   * words. */
  const uint64_t k7 = 0x7f7f7f7f7f7f7f7fULL, dots = 0x2e2e2e2e2e2e2e2eULL;
  uint64_t carry = 0;
  for (; !bad && i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, fqn + i, 8);
    uint64_t x = w ^ dots;
    uint64_t m = ~(((x & k7) + k7) | x | k7);
    bad = ((m & (m >> 8)) | (m & carry)) != 0;
    carry = (m >> 56) & 0x80;
  }
  if (!bad && i > 0 && i < len)
    bad = fqn[i - 1] == '.' && fqn[i] == '.';
#endif
  for (; !bad && i + 1 < len; i++) bad = fqn[i] == '.' && fqn[i + 1] == '.';
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
#if defined(__GNUC__)
    /* n * shape[i] > INT64_MAX / 8 is the division test below without the
     * division (a 64-bit divide per dim was visible in the build). */
    int64_t t;
    if (__builtin_mul_overflow(n, shape[i], &t) || t > INT64_MAX / 8)
      return -1;
    n = t;
#else
    if (shape[i] > 0 && n > INT64_MAX / 8 / shape[i])
      return -1;
    n *= shape[i];
#endif
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
#if defined(__linux__) && defined(MREMAP_MAYMOVE)
  /* Moving the pages, not copying them: doubling a 60 MB module array by
   * copy was a tenth of the build. */
  if (old_bytes >= BIG_CHUNK) {
    void *r = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
    if (r == MAP_FAILED)
      return NULL;
    tpx__huge_hint(r, new_bytes);
    return r;
  }
#endif
  void *q = tpx__huge_map(new_bytes);
  if (q == NULL)
    return NULL;
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

/* Put child `c` of module `parent` into the parent's kid map. 0 ok, -1 no
 * memory. */
static int map_child(tpx_model *model, int64_t parent, int64_t c) {
  const tpx__module *p = &model->modules[parent];
  const tpx__module *m = &model->modules[c];
  size_t cut = parent > 0 ? (size_t)p->fqn_len + 1 : 0;
  return tpx__strmap_put(&model->kid_maps[p->kid_map - 1], m->fqn + cut,
                         m->fqn_len - cut, c, NULL) < 0
             ? -1
             : 0;
}

/* A new, empty map at the end of the pool: its number (1 + index), or 0
 * when out of memory. Map numbers are stored in 32 bits (0 = none). */
static uint32_t pool_map(tpx_model *model) {
  if (model->num_kid_maps == model->cap_kid_maps &&
      (model->cap_kid_maps ? 2 * model->cap_kid_maps : 8) > UINT32_MAX / 2)
    return 0;
  if (TPX_GROW(model->kid_maps, model->cap_kid_maps, model->num_kid_maps + 1,
               8) != 0)
    return 0;
  tpx__strmap_init(&model->kid_maps[model->num_kid_maps]);
  return (uint32_t)++model->num_kid_maps;
}

/* Drop the map just made by pool_map (the last one). */
static void pool_unmap(tpx_model *model) {
  tpx__strmap_free(&model->kid_maps[--model->num_kid_maps]);
}

/* Give module `parent` a kid map holding its children. 0 ok, -1 no memory
 * (the module is then left without a map). */
static int new_kid_map(tpx_model *model, int64_t parent) {
  uint32_t map = pool_map(model);
  if (map == 0)
    return -1;
  tpx__module *p = &model->modules[parent];
  p->kid_map = map;
  for (uint32_t i = 0; i < p->num_children; i++)
    if (map_child(model, parent, p->children[i]) != 0) {
      pool_unmap(model);
      p->kid_map = 0;
      return -1;
    }
  return 0;
}

/* Parameter `name` of module m, or -1: through the module's parameter map
 * when it has one, else by scanning its (at most TPX__MODEL_FANOUT)
 * parameters. */
static int64_t module_param(const tpx_model *model, int64_t m, const char *name,
                            size_t nlen) {
  const tpx__module *mod = &model->modules[m];
  int64_t found;
  if (mod->param_map != 0)
    return tpx__strmap_find(&model->kid_maps[mod->param_map - 1], name, nlen,
                            &found)
               ? found
               : -1;
  for (int64_t q = mod->first_param; q >= 0; q = model->params[q].next_param) {
    const tpx__param *p = &model->params[q];
    const char *pn = p->fqn + p->name_off;
    if (strncmp(pn, name, nlen) == 0 && pn[nlen] == '\0')
      return q;
  }
  return -1;
}

/* Enter parameter `index` (named name[0..nlen), not yet linked) into module
 * m's parameter map, making the map when the module's list reaches the
 * fan-out. 0 ok, -1 no memory (the module's map is then as it was). */
static int map_param(tpx_model *model, int64_t m, const char *name, size_t nlen,
                     int64_t index) {
  tpx__module *mod = &model->modules[m];
  if (mod->param_map != 0)
    return tpx__strmap_put(&model->kid_maps[mod->param_map - 1], name, nlen,
                           index, NULL) < 0
               ? -1
               : 0;
  size_t n = 0;
  for (int64_t q = mod->first_param; q >= 0; q = model->params[q].next_param)
    n++;
  if (n < TPX__MODEL_FANOUT)
    return 0;
  uint32_t map = pool_map(model);
  if (map == 0)
    return -1;
  tpx__strmap *pm = &model->kid_maps[map - 1];
  int bad = tpx__strmap_put(pm, name, nlen, index, NULL) < 0;
  for (int64_t q = mod->first_param; q >= 0 && !bad;
       q = model->params[q].next_param) {
    const tpx__param *p = &model->params[q];
    const char *pn = p->fqn + p->name_off;
    bad = tpx__strmap_put(pm, pn, strlen(pn), q, NULL) < 0;
  }
  if (bad) {
    pool_unmap(model);
    return -1;
  }
  mod->param_map = map;
  return 0;
}

enum { ARENA_KIDS = 4 }; /* children arrays up to this size: arena */

/* Append a module whose parent exists; `fqn` already in the arena. */
static int64_t new_module(tpx_model *model, const char *fqn, size_t len,
                          int64_t parent, tpx_module_kind kind) {
  size_t need = model->num_modules + 1;
  if (grow((void **)&model->modules, &model->cap_modules, need,
           sizeof *model->modules) != 0 ||
      grow((void **)&model->parents, &model->cap_parents, need,
           sizeof *model->parents) != 0 ||
      grow((void **)&model->kinds, &model->cap_kinds, need,
           sizeof *model->kinds) != 0)
    return -1;
  int64_t index = (int64_t)model->num_modules;
  tpx__module *m = &model->modules[index];
  memset(m, 0, sizeof *m);
  m->fqn = fqn;
  m->fqn_len = (uint32_t)len;
  m->first_param = -1;
  m->kind = (uint8_t)kind;
  model->parents[index] = parent;
  model->kinds[index] = (uint8_t)kind;
  if (parent >= 0) {
    tpx__module *p = &model->modules[parent];
    if (p->num_children == p->cap_children) {
      /* The first ARENA_KIDS children live in the arena (most modules have
       * a few: one malloc per module was a twentieth of the build); bigger
       * families are malloc'd. */
      uint32_t cap = p->cap_children ? 2 * p->cap_children : ARENA_KIDS;
      int64_t *c = NULL;
      if (p->cap_children == 0) {
        char *raw = tpx__arena_alloc(&model->arena,
                                     ARENA_KIDS * sizeof *c + sizeof *c - 1);
        if (raw != NULL)
          c = (int64_t *)(void *)(raw +
                                  (sizeof *c - (uintptr_t)raw % sizeof *c) %
                                      sizeof *c);
      } else if (p->cap_children == ARENA_KIDS) {
        c = malloc(cap * sizeof *c);
        if (c != NULL)
          memcpy(c, p->children, ARENA_KIDS * sizeof *c);
      } else if (cap > p->cap_children && cap < UINT32_MAX / 2) {
        c = realloc(p->children, cap * sizeof *c);
      }
      if (c == NULL)
        return -1;
      p->children = c;
      p->cap_children = cap;
    }
    /* A family growing past the fan-out gets its map, all at once; the
     * new module goes in last, so a failure leaves no entry pointing at a
     * module that was not added. */
    if (p->num_children == TPX__MODEL_FANOUT && new_kid_map(model, parent) != 0)
      return -1;
    if (p->kid_map != 0 && map_child(model, parent, index) != 0)
      return -1;
    p->children[p->num_children++] = index;
  }
  model->num_modules++;
  return index;
}

/* The child of `parent` at fqn[0..end), whose last atom starts at fqn[cut]
 * (fqn[0..cut) is the parent's FQN plus its dot); -1 when none. */
static int64_t find_child(const tpx_model *model, int64_t parent,
                          const char *fqn, size_t cut, size_t end) {
  const tpx__module *p = &model->modules[parent];
  int64_t found;
  if (p->kid_map != 0)
    return tpx__strmap_find(&model->kid_maps[p->kid_map - 1], fqn + cut,
                            end - cut, &found)
               ? found
               : -1;
  for (uint32_t i = 0; i < p->num_children; i++) {
    const tpx__module *c = &model->modules[p->children[i]];
    if (c->fqn_len == end && memcmp(c->fqn + cut, fqn + cut, end - cut) == 0)
      return p->children[i];
  }
  return -1;
}

/* Module at fqn[0..len) by walking down from the root; -1 when absent.
 * Read-only; any string (invalid FQNs are simply not found). */
static int64_t lookup_module(const tpx_model *model, const char *fqn,
                             size_t len) {
  if (len == 0)
    return 0;
  int64_t m = 0;
  size_t cut = 0;
  for (;;) {
    const char *dot = memchr(fqn + cut, '.', len - cut);
    size_t end = dot ? (size_t)(dot - fqn) : len;
    m = find_child(model, m, fqn, cut, end);
    if (m < 0 || end == len)
      return m;
    cut = end + 1;
  }
}

/* Length of the common prefix of a[0..n) and b[0..n). */
static size_t common_prefix(const char *a, const char *b, size_t n) {
  size_t i = 0;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) &&                            \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    if (x != y)
      return i + (size_t)__builtin_ctzll(x ^ y) / 8;
  }
#endif
  while (i < n && a[i] == b[i]) i++;
  return i;
}

static int chain_set(tpx_model *model, size_t depth, int64_t module) {
  if (TPX_GROW(model->chain, model->chain_cap, depth + 1, 16))
    return -1;
  model->chain[depth] = module;
  model->chain_len = depth + 1;
  model->last_module = module;
  return 0;
}

/* Index of the module at fqn[0..len). With `create`, missing modules are
 * added: the module itself as `kind`, missing parents as containers, and
 * `*created` tells whether the module itself is new; -1 means out of
 * memory. Without `create` nothing is added and -1 means absent. The FQN
 * must be valid. The walk starts at the deepest module of the last path
 * that is an ancestor of the FQN, so a builder adding in tree order looks
 * at one new atom per call. */
static int64_t resolve_module(tpx_model *model, const char *fqn, size_t len,
                              tpx_module_kind kind, int create, int *created) {
  *created = 0;
  const tpx__module *last = &model->modules[model->last_module];
  size_t common =
      common_prefix(last->fqn, fqn, last->fqn_len < len ? last->fqn_len : len);
  if (common == len && last->fqn_len == len)
    return model->last_module;
  /* Deepest chain entry that is a proper ancestor: its FQN is a prefix of
   * last's, so a prefix of fqn when no longer than `common`. */
  size_t d = model->chain_len - 1;
  while (d > 0) {
    const tpx__module *a = &model->modules[model->chain[d]];
    if (a->fqn_len <= common && a->fqn_len < len && fqn[a->fqn_len] == '.')
      break;
    d--;
  }
  int64_t m = model->chain[d];
  size_t cut = d ? model->modules[m].fqn_len + 1 : 0;
  int fresh = 0; /* m was created by this call: it has no children yet */
  model->chain_len = d + 1;
  model->last_module = m;
  for (;;) {
    const char *dot = memchr(fqn + cut, '.', len - cut);
    size_t end = dot ? (size_t)(dot - fqn) : len;
    int64_t c = fresh ? -1 : find_child(model, m, fqn, cut, end);
    if (c < 0) {
      if (!create)
        return -1;
      char *copy = tpx__arena_strndup(&model->arena, fqn, end);
      if (copy == NULL)
        return -1;
      c = new_module(model, copy, end, m,
                     end == len ? kind : TPX_MODULE_CONTAINER);
      if (c < 0)
        return -1;
      fresh = 1;
      if (end == len)
        *created = 1;
    }
    if (chain_set(model, ++d, c) != 0)
      return -1;
    m = c;
    if (end == len)
      return m;
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
  char *root = tpx__arena_strndup(&model->arena, "", 0);
  if (root == NULL ||
      new_module(model, root, 0, -1, TPX_MODULE_CONTAINER) != 0 ||
      chain_set(model, 0, 0) != 0) {
    tpx_model_destroy(model);
    return no_memory(err);
  }
  *out = model;
  return TPX_OK;
}

void tpx_model_destroy(tpx_model *model) {
  if (model == NULL)
    return;
  for (size_t i = 0; i < model->num_modules; i++)
    if (model->modules[i].cap_children > ARENA_KIDS)
      free(model->modules[i].children);
  array_free(model->modules, model->cap_modules * sizeof *model->modules);
  array_free(model->parents, model->cap_parents * sizeof *model->parents);
  array_free(model->kinds, model->cap_kinds * sizeof *model->kinds);
  array_free(model->params, model->cap_params * sizeof *model->params);
  array_free(model->dims, model->cap_dims * sizeof *model->dims);
  for (size_t i = 0; i < model->num_kid_maps; i++)
    tpx__strmap_free(&model->kid_maps[i]);
  free(model->kid_maps);
  free(model->chain);
  tpx__arena_free(&model->arena);
  if (model->config != NULL)
    json_decref(model->config);
  for (size_t i = 0; i < model->num_architectures; i++)
    free(model->architectures[i]);
  free(model->architectures);
  free(model->source);
  free(model->aliases);
  free(model->buffer_rules);
  free(model->buffers);
  free(model->conversion_note);
  free(model->fold_srcs);
  free(model->fold_params);
  tpx__strmap_free(&model->fold_names);
  tpx__family_free(&model->family);
  free(model->quant);
  tpx__strmap_free(&model->quant_names);
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
  int64_t index = resolve_module(model, fqn, len, kind, 1, &created);
  if (index < 0)
    return no_memory(err);
  model->modules[index].kind = (uint8_t)kind;
  model->kinds[index] = (uint8_t)kind;
  if (index_out != NULL)
    *index_out = index;
  return TPX_OK;
}

static tpx_status check_dtype(tpx_dtype dtype, const char *fqn,
                              tpx_error *err) {
  if ((int)dtype <= (int)TPX_DTYPE_INVALID ||
      (int)dtype >= (int)TPX_DTYPE_COUNT)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "parameter '%s': invalid dtype %d", fqn, (int)dtype);
  return TPX_OK;
}

tpx_status tpx_model_add_param(tpx_model *model, const char *module_fqn,
                               const char *name, const int64_t *shape, int ndim,
                               tpx_dtype dtype, int64_t *index_out,
                               tpx_error *err) {
  if (model == NULL || module_fqn == NULL || name == NULL ||
      (shape == NULL && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_param: NULL argument");
  size_t mlen = strlen(module_fqn), nlen = strlen(name);
  /* The last module used is valid: builders add a module, then its
   * parameters, so the check is usually a compare. */
  const tpx__module *last = &model->modules[model->last_module];
  tpx_status st = TPX_OK;
  int is_last =
      last->fqn_len == mlen && memcmp(last->fqn, module_fqn, mlen) == 0;
  if (!is_last)
    st = tpx__model_check_fqn(module_fqn, mlen, "module", err);
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
  /* Everything is checked before the first change, so a failed call leaves
   * the model as it was (bar some unused arena bytes and the lookup cache). */
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "parameter '%s': ndim %d outside 0..%d", fqn, ndim,
                         TPX_MAX_TENSOR_DIMS);
  if (tpx__shape_numel(shape, ndim) < 0) {
    char sbuf[160];
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "parameter '%s': shape %s has a negative or too "
                         "large dimension",
                         fqn,
                         tpx__format_shape(sbuf, sizeof sbuf, shape, ndim));
  }
  st = check_dtype(dtype, fqn, err);
  if (st != TPX_OK)
    return st;
  /* A duplicate can only sit in an existing module's list. */
  int created;
  int64_t module = is_last ? model->last_module
                           : resolve_module(model, module_fqn, mlen,
                                            TPX_MODULE_OTHER, 0, &created);
  if (module >= 0 && module_param(model, module, name, nlen) >= 0)
    return tpx_error_set(err, TPX_ALREADY_EXISTS,
                         "parameter '%s' already exists", fqn);

  if (grow((void **)&model->params, &model->cap_params, model->num_params + 1,
           sizeof *model->params) != 0 ||
      grow((void **)&model->dims, &model->cap_dims,
           model->num_dims + (size_t)ndim, sizeof *model->dims) != 0)
    return no_memory(err);
  if (module < 0)
    module =
        resolve_module(model, module_fqn, mlen, TPX_MODULE_OTHER, 1, &created);
  if (module < 0)
    return no_memory(err);
  int64_t index = (int64_t)model->num_params;
  if (map_param(model, module, fqn + flen - nlen, nlen, index) != 0)
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
  p->next_param = model->modules[module].first_param;
  model->modules[module].first_param = index;
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
        tpx_model_add_param(model, module_fqn, dot ? dot + 1 : param_fqn, shape,
                            r->ndim, (tpx_dtype)r->dtype, &param, err);
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
    for (size_t j = 0; j < kept; j++) dup |= strcmp(list[j], names[i]) == 0;
    if (dup)
      continue;
    list[kept] = strdup(names[i]);
    if (list[kept] == NULL) {
      for (size_t j = 0; j < kept; j++) free(list[j]);
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
  return module_ok(model, index) ? model->parents[index] : -1;
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
  return lookup_module(model, fqn, strlen(fqn));
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
  /* "<module>.<name>", split at the last dot (names have no dots). */
  const char *dot = strrchr(fqn, '.');
  const char *name = dot ? dot + 1 : fqn;
  int64_t m = dot ? lookup_module(model, fqn, (size_t)(dot - fqn)) : 0;
  if (m < 0 || (dot && dot == fqn))
    return -1;
  return module_param(model, m, name, strlen(name));
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

/* Elements (bytes when `bytes`) of the parameters that hold their own
 * storage (ties counted once), saturating at INT64_MAX. */
static int64_t untied_total(const tpx_model *model, int bytes) {
  if (model == NULL)
    return 0;
  int64_t total = 0;
  for (size_t i = 0; i < model->num_params; i++) {
    const tpx__param *p = &model->params[i];
    if (p->tied_to >= 0)
      continue;
    int64_t n = tpx__shape_numel(model->dims + p->dims, p->ndim);
    if (bytes)
      n *= (int64_t)tpx__model_dtype_size((tpx_dtype)p->dtype);
    total = sat_add(total, n);
  }
  return total;
}

int64_t tpx_model_total_params(const tpx_model *model) {
  return untied_total(model, 0);
}

int64_t tpx_model_total_bytes(const tpx_model *model) {
  return untied_total(model, 1);
}
