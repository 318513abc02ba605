/* test_rt_hooks.c — the runtime's module hooks (tpx_runtime_forward_begin
 * ... tpx_runtime_backward_end, pre/post forward and backward by module
 * name) on the local backend:
 *  - module names find their units (a layer's submodules its layer's, the
 *    untied embeddings their own root units, the final norm the root's);
 *    an unknown name is TPX_NOT_FOUND naming it;
 *  - idempotence per phase: a unit is gathered once per forward and once
 *    per backward (pointers and byte counts unchanged by a second call; a
 *    gradient written between two pre_backward calls survives), and reduced
 *    once per backward (a second post_backward adds nothing);
 *  - root handling: the root units are gathered by forward_begin, stay
 *    through the forward, their post_backward defers to backward_end, which
 *    reduces them and leaves nothing gathered;
 *  - a step through the hooks gives the same sharded gradients, bit for
 *    bit, as the same step through the unit calls;
 *  - order and prefetch on a comm thread (dp_shard 2): pre_forward of
 *    layer 0 gathers layer 1 too (not layer 2), pre_backward of the last
 *    layer the two before it; hooks outside their pass are refused;
 *  - the model's own hooks (module "") open and close the passes: a step
 *    through them gives the unit calls' gradients, bit for bit. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fsdp_fixture.h"

#define NL 4 /* layers */

typedef struct hx {
  tpx_model *model;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  int64_t dps;
  tpx_status (*fn)(struct hx *x, tpx_runtime *rt, int64_t rank, tpx_error *err);
  float **grads[2]; /* [via hooks, via unit calls][param] full gradients */
} hx;

static void hx_init(hx *x, int64_t dps, int fsdp) {
  memset(x, 0, sizeof *x);
  fx_opts o = {0, 0, 0, NL, NULL}; /* untied: embed and lm_head units */
  x->model = fx_model(&o);
  x->mesh = fx_mesh(1, dps, 1);
  x->dps = dps;
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = fsdp;
  so.param_dtype = TPX_DTYPE_INVALID;
  x->sh = fx_shard(x->model, NULL, x->mesh, &so);
}

static void hx_free(hx *x) {
  for (int k = 0; k < 2; k++) {
    for (size_t p = 0; x->grads[k] && p < tpx_model_num_params(x->model); p++)
      free(x->grads[k][p]);
    free(x->grads[k]);
  }
  tpx_sharding_destroy(x->sh);
  tpx_mesh_destroy(x->mesh);
  tpx_model_destroy(x->model);
}

static tpx_status hx_body(tpx_comm *world, void *arg, tpx_error *err) {
  hx *x = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_mesh_comm_create(world, x->mesh, &mc, err);
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = TPX_DTYPE_F32;
  if (st == TPX_OK)
    st = tpx_runtime_create(x->sh, mc, &ro, &rt, err);
  if (st == TPX_OK)
    st = rt_load_weights(rt, x->model, err);
  if (st == TPX_OK)
    st = x->fn(x, rt, tpx_comm_rank(world), err);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return st;
}

static void hx_run(hx *x) {
  tpx_error e = {0};
  tpx_status st = rt_local_run((int)x->dps, 0, hx_body, x, &e);
  ck_assert_msg(st == TPX_OK, "%s", e.message);
}

static size_t unit_of(tpx_runtime *rt, const char *module) {
  size_t u = 0;
  tpx_error e = {0};
  ck_assert_msg(tpx_runtime_module_unit(rt, module, &u, &e) == TPX_OK, "%s",
                e.message);
  return u;
}

static size_t unit_of_param(tpx_runtime *rt, const tpx_model *m,
                            const char *param) {
  return (size_t)tpx_runtime_param_unit(rt, tpx_model_find_param(m, param));
}

static char *layer(int l) {
  static char b[NL][24];
  snprintf(b[l], sizeof b[l], "model.layers.%d", l);
  return b[l];
}

/* ---- module names ---- */

