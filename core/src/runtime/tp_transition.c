/* tp_transition.c — executing a styled module's input / output transitions
 * (tpx/runtime_tp.h) on caller activation buffers, forward and backward.
 *
 * The description is tpx_sharding_module_transitions (shard/transitions.c):
 * forward runs its from -> to; backward maps its backward collective name
 * to the pair of gradient layouts and runs that. The data movement is
 * tpx_redistribute with Replicate on every mesh dim but tp. Also the shared
 * helpers of tp_internal.h.
 *
 * Not here: what the styles are (plan, shard areas), the collectives
 * (comm area), the embedding and loss math (tp_embedding.c, tp_loss.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "runtime/tp_internal.h"
#include "shard/sharding_impl.h"
#include "tpx/redistribute.h"

/* ---- shared helpers ----------------------------------------------------- */

int tpx_tp_mesh_dim(const tpx_sharding *sh) { return sh ? sh->tp_dim : -1; }

int64_t tpx__tp_size(const tpx_sharding *sh) {
  return sh->tp_dim < 0 ? 1 : sh->tp;
}

void tpx__tp_activation_placements(const tpx_sharding *sh,
                                   tpx_placement tp_layout,
                                   tpx_placement *pl) {
  for (int m = 0; m < sh->ndim; m++) pl[m] = tpx_placement_replicate();
  if (sh->tp_dim >= 0) pl[sh->tp_dim] = tp_layout;
}

tpx_status tpx__tp_check_comm(const tpx_sharding *sh, tpx_mesh_comm *mc,
                              const char *what, tpx_error *err) {
  if (!sh || !mc)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", what,
                         !sh ? "sharding" : "mesh comm");
  const tpx_mesh *a = sh->mesh, *b = tpx_mesh_comm_mesh(mc);
  int same = b && tpx_mesh_ndim(a) == tpx_mesh_ndim(b);
  for (int m = 0; same && m < tpx_mesh_ndim(a); m++)
    same = tpx_mesh_dim_size(a, m) == tpx_mesh_dim_size(b, m) &&
           strcmp(tpx_mesh_dim_name(a, m), tpx_mesh_dim_name(b, m)) == 0;
  if (!same)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: the mesh comm's mesh differs from the "
                         "sharding's mesh (dims, names or sizes)",
                         what);
  return TPX_OK;
}

int64_t tpx__tp_my_rank(tpx_mesh_comm *mc) {
  return tpx_comm_rank(tpx_mesh_comm_world(mc));
}

tpx_comm *tpx__tp_comm(const tpx_sharding *sh, tpx_mesh_comm *mc) {
  return sh->tp_dim < 0 ? NULL : tpx_mesh_comm_dim(mc, sh->tp_dim);
}

static void fmt_shape(const int64_t *s, int n, char *buf, size_t size) {
  size_t k = 0;
  buf[0] = '\0';
  k += (size_t)snprintf(buf + k, size - k, "[");
  for (int i = 0; i < n && k < size; i++)
    k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
                          (long long)s[i]);
  if (k < size) snprintf(buf + k, size - k, "]");
}

tpx_status tpx__tp_check_shape(const tpx_tensor *t, const int64_t *shape,
                               int ndim, const char *what, const char *ctx,
                               tpx_error *err) {
  int ok = t->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
  if (ok) return TPX_OK;
  char have[160], want[160];
  fmt_shape(t->shape, t->ndim, have, sizeof have);
  fmt_shape(shape, ndim, want, sizeof want);
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "%s: %s has local shape %s, expected %s on this rank",
                       ctx, what, have, want);
}

const char *tpx__tp_module_name(const tpx_sharding *sh, int64_t module) {
  const char *n = tpx_model_module_fqn(sh->model, module);
  return !n ? "(unknown)" : n[0] ? n : "(root)";
}

/* ---- activations -------------------------------------------------------- */

static tpx_status local_shape(const tpx_sharding *sh, int64_t rank,
                              tpx_placement layout, const int64_t *shape,
                              int ndim, int64_t *local, tpx_error *err) {
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  tpx_placement n;
  TPX__TRY(tpx_placement_normalize(layout, ndim, &n, err));
  tpx__tp_activation_placements(sh, n, pl);
  tpx_slice s;
  TPX__TRY(tpx_layout_local_slice(shape, ndim, sh->mesh, pl, rank, &s, err));
  for (int i = 0; i < ndim; i++) local[i] = s.length[i];
  return TPX_OK;
}

