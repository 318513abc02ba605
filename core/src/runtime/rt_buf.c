/* runtime/rt_buf.c — the runtime's buffers: zeroed allocation and free in
 * its memory space with per-kind byte accounting (current and peak), and
 * the cache that keeps freed gather / unsharded-grad buffers for reuse
 * (tpx_runtime_options.cache_buffers).
 * Not here: what the buffers hold (rt_runtime.c lays them out). */
#include <stdlib.h>

#include "runtime/rt_internal.h"

static int cached_kind(const tpx_runtime *rt, tpx_runtime_mem_kind kind) {
  return rt->opts.cache_buffers && (kind == TPX_RUNTIME_MEM_GATHER ||
                                    kind == TPX_RUNTIME_MEM_UNSHARDED_GRADS);
}

void *tpx__rt_alloc(tpx_runtime *rt, tpx_runtime_mem_kind kind, size_t bytes) {
  return tpx__rt_alloc_raw(rt, kind, bytes, 1);
}

void *tpx__rt_alloc_raw(tpx_runtime *rt, tpx_runtime_mem_kind kind,
                        size_t bytes, int zero) {
  void *p = NULL;
  if (cached_kind(rt, kind))
    for (size_t i = rt->ncache; i-- > 0;)
      if (rt->cache[i].bytes == bytes) {
        p = rt->cache[i].p;
        rt->cache[i] = rt->cache[--rt->ncache];
        rt->cached_bytes -= (int64_t)bytes;
        if (zero && tpx__ms_memset(rt->ms, p, 0, bytes, NULL) != TPX_OK) {
          tpx__ms_free(rt->ms, p);
          return NULL;
        }
        break;
      }
  if (!p && tpx__ms_alloc(rt->ms, bytes, 1, &p, NULL) != TPX_OK)
    return NULL;
  if (!p)
    return NULL;
  rt->cur[kind] += (int64_t)bytes;
  rt->cur[TPX_RUNTIME_MEM_TOTAL] += (int64_t)bytes;
  if (rt->cur[kind] > rt->peak[kind])
    rt->peak[kind] = rt->cur[kind];
  if (rt->cur[TPX_RUNTIME_MEM_TOTAL] > rt->peak[TPX_RUNTIME_MEM_TOTAL])
    rt->peak[TPX_RUNTIME_MEM_TOTAL] = rt->cur[TPX_RUNTIME_MEM_TOTAL];
  return p;
}

void tpx__rt_free(tpx_runtime *rt, tpx_runtime_mem_kind kind, void *p,
                  size_t bytes) {
  if (!p)
    return;
  rt->cur[kind] -= (int64_t)bytes;
  rt->cur[TPX_RUNTIME_MEM_TOTAL] -= (int64_t)bytes;
  if (cached_kind(rt, kind)) {
    if (rt->ncache == rt->cache_cap) {
      size_t cap = rt->cache_cap ? 2 * rt->cache_cap : 16;
      struct tpx__rt_block *c = realloc(rt->cache, cap * sizeof *c);
      if (c) {
        rt->cache = c;
        rt->cache_cap = cap;
      }
    }
    if (rt->ncache < rt->cache_cap) {
      rt->cache[rt->ncache].p = p;
      rt->cache[rt->ncache++].bytes = bytes;
      rt->cached_bytes += (int64_t)bytes;
      return;
    }
  }
  tpx__ms_free(rt->ms, p);
}

void tpx__rt_release_cache(tpx_runtime *rt) {
  for (size_t i = 0; i < rt->ncache; i++) tpx__ms_free(rt->ms, rt->cache[i].p);
  free(rt->cache);
  rt->cache = NULL;
  rt->ncache = rt->cache_cap = 0;
  rt->cached_bytes = 0;
}
