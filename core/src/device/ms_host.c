/* device/ms_host.c — the host memory space: plain pointers, the buffer
 * operations as libc calls, the host loops as its kernels
 * (host_kernels.c). Not here: the space's users (comm/, runtime/). */
#include <stdlib.h>
#include <string.h>

#include "device/kernels.h"

static void *h_view(const tpx__memspace *ms, const void *p) {
  (void)ms;
  return (void *)(uintptr_t)p;
}

static tpx_status h_alloc(const tpx__memspace *ms, size_t bytes, int zero,
                          void **out, tpx_error *err) {
  (void)ms;
  *out = zero ? calloc(1, bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
  if (!*out)
    return tpx_error_set(err, TPX_NO_MEMORY, "host memory: %zu bytes", bytes);
  return TPX_OK;
}

static void h_free(const tpx__memspace *ms, void *p) {
  (void)ms;
  free(p);
}

static tpx_status h_memset(const tpx__memspace *ms, void *dst, int byte,
                           size_t bytes, tpx_error *err) {
  (void)ms, (void)err;
  memset(dst, byte, bytes);
  return TPX_OK;
}

static tpx_status h_copy(const tpx__memspace *ms, void *dst, const void *src,
                         size_t bytes, tpx__copy_kind kind, tpx_error *err) {
  (void)ms, (void)kind, (void)err;
  memmove(dst, src, bytes);
  return TPX_OK;
}

static tpx_status h_copy2d(const tpx__memspace *ms, void *dst, size_t dpitch,
                           const void *src, size_t spitch, size_t width,
                           size_t rows, tpx__copy_kind kind, tpx_error *err) {
  (void)ms, (void)kind, (void)err;
  if (dpitch == width && spitch == width) {
    memmove(dst, src, width * rows);
    return TPX_OK;
  }
  for (size_t r = 0; r < rows; r++)
    memmove((unsigned char *)dst + r * dpitch,
            (const unsigned char *)src + r * spitch, width);
  return TPX_OK;
}

const tpx__ms_buffers tpx__ms_host_buffers = {
    .name = "host",
    .device = 0,
    .host_view = h_view,
    .alloc = h_alloc,
    .free = h_free,
    .memset = h_memset,
    .copy = h_copy,
    .copy2d = h_copy2d,
};

const tpx__memspace tpx__ms_host = {&tpx__ms_host_buffers,
                                    &tpx__ms_host_kernels, NULL, -1};
