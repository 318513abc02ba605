/* grow.c — capacity doubling for dynamic arrays (base/grow.h). */
#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tpx__grow(void *items, size_t *cap, size_t need, size_t elem,
              size_t first) {
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : (first ? first : 1);
  while (n < need) {
    if (n > SIZE_MAX / 2)
      return -1;
    n *= 2;
  }
  if (elem && n > SIZE_MAX / elem)
    return -1;
  void *old;
  memcpy(&old, items, sizeof old); /* any object pointer, read as void * */
  void *p = realloc(old, n * elem);
  if (!p)
    return -1;
  memcpy(items, &p, sizeof p);
  *cap = n;
  return 0;
}