static tpx_status names_fn(hx *x, tpx_runtime *rt, int64_t rank,
                           tpx_error *err) {
  (void)rank;
  (void)err;
  const tpx_model *m = x->model;
  for (int l = 0; l < NL; l++) {
    char sub[160], par[192];
    snprintf(sub, sizeof sub, "%s.self_attn.q_proj", layer(l));
    snprintf(par, sizeof par, "%s.mlp.down_proj.weight", layer(l));
    ck_assert_uint_eq(unit_of(rt, layer(l)), unit_of(rt, sub));
    ck_assert_uint_eq(unit_of(rt, sub), unit_of_param(rt, m, par));
    ck_assert(!tpx_runtime_unit_is_root(rt, unit_of(rt, layer(l))));
  }
  size_t emb = unit_of(rt, "model.embed_tokens");
  size_t norm = unit_of(rt, "model.norm"), head = unit_of(rt, "lm_head");
  ck_assert_uint_eq(emb, unit_of_param(rt, m, "model.embed_tokens.weight"));
  ck_assert_uint_eq(head, unit_of_param(rt, m, "lm_head.weight"));
  ck_assert_uint_eq(norm, tpx_runtime_num_units(rt) - 1); /* the root */
  ck_assert(emb != norm && head != norm && emb != head);
  ck_assert(tpx_runtime_unit_is_root(rt, emb));
  ck_assert(tpx_runtime_unit_is_root(rt, norm));
  ck_assert(tpx_runtime_unit_is_root(rt, head));
  ck_assert(!tpx_runtime_unit_is_root(rt, tpx_runtime_num_units(rt)));
  /* "model" and "model.layers" hold no unit of their own: the root's */
  ck_assert_uint_eq(unit_of(rt, "model.layers"), norm);
  size_t u = 7;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_runtime_module_unit(rt, "model.layers.9", &u, &e),
                   TPX_NOT_FOUND);
  ck_assert_msg(strstr(e.message, "'model.layers.9'"), "%s", e.message);
  ck_assert_uint_eq(u, 7);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_runtime_forward_begin(rt, &e2), TPX_OK);
  ck_assert_int_eq(tpx_runtime_pre_forward(rt, "model.layer.0", &e2),
                   TPX_NOT_FOUND);
  ck_assert_msg(strstr(e2.message, "tpx_runtime_pre_forward") &&
                    strstr(e2.message, "'model.layer.0'"),
                "%s", e2.message);
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_runtime_module_unit(rt, NULL, &u, &e3),
                   TPX_INVALID_ARGUMENT);
  return TPX_OK;
}

START_TEST(module_names) {
  hx x;
  hx_init(&x, 1, 1);
  x.fn = names_fn;
  hx_run(&x);
  hx_free(&x);
}
END_TEST

/* FSDP off: every module is in the one pseudo-unit, a root unit. */
static tpx_status nofsdp_fn(hx *x, tpx_runtime *rt, int64_t rank,
                            tpx_error *err) {
  (void)x;
  (void)rank;
  ck_assert_uint_eq(tpx_runtime_num_units(rt), 1);
  ck_assert_uint_eq(unit_of(rt, layer(2)), 0);
  ck_assert_uint_eq(unit_of(rt, "lm_head"), 0);
  ck_assert(tpx_runtime_unit_is_root(rt, 0));
  RK_OK(tpx_runtime_forward_begin(rt, E_));
  RK_OK(tpx_runtime_pre_forward(rt, layer(0), E_));
  RK_OK(tpx_runtime_post_forward(rt, layer(0), E_));
  RK_OK(tpx_runtime_backward_begin(rt, E_));
  RK_OK(tpx_runtime_pre_backward(rt, layer(0), E_));
  RK_OK(tpx_runtime_post_backward(rt, layer(0), E_));
  return tpx_runtime_backward_end(rt, err);
}

START_TEST(no_fsdp) {
  hx x;
  hx_init(&x, 1, 0);
  x.fn = nofsdp_fn;
  hx_run(&x);
  hx_free(&x);
}
END_TEST

/* ---- idempotence, root handling, equivalence ---- */

/* Write rank-dependent gradients into every unsharded gradient of unit u. */
static void write_grads(hx *x, tpx_runtime *rt, size_t u, int64_t rank) {
  for (size_t p = 0; p < tpx_model_num_params(x->model); p++) {
    if (tpx_runtime_param_unit(rt, (int64_t)p) != (int64_t)u)
      continue;
    tpx_runtime_param_info pi;
    ck_assert_int_eq(tpx_runtime_param(rt, (int64_t)p, &pi, NULL), TPX_OK);
    if (pi.param != (int64_t)p)
      continue; /* a tied alias */
    ck_assert_ptr_nonnull(pi.unsharded_grad);
    float *g = pi.unsharded_grad;
    for (int64_t i = 0; i < pi.local_numel; i++)
      g[i] += rt_grad((int64_t)p, i, rank);
  }
}

