/* test_rt_errors.c — the runtime on one rank: bad arguments give clear
 * errors (no crash, no leak), wrong call orders are refused, and AdamW /
 * clip / norm against numbers computed by hand in double. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fsdp_fixture.h"

/* A world-1 fixture: model with one f32 param "lin.weight" [2] (and the
 * optional extra param of `extra_dtype`), FSDP on a (1,1,1) mesh. */
typedef struct one {
  tpx_model *model;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  int fsdp;
  tpx_dtype extra_dtype;
  tpx_dtype storage;
  tpx_status (*fn)(struct one *o, tpx_mesh_comm *mc, tpx_error *err);
} one;

static void one_init(one *o, int fsdp, tpx_dtype extra) {
  memset(o, 0, sizeof *o);
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&o->model, &e), TPX_OK);
  int64_t s[1] = {2};
  rt_add(o->model, "lin", TPX_MODULE_LINEAR, "weight", s, 1);
  if (extra != TPX_DTYPE_INVALID)
    ck_assert_int_eq(
        tpx_model_add_param(o->model, "lin", "extra", s, 1, extra, NULL, &e),
        TPX_OK);
  o->mesh = fx_mesh(1, 1, 1);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = fsdp;
  so.param_dtype = TPX_DTYPE_INVALID;
  ck_assert_int_eq(
      tpx_sharding_create(o->model, NULL, o->mesh, &so, &o->sh, &e), TPX_OK);
  o->fsdp = fsdp;
}

static void one_free(one *o) {
  tpx_sharding_destroy(o->sh);
  tpx_mesh_destroy(o->mesh);
  tpx_model_destroy(o->model);
}

static tpx_status one_body(tpx_comm *world, void *arg, tpx_error *err) {
  one *o = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, o->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  st = o->fn(o, mc, err);
  tpx_mesh_comm_destroy(mc);
  return st;
}

static void one_run(one *o) {
  tpx_error e = {0};
  tpx_status st = tpx_local_run(1, one_body, o, &e);
  ck_assert_msg(st == TPX_OK, "%s", e.message);
}

#define EXPECT(call, status, text)                                             \
  do {                                                                         \
    tpx_error e_ = {0};                                                        \
    tpx_status st_ = (call);                                                   \
    ck_assert_msg(st_ == (status), "%s: got %s (%s)", #call,                   \
                  tpx_status_name(st_), e_.message);                           \
    ck_assert_msg(strstr(e_.message, (text)) != NULL,                          \
                  "message '%s' lacks '%s'", e_.message, (text));              \
  } while (0)
#define OK(call) EXPECT(call, TPX_OK, "")
#define E_ (&e_)

/* ---- bad arguments ---- */

