/* fuzz_checkpoint.c — libFuzzer target: the checkpoint reader on an
 * arbitrary file. The input is written as model.safetensors; when the
 * reader accepts it (every header check passed), every tensor is read
 * whole and as its first row / first column box, converted to f32 when
 * the dtype allows, with both I/O methods — reads of validated offsets
 * must never fault. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_box(tpx_checkpoint_reader *rd, int64_t t,
                     const tpx_checkpoint_tensor *info, const tpx_slice *s) {
  int64_t numel = tpx_slice_numel(s);
  if (numel > (1 << 20))
    return;
  void *buf = malloc((size_t)numel * 8 + 8);
  if (buf == NULL)
    return;
  (void)tpx_checkpoint_read_slice(rd, t, s, info->dtype, buf,
                                  (size_t)numel * 8 + 8, NULL);
  (void)tpx_checkpoint_read_slice(rd, t, s, TPX_DTYPE_F32, buf,
                                  (size_t)numel * 8 + 8, NULL);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = tpx_fuzz_write_file("model.safetensors", data, size);
  if (path == NULL)
    return 0;
  for (int io = TPX_CHECKPOINT_IO_PREAD; io <= TPX_CHECKPOINT_IO_MMAP; io++) {
    tpx_checkpoint_reader_options o = TPX_CHECKPOINT_READER_OPTIONS_INIT;
    o.io_method = io;
    tpx_checkpoint_reader *rd = NULL;
    if (tpx_checkpoint_reader_create(path, &o, &rd, NULL) != TPX_OK)
      return 0;
    for (size_t i = 0; i < tpx_checkpoint_num_tensors(rd); i++) {
      tpx_checkpoint_tensor info;
      if (tpx_checkpoint_tensor_info(rd, i, &info, NULL) != TPX_OK)
        abort();
      tpx_slice s;
      memset(&s, 0, sizeof s);
      s.ndim = info.ndim;
      memcpy(s.length, info.shape, sizeof s.length);
      read_box(rd, (int64_t)i, &info, &s);
      if (info.ndim >= 2) {
        s.length[0] = info.shape[0] ? 1 : 0; /* first row */
        read_box(rd, (int64_t)i, &info, &s);
        s.length[0] = info.shape[0];
        s.length[1] = info.shape[1] ? 1 : 0; /* first column */
        read_box(rd, (int64_t)i, &info, &s);
      }
    }
    (void)tpx_checkpoint_metadata(rd, "format");
    tpx_checkpoint_reader_destroy(rd);
  }
  return 0;
}
