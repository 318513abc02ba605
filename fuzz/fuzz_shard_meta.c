/* fuzz_shard_meta.c — libFuzzer target: the tpx-shard/1 metadata parser
 * (core/src/checkpoint/rankfile_meta.c, tpx_shard_meta_parse). The input is
 * "MESH\nRANK\nTENSORS": the "tpx.mesh" JSON, the "tpx.rank" text and the
 * "tpx.tensors" JSON of a rank file. An accepted result must be in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tpx/checkpoint_shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = tpx_fuzz_cstr(data, size);
  if (text == NULL)
    return 0;
  char *mesh = text, *rank = strchr(text, '\n'), *tensors = NULL;
  if (rank) {
    *rank++ = '\0';
    tensors = strchr(rank, '\n');
    if (tensors)
      *tensors++ = '\0';
  }
  tpx_shard_meta m;
  if (tpx_shard_meta_parse(mesh, strlen(mesh), tensors,
                           tensors ? strlen(tensors) : 0, rank, &m,
                           NULL) == TPX_OK) {
    if (m.mesh_ndim < 1 || m.mesh_ndim > TPX_MESH_MAX_DIMS || m.rank < 0 ||
        m.rank >= m.world_size)
      abort();
    for (size_t i = 0; i < m.num_tensors; i++)
      if (m.tensors[i].name == NULL || m.tensors[i].ndim < 0 ||
          m.tensors[i].ndim > TPX_MAX_TENSOR_DIMS)
        abort();
    /* fold boxes inside the tensor, or meeting it (a stored tensor bigger
     * than its parameter); a transposed source's last two dims swapped */
    for (size_t i = 0; i < m.num_tensors; i++)
      for (size_t k = 0; k < m.tensors[i].num_fold; k++) {
        const tpx_shard_fold_source *f = &m.tensors[i].fold[k];
        int drop = m.tensors[i].ndim - f->ndim;
        if (f->name == NULL || drop < 0 || (f->transpose && f->ndim < 2))
          abort();
        for (int d = 0; d < m.tensors[i].ndim; d++) {
          int sd = d - drop;
          if (f->transpose && sd >= f->ndim - 2)
            sd = sd == f->ndim - 2 ? f->ndim - 1 : f->ndim - 2;
          int64_t len = d < drop ? 1 : f->shape[sd], o = f->offsets[d];
          int64_t g = m.tensors[i].global_shape[d];
          int inside = o >= 0 && o <= g && len <= g - o;
          int meets = len > 0 && o < g && o > -len;
          if (!inside && !meets)
            abort();
        }
      }
    tpx_shard_meta_free(&m);
  }
  free(text);
  return 0;
}
