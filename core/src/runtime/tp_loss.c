/* tp_loss.c — vocab-parallel log-probs and cross-entropy with their
 * backward (tpx/runtime_tp.h; seed 004, spec/torch-semantics.md §7). */
#include "runtime/tp_internal.h"

tpx_status tpx_tp_vocab_range(const tpx_sharding *sh, int64_t rank,
                              const tpx_tp_loss_options *opts,
                              int64_t *offset, int64_t *len, tpx_error *err) {
  (void)sh, (void)rank, (void)opts, (void)offset, (void)len;
  return tpx_error_set(err, TPX_UNSUPPORTED, "tpx_tp_vocab_range: todo");
}

tpx_status tpx_tp_logprobs(const tpx_sharding *sh, tpx_mesh_comm *mc,
                           const tpx_tp_loss_options *opts,
                           const tpx_tensor *logits, const tpx_tensor *targets,
                           tpx_tensor *logprobs, tpx_error *err) {
  (void)sh, (void)mc, (void)opts, (void)logits, (void)targets, (void)logprobs;
  return tpx_error_set(err, TPX_UNSUPPORTED, "tpx_tp_logprobs: todo");
}

tpx_status tpx_tp_logprobs_backward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                    const tpx_tp_loss_options *opts,
                                    const tpx_tensor *logits,
                                    const tpx_tensor *targets,
                                    const tpx_tensor *grad_logprobs,
                                    tpx_tensor *grad_logits, tpx_error *err) {
  (void)sh, (void)mc, (void)opts, (void)logits, (void)targets;
  (void)grad_logprobs, (void)grad_logits;
  return tpx_error_set(err, TPX_UNSUPPORTED, "tpx_tp_logprobs_backward: todo");
}

tpx_status tpx_tp_cross_entropy(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                const tpx_tp_loss_options *opts,
                                const tpx_tensor *logits,
                                const tpx_tensor *targets, double grad_scale,
                                tpx_tensor *grad_logits, double *loss_sum,
                                int64_t *count, tpx_error *err) {
  (void)sh, (void)mc, (void)opts, (void)logits, (void)targets;
  (void)grad_scale, (void)grad_logits, (void)loss_sum, (void)count;
  return tpx_error_set(err, TPX_UNSUPPORTED, "tpx_tp_cross_entropy: todo");
}

tpx_status tpx_tp_cross_entropy_mean(const tpx_sharding *sh,
                                     tpx_mesh_comm *mc,
                                     const tpx_tp_loss_options *opts,
                                     const tpx_tensor *logits,
                                     const tpx_tensor *targets,
                                     tpx_tensor *grad_logits, double *loss,
                                     tpx_error *err) {
  (void)sh, (void)mc, (void)opts, (void)logits, (void)targets;
  (void)grad_logits, (void)loss;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "tpx_tp_cross_entropy_mean: todo");
}
