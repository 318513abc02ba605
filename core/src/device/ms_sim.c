/* device/ms_sim.c — the sim memory space: "device" buffers are tagged host
 * allocations (sim_tag.h) that fault when the host dereferences them. Every
 * buffer op untags its buffer arguments (host arguments of H2D / D2H
 * copies stay as they are) and runs the host one; the kernels are the host
 * loops themselves (host_kernels.c), which reach buffers through this
 * space's host_view (untag). So results are bit-identical to the host
 * space and any buffer touch that bypasses the memspace crashes.
 * A buffer argument that is not tagged is a routing bug (a host pointer
 * handed to device code): untagging it yields a non-canonical address, so
 * it faults too. Test double only; never chosen unless a test asks for it
 * (comm/local_test.h). */
#include "device/kernels.h"
#include "device/sim_tag.h"

#define HB (&tpx__ms_host_buffers)
#define H (&tpx__ms_host)
#define U(p) tpx__sim_untag(p)

static void *s_view(const tpx__memspace *ms, const void *p) {
  (void)ms;
  return U(p);
}

static tpx_status s_alloc(const tpx__memspace *ms, size_t bytes, int zero,
                          void **out, tpx_error *err) {
  (void)ms;
  void *p = NULL;
  tpx_status st = HB->alloc(H, bytes, zero, &p, err);
  *out = st == TPX_OK ? tpx__sim_tag(p) : NULL;
  return st;
}

static void s_free(const tpx__memspace *ms, void *p) {
  (void)ms;
  HB->free(H, U(p));
}

static tpx_status s_memset(const tpx__memspace *ms, void *dst, int byte,
                           size_t bytes, tpx_error *err) {
  (void)ms;
  return HB->memset(H, U(dst), byte, bytes, err);
}

static tpx_status s_copy(const tpx__memspace *ms, void *dst, const void *src,
                         size_t bytes, tpx__copy_kind kind, tpx_error *err) {
  (void)ms;
  return HB->copy(H, kind == TPX__D2H ? dst : U(dst),
                  kind == TPX__H2D ? src : U(src), bytes, kind, err);
}

static tpx_status s_copy2d(const tpx__memspace *ms, void *dst, size_t dpitch,
                           const void *src, size_t spitch, size_t width,
                           size_t rows, tpx__copy_kind kind, tpx_error *err) {
  (void)ms;
  return HB->copy2d(H, kind == TPX__D2H ? dst : U(dst), dpitch,
                    kind == TPX__H2D ? src : U(src), spitch, width, rows, kind,
                    err);
}

static const tpx__ms_buffers sim_buffers = {
    .name = "sim",
    .device = 1,
    .host_view = s_view,
    .alloc = s_alloc,
    .free = s_free,
    .memset = s_memset,
    .copy = s_copy,
    .copy2d = s_copy2d,
};

const tpx__memspace tpx__ms_sim = {&sim_buffers, &tpx__ms_host_kernels, NULL,
                                   -1};