static tpx_status bad_create(one *o, tpx_mesh_comm *mc, tpx_error *err) {
  (void)err;
  tpx_runtime *rt = (tpx_runtime *)1;
  EXPECT(tpx_runtime_create(o->sh, mc, NULL, NULL, E_), TPX_INVALID_ARGUMENT,
         "out is NULL");
  EXPECT(tpx_runtime_create(NULL, mc, NULL, &rt, E_), TPX_INVALID_ARGUMENT,
         "sharding is NULL");
  ck_assert_ptr_null(rt);
  EXPECT(tpx_runtime_create(o->sh, NULL, NULL, &rt, E_), TPX_INVALID_ARGUMENT,
         "mesh comm is NULL");
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.struct_size = 0;
  EXPECT(tpx_runtime_create(o->sh, mc, &ro, &rt, E_), TPX_INVALID_ARGUMENT,
         "struct_size");
  ro = (tpx_runtime_options)TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = TPX_DTYPE_I8;
  EXPECT(tpx_runtime_create(o->sh, mc, &ro, &rt, E_), TPX_UNSUPPORTED,
         "storage_dtype");
  ro.storage_dtype = TPX_DTYPE_INVALID;
  ro.grad_divide_factor = -1;
  EXPECT(tpx_runtime_create(o->sh, mc, &ro, &rt, E_), TPX_INVALID_ARGUMENT,
         "grad_divide_factor");
  /* A sharding on another mesh of the same world size. */
  const char *names[2] = {"dp_shard", "tp"};
  int64_t sizes[2] = {1, 1};
  tpx_mesh *other = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, &other, NULL), TPX_OK);
  tpx_sharding *sh2 = NULL;
  ck_assert_int_eq(tpx_sharding_create(o->model, NULL, other, NULL, &sh2, NULL),
                   TPX_OK);
  EXPECT(tpx_runtime_create(sh2, mc, NULL, &rt, E_), TPX_INVALID_ARGUMENT,
         "differs");
  tpx_sharding_destroy(sh2);
  tpx_mesh_destroy(other);
  ck_assert_ptr_null(rt);
  /* NULL handles everywhere. */
  tpx_runtime_destroy(NULL);
  ck_assert_int_eq(tpx_runtime_rank(NULL), -1);
  ck_assert_uint_eq(tpx_runtime_num_units(NULL), 0);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(NULL, TPX_RUNTIME_MEM_TOTAL),
                   -1);
  ck_assert_ptr_null(tpx_runtime_sharding(NULL));
  EXPECT(tpx_runtime_unshard(NULL, 0, TPX_RUNTIME_FORWARD, E_),
         TPX_INVALID_ARGUMENT, "runtime is NULL");
  EXPECT(tpx_runtime_grad_norm(NULL, 2.0, NULL, E_), TPX_INVALID_ARGUMENT,
         "NULL");
  EXPECT(tpx_runtime_zero_grads(NULL, E_), TPX_INVALID_ARGUMENT, "NULL");
  EXPECT(tpx_runtime_adamw_step(NULL, NULL, E_), TPX_INVALID_ARGUMENT, "NULL");
  return TPX_OK;
}

START_TEST(t_bad_create) {
  one o;
  one_init(&o, 1, TPX_DTYPE_INVALID);
  o.fn = bad_create;
  one_run(&o);
  one_free(&o);
}
END_TEST

static tpx_status create_fails(one *o, tpx_mesh_comm *mc, tpx_error *err) {
  (void)err;
  tpx_runtime *rt = NULL;
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = o->storage;
  EXPECT(tpx_runtime_create(o->sh, mc, &ro, &rt, E_), TPX_UNSUPPORTED,
         o->fsdp ? "lin.extra" : "without FSDP");
  ck_assert_ptr_null(rt);
  return TPX_OK;
}

START_TEST(t_bad_dtype) {
  one o;
  one_init(&o, 1, TPX_DTYPE_I32); /* an integer parameter */
  o.fn = create_fails;
  one_run(&o);
  one_free(&o);
  one_init(&o, 0, TPX_DTYPE_INVALID); /* bf16 storage without FSDP */
  o.storage = TPX_DTYPE_BF16;
  o.fn = create_fails;
  one_run(&o);
  one_free(&o);
}
END_TEST

