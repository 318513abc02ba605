/* runtime/rt_ckpt.c — loading a runtime's shards from Hugging Face
 * safetensors through the checkpoint reader (tpx/checkpoint.h): each rank
 * reads only the bytes of its own slices (tpx_sharding_local_slice),
 * straight into its flat unit buffers (into the f32 master first when the
 * storage is low precision, then rounded into storage).
 * Not a writer, and not collective. */
#include <stdlib.h>

#include "runtime/rt_internal.h"
#include "tpx/checkpoint.h"

tpx_status tpx_runtime_load_safetensors(tpx_runtime *rt, const char *path,
                                        tpx_error *err) {
  if (!rt || !path)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_load_safetensors: %s is NULL",
                         !rt ? "runtime" : "path");
  for (size_t u = 0; rt->fsdp && u < rt->num_units; u++)
    if (rt->units[u].state != TPX__RT_SHARDED)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_runtime_load_safetensors: unit %zu is "
                           "unsharded; reshard every unit before loading",
                           u);
  tpx_checkpoint_reader *rd = NULL;
  tpx_status st = tpx_checkpoint_reader_create(path, NULL, &rd, err);
  if (st != TPX_OK) return st;
  tpx_checkpoint_dest *dests =
      calloc(rt->num_params ? rt->num_params : 1, sizeof *dests);
  if (!dests) {
    tpx_checkpoint_reader_destroy(rd);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_load_safetensors: out of memory");
  }
  for (size_t i = 0; i < rt->num_params; i++) {
    const tpx__rt_param *p = &rt->params[rt->param_slot[i]];
    if (p->index != (int64_t)i) continue; /* a tied alias: its target reads */
    size_t n = (size_t)(p->shard_rows * p->row_numel);
    if (p->master_off >= 0) {
      dests[i].data = tpx__rt_master(rt, p);
      dests[i].dtype = TPX_DTYPE_F32;
      dests[i].bytes = n * sizeof(float);
    } else {
      dests[i].data = (unsigned char *)rt->units[p->unit].flat + p->flat_off;
      dests[i].dtype = p->storage;
      dests[i].bytes = n * tpx_dtype_size(p->storage);
    }
  }
  st = tpx_checkpoint_read_rank(rd, rt->sh, rt->rank, dests, err);
  free(dests);
  tpx_checkpoint_reader_destroy(rd);
  if (st != TPX_OK) return st;
  for (size_t i = 0; i < rt->num_rt_params; i++) {
    const tpx__rt_param *p = &rt->params[i];
    if (p->master_off < 0) continue;
    tpx__rt_convert((unsigned char *)rt->units[p->unit].flat + p->flat_off,
                    p->storage, tpx__rt_master(rt, p), TPX_DTYPE_F32,
                    (size_t)(p->shard_rows * p->row_numel));
  }
  return TPX_OK;
}
