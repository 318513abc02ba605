/* tpx/runtime_cp.h — context parallelism for trainers: which positions of a
 * sequence each cp rank holds, the all-gather of a sequence-sharded
 * activation (attention's K and V) and its backward, and vocab-parallel
 * log-probs of sequence-sharded logits (docs/SEMANTICS.md "Context
 * parallelism").
 *
 * A batch [b, seq] is cut over the cp ranks as torch's context_parallel
 * cuts its buffers. TPX_CP_HEAD_TAIL (causal load balancing, the default):
 * the sequence is cut into 2·cp chunks of seq / (2·cp) and cp rank i holds
 * chunks i and 2·cp−1−i, in that order; seq must be divisible by 2·cp.
 * TPX_CP_CONTIGUOUS: rank i holds positions [i·seq/cp, (i+1)·seq/cp); seq
 * must be divisible by cp. Either way each rank holds t = seq / cp
 * positions, and positions (RoPE, the causal mask) are the global ones
 * tpx_cp_positions returns.
 *
 * The collectives take the cp communicator itself (the cp dim of the mesh
 * comm, or any comm whose rank i is cp rank i); a NULL or size-1 comm is
 * cp 1. Buffers live in that comm's memory space. Not here: the attention
 * arithmetic (the trainer's), the gradient reduction over cp (the runtime's
 * FSDP reduce-scatter over dp_shard_cp). */
#ifndef TPX_RUNTIME_CP_H
#define TPX_RUNTIME_CP_H

#include <stdint.h>

#include "tpx/comm.h"
#include "tpx/error.h"
#include "tpx/runtime_tp.h"
#include "tpx/sharding.h"
#include "tpx/tensor.h"

TPX_BEGIN_DECLS

typedef enum tpx_cp_layout {
  TPX_CP_HEAD_TAIL = 0, /* chunks i and 2·cp−1−i of 2·cp (load balanced) */
  TPX_CP_CONTIGUOUS = 1, /* chunk i of cp */
} tpx_cp_layout;

/* "head-tail" / "contiguous"; NULL for an unknown value. */
TPX_API const char *tpx_cp_layout_name(tpx_cp_layout layout);
/* The layout named `name`; TPX_INVALID_ARGUMENT naming the choices. */
TPX_API tpx_status tpx_cp_layout_parse(const char *name, tpx_cp_layout *out,
                                       tpx_error *err);

/* The global positions pos[seq / cp] that cp rank `cp_rank` of `cp` holds,
 * in the order it holds them. TPX_INVALID_ARGUMENT when seq is not
 * divisible by 2·cp (head-tail) or cp (contiguous), naming both. */
TPX_API tpx_status tpx_cp_positions(int64_t seq, int64_t cp, int64_t cp_rank,
                                    tpx_cp_layout layout, int64_t *pos,
                                    tpx_error *err);

/* seq_index[seq]: every cp rank's positions, rank after rank (the
 * permutation torch's context_parallel applies to the sequence; entry j
 * is the original position of element j of the sharded sequence). */
TPX_API tpx_status tpx_cp_seq_index(int64_t seq, int64_t cp,
                                    tpx_cp_layout layout, int64_t *seq_index,
                                    tpx_error *err);

/* Forward of the K/V all-gather: local [b, t, ...] (this rank's positions)
 * -> full [b, t·cp, ...] with row p the global position p, on every cp
 * rank. Collective over cp. Any dtype; trailing dims are carried whole. */
TPX_API tpx_status tpx_cp_all_gather_seq(tpx_comm *cp, tpx_cp_layout layout,
                                         const tpx_tensor *local,
                                         tpx_tensor *full, tpx_error *err);
/* Its backward: full [b, t·cp, ...] in global position order (this rank's
 * gradient w.r.t. every position) summed over the cp ranks into local
 * [b, t, ...] at this rank's positions (a reduce-scatter). f32 or f64.
 * `full` is left as it was. */
TPX_API tpx_status tpx_cp_reduce_scatter_seq(tpx_comm *cp, tpx_cp_layout layout,
                                             const tpx_tensor *full,
                                             tpx_tensor *local, tpx_error *err);

/* Vocab-parallel log-probs of logits sharded over tp (vocab) and cp
 * (sequence), as get_logprobs_from_vocab_parallel_logits with seq_index:
 * logits [b, t, V_local] and input_ids [b, t] (int32 / int64) are this
 * cp rank's block t·r .. t·r + t − 1 of the sharded sequence, whose element
 * j is original position seq_index[j] (seq_index[t·cp], a permutation).
 * Targets are input_ids shifted left by one in original order (the last
 * wraps to the first and is dropped). logprobs [b, t·cp − 1] f32 is filled
 * on every rank, in original order: logprobs[i, p] = log softmax(logits at
 * position p)[input_ids at p + 1], equal to the unsharded computation.
 * Collective over tp (the mesh comm's tp dim, as tpx_tp_logprobs) and cp;
 * cp NULL or size 1 with seq_index the identity is the plain shifted
 * log-prob. */
TPX_API tpx_status tpx_tp_logprobs_seq(const tpx_sharding *sh,
                                       tpx_mesh_comm *mc, tpx_comm *cp,
                                       const tpx_tp_loss_options *opts,
                                       const tpx_tensor *logits,
                                       const tpx_tensor *input_ids,
                                       const int64_t *seq_index,
                                       tpx_tensor *logprobs, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_RUNTIME_CP_H */
