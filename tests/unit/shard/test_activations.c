/* test_activations.c — the activation term of the memory estimate
 * (core/src/shard/activations.c, act_formula.c) beyond the base table of
 * test_memory.c: context parallelism (each rank holds seq/cp tokens plus
 * the gathered K and V of one layer), the attention implementation and the
 * activation dtype. Figures by hand; formulas in docs/MEMORY.md. */
#include "shard_fixture.h"

/* Mesh (dp_replicate 1, dp_shard 1, cp, tp). */
static tpx_mesh *cp_mesh(int64_t cp, int64_t tp) {
  const char *names[4] = {"dp_replicate", "dp_shard", "cp", "tp"};
  int64_t sizes[4] = {1, 1, cp, tp};
  tpx_mesh *mesh = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_mesh_create(names, sizes, 4, &mesh, &e) == TPX_OK, "%s",
                e.message);
  return mesh;
}

static int64_t act_of(int64_t cp, int64_t tp, int64_t seq) {
  tpx_model *m = fx_llama();
  tpx_plan *p = tp > 1 ? fx_llama_plan() : NULL;
  tpx_mesh *mesh = cp_mesh(cp, tp);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  o.batch = 2;
  o.seq = seq;
  tpx_memory x;
  tpx_error e = {0};
  ck_assert_msg(tpx_memory_rank(sh, &o, 0, &x, &e) == TPX_OK, "%s", e.message);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  if (p)
    tpx_plan_destroy(p);
  tpx_model_destroy(m);
  return x.activations;
}

/* cp 2 holds half the tokens, plus the K and V of one layer gathered over
 * the full sequence: batch 2 x seq 16 = 32 tokens, 8 kv heads x 8, bf16:
 * 32 * 2 * (2 * 8 * 8) = 8192 bytes. */
START_TEST(cp_halves) {
  int64_t one = act_of(1, 1, 16);
  int64_t half = act_of(1, 1, 8); /* cp 1 at half the tokens */
  int64_t two = act_of(2, 1, 16);
  ck_assert_int_eq(two, half + 8192);
  /* about half: within 10% of one / 2 */
  ck_assert_int_lt(two, one / 2 + one / 20);
  ck_assert_int_gt(two, one / 2 - one / 20);
  /* cp 4 at four times the sequence holds about cp 1's figure */
  int64_t four = act_of(4, 1, 64);
  ck_assert_int_eq(four, one + 4 * 8192);
  /* with tp 2, the gathered K/V are the local heads' (4 kv heads) */
  ck_assert_int_eq(act_of(2, 2, 16), act_of(1, 2, 8) + 4096);
}
END_TEST

/* The attention implementation (tiny llama, tp 1, batch 2 x seq 16 = 32
 * tokens, bf16; test_memory.c has the flash figure, 216708):
 * flash and SDPA save q, k, v, the output and the f32 LSE:
 *   32 * (2*8*(2*8 + 2*8) + 4*8) = 17408 a layer;
 * eager saves q, k and v repeated to 8 heads, the output (4*2*8*8 = 512),
 * the f32 softmax over 16 keys and its bf16 copy (8*16*(4+2) = 768):
 *   32 * 1280 = 40960 a layer, 2 layers: +47104. */
START_TEST(attention_kinds) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 1, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  o.batch = 2;
  o.seq = 16;
  tpx_memory x;
  static const struct {
    tpx_attention a;
    int64_t want;
  } cases[] = {{TPX_ATTENTION_FLASH, 216708},
               {TPX_ATTENTION_SDPA, 216708},
               {TPX_ATTENTION_EAGER, 216708 + 47104}};
  for (size_t i = 0; i < 3; i++) {
    o.attention = cases[i].a;
    ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, &x, NULL), TPX_OK);
    ck_assert_int_eq(x.activations, cases[i].want);
  }
  /* an older caller's struct (without `attention`) gets flash */
  o.attention = TPX_ATTENTION_EAGER;
  o.struct_size = offsetof(tpx_memory_options, attention);
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, &x, NULL), TPX_OK);
  ck_assert_int_eq(x.activations, 216708);
  o.struct_size = sizeof o;
  o.attention = (tpx_attention)9;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, &x, &e), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "attention 9"));
  /* names */
  tpx_attention a;
  ck_assert_int_eq(tpx_attention_parse("sdpa", &a, NULL), TPX_OK);
  ck_assert_int_eq(a, TPX_ATTENTION_SDPA);
  ck_assert_int_eq(tpx_attention_parse("eager", &a, NULL), TPX_OK);
  ck_assert_int_eq(a, TPX_ATTENTION_EAGER);
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_attention_parse("flash2", &a, &e), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "'flash2'"));
  ck_assert_int_eq(tpx_attention_parse(NULL, &a, NULL), TPX_INVALID_ARGUMENT);
  ck_assert_str_eq(tpx_attention_name(TPX_ATTENTION_FLASH), "flash");
  ck_assert_ptr_null(tpx_attention_name((tpx_attention)3));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* f32 activations (no FSDP, f32 asked): every saved tensor at 4 bytes and
 * no cast copy of the softmax. Per layer, per token: 2 norms into linears
 * 2*(4*64 + 4 + 4*64 + 4*64) = 1544, eager attention 4*4*8*8 + 8*16*4 =
 * 1536, MLP 4*128*4 = 2048 -> 5128 * 32 = 164096; head 32*(4*64 + 4 +
 * 2*4*64 + 4*256 + 16) + RoPE 2*16*8*4 + 4 = 57984 + 1024 + 4 = 59012;
 * all: 2*164096 + 59012 = 387204. */
START_TEST(f32_eager) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 1, 1);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = 0;
  tpx_sharding *sh = fx_shard(m, NULL, mesh, &so);
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  o.batch = 2;
  o.seq = 16;
  o.attention = TPX_ATTENTION_EAGER;
  o.activation_dtype = TPX_DTYPE_F32;
  tpx_memory x;
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, &x, NULL), TPX_OK);
  ck_assert_int_eq(x.activations, 387204);
  ck_assert_int_eq(tpx_memory_activation_dtype(sh, &o), TPX_DTYPE_F32);
  /* unset: no FSDP, so the parameters' dtype (bf16) */
  ck_assert_int_eq(tpx_memory_activation_dtype(sh, NULL), TPX_DTYPE_BF16);
  tpx_sharding_destroy(sh);
  /* with FSDP: the mixed-precision param dtype */
  so = (tpx_sharding_options)TPX_SHARDING_OPTIONS_INIT;
  so.param_dtype = TPX_DTYPE_F16;
  sh = fx_shard(m, NULL, mesh, &so);
  ck_assert_int_eq(tpx_memory_activation_dtype(sh, NULL), TPX_DTYPE_F16);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("activations");
  TCase *tc = tcase_create("activations");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, cp_halves);
  tcase_add_test(tc, attention_kinds);
  tcase_add_test(tc, f32_eager);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
