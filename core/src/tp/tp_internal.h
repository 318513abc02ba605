/* tp/tp_internal.h — helpers shared by the tp_*.c files of the tp
 * area (tpx/runtime_tp.h): the tp mesh dim, activation placements over the
 * mesh, argument checks. Not for other areas. */
#ifndef TPX_TP_TP_INTERNAL_H
#define TPX_TP_TP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/try.h"
#include "tpx/runtime_tp.h"

/* ---- tp_common.c ---- */

/* Size of the tp dim (1 when absent). */
int64_t tpx__tp_size(const tpx_sharding *sh);

/* pl[mesh ndim]: `tp_layout` on the tp dim, Replicate elsewhere (an
 * activation: every other mesh dim holds its own local data). */
void tpx__tp_activation_placements(const tpx_sharding *sh,
                                   tpx_placement tp_layout, tpx_placement *pl);

/* The mesh of mc must be the sharding's (same dims and sizes). `what`
 * names the call. */
tpx_status tpx__tp_check_comm(const tpx_sharding *sh, tpx_mesh_comm *mc,
                              const char *what, tpx_error *err);

/* This rank's index in mc's world (its mesh rank). */
int64_t tpx__tp_my_rank(tpx_mesh_comm *mc);

/* The tp group communicator of mc, or NULL when the mesh has no tp dim. */
tpx_comm *tpx__tp_comm(const tpx_sharding *sh, tpx_mesh_comm *mc);

/* Tensor t has exactly `shape[ndim]`; else TPX_INVALID_ARGUMENT naming
 * `what`, `ctx` and both shapes. */
tpx_status tpx__tp_check_shape(const tpx_tensor *t, const int64_t *shape,
                               int ndim, const char *what, const char *ctx,
                               tpx_error *err);

/* The argument checks the *_transition_shape calls share (`what` names
 * the call): sh and out_local set, shape set unless ndim is 0, ndim in
 * 0..TPX_MAX_TENSOR_DIMS. */
tpx_status tpx__tp_check_shape_args(const char *what, const tpx_sharding *sh,
                                    const int64_t *out_local,
                                    const int64_t *shape, int ndim,
                                    tpx_error *err);

/* Module `module` is in range (else TPX_OUT_OF_RANGE); then, for
 * tpx__tp_module_styled, its plan entry (>= 0, else TPX_NOT_FOUND: no
 * parallel style) and its name for messages. `what` prefixes messages. */
tpx_status tpx__tp_module_in_range(const char *what, const tpx_sharding *sh,
                                   int64_t module, tpx_error *err);
tpx_status tpx__tp_module_styled(const char *what, const tpx_sharding *sh,
                                 int64_t module, const char **name,
                                 int64_t *entry, tpx_error *err);

/* FQN of a module for messages ("(root)" for ""). */
const char *tpx__tp_module_name(const tpx_sharding *sh, int64_t module);
/* "input" / "output". */
const char *tpx__tp_side_name(tpx_transition_side side);

/* ---- tp_resolve.c: one direction of a transition `tr` of `module`
 * (from tpx_tp_transition_get; NULL at tp == 1): the layouts its input and
 * output buffers have, and whether it is a copy. _dt: for an input that
 * arrives as a DTensor in *arrived (non-NULL), shard dims against ndim. */
tpx_status tpx__tp_resolve_tr(const tpx_sharding *sh, int64_t module,
                              const tpx_transition *tr, int backward,
                              tpx_placement *in, tpx_placement *out, int *copy,
                              tpx_error *err);
tpx_status tpx__tp_resolve_dt_tr(const tpx_sharding *sh, int64_t module,
                                 const tpx_transition *tr, int backward,
                                 const tpx_placement *arrived, int ndim,
                                 tpx_placement *in, tpx_placement *out,
                                 int *copy, tpx_error *err);

/* Input / output `index` of `module`, one direction: the layouts and copy
 * flag as above, for an input arriving as a DTensor in `arrived` (NULL: a
 * plain tensor). Shard dims are compared normalised to ndim. */
tpx_status tpx__tp_resolve(const tpx_sharding *sh, int64_t module,
                           tpx_transition_side side, int index, int backward,
                           const tpx_placement *arrived, int ndim,
                           tpx_placement *in, tpx_placement *out, int *copy,
                           tpx_error *err);

/* 1 when `tr` is a prepare_module_input input whose annotated and desired
 * layouts are equal: torch then keeps a DTensor input as it arrived. */
int tpx__tp_prepare_keeps_arrival(const tpx_sharding *sh, int64_t module,
                                  const tpx_transition *tr, int ndim);

/* ---- tp_transition.c ---- */
/* Move this rank's piece of an activation of logical `shape` from layout
 * `from` to `to` over tp (a copy when `copy`), checking dtypes and both
 * local shapes first; messages start with `ctx`. in == out is fine. */
tpx_status tpx__tp_move(const tpx_sharding *sh, tpx_mesh_comm *mc,
                        const int64_t *shape, tpx_placement from,
                        tpx_placement to, int copy, const tpx_tensor *in,
                        tpx_tensor *out, const char *ctx, tpx_error *err);

/* Local shape on mesh rank `rank` of an activation of logical shape[ndim]
 * in `layout` over tp (no argument checks). */
tpx_status tpx__tp_local_shape(const tpx_sharding *sh, int64_t rank,
                               tpx_placement layout, const int64_t *shape,
                               int ndim, int64_t *local, tpx_error *err);

/* ---- tp_kwarg.c ---- */
/* Keyword input `kwarg` of `module`, one direction: layouts and copy flag
 * as tpx__tp_resolve (TPX_NOT_FOUND when the module has no style, its
 * style is not prepare_module_input or lists no layout for kwarg). */
tpx_status tpx__tp_kwarg_resolve(const tpx_sharding *sh, int64_t module,
                                 const char *kwarg, int backward,
                                 const tpx_placement *arrived, int ndim,
                                 tpx_placement *in, tpx_placement *out,
                                 int *copy, tpx_error *err);

/* ---- tp_resolved.c ---- */
/* Fill r's question (module, side, index, kwarg, backward, arrived, ndim)
 * and answer (present, is_copy, keeps_dtensor, layouts); not the shapes.
 * strict: a missing style / input / output / kwarg is the old calls'
 * TPX_NOT_FOUND instead of present = 0. */
tpx_status tpx__tp_resolve_into(const tpx_sharding *sh, int64_t module,
                                tpx_transition_side side, int index,
                                const char *kwarg, int backward,
                                const tpx_placement *arrived, int ndim,
                                int strict, tpx_tp_resolved *r, tpx_error *err);

/* Move in -> out as r says, for logical `shape` (checked); messages name
 * r's module and input / output / kwarg. */
tpx_status tpx__tp_run(const tpx_sharding *sh, tpx_mesh_comm *mc,
                       const tpx_tp_resolved *r, const int64_t *shape,
                       const tpx_tensor *in, tpx_tensor *out, tpx_error *err);

/* ---- tp_arrival.c ---- */
/* TPX_OK when the plain (static) description of input `index` of `module`
 * is what torch runs whatever arrives; TPX_INVALID_ARGUMENT naming the
 * module, a hook that hands DTensors on and the _dt call when an input
 * arriving as such a DTensor would run differently (ndim 0: any ndim).
 * Outputs, tp == 1 and bad arguments: TPX_OK (the caller reports those).
 * `call` names the public call. */
tpx_status tpx__tp_check_plain(const tpx_sharding *sh, int64_t module,
                               tpx_transition_side side, int index, int ndim,
                               const char *call, tpx_error *err);

#endif /* TPX_TP_TP_INTERNAL_H */