tpx_status tpx_tp_local_shape(const tpx_sharding *sh, int64_t rank,
                              tpx_placement layout, const int64_t *shape,
                              int ndim, int64_t *local, tpx_error *err) {
  if (!sh || !local || (!shape && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_local_shape: NULL argument");
  if (rank < 0 || rank >= sh->world)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_tp_local_shape: rank %lld outside 0..%lld",
                         (long long)rank, (long long)sh->world - 1);
  return local_shape(sh, rank, layout, shape, ndim, local, err);
}

/* Checked redistribution of this rank's piece; `ctx` names the caller. */
static tpx_status move(const tpx_sharding *sh, tpx_mesh_comm *mc,
                       const int64_t *shape, tpx_placement from,
                       tpx_placement to, int copy, const tpx_tensor *in,
                       tpx_tensor *out, const char *ctx, tpx_error *err) {
  TPX__TRY(tpx_tensor_check(in, "input", err));
  TPX__TRY(tpx_tensor_check(out, "output", err));
  if (in->dtype != out->dtype)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: input dtype %s differs from output dtype %s",
                         ctx, tpx_dtype_short_name(in->dtype),
                         tpx_dtype_short_name(out->dtype));
  if (!shape && in->ndim > 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: logical shape is NULL", ctx);
  int ndim = in->ndim;
  int64_t me = tpx__tp_my_rank(mc);
  int64_t lin[TPX_MAX_TENSOR_DIMS], lout[TPX_MAX_TENSOR_DIMS];
  TPX__TRY(local_shape(sh, me, from, shape, ndim, lin, err));
  TPX__TRY(local_shape(sh, me, to, shape, ndim, lout, err));
  TPX__TRY(tpx__tp_check_shape(in, lin, ndim, "input", ctx, err));
  TPX__TRY(tpx__tp_check_shape(out, lout, ndim, "output", ctx, err));
  size_t bytes = (size_t)tpx_tensor_nbytes(out);
  const tpx__memspace *ms = tpx__comm_ms(tpx_mesh_comm_world(mc));
  if (copy)
    return tpx__ms_copy(ms, out->data, in->data, bytes, TPX__D2D, err);
  tpx_placement pf[TPX_MESH_MAX_DIMS], pt[TPX_MESH_MAX_DIMS];
  tpx__tp_activation_placements(sh, from, pf);
  tpx__tp_activation_placements(sh, to, pt);
  const char *ib = in->data, *ob = out->data;
  size_t ibytes = (size_t)tpx_tensor_nbytes(in);
  int overlap = ibytes && bytes && ib < ob + bytes && ob < ib + ibytes;
  if (!overlap)
    return tpx_redistribute(mc, shape, ndim, in->dtype, pf, in->data, pt,
                            out->data, err);
  void *tmp = NULL;
  TPX__TRY(tpx__ms_alloc(ms, bytes, 0, &tmp, err));
  tpx_status st =
      tpx_redistribute(mc, shape, ndim, in->dtype, pf, in->data, pt, tmp, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, out->data, tmp, bytes, TPX__D2D, err);
  tpx__ms_free(ms, tmp);
  return st;
}

tpx_status tpx_tp_redistribute(const tpx_sharding *sh, tpx_mesh_comm *mc,
                               const int64_t *shape, tpx_placement from,
                               tpx_placement to, const tpx_tensor *in,
                               tpx_tensor *out, tpx_error *err) {
  const char *w = "tpx_tp_redistribute";
  TPX__TRY(tpx__tp_check_comm(sh, mc, w, err));
  if (!in || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !in ? "input" : "output");
  int copy = tpx__tp_size(sh) == 1;
  if (copy) from = to = tpx_placement_replicate();
  return move(sh, mc, shape, from, to, copy, in, out, w, err);
}

/* ---- module transitions ------------------------------------------------- */

static const char *side_name(tpx_transition_side side) {
  return side == TPX_TRANSITION_INPUT ? "input" : "output";
}

tpx_status tpx_tp_transition_get(const tpx_sharding *sh, int64_t module,
                                 tpx_transition_side side, int index,
                                 const tpx_transition **out, tpx_error *err) {
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_transition_get: NULL argument");
  *out = NULL;
  if (module < 0 || (size_t)module >= sh->num_modules)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tp transition: module index %lld outside 0..%zu",
                         (long long)module, sh->num_modules - 1);
  if (side != TPX_TRANSITION_INPUT && side != TPX_TRANSITION_OUTPUT)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp transition: side %d is neither input nor output",
                         (int)side);
  const char *name = tpx__tp_module_name(sh, module);
  int64_t entry = sh->module_entry[module];
  if (entry < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "tp transition: module '%s' has no parallel style "
                         "(no plan entry applies to it)",
                         name);
  if (!sh->tp_applied) return TPX_OK; /* tp == 1: no hooks */
  const tpx_transition *tr;
  size_t n;
  TPX__TRY(tpx_sharding_module_transitions(sh, module, &tr, &n, err));
  char have[128];
  size_t k = 0;
  have[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (tr[i].side == side && tr[i].index == index) {
      *out = &tr[i];
      return TPX_OK;
    }
    if (k < sizeof have)
      k += (size_t)snprintf(have + k, sizeof have - k, "%s%s %d",
                            k ? ", " : "", side_name(tr[i].side),
                            tr[i].index);
  }
  const char *style = tpx_style_kind_name(sh->entry_styles[entry].kind);
  return tpx_error_set(err, TPX_NOT_FOUND,
                       "tp transition: module '%s' (style %s, plan key '%s') "
                       "has no %s %d transition; it has: %s",
                       name, style ? style : "?", sh->entry_keys[entry],
                       side_name(side), index, n ? have : "none");
}

