/* tpx/runtime_tp.h — tensor-parallel runtime: the collectives torch's
 * parallel styles run around every styled module, executed on caller
 * activation buffers, plus vocab-parallel embedding, log-probs and
 * cross-entropy (docs/SEMANTICS.md "Transitions", "Vocab-parallel
 * embedding and loss").
 *
 * Stateless: every call takes the tpx_sharding (what the plan decided) and a
 * tpx_mesh_comm over the same mesh (which ranks talk). No runtime object.
 *
 * Activations. An activation's layout is one placement over the TP mesh dim
 * only; every other mesh dim is local (each data-parallel rank has its own
 * batch). Calls describe an activation by its *logical shape*: the shape
 * torch's DTensor would report over the tp group, i.e. the full extent of the
 * dims the tp placement shards (global sequence length, all out-features,
 * the whole vocab) and this data-parallel rank's extent of the others (local
 * batch). A rank's local piece of it is the box tpx_layout_local_slice gives
 * (torch.chunk: uneven sequence shards and empty trailing shards are fine).
 * Shard dims may be negative (normalised against ndim).
 *
 * Transitions. tpx_sharding_module_transitions lists, per styled module, each
 * input / output as (from layout, to layout, forward collective, backward
 * collective). tpx_tp_transition_run executes one of them:
 *  - forward: the activation arrives in `from` and leaves in `to`
 *    (all-gather, all-reduce, reduce-scatter, local chunk, all-to-all, or a
 *    copy when the collective is "none");
 *  - backward: the gradient w.r.t. the transition's output arrives and the
 *    gradient w.r.t. its input leaves, through the backward collective:
 *      none                 same layout, copied
 *      all-reduce           Partial   -> Replicate (colwise input grad: "f")
 *      reduce-scatter(dim=d) Partial  -> Shard(d)  (dual of an input gather)
 *      chunk(dim=d)         Replicate -> Shard(d)  (dual of an output gather)
 *      all-gather(dim=d)    Shard(d)  -> Replicate (dual of a reduce-scatter
 *                                                   or of a chunk)
 *      all-to-all(dim=a->b) Shard(a)  -> Shard(b)
 *    A "Partial" gradient is what a rank's local matmul backward produces
 *    when each rank holds part of the sum (e.g. dX of a colwise linear).
 *  - use_local_output has no effect here: buffers are always local pieces.
 *  - "mask + ..." (vocab-parallel embedding output): the transition runs the
 *    reduction only; the masked rows must already be zero, which
 *    tpx_tp_embedding_forward does.
 * At tp == 1 (no tp mesh dim, or size 1) torch registers no hooks: running a
 * styled module's transition copies.
 *
 * Buffers: `in` and `out` may be the same tensor (then a temporary is used
 * when the layouts differ); otherwise they must not overlap. Every data
 * type the collectives support works for transitions (f32, bf16, ...); the
 * loss functions take f32 or bf16 logits and compute in f32 / f64.
 *
 * Collective: a call that communicates is collective over the tp group of
 * the calling rank: every rank of the group calls it with the same module,
 * side, index, direction and logical shape. Every check runs before any
 * communication. Errors in what the group shares (module, logical shape,
 * dtype, ids / targets, which are replicated over tp) are found identically
 * on every rank; a rank whose own buffer has the wrong local shape fails
 * alone, and the other ranks then wait in the collective, as with any
 * collective misuse (no extra collective is spent agreeing on errors).
 *
 * Not here: parameters, FSDP, grad norm (tpx/runtime.h). */
#ifndef TPX_RUNTIME_TP_H
#define TPX_RUNTIME_TP_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/comm.h"
#include "tpx/error.h"
#include "tpx/placement.h"
#include "tpx/sharding.h"
#include "tpx/tensor.h"

TPX_BEGIN_DECLS

/* ---- activations on the tp mesh dim ------------------------------------ */

/* Index of the sharding's TP mesh dim, or -1 when the mesh has none. */
TPX_API int tpx_tp_mesh_dim(const tpx_sharding *sh);

/* local[ndim] = the local shape mesh rank `rank` holds of an activation of
 * logical `shape[ndim]` laid out as `layout` over the tp dim (Partial and
 * Replicate: the full shape). */
TPX_API tpx_status tpx_tp_local_shape(const tpx_sharding *sh, int64_t rank,
                                      tpx_placement layout,
                                      const int64_t *shape, int ndim,
                                      int64_t *local, tpx_error *err);

