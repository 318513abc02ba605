/* rt_cases.h — rank bodies for the TP runtime tests (tpx/runtime_tp.h),
 * shared by the local-thread programs and the mpirun program.
 *
 * Each case runs on every rank of a world whose size is the sharding's mesh
 * world, computes its references serially from deterministic inputs (the
 * full logical tensor, sliced where the layout says, via
 * tpx_layout_local_slice / tpx_sharding_local_slice), and returns
 * TPX_VALIDATION with the first mismatch in err. A failing rank keeps
 * calling every collective its case runs, so ranks never fall out of step. */
#ifndef TPX_TEST_RT_CASES_H
#define TPX_TEST_RT_CASES_H

#include "tpx/tpx.h"

typedef struct rt_arg {
  const tpx_sharding *sh; /* read-only, shared by thread ranks */
  int64_t T;              /* sequence length (uneven over tp: 7) */
  int64_t D;              /* last dim of the zoo's activations */
  tpx_dtype dtype;        /* f32 (default when INVALID) or bf16 */
  int64_t vocab;          /* loss cases: global vocab */
  int64_t rows;           /* loss cases: positions */
  int cases_run;          /* out (rank 0): transitions / checks executed */
} rt_arg;

/* Every transition of every styled module, forward and backward, plain and
 * DTensor arrivals (Replicate, Shard(1), the desired layout), against the
 * logical tensor; the backward layouts against the dual of the forward. */
tpx_status case_transitions(tpx_comm *world, void *arg, tpx_error *err);

/* A residual MLP block x + down(up(norm(x))) with elementwise norm weight,
 * run through the sharding's transitions of model.layers.0's
 * post_attention_layernorm / mlp.up_proj / mlp.down_proj (any plan: sp on
 * or off), forward and backward, against a single-rank reference: output,
 * dx, d(norm weight) (with tpx_tp_param_grad_allreduce), dW_up, dW_down. */
tpx_status case_mlp_block(tpx_comm *world, void *arg, tpx_error *err);

/* model.embed_tokens forward / backward (masked lookup, output transition,
 * masked scatter-add) against a single-rank lookup and scatter-add. */
tpx_status case_embedding(tpx_comm *world, void *arg, tpx_error *err);

/* Vocab-parallel log-probs, their backward, cross-entropy (sum / count and
 * mean) and its gradient against a single-rank reference (vocab, rows from
 * the arg, logits sharded by tpx_tp_vocab_range). */
tpx_status case_loss(tpx_comm *world, void *arg, tpx_error *err);

/* model.embed_tokens -> model.norm (elementwise weight) -> lm_head -> mean
 * cross-entropy, forward and backward through the sharding's embedding,
 * transitions (DTensor arrivals as the plan makes them) and vocab-parallel
 * loss, against a single-rank reference: the loss and the gradients of the
 * embedding, lm_head and norm weights. */
tpx_status case_head_chain(tpx_comm *world, void *arg, tpx_error *err);

#endif
