/* checkpoint/convert_api.c — tpx_checkpoint_convert, the public face of the
 * element conversions the reader and writer use (device/elem_convert.c). */
#include "checkpoint/ckpt_internal.h"
#include "device/elem.h"

tpx_status tpx_checkpoint_convert(void *dst, tpx_dtype to, const void *src,
                                  tpx_dtype from, size_t count,
                                  tpx_error *err) {
  return tpx__elem_convert(dst, to, src, from, count, err);
}