/* Move an activation of logical `shape[in->ndim]` from layout `from` to
 * `to` over the tp dim (tpx_redistribute with every other mesh dim local).
 * in / out shapes must be the local shapes of the two layouts; same dtype. */
TPX_API tpx_status tpx_tp_redistribute(const tpx_sharding *sh,
                                       tpx_mesh_comm *mc, const int64_t *shape,
                                       tpx_placement from, tpx_placement to,
                                       const tpx_tensor *in, tpx_tensor *out,
                                       tpx_error *err);

/* ---- module transitions ------------------------------------------------ */

/* ---- one resolved transition --------------------------------------------
 * The call pair to use: tpx_tp_transition_resolve answers, in one lookup,
 * everything about one direction of one input / output / keyword input of a
 * module (whether a hook runs at all, whether it is a copy, the layouts,
 * this rank's local shapes, whether the output leaves as a DTensor), and
 * tpx_tp_transition_run_resolved runs it. The sharding is fixed, so a
 * caller may resolve once per (module, side, index or kwarg, direction,
 * arrival, logical shape) and keep the struct for every step. The nine
 * calls below (layouts / shape / run, plain, _dt and kwarg_) are thin
 * wrappers over the same resolution, kept for compatibility. */

/* What an activation carries from one styled module to the next about
 * DTensors (plain data, zeroed = a plain tensor; see "inputs that arrive as
 * DTensors" below): whether it is a DTensor and in which layout (a styled
 * module kept its output one), and, on a module's transitioned input, how
 * the tensor it came from arrived (its backward returns the gradient in
 * that layout). A trainer keeps one with each activation and hands it to
 * tpx_tp_transition_resolve_flow, which says what the result carries
 * (tpx_tp_resolved.flow); the gradient of a module's input takes the flow
 * of that input as the forward left it. */
typedef struct tpx_tp_flow {
  int dtensor;                /* 1: a DTensor in `layout` */
  tpx_placement layout;       /* over the tp dim */
  int input_dtensor;          /* on a transitioned input: its source was a */
  tpx_placement input_layout; /* DTensor in input_layout */
} tpx_tp_flow;

/* One direction of one transition, resolved (plain data; fill with
 * tpx_tp_transition_resolve). Initialise with TPX_TP_RESOLVED_INIT: it
 * sets struct_size, which resolve checks (the size of the first version,
 * up to `out_local`, or more; fields are only ever appended, and written
 * only when struct_size covers them). */
typedef struct tpx_tp_resolved {
  size_t struct_size;
  /* What was asked. */
  int64_t module;           /* module index */
  tpx_transition_side side; /* INPUT or OUTPUT (INPUT for a kwarg) */
  int index;                /* input / output index (0 for a kwarg) */
  const char *kwarg;        /* the keyword input, NULL for a positional one
                               (borrowed from the caller's argument) */
  int backward;             /* 0 forward (activation), 1 backward (grad) */
  int arrived_set;          /* 1: `arrived` was given (a DTensor input) */
  tpx_placement arrived;    /* that layout as given (Replicate when unset) */
  /* The answer. */
  int present;       /* 1: torch registers a hook here (styled module whose
                        style has this input / output / kwarg, tp > 1);
                        0: nothing runs (no style, the style has no such
                        input / output / kwarg, or tp == 1): the activation
                        passes through; run_resolved then copies */
  int is_copy;       /* 1: no collective runs (same layout in and out; always
                        1 when !present) */
  int keeps_dtensor; /* 1: a forward output that leaves as a DTensor (the
                        style's use_local_output is 0, present): the next
                        styled module's input sees it in out_layout (its
                        `arrived`); as tpx_tp_output_keeps_dtensor. 0 for
                        inputs, kwargs and plain outputs */
  tpx_placement in_layout;  /* layout over tp of the buffer the run reads
                               (the forward activation or backward grad);
                               when !present: `arrived`, or Replicate */
  tpx_placement out_layout; /* layout of the buffer it writes */
  int ndim;                 /* the activation's ndim */
  int64_t shape[TPX_MAX_TENSOR_DIMS];     /* [ndim] logical shape */
  int64_t rank;                           /* mesh rank of the local shapes */
  int64_t in_local[TPX_MAX_TENSOR_DIMS];  /* [ndim] local shape of the input
                                             buffer on `rank` */
  int64_t out_local[TPX_MAX_TENSOR_DIMS]; /* [ndim] local shape of the output
                                             buffer on `rank` */
  /* Appended (tpx_tp_transition_resolve_flow): the DTensor state the run's
   * result carries on to the next module (tpx_tp_flow below). Written only
   * when struct_size covers it. */
  tpx_tp_flow flow;
} tpx_tp_resolved;