static void gather_grads(hx *x, tpx_runtime *rt, float **out) {
  for (size_t p = 0; p < tpx_model_num_params(x->model); p++) {
    tpx_param_info in;
    tpx_model_param(x->model, (int64_t)p, &in, NULL);
    if (in.tied_to >= 0)
      continue;
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    float *full = malloc((size_t)n * sizeof *full);
    ck_assert_int_eq(
        tpx_runtime_gather_grad(rt, (int64_t)p, full, TPX_DTYPE_F32, NULL),
        TPX_OK);
    if (out)
      out[p] = full;
    else
      free(full);
  }
}

static const char *const roots[3] = {"model.embed_tokens", "model.norm",
                                     "lm_head"};

static tpx_status hooks_fn(hx *x, tpx_runtime *rt, int64_t rank,
                           tpx_error *err) {
  (void)err;
  size_t nu = tpx_runtime_num_units(rt);
  RK_OK(tpx_runtime_zero_grads(rt, E_));
  RK_OK(tpx_runtime_forward_begin(rt, E_));
  for (int k = 0; k < 3; k++) /* root units gathered by forward_begin */
    ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, roots[k])));
  for (int l = 0; l < NL; l++) {
    size_t u = unit_of(rt, layer(l));
    RK_OK(tpx_runtime_pre_forward(rt, layer(l), E_));
    ck_assert(tpx_runtime_unit_is_unsharded(rt, u));
    int64_t g = tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GATHER);
    char sub[160], par[192];
    snprintf(sub, sizeof sub, "%s.mlp.up_proj", layer(l));
    snprintf(par, sizeof par, "%s.weight", sub);
    int64_t q = tpx_model_find_param(x->model, par);
    tpx_runtime_param_info a, b;
    RK_OK(tpx_runtime_param(rt, q, &a, E_));
    ck_assert_ptr_nonnull(a.unsharded);
    RK_OK(tpx_runtime_pre_forward(rt, sub, E_)); /* same unit: nothing */
    RK_OK(tpx_runtime_pre_forward(rt, layer(l), E_));
    RK_OK(tpx_runtime_param(rt, q, &b, E_));
    ck_assert_ptr_eq(a.unsharded, b.unsharded);
    ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GATHER),
                     g);
    RK_OK(tpx_runtime_post_forward(rt, layer(l), E_));
    RK_OK(tpx_runtime_post_forward(rt, layer(l), E_));
    /* reshard_after_forward: all but the last layer */
    ck_assert_int_eq(tpx_runtime_unit_is_unsharded(rt, u), l == NL - 1);
  }
  for (int k = 0; k < 3; k++) { /* root post_forward: they stay */
    RK_OK(tpx_runtime_pre_forward(rt, roots[k], E_));
    RK_OK(tpx_runtime_post_forward(rt, roots[k], E_));
    ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, roots[k])));
  }
  RK_OK(tpx_runtime_backward_begin(rt, E_));
  for (int k = 0; k < 3; k++) {
    size_t u = unit_of(rt, roots[k]);
    write_grads(x, rt, u, rank);
    RK_OK(tpx_runtime_pre_backward(rt, roots[k], E_));
    RK_OK(tpx_runtime_post_backward(rt, roots[k], E_)); /* deferred */
    ck_assert(tpx_runtime_unit_is_unsharded(rt, u));
  }
  for (int l = NL - 1; l >= 0; l--) {
    size_t u = unit_of(rt, layer(l));
    RK_OK(tpx_runtime_pre_backward(rt, layer(l), E_));
    write_grads(x, rt, u, rank);
    /* a second pre_backward keeps the gradients written so far */
    RK_OK(tpx_runtime_pre_backward(rt, layer(l), E_));
    RK_OK(tpx_runtime_post_backward(rt, layer(l), E_));
    RK_OK(tpx_runtime_post_backward(rt, layer(l), E_)); /* reduced once */
    ck_assert(!tpx_runtime_unit_is_unsharded(rt, u));
    /* its gradients are gone: a pre_backward now is an error */
    tpx_error e = {0};
    ck_assert_int_eq(tpx_runtime_pre_backward(rt, layer(l), &e),
                     TPX_INVALID_ARGUMENT);
    ck_assert_msg(strstr(e.message, "already reduced"), "%s", e.message);
  }
  RK_OK(tpx_runtime_backward_end(rt, E_));
  for (size_t u = 0; u < nu; u++)
    ck_assert(!tpx_runtime_unit_is_unsharded(rt, u));
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_GATHER), 0);
  ck_assert_int_eq(
      tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS), 0);
  gather_grads(x, rt, rank == 0 ? x->grads[0] : NULL);
  return TPX_OK;
}

