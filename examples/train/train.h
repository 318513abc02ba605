/* train.h — the reference trainer's private types (examples/train/).
 *
 * A Llama-family decoder (LlamaForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM, and the MoE Qwen3MoeForCausalLM, MixtralForCausalLM,
 * Glm4MoeForCausalLM) in f32 on CPU. Every layer works on TP-LOCAL shapes
 * (local heads = local q_proj rows / head_dim, local intermediate, local
 * vocab) and goes through the glue (glue_*.c) around each styled module, so
 * one code path runs every mesh. Not part of libtpx: an example that embeds
 * it. */
#ifndef TPX_TRAIN_H
#define TPX_TRAIN_H
#include <stddef.h>
#include <stdint.h>
#include <tpx/runtime_moe.h>
#include <tpx/tpx.h>

/* ---- config.c ---- */
typedef enum tr_rope_type {
  TR_ROPE_DEFAULT,
  TR_ROPE_LINEAR,
  TR_ROPE_LLAMA3
} tr_rope_type;
/* The MoE families (config_moe.c): which layers are MoE, how they route. */
typedef enum tr_moe_family {
  TR_MOE_NONE,    /* a dense decoder */
  TR_MOE_QWEN3,   /* Qwen3MoeForCausalLM: softmax, norm_topk_prob,
                     decoder_sparse_step / mlp_only_layers */
  TR_MOE_MIXTRAL, /* MixtralForCausalLM: softmax, always renormalised */
  TR_MOE_GLM4     /* Glm4MoeForCausalLM, DeepSeek-V3's block: sigmoid with
                     e_score_correction_bias, grouped top-k, shared experts,
                     first_k_dense_replace dense layers */
} tr_moe_family;
typedef struct tr_moe_config {
  tpx_moe_router_options router; /* experts E, top_k, score, ... */
  int64_t inter;        /* moe_intermediate_size (Mixtral: intermediate_size) */
  int64_t shared_inter; /* shared experts' width (n_shared_experts x inter);
                           0: none */
  int64_t sparse_step;  /* Qwen3-MoE: every sparse_step-th layer is MoE */
  int64_t first_dense;  /* GLM-4-MoE: layers below it are dense */
} tr_moe_config;
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
  tr_moe_family moe;
  tr_moe_config mc; /* when moe */
} tr_config;
tpx_status tr_config_read(const tpx_model *model, tr_config *out,
                          tpx_error *err);
/* config_moe.c: the MoE keys of c->moe's family into c->mc, refusing what
 * tpx-train does not implement with a message naming the key. */
tpx_status tr_config_moe_read(const tpx_model *model, tr_config *c,
                              tpx_error *err);
/* 1 when decoder layer l is an MoE layer (0 for a dense model). */
int tr_config_layer_is_moe(const tpx_model *model, const tr_config *c,
                           int64_t l);
/* The RoPE inverse frequencies inv[head_dim / 2] of the config's rope type. */
void tr_rope_inv_freq(const tr_config *c, double *inv);

/* ---- arena.c: the activations of one step live in one block ----
 * A bump allocator: the step takes what it needs in order and gives it all
 * back at the next step's start (tr_arena_reset), so the step itself never
 * calls malloc. The block is sized by the first step: what did not fit was
 * taken from the heap then, and the block is regrown once to the
 * high-water mark, its pages touched, at the end of that step. */
typedef struct tr_arena {
  char *base;   /* the block */
  size_t cap;   /* its size in bytes */
  size_t used;  /* bytes taken this step (those that spilled too) */
  size_t peak;  /* high-water mark of used over all steps */
  void **spill; /* blocks taken from the heap when the block was full */
  size_t nspill, spill_cap;
} tr_arena;
/* n floats, 64-byte aligned; zeroed when `zero` (for buffers the library
 * fills, which need not write every element), else as they were (for
 * the trainer's kernels, which do) */
float *tr_arena_floats(tr_arena *a, int64_t n, int zero, tpx_error *err);
/* Give back everything taken since the mark (a layer's backward
 * temporaries, once it is done). */
size_t tr_arena_mark(const tr_arena *a);
void tr_arena_pop(tr_arena *a, size_t mark);
/* Keep one buffer and give back the rest since the mark: the n floats at
 * src (the last thing taken) move down to the mark, and the new place is
 * returned (NULL and err set when out of memory). A collective's result
 * taking the place of its input, as torch frees a tensor whose last
 * reference is gone. */
float *tr_arena_lower(tr_arena *a, size_t mark, const float *src, int64_t n,
                      tpx_error *err);
