/* arena.c — the activation arena (train.h): one block per rank, taken
 * from in order during a step and given back whole at the next step's
 * start, as llm.c keeps its activations in one allocation. The block's
 * size is what the first step used (a step's allocations are the same
 * every step), so only the first step ever reaches the heap. */
#include <stdlib.h>
#include <string.h>

#include "train.h"

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

float *tr_arena_floats(tr_arena *a, int64_t n, tpx_error *err) {
  size_t bytes = sizeof(float) * (size_t)(n > 0 ? n : 1);
  bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
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
  memset(p, 0, bytes);
  return (float *)p;
}

size_t tr_arena_mark(const tr_arena *a) { return a->used; }

void tr_arena_pop(tr_arena *a, size_t mark) { a->used = mark; }

tpx_status tr_arena_reset(tr_arena *a, tpx_error *err) {
  a->used = 0;
  if (!a->nspill && a->cap >= a->peak)
    return TPX_OK;
  for (size_t i = 0; i < a->nspill; i++) free(a->spill[i]);
  a->nspill = 0;
  free(a->base);
  a->cap = 0;
  a->base = aligned_alloc(ALIGN, a->peak);
  if (!a->base)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "out of memory (activations: %zu bytes)", a->peak);
  a->cap = a->peak;
  return TPX_OK;
}

void tr_arena_free(tr_arena *a) {
  for (size_t i = 0; i < a->nspill; i++) free(a->spill[i]);
  free(a->spill);
  free(a->base);
  memset(a, 0, sizeof *a);
}
