/* runtime/tp_internal.h — helpers shared by the tp_*.c files of the runtime
 * area (tpx/runtime_tp.h): the tp mesh dim, activation placements over the
 * mesh, argument checks. Not for other areas. */
#ifndef TPX_RUNTIME_TP_INTERNAL_H
#define TPX_RUNTIME_TP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/runtime_tp.h"

#define TPX__TRY(x)                                                            \
  do {                                                                         \
    tpx_status st_ = (x);                                                      \
    if (st_ != TPX_OK)                                                         \
      return st_;                                                              \
  } while (0)

/* Size of the tp dim (1 when absent). */
int64_t tpx__tp_size(const tpx_sharding *sh);

/* pl[mesh ndim]: `tp_layout` on the tp dim, Replicate elsewhere (an
 * activation: every other mesh dim holds its own local data). */
void tpx__tp_activation_placements(const tpx_sharding *sh,
                                   tpx_placement tp_layout,
                                   tpx_placement *pl);

/* The mesh of mc must be the sharding's (same dims and sizes). `what`
 * names the call. */
tpx_status tpx__tp_check_comm(const tpx_sharding *sh, tpx_mesh_comm *mc,
                              const char *what, tpx_error *err);

/* This rank's index in mc's world (its mesh rank). */
int64_t tpx__tp_my_rank(tpx_mesh_comm *mc);

/* The tp group communicator of mc, or NULL when the mesh has no tp dim. */
tpx_comm *tpx__tp_comm(const tpx_sharding *sh, tpx_mesh_comm *mc);

/* Tensor t has exactly `shape[ndim]`; else TPX_INVALID_ARGUMENT naming
 * `what`, `ctx` and both shapes. */
tpx_status tpx__tp_check_shape(const tpx_tensor *t, const int64_t *shape,
                               int ndim, const char *what, const char *ctx,
                               tpx_error *err);

/* FQN of a module for messages ("(root)" for ""). */
const char *tpx__tp_module_name(const tpx_sharding *sh, int64_t module);

/* Read element i of an int32 / int64 tensor. */
int64_t tpx__tp_read_index(const tpx_tensor *t, int64_t i);
/* Float element access for f32 / bf16 buffers. */
float tpx__tp_read_f(const void *data, tpx_dtype dtype, int64_t i);
void tpx__tp_write_f(void *data, tpx_dtype dtype, int64_t i, float v);

#endif /* TPX_RUNTIME_TP_INTERNAL_H */
