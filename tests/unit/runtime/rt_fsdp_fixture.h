/* rt_fsdp_fixture.h — models, meshes and reference data shared by the runtime
 * (rt_*) test suites (header-only; static functions).
 *
 * The hand-built tiny model (f32), odd sizes so every split is uneven:
 *   emb            embedding weight [7, 5]
 *   layers.{0,1}.lin   linear weight [6, 5], bias [6]
 *   layers.{0,1}.norm  norm weight [5], scale [] (0-d)
 *   head           linear weight [7, 5], tied to emb.weight
 * plan: emb rowwise (input Replicate), layers.*.lin colwise, head colwise
 * (use_local_output 0); optionally layers.*.norm sequence_parallel.
 * FSDP units: layers.0, layers.1, root. */
#ifndef TPX_TESTS_RT_FSDP_FIXTURE_H
#define TPX_TESTS_RT_FSDP_FIXTURE_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../shard/shard_fixture.h"
#include "comm/local_test.h"
#include "device/sim_tag.h"
#include "tpx/tpx.h"

static inline void rt_add_dt(tpx_model *m, const char *mod,
                             tpx_module_kind kind, const char *name,
                             const int64_t *shape, int ndim, tpx_dtype dt) {
  tpx_error e = {0};
  if (tpx_model_find_module(m, mod) < 0)
    ck_assert_int_eq(tpx_model_add_module(m, mod, kind, NULL, &e), TPX_OK);
  ck_assert_msg(tpx_model_add_param(m, mod, name, shape, ndim, dt, NULL, &e) ==
                    TPX_OK,
                "%s", e.message);
}

static inline void rt_add(tpx_model *m, const char *mod, tpx_module_kind kind,
                          const char *name, const int64_t *shape, int ndim) {
  rt_add_dt(m, mod, kind, name, shape, ndim, TPX_DTYPE_F32);
}

/* The tiny model with every parameter in `dt`. */
static inline tpx_model *rt_tiny_model_dt(tpx_dtype dt) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  int64_t emb[2] = {7, 5}, w[2] = {6, 5}, b[1] = {6}, n[1] = {5};
  rt_add_dt(m, "emb", TPX_MODULE_EMBEDDING, "weight", emb, 2, dt);
  for (int l = 0; l < 2; l++) {
    char lin[64], norm[64];
    snprintf(lin, sizeof lin, "layers.%d.lin", l);
    snprintf(norm, sizeof norm, "layers.%d.norm", l);
    rt_add_dt(m, lin, TPX_MODULE_LINEAR, "weight", w, 2, dt);
    rt_add_dt(m, lin, TPX_MODULE_LINEAR, "bias", b, 1, dt);
    rt_add_dt(m, norm, TPX_MODULE_NORM, "weight", n, 1, dt);
    rt_add_dt(m, norm, TPX_MODULE_NORM, "scale", NULL, 0, dt);
  }
  ck_assert_int_eq(tpx_model_add_module(m, "head", TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_msg(tpx_model_tie(m, "head.weight", "emb.weight", &e) == TPX_OK,
                "%s", e.message);
  return m;
}

static inline tpx_model *rt_tiny_model(void) {
  return rt_tiny_model_dt(TPX_DTYPE_F32);
}

static inline tpx_plan *rt_tiny_plan(int sp) {
  tpx_plan *p = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_plan_create(&p, &e), TPX_OK);
  tpx_style emb = tpx_style_default(TPX_STYLE_ROWWISE);
  emb.input_layouts.items[0] = tpx_placement_replicate();
  ck_assert_int_eq(tpx_plan_set(p, "emb", &emb, 0, &e), TPX_OK);
  tpx_style col = tpx_style_default(TPX_STYLE_COLWISE);
  ck_assert_int_eq(tpx_plan_set(p, "layers.*.lin", &col, 0, &e), TPX_OK);
  tpx_style head = tpx_style_default(TPX_STYLE_COLWISE);
  head.use_local_output = 0;
  ck_assert_int_eq(tpx_plan_set(p, "head", &head, 0, &e), TPX_OK);
  if (sp) {
    tpx_style s = tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
    ck_assert_int_eq(tpx_plan_set(p, "layers.*.norm", &s, 0, &e), TPX_OK);
  }
  return p;
}

