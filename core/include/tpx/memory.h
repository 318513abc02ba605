/* tpx/memory.h — what training costs each rank, estimated from a sharding:
 * memory (parameters, gradients, optimizer state, FSDP all-gather peak,
 * activations) and the bytes a rank sends per training step in TP and FSDP
 * collectives.
 *
 * Every term is a formula written out in docs/MEMORY.md with its
 * assumptions. Parameters, gradients and optimizer state follow FSDP2's
 * padded per-rank layout (each parameter's TP-local piece split on dim 0
 * over dp_shard, every rank padded to the full chunk:
 * tpx_layout_fsdp_padded_numel), which is what a runtime allocates; the
 * gather peak and the traffic use unpadded gathered sizes; optimizer_torch
 * is torch's optimizer on the unpadded shard. Activations are what
 * transformers' decoder modules save for backward, by the structure of the
 * model's layers, the attention implementation and the activation dtype
 * (docs/MEMORY.md "Activations" says how close, family by family).
 *
 * Not an allocator and not a profiler: nothing here touches a device. */
#ifndef TPX_MEMORY_H
#define TPX_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/sharding.h"

TPX_BEGIN_DECLS

typedef enum tpx_optimizer {
  TPX_OPTIMIZER_ADAMW = 0, /* exp_avg + exp_avg_sq, f32 */
  TPX_OPTIMIZER_SGD = 1,   /* momentum buffer, f32 */
  TPX_OPTIMIZER_NONE = 2,  /* no optimizer state, no master copy */
} tpx_optimizer;

/* "adamw", "sgd", "none"; NULL when out of range. */
TPX_API const char *tpx_optimizer_name(tpx_optimizer opt);
/* Parse one of the names above; TPX_INVALID_ARGUMENT naming the text. */
TPX_API tpx_status tpx_optimizer_parse(const char *text, tpx_optimizer *out,
                                       tpx_error *err);

/* The attention implementation the activation estimate assumes (what the
 * model's attention saves for backward, docs/MEMORY.md "Activations"). */
typedef enum tpx_attention {
  TPX_ATTENTION_FLASH = 0, /* flash attention: q, k, v, output, f32 LSE */
  TPX_ATTENTION_SDPA = 1,  /* torch SDPA: the same set as flash */
  TPX_ATTENTION_EAGER = 2, /* matmul + softmax: also the f32 probabilities
                              (seq x seq per head) and their cast copy */
} tpx_attention;

/* "flash", "sdpa", "eager"; NULL when out of range. */
TPX_API const char *tpx_attention_name(tpx_attention attn);
/* Parse one of the names above; TPX_INVALID_ARGUMENT naming the text. */
TPX_API tpx_status tpx_attention_parse(const char *text, tpx_attention *out,
                                       tpx_error *err);

typedef struct tpx_memory_options {
  size_t struct_size;
  tpx_optimizer optimizer;      /* adamw */
  int64_t batch;                /* sequences per micro-batch per rank, 1 */
  int64_t seq;                  /* tokens per sequence; 0 = no activations,
                                   no TP traffic */
  int activation_checkpointing; /* 1: every layer is checkpointed */
  tpx_dtype activation_dtype;   /* INVALID: the FSDP param dtype, else the
                                   model's dtype */
  /* 1: FSDP2's CPUOffloadPolicy: the sharded parameters, their gradients
   * and the optimizer state live in host memory (tpx_memory.host), the
   * device holds the gathered units and the activations
   * (tpx_memory.device). Added after activation_dtype: an older, shorter
   * struct_size means 0. */
  int offload;
  /* Added after offload (a shorter struct gets flash). */
  tpx_attention attention; /* flash */
  /* 1: the loss writes the logits' gradient over the logits (a fused
   * cross-entropy such as TransformerEngine's or Liger's, tpx-train's):
   * its backward takes no [tokens, vocab] buffers of its own. 0: torch's
   * cross_entropy, whose backward holds the gradients of its f32
   * log-softmax and of the logits beside the log-softmax. Only the
   * checkpointed figure, a step's peak, counts the difference
   * (docs/MEMORY.md "Activations"). Added after attention (a shorter
   * struct gets 0). */
  int loss_in_place;
} tpx_memory_options;

#define TPX_MEMORY_OPTIONS_INIT                                                \
  {                                                                            \
    sizeof(tpx_memory_options), TPX_OPTIMIZER_ADAMW, 1, 0, 0,                  \
        TPX_DTYPE_INVALID, 0, TPX_ATTENTION_FLASH, 0                           \
  }