/* "<name>(dim=<d>)" -> d. */
static int parse_dim(const char *s, const char *name, int32_t *d) {
  size_t n = strlen(name);
  if (strncmp(s, name, n) != 0 || strncmp(s + n, "(dim=", 5) != 0) return 0;
  char *end;
  long v = strtol(s + n + 5, &end, 10);
  if (*end != ')' || end[1] != '\0') return 0;
  *d = (int32_t)v;
  return 1;
}

static tpx_placement grad_of(tpx_placement p) {
  return p.kind == TPX_PARTIAL ? tpx_placement_replicate() : p;
}

/* In / out layouts of the buffers of one direction of a transition. */
static tpx_status resolve(const tpx_sharding *sh, int64_t module,
                          tpx_transition_side side, int index, int backward,
                          tpx_placement *in, tpx_placement *out, int *copy,
                          tpx_error *err) {
  const tpx_transition *tr;
  TPX__TRY(tpx_tp_transition_get(sh, module, side, index, &tr, err));
  return tpx__tp_resolve_tr(sh, module, tr, backward, in, out, copy, err);
}

tpx_status tpx__tp_resolve_tr(const tpx_sharding *sh, int64_t module,
                              const tpx_transition *tr, int backward,
                              tpx_placement *in, tpx_placement *out, int *copy,
                              tpx_error *err) {
  *in = *out = tpx_placement_replicate();
  *copy = 1;
  if (!tr || tr->from_is_none) return TPX_OK; /* tp == 1, or pass-through */
  const char *c = backward ? tr->backward : tr->forward;
  if (strncmp(c, "mask + ", 7) == 0) c += 7; /* rows zeroed by the caller */
  *copy = strcmp(c, "none") == 0;
  if (!backward) {
    *in = tr->from;
    *out = *copy ? tr->from : tr->to;
    return TPX_OK;
  }
  int32_t a, b;
  tpx_placement partial = tpx_placement_partial(TPX_REDUCE_SUM);
  if (*copy) {
    *in = *out = grad_of(tr->to);
  } else if (strcmp(c, "all-reduce") == 0) {
    *in = partial;
  } else if (parse_dim(c, "reduce-scatter", &a)) {
    *in = partial;
    *out = tpx_placement_shard(a);
  } else if (parse_dim(c, "chunk", &a)) {
    *out = tpx_placement_shard(a);
  } else if (parse_dim(c, "all-gather", &a)) {
    *in = tpx_placement_shard(a);
  } else if (sscanf(c, "all-to-all(dim=%d->%d)", &a, &b) == 2) {
    *in = tpx_placement_shard(a);
    *out = tpx_placement_shard(b);
  } else if (strcmp(c, "redistribute") == 0) {
    *in = grad_of(tr->to);
    *out = grad_of(tr->from);
  } else {
    return tpx_error_set(err, TPX_INTERNAL,
                         "tp transition: module '%s' %s %d: unknown backward "
                         "collective '%s'",
                         tpx__tp_module_name(sh, module), side_name(tr->side),
                         tr->index, c);
  }
  return TPX_OK;
}

