/* fuzz_checkpoint_index.c — libFuzzer target: the checkpoint reader opened
 * on a model.safetensors.index.json (core/src/checkpoint/reader.c: the
 * index path), with two valid shards beside it so that indexes naming them
 * reach the cross-checks (a tensor listed in the wrong shard, a missing
 * tensor or file, duplicates, paths leaving the directory). When the
 * reader accepts an index, every tensor is read whole with both I/O
 * methods: what passed validation must never fault. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_all(const char *path, int io) {
  tpx_checkpoint_reader_options o = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  o.io_method = io;
  tpx_checkpoint_reader *rd = NULL;
  if (tpx_checkpoint_reader_create(path, &o, &rd, NULL) != TPX_OK)
    return;
  for (size_t i = 0; i < tpx_checkpoint_num_tensors(rd); i++) {
    tpx_checkpoint_tensor t;
    float buf[2];
    if (tpx_checkpoint_tensor_info(rd, i, &t, NULL) != TPX_OK ||
        t.nbytes > (int64_t)sizeof buf)
      continue;
    tpx_slice all;
    memset(&all, 0, sizeof all);
    all.ndim = t.ndim;
    memcpy(all.length, t.shape, sizeof all.length);
    (void)tpx_checkpoint_read_slice(rd, (int64_t)i, &all, TPX_DTYPE_F32, buf,
                                    sizeof buf, NULL);
  }
  tpx_checkpoint_reader_destroy(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = tpx_fuzz_write_index(data, size);
  if (path == NULL)
    return 0;
  read_all(path, TPX_CHECKPOINT_IO_MMAP);
  read_all(path, TPX_CHECKPOINT_IO_PREAD);
  return 0;
}