#define TPX_TP_RESOLVED_REPLICATE_                                             \
  { TPX_REPLICATE, 0, TPX_REDUCE_SUM, 1 }
#define TPX_TP_RESOLVED_INIT                                                   \
  {                                                                            \
    sizeof(tpx_tp_resolved), 0, TPX_TRANSITION_INPUT, 0, NULL, 0, 0,           \
        TPX_TP_RESOLVED_REPLICATE_, 0, 1, 0, TPX_TP_RESOLVED_REPLICATE_,       \
        TPX_TP_RESOLVED_REPLICATE_, 0, {0}, 0, {0}, {0}, {                     \
      0, TPX_TP_RESOLVED_REPLICATE_, 0, TPX_TP_RESOLVED_REPLICATE_             \
    }                                                                          \
  }

/* Resolve one direction (`backward`) of input / output `index` of module
 * `module` (or, when `kwarg` is not NULL, of its prepare_module_input
 * keyword input `kwarg`: side must then be INPUT; index is ignored) for an
 * activation of logical `shape[ndim]` on mesh rank `rank`, into *out.
 * `arrived`: the layout of a DTensor input (see "inputs that arrive as
 * DTensors" below), NULL to state a plain tensor (as the _dt calls: no
 * ambiguity check); outputs take NULL only. A module without a style, a
 * style without such an input / output / kwarg, and tp == 1 are not errors:
 * out->present = 0. Errors: NULL sh / out, struct_size too small, ndim
 * outside 0..TPX_MAX_TENSOR_DIMS, shape NULL with ndim > 0, side neither
 * input nor output, a kwarg with side OUTPUT (TPX_INVALID_ARGUMENT), module
 * or rank out of range (TPX_OUT_OF_RANGE), `arrived` on an output
 * (TPX_INVALID_ARGUMENT), a shard dim outside ndim. Local only: no
 * collective. */
TPX_API tpx_status tpx_tp_transition_resolve(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side, int index,
    const char *kwarg, int backward, const tpx_placement *arrived, int64_t rank,
    const int64_t *shape, int ndim, tpx_tp_resolved *out, tpx_error *err);

/* Run a resolved transition on this rank's buffers: in->shape must be
 * r->in_local, out->shape r->out_local, out->dtype == in->dtype, and this
 * rank (of mc's world) must be r->rank (else TPX_INVALID_ARGUMENT naming
 * the module). Not present or a copy: copies in to out (nothing to do
 * when they are the same tensor; the caller may skip the call). Otherwise
 * collective over the tp group as tpx_tp_transition_run. `in` and `out` may
 * be the same tensor. */
TPX_API tpx_status tpx_tp_transition_run_resolved(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_resolved *r,
    const tpx_tensor *in, tpx_tensor *out, tpx_error *err);

/* tpx_tp_transition_resolve for an activation that carries `flow` (NULL:
 * a zeroed one, a plain tensor): the DTensor arrival is taken from it (a
 * forward input: flow->dtensor / layout; an input's backward:
 * flow->input_dtensor / input_layout, as that input's forward left them;
 * outputs: none), and out->flow says what the result carries:
 *  - a forward input that runs (present): input_* = how this one arrived,
 *    and a plain tensor (dtensor 0) to the module;
 *  - a forward output that runs: a DTensor in out_layout when
 *    keeps_dtensor, else a plain tensor (input_* as given);
 *  - backward, and anything not present: `flow` unchanged.
 * out->struct_size must cover `flow` (TPX_TP_RESOLVED_INIT of this
 * version). Errors as tpx_tp_transition_resolve. Local only. */
TPX_API tpx_status tpx_tp_transition_resolve_flow(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side, int index,
    int backward, const tpx_tp_flow *flow, int64_t rank, const int64_t *shape,
    int ndim, tpx_tp_resolved *out, tpx_error *err);

