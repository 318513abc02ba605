/* xxh64.c — XXH64 as its specification defines it
 * (github.com/Cyan4973/xxHash, doc/xxhash_spec.md): four 64-bit lanes over
 * 32-byte stripes, the tail in 8-, 4- and 1-byte steps, a final avalanche.
 * Little-endian reads, so the value is the same on every host. */
#include <string.h>

#include "checkpoint/xxh64.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t read64(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;
  memcpy(&v, p, 8); /* one load */
  return v;
#else
  uint64_t v = 0;
  for (int b = 7; b >= 0; b--) v = v << 8 | p[b];
  return v;
#endif
}

static uint32_t read32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t round64(uint64_t acc, uint64_t in) {
  acc += in * P2;
  return rotl(acc, 31) * P1;
}

static uint64_t merge_round(uint64_t acc, uint64_t v) {
  acc ^= round64(0, v);
  return acc * P1 + P4;
}

/* Stripes of 32 bytes from p[0..n) into the lanes; the bytes consumed. */
static size_t stripes(uint64_t v[4], const unsigned char *p, size_t n) {
  size_t done = 0;
  uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
  for (; n - done >= 32; done += 32) {
    a = round64(a, read64(p + done));
    b = round64(b, read64(p + done + 8));
    c = round64(c, read64(p + done + 16));
    d = round64(d, read64(p + done + 24));
  }
  v[0] = a;
  v[1] = b;
  v[2] = c;
  v[3] = d;
  return done;
}

void tpx__xxh64_init(tpx__xxh64_state *s, uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->seed = seed;
  s->v[0] = seed + P1 + P2;
  s->v[1] = seed + P2;
  s->v[2] = seed;
  s->v[3] = seed - P1;
}

void tpx__xxh64_update(tpx__xxh64_state *s, const void *data, size_t n) {
  const unsigned char *p = data;
  s->total += n;
  if (s->used > 0) {
    size_t k = 32 - s->used < n ? 32 - s->used : n;
    memcpy(s->buf + s->used, p, k);
    s->used += k;
    p += k;
    n -= k;
    if (s->used < 32)
      return;
    stripes(s->v, s->buf, 32);
    s->used = 0;
  }
  size_t done = stripes(s->v, p, n);
  memcpy(s->buf, p + done, n - done);
  s->used = n - done;
}

uint64_t tpx__xxh64_digest(const tpx__xxh64_state *s) {
  uint64_t h;
  if (s->total >= 32) {
    h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) +
        rotl(s->v[3], 18);
    for (int i = 0; i < 4; i++) h = merge_round(h, s->v[i]);
  } else {
    h = s->seed + P5;
  }
  h += s->total;
  const unsigned char *p = s->buf;
  size_t n = s->used;
  for (; n >= 8; p += 8, n -= 8)
    h = rotl(h ^ round64(0, read64(p)), 27) * P1 + P4;
  if (n >= 4) {
    h = rotl(h ^ (uint64_t)read32(p) * P1, 23) * P2 + P3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; p++, n--) h = rotl(h ^ *p * P5, 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t tpx__xxh64(const void *data, size_t n, uint64_t seed) {
  tpx__xxh64_state s;
  tpx__xxh64_init(&s, seed);
  tpx__xxh64_update(&s, data, n);
  return tpx__xxh64_digest(&s);
}
