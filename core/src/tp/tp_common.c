/* tp/tp_common.c — the helpers every TP call shares (tp_internal.h): the
 * tp mesh dim and size, activation placements over the mesh, the checks of
 * a mesh comm and a tensor shape, module names for messages.
 * Not here: anything that moves data. */
#include <stdio.h>
#include <string.h>

#include "comm/comm_view.h"
#include "shard/sharding_view.h"
#include "tp/tp_internal.h"

int tpx_tp_mesh_dim(const tpx_sharding *sh) {
  return sh ? tpx__sv_tp_dim(sh) : -1;
}

int64_t tpx__tp_size(const tpx_sharding *sh) {
  return tpx_sharding_tp_size(sh); /* 1 when the mesh has no tp dim */
}

void tpx__tp_activation_placements(const tpx_sharding *sh,
                                   tpx_placement tp_layout, tpx_placement *pl) {
  int tp_dim = tpx__sv_tp_dim(sh);
  for (int m = 0; m < tpx_mesh_ndim(tpx_sharding_mesh(sh)); m++)
    pl[m] = tpx_placement_replicate();
  if (tp_dim >= 0)
    pl[tp_dim] = tp_layout;
}

tpx_status tpx__tp_check_comm(const tpx_sharding *sh, tpx_mesh_comm *mc,
                              const char *what, tpx_error *err) {
  if (!sh)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: sharding is NULL",
                         what);
  return tpx__mesh_comm_check(mc, tpx_sharding_mesh(sh), what, err);
}

int64_t tpx__tp_my_rank(tpx_mesh_comm *mc) {
  return tpx_comm_rank(tpx_mesh_comm_world(mc));
}

tpx_comm *tpx__tp_comm(const tpx_sharding *sh, tpx_mesh_comm *mc) {
  int tp_dim = tpx__sv_tp_dim(sh);
  return tp_dim < 0 ? NULL : tpx_mesh_comm_dim(mc, tp_dim);
}

static void fmt_shape(const int64_t *s, int n, char *buf, size_t size) {
  size_t k = 0;
  buf[0] = '\0';
  k += (size_t)snprintf(buf + k, size - k, "[");
  for (int i = 0; i < n && k < size; i++)
    k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "",
                          (long long)s[i]);
  if (k < size)
    snprintf(buf + k, size - k, "]");
}

tpx_status tpx__tp_check_shape(const tpx_tensor *t, const int64_t *shape,
                               int ndim, const char *what, const char *ctx,
                               tpx_error *err) {
  int ok = t->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
  if (ok)
    return TPX_OK;
  char have[160], want[160];
  fmt_shape(t->shape, t->ndim, have, sizeof have);
  fmt_shape(shape, ndim, want, sizeof want);
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "%s: %s has local shape %s, expected %s on this rank",
                       ctx, what, have, want);
}

tpx_status tpx__tp_check_shape_args(const char *what, const tpx_sharding *sh,
                                    const int64_t *out_local,
                                    const int64_t *shape, int ndim,
                                    tpx_error *err) {
  if (!sh || !out_local || (!shape && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: NULL argument", what);
  if (ndim < 0 || ndim > TPX_MAX_TENSOR_DIMS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "%s: ndim %d outside 0..%d",
                         what, ndim, TPX_MAX_TENSOR_DIMS);
  return TPX_OK;
}

tpx_status tpx__tp_module_in_range(const char *what, const tpx_sharding *sh,
                                   int64_t module, tpx_error *err) {
  if (module < 0 || (size_t)module >= tpx__sv_num_modules(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: module index %lld outside 0..%zu", what,
                         (long long)module, tpx__sv_num_modules(sh) - 1);
  return TPX_OK;
}

tpx_status tpx__tp_module_styled(const char *what, const tpx_sharding *sh,
                                 int64_t module, const char **name,
                                 int64_t *entry, tpx_error *err) {
  *name = tpx__tp_module_name(sh, module);
  *entry = tpx__sv_module_entry(sh, module);
  if (*entry < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "%s: module '%s' has no parallel style (no plan "
                         "entry applies to it)",
                         what, *name);
  return TPX_OK;
}

const char *tpx__tp_module_name(const tpx_sharding *sh, int64_t module) {
  const char *n = tpx_model_module_fqn(tpx_sharding_model(sh), module);
  return !n ? "(unknown)" : n[0] ? n : "(root)";
}

const char *tpx__tp_side_name(tpx_transition_side side) {
  return side == TPX_TRANSITION_INPUT ? "input" : "output";
}