/* Meshes: fx_mesh(dpr, dps, tp) of shard_fixture.h, ("dp_replicate",
 * "dp_shard", "tp"); FX_MAIN(suite) for main. */

/* Round to nearest even bf16 and back (what the runtime's casts do). */
static inline uint16_t rt_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float rt_from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Inside a rank body (needs `rank`): the call succeeds, else the rank's
 * message. E_ is the error struct to pass. */
#define RK_OK(call)                                                            \
  do {                                                                         \
    tpx_error e_ = {0};                                                        \
    tpx_status st_ = (call);                                                   \
    ck_assert_msg(st_ == TPX_OK, "rank %lld: %s: %s", (long long)rank,         \
                  tpx_status_name(st_), e_.message);                           \
  } while (0)
#define E_ (&e_)

/* Deterministic values. */
static inline float rt_weight(int64_t p, int64_t i) {
  return (float)(0.5 * sin(0.31 * (double)i + 1.7 * (double)p) + 0.01 * p);
}
static inline float rt_grad(int64_t p, int64_t i, int64_t d) {
  return (float)(sin(0.37 * (double)i + 1.3 * (double)p + 0.71 * (double)d) *
                 (1.0 + 0.1 * (double)d));
}

/* rt_grad(p, i, 0) for i < n, as `es`-byte elements (2: bf16, 4: f32):
 * the unsharded gradient a test writes in the runtime's compute dtype. The
 * caller frees it. */
static inline unsigned char *rt_grad_bytes(int64_t p, size_t n, size_t es) {
  unsigned char *g = malloc((n ? n : 1) * es);
  for (size_t i = 0; g && i < n; i++) {
    float v = rt_grad(p, (int64_t)i, 0);
    uint16_t h = rt_to_bf16(v);
    if (es == 2)
      memcpy(g + 2 * i, &h, 2);
    else
      memcpy(g + 4 * i, &v, 4);
  }
  return g;
}

/* Loads rt_weight(p, i) into every (non-alias) parameter of the runtime,
 * as full f32 tensors. */
static inline tpx_status rt_load_weights(tpx_runtime *rt, const tpx_model *m,
                                         tpx_error *err) {
  size_t np = tpx_model_num_params(m);
  tpx_status st = TPX_OK;
  for (size_t p = 0; p < np && st == TPX_OK; p++) {
    tpx_param_info in;
    tpx_model_param(m, (int64_t)p, &in, NULL);
    if (in.tied_to >= 0)
      continue;
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    float *full = malloc((size_t)(n ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) full[i] = rt_weight((int64_t)p, i);
    st = tpx_runtime_load_param(rt, (int64_t)p, full, TPX_DTYPE_F32, err);
    free(full);
  }
  return st;
}

/* Element `idx` (row-major in `box`) -> its flat index in the full tensor
 * of `shape`. */
static inline int64_t rt_global_index(const tpx_slice *box,
                                      const int64_t *shape, int64_t idx) {
  int64_t g = 0, rem = idx, coord[TPX_MAX_TENSOR_DIMS];
  for (int d = box->ndim - 1; d >= 0; d--) {
    int64_t len = box->length[d] ? box->length[d] : 1;
    coord[d] = rem % len;
    rem /= len;
  }
  for (int d = 0; d < box->ndim; d++)
    g = g * shape[d] + box->offset[d] + coord[d];
  return g;
}

/* Run fn on `world` local threads, with the world's buffers in the sim
 * memory space when `sim` (the sim space, or CUDA under TPX_TEST_DEVICE=cuda:
 * core/src/comm/local_test.h). */
static inline tpx_status rt_local_run(int world, int sim, tpx_local_fn fn,
                                      void *arg, tpx_error *err) {
  return tpx__local_run_sim(world, sim, fn, arg, err);
}

/* The test's own access to a runtime buffer (what a trainer's device
 * kernel does): untagged when the world is in sim memory. */
static inline void *rt_hv(int sim, const void *p) {
  return sim ? tpx__test_dev_host(p) : (void *)(uintptr_t)p;
}

#endif /* TPX_TESTS_RT_FSDP_FIXTURE_H */
