/* plan.c — the tpx_plan container: ordered (key, style, optional) entries
 * with Python dict-update semantics (an existing key is replaced in place, a
 * new key is appended).
 *
 * Not the JSON form (plan_json.c) nor matching (match.c). Plans can hold many
 * entries (planning benchmarks spell out every layer), so keys are found
 * through an open-addressing hash index, and styles — large value structs
 * that repeat across entries — are interned: each entry stores the index of
 * a canonical style. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "plan/plan_internal.h"
#include "plan/style_internal.h"
#include "tpx/plan.h"

typedef struct plan_entry {
  char *module;
  uint64_t hash;
  uint32_t style; /* index into plan->styles */
  int optional;
} plan_entry;

struct tpx_plan {
  plan_entry *entries;
  size_t count, cap;
  int64_t *slots; /* entry index or -1; size nslots (power of two) */
  size_t nslots;
  tpx_style *styles; /* interned, canonical */
  uint64_t *style_hash;
  size_t nstyles, style_cap;
  int64_t *style_slots;
  size_t nstyle_slots;
};

static uint64_t fnv1a(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* Styles are padding-free, canonical value structs (style_internal.h):
 * hash them a word at a time. */
static uint64_t style_hash(const tpx_style *s) {
  const unsigned char *p = (const unsigned char *)s;
  uint64_t h = 1469598103934665603ULL;
  size_t n = sizeof *s, i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ULL;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

static uint64_t str_hash(const char *s, size_t *len) {
  size_t n = strlen(s);
  if (len)
    *len = n;
  return fnv1a(s, n);
}

tpx_status tpx__plan_key_validate(const char *key, tpx_error *err) {
  if (!key)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "plan key is NULL");
  if (key[0] == '\0')
    return TPX_OK; /* the root module */
  size_t n = strlen(key);
  if (key[0] == '.')
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "plan key '%s': leading '.' (empty first atom); "
                         "keys are dot-separated module names, \"\" is "
                         "the root",
                         key);
  if (key[n - 1] == '.')
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "plan key '%s': trailing '.' (empty last atom)", key);
  const char *dd = strstr(key, "..");
  if (dd)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "plan key '%s': empty atom ('..' at offset %zu)", key,
                         (size_t)(dd - key));
  return TPX_OK;
}

tpx_status tpx_plan_create(tpx_plan **out, tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_create: NULL out");
  *out = NULL;
  tpx_plan *p = calloc(1, sizeof *p);
  if (!p)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (plan)");
  *out = p;
  return TPX_OK;
}

void tpx_plan_destroy(tpx_plan *plan) {
  if (!plan)
    return;
  for (size_t i = 0; i < plan->count; i++) free(plan->entries[i].module);
  free(plan->entries);
  free(plan->slots);
  free(plan->styles);
  free(plan->style_hash);
  free(plan->style_slots);
  free(plan);
}

/* ---- key index ---- */

static int64_t find_slot(const tpx_plan *p, const char *key, uint64_t h) {
  if (!p->nslots)
    return -1;
  size_t mask = p->nslots - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    int64_t e = p->slots[i];
    if (e < 0)
      return -1;
    if (p->entries[e].hash == h && strcmp(p->entries[e].module, key) == 0)
      return e;
  }
}

static void index_insert(tpx_plan *p, int64_t e) {
  size_t mask = p->nslots - 1;
  size_t i = (size_t)p->entries[e].hash & mask;
  while (p->slots[i] >= 0) i = (i + 1) & mask;
  p->slots[i] = e;
}

static tpx_status index_rebuild(tpx_plan *p, size_t nslots, tpx_error *err) {
  int64_t *slots = malloc(nslots * sizeof *slots);
  if (!slots)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (plan)");
  for (size_t i = 0; i < nslots; i++) slots[i] = -1;
  free(p->slots);
  p->slots = slots;
  p->nslots = nslots;
  for (size_t e = 0; e < p->count; e++) index_insert(p, (int64_t)e);
  return TPX_OK;
}

/* ---- style interning ---- */

static tpx_status style_intern(tpx_plan *p, const tpx_style *canon,
                               uint32_t *out, tpx_error *err) {
  /* Consecutive entries usually share a style: try the newest first. */
  if (p->nstyles &&
      memcmp(&p->styles[p->nstyles - 1], canon, sizeof *canon) == 0) {
    *out = (uint32_t)(p->nstyles - 1);
    return TPX_OK;
  }
  uint64_t h = style_hash(canon);
  if (p->nstyle_slots) {
    size_t mask = p->nstyle_slots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
      int64_t s = p->style_slots[i];
      if (s < 0)
        break;
      if (p->style_hash[s] == h &&
          memcmp(&p->styles[s], canon, sizeof *canon) == 0) {
        *out = (uint32_t)s;
        return TPX_OK;
      }
    }
  }
  if (p->nstyles == p->style_cap) {
    size_t cap = p->style_cap, cap_hash = p->style_cap;
    if (TPX_GROW(p->styles, cap, cap + 1, 8) ||
        TPX_GROW(p->style_hash, cap_hash, cap_hash + 1, 8))
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (plan)");
    p->style_cap = cap;
  }
  if ((p->nstyles + 1) * 2 > p->nstyle_slots) {
    size_t n = p->nstyle_slots ? p->nstyle_slots * 2 : 16;
    int64_t *slots = malloc(n * sizeof *slots);
    if (!slots)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (plan)");
    for (size_t i = 0; i < n; i++) slots[i] = -1;
    for (size_t s = 0; s < p->nstyles; s++) {
      size_t i = (size_t)p->style_hash[s] & (n - 1);
      while (slots[i] >= 0) i = (i + 1) & (n - 1);
      slots[i] = (int64_t)s;
    }
    free(p->style_slots);
    p->style_slots = slots;
    p->nstyle_slots = n;
  }
  size_t s = p->nstyles++;
  p->styles[s] = *canon;
  p->style_hash[s] = h;
  size_t mask = p->nstyle_slots - 1;
  size_t i = (size_t)h & mask;
  while (p->style_slots[i] >= 0) i = (i + 1) & mask;
  p->style_slots[i] = (int64_t)s;
  *out = (uint32_t)s;
  return TPX_OK;
}