/* resolve() for an input arriving as a DTensor in `arrived` (NULL: a plain
 * tensor, resolve() itself). Shard dims are compared normalised to ndim. */
static tpx_status resolve_dt(const tpx_sharding *sh, int64_t module,
                             tpx_transition_side side, int index,
                             int backward, const tpx_placement *arrived,
                             int ndim, tpx_placement *in, tpx_placement *out,
                             int *copy, tpx_error *err) {
  if (!arrived)
    return resolve(sh, module, side, index, backward, in, out, copy, err);
  if (side != TPX_TRANSITION_INPUT)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp transition: module '%s' output %d: an arrival "
                         "layout applies to inputs only",
                         sh && module >= 0 &&
                                 (size_t)module < sh->num_modules
                             ? tpx__tp_module_name(sh, module)
                             : "?",
                         index);
  const tpx_transition *tr;
  TPX__TRY(tpx_tp_transition_get(sh, module, side, index, &tr, err));
  return tpx__tp_resolve_dt_tr(sh, module, tr, backward, arrived, ndim, in,
                               out, copy, err);
}

tpx_status tpx__tp_resolve_dt_tr(const tpx_sharding *sh, int64_t module,
                                 const tpx_transition *tr, int backward,
                                 const tpx_placement *arrived, int ndim,
                                 tpx_placement *in, tpx_placement *out,
                                 int *copy, tpx_error *err) {
  tpx_placement a;
  TPX__TRY(tpx_placement_normalize(*arrived, ndim, &a, err));
  *copy = 1;
  if (!tr) { /* tp == 1 */
    *in = *out = tpx_placement_replicate();
    return TPX_OK;
  }
  if (tr->from_is_none) { /* prepare_module_input None: untouched */
    *in = *out = backward ? grad_of(a) : a;
    return TPX_OK;
  }
  tpx_placement want;
  TPX__TRY(tpx_placement_normalize(tr->to, ndim, &want, err));
  if (tpx__tp_prepare_keeps_arrival(sh, module, tr, ndim)) {
    *in = *out = backward ? grad_of(a) : a; /* kept as it arrived */
    return TPX_OK;
  }
  int same = tpx_placement_equal(a, want);
  if (!backward) {
    *in = a;
    *out = same ? a : want;
    *copy = same;
    return TPX_OK;
  }
  /* The gradient the module hands back: what the static backward reads. */
  tpx_placement g, unused;
  int c;
  TPX__TRY(tpx__tp_resolve_tr(sh, module, tr, 1, &g, &unused, &c, err));
  TPX__TRY(tpx_placement_normalize(g, ndim, &g, err));
  *in = g;
  *out = same ? g : a;
  if (!same && g.kind == TPX_REPLICATE && a.kind == TPX_PARTIAL)
    *out = g; /* DTensor keeps a replicated grad of a Partial source */
  *copy = tpx_placement_equal(*in, *out);
  return TPX_OK;
}

tpx_status tpx_tp_transition_layouts(const tpx_sharding *sh, int64_t module,
                                     tpx_transition_side side, int index,
                                     int backward, tpx_placement *in_layout,
                                     tpx_placement *out_layout, int *is_copy,
                                     tpx_error *err) {
  TPX__TRY(tpx__tp_check_plain(sh, module, side, index, 0,
                               "tpx_tp_transition_layouts", err));
  return tpx_tp_transition_layouts_dt(sh, module, side, index, backward, NULL,
                                      0, in_layout, out_layout, is_copy, err);
}

tpx_status tpx_tp_transition_layouts_dt(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side,
    int index, int backward, const tpx_placement *arrived, int ndim,
    tpx_placement *in_layout, tpx_placement *out_layout, int *is_copy,
    tpx_error *err) {
  if (!in_layout || !out_layout)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_transition_layouts: NULL argument");
  int copy;
  TPX__TRY(resolve_dt(sh, module, side, index, backward, arrived, ndim,
                      in_layout, out_layout, &copy, err));
  if (is_copy) *is_copy = copy;
  return TPX_OK;
}

