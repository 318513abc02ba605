/* device/ms_sim.c — the sim memory space: "device" buffers are tagged host
 * allocations (sim_tag.h) that fault when the host dereferences them. Every
 * op untags its buffer arguments (host arguments of H2D / D2H copies stay
 * as they are) and runs the host loop, so results are bit-identical to the
 * host space and any buffer touch that bypasses the memspace crashes.
 * A buffer argument that is not tagged is a routing bug (a host pointer
 * handed to device code): untagging it yields a non-canonical address, so
 * it faults too. Test double only; never chosen unless asked for
 * (tpx_local_options.sim_device_memory). */
#include "device/memspace.h"
#include "device/sim_tag.h"

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
  tpx_status st = tpx__ms_host_ops.alloc(H, bytes, zero, &p, err);
  *out = st == TPX_OK ? tpx__sim_tag(p) : NULL;
  return st;
}

static void s_free(const tpx__memspace *ms, void *p) {
  (void)ms;
  tpx__ms_host_ops.free(H, U(p));
}

static tpx_status s_memset(const tpx__memspace *ms, void *dst, int byte,
                           size_t bytes, tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.memset(H, U(dst), byte, bytes, err);
}

static tpx_status s_copy(const tpx__memspace *ms, void *dst, const void *src,
                         size_t bytes, tpx__copy_kind kind, tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.copy(H, kind == TPX__D2H ? dst : U(dst),
                               kind == TPX__H2D ? src : U(src), bytes, kind,
                               err);
}

static tpx_status s_copy2d(const tpx__memspace *ms, void *dst, size_t dpitch,
                           const void *src, size_t spitch, size_t width,
                           size_t rows, tpx__copy_kind kind, tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.copy2d(H, kind == TPX__D2H ? dst : U(dst), dpitch,
                                 kind == TPX__H2D ? src : U(src), spitch,
                                 width, rows, kind, err);
}

static tpx_status s_convert(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                            const void *src, tpx_dtype sd, size_t n,
                            tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.convert(H, U(dst), dd, U(src), sd, n, err);
}

static tpx_status s_add_f32(const tpx__memspace *ms, float *dst,
                            const void *src, tpx_dtype sd, size_t n,
                            float div, tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.add_f32(H, U(dst), U(src), sd, n, div, err);
}

static tpx_status s_scale_f32(const tpx__memspace *ms, float *p, size_t n,
                              float v, int divide, tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.scale_f32(H, U(p), n, v, divide, err);
}

static tpx_status s_norm_acc(const tpx__memspace *ms, double *acc,
                             const float *g, size_t n, int inf,
                             tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.norm_acc(H, U(acc), U(g), n, inf, err);
}

static tpx_status s_adamw(const tpx__memspace *ms, float *p, const float *g,
                          float *m, float *v, size_t n,
                          const tpx__ms_adamw *h, tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.adamw(H, U(p), U(g), U(m), U(v), n, h, err);
}

static tpx_status s_index_check(const tpx__memspace *ms, const void *ids,
                                tpx_dtype idt, size_t n, int64_t V,
                                int has_ignore, int64_t ignore, int64_t *bad,
                                tpx_error *err) {
  (void)ms;
  /* bad is the host-side verdict */
  return tpx__ms_host_ops.index_check(H, U(ids), idt, n, V, has_ignore,
                                      ignore, bad, err);
}

static tpx_status s_embed_lookup(const tpx__memspace *ms, void *out,
                                 const void *weight, size_t row_bytes,
                                 const void *ids, tpx_dtype idt, size_t n,
                                 const tpx__ms_rows *rows, tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.embed_lookup(H, U(out), U(weight), row_bytes,
                                       U(ids), idt, n, rows, err);
}

static tpx_status s_embed_scatter_add(const tpx__memspace *ms, void *wgrad,
                                      tpx_dtype wdt, const void *g,
                                      tpx_dtype gdt, size_t hl,
                                      const void *ids, tpx_dtype idt,
                                      size_t n, const tpx__ms_rows *rows,
                                      tpx_error *err) {
  (void)ms;
  return tpx__ms_host_ops.embed_scatter_add(H, U(wgrad), wdt, U(g), gdt, hl,
                                            U(ids), idt, n, rows, err);
}

/* The loss view with its buffers untagged. */
static tpx__ms_loss loss_u(const tpx__ms_loss *l) {
  tpx__ms_loss u = *l;
  u.logits = U(l->logits);
  u.targets = U(l->targets);
  return u;
}

static tpx_status s_loss_row_max(const tpx__memspace *ms, float *mx,
                                 const tpx__ms_loss *l, tpx_error *err) {
  (void)ms;
  tpx__ms_loss u = loss_u(l);
  return tpx__ms_host_ops.loss_row_max(H, U(mx), &u, err);
}

static tpx_status s_loss_row_sums(const tpx__memspace *ms, double *se,
                                  const float *mx, const tpx__ms_loss *l,
                                  int want_tgt, tpx_error *err) {
  (void)ms;
  tpx__ms_loss u = loss_u(l);
  return tpx__ms_host_ops.loss_row_sums(H, U(se), U(mx), &u, want_tgt, err);
}

static tpx_status s_loss_grad(const tpx__memspace *ms, void *grad,
                              tpx_dtype gdt, const float *mx,
                              const double *se, const float *gi, double scale,
                              double sign, const tpx__ms_loss *l,
                              tpx_error *err) {
  (void)ms;
  tpx__ms_loss u = loss_u(l);
  return tpx__ms_host_ops.loss_grad(H, U(grad), gdt, U(mx), U(se), U(gi),
                                    scale, sign, &u, err);
}

static tpx_status s_loss_logprobs(const tpx__memspace *ms, float *out,
                                  double *sum_count, const float *mx,
                                  const double *se, const tpx__ms_loss *l,
                                  tpx_error *err) {
  (void)ms;
  tpx__ms_loss u = loss_u(l);
  return tpx__ms_host_ops.loss_logprobs(H, U(out), U(sum_count), U(mx),
                                        U(se), &u, err);
}

static const tpx__ms_ops sim_ops = {
    .name = "sim",
    .device = 1,
    .host_view = s_view,
    .alloc = s_alloc,
    .free = s_free,
    .memset = s_memset,
    .copy = s_copy,
    .copy2d = s_copy2d,
    .convert = s_convert,
    .add_f32 = s_add_f32,
    .scale_f32 = s_scale_f32,
    .norm_acc = s_norm_acc,
    .adamw = s_adamw,
    .index_check = s_index_check,
    .embed_lookup = s_embed_lookup,
    .embed_scatter_add = s_embed_scatter_add,
    .loss_row_max = s_loss_row_max,
    .loss_row_sums = s_loss_row_sums,
    .loss_grad = s_loss_grad,
    .loss_logprobs = s_loss_logprobs,
};

const tpx__memspace tpx__ms_sim = {&sim_ops, NULL};