/* ---- module transitions: the calls before the resolved pair ------------ */

/* The transition of input / output `index` of styled module `module`
 * (borrowed, valid while sh lives). TPX_NOT_FOUND naming the module when
 * no style applies to it, or when its style has no such input / output
 * (listing what it has). At tp == 1 a styled module has no transitions:
 * *out = NULL and TPX_OK. */
TPX_API tpx_status tpx_tp_transition_get(const tpx_sharding *sh, int64_t module,
                                         tpx_transition_side side, int index,
                                         const tpx_transition **out,
                                         tpx_error *err);

/* The layouts of the buffers a transition reads (*in_layout) and writes
 * (*out_layout) in the given direction (see the table above), and whether
 * it is a plain copy (*is_copy; may be NULL). */
TPX_API tpx_status tpx_tp_transition_layouts(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side, int index,
    int backward, tpx_placement *in_layout, tpx_placement *out_layout,
    int *is_copy, tpx_error *err);

/* Local shapes of the input buffer (in_local, may be NULL) and output
 * buffer (out_local) mesh rank `rank` passes to tpx_tp_transition_run for
 * an activation of logical `shape[ndim]`, so the caller can allocate. */
TPX_API tpx_status tpx_tp_transition_shape(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side, int index,
    int backward, int64_t rank, const int64_t *shape, int ndim,
    int64_t *in_local, int64_t *out_local, tpx_error *err);

/* Run the transition (forward: activation; backward: its gradient) on this
 * rank's buffers. `shape[in->ndim]` is the logical shape; in->shape and
 * out->shape must be the local shapes tpx_tp_transition_shape gives for
 * this rank (else TPX_INVALID_ARGUMENT naming the module and both shapes);
 * out->dtype must equal in->dtype.
 *
 * Plain calls and DTensor arrivals. These three calls (run, shape,
 * layouts) describe an input that arrives as a plain tensor. When some
 * styled module of the sharding hands a DTensor on (an output whose style
 * has use_local_output = 0, e.g. an SP norm or a colwise lm_head, or a
 * prepare_module_input input without use_local_output) and an input
 * arriving as such a DTensor would run differently, which one arrives is
 * known only to the caller's graph: the plain call then refuses with
 * TPX_INVALID_ARGUMENT before communicating, naming the module, the hook
 * and the _dt call. Call the _dt variant with `arrived` = the layout the
 * producer left, or NULL to state that the input is a plain tensor.
 * Outputs and tp == 1 are never ambiguous. */
TPX_API tpx_status tpx_tp_transition_run(const tpx_sharding *sh,
                                         tpx_mesh_comm *mc, int64_t module,
                                         tpx_transition_side side, int index,
                                         int backward, const int64_t *shape,
                                         const tpx_tensor *in, tpx_tensor *out,
                                         tpx_error *err);

/* ---- inputs that arrive as DTensors ------------------------------------
 * torch's input hooks wrap a *plain* tensor with from_local(input_layouts);
 * the calls above model that (the static description). When the producing
 * styled module kept its output a DTensor (use_local_output = 0, see
 * tpx_tp_output_keeps_dtensor), the hook instead redistributes the DTensor's
 * actual layout `arrived` to the desired one, and in backward DTensor
 * redistributes the gradient the module produces back to `arrived` (a
 * Partial gradient stays Partial when arrived == desired: no node). Example,
 * Llama with sequence parallelism: input_layernorm (spag) outputs a
 * Replicate DTensor; q_proj (colwise, input Replicate) then runs nothing
 * forward and, backward, passes its Partial input grad on unreduced
 * (the static description would all-reduce it: right for a plain input, a
 * tp-fold error here, which is why tpx_tp_transition_run refuses the case);
 * the spag output's backward reduce-scatters it. And a colwise input
 * arriving as a Shard(1) DTensor (an SP norm before it) is all-gathered
 * forward, reduce-scattered backward.
 * These take `arrived` (NULL: a plain tensor, the calls above without
 * their ambiguity check) and apply to INPUT transitions only
 * (TPX_INVALID_ARGUMENT for outputs with a non-NULL arrived). Backward:
 * the gradient enters in the layout the static backward reads (Partial for
 * a colwise matmul input, the desired layout otherwise) and leaves in
 * `arrived` (Partial when arrived == desired and the gradient is
 * Partial). `ndim` (layouts_dt) is the activation's ndim,
 * to compare shard dims given as negative and non-negative.
 * prepare_module_input follows torch: an input whose annotated and desired
 * layouts are equal is not redistributed, so a DTensor keeps the layout it
 * arrived in (forward and backward are copies in `arrived`). */
