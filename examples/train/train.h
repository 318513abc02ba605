/* train.h — the reference trainer's private types (examples/train/).
 *
 * A Llama-family decoder (LlamaForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM) in f32 on CPU. Every layer works on TP-LOCAL shapes
 * (local heads = local q_proj rows / head_dim, local intermediate, local
 * vocab) and goes through the glue (glue.c) around each styled module, so
 * one code path runs every mesh. Not part of libtpx: an example that embeds
 * it. */
#ifndef TPX_TRAIN_H
#define TPX_TRAIN_H
#include <stddef.h>
#include <stdint.h>
#include <tpx/tpx.h>

/* ---- config.c ---- */
typedef enum tr_rope_type { TR_ROPE_DEFAULT, TR_ROPE_LINEAR, TR_ROPE_LLAMA3 } tr_rope_type;
typedef struct tr_config {
  const char *arch;
  int64_t hidden, heads, kv_heads, head_dim, inter, vocab, layers;
  double eps, theta;
  /* rope scaling: factor (linear, llama3), low / high_freq_factor and
   * original_max_position_embeddings (llama3) */
  tr_rope_type rope;
  double rope_factor, rope_low, rope_high, rope_orig_max;
  int qkv_bias; /* Qwen2 */
  int qk_norm;  /* Qwen3 */
  int tied;
} tr_config;
tpx_status tr_config_read(const tpx_model *model, tr_config *out,
                          tpx_error *err);
/* The RoPE inverse frequencies inv[head_dim / 2] of the config's rope type. */
void tr_rope_inv_freq(const tr_config *c, double *inv);

/* ---- activations: local [b, s, f] row-major f32, plus the logical
 * (tp-wide) extents S and F of the dims tp may shard (sequence under SP,
 * features of colwise outputs); tr_act_alloc sets S = s, F = f. ---- */
typedef struct tr_act {
  float *d;
  int64_t b, s, f;
  int64_t S, F;
  /* arr: this activation is a DTensor in layout arrl (the styled module
   * that produced it kept its output a DTensor), so the next styled
   * module's input hook redistributes it (runtime_tp.h "_dt" calls).
   * in_arr / in_arrl: on a module's transitioned input, how its source
   * arrived; the input-grad transition in backward needs it. */
  int arr, in_arr;
  tpx_placement arrl, in_arrl;
} tr_act;
int64_t tr_act_numel(const tr_act *a);
tpx_status tr_act_alloc(tr_act *a, int64_t b, int64_t s, int64_t f,
                        tpx_error *err);
void tr_act_free(tr_act *a);

/* ---- ops.c: dense math on local buffers ---- */
/* y[n,out] = x[n,in] W[out,in]^T (+ bias) */
void tr_linear_fwd(const float *x, const float *w, const float *bias,
                   float *y, int64_t n, int64_t in, int64_t out);
/* dx[n,in] (= or += per accumulate) dy W; dW += dy^T x; db += colsum dy */
void tr_linear_bwd(const float *x, const float *w, const float *dy,
                   float *dx, float *dw, float *db, int64_t n, int64_t in,
                   int64_t out, int accumulate_dx);
/* y = x * rsqrt(mean(x^2)+eps) * w over rows of width f; rstd[n] saved */
void tr_rmsnorm_fwd(const float *x, const float *w, float *y, float *rstd,
                    int64_t n, int64_t f, double eps);
void tr_rmsnorm_bwd(const float *x, const float *w, const float *rstd,
                    const float *dy, float *dx, float *dw, int64_t n,
                    int64_t f);
/* in-place rotary embedding on [b, t, nh, hd] at positions 0..t-1 */
void tr_rope(float *x, int64_t b, int64_t t, int64_t nh, int64_t hd,
             const float *cosv, const float *sinv, int inverse);
/* cos / sin [t, hd/2] of position p times inv_freq[i] (tr_rope_inv_freq) */
void tr_rope_tables(float *cosv, float *sinv, int64_t t, int64_t hd,
                    const double *inv_freq);
void tr_swiglu_fwd(const float *g, const float *u, float *m, int64_t n);
void tr_swiglu_bwd(const float *g, const float *u, const float *dm, float *dg,
                   float *du, int64_t n);

