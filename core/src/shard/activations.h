/* shard/activations.h — what memory.c, activations.c, act_formula.c and
 * traffic.c share: the model sizes the activation and traffic formulas read
 * from the config, the module tree and the sharding (docs/MEMORY.md).
 * Private to the shard area. */
#ifndef TPX_SHARD_ACTIVATIONS_H
#define TPX_SHARD_ACTIVATIONS_H

#include <stdint.h>

#include "tpx/memory.h"

typedef struct tpx__act_dims {
  int64_t tokens;      /* S = batch * seq / cp: the tokens one rank holds */
  int64_t cp;          /* context-parallel degree (1 = none): the sequence
                          is split over cp ranks, attention gathers the
                          full K and V of one layer at a time */
  int64_t cp_tokens;   /* batch * seq: the tokens of the gathered K/V */
  int64_t batch, seq;  /* the options' batch and seq */
  int64_t hidden;      /* h */
  int64_t heads;       /* a_l: attention heads per rank (ceil(a/t) if split) */
  int64_t kv_heads;    /* k_l: kv heads per rank */
  int64_t head_dim;    /* d */
  int64_t inter;       /* i_l: MLP width per rank (top-k experts' for MoE) */
  int64_t vocab;       /* V */
  int64_t vocab_local; /* V_l: V / t when the output projection is split */
  int64_t layers;      /* L: language layers */
  int64_t sp_div;      /* t under sequence parallel, else 1 */
  int64_t elem;        /* e: bytes of the activation dtype */
  int64_t norms;       /* hidden-sized norms per layer (2; 4 with
                          post-norms) */
  int qk_norm;         /* 1: q and k are normed per head */
  tpx_attention attention;
  int loss_in_place; /* the options': the loss's backward needs no
                        [S, V_l] buffers of its own */
} tpx__act_dims;

/* Read the sizes (opts->seq must be > 0). TPX_NOT_FOUND naming the config
 * key the formula needs and the config lacks. */
tpx_status tpx__act_dims_read(const tpx_sharding *sh,
                              const tpx_memory_options *opts,
                              tpx__act_dims *out, tpx_error *err);
/* Set the context-parallel degree (tpx__act_dims_read takes it from the
 * mesh dimension named "cp", else 1): tokens becomes batch * ceil(seq/cp). */
void tpx__act_dims_set_cp(tpx__act_dims *d, int64_t cp);
/* Activation bytes at the peak (docs/MEMORY.md "Activations"): what is
 * saved for backward at the end of forward; with checkpointing, the
 * step's peak, backward's buffers included. */
int64_t tpx__act_bytes(const tpx__act_dims *d, int checkpointing);
/* Bytes of one layer's saved activations, without checkpointing. */
int64_t tpx__act_layer_bytes(const tpx__act_dims *d);

/* Options with the defaults filled in for a NULL or shorter struct. */
tpx_memory_options tpx__memory_options(const tpx_memory_options *opts);
/* The size of one tpx_memory / tpx_traffic the caller's array holds: a
 * caller built before moe_dispatch / ep were appended passes options
 * without loss_in_place (appended with them) and gets the older layout;
 * NULL options or newer ones, the whole struct (tpx/memory.h). */
size_t tpx__memory_out_size(const tpx_memory_options *opts);
size_t tpx__traffic_out_size(const tpx_memory_options *opts);

#endif /* TPX_SHARD_ACTIVATIONS_H */