TPX_API tpx_status tpx_tp_transition_layouts_dt(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side, int index,
    int backward, const tpx_placement *arrived, int ndim,
    tpx_placement *in_layout, tpx_placement *out_layout, int *is_copy,
    tpx_error *err);
TPX_API tpx_status tpx_tp_transition_shape_dt(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side, int index,
    int backward, const tpx_placement *arrived, int64_t rank,
    const int64_t *shape, int ndim, int64_t *in_local, int64_t *out_local,
    tpx_error *err);
TPX_API tpx_status tpx_tp_transition_run_dt(
    const tpx_sharding *sh, tpx_mesh_comm *mc, int64_t module,
    tpx_transition_side side, int index, int backward,
    const tpx_placement *arrived, const int64_t *shape, const tpx_tensor *in,
    tpx_tensor *out, tpx_error *err);

/* 1 when output `index` of styled module `module` leaves as a DTensor
 * (the style's use_local_output is 0 and tp > 1), so the next styled
 * module's input hook sees it in its `to` layout (pass that as `arrived`);
 * 0 when it leaves as a plain local tensor, or on bad arguments. */
TPX_API int tpx_tp_output_keeps_dtensor(const tpx_sharding *sh, int64_t module,
                                        int index);

/* ---- keyword inputs of prepare_module_input -----------------------------
 * A prepare_module_input style with input_kwarg_layouts /
 * desired_input_kwarg_layouts transforms keyword inputs by name, as torch's
 * with_kwargs pre-hook does: a plain tensor is wrapped in its
 * input_kwarg_layouts layout and redistributed to its
 * desired_input_kwarg_layouts layout when that is given and differs (the
 * same rules and backward duals as a positional input, use_local_output
 * included). A kwarg listed with layout None, or with no desired layout,
 * passes through (a copy). These calls take the keyword `kwarg` instead of
 * an index, and `arrived` like the _dt calls (NULL states a plain tensor; a
 * DTensor is redistributed from `arrived`, or kept as it arrived when its
 * annotated and desired layouts are equal). TPX_NOT_FOUND naming the module
 * when no style applies to it, when its style is not prepare_module_input,
 * or when the style lists no layout for `kwarg` (torch then passes the
 * kwarg through untouched; the message lists the kwargs it has). At
 * tp == 1 torch registers no hooks: a copy. Errors and collectives as for
 * tpx_tp_transition_run. */
TPX_API tpx_status tpx_tp_kwarg_transition_layouts(
    const tpx_sharding *sh, int64_t module, const char *kwarg, int backward,
    const tpx_placement *arrived, int ndim, tpx_placement *in_layout,
    tpx_placement *out_layout, int *is_copy, tpx_error *err);
TPX_API tpx_status tpx_tp_kwarg_transition_shape(
    const tpx_sharding *sh, int64_t module, const char *kwarg, int backward,
    const tpx_placement *arrived, int64_t rank, const int64_t *shape, int ndim,
    int64_t *in_local, int64_t *out_local, tpx_error *err);
TPX_API tpx_status tpx_tp_kwarg_transition_run(
    const tpx_sharding *sh, tpx_mesh_comm *mc, int64_t module,
    const char *kwarg, int backward, const tpx_placement *arrived,
    const int64_t *shape, const tpx_tensor *in, tpx_tensor *out,
    tpx_error *err);

/* ---- embeddings (vocab-parallel and others) ----------------------------- */

/* Forward of embedding module `module` (its parameter "weight", global
 * [V, H]) with the style the sharding applied, output transition included:
 *  - weight Shard(0) over tp (rowwise / vocab_parallel_embedding / gemma4):
 *    ids outside this rank's row range (torch.chunk of V, from the layout)
 *    are masked, the rest looked up at id - offset, masked rows zeroed
 *    (a Partial sum), then the output transition: all-reduce to Replicate,
 *    or reduce-scatter to Shard(1) under sequence parallelism;
 *  - weight Shard(1) (colwise): local lookup (Shard(-1)), then its output
 *    transition;
 *  - weight replicated (tp == 1, or a prepare_module_output style): plain
 *    lookup, then the output transition if the module has one.
 * ids: Replicate over tp, int32 or int64, logical = local shape [..] (e.g.
 * [B, T]); every id in [0, V) else TPX_OUT_OF_RANGE naming the position.
 * weight: this rank's TP-local weight (unsharded over data-parallel dims),
 * the shape tpx_sharding_local_slice gives on the tp dim; f32 or bf16.
 * out: logical shape [.., H] in the output transition's `to` layout (local
 * shape from tpx_tp_embedding_shape), dtype of weight. */
