/* write_rank.c — a rank's pieces of a sharded model into a checkpoint
 * writer, and the writer entries of a model. Which box a rank holds comes
 * from tpx_sharding_local_slice; a box replicated over a mesh dim is written
 * by the rank at index 0 of that dim only, so every byte is written once. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/writer_impl.h"

tpx_status tpx_checkpoint_model_entries(const tpx_model *model,
                                        tpx_checkpoint_entry **out,
                                        size_t *count, tpx_error *err) {
  if (out)
    *out = NULL;
  if (count)
    *count = 0;
  if (model == NULL || out == NULL || count == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_model_entries: NULL argument");
  size_t np = tpx_model_num_params(model), n = 0;
  tpx_checkpoint_entry *e = calloc(np ? np : 1, sizeof *e);
  if (e == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < np; i++) {
    tpx_param_info p;
    tpx_status st = tpx_model_param(model, (int64_t)i, &p, err);
    if (st != TPX_OK) {
      free(e);
      return st;
    }
    if (p.tied_to >= 0)
      continue;
    e[n].name = p.fqn;
    e[n].dtype = p.dtype;
    e[n].ndim = p.ndim;
    memcpy(e[n].shape, p.shape, sizeof e[n].shape);
    n++;
  }
  *out = e;
  *count = n;
  return TPX_OK;
}

/* 1 when `rank` writes its box of parameter `param`: index 0 on every mesh
 * dim the parameter is replicated over. Partial cannot be written. */
static tpx_status is_writer(const tpx_sharding *sh, int64_t param, int64_t rank,
                            const char *name, int *out, tpx_error *err) {
  /* the mesh the parameter lives on (the MoE mesh for an expert at ep > 1) */
  const tpx_mesh *mesh = tpx_sharding_param_mesh(sh, param);
  if (!mesh)
    mesh = tpx_sharding_mesh(sh);
  int64_t coords[TPX_MESH_MAX_DIMS];
  tpx_param_sharding ps;
  tpx_status st = tpx_mesh_coords(mesh, rank, coords, err);
  if (st == TPX_OK)
    st = tpx_sharding_param(sh, param, &ps, err);
  if (st != TPX_OK)
    return st;
  *out = 1;
  for (int d = 0; d < tpx_mesh_ndim(mesh); d++) {
    if (ps.placements[d].kind == TPX_PARTIAL)
      return tpx_error_set(err, TPX_UNSUPPORTED,
                           "parameter '%s' is Partial over mesh dim '%s': "
                           "reduce it before writing",
                           name, tpx_mesh_dim_name(mesh, d));
    if (ps.placements[d].kind == TPX_REPLICATE && coords[d] != 0)
      *out = 0;
  }
  return TPX_OK;
}

tpx_status tpx_checkpoint_write_rank(tpx_checkpoint_writer *w,
                                     const tpx_sharding *sh, int64_t rank,
                                     const tpx_checkpoint_dest *srcs,
                                     tpx_error *err) {
  if (w == NULL || sh == NULL || srcs == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_write_rank: NULL argument");
  const tpx_model *model = tpx_sharding_model(sh);
  size_t np = tpx_model_num_params(model);
  for (size_t p = 0; p < np; p++) {
    if (srcs[p].data == NULL)
      continue;
    tpx_param_info info;
    tpx_status st = tpx_model_param(model, (int64_t)p, &info, err);
    if (st != TPX_OK)
      return st;
    if (!tpx__strmap_find(&w->names, info.fqn, strlen(info.fqn), NULL)) {
      if (info.tied_to >= 0)
        continue; /* stored once, under its target's name */
      return tpx_error_set(err, TPX_NOT_FOUND,
                           "parameter '%s' is not an entry of the checkpoint",
                           info.fqn);
    }
    int writes;
    st = is_writer(sh, (int64_t)p, rank, info.fqn, &writes, err);
    if (st != TPX_OK)
      return st;
    if (!writes)
      continue;
    tpx_slice slice;
    st = tpx_sharding_local_slice(sh, (int64_t)p, rank, &slice, err);
    if (st == TPX_OK &&
        (uint64_t)tpx_slice_numel(&slice) * tpx_dtype_size(srcs[p].dtype) >
            srcs[p].bytes)
      st = tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "parameter '%s': rank %lld's slice is larger than "
                         "its buffer of %zu bytes",
                         info.fqn, (long long)rank, srcs[p].bytes);
    if (st == TPX_OK)
      st = tpx_checkpoint_write_slice(w, info.fqn, &slice, srcs[p].dtype,
                                      srcs[p].data, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}
