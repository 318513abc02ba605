/* checkpoint/xxh64.h — XXH64 (Yann Collet's xxHash, 64-bit variant), one
 * shot and streaming: the hash of the source digest (source_digest.c).
 * Fast (a few GB/s per core) and well distributed; not a cryptographic
 * hash: it tells data apart by accident, not against an adversary. Not
 * public. */
#ifndef TPX_CHECKPOINT_XXH64_H
#define TPX_CHECKPOINT_XXH64_H

#include <stddef.h>
#include <stdint.h>

typedef struct tpx__xxh64_state {
  uint64_t v[4];         /* the four lanes */
  uint64_t total;        /* bytes fed so far */
  unsigned char buf[32]; /* a stripe not yet complete */
  size_t used;           /* bytes in buf */
  uint64_t seed;
} tpx__xxh64_state;

void tpx__xxh64_init(tpx__xxh64_state *s, uint64_t seed);
void tpx__xxh64_update(tpx__xxh64_state *s, const void *data, size_t n);
uint64_t tpx__xxh64_digest(const tpx__xxh64_state *s);
/* XXH64 of data[0..n) with `seed`, in one call. */
uint64_t tpx__xxh64(const void *data, size_t n, uint64_t seed);

#endif /* TPX_CHECKPOINT_XXH64_H */