/* A step's start or end: everything is given back; the block grows to
 * the high-water mark, every page touched, if the step spilled. */
tpx_status tr_arena_reset(tr_arena *a, tpx_error *err);
void tr_arena_free(tr_arena *a);

/* ---- activations: local [b, s, f] row-major f32 in the arena, plus the
 * logical (tp-wide) extents S and F of the dims tp may shard (sequence
 * under SP, features of colwise outputs); tr_act_alloc sets S = s,
 * F = f. ---- */
typedef struct tr_act {
  float *d;
  int64_t b, s, f;
  int64_t S, F;
  /* whether it is a DTensor (the styled module that produced it kept its
   * output one) and, on a module's transitioned input, how its source
   * arrived, which the input's gradient takes over for its backward
   * transition (tpx_tp_flow, runtime_tp.h) */
  tpx_tp_flow flow;
} tr_act;
int64_t tr_act_numel(const tr_act *a);
/* An activation [b, s, f] from the arena; zeroed when `zero`. */
tpx_status tr_act_alloc(tr_arena *ar, tr_act *a, int64_t b, int64_t s,
                        int64_t f, int zero, tpx_error *err);

/* ---- ops.c: dense math on local buffers ---- */
/* Takes the BLAS's threads over, once, before any rank starts: each rank
 * gets as many threads as OPENBLAS_NUM_THREADS says (one per rank when
 * ranks are threads on a machine of as many cores), as an OpenMP team of
 * its own, and OpenBLAS is set to one thread: tr_sgemm splits a large
 * product across the team. One pool per rank, where OpenBLAS's own
 * workers would spin through every element-wise loop between two products
 * on the cores those loops use. Nothing changes when built without
 * OpenMP. */
void tr_threads_init(void);
/* Threads for a loop over `work` elements: the rank's team, 1 for a small
 * loop. TR_PARALLEL_FOR(work) before a for loop runs its iterations on
 * them (OpenMP; nothing when built without it). */
int tr_threads(int64_t work);
/* cblas_sgemm (row-major), the rows or the columns of C split across
 * tr_threads(m·n·k): each element's sum runs in the same order whatever
 * the thread count. */
void tr_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float *a, int64_t lda, const float *b,
              int64_t ldb, float beta, float *c, int64_t ldc);
/* The same product on the calling thread alone (cblas_sgemm): for work
 * already split across the team, inside a parallel region (moe.c). */
void tr_sgemm1(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc);
#if defined(_OPENMP)
#define TR_PRAGMA(x) _Pragma(#x)
#define TR_PARALLEL_FOR(work)                                                  \
  TR_PRAGMA(omp parallel for schedule(static) num_threads(tr_threads(work)))
#else
#define TR_PARALLEL_FOR(work)
#endif
/* y[n,out] = x[n,in] W[out,in]^T (+ bias) */
void tr_linear_fwd(const float *x, const float *w, const float *bias, float *y,
                   int64_t n, int64_t in, int64_t out);
/* dx[n,in] (= or += per accumulate) dy W; dW += dy^T x; db += colsum dy */
void tr_linear_bwd(const float *x, const float *w, const float *dy, float *dx,
                   float *dw, float *db, int64_t n, int64_t in, int64_t out,
                   int accumulate_dx);
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
  /* context parallelism: tk keys (the whole sequence, 0: t) and the
   * global position of each of the t queries (NULL: 0..t-1) */
  int64_t tk;
  const int64_t *qpos;
} tr_attn_shape;
/* q [b,t,nh*hd], k/v [b,tk,nkv*hd] -> o [b,t,nh*hd]; p [b,nh,t,tk] saved */
void tr_attn_fwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, float *p, float *o);
/* dk / dv [b, tk, nkv*hd]; ds: scratch [b, nh, t, tk] */
void tr_attn_bwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, const float *p, const float *dout, float *dq,
                 float *dk, float *dv, float *ds);

/* ---- glue_*.c: where the model meets tpx (params, transitions, losses,
 * FSDP units, optimizer). One object per rank. ---- */
typedef struct tr_rank tr_rank;
typedef struct tr_net tr_net;
typedef struct tr_module tr_module; /* a module of the model (below) */
/* TP-local unsharded weight and its gradient (valid while its unit is
 * unsharded); NULL for an absent parameter (p < 0). */
float *tr_param_w(tr_rank *r, int64_t p);
float *tr_param_g(tr_rank *r, int64_t p);
/* TP-local dim d of parameter p (its global shape is the model's:
 * tr_module.rows / cols). */