static tpx_status bad_calls(one *o, tpx_mesh_comm *mc, tpx_error *err) {
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_runtime_create(o->sh, mc, NULL, &rt, err);
  if (st != TPX_OK)
    return st;
  float full[2] = {1, 2};
  tpx_runtime_param_info in;
  EXPECT(tpx_runtime_param(rt, 5, &in, E_), TPX_OUT_OF_RANGE, "index 5");
  EXPECT(tpx_runtime_param(rt, -1, &in, E_), TPX_OUT_OF_RANGE, "index -1");
  EXPECT(tpx_runtime_param(rt, 0, NULL, E_), TPX_INVALID_ARGUMENT,
         "out is NULL");
  ck_assert_int_eq(tpx_runtime_param_unit(rt, 7), -1);
  EXPECT(tpx_runtime_load_param(rt, 0, NULL, TPX_DTYPE_F32, E_),
         TPX_INVALID_ARGUMENT, "lin.weight");
  EXPECT(tpx_runtime_load_param(rt, 0, full, TPX_DTYPE_I32, E_),
         TPX_UNSUPPORTED, "lin.weight");
  EXPECT(tpx_runtime_load_param(rt, 3, full, TPX_DTYPE_F32, E_),
         TPX_OUT_OF_RANGE, "index 3");
  EXPECT(tpx_runtime_gather_param(rt, 0, NULL, TPX_DTYPE_F32, E_),
         TPX_INVALID_ARGUMENT, "output buffer");
  EXPECT(tpx_runtime_gather_grad(rt, 0, full, TPX_DTYPE_U8, E_),
         TPX_UNSUPPORTED, "u8");
  size_t nu = tpx_runtime_num_units(rt);
  EXPECT(tpx_runtime_unshard(rt, nu, TPX_RUNTIME_FORWARD, E_), TPX_OUT_OF_RANGE,
         "unit");
  EXPECT(tpx_runtime_unshard(rt, 0, (tpx_runtime_phase)7, E_),
         TPX_INVALID_ARGUMENT, "phase 7");
  EXPECT(tpx_runtime_reshard(rt, nu + 3, TPX_RUNTIME_FORWARD, E_),
         TPX_OUT_OF_RANGE, "unit");
  EXPECT(tpx_runtime_reduce_grads(rt, 0, E_), TPX_INVALID_ARGUMENT,
         "no unreduced unsharded gradients");
  /* Unsharded: loading and stepping are refused; resharding with
   * unreduced gradients too. */
  OK(tpx_runtime_unshard(rt, 0, TPX_RUNTIME_BACKWARD, E_));
  EXPECT(tpx_runtime_load_param(rt, 0, full, TPX_DTYPE_F32, E_),
         TPX_INVALID_ARGUMENT, "unsharded");
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  EXPECT(tpx_runtime_adamw_step(rt, &ao, E_), TPX_INVALID_ARGUMENT,
         "unsharded");
  EXPECT(tpx_runtime_reshard(rt, 0, TPX_RUNTIME_BACKWARD, E_),
         TPX_INVALID_ARGUMENT, "unreduced");
  OK(tpx_runtime_reduce_grads(rt, 0, E_));
  OK(tpx_runtime_reshard(rt, 0, TPX_RUNTIME_BACKWARD, E_));
  double n = 0;
  EXPECT(tpx_runtime_grad_norm(rt, 1.0, &n, E_), TPX_INVALID_ARGUMENT,
         "norm_type 1");
  EXPECT(tpx_runtime_clip_grads(rt, 0.0, 1.0, E_), TPX_INVALID_ARGUMENT,
         "max_norm");
  EXPECT(tpx_runtime_clip_grads(rt, INFINITY, 1.0, E_), TPX_INVALID_ARGUMENT,
         "max_norm");
  EXPECT(tpx_runtime_clip_grads(rt, NAN, 1.0, E_), TPX_INVALID_ARGUMENT,
         "max_norm");
  ao.beta2 = 1.0;
  EXPECT(tpx_runtime_adamw_step(rt, &ao, E_), TPX_INVALID_ARGUMENT, "betas");
  ao = (tpx_adamw_options)TPX_ADAMW_OPTIONS_INIT;
  ao.struct_size = 3;
  EXPECT(tpx_runtime_adamw_step(rt, &ao, E_), TPX_INVALID_ARGUMENT,
         "struct_size");
  ck_assert_int_eq(tpx_runtime_optimizer_steps(rt), 0);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, (tpx_runtime_mem_kind)9),
                   -1);
  tpx_runtime_destroy(rt);
  return TPX_OK;
}

START_TEST(t_bad_calls) {
  one o;
  one_init(&o, 1, TPX_DTYPE_INVALID);
  o.fn = bad_calls;
  one_run(&o);
  one_free(&o);
}
END_TEST

/* ---- numbers by hand ---- */

static void set_grad(tpx_runtime *rt, const float *g) {
  tpx_runtime_param_info in;
  OK(tpx_runtime_unshard(rt, 0, TPX_RUNTIME_BACKWARD, E_));
  OK(tpx_runtime_param(rt, 0, &in, E_));
  memcpy(in.unsharded_grad, g, 2 * sizeof(float));
  OK(tpx_runtime_reduce_grads(rt, 0, E_));
  OK(tpx_runtime_reshard(rt, 0, TPX_RUNTIME_BACKWARD, E_));
}