/* The same step through the unit calls, the bookkeeping by hand. */
static tpx_status units_fn(hx *x, tpx_runtime *rt, int64_t rank,
                           tpx_error *err) {
  (void)err;
  size_t nu = tpx_runtime_num_units(rt);
  RK_OK(tpx_runtime_zero_grads(rt, E_));
  for (size_t u = nu; u-- > 0;) {
    RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_FORWARD, E_));
    RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, E_));
  }
  for (size_t u = nu; u-- > 0;) {
    RK_OK(tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
    write_grads(x, rt, u, rank);
    RK_OK(tpx_runtime_reduce_grads(rt, u, E_));
    RK_OK(tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, E_));
  }
  RK_OK(tpx_runtime_wait(rt, E_));
  gather_grads(x, rt, rank == 0 ? x->grads[1] : NULL);
  return TPX_OK;
}

/* The model's hooks (module "", FSDP2's root module) instead of
 * forward_begin ... backward_end. */
static tpx_status root_fn(hx *x, tpx_runtime *rt, int64_t rank,
                          tpx_error *err) {
  (void)err;
  RK_OK(tpx_runtime_zero_grads(rt, E_));
  RK_OK(tpx_runtime_pre_forward(rt, "", E_)); /* forward_begin */
  for (int k = 0; k < 3; k++)
    ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, roots[k])));
  for (int l = 0; l < NL; l++) {
    RK_OK(tpx_runtime_pre_forward(rt, layer(l), E_));
    RK_OK(tpx_runtime_post_forward(rt, layer(l), E_));
  }
  RK_OK(tpx_runtime_post_forward(rt, "", E_)); /* forward_end */
  /* the last layer is not resharded after the forward (FSDP2) */
  ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(NL - 1))));
  ck_assert(!tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(0))));
  tpx_error e = {0};
  ck_assert_int_eq(tpx_runtime_post_forward(rt, "", &e), TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e.message, "tpx_runtime_forward_end"), "%s", e.message);
  RK_OK(tpx_runtime_pre_backward(rt, "", E_)); /* backward_begin */
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_runtime_pre_forward(rt, "", &e2), TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e2.message, "tpx_runtime_backward_end"), "%s",
                e2.message);
  for (int k = 0; k < 3; k++) write_grads(x, rt, unit_of(rt, roots[k]), rank);
  for (int l = NL - 1; l >= 0; l--) {
    RK_OK(tpx_runtime_pre_backward(rt, layer(l), E_));
    write_grads(x, rt, unit_of(rt, layer(l)), rank);
    RK_OK(tpx_runtime_post_backward(rt, layer(l), E_));
  }
  RK_OK(tpx_runtime_post_backward(rt, "", E_)); /* backward_end */
  for (size_t u = 0; u < tpx_runtime_num_units(rt); u++)
    ck_assert(!tpx_runtime_unit_is_unsharded(rt, u));
  gather_grads(x, rt, rank == 0 ? x->grads[0] : NULL);
  return TPX_OK;
}

static void hooks_case(int64_t dps, int root) {
  hx x;
  hx_init(&x, dps, 1);
  size_t np = tpx_model_num_params(x.model);
  x.grads[0] = calloc(np, sizeof(float *));
  x.grads[1] = calloc(np, sizeof(float *));
  x.fn = root ? root_fn : hooks_fn;
  hx_run(&x);
  x.fn = units_fn;
  hx_run(&x);
  for (size_t p = 0; p < np; p++) {
    tpx_param_info in;
    tpx_model_param(x.model, (int64_t)p, &in, NULL);
    if (in.tied_to >= 0)
      continue;
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    ck_assert_msg(
        memcmp(x.grads[0][p], x.grads[1][p], (size_t)n * sizeof(float)) == 0,
        "%s: gradients differ between hooks and unit calls", in.fqn);
  }
  hx_free(&x);
}

START_TEST(idempotent_world1) { hooks_case(1, 0); }
END_TEST