int64_t tr_param_dim(tr_rank *r, int64_t p, int d);
/* Run the styled module's transition on x: when it moves data, x is
 * replaced by the result, taken from the arena (x's buffer is left as it
 * was); otherwise only x's DTensor metadata changes. */
tpx_status tr_transition(tr_rank *r, tr_arena *ar, int64_t module, int output,
                         int backward, tr_act *x, tpx_error *err);
/* Vocab-parallel embedding `e`: out [b, s, hidden] in the module's output
 * layout; backward accumulates into the embedding grad. */
tpx_status tr_embed_fwd(tr_rank *r, tr_arena *ar, const tr_module *e,
                        const int32_t *ids, int64_t b, int64_t t, tr_act *out,
                        tpx_error *err);
tpx_status tr_embed_bwd(tr_rank *r, const tr_module *e, const int32_t *ids,
                        int64_t b, int64_t t, tr_act *dout, tpx_error *err);
/* Mean CE of local-vocab logits [b, t, vl]; dlogits same shape, for a loss
 * that is the mean over the GLOBAL batch of this step (scale 1/ntok_global
 * handled by the glue). *loss: this rank's mean over its positions. */
tpx_status tr_cross_entropy(tr_rank *r, const tr_act *logits,
                            const int32_t *targets, double *loss,
                            tr_act *dlogits, tpx_error *err);
/* FSDP2's hooks around the forward (backward 0) or backward (1) of
 * `module`: a decoder layer (tr_layer.name, the module fully_shard
 * wraps) or the model itself (""), whose hooks open and close the pass.
 * Before it (pre) its unit is gathered; after it (post) its gradients
 * are reduced (backward) and the unit resharded (after a forward only
 * when its reshard_after_forward says so). */
tpx_status tr_hook_pre(tr_rank *r, const char *module, int backward,
                       tpx_error *err);
tpx_status tr_hook_post(tr_rank *r, const char *module, int backward,
                        tpx_error *err);
tpx_status tr_zero_grads(tr_rank *r, tpx_error *err);
/* After backward: total pre-clip grad norm, clip, AdamW step (1-based). */
tpx_status tr_optimizer_step(tr_rank *r, double clip, double lr, double wd,
                             int64_t step, double *grad_norm, tpx_error *err);
/* Context parallelism: how many ranks share each sequence (size), this
 * rank's place among them and how the sequence is cut (tpx/runtime_cp.h). */
typedef struct tr_cp {
  int64_t size, rank;
  tpx_cp_layout layout;
} tr_cp;
tr_cp tr_rank_cp(const tr_rank *r);
/* K or V of this rank's t positions [b, t, f] gathered over cp into the
 * whole sequence [b, t*cp, f] in position order; and the backward: the
 * gradient of the whole sequence summed over cp into this rank's
 * positions. */
tpx_status tr_cp_gather(tr_rank *r, const float *local, float *full, int64_t b,
                        int64_t t, int64_t f, tpx_error *err);
tpx_status tr_cp_reduce_scatter(tr_rank *r, const float *full, float *local,
                                int64_t b, int64_t t, int64_t f,
                                tpx_error *err);
/* Expert parallelism (glue_moe.c): the ep group's comm (NULL at ep 1,
 * and in tpx-train-ref), and the FSDP2 hooks of MoE layer l's experts
 * module where it is an FSDP unit of its own (experts sharded over
 * ep_shard; a no-op where the layer's unit holds them): before (post 0)
 * or after (post 1) their forward (backward 0) or backward (1). */
tpx_comm *tr_rank_ep_comm(tr_rank *r);
tpx_status tr_experts_hook(tr_rank *r, int64_t l, int backward, int post,
                           tpx_error *err);
/* Mean of v over the data-parallel and cp ranks (the step's loss: each
 * holds the mean over an equal share of the batch's tokens). */
tpx_status tr_dp_mean(tr_rank *r, double *v, tpx_error *err);

/* ---- model.c: the decoder over the glue ---- */
/* A module of the decoder: its index in the model's module tree (its TP
 * transitions are looked up by it) and its parameters' indices; -1 where
 * absent. */
struct tr_module {
  int64_t m; /* module */
  int64_t w; /* .weight */
  int64_t b; /* .bias (Qwen2's q/k/v_proj) */
  /* .weight's global shape, the sizes config.json gives it (params.c
   * refuses weights of another shape; cols 0: 1-D): a linear's output
   * features (the logical F of its output) are its rows, the
   * embedding's are its cols */
  int64_t rows, cols;
};

