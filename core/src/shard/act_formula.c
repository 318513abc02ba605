/* act_formula.c — the activation formula: the bytes a decoder layer and
 * the output head save for backward, per rank, as transformers' modules
 * save them (measured with saved_tensors_hooks on tiny models of each
 * family: tests/fixtures/activations/). The sizes come from activations.c;
 * docs/MEMORY.md "Activations" writes the formula out term by term.
 *
 * e is the activation dtype's size; the norms compute in f32 whatever e. */
#include <string.h>

#include "shard/activations.h"
#include "shard/shard_internal.h"

static const char *const attn_names[] = {"flash", "sdpa", "eager"};

const char *tpx_attention_name(tpx_attention attn) {
  return (unsigned)attn < 3 ? attn_names[attn] : NULL;
}

tpx_status tpx_attention_parse(const char *text, tpx_attention *out,
                               tpx_error *err) {
  if (!text || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_attention_parse: NULL text or out");
  for (int i = 0; i < 3; i++)
    if (strcmp(text, attn_names[i]) == 0) {
      *out = (tpx_attention)i;
      return TPX_OK;
    }
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "unknown attention implementation '%s' (expected "
                       "flash, sdpa or eager)",
                       text);
}

static int64_t add(int64_t a, int64_t b) { return tpx__sat_add(a, b); }
static int64_t mul(int64_t a, int64_t b) { return tpx__sat_mul(a, b); }
static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Tokens of a sequence-sharded tensor on one rank. */
static int64_t sp_tokens(const tpx__act_dims *d) {
  return ceil_div(d->tokens, d->sp_div);
}

/* One RMSNorm over n features: its f32 input (the upcast), the f32
 * reciprocal root per row and the normalized rows in e, sequence-sharded
 * under SP. */
static int64_t norm_bytes(const tpx__act_dims *d, int64_t rows, int64_t n) {
  return mul(rows, add(mul(4, n), add(4, mul(d->elem, n))));
}

/* A hidden-sized norm whose output feeds linears: the norm, plus its
 * output (all-gathered under SP) as the linears' saved input. */
static int64_t norm_into_linear(const tpx__act_dims *d) {
  return add(norm_bytes(d, sp_tokens(d), d->hidden),
             mul(mul(d->tokens, d->hidden), d->elem));
}

static int64_t attention_bytes(const tpx__act_dims *d) {
  int64_t a = d->heads, k = d->kv_heads, hd = d->head_dim, e = d->elem;
  if (d->attention == TPX_ATTENTION_EAGER) {
    /* q, k and v repeated to a heads, the output; the f32 softmax (a x seq
     * keys per token) and, below f32, its cast to e */
    int64_t probs = mul(mul(a, d->seq), e < 4 ? 4 + e : 4);
    return mul(d->tokens, add(mul(mul(4, e), mul(a, hd)), probs));
  }
  /* flash / SDPA: q (a heads), k and v (kv heads), the output, and the
   * f32 log-sum-exp per head */
  int64_t el = mul(hd, add(mul(2, a), mul(2, k)));
  return mul(d->tokens, add(mul(el, e), mul(4, a)));
}

int64_t tpx__act_layer_bytes(const tpx__act_dims *d) {
  int64_t into = d->norms < 2 ? d->norms : 2; /* attention and MLP inputs */
  int64_t bytes = mul(into, norm_into_linear(d));
  /* post-norms (output into the residual add) */
  bytes =
      add(bytes, mul(d->norms - into, norm_bytes(d, sp_tokens(d), d->hidden)));
  /* per-head q and k norms */
  if (d->qk_norm)
    bytes = add(bytes, norm_bytes(d, mul(d->tokens, add(d->heads, d->kv_heads)),
                                  d->head_dim));
  bytes = add(bytes, attention_bytes(d));
  /* MLP: gate, act(gate), up and act(gate) * up (down's input) */
  return add(bytes, mul(mul(d->tokens, mul(4, d->inter)), d->elem));
}

/* Saved once per step: the final norm and lm_head's input, the f32
 * log-softmax of the (local) vocabulary, the int64 token ids (embedding)
 * and labels (loss), the loss, and RoPE's cos and sin for the rank's
 * positions (shared by the batch and the layers). */
static int64_t head_bytes(const tpx__act_dims *d) {
  int64_t per_token =
      add(mul(4, d->vocab_local), 16); /* log-softmax, ids, labels */
  int64_t rope =
      mul(mul(2, ceil_div(d->seq, d->cp)), mul(d->head_dim, d->elem));
  return add(add(norm_into_linear(d), mul(d->tokens, per_token)), add(rope, 4));
}

/* Under cp, the K and V of one layer gathered over the full sequence
 * (local heads), alive while that layer's attention runs. */
static int64_t cp_kv_bytes(const tpx__act_dims *d) {
  if (d->cp <= 1)
    return 0;
  return mul(mul(d->cp_tokens, d->elem), mul(2, mul(d->kv_heads, d->head_dim)));
}

int64_t tpx__act_bytes(const tpx__act_dims *d, int checkpointing) {
  int64_t layer = tpx__act_layer_bytes(d);
  int64_t head = head_bytes(d);
  if (!checkpointing)
    return add(add(mul(d->layers, layer), head), cp_kv_bytes(d));
  /* Checkpointed, the step's peak (tools/upstream/ckpt_peak.py measures
   * torch's): each layer keeps its input (sequence-sharded under SP), and
   * on top of that either the head at the loss's backward (torch's
   * cross_entropy then also holds the gradients of its f32 log-softmax
   * and of the logits; an in-place loss none), or, once those are given
   * back, one layer recomputed with its MLP's backward buffers (the
   * gradients of act(gate) * up and of one factor, [S, i_l] each, and of
   * the MLP's input, [S, h], whole under SP) and under cp the gathered K
   * and V. */
  int64_t kept = mul(mul(mul(sp_tokens(d), d->hidden), d->elem), d->layers);
  if (!d->loss_in_place)
    head = add(head, mul(mul(2, d->tokens), mul(4, d->vocab_local)));
  int64_t grads =
      mul(mul(d->tokens, d->elem), add(mul(2, d->inter), d->hidden));
  int64_t bwd = add(add(layer, grads), cp_kv_bytes(d));
  return add(kept, head > bwd ? head : bwd);
}
