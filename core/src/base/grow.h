/* base/grow.h — the one growth helper for the library's dynamic arrays:
 * make room for `need` elements by doubling the capacity (from `first`),
 * instead of a hand-rolled `cap ? cap * 2 : 16` + realloc at every site.
 * Internal. */
#ifndef TPX_BASE_GROW_H
#define TPX_BASE_GROW_H

#include <stddef.h>

/* *(T **)items holds *cap elements of `elem` bytes; when need > *cap the
 * array is reallocated to the first doubling of *cap (or of `first` when
 * *cap is 0) that holds `need`. 0 on success; -1 when out of memory or the
 * size overflows, with the array and *cap untouched. */
int tpx__grow(void *items, size_t *cap, size_t need, size_t elem, size_t first);

/* The usual call: TPX_GROW(list->items, list->cap, list->count + 1, 16). */
#define TPX_GROW(ptr, cap, need, first)                                        \
  tpx__grow(&(ptr), &(cap), (need), sizeof *(ptr), (first))

#endif /* TPX_BASE_GROW_H */