/* A SwiGLU MLP: down(silu(gate(x)) * up(x)). */
typedef struct tr_mlp {
  tr_module gate_proj, up_proj; /* w [inter, hidden] */
  tr_module down_proj;          /* w [hidden, inter] */
} tr_mlp;

/* The parameters of one decoder layer; global shapes (each rank holds the
 * TP-local piece its plan gives it). nh heads, nkv kv heads of hd. */
typedef struct tr_layer {
  char name[48]; /* "model.layers.N": the module FSDP2 wraps (tr_hook_*) */
  tr_module input_layernorm;          /* w [hidden] */
  tr_module q_proj;                   /* w [nh*hd, hidden], b [nh*hd] */
  tr_module k_proj, v_proj;           /* w [nkv*hd, hidden], b [nkv*hd] */
  tr_module q_norm, k_norm;           /* w [hd] (Qwen3) */
  tr_module o_proj;                   /* w [hidden, nh*hd] */
  tr_module post_attention_layernorm; /* w [hidden] */
  tr_mlp mlp;                         /* a dense layer's mlp */
  /* an MoE layer (moe 1; mlp absent): E routed experts of width I */
  int moe;
  tr_module router;  /* mlp.gate: w [E, hidden] */
  int64_t experts;   /* the module mlp.experts */
  int64_t gate_up;   /* Automodel's gate_and_up_projs [E, hidden, 2I]
                        (gate columns [0, I), up [I, 2I)), or with
                        hf_experts transformers' gate_up_proj
                        [E, 2I, hidden] (gate rows first) */
  int64_t down;      /* down_projs [E, I, hidden], or down_proj
                        [E, hidden, I] */
  int hf_experts;    /* the fused experts in transformers' layout */
  tr_mlp shared;     /* mlp.shared_experts (GLM-4-MoE); w -1: none */
  float *score_bias; /* [E] the router's e_score_correction_bias (a
                        buffer read from the checkpoint), or NULL */
} tr_layer;

/* The whole model's parameters. */
typedef struct tr_params {
  tr_module embed_tokens; /* w [vocab, hidden] */
  tr_layer *layers;       /* [num_hidden_layers] */
  tr_module norm;         /* w [hidden] */
  tr_module lm_head;      /* w [vocab, hidden] (tied: embed_tokens.w) */
} tr_params;

/* ---- params.c ---- */
/* Find every parameter of the decoder config.json describes in the model
 * (its tree: the plugin's skeleton and the checkpoint's tensors), and
 * refuse a checkpoint of another model: a tensor of another shape than
 * the config gives it, or one the config's model does not have (more
 * layers), as `tpx plan --weights` refuses them. */
tpx_status tr_params_find(const tpx_model *model, const tr_config *cfg,
                          tr_params *out, tpx_error *err);
void tr_params_free(tr_params *p, int64_t layers);

/* What an MLP's forward keeps for its backward. */
typedef struct tr_mlp_acts {
  tr_act gate_in, up_in; /* [b, t, hidden] */
  tr_act gate, up;       /* [b, t, inter] */
  tr_act down_in;        /* [b, t, inter] SwiGLU's output */
} tr_mlp_acts;

/* ---- moe.c: an MoE layer's routed experts (tpx/runtime_moe.h) ---- */
/* What their forward keeps for the backward: n tokens routed to k of E
 * experts, m rows on this rank's E / ep experts. */
typedef struct tr_moe_acts {
  int64_t n, m;
  float *probs;        /* [n, E] the router's scores */
  int32_t *choice;     /* [n, k] the chosen experts */
  float *weights;      /* [n, k] their weights */
  tpx_moe_dispatch *d; /* the dispatch, until the backward is done */
  float *h;            /* [m, 2I] gate | up outputs */
  float *act;          /* [m, I] silu(gate) * up */
  float *y;            /* [m, H] the experts' outputs */
} tr_moe_acts;
/* Layer l's routed experts on x [n, hidden] (post_attention_layernorm's
 * output, tp 1) -> y [n, hidden] (from the arena): router, dispatch over
 * the ep group, each local expert's SwiGLU, combine; net->acts[l].moe
 * keeps what the backward needs. `keep` 0: the dispatch is destroyed once
 * combined (a forward whose activations are dropped under activation
 * checkpointing; the recompute dispatches again). */
tpx_status tr_moe_fwd(tr_net *net, tr_rank *r, tr_arena *ar, int64_t l,
                      const tr_act *x, tr_act *y, int keep, tpx_error *err);
/* Its backward from dy [n, hidden]: the experts' and the router's
 * gradients accumulated, dx (set when dx->d is NULL, else added to) the
 * gradient of x; the dispatch destroyed. */