TPX_API tpx_status tpx_tp_embedding_forward(const tpx_sharding *sh,
                                            tpx_mesh_comm *mc, int64_t module,
                                            const tpx_tensor *ids,
                                            const tpx_tensor *weight,
                                            tpx_tensor *out, tpx_error *err);

/* Local shape (ids->ndim + 1 dims) of tpx_tp_embedding_forward's output and
 * of tpx_tp_embedding_backward's grad_out on mesh rank `rank`, and the
 * TP-local weight shape (weight_local[2], may be NULL). */
TPX_API tpx_status tpx_tp_embedding_shape(const tpx_sharding *sh,
                                          int64_t module, int64_t rank,
                                          const int64_t *ids_shape,
                                          int ids_ndim, int64_t *out_local,
                                          int64_t *weight_local,
                                          tpx_error *err);

/* Backward: grad_out (same layout and shape as forward's out) goes through
 * the dual of the output transition (e.g. all-gather on the sequence under
 * SP), then is scatter-added into weight_grad (TP-local weight shape, f32 or
 * bf16; ACCUMULATES: weight_grad += ...) at the rows of this rank's ids;
 * masked ids add nothing. Collective like forward. */
TPX_API tpx_status tpx_tp_embedding_backward(const tpx_sharding *sh,
                                             tpx_mesh_comm *mc, int64_t module,
                                             const tpx_tensor *ids,
                                             const tpx_tensor *grad_out,
                                             tpx_tensor *weight_grad,
                                             tpx_error *err);

/* ---- vocab-parallel log-probs and cross-entropy ------------------------- */

typedef struct tpx_tp_loss_options {
  size_t struct_size;
  int64_t vocab;        /* global vocab size V (required, > 0) */
  int vocab_parallel;   /* 1: logits are Shard(-1) over tp (colwise lm_head,
                           output_layouts shard(-1)); 0: every tp rank holds
                           all V logits and no collective runs */
  int64_t ignore_index; /* targets equal to it are skipped: log-prob 0,
                           no loss, no count, zero grad (torch: -100) */
} tpx_tp_loss_options;

#define TPX_TP_LOSS_OPTIONS_INIT                                               \
  { sizeof(tpx_tp_loss_options), 0, 1, -100 }

/* This rank's vocab range [*offset, *offset + *len) of V over the tp dim
 * (torch.chunk, from the layout, as DTensor's Shard(-1) logits really are;
 * all of V when not vocab-parallel). Deliberately not the upstream
 * training utility's [rank * (V // tp), (rank + 1) * (V // tp)), which
 * differs whenever tp does not divide V (V 10, tp 4: 3, 3, 3, 1 columns
 * here; those ranges would put ids 8 and 9 on no rank; docs/RUNTIME.md
 * "Vocab ranges"). */
TPX_API tpx_status tpx_tp_vocab_range(const tpx_sharding *sh, int64_t rank,
                                      const tpx_tp_loss_options *opts,
                                      int64_t *offset, int64_t *len,
                                      tpx_error *err);

/* logprobs[i] = log softmax(logits[i, :])[targets[i]] over the whole vocab
 * (docs/SEMANTICS.md "Vocab-parallel embedding and loss"): row max all-reduced
 * (max) over tp, sum of exp(logit - max) all-reduced (sum), the target's
 * logit taken on the rank whose range holds it (others 0) and all-reduced.
 * logits: local [.., V_local] (V_local = the tpx_tp_vocab_range length), f32
 * or bf16. targets: [..] (logits' shape without the last dim), int32 or
 * int64, replicated over tp, each in [0, V) or ignore_index. logprobs: [..]
 * f32, the same on every tp rank. Collective over tp (2 all-reduces).
 * Targets are explicit per position: the upstream training utility takes
 * the unshifted input ids, rolls them by -1 and drops the last position,
 * i.e. it equals this call on logits[:, :-1] with targets input_ids[:, 1:]. */
