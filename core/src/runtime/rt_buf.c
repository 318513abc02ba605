/* runtime/rt_buf.c — the runtime's buffers: zeroed allocation and free with
 * per-kind byte accounting (current and peak, and which part is host
 * memory), the cache that keeps freed gather / unsharded-grad buffers for
 * reuse (tpx_runtime_options.cache_buffers), and where each kind lives:
 * the comm's memory space, or host memory for the sharded state under
 * offload (tpx_runtime_options.offload).
 * Not here: what the buffers hold (rt_runtime.c lays them out). */
#include <stdlib.h>

#include "runtime/rt_internal.h"

static int cached_kind(const tpx_runtime *rt, tpx_runtime_mem_kind kind) {
  return rt->opts.cache_buffers && (kind == TPX_RUNTIME_MEM_GATHER ||
                                    kind == TPX_RUNTIME_MEM_UNSHARDED_GRADS);
}

/* The sharded state: what FSDP2's CPUOffloadPolicy moves to the host. */
static int state_kind(tpx_runtime_mem_kind kind) {
  return kind == TPX_RUNTIME_MEM_PARAMS || kind == TPX_RUNTIME_MEM_GRADS ||
         kind == TPX_RUNTIME_MEM_OPTIMIZER;
}

const tpx__memspace *tpx__rt_state_ms(const tpx_runtime *rt) {
  return rt->opts.offload ? &tpx__ms_host : rt->ms;
}

tpx__copy_kind tpx__rt_state_to_ms(const tpx_runtime *rt) {
  return rt->opts.offload ? TPX__H2D : TPX__D2D;
}

static const tpx__memspace *kind_ms(const tpx_runtime *rt,
                                    tpx_runtime_mem_kind kind) {
  return state_kind(kind) ? tpx__rt_state_ms(rt) : rt->ms;
}

/* Count `bytes` (negative: released) of `kind`, host memory when `host`. */
static void account(tpx_runtime *rt, tpx_runtime_mem_kind kind, int64_t bytes,
                    int host) {
  rt->cur[kind] += bytes;
  rt->cur[TPX_RUNTIME_MEM_TOTAL] += bytes;
  if (host)
    rt->host_cur += bytes;
  if (rt->cur[kind] > rt->peak[kind])
    rt->peak[kind] = rt->cur[kind];
  if (rt->cur[TPX_RUNTIME_MEM_TOTAL] > rt->peak[TPX_RUNTIME_MEM_TOTAL])
    rt->peak[TPX_RUNTIME_MEM_TOTAL] = rt->cur[TPX_RUNTIME_MEM_TOTAL];
  if (rt->host_cur > rt->host_peak)
    rt->host_peak = rt->host_cur;
  int64_t dev = rt->cur[TPX_RUNTIME_MEM_TOTAL] - rt->host_cur;
  if (dev > rt->dev_peak)
    rt->dev_peak = dev;
}

/* 1 when kind's buffers are the offloaded state (host memory even when
 * rt->ms is the host space too: they count as host bytes there as well). */
static int host_kind(const tpx_runtime *rt, tpx_runtime_mem_kind kind) {
  return rt->opts.offload && state_kind(kind);
}

void *tpx__rt_alloc(tpx_runtime *rt, tpx_runtime_mem_kind kind, size_t bytes) {
  return tpx__rt_alloc_raw(rt, kind, bytes, 1);
}

void *tpx__rt_alloc_raw(tpx_runtime *rt, tpx_runtime_mem_kind kind,
                        size_t bytes, int zero) {
  const tpx__memspace *ms = kind_ms(rt, kind);
  void *p = NULL;
  if (cached_kind(rt, kind))
    for (size_t i = rt->ncache; i-- > 0;)
      if (rt->cache[i].bytes == bytes) {
        p = rt->cache[i].p;
        rt->cache[i] = rt->cache[--rt->ncache];
        rt->cached_bytes -= (int64_t)bytes;
        if (zero && tpx__ms_memset(ms, p, 0, bytes, NULL) != TPX_OK) {
          tpx__ms_free(ms, p);
          return NULL;
        }
        break;
      }
  if (!p && tpx__ms_alloc(ms, bytes, 1, &p, NULL) != TPX_OK)
    return NULL;
  if (!p)
    return NULL;
  account(rt, kind, (int64_t)bytes, host_kind(rt, kind));
  return p;
}

void tpx__rt_free(tpx_runtime *rt, tpx_runtime_mem_kind kind, void *p,
                  size_t bytes) {
  if (!p)
    return;
  account(rt, kind, -(int64_t)bytes, host_kind(rt, kind));
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
  tpx__ms_free(kind_ms(rt, kind), p);
}

void *tpx__rt_alloc_host(tpx_runtime *rt, tpx_runtime_mem_kind kind,
                         size_t bytes) {
  void *p = NULL;
  if (tpx__ms_alloc(&tpx__ms_host, bytes, 0, &p, NULL) != TPX_OK || !p)
    return NULL;
  account(rt, kind, (int64_t)bytes, 1);
  return p;
}

void tpx__rt_free_host(tpx_runtime *rt, tpx_runtime_mem_kind kind, void *p,
                       size_t bytes) {
  if (!p)
    return;
  account(rt, kind, -(int64_t)bytes, 1);
  tpx__ms_free(&tpx__ms_host, p);
}

void tpx__rt_release_cache(tpx_runtime *rt) {
  for (size_t i = 0; i < rt->ncache; i++) tpx__ms_free(rt->ms, rt->cache[i].p);
  free(rt->cache);
  rt->cache = NULL;
  rt->ncache = rt->cache_cap = 0;
  rt->cached_bytes = 0;
}

int64_t tpx_runtime_space_bytes(const tpx_runtime *rt, int host, int peak) {
  if (!rt)
    return -1;
  if (host)
    return peak ? rt->host_peak : rt->host_cur;
  return peak ? rt->dev_peak : rt->cur[TPX_RUNTIME_MEM_TOTAL] - rt->host_cur;
}

int tpx_runtime_is_offloaded(const tpx_runtime *rt) {
  return rt ? rt->opts.offload != 0 : 0;
}

tpx_status tpx_runtime_memory_stats(const tpx_runtime *rt,
                                    tpx_runtime_memory *out, tpx_error *err) {
  if (!rt || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_memory_stats: %s is NULL",
                         !rt ? "runtime" : "out");
  if (out->struct_size < sizeof *out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_memory_stats: out->struct_size %zu is "
                         "smaller than tpx_runtime_memory (%zu); initialise "
                         "it with TPX_RUNTIME_MEMORY_INIT",
                         out->struct_size, sizeof *out);
  for (int k = 0; k <= TPX_RUNTIME_MEM_TOTAL; k++) {
    out->allocated[k] = rt->cur[k];
    out->peak[k] = rt->peak[k];
  }
  out->cached = rt->cached_bytes;
  out->device = tpx_runtime_space_bytes(rt, 0, 0);
  out->device_peak = tpx_runtime_space_bytes(rt, 0, 1);
  out->host = tpx_runtime_space_bytes(rt, 1, 0);
  out->host_peak = tpx_runtime_space_bytes(rt, 1, 1);
  return TPX_OK;
}