tpx_status tr_moe_bwd(tr_net *net, tr_rank *r, tr_arena *ar, int64_t l,
                      const tr_act *x, const tr_act *dy, tr_act *dx,
                      tpx_error *err);
/* Destroy a dispatch still held (a step that failed half way). */
void tr_moe_acts_release(tr_moe_acts *a);
/* Read every MoE layer's router bias buffer (e_score_correction_bias)
 * from the checkpoint: the same on every rank, not trained. */
tpx_status tr_moe_load_buffers(tr_net *net, const tpx_checkpoint_reader *rd,
                               tpx_error *err);

/* What one layer's forward keeps for its backward; TP-local shapes, t the
 * sequence each rank computes attention over, s the residual stream's
 * local sequence (t / tp under SP). Each linear's input is kept as the
 * module saw it, after its input transition (the same buffer as its
 * source when the transition moved nothing). */
typedef struct tr_layer_acts {
  tr_act ln1_in;           /* [b, s, hidden] input_layernorm's input */
  float *ln1_rstd;         /* [b*s] */
  tr_act q_in, k_in, v_in; /* [b, t, hidden] */
  tr_act q_raw, k_raw;     /* [b, t, nh*hd], [b, t, nkv*hd] before q/k_norm */
  float *q_rstd, *k_rstd;  /* [b*t*nh], [b*t*nkv] (Qwen3) */
  tr_act q, k, v;          /* after q/k_norm and RoPE */
  tr_attn_shape ash;
  float *att;         /* [b, nh, t, t] softmax probabilities */
  tr_act o_in;        /* [b, t, nh*hd] o_proj's input */
  tr_act ln2_in;      /* [b, s, hidden] */
  float *ln2_rstd;    /* [b*s] */
  tr_mlp_acts mlp;    /* the dense mlp's */
  tr_mlp_acts shared; /* an MoE layer's shared experts' */
  tr_moe_acts moe;    /* an MoE layer's routed experts' (moe.c) */
  /* under activation checkpointing (tr_net.ckpt), what stays between the
   * forward and the recompute: the layer's input (TR_CKPT_LAYER) or the
   * inputs of its attention and MLP blocks, the norms' outputs
   * (TR_CKPT_MODULES; the norms keep theirs as without) */
  tr_act in, attn_x, mlp_x;
} tr_layer_acts;

/* Activation checkpointing (--activation-checkpointing): which regions of
 * a decoder layer drop their activations after the forward and run their
 * forward again in backward (torch's checkpoint_wrapper, NO_REENTRANT;
 * docs/TRAIN.md "Activation checkpointing"). */
typedef enum tr_ckpt {
  TR_CKPT_NONE,
  TR_CKPT_LAYER,  /* the whole decoder layer (Automodel 0.7.0 on
                     transformers' decoder layers) */
  TR_CKPT_MODULES /* self_attn and mlp, each on its own (Automodel's
                     submodule wrapping) */
} tr_ckpt;

struct tr_net {
  tr_config cfg;
  tr_params params;
  /* sized by the first step (batch b, sequence seq), then fixed; t: the
   * positions this rank holds (seq / cp) */
  int64_t b, t, seq;
  tr_layer_acts *acts;        /* [layers] */
  int32_t *ids, *targets;     /* [b, t] */
  float *rope_cos, *rope_sin; /* [t, hd/2], at this rank's positions */
  /* context parallelism (tr_rank_cp): pos[t] the global position of each
   * local one; k_full / v_full [b, seq, kv width] the gathered K and V of
   * the layer being computed (one layer's, from the arena) */
  tr_cp cp;
  int64_t *pos;
  float *k_full, *v_full;
  tr_arena arena;
  tr_ckpt ckpt; /* set after tr_net_init, before the first step */
  tpx_moe_dispatcher dispatcher; /* MoE layers' (--moe-dispatcher), as ckpt */
};
tpx_status tr_net_init(tr_net *net, const tpx_model *model, tpx_error *err);
void tr_net_free(tr_net *net);
/* One forward + backward on tokens [b, t+1] (inputs :t, targets 1:); b and
 * t are those of the first call. Under cp the rank computes its positions
 * of the sequence (tr_rank_cp) and its share of the loss. */
tpx_status tr_net_step(tr_net *net, tr_rank *r, const int32_t *tokens,
                       int64_t b, int64_t t, double *loss, tpx_error *err);
/* Bytes of the activation arena (its high-water mark so far). */
int64_t tr_net_activation_bytes(const tr_net *net);

#endif /* TPX_TRAIN_H */