static tpx_status by_hand(one *o, tpx_mesh_comm *mc, tpx_error *err) {
  tpx_runtime *rt = NULL;
  tpx_status st = tpx_runtime_create(o->sh, mc, NULL, &rt, err);
  if (st != TPX_OK)
    return st;
  float p0[2] = {1.0f, -2.0f}, g[2] = {3.0f, -4.0f}, out[2];
  OK(tpx_runtime_load_param(rt, 0, p0, TPX_DTYPE_F32, E_));
  set_grad(rt, g);
  double n2 = 0, ninf = 0, tot = 0;
  OK(tpx_runtime_grad_norm(rt, 2.0, &n2, E_));
  OK(tpx_runtime_grad_norm(rt, INFINITY, &ninf, E_));
  ck_assert_double_eq_tol(n2, 5.0, 1e-12);
  ck_assert_double_eq_tol(ninf, 4.0, 1e-12);
  /* clip to 1: g * 1/(5 + 1e-6) */
  OK(tpx_runtime_clip_grad_norm(rt, 1.0, 2.0, &tot, E_));
  ck_assert_double_eq_tol(tot, 5.0, 1e-12);
  OK(tpx_runtime_gather_grad(rt, 0, out, TPX_DTYPE_F32, E_));
  ck_assert_double_eq_tol(out[0], 3.0 / (5.0 + 1e-6), 1e-7);
  ck_assert_double_eq_tol(out[1], -4.0 / (5.0 + 1e-6), 1e-7);
  /* AdamW, 3 steps with g = (0.5, -0.25), lr 0.1, wd 0.01, in double. */
  double p[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  const float gs[2] = {0.5f, -0.25f};
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = 0.1;
  ao.weight_decay = 0.01;
  for (int t = 1; t <= 3; t++) {
    OK(tpx_runtime_zero_grads(rt, E_));
    set_grad(rt, gs);
    OK(tpx_runtime_adamw_step(rt, &ao, E_));
    for (int i = 0; i < 2; i++) {
      p[i] *= 1 - 0.1 * 0.01;
      m[i] = 0.9 * m[i] + 0.1 * gs[i];
      v[i] = 0.999 * v[i] + 0.001 * gs[i] * gs[i];
      double mh = m[i] / (1 - pow(0.9, t)), vh = v[i] / (1 - pow(0.999, t));
      p[i] -= 0.1 * mh / (sqrt(vh) + 1e-8);
    }
    OK(tpx_runtime_gather_param(rt, 0, out, TPX_DTYPE_F32, E_));
    for (int i = 0; i < 2; i++)
      ck_assert_msg(fabs(out[i] - p[i]) <= 1e-6, "step %d p[%d] %.9g vs %.9g",
                    t, i, out[i], p[i]);
  }
  /* torch's clip: an infinite norm zeroes the gradients, NaN poisons them */
  OK(tpx_runtime_clip_grads(rt, 1.0, INFINITY, E_));
  OK(tpx_runtime_gather_grad(rt, 0, out, TPX_DTYPE_F32, E_));
  ck_assert(out[0] == 0.0f && out[1] == 0.0f);
  OK(tpx_runtime_clip_grads(rt, 1.0, NAN, E_));
  OK(tpx_runtime_gather_grad(rt, 0, out, TPX_DTYPE_F32, E_));
  ck_assert(isnan(out[0]) && isnan(out[1]));
  ck_assert_int_eq(tpx_runtime_optimizer_steps(rt), 3);
  ck_assert_int_eq(tpx_runtime_allocated_bytes(rt, TPX_RUNTIME_MEM_OPTIMIZER),
                   2 * 2 * 4);
  tpx_runtime_destroy(rt);
  return TPX_OK;
}

START_TEST(t_by_hand) {
  one o;
  one_init(&o, 1, TPX_DTYPE_INVALID);
  o.fn = by_hand;
  one_run(&o);
  one_free(&o);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_errors");
  TCase *tc = tcase_create("errors");
  tcase_add_test(tc, t_bad_create);
  tcase_add_test(tc, t_bad_dtype);
  tcase_add_test(tc, t_bad_calls);
  tcase_add_test(tc, t_by_hand);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
