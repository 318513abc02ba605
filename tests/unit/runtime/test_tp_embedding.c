/* test_tp_embedding.c — tpx_tp_embedding_* on local threads: vocab-parallel
 * (rowwise / vocab_parallel_embedding / gemma4: masked lookup, all-reduce or
 * reduce-scatter on the sequence; masked scatter-add), colwise (Shard(1)),
 * prepare_module_output and unstyled embeddings, at tp 1..4 with even,
 * uneven (1000 over 3, 10 over 4) and empty (2 over 4) vocab shards, against
 * a single-rank lookup and scatter-add; bad input. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"

static const char plan_colwise[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": "
    "\"model.embed_tokens\", \"style\": \"colwise\"}]}";
static const char plan_colwise_rep[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": "
    "\"model.embed_tokens\", \"style\": \"colwise\", \"output_layouts\": "
    "[\"replicate\"]}]}";
static const char plan_prepare_out[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": "
    "\"model.embed_tokens\", \"style\": \"prepare_module_output\", "
    "\"output_layouts\": [\"replicate\"], \"desired_output_layouts\": "
    "[\"shard(1)\"], \"use_local_output\": false}]}";
static const char plan_none[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": "
    "\"model.layers.*.mlp.up_proj\", \"style\": \"colwise\"}]}";

typedef struct emb_case {
  int plan; /* 0 llama sp0 (rowwise), 1 llama sp1 (vocab, S(1)), 2 zoo
               (gemma4 vocab, S(1)), 3 colwise, 4 colwise out R, 5
               prepare_module_output, 6 unstyled */
  int64_t vocab, tp, T;
} emb_case;

static const emb_case cases[] = {
    {0, 256, 2, 7},  {0, 256, 3, 7}, {0, 256, 4, 7},  {0, 1000, 3, 7},
    {0, 10, 4, 7},   {0, 2, 4, 7},   {1, 256, 2, 7},  {1, 1000, 3, 7},
    {1, 10, 4, 7},   {1, 2, 4, 2},   {2, 1000, 3, 7}, {2, 256, 4, 3},
    {3, 256, 3, 7},  {4, 256, 3, 7}, {5, 1000, 3, 7}, {6, 256, 2, 7},
    {0, 1000, 1, 7}, {1, 256, 1, 7},
};

static tpx_plan *plan_of(const tpx_model *m, int which, int64_t tp) {
  switch (which) {
  case 0: return rt_llama_plan(m, 0, tp);
  case 1: return rt_llama_plan(m, 1, tp);
  case 2: return rt_plan_json(rt_zoo_plan);
  case 3: return rt_plan_json(plan_colwise);
  case 4: return rt_plan_json(plan_colwise_rep);
  case 5: return rt_plan_json(plan_prepare_out);
  default: return rt_plan_json(plan_none);
  }
}

START_TEST(test_embedding) {
  const emb_case *c = &cases[_i];
  tpx_model *m = rt_model(c->vocab);
  tpx_plan *p = plan_of(m, c->plan, c->tp);
  rt_world w = rt_world_of(m, p, 1, c->tp);
  tpx_sharding *sh = w.sh;
  rt_arg a = {sh, c->T, 0, TPX_DTYPE_F32, 0, 0, 0};
  rt_run(case_embedding, &a, "embedding");
  rt_world_free(&w);
}
END_TEST

/* With a data-parallel dim: every dp rank its own ids, tp = 2. */
START_TEST(test_embedding_dp) {
  tpx_model *m = rt_model(1000);
  tpx_plan *p = rt_llama_plan(m, 1, 2);
  rt_world w = rt_world_of(m, p, 2, 2);
  tpx_sharding *sh = w.sh;
  rt_arg a = {sh, 5, 0, TPX_DTYPE_F32, 0, 0, 0};
  rt_run(case_embedding, &a, "embedding dp=2");
  rt_world_free(&w);
}
END_TEST