START_TEST(idempotent_dp2) { hooks_case(2, 0); }
END_TEST

START_TEST(root_module_dp2) { hooks_case(2, 1); }
END_TEST

/* ---- order, prefetch and refusals ---- */

static tpx_status order_fn(hx *x, tpx_runtime *rt, int64_t rank,
                           tpx_error *err) {
  (void)x;
  ck_assert(tpx_runtime_is_async(rt)); /* local, dp 2: a comm thread */
  tpx_error e = {0};
  ck_assert_int_eq(tpx_runtime_pre_forward(rt, layer(0), &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e.message, "no pass has begun"), "%s", e.message);
  RK_OK(tpx_runtime_forward_begin(rt, E_));
  RK_OK(tpx_runtime_pre_forward(rt, layer(0), E_));
  RK_OK(tpx_runtime_wait(rt, E_));
  /* forward prefetch depth 1: layer 1 gathered, layer 2 not */
  ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(1))));
  ck_assert(!tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(2))));
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_runtime_pre_backward(rt, layer(0), &e2),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e2.message, "tpx_runtime_backward_begin"), "%s",
                e2.message);
  for (int l = 0; l < NL; l++) {
    RK_OK(tpx_runtime_pre_forward(rt, layer(l), E_));
    RK_OK(tpx_runtime_post_forward(rt, layer(l), E_));
  }
  RK_OK(tpx_runtime_backward_begin(rt, E_));
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_runtime_post_backward(rt, layer(1), &e3),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e3.message, "tpx_runtime_pre_backward first"), "%s",
                e3.message);
  RK_OK(tpx_runtime_pre_backward(rt, layer(NL - 1), E_));
  RK_OK(tpx_runtime_wait(rt, E_));
  /* backward prefetch depth 2: the two layers before it */
  ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(NL - 2))));
  ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(NL - 3))));
  ck_assert(!tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(NL - 4))));
  /* activation checkpointing's recompute: pre_forward in the backward
   * keeps the unit gathered for it, post_forward does not reshard */
  RK_OK(tpx_runtime_pre_forward(rt, layer(NL - 2), E_));
  RK_OK(tpx_runtime_post_forward(rt, layer(NL - 2), E_));
  ck_assert(tpx_runtime_unit_is_unsharded(rt, unit_of(rt, layer(NL - 2))));
  tpx_runtime_param_info pi;
  RK_OK(tpx_runtime_param(
      rt, tpx_model_find_param(x->model, "model.layers.2.mlp.up_proj.weight"),
      &pi, E_));
  ck_assert_ptr_nonnull(pi.unsharded_grad);
  tpx_error e4 = {0};
  ck_assert_int_eq(tpx_runtime_forward_begin(rt, &e4), TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e4.message, "tpx_runtime_backward_end"), "%s",
                e4.message);
  /* post_backward never came for layers 3 and 2: backward_end reduces */
  RK_OK(tpx_runtime_backward_end(rt, E_));
  for (size_t u = 0; u < tpx_runtime_num_units(rt); u++)
    ck_assert(!tpx_runtime_unit_is_unsharded(rt, u));
  tpx_error e5 = {0};
  ck_assert_int_eq(tpx_runtime_backward_end(rt, &e5), TPX_INVALID_ARGUMENT);
  (void)rank;
  (void)err;
  return TPX_OK;
}

START_TEST(order_prefetch) {
  hx x;
  hx_init(&x, 2, 1);
  x.fn = order_fn;
  hx_run(&x);
  hx_free(&x);
}
END_TEST

START_TEST(null_runtime) {
  tpx_error e = {0};
  size_t u;
  ck_assert_int_eq(tpx_runtime_module_unit(NULL, "x", &u, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_runtime_forward_begin(NULL, &e), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_runtime_pre_forward(NULL, "x", &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_runtime_backward_end(NULL, &e), TPX_INVALID_ARGUMENT);
  ck_assert(!tpx_runtime_unit_is_root(NULL, 0));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_hooks");
  TCase *tc = tcase_create("hooks");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, module_names);
  tcase_add_test(tc, no_fsdp);
  tcase_add_test(tc, idempotent_world1);
  tcase_add_test(tc, idempotent_dp2);
  tcase_add_test(tc, root_module_dp2);
  tcase_add_test(tc, order_prefetch);
  tcase_add_test(tc, null_runtime);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