/* ---- entries ---- */

tpx_status tpx__plan_set_nocheck(tpx_plan *plan, const char *module,
                                 const tpx_style *canon, int optional,
                                 int *replaced, tpx_error *err) {
  size_t len;
  uint64_t h = str_hash(module, &len);
  uint32_t sidx = 0;
  tpx_status st = style_intern(plan, canon, &sidx, err);
  if (st != TPX_OK)
    return st;
  int64_t e = find_slot(plan, module, h);
  if (replaced)
    *replaced = e >= 0;
  if (e >= 0) {
    plan->entries[e].style = sidx;
    plan->entries[e].optional = optional ? 1 : 0;
    return TPX_OK;
  }
  if (TPX_GROW(plan->entries, plan->cap, plan->count + 1, 16))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (plan)");
  char *copy = malloc(len + 1);
  if (!copy)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (plan)");
  memcpy(copy, module, len + 1);
  if ((plan->count + 1) * 2 > plan->nslots) {
    /* Grow before appending so a failure leaves the plan unchanged. */
    st = index_rebuild(plan, plan->nslots ? plan->nslots * 2 : 32, err);
    if (st != TPX_OK) {
      free(copy);
      return st;
    }
  }
  plan_entry *ne = &plan->entries[plan->count];
  ne->module = copy;
  ne->hash = h;
  ne->style = sidx;
  ne->optional = optional ? 1 : 0;
  plan->count++;
  index_insert(plan, (int64_t)plan->count - 1);
  return TPX_OK;
}

tpx_status tpx_plan_set(tpx_plan *plan, const char *module,
                        const tpx_style *style, int optional, tpx_error *err) {
  if (!plan || !module || !style)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_set: NULL argument");
  tpx_status st = tpx__plan_key_validate(module, err);
  if (st != TPX_OK)
    return st;
  tpx_error e = {0};
  if (tpx_style_validate(style, &e) != TPX_OK)
    return tpx_error_set(err, e.status, "plan key '%s' (%s): %s", module,
                         tpx_style_kind_name(style->kind)
                             ? tpx_style_kind_name(style->kind)
                             : "?",
                         e.message);
  tpx_style canon;
  tpx__style_canonical(style, &canon);
  return tpx__plan_set_nocheck(plan, module, &canon, optional, NULL, err);
}

int64_t tpx_plan_find(const tpx_plan *plan, const char *module) {
  if (!plan || !module)
    return -1;
  return find_slot(plan, module, str_hash(module, NULL));
}

tpx_status tpx_plan_remove(tpx_plan *plan, const char *module, tpx_error *err) {
  if (!plan || !module)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_remove: NULL argument");
  int64_t e = tpx_plan_find(plan, module);
  if (e < 0)
    return tpx_error_set(err, TPX_NOT_FOUND, "plan has no key '%s'", module);
  free(plan->entries[e].module);
  memmove(&plan->entries[e], &plan->entries[e + 1],
          (plan->count - (size_t)e - 1) * sizeof *plan->entries);
  plan->count--;
  /* Indices after e shifted: rebuild in place (same slot count, no alloc). */
  for (size_t i = 0; i < plan->nslots; i++) plan->slots[i] = -1;
  for (size_t i = 0; i < plan->count; i++) index_insert(plan, (int64_t)i);
  return TPX_OK;
}

tpx_status tpx_plan_update(tpx_plan *plan, const tpx_plan *overrides,
                           tpx_error *err) {
  if (!plan || !overrides)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_update: NULL argument");
  if (plan == overrides)
    return TPX_OK; /* d.update(d) changes nothing */
  for (size_t i = 0; i < overrides->count; i++) {
    const plan_entry *oe = &overrides->entries[i];
    tpx_status st =
        tpx__plan_set_nocheck(plan, oe->module, &overrides->styles[oe->style],
                              oe->optional, NULL, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

tpx_status tpx_plan_clone(const tpx_plan *plan, tpx_plan **out,
                          tpx_error *err) {
  if (!plan || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_clone: NULL argument");
  *out = NULL;
  tpx_plan *c;
  tpx_status st = tpx_plan_create(&c, err);
  if (st != TPX_OK)
    return st;
  st = tpx_plan_update(c, plan, err);
  if (st != TPX_OK) {
    tpx_plan_destroy(c);
    return st;
  }
  *out = c;
  return TPX_OK;
}

size_t tpx_plan_size(const tpx_plan *plan) { return plan ? plan->count : 0; }

tpx_status tpx_plan_get(const tpx_plan *plan, size_t index, tpx_plan_entry *out,
                        tpx_error *err) {
  if (!plan || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_get: NULL argument");
  if (index >= plan->count)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "plan entry %zu out of range (plan has %zu)", index,
                         plan->count);
  const plan_entry *e = &plan->entries[index];
  out->module = e->module;
  out->style = plan->styles[e->style];
  out->optional = e->optional;
  return TPX_OK;
}

const char *tpx__plan_key(const tpx_plan *plan, size_t index) {
  return plan->entries[index].module;
}

const tpx_style *tpx__plan_style(const tpx_plan *plan, size_t index) {
  return &plan->styles[plan->entries[index].style];
}

int tpx__plan_optional(const tpx_plan *plan, size_t index) {
  return plan->entries[index].optional;
}