/* bf16 weights: lookup and a bf16 grad accumulation. */
static uint16_t bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* exact for the small values used */
}
static float unbf(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static tpx_status bf16_body(tpx_comm *world, void *arg, tpx_error *err) {
  rt_sh_arg *b = arg;
  tpx_mesh_comm *mc;
  tpx_status st =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(b->sh), &mc, err);
  if (st != TPX_OK)
    return st;
  const tpx_model *m = tpx_sharding_model(b->sh);
  int64_t mod = tpx_model_find_module(m, "model.embed_tokens");
  int r = tpx_comm_rank(world);
  /* V = 10 over tp = 2: rows [5r, 5r + 5); weight[v][h] = v + (h%4)/4 */
  int64_t ws[2] = {5, 64}, is[2] = {1, 3}, os[3] = {1, 3, 64};
  uint16_t w[5 * 64], g[3 * 64], o[3 * 64], wg[5 * 64];
  for (int i = 0; i < 5 * 64; i++) {
    w[i] = bf((float)(5 * r + i / 64) + (float)(i % 4) * 0.25f);
    wg[i] = bf(0.0f);
  }
  for (int i = 0; i < 3 * 64; i++) g[i] = bf(1.0f);
  int32_t ids[3] = {1, 7, 1};
  tpx_tensor ti = tpx_tensor_make(ids, TPX_DTYPE_I32, 2, is);
  tpx_tensor tw = tpx_tensor_make(w, TPX_DTYPE_BF16, 2, ws);
  tpx_tensor to = tpx_tensor_make(o, TPX_DTYPE_BF16, 3, os);
  tpx_tensor tg = tpx_tensor_make(g, TPX_DTYPE_BF16, 3, os);
  tpx_tensor twg = tpx_tensor_make(wg, TPX_DTYPE_BF16, 2, ws);
  st = tpx_tp_embedding_forward(b->sh, mc, mod, &ti, &tw, &to, err);
  if (st == TPX_OK)
    st = tpx_tp_embedding_backward(b->sh, mc, mod, &ti, &tg, &twg, err);
  for (int t = 0; st == TPX_OK && t < 3; t++)
    for (int h = 0; h < 64; h++) {
      float want = (float)ids[t] + (float)(h % 4) * 0.25f;
      if (unbf(o[t * 64 + h]) != want)
        st = tpx_error_set(err, TPX_VALIDATION, "bf16 out[%d][%d] = %g", t, h,
                           unbf(o[t * 64 + h]));
    }
  /* id 1 twice on rank 0 (row 1), id 7 once on rank 1 (row 2) */
  for (int i = 0; st == TPX_OK && i < 5 * 64; i++) {
    int row = i / 64;
    float want = r == 0 ? (row == 1 ? 2.0f : 0.0f) : (row == 2 ? 1.0f : 0.0f);
    if (unbf(wg[i]) != want)
      st = tpx_error_set(err, TPX_VALIDATION, "bf16 grad[%d] = %g, want %g", i,
                         unbf(wg[i]), want);
  }
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(test_embedding_bf16) {
  tpx_model *m = rt_model(10);
  tpx_plan *p = rt_llama_plan(m, 0, 2);
  rt_world w = rt_world_of(m, p, 1, 2);
  tpx_sharding *sh = w.sh;
  rt_run_body(bf16_body, sh);
  rt_world_free(&w);
}
END_TEST

/* ---- bad input ---------------------------------------------------------- */

static tpx_status bad_body(tpx_comm *world, void *arg, tpx_error *err) {
  rt_sh_arg *b = arg;
  const tpx_sharding *sh = b->sh;
  tpx_mesh_comm *mc;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK)
    return st;
  const tpx_model *m = tpx_sharding_model(sh);
  int64_t mod = tpx_model_find_module(m, "model.embed_tokens");
  int64_t lin = tpx_model_find_module(m, "model.layers.0.mlp.up_proj");
  /* V = 10 over tp = 2; llama sp0: the output is replicated */
  int64_t ws[2] = {5, 64}, wbad[2] = {4, 64}, is[2] = {1, 3},
          os[3] = {1, 3, 64}, obad[3] = {1, 2, 64};
  float w[5 * 64] = {0}, o[3 * 64], f[3] = {0};
  int64_t ids[3] = {1, 10, 2}, ok_ids[3] = {1, 2, 3};
  tpx_tensor ti = tpx_tensor_make(ids, TPX_DTYPE_I64, 2, is);
  tpx_tensor tok = tpx_tensor_make(ok_ids, TPX_DTYPE_I64, 2, is);
  tpx_tensor tf = tpx_tensor_make(f, TPX_DTYPE_F32, 2, is);
  tpx_tensor tw = tpx_tensor_make(w, TPX_DTYPE_F32, 2, ws);
  tpx_tensor twb = tpx_tensor_make(w, TPX_DTYPE_F32, 2, wbad);
  tpx_tensor twi = tpx_tensor_make(w, TPX_DTYPE_I32, 2, ws);
  tpx_tensor to = tpx_tensor_make(o, TPX_DTYPE_F32, 3, os);
  tpx_tensor tob = tpx_tensor_make(o, TPX_DTYPE_F32, 3, obad);
  tpx_tensor to16 = tpx_tensor_make(o, TPX_DTYPE_BF16, 3, os);
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, mod, &ti, &tw, &to, &e_),
            TPX_OUT_OF_RANGE,
            "of module 'model.embed_tokens': ids[1] = 10 is outside the "
            "vocabulary [0, 10)");
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, mod, &tf, &tw, &to, &e_),
            TPX_INVALID_ARGUMENT, "ids must be int32 or int64, not f32");
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, mod, &tok, &twb, &to, &e_),
            TPX_INVALID_ARGUMENT,
            "weight has local shape [4, 64], expected [5, 64]");
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, mod, &tok, &twi, &to, &e_),
            TPX_INVALID_ARGUMENT, "weight must be f32 or bf16, not i32");
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, mod, &tok, &tw, &tob, &e_),
            TPX_INVALID_ARGUMENT,
            "output has local shape [1, 2, 64], expected [1, 3, 64]");
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, mod, &tok, &tw, &to16, &e_),
            TPX_INVALID_ARGUMENT,
            "output dtype bf16 differs from the weight's");
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, lin, &tok, &tw, &to, &e_),
            TPX_INVALID_ARGUMENT, "the module is a linear, not an embedding");
  RT_EXPECT(tpx_tp_embedding_backward(sh, mc, mod, &ti, &to, &tw, &e_),
            TPX_OUT_OF_RANGE, "ids[1] = 10");
  RT_EXPECT(tpx_tp_embedding_backward(sh, mc, mod, &tok, &tob, &tw, &e_),
            TPX_INVALID_ARGUMENT, "grad_out has local shape [1, 2, 64]");
  RT_EXPECT(tpx_tp_embedding_backward(sh, mc, mod, &tok, &to, &twb, &e_),
            TPX_INVALID_ARGUMENT, "weight_grad has local shape [4, 64]");
  RT_EXPECT(tpx_tp_embedding_forward(sh, mc, mod, NULL, &tw, &to, &e_),
            TPX_INVALID_ARGUMENT, "ids: NULL tensor");
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

