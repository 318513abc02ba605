/* arena.c — the activation arena (train.h): one block per rank, taken
 * from in order during a step and given back whole at the next step's
 * start, as llm.c keeps its activations in one allocation. The block's
 * size is what the first step used (a step's allocations are the same
 * every step), so only the first step ever reaches the heap. The block
 * is regrown and its pages touched at the end of that first step, so the
 * steps after it take no first-touch page faults either.
 *
 * Under AddressSanitizer the arena keeps its eyes: every allocation is
 * followed by a poisoned red zone and what a step has given back is
 * poisoned until it is taken again, so an overrun or a use after the
 * step reads as it would on the heap. */
#include <stdlib.h>
#include <string.h>

#include "train.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TR_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TR_ASAN 1
#endif

#if defined(TR_ASAN)
#include <sanitizer/asan_interface.h>
#define REDZONE 64
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define REDZONE 0
#endif

#define ALIGN 64

/* Record a heap block taken because the arena was full. */
static int spill_push(tr_arena *a, void *p) {
  if (a->nspill == a->spill_cap) {
    size_t cap = a->spill_cap ? 2 * a->spill_cap : 16;
    void **s = realloc(a->spill, cap * sizeof *s);
    if (!s)
      return -1;
    a->spill = s;
    a->spill_cap = cap;
  }
  a->spill[a->nspill++] = p;
  return 0;
}

float *tr_arena_floats(tr_arena *a, int64_t n, int zero, tpx_error *err) {
  size_t want = sizeof(float) * (size_t)(n > 0 ? n : 1);
  size_t bytes = (want + ALIGN - 1) / ALIGN * ALIGN + REDZONE;
  char *p = NULL;
  if (a->used + bytes <= a->cap) {
    p = a->base + a->used;
  } else {
    /* full: the first step, still measuring */
    p = aligned_alloc(ALIGN, bytes);
    if (p && spill_push(a, p)) {
      free(p);
      p = NULL;
    }
  }
  if (!p) {
    tpx_error_set(err, TPX_NO_MEMORY,
                  "out of memory (activations: %lld floats)", (long long)n);
    return NULL;
  }
  a->used += bytes;
  if (a->used > a->peak)
    a->peak = a->used;
  ASAN_UNPOISON_MEMORY_REGION(p, want);
  ASAN_POISON_MEMORY_REGION(p + want, bytes - want);
  if (zero)
    memset(p, 0, want);
  return (float *)p;
}

size_t tr_arena_mark(const tr_arena *a) { return a->used; }

void tr_arena_pop(tr_arena *a, size_t mark) {
  if (a->used > a->cap) /* spilled (first step): the heap guards those */
    a->used = a->cap > mark ? a->cap : mark;
  ASAN_POISON_MEMORY_REGION(a->base + mark, a->used - mark);
  a->used = mark;
}

float *tr_arena_lower(tr_arena *a, size_t mark, const float *src, int64_t n,
                      tpx_error *err) {
  size_t want = sizeof(float) * (size_t)(n > 0 ? n : 1);
  char *to = a->base ? a->base + mark : NULL;
  if (to && to == (const char *)src && a->used <= a->cap)
    return (float *)to; /* the only thing taken since the mark */
  if (a->used <= a->cap && to && to <= (const char *)src) {
    /* in the block: src is above the mark, so a downward move; the
     * bytes under the mark's new owner (red zones included) are ours */
    ASAN_UNPOISON_MEMORY_REGION(to, want);
    memmove(to, src, want);
    tr_arena_pop(a, mark);
    return tr_arena_floats(a, n, 0, err);
  }
  /* spilled (the first step): src is a heap block of its own, kept to
   * the step's end, so the copy can come after the pop */
  tr_arena_pop(a, mark);
  float *p = tr_arena_floats(a, n, 0, err);
  if (p && p != src)
    memmove(p, src, want);
  return p;
}

tpx_status tr_arena_reset(tr_arena *a, tpx_error *err) {
  a->used = 0;
  if (!a->nspill && a->cap >= a->peak) {
    ASAN_POISON_MEMORY_REGION(a->base, a->cap);
    return TPX_OK;
  }
  for (size_t i = 0; i < a->nspill; i++) free(a->spill[i]);
  a->nspill = 0;
  ASAN_UNPOISON_MEMORY_REGION(a->base, a->cap);
  free(a->base);
  a->cap = 0;
  a->base = aligned_alloc(ALIGN, a->peak);
  if (!a->base)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "out of memory (activations: %zu bytes)", a->peak);
  /* touch every page now (the first step, a warm-up), not in the next
   * step's kernels: a fresh block of ~600 MB is ~150k first-touch faults */
  memset(a->base, 0, a->peak);
  a->cap = a->peak;
  ASAN_POISON_MEMORY_REGION(a->base, a->cap);
  return TPX_OK;
}

void tr_arena_free(tr_arena *a) {
  ASAN_UNPOISON_MEMORY_REGION(a->base, a->cap);
  for (size_t i = 0; i < a->nspill; i++) free(a->spill[i]);
  free(a->spill);
  free(a->base);
  memset(a, 0, sizeof *a);
}
