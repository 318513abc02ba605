/* model/huge_map.h — the one way the model's big arrays (arena chunks,
 * module/parameter arrays, hash-map slots) ask the kernel for memory: an
 * anonymous mapping with the transparent-huge-page hint, which the kernel
 * honours only on request (THP "madvise"); big arrays are probed at random,
 * and with 4 KiB pages most probes also miss the TLB. Internal. */
#ifndef TPX_MODEL_HUGE_MAP_H
#define TPX_MODEL_HUGE_MAP_H

#include <stddef.h>
#include <sys/mman.h>

/* Ask for huge pages on [p, p + bytes); a no-op where there are none. */
static inline void tpx__huge_hint(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

/* `bytes` of zero-filled memory from mmap, hinted; NULL on failure. Free
 * it with munmap(p, bytes). */
static inline void *tpx__huge_map(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  tpx__huge_hint(p, bytes);
  return p;
}

#endif /* TPX_MODEL_HUGE_MAP_H */
