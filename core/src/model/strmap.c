/* strmap.c — open-addressing string -> int64 hash map (see strmap.h).
 * Not a general container library: no deletion, borrowed keys. */
#include "model/strmap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/huge_map.h"

/* Slot arrays of a few MB and up come straight from mmap, asking for huge
 * pages where the kernel offers them only on request (THP "madvise"): a
 * probe is a random access, and with 4 KiB pages most probes of a big map
 * also miss the TLB. Below the threshold, calloc. */
enum { BIG_SLOTS = 2 * 1024 * 1024 };

static tpx__strmap_slot *slots_alloc(size_t cap) {
  size_t bytes = cap * sizeof(tpx__strmap_slot);
  if (bytes < BIG_SLOTS)
    return calloc(cap, sizeof(tpx__strmap_slot));
  return tpx__huge_map(bytes); /* anonymous mappings are zero-filled */
}

static void slots_free(tpx__strmap_slot *slots, size_t cap) {
  if (slots == NULL)
    return;
  size_t bytes = cap * sizeof(tpx__strmap_slot);
  if (bytes < BIG_SLOTS)
    free(slots);
  else
    munmap(slots, bytes);
}

static uint64_t mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h;
}

uint64_t tpx__strmap_hash(const char *key, size_t len) {
  /* Eight bytes per step: FQNs are long ("model.layers.17.mlp.experts.
   * 203.up_proj.weight") and a byte-wise hash showed up in profiles. */
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, key + i, 8);
    h = (h ^ mix(w)) * 0x9fb21c651e98df25ull;
  }
  uint64_t w = 0;
  if (i < len) {
    memcpy(&w, key + i, len - i);
    h = (h ^ mix(w ^ 0xff)) * 0x9fb21c651e98df25ull;
  }
  return mix(h);
}

void tpx__strmap_init(tpx__strmap *map) {
  map->slots = NULL;
  map->cap = 0;
  map->count = 0;
}

void tpx__strmap_free(tpx__strmap *map) {
  if (map == NULL)
    return;
  slots_free(map->slots, map->cap);
  tpx__strmap_init(map);
}

static tpx__strmap_slot *probe(const tpx__strmap *map, const char *key,
                               size_t len, uint32_t hash) {
  size_t mask = map->cap - 1;
  size_t i = (size_t)hash & mask;
  for (;;) {
    tpx__strmap_slot *s = &map->slots[i];
    if (s->key == NULL)
      return s;
    if (s->hash == hash && s->len == len && memcmp(s->key, key, len) == 0)
      return s;
    i = (i + 1) & mask;
  }
}

static int rehash(tpx__strmap *map, size_t new_cap) {
  tpx__strmap_slot *slots = slots_alloc(new_cap);
  if (slots == NULL)
    return -1;
  tpx__strmap old = *map;
  map->slots = slots;
  map->cap = new_cap;
  size_t mask = new_cap - 1;
  for (size_t i = 0; i < old.cap; i++) {
    if (old.slots[i].key == NULL)
      continue;
    /* Keys are distinct: find the first empty slot, no compares. */
    size_t j = (size_t)old.slots[i].hash & mask;
    while (slots[j].key != NULL) j = (j + 1) & mask;
    slots[j] = old.slots[i];
  }
  slots_free(old.slots, old.cap);
  return 0;
}

int tpx__strmap_reserve(tpx__strmap *map, size_t n) {
  size_t cap = map->cap ? map->cap : 16;
  while (cap - cap / 4 < n) { /* load factor <= 3/4 */
    if (cap >= ((size_t)1 << 31) ||
        cap > SIZE_MAX / 4 / sizeof(tpx__strmap_slot))
      return -1;
    cap *= 2;
  }
  return cap == map->cap ? 0 : rehash(map, cap);
}

int tpx__strmap_put_h(tpx__strmap *map, const char *key, size_t len,
                      uint64_t hash, int64_t value, int64_t *existing) {
  if (len >= UINT32_MAX || tpx__strmap_reserve(map, map->count + 1) != 0)
    return -1;
  uint32_t h = (uint32_t)hash;
  tpx__strmap_slot *s = probe(map, key, len, h);
  if (s->key != NULL) {
    if (existing != NULL)
      *existing = s->value;
    return 1;
  }
  s->key = key;
  s->len = (uint32_t)len;
  s->hash = h;
  s->value = value;
  map->count++;
  return 0;
}

int tpx__strmap_put(tpx__strmap *map, const char *key, size_t len,
                    int64_t value, int64_t *existing) {
  return tpx__strmap_put_h(map, key, len, tpx__strmap_hash(key, len), value,
                           existing);
}

int tpx__strmap_set(tpx__strmap *map, const char *key, size_t len,
                    int64_t value) {
  if (len >= UINT32_MAX || tpx__strmap_reserve(map, map->count + 1) != 0)
    return -1;
  uint32_t h = (uint32_t)tpx__strmap_hash(key, len);
  tpx__strmap_slot *s = probe(map, key, len, h);
  if (s->key == NULL) {
    s->key = key;
    s->len = (uint32_t)len;
    s->hash = h;
    map->count++;
  }
  s->value = value;
  return 0;
}

int tpx__strmap_find_h(const tpx__strmap *map, const char *key, size_t len,
                       uint64_t hash, int64_t *value) {
  if (map->cap == 0 || len >= UINT32_MAX)
    return 0;
  const tpx__strmap_slot *s = probe(map, key, len, (uint32_t)hash);
  if (s->key == NULL)
    return 0;
  if (value != NULL)
    *value = s->value;
  return 1;
}

int tpx__strmap_find(const tpx__strmap *map, const char *key, size_t len,
                     int64_t *value) {
  return tpx__strmap_find_h(map, key, len, tpx__strmap_hash(key, len), value);
}

int64_t tpx__strmap_get(const tpx__strmap *map, const char *key,
                        int64_t missing) {
  int64_t v;
  return tpx__strmap_find(map, key, strlen(key), &v) ? v : missing;
}
