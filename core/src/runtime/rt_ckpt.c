/* runtime/rt_ckpt.c — loading a runtime's shards from Hugging Face
 * safetensors through the checkpoint reader (tpx/checkpoint.h): each rank
 * reads only the bytes of its own slices (tpx_sharding_local_slice),
 * straight into its flat unit buffers (into the f32 master first when the
 * storage is low precision, then rounded into storage). On a device
 * memory space the reader fills one host staging buffer that is copied
 * H2D parameter by parameter. Under offload the shards are host memory
 * and are read straight into.
 * Not a writer, and not collective. */
#include <stdlib.h>

#include "runtime/rt_internal.h"
#include "tpx/checkpoint.h"

static tpx_status load(tpx_runtime *rt, const tpx_checkpoint_reader *rd,
                       const char *what, tpx_error *err);

tpx_status tpx_runtime_load_safetensors(tpx_runtime *rt, const char *path,
                                        tpx_error *err) {
  if (!rt || !path)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_load_safetensors: %s is NULL",
                         !rt ? "runtime" : "path");
  tpx_checkpoint_reader *rd = NULL;
  tpx_status st = tpx_checkpoint_reader_create(path, NULL, &rd, err);
  if (st == TPX_OK)
    st = load(rt, rd, "tpx_runtime_load_safetensors", err);
  tpx_checkpoint_reader_destroy(rd);
  return st;
}

tpx_status tpx_runtime_load_checkpoint(tpx_runtime *rt,
                                       const tpx_checkpoint_reader *rd,
                                       tpx_error *err) {
  if (!rt || !rd)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_load_checkpoint: %s is NULL",
                         !rt ? "runtime" : "reader");
  return load(rt, rd, "tpx_runtime_load_checkpoint", err);
}

static tpx_status load(tpx_runtime *rt, const tpx_checkpoint_reader *rd,
                       const char *what, tpx_error *err) {
  for (size_t u = 0; rt->fsdp && u < rt->num_units; u++)
    if (rt->units[u].state != TPX__RT_SHARDED)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: unit %zu is "
                           "unsharded; reshard every unit before loading",
                           what, u);
  tpx_status st;
  tpx_checkpoint_dest *dests =
      calloc(rt->num_params ? rt->num_params : 1, sizeof *dests);
  if (!dests)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: out of memory", what);
  /* The reader writes host memory: on a device memory space each rank's
   * bytes go to one host staging buffer first, then one H2D copy per
   * parameter (host space: straight into the flat buffers). */
  const tpx__memspace *ms = tpx__rt_state_ms(rt); /* host under offload */
  void **devp = calloc(rt->num_params ? rt->num_params : 1, sizeof *devp);
  size_t staged = 0;
  unsigned char *stage = NULL;
  for (size_t i = 0; devp && i < rt->num_params; i++) {
    const tpx__rt_param *p = &rt->params[rt->param_slot[i]];
    if (p->index != (int64_t)i)
      continue; /* a tied alias: its target reads */
    size_t n = (size_t)p->shard_numel;
    if (p->master_off >= 0) {
      devp[i] = tpx__rt_master(rt, p);
      dests[i].dtype = TPX_DTYPE_F32;
      dests[i].bytes = n * sizeof(float);
    } else {
      devp[i] = (unsigned char *)rt->units[p->unit].flat + p->flat_off;
      dests[i].dtype = p->storage;
      dests[i].bytes = n * tpx_dtype_size(p->storage);
    }
    dests[i].data = devp[i];
    staged += dests[i].bytes;
  }
  if (devp && tpx__ms_is_device(ms)) {
    stage = malloc(staged ? staged : 1);
    for (size_t i = 0, at = 0; stage && i < rt->num_params; i++) {
      if (!devp[i])
        continue;
      dests[i].data = stage + at;
      at += dests[i].bytes;
    }
  }
  if (!devp || (tpx__ms_is_device(ms) && !stage)) {
    free(devp);
    free(dests);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "%s: out of memory (%zu bytes of staging)", what,
                         staged);
  }
  st = tpx_checkpoint_read_rank(rd, rt->sh, rt->rank, dests, err);
  for (size_t i = 0; stage && st == TPX_OK && i < rt->num_params; i++)
    if (devp[i])
      st = tpx__ms_copy(ms, devp[i], dests[i].data, dests[i].bytes, TPX__H2D,
                        err);
  free(stage);
  free(devp);
  free(dests);
  if (st != TPX_OK)
    return st;
  for (size_t i = 0; i < rt->num_rt_params && st == TPX_OK; i++) {
    const tpx__rt_param *p = &rt->params[i];
    if (p->master_off < 0)
      continue;
    st = tpx__ms_convert(
        ms, (unsigned char *)rt->units[p->unit].flat + p->flat_off, p->storage,
        tpx__rt_master(rt, p), TPX_DTYPE_F32, (size_t)p->shard_numel, err);
  }
  return st;
}
