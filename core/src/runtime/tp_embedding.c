/* tp_embedding.c — embedding forward / backward under the style the
 * sharding applied (tpx/runtime_tp.h): vocab-parallel masked lookup and
 * masked scatter-add (weight Shard(0)), colwise lookup (Shard(1)), plain
 * lookup; each followed by the module's output transition.
 * Not here: the transitions themselves (tp_transition.c). */
#include "runtime/tp_internal.h"

tpx_status tpx_tp_embedding_shape(const tpx_sharding *sh, int64_t module,
                                  int64_t rank, const int64_t *ids_shape,
                                  int ids_ndim, int64_t *out_local,
                                  int64_t *weight_local, tpx_error *err) {
  (void)sh, (void)module, (void)rank, (void)ids_shape, (void)ids_ndim;
  (void)out_local, (void)weight_local;
  return tpx_error_set(err, TPX_UNSUPPORTED, "tpx_tp_embedding_shape: todo");
}

tpx_status tpx_tp_embedding_forward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                    int64_t module, const tpx_tensor *ids,
                                    const tpx_tensor *weight, tpx_tensor *out,
                                    tpx_error *err) {
  (void)sh, (void)mc, (void)module, (void)ids, (void)weight, (void)out;
  return tpx_error_set(err, TPX_UNSUPPORTED, "tpx_tp_embedding_forward: todo");
}

tpx_status tpx_tp_embedding_backward(const tpx_sharding *sh,
                                     tpx_mesh_comm *mc, int64_t module,
                                     const tpx_tensor *ids,
                                     const tpx_tensor *grad_out,
                                     tpx_tensor *weight_grad, tpx_error *err) {
  (void)sh, (void)mc, (void)module, (void)ids, (void)grad_out;
  (void)weight_grad;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "tpx_tp_embedding_backward: todo");
}
