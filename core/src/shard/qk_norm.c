/* qk_norm.c — a norm over a colwise projection's whole output width
 * (OLMo-2's self_attn.q_norm / k_norm normalise all heads at once, width
 * num_heads * head_dim): with the projection's output sharded over tp each
 * rank holds only its slice of that width, so the norm would take its
 * statistics over a slice (and its whole-width weight does not fit the
 * slice). The default plan does this to OLMo-2, and upstream applies the
 * same plan without a word (its first forward then fails: the norm's
 * whole-width weight does not fit the slice); tpx refuses it
 * (`qk-norm-whole-width`, one error per norm, identical layers together)
 * and notes upstream's silence (`upstream-qk-norm-whole-width`).
 *
 * Not per-head norms (Qwen3's, width head_dim: partial_grad.c). */
#include <stdio.h>

#include "base/fqn.h"
#include "model/model_view.h"
#include "shard/shard_internal.h"

/* Elements of param `<module>.weight`, or -1. */
static int64_t weight_numel(const tpx_sharding *sh, int64_t module,
                            int64_t *param, int64_t *rows) {
  char w[520];
  snprintf(w, sizeof w, "%s.weight", tpx_model_module_fqn(sh->model, module));
  int64_t p = tpx_model_find_param(sh->model, w);
  tpx_param_info pi;
  if (p < 0 || tpx_model_param(sh->model, p, &pi, NULL) != TPX_OK ||
      pi.ndim < 1)
    return -1;
  int64_t n = 1;
  for (int i = 0; i < pi.ndim; i++) n *= pi.shape[i];
  if (param)
    *param = p;
  if (rows)
    *rows = pi.shape[0];
  return n;
}

/* The colwise projection module m (a `<x>_norm` norm) spans whole, or -1:
 * its weight is replicated over tp and as wide as the projection's output. */
static int64_t whole_width_of(const tpx_sharding *sh, int64_t m,
                              int64_t *width) {
  if (tpx_model_module_kind(sh->model, m) != TPX_MODULE_NORM)
    return -1;
  int64_t s = tpx__norm_colwise_sibling(sh, m);
  if (s < 0)
    return -1;
  int64_t np = -1, out = -1;
  int64_t n = weight_numel(sh, m, &np, NULL);
  if (n <= 1 || weight_numel(sh, s, NULL, &out) < 0 || out != n ||
      sh->placements[np * sh->ndim + sh->tp_dim].kind != TPX_REPLICATE)
    return -1;
  *width = n;
  return s;
}

static tpx_status add(tpx_sharding *sh, int64_t m, int64_t s, int64_t width,
                      size_t count, tpx_error *err) {
  char gen[256], sgen[256];
  const char *name = tpx_model_module_fqn(sh->model, m);
  const char *proj = tpx_model_module_fqn(sh->model, s);
  if (count > 1) {
    tpx__fqn_generalize(name, gen, sizeof gen);
    tpx__fqn_generalize(proj, sgen, sizeof sgen);
    name = gen;
    proj = sgen;
  }
  char more[48] = "";
  if (count > 1)
    snprintf(more, sizeof more, " (%zu modules)", count);
  int64_t local = (width + sh->tp - 1) / sh->tp;
  if (tpx_diag_add(
          sh->diags, TPX_DIAG_ERROR, "qk-norm-whole-width", name,
          "keep the projection whole over tp: a plan that leaves its "
          "output replicated before the norm (transformers' Olmo2 plan "
          "styles q/k/v_proj colwise_rep; a tpx-plan/1 colwise entry with "
          "\"output_layouts\": [\"replicate\"]), or tp 1",
          "'%s'%s normalises over the whole output width %lld of the "
          "colwise '%s', whose output is sharded over tp %lld (%lld per "
          "rank): each rank would normalise its slice with the statistics "
          "of that slice, which is not the model's norm",
          name, more, (long long)width, proj, (long long)sh->tp,
          (long long)local) != TPX_OK)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return TPX_OK;
}

/* keep for tpx__gen_names_count: m is such a norm. */
static int is_whole_width(const tpx_sharding *sh, int64_t m) {
  int64_t width = 0;
  return whole_width_of(sh, m, &width) >= 0;
}

tpx_status tpx__qk_norm_diags(tpx_sharding *sh, tpx_error *err) {
  if (!sh->tp_applied || sh->tp_dim < 0)
    return TPX_OK;
  tpx__gen_names seen = {0};
  tpx_status st = TPX_OK;
  for (size_t m = 0; m < sh->num_modules && st == TPX_OK; m++) {
    int64_t width = 0, s = whole_width_of(sh, (int64_t)m, &width);
    if (s < 0)
      continue;
    char gen[TPX__GEN_NAME_MAX];
    int added = tpx__gen_names_add(&seen, sh, (int64_t)m, gen);
    if (added < 0) {
      st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      break;
    }
    if (added == 0)
      continue;
    size_t count = tpx__gen_names_count(sh, gen, is_whole_width);
    st = add(sh, (int64_t)m, s, width, count, err);
  }
  if (st == TPX_OK && seen.count &&
      tpx_diag_add(sh->diags, TPX_DIAG_INFO, "upstream-qk-norm-whole-width",
                   seen.names[0],
                   "upstream too: give it (tp_shard_plan) the plan the "
                   "qk-norm-whole-width fix names",
                   "upstream applies this plan as it is, without a word: "
                   "the run it starts fails at %s, whose whole-width weight "
                   "does not fit each rank's slice",
                   seen.count > 1 ? "these norms" : "this norm") != TPX_OK)
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx__gen_names_free(&seen);
  return st;
}