START_TEST(test_bad_input) {
  tpx_model *m = rt_model(10);
  tpx_plan *p = rt_llama_plan(m, 0, 2);
  rt_world w = rt_world_of(m, p, 1, 2);
  tpx_sharding *sh = w.sh;
  rt_run_body(bad_body, sh);
  int64_t mod = tpx_model_find_module(m, "model.embed_tokens");
  int64_t is[1] = {4}, out[2], wl[2];
  tpx_error e = {0};
  ck_assert_int_eq(tpx_tp_embedding_shape(sh, mod, 1, is, 1, out, wl, &e),
                   TPX_OK);
  ck_assert_int_eq(wl[0], 5);
  ck_assert_int_eq(out[0], 4); /* rowwise: all-reduced, replicated */
  ck_assert_int_eq(out[1], 64);
  ck_assert_int_eq(tpx_tp_embedding_shape(sh, mod, 1, is, 0, out, wl, &e),
                   TPX_INVALID_ARGUMENT);
  rt_world_free(&w);
}
END_TEST

/* With FSDP on, the weight the calls take is still the TP-local one (the
 * unsharded FSDP parameter), not the FSDP shard. */
START_TEST(test_fsdp_weight_is_tp_local) {
  tpx_model *m = rt_model(1000);
  tpx_plan *p = rt_llama_plan(m, 1, 2);
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL); /* FSDP on by default */
  int64_t mod = tpx_model_find_module(m, "model.embed_tokens");
  int64_t ids[2] = {2, 5}, out[3], wl[2];
  tpx_error e = {0};
  for (int64_t r = 0; r < 4; r++) {
    ck_assert_int_eq(tpx_tp_embedding_shape(sh, mod, r, ids, 2, out, wl, &e),
                     TPX_OK);
    ck_assert_int_eq(wl[0], 500);
    ck_assert_int_eq(wl[1], 64);
    ck_assert_int_eq(out[1], r % 2 == 0 ? 3 : 2); /* Shard(1) of 5 */
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_tp_embedding");
  TCase *tc = tcase_create("embedding");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_embedding, 0,
                      (int)(sizeof cases / sizeof cases[0]));
  tcase_add_test(tc, test_embedding_dp);
  tcase_add_test(tc, test_embedding_bf16);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_fsdp_weight_is_tp_local);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