/* ---- attention.c: causal GQA attention on local heads ---- */
typedef struct tr_attn_shape {
  int64_t b, t, nh, nkv, hd;
} tr_attn_shape;
/* q [b,t,nh*hd], k/v [b,t,nkv*hd] -> o [b,t,nh*hd]; p [b,nh,t,t] saved */
void tr_attn_fwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, float *p, float *o);
void tr_attn_bwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, const float *p, const float *dout, float *dq,
                 float *dk, float *dv);

/* ---- glue.c: where the model meets tpx (params, transitions, losses,
 * FSDP units, optimizer). One object per rank. ---- */
typedef struct tr_rank tr_rank;
typedef struct tr_net tr_net;
/* TP-local unsharded weight and its gradient (valid while its unit is
 * unsharded); NULL for an absent parameter (p < 0). */
float *tr_param_w(tr_rank *r, int64_t p);
float *tr_param_g(tr_rank *r, int64_t p);
/* TP-local dim d of parameter p, and its global dim. */
int64_t tr_param_dim(tr_rank *r, int64_t p, int d);
int64_t tr_param_full_dim(tr_rank *r, int64_t p, int d);
/* Run the styled module's transition on x (replaced by the result). */
tpx_status tr_transition(tr_rank *r, int64_t module, int output, int backward,
                         tr_act *x, tpx_error *err);
/* Vocab-parallel embedding: out [b, s, hidden] in the module's output
 * layout; backward accumulates into the embedding grad. */
tpx_status tr_embed_fwd(tr_rank *r, const int32_t *ids, int64_t b, int64_t t,
                        tr_act *out, tpx_error *err);
tpx_status tr_embed_bwd(tr_rank *r, const int32_t *ids, int64_t b, int64_t t,
                        tr_act *dout, tpx_error *err);
/* Mean CE of local-vocab logits [b, t, vl]; dlogits same shape, for a loss
 * that is the mean over the GLOBAL batch of this step (scale 1/ntok_global
 * handled by the glue). *loss: this rank's mean over its positions. */
tpx_status tr_cross_entropy(tr_rank *r, const tr_act *logits,
                            const int32_t *targets, double *loss,
                            tr_act *dlogits, tpx_error *err);
/* FSDP: the unit holding decoder layer `layer` (-1: the root's params),
 * for the forward (backward 0) or backward (1) pass. */
tpx_status tr_unit_unshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err);
tpx_status tr_unit_reshard(tr_rank *r, int64_t layer, int backward,
                           tpx_error *err);
tpx_status tr_unit_reduce_grads(tr_rank *r, int64_t layer, tpx_error *err);
tpx_status tr_zero_grads(tr_rank *r, tpx_error *err);
/* After backward: total pre-clip grad norm, clip, AdamW step (1-based). */
tpx_status tr_optimizer_step(tr_rank *r, double clip, double lr, double wd,
                             int64_t step, double *grad_norm, tpx_error *err);
/* Mean of v over the data-parallel ranks (the step's loss). */
tpx_status tr_dp_mean(tr_rank *r, double *v, tpx_error *err);

/* ---- model.c: the decoder over the glue ---- */
typedef struct tr_layer_ids {
  int64_t in_norm, post_norm, q, k, v, o, qb, kb, vb, qn, kn, gate, up, down;
  int64_t m_in_norm, m_post_norm, m_q, m_k, m_v, m_o, m_gate, m_up, m_down;
} tr_layer_ids;
struct tr_net {
  tr_config cfg;
  const tpx_model *model;
  int64_t embed, norm, lm_head, m_embed, m_norm, m_lm_head;
  tr_layer_ids *L;
};
tpx_status tr_net_init(tr_net *net, const tpx_model *model, tpx_error *err);
void tr_net_free(tr_net *net);
/* One forward + backward on ids [b, t+1] (inputs :t, targets 1:). */
tpx_status tr_net_step(tr_net *net, tr_rank *r, const int32_t *tokens,
                       int64_t b, int64_t t, double *loss, tpx_error *err);

#endif /* TPX_TRAIN_H */