TPX_API tpx_status tpx_tp_logprobs(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                   const tpx_tp_loss_options *opts,
                                   const tpx_tensor *logits,
                                   const tpx_tensor *targets,
                                   tpx_tensor *logprobs, tpx_error *err);

/* Backward of tpx_tp_logprobs: grad_logits[i, j] = grad_logprobs[i] *
 * (onehot(targets[i])[j] - softmax(logits[i])[j]) on this rank's vocab
 * range (j local). grad_logprobs: [..] f32; grad_logits: logits' shape, f32
 * or bf16 (overwritten, not accumulated). Recomputes max and sum-exp
 * (2 all-reduces over tp). */
TPX_API tpx_status tpx_tp_logprobs_backward(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_loss_options *opts,
    const tpx_tensor *logits, const tpx_tensor *targets,
    const tpx_tensor *grad_logprobs, tpx_tensor *grad_logits, tpx_error *err);

/* Cross-entropy as sums, for callers that average over more than this
 * rank's positions (e.g. positions split over data-parallel ranks:
 * all-reduce loss_sum and count over dp, divide): *loss_sum = sum over the
 * positions whose target is not ignore_index of -logprob (f64), *count =
 * their number (identical on every tp rank). When grad_logits is not NULL
 * it receives grad_scale * d(loss_sum)/d(logits) = grad_scale * (softmax -
 * onehot) on counted rows, 0 on ignored rows (overwritten; shape and dtype
 * rules of tpx_tp_logprobs_backward); grad_logits may be the logits
 * themselves (same data, shape and dtype: the gradient is written over
 * them, each row read before it is written). loss_sum / count may be
 * NULL. One pass over the logits for the statistics, one for the
 * gradient; 2 all-reduces over tp. */
TPX_API tpx_status tpx_tp_cross_entropy(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_loss_options *opts,
    const tpx_tensor *logits, const tpx_tensor *targets, double grad_scale,
    tpx_tensor *grad_logits, double *loss_sum, int64_t *count, tpx_error *err);

/* Mean cross-entropy over this rank's counted positions (torch
 * F.cross_entropy(reduction="mean") on the gathered logits) and, when
 * grad_logits is not NULL, d loss / d logits. No counted position: loss 0,
 * zero grad. */
TPX_API tpx_status tpx_tp_cross_entropy_mean(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_loss_options *opts,
    const tpx_tensor *logits, const tpx_tensor *targets,
    tpx_tensor *grad_logits, double *loss, tpx_error *err);

/* ---- parameters replicated over tp ------------------------------------- */

/* 1 when parameter `param` is Replicate over a tp dim of size > 1 but each
 * tp rank computes only a partial gradient, which must be all-reduced (sum)
 * over tp:
 *  - params of modules styled sequence_parallel (norms under SP),
 *    sequence_parallel_allgather_activation and qk_norm_sequence_parallel
 *    (sequence-sharded activations; DTensor all-reduces these);
 *  - the weight of an unstyled per-head norm `<x>_norm` whose sibling
 *    `<x>_proj` is colwise with its output sharded on the last dim (Qwen3's
 *    self_attn.q_norm / k_norm: each rank normalises only its heads),
 *    unstyled in the Automodel snapshot of tpx's golden plans (the sharding
 *    warns `partial-grad-replicated`); NeMo Automodel 0.7.0 styles them
 *    replicated_with_grad_allreduce and sums them over tp, as this does;
 *  - params of modules styled replicated_with_grad_allreduce.
 * 0 otherwise (also for bad arguments). A tied alias follows its target. */
TPX_API int tpx_tp_param_grad_needs_allreduce(const tpx_sharding *sh,
                                              int64_t param);

/* When tpx_tp_param_grad_needs_allreduce(sh, param): all-reduce (sum) the
 * TP-local gradient in place over the tp group (collective over tp).
 * Otherwise TPX_OK without communicating. grad: any shape, a reducible
 * dtype. */
TPX_API tpx_status tpx_tp_param_grad_allreduce(const tpx_sharding *sh,
                                               tpx_mesh_comm *mc, int64_t param,
                                               tpx_tensor *grad,
                                               tpx_error *err);

TPX_END_DECLS

#endif /* TPX_RUNTIME_TP_H */