/* Bytes one rank holds at its training peak, by term. */
typedef struct tpx_memory {
  int64_t params;      /* sharded parameters, held dtype, padded */
  int64_t grads;       /* sharded gradients, reduce dtype (f32 without
                          FSDP), padded */
  int64_t optimizer;   /* optimizer states (+ f32 master copy), padded */
  int64_t gather_peak; /* FSDP units gathered at once (root + worst
                          prefetch window), compute dtype */
  int64_t activations; /* saved for backward at the peak */
  int64_t peak;        /* the sum of the five */
  /* Part of `optimizer`: the f32 master copy of parameters held below 4
   * bytes (0 with TPX_OPTIMIZER_NONE). A runtime that counts masters with
   * the parameters compares params + master and optimizer - master. */
  int64_t master;
  /* Where the bytes live (docs/MEMORY.md "CPU offload"): without offload
   * device = peak and host = 0; with tpx_memory_options.offload, host =
   * params + grads + optimizer and device = gather_peak + activations. */
  int64_t device;
  int64_t host;
  /* The optimizer state torch's optimizer would hold on this rank: the
   * same states and master copy on the UNPADDED local shard (torch's
   * optimizer state follows the DTensor's local tensor, so the short last
   * rank of an uneven dp_shard holds less), plus AdamW's 4-byte `step`
   * tensor per parameter. Reported beside `optimizer`, not in `peak`
   * (tpx's runtime allocates `optimizer`). */
  int64_t optimizer_torch;
  /* Part of `activations` at ep > 1 (docs/MEMORY.md "Expert
   * parallelism"): the token-dispatch buffers of one MoE layer, the tokens
   * of the rank's EP group gathered with their routing (top-k weights and
   * expert ids) and the combined output; 0 at ep 1. Added after
   * optimizer_torch. */
  int64_t moe_dispatch;
} tpx_memory;

/* The memory of ranks [first, first + count) into out[0..count). `opts` may
 * be NULL (defaults). The out structs follow the caller's header: options
 * whose struct_size ends before loss_in_place (a caller built before
 * moe_dispatch was appended) get out elements without moe_dispatch, so an
 * older binary's array is filled at its own stride; the same holds for
 * tpx_traffic and its ep. With NULL options the whole struct is written.
 * Activations are the same on every rank (the largest rank's when TP splits
 * heads unevenly). TPX_NOT_FOUND naming the config key when opts->seq > 0 and
 * the config lacks a size the activation formula needs; TPX_OUT_OF_RANGE for
 * ranks outside the mesh. */
TPX_API tpx_status tpx_memory_ranks(const tpx_sharding *sh,
                                    const tpx_memory_options *opts,
                                    int64_t first, size_t count,
                                    tpx_memory *out, tpx_error *err);
/* The dtype the activation estimate counts in: opts->activation_dtype when
 * set, else the FSDP compute dtype (the mixed-precision param_dtype), else
 * the model's (its first parameter's) dtype, else bf16. */
TPX_API tpx_dtype tpx_memory_activation_dtype(const tpx_sharding *sh,
                                              const tpx_memory_options *opts);
/* One rank: tpx_memory_ranks with count 1. */
TPX_API tpx_status tpx_memory_rank(const tpx_sharding *sh,
                                   const tpx_memory_options *opts, int64_t rank,
                                   tpx_memory *out, tpx_error *err);

/* Bytes one rank sends in one training step (forward + backward of one
 * micro-batch and the gradient reduction), ring collectives. */
typedef struct tpx_traffic {
  int64_t tp;   /* TP activation collectives (needs opts->seq > 0) */
  int64_t fsdp; /* FSDP all-gathers, reduce-scatters, HSDP all-reduce */
  int64_t total;
  /* Context parallelism (needs opts->seq > 0 and cp > 1): K and V
   * all-gathered over cp in every layer's forward, their gradients
   * reduce-scattered in backward. Part of total. */
  int64_t cp;
  /* Expert parallelism (needs opts->seq > 0 and ep > 1): every MoE layer
   * all-gathers its tokens and their routing over ep and all-reduces the
   * combined output, the duals in backward (docs/MEMORY.md "Expert
   * parallelism"). Part of total; the experts' FSDP gathers over ep_shard
   * are in fsdp. Added after cp. */
  int64_t ep;
} tpx_traffic;

TPX_API tpx_status tpx_traffic_rank(const tpx_sharding *sh,
                                    const tpx_memory_options *opts,
                                    int64_t rank, tpx_traffic *out,
                                    tpx_error *err);
/* Ranks [first, first + count) into out[0..count): the TP term (the same on
 * every rank) is computed once, so a whole mesh costs one TP pass.
 * TPX_OUT_OF_RANGE for ranks outside the mesh. */
TPX_API tpx_status tpx_traffic_ranks(const tpx_sharding *sh,
                                     const tpx_memory_options *opts,
                                     int64_t first, size_t count,
                                     tpx_traffic *out, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_MEMORY_H */
