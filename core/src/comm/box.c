/* box.c — strided copies of boxes between row-major buffers (comm/box.h).
 * Trailing dims that are whole in both buffers are merged, so the common
 * cases (a shard along dim 0, a full inner extent) become one copy; the
 * innermost remaining dim is one 2-D copy through the memory space. */
#include "comm/box.h"

#include <string.h>

tpx_slice tpx__box_intersect(const tpx_slice *a, const tpx_slice *b) {
  tpx_slice r;
  memset(&r, 0, sizeof r);
  r.ndim = a->ndim;
  for (int i = 0; i < a->ndim; i++) {
    int64_t lo = a->offset[i] > b->offset[i] ? a->offset[i] : b->offset[i];
    int64_t ea = a->offset[i] + a->length[i], eb = b->offset[i] + b->length[i];
    int64_t hi = ea < eb ? ea : eb;
    r.offset[i] = lo;
    r.length[i] = hi > lo ? hi - lo : 0;
  }
  return r;
}

tpx_status tpx__box_copy(const tpx__memspace *ms, tpx__copy_kind kind,
                         void *to_buf, const tpx_slice *to,
                         const void *from_buf, const tpx_slice *from,
                         const tpx_slice *part, size_t es, tpx_error *err) {
  int nd = part->ndim;
  for (int i = 0; i < nd; i++)
    if (part->length[i] <= 0)
      return TPX_OK;
  /* Merge the innermost dims while `part` spans them fully in both. */
  size_t run = es; /* bytes of one contiguous run */
  int d = nd;
  while (d > 0 && part->length[d - 1] == to->length[d - 1] &&
         part->length[d - 1] == from->length[d - 1]) {
    run *= (size_t)part->length[d - 1];
    d--;
  }
  if (d > 0) { /* the innermost non-full dim still contributes to a run */
    run *= (size_t)part->length[d - 1];
    d--;
  }
  /* Now dims [0, d) are iterated; dim d.. form runs of `run` bytes. The
   * innermost iterated dim becomes the rows of one 2-D copy. */
  int64_t to_stride[TPX_MAX_TENSOR_DIMS], from_stride[TPX_MAX_TENSOR_DIMS];
  int64_t ts = (int64_t)es, fs = (int64_t)es;
  for (int i = nd - 1; i >= 0; i--) {
    to_stride[i] = ts;
    from_stride[i] = fs;
    ts *= to->length[i];
    fs *= from->length[i];
  }
  int64_t to_base = 0, from_base = 0;
  for (int i = 0; i < nd; i++) {
    to_base += (part->offset[i] - to->offset[i]) * to_stride[i];
    from_base += (part->offset[i] - from->offset[i]) * from_stride[i];
  }
  size_t rows = 1, tpitch = run, fpitch = run;
  int outer = d; /* dims [0, outer) iterated one by one */
  if (d > 0) {
    rows = (size_t)part->length[d - 1];
    tpitch = (size_t)to_stride[d - 1];
    fpitch = (size_t)from_stride[d - 1];
    outer = d - 1;
  }
  int64_t idx[TPX_MAX_TENSOR_DIMS] = {0};
  for (;;) {
    int64_t t = to_base, f = from_base;
    for (int i = 0; i < outer; i++) {
      t += idx[i] * to_stride[i];
      f += idx[i] * from_stride[i];
    }
    tpx_status st = tpx__ms_copy2d(ms, (unsigned char *)to_buf + t, tpitch,
                                   (const unsigned char *)from_buf + f, fpitch,
                                   run, rows, kind, err);
    if (st != TPX_OK)
      return st;
    int i = outer - 1;
    while (i >= 0 && ++idx[i] == part->length[i]) idx[i--] = 0;
    if (i < 0)
      break;
  }
  return TPX_OK;
}
