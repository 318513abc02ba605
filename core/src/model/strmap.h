/* model/strmap.h — a small open-addressing hash map from strings to int64_t.
 *
 * Private helper (tpx__ prefix), generic enough for any area: the model uses
 * it for FQN -> module index and FQN -> parameter index; plan matching, the
 * registry or a report can reuse it. Keys are BORROWED: the map stores the
 * pointer and length, never a copy, so the caller keeps key bytes alive and
 * unchanged while they are in the map (the model keeps its strings in an
 * arena for exactly this reason). Keys are byte strings with an explicit
 * length, so a prefix of a longer string can be looked up without copying
 * ("model.layers.0" inside "model.layers.0.mlp").
 *
 * Linear probing, power-of-two capacity (at most 2^32 slots), load factor
 * <= 3/4, a word-at-a-time multiplicative hash. Keys must be shorter than
 * 4 GiB (put returns -1 otherwise).
 * No deletion (nobody needs it yet). Not thread-safe for writes. */
#ifndef TPX_MODEL_STRMAP_H
#define TPX_MODEL_STRMAP_H

#include <stddef.h>
#include <stdint.h>

/* 24 bytes: big maps are bound by cache misses, so slots stay small. */
typedef struct tpx__strmap_slot {
  const char *key; /* NULL: empty slot */
  uint32_t len;    /* keys are shorter than 4 GiB */
  uint32_t hash;   /* low 32 bits of the hash, compared before the bytes */
  int64_t value;
} tpx__strmap_slot;

typedef struct tpx__strmap {
  tpx__strmap_slot *slots;
  size_t cap;   /* 0 or a power of two */
  size_t count; /* occupied slots */
} tpx__strmap;

/* An empty map; no allocation until the first insertion. */
#define TPX__STRMAP_INIT                                                       \
  { NULL, 0, 0 }

void tpx__strmap_init(tpx__strmap *map);
/* Frees the slot array (never the keys). Leaves an empty, reusable map. */
void tpx__strmap_free(tpx__strmap *map);

/* Make room for `n` entries in total without rehashing. 0 ok, -1 no memory. */
int tpx__strmap_reserve(tpx__strmap *map, size_t n);

/* Insert key[0..len) -> value. Returns 0 when inserted, 1 when the key was
 * already present (its value is left unchanged and written to *existing if
 * non-NULL), -1 when out of memory. */
int tpx__strmap_put(tpx__strmap *map, const char *key, size_t len,
                    int64_t value, int64_t *existing);

/* Overwrite or insert. 0 ok, -1 no memory. */
int tpx__strmap_set(tpx__strmap *map, const char *key, size_t len,
                    int64_t value);

/* 1 and *value filled (value may be NULL) when found, else 0. */
int tpx__strmap_find(const tpx__strmap *map, const char *key, size_t len,
                     int64_t *value);

/* Convenience for NUL-terminated keys: the value, or `missing`. */
int64_t tpx__strmap_get(const tpx__strmap *map, const char *key,
                        int64_t missing);

static inline size_t tpx__strmap_count(const tpx__strmap *map) {
  return map->count;
}

/* The hash used by the map. The _h variants below take it precomputed, so a
 * caller that probes the same key twice (find, then put) hashes it once. */
uint64_t tpx__strmap_hash(const char *key, size_t len);
int tpx__strmap_put_h(tpx__strmap *map, const char *key, size_t len,
                      uint64_t hash, int64_t value, int64_t *existing);
int tpx__strmap_find_h(const tpx__strmap *map, const char *key, size_t len,
                       uint64_t hash, int64_t *value);

#endif /* TPX_MODEL_STRMAP_H */