tpx_status tpx_tp_transition_shape(const tpx_sharding *sh, int64_t module,
                                   tpx_transition_side side, int index,
                                   int backward, int64_t rank,
                                   const int64_t *shape, int ndim,
                                   int64_t *in_local, int64_t *out_local,
                                   tpx_error *err) {
  TPX__TRY(tpx__tp_check_plain(sh, module, side, index, ndim,
                               "tpx_tp_transition_shape", err));
  return tpx_tp_transition_shape_dt(sh, module, side, index, backward, NULL,
                                    rank, shape, ndim, in_local, out_local,
                                    err);
}

tpx_status tpx_tp_transition_shape_dt(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side,
    int index, int backward, const tpx_placement *arrived, int64_t rank,
    const int64_t *shape, int ndim, int64_t *in_local, int64_t *out_local,
    tpx_error *err) {
  if (!sh || !out_local || (!shape && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_transition_shape: NULL argument");
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_tp_transition_shape: ndim %d outside 0..%d",
                         ndim, TPX_MAX_TENSOR_DIMS);
  if (rank < 0 || rank >= sh->world)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_tp_transition_shape: rank %lld outside 0..%lld",
                         (long long)rank, (long long)sh->world - 1);
  tpx_placement in, out;
  int copy;
  TPX__TRY(resolve_dt(sh, module, side, index, backward, arrived, ndim, &in,
                      &out, &copy, err));
  if (in_local) TPX__TRY(local_shape(sh, rank, in, shape, ndim, in_local, err));
  return local_shape(sh, rank, out, shape, ndim, out_local, err);
}

tpx_status tpx_tp_transition_run(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                 int64_t module, tpx_transition_side side,
                                 int index, int backward, const int64_t *shape,
                                 const tpx_tensor *in, tpx_tensor *out,
                                 tpx_error *err) {
  TPX__TRY(tpx__tp_check_plain(sh, module, side, index, in ? in->ndim : 0,
                               "tpx_tp_transition_run", err));
  return tpx_tp_transition_run_dt(sh, mc, module, side, index, backward, NULL,
                                  shape, in, out, err);
}

tpx_status tpx_tp_transition_run_dt(
    const tpx_sharding *sh, tpx_mesh_comm *mc, int64_t module,
    tpx_transition_side side, int index, int backward,
    const tpx_placement *arrived, const int64_t *shape, const tpx_tensor *in,
    tpx_tensor *out, tpx_error *err) {
  TPX__TRY(tpx__tp_check_comm(sh, mc, "tpx_tp_transition_run", err));
  if (!in || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_transition_run: %s is NULL",
                         !in ? "input" : "output");
  TPX__TRY(tpx_tensor_check(in, "input", err));
  tpx_placement from, to;
  int copy;
  TPX__TRY(resolve_dt(sh, module, side, index, backward, arrived, in->ndim,
                      &from, &to, &copy, err));
  char ctx[256];
  snprintf(ctx, sizeof ctx, "tp transition of module '%s' %s %d (%s)",
           tpx__tp_module_name(sh, module), side_name(side), index,
           backward ? "backward" : "forward");
  return move(sh, mc, shape, from, to, copy, in, out, ctx, err);
}

int tpx_tp_output_keeps_dtensor(const tpx_sharding *sh, int64_t module,
                                int index) {
  const tpx_transition *tr;
  if (tpx_tp_transition_get(sh, module, TPX_TRANSITION_OUTPUT, index, &tr,
                            NULL) != TPX_OK ||
      !tr)
    return 0;
  int64_t e = sh->module_entry[module];
  return e >= 0 && !sh->entry_styles[e].use_local_output;
}

tpx_status tpx__tp_move(const tpx_sharding *sh, tpx_mesh_comm *mc,
                        const int64_t *shape, tpx_placement from,
                        tpx_placement to, int copy, const tpx_tensor *in,
                        tpx_tensor *out, const char *ctx, tpx_error *err) {
  return move(sh, mc, shape, from, to, copy, in, out, ctx, err);
}
