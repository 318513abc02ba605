/* test_fsdp.c — FSDP2 units, reshard flags, prefetch lists, HSDP and strided
 * placements, mixed-precision clearing, and per-rank / peak bytes checked
 * against hand computation (core/src/shard/fsdp.c, bytes.c). */
#include <stddef.h>

#include "shard_fixture.h"
#include "tpx/registry.h"

typedef struct {
  const char *fqn;
  int reshard;
  size_t nf;
  int64_t fwd[2];
  size_t nb;
  int64_t bwd[2];
} unit_case;

static void check_units(const tpx_sharding *sh, const unit_case *c, size_t n) {
  ck_assert_uint_eq(tpx_sharding_num_fsdp_units(sh), n);
  for (size_t i = 0; i < n; i++) {
    tpx_fsdp_unit u;
    ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, i, &u, NULL), TPX_OK);
    ck_assert_str_eq(u.fqn, c[i].fqn);
    ck_assert_msg(u.reshard_after_forward == c[i].reshard, "%s reshard %d",
                  u.fqn, u.reshard_after_forward);
    ck_assert_msg(u.num_fwd_prefetch == c[i].nf, "%s fwd %zu", u.fqn,
                  u.num_fwd_prefetch);
    ck_assert_msg(u.num_bwd_prefetch == c[i].nb, "%s bwd %zu", u.fqn,
                  u.num_bwd_prefetch);
    for (size_t j = 0; j < c[i].nf; j++)
      ck_assert_int_eq(u.fwd_prefetch[j], c[i].fwd[j]);
    for (size_t j = 0; j < c[i].nb; j++)
      ck_assert_int_eq(u.bwd_prefetch[j], c[i].bwd[j]);
    ck_assert_int_eq(u.is_root, c[i].fqn[0] == '\0');
  }
}

START_TEST(units_default) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  static const unit_case want[] = {
      {"model.layers.0", 1, 1, {1, 0}, 0, {0, 0}},
      {"model.layers.1", 0, 0, {0, 0}, 1, {0, 0}},
      /* NeMo Automodel 0.7.0: untied embeddings are units of their own,
       * the input one resharding, lm_head never */
      {"model.embed_tokens", 1, 0, {0, 0}, 0, {0, 0}},
      {"lm_head", 0, 0, {0, 0}, 0, {0, 0}},
      {"", 0, 0, {0, 0}, 0, {0, 0}},
  };
  check_units(sh, want, 5);
  tpx_fsdp_unit u;
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 0, &u, NULL), TPX_OK);
  ck_assert_uint_eq(u.num_params, 9); /* 7 linears + 2 norms */
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 2, &u, NULL), TPX_OK);
  ck_assert_uint_eq(u.num_params, 1);
  ck_assert_int_eq(u.group, -1);
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 4, &u, NULL), TPX_OK);
  ck_assert_uint_eq(u.num_params, 1); /* the final norm */
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 5, &u, NULL), TPX_OUT_OF_RANGE);
  /* parameter -> unit */
  tpx_param_sharding ps;
  int64_t q = tpx_model_find_param(m, "model.layers.1.self_attn.q_proj.weight");
  ck_assert_int_eq(tpx_sharding_param(sh, q, &ps, NULL), TPX_OK);
  ck_assert_int_eq(ps.fsdp_unit, 1);
  int64_t e = tpx_model_find_param(m, "model.embed_tokens.weight");
  ck_assert_int_eq(tpx_sharding_param(sh, e, &ps, NULL), TPX_OK);
  ck_assert_int_eq(ps.fsdp_unit, 2);
  int64_t h = tpx_model_find_param(m, "lm_head.weight");
  ck_assert_int_eq(tpx_sharding_param(sh, h, &ps, NULL), TPX_OK);
  ck_assert_int_eq(ps.fsdp_unit, 3);
  tpx_sharding_destroy(sh);
  tpx_model_destroy(m);

  /* Tied embeddings stay in the root, both of them. */
  fx_opts o = {0, 1, 0, 0, NULL};
  m = fx_model(&o);
  sh = fx_shard(m, p, mesh, NULL);
  static const unit_case tied[] = {
      {"model.layers.0", 1, 1, {1, 0}, 0, {0, 0}},
      {"model.layers.1", 0, 0, {0, 0}, 1, {0, 0}},
      {"", 0, 0, {0, 0}, 0, {0, 0}},
  };
  check_units(sh, tied, 3);
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 2, &u, NULL), TPX_OK);
  ck_assert_uint_eq(u.num_params, 2); /* embed, norm (lm_head: alias) */
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(units_depths_and_override) {
  fx_opts o = {0, 0, 0, 4, NULL};
  tpx_model *m = fx_model(&o);
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fwd_prefetch_depth = 2;
  so.bwd_prefetch_depth = 2;
  tpx_sharding *sh = fx_shard(m, NULL, mesh, &so);
  static const unit_case want[] = {
      {"model.layers.0", 1, 2, {1, 2}, 0, {0, 0}},
      {"model.layers.1", 1, 2, {2, 3}, 1, {0, 0}},
      {"model.layers.2", 1, 1, {3, 0}, 2, {1, 0}},
      {"model.layers.3", 0, 0, {0, 0}, 2, {2, 1}},
      {"model.embed_tokens", 1, 0, {0, 0}, 0, {0, 0}},
      {"lm_head", 0, 0, {0, 0}, 0, {0, 0}},
      {"", 0, 0, {0, 0}, 0, {0, 0}},
  };
  check_units(sh, want, 7);
  tpx_sharding_destroy(sh);

  /* fwd depth 0: no forward prefetch; bwd depth 1 */
  so.fwd_prefetch_depth = 0;
  so.bwd_prefetch_depth = 1;
  sh = fx_shard(m, NULL, mesh, &so);
  static const unit_case want0[] = {
      {"model.layers.0", 1, 0, {0, 0}, 0, {0, 0}},
      {"model.layers.1", 1, 0, {0, 0}, 1, {0, 0}},
      {"model.layers.2", 1, 0, {0, 0}, 1, {1, 0}},
      {"model.layers.3", 0, 0, {0, 0}, 1, {2, 0}},
      {"model.embed_tokens", 1, 0, {0, 0}, 0, {0, 0}},
      {"lm_head", 0, 0, {0, 0}, 0, {0, 0}},
      {"", 0, 0, {0, 0}, 0, {0, 0}},
  };
  check_units(sh, want0, 7);
  tpx_sharding_destroy(sh);

  /* an explicit False: every layer keeps its params, and no prefetch */
  so.fwd_prefetch_depth = 1;
  so.bwd_prefetch_depth = 2;
  so.reshard_after_forward = 0;
  sh = fx_shard(m, NULL, mesh, &so);
  static const unit_case wantf[] = {
      {"model.layers.0", 0, 0, {0, 0}, 0, {0, 0}},
      {"model.layers.1", 0, 0, {0, 0}, 0, {0, 0}},
      {"model.layers.2", 0, 0, {0, 0}, 0, {0, 0}},
      {"model.layers.3", 0, 0, {0, 0}, 0, {0, 0}},
      {"model.embed_tokens", 0, 0, {0, 0}, 0, {0, 0}},
      {"lm_head", 0, 0, {0, 0}, 0, {0, 0}},
      {"", 0, 0, {0, 0}, 0, {0, 0}},
  };
  check_units(sh, wantf, 7);
  tpx_sharding_destroy(sh);

  /* an explicit True: the last layer too; the root stays False */
  so.reshard_after_forward = 1;
  sh = fx_shard(m, NULL, mesh, &so);
  tpx_fsdp_unit u;
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 3, &u, NULL), TPX_OK);
  ck_assert_int_eq(u.reshard_after_forward, 1);
  ck_assert_uint_eq(u.num_bwd_prefetch, 2);
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 4, &u, NULL), TPX_OK);
  ck_assert_str_eq(u.fqn, "model.embed_tokens");
  ck_assert_int_eq(u.reshard_after_forward, 1);
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 5, &u, NULL), TPX_OK);
  ck_assert_str_eq(u.fqn, "lm_head"); /* the override never reaches it */
  ck_assert_int_eq(u.reshard_after_forward, 0);
  ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 6, &u, NULL), TPX_OK);
  ck_assert_int_eq(u.reshard_after_forward, 0);
  tpx_sharding_destroy(sh);

  /* FSDP off: no units, dp placements replicate */
  tpx_sharding_options off = TPX_SHARDING_OPTIONS_INIT;
  off.fsdp = 0;
  sh = fx_shard(m, NULL, mesh, &off);
  ck_assert_uint_eq(tpx_sharding_num_fsdp_units(sh), 0);
  char buf[64];
  ck_assert_str_eq(fx_pl(sh, "model.norm.weight", 1, buf, sizeof buf),
                   "replicate");
  ck_assert_int_eq(tpx_sharding_rank_peak_bytes(sh, 0),
                   tpx_sharding_rank_param_bytes(sh, 0));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* Language + vision layer lists, and a list nested in a list. */
START_TEST(units_vlm_and_nested) {
  tpx_model *m = fx_llama();
  tpx_error e = {0};
  int64_t w[2] = {8, 8};
  static const char *const extra[] = {
      "model.vision_tower.encoder.layers.0.fc",
      "model.vision_tower.encoder.layers.1.fc",
      "blocks.0.0.fc",
      "blocks.0.1.fc",
      "blocks.1.fc",
  };
  for (size_t i = 0; i < 5; i++) {
    ck_assert_int_eq(
        tpx_model_add_module(m, extra[i], TPX_MODULE_LINEAR, NULL, &e), TPX_OK);
    ck_assert_int_eq(tpx_model_add_param(m, extra[i], "weight", w, 2,
                                         TPX_DTYPE_F32, NULL, &e),
                     TPX_OK);
  }
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  static const unit_case want[] = {
      {"model.layers.0", 1, 1, {1, 0}, 0, {0, 0}},
      {"model.layers.1", 0, 0, {0, 0}, 1, {0, 0}},
      {"model.vision_tower.encoder.layers.0", 1, 1, {3, 0}, 0, {0, 0}},
      {"model.vision_tower.encoder.layers.1", 0, 0, {0, 0}, 1, {2, 0}},
      /* blocks.0 is a nested list: wrapped first, then blocks' flat items */
      {"blocks.0.0", 1, 1, {5, 0}, 0, {0, 0}},
      {"blocks.0.1", 0, 0, {0, 0}, 1, {4, 0}},
      {"blocks.1", 0, 0, {0, 0}, 0, {0, 0}},
      {"model.embed_tokens", 1, 0, {0, 0}, 0, {0, 0}},
      {"lm_head", 0, 0, {0, 0}, 0, {0, 0}},
      {"", 0, 0, {0, 0}, 0, {0, 0}},
  };
  check_units(sh, want, 10);
  tpx_sharding_destroy(sh);

  /* plugin-chosen units: the plugin's flow, no embedding units */
  const char *units[2] = {"model.layers.0.mlp", "model.layers.1"};
  int resh[2] = {1, 0};
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.num_fsdp_units = 2;
  so.fsdp_units = units;
  so.fsdp_unit_reshard = resh;
  sh = fx_shard(m, NULL, mesh, &so);
  static const unit_case wantp[] = {
      {"model.layers.0.mlp", 1, 0, {0, 0}, 0, {0, 0}},
      {"model.layers.1", 0, 0, {0, 0}, 0, {0, 0}},
      {"", 0, 0, {0, 0}, 0, {0, 0}},
  };
  check_units(sh, wantp, 3);
  tpx_sharding_destroy(sh);
  units[1] = "model.nope";
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_sharding_create(m, NULL, mesh, &so, &sh, &e),
                   TPX_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(e.message, "model.nope"));
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

typedef struct {
  const char *param;
  const char *dpr, *dps, *tp;
} hsdp_case;

START_TEST(hsdp_and_strided_placements) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(2, 2, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  static const hsdp_case cases[] = {
      {"model.layers.0.self_attn.q_proj.weight", "replicate",
       "strided_shard(0,4)", "shard(0)"},
      {"model.layers.0.self_attn.o_proj.weight", "replicate", "shard(0)",
       "shard(1)"},
      {"model.layers.0.mlp.down_proj.weight", "replicate", "shard(0)",
       "shard(1)"},
      {"model.embed_tokens.weight", "replicate", "strided_shard(0,4)",
       "shard(0)"},
      {"model.norm.weight", "replicate", "shard(0)", "replicate"},
  };
  char buf[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ck_assert_str_eq(fx_pl(sh, cases[i].param, 0, buf, sizeof buf),
                     cases[i].dpr);
    ck_assert_str_eq(fx_pl(sh, cases[i].param, 1, buf, sizeof buf),
                     cases[i].dps);
    ck_assert_str_eq(fx_pl(sh, cases[i].param, 2, buf, sizeof buf),
                     cases[i].tp);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);

  /* Strided: rank (dp=i, tp=j) holds sub-chunk i of TP chunk j. */
  mesh = fx_mesh(1, 2, 2);
  sh = fx_shard(m, p, mesh, NULL);
  int64_t q = tpx_model_find_param(m, "model.layers.0.self_attn.q_proj.weight");
  static const int64_t off[4] = {0, 32, 16, 48}; /* rank = i*2 + j */
  for (int64_t r = 0; r < 4; r++) {
    tpx_slice s;
    tpx_error e = {0};
    ck_assert_msg(tpx_sharding_local_slice(sh, q, r, &s, &e) == TPX_OK, "%s",
                  e.message);
    ck_assert_int_eq(s.offset[0], off[r]);
    ck_assert_int_eq(s.length[0], 16);
    ck_assert_int_eq(s.length[1], 64);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

typedef struct {
  tpx_dtype param, reduce, orig;
  tpx_dtype want_param, want_reduce;
} mp_case;

static const mp_case mp_cases[] = {
    {TPX_DTYPE_BF16, TPX_DTYPE_F32, TPX_DTYPE_F32, TPX_DTYPE_BF16,
     TPX_DTYPE_F32},
    {TPX_DTYPE_BF16, TPX_DTYPE_F32, TPX_DTYPE_BF16, TPX_DTYPE_BF16,
     TPX_DTYPE_F32},
    {TPX_DTYPE_BF16, TPX_DTYPE_INVALID, TPX_DTYPE_F32, TPX_DTYPE_BF16,
     TPX_DTYPE_BF16},
    {TPX_DTYPE_INVALID, TPX_DTYPE_F32, TPX_DTYPE_BF16, TPX_DTYPE_BF16,
     TPX_DTYPE_F32},
    {TPX_DTYPE_F32, TPX_DTYPE_F32, TPX_DTYPE_F32, TPX_DTYPE_F32, TPX_DTYPE_F32},
    {TPX_DTYPE_INVALID, TPX_DTYPE_INVALID, TPX_DTYPE_F16, TPX_DTYPE_F16,
     TPX_DTYPE_F16},
    {TPX_DTYPE_BF16, TPX_DTYPE_F32, TPX_DTYPE_I64, TPX_DTYPE_I64,
     TPX_DTYPE_I64},
};

START_TEST(mixed_precision_clearing) {
  const mp_case *c = &mp_cases[_i];
  tpx_mp_policy pol = {c->param, c->reduce, TPX_DTYPE_F32};
  tpx_dtype pd = TPX_DTYPE_INVALID, rd = TPX_DTYPE_INVALID;
  tpx_fsdp_param_dtypes(&pol, c->orig, &pd, &rd);
  ck_assert_int_eq(pd, c->want_param);
  ck_assert_int_eq(rd, c->want_reduce);
}
END_TEST

/* Hand computation for the untied tiny llama with the Llama plan (every
 * dim divisible): sharded elements S = 2 layers x (4x4096 + 3x8192) +
 * 2 x 256x64 = 114688; replicated R = 5 norms x 64 = 320. A rank holds
 * S/(tp*dp_shard) + R/dp_shard elements, bf16. */
START_TEST(per_rank_bytes_table) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  static const int64_t tps[3] = {2, 4, 8}, dps[2] = {1, 2};
  const int64_t S = 114688, R = 320, table = 16384, layer = 40960;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      for (int64_t dpr = 1; dpr <= 2; dpr++) {
        int64_t tp = tps[i], dp = dps[j];
        tpx_mesh *mesh = fx_mesh(dpr, dp, tp);
        tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
        int64_t want = 2 * (S / (tp * dp) + R / dp);
        /* peak: + root gathered (the final norm) + lm_head's unit (never
         * resharded) + a layer and its prefetched neighbour, TP-local, bf16;
         * the embedding's unit reshards and is smaller than that window */
        int64_t gathered_root = 2 * 64;
        int64_t gathered_table = 2 * (table / tp);
        int64_t gathered_layer = 2 * (layer / tp + 128);
        int64_t peak =
            want + gathered_root + gathered_table + 2 * gathered_layer;
        for (int64_t r = 0; r < tpx_mesh_world_size(mesh); r++) {
          ck_assert_msg(
              tpx_sharding_rank_param_bytes(sh, r) == want,
              "tp=%lld dp=%lld dpr=%lld rank %lld: %lld != %lld", (long long)tp,
              (long long)dp, (long long)dpr, (long long)r,
              (long long)tpx_sharding_rank_param_bytes(sh, r), (long long)want);
          ck_assert_int_eq(tpx_sharding_rank_peak_bytes(sh, r), peak);
        }
        ck_assert_int_eq(tpx_sharding_fsdp_unit_gathered_bytes(sh, 4, 0),
                         gathered_root);
        ck_assert_int_eq(tpx_sharding_fsdp_unit_gathered_bytes(sh, 2, 0),
                         gathered_table);
        ck_assert_int_eq(tpx_sharding_fsdp_unit_gathered_bytes(sh, 3, 0),
                         gathered_table);
        ck_assert_int_eq(tpx_sharding_fsdp_unit_gathered_bytes(sh, 0, 0),
                         gathered_layer);
        ck_assert_int_eq(tpx_sharding_fsdp_unit_gathered_bytes(sh, 9, 0), -1);
        tpx_sharding_destroy(sh);
        tpx_mesh_destroy(mesh);
      }
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Uneven: vocab 10 over tp 4 and dp_shard 2 (no tie): embed rows per TP rank
 * 3,3,3,1, then each TP piece split over dp by torch.chunk: 2+1, ..., 1+0. A
 * tied lm_head is counted once. */
START_TEST(per_rank_bytes_uneven_and_tied) {
  fx_opts o = {10, 1, 0, 0, NULL};
  tpx_model *m = fx_model(&o);
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  /* layers: 81920 elements sharded evenly over 8 ranks = 10240; norms
   * 320/2 = 160 each; embed rows: tp j gets 3,3,3,1 rows, dp i gets
   * chunk(ceil) of those: (2,1),(2,1),(2,1),(1,0) */
  static const int64_t rows[2][4] = {{2, 2, 2, 1}, {1, 1, 1, 0}};
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 4; j++) {
      int64_t r = i * 4 + j;
      int64_t want = 2 * (10240 + 160 + rows[i][j] * 64);
      ck_assert_msg(tpx_sharding_rank_param_bytes(sh, r) == want,
                    "rank %lld: %lld != %lld", (long long)r,
                    (long long)tpx_sharding_rank_param_bytes(sh, r),
                    (long long)want);
    }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(bad_prefetch_depth) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.bwd_prefetch_depth = -1;
  tpx_sharding *sh = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_sharding_create(m, NULL, mesh, &so, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "prefetch"));
  tpx_mp_policy mp = tpx_sharding_mp_policy(NULL);
  ck_assert_int_eq(mp.param_dtype, TPX_DTYPE_INVALID);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

typedef struct {
  const char *arch;
  const char *modules[8]; /* linear leaves to add */
  size_t count;
  const char *first, *last;
  tpx_layer_group first_group, last_group;
  tpx_status status;
} lg_case;

static const lg_case lg_cases[] = {
    {"LlamaForCausalLM",
     {"model.layers.0.fc", "model.layers.1.fc", "lm_head"},
     2,
     "model.layers.0",
     "model.layers.1",
     TPX_LAYERS_LANGUAGE,
     TPX_LAYERS_LANGUAGE,
     TPX_OK},
    {"Gemma3ForConditionalGeneration",
     {"model.language_model.layers.0.fc", "model.language_model.layers.1.fc",
      "model.vision_tower.vision_model.encoder.layers.0.fc",
      "model.vision_tower.vision_model.encoder.layers.1.fc",
      "model.vision_tower.vision_model.encoder.layers.2.fc",
      "model.layers.0.fc"},
     5,
     "model.language_model.layers.0",
     "model.vision_tower.vision_model.encoder.layers.2",
     TPX_LAYERS_LANGUAGE,
     TPX_LAYERS_VISION,
     TPX_OK},
    /* Qwen2-VL: the second language candidate, the second vision one */
    {"Qwen2VLForConditionalGeneration",
     {"model.layers.0.fc", "visual.blocks.0.fc", "visual.blocks.1.fc"},
     3,
     "model.layers.0",
     "visual.blocks.1",
     TPX_LAYERS_LANGUAGE,
     TPX_LAYERS_VISION,
     TPX_OK},
    /* GPT-2 */
    {"GPT2LMHeadModel",
     {"transformer.h.0.fc", "transformer.h.1.fc", "transformer.h.2.fc"},
     3,
     "transformer.h.0",
     "transformer.h.2",
     TPX_LAYERS_LANGUAGE,
     TPX_LAYERS_LANGUAGE,
     TPX_OK},
    /* known arch whose candidates do not resolve: nothing, no error */
    {"SmolVLMForConditionalGeneration",
     {"model.layers.0.fc"},
     0,
     NULL,
     NULL,
     TPX_LAYERS_LANGUAGE,
     TPX_LAYERS_LANGUAGE,
     TPX_OK},
    /* top-level layers */
    {"FooModel",
     {"layers.0.fc", "layers.1.fc"},
     2,
     "layers.0",
     "layers.1",
     TPX_LAYERS_LANGUAGE,
     TPX_LAYERS_LANGUAGE,
     TPX_OK},
    /* heuristic: the first strictly largest list, depth first */
    {"FooModel",
     {"enc.h.0.fc", "enc.h.1.fc", "dec.blocks.0.fc", "dec.blocks.1.fc",
      "dec.blocks.2.fc", "aux.blocks.0.fc", "aux.blocks.1.fc",
      "aux.blocks.2.fc"},
     3,
     "dec.blocks.0",
     "dec.blocks.2",
     TPX_LAYERS_UNKNOWN,
     TPX_LAYERS_UNKNOWN,
     TPX_OK},
    {"FooModel",
     {"a.fc", "b.fc"},
     0,
     NULL,
     NULL,
     TPX_LAYERS_LANGUAGE,
     TPX_LAYERS_LANGUAGE,
     TPX_NOT_FOUND},
};

START_TEST(layer_groups) {
  const lg_case *c = &lg_cases[_i];
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  ck_assert_int_eq(tpx_model_add_architecture(m, c->arch, &e), TPX_OK);
  for (size_t i = 0; i < 8 && c->modules[i]; i++)
    fx_linear(m, c->modules[i], 4, 4, 0);
  /* the layer lists are what the class's plugin declares (trait layers) */
  tpx_registry *reg = NULL;
  ck_assert_int_eq(tpx_registry_create(&reg, &e), TPX_OK);
  ck_assert_int_eq(tpx_registry_load_default(reg, &e), TPX_OK);
  ck_assert_msg(tpx_registry_describe_model(reg, m, &e) == TPX_OK, "%s",
                e.message);
  tpx_registry_destroy(reg);
  int64_t mods[16];
  tpx_layer_group groups[16];
  size_t n = 99;
  ck_assert_int_eq(tpx_model_layer_groups(m, mods, groups, 16, &n, &e),
                   c->status);
  if (c->status == TPX_OK) {
    ck_assert_uint_eq(n, c->count);
    if (n) {
      ck_assert_str_eq(tpx_model_module_fqn(m, mods[0]), c->first);
      ck_assert_str_eq(tpx_model_module_fqn(m, mods[n - 1]), c->last);
      ck_assert_int_eq(groups[0], c->first_group);
      ck_assert_int_eq(groups[n - 1], c->last_group);
    }
  } else {
    ck_assert_ptr_nonnull(strstr(e.message, c->arch));
  }
  /* counting only */
  size_t n2 = 0;
  tpx_model_layer_groups(m, NULL, NULL, 0, &n2, NULL);
  ck_assert_uint_eq(n2, c->count);
  tpx_model_destroy(m);
}
END_TEST

/* A builder's own class: its layer lists as traits on the model
 * (tpx_model_add_trait), the same form a plugin declares them in. */
START_TEST(layer_groups_from_traits) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  ck_assert_int_eq(tpx_model_add_architecture(m, "pkg.FooVLM", &e), TPX_OK);
  static const char *const mods[] = {"lm.blocks.0", "lm.blocks.1",
                                     "lm.blocks.2", "vis.blocks.0"};
  for (size_t i = 0; i < 4; i++) fx_linear(m, mods[i], 4, 4, 0);
  int64_t got[8];
  tpx_layer_group g[8];
  size_t n = 0;
  /* no trait: the largest list, group unknown */
  ck_assert_int_eq(tpx_model_layer_groups(m, got, g, 8, &n, &e), TPX_OK);
  ck_assert_uint_eq(n, 3);
  ck_assert_int_eq(g[0], TPX_LAYERS_UNKNOWN);
  ck_assert_int_eq(
      tpx_model_add_trait(m, "layers=FooVLM:language:model.x,lm.blocks", &e),
      TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_trait(m, "layers=FooVLM:vision:vis.blocks", &e), TPX_OK);
  ck_assert_int_eq(tpx_model_layer_groups(m, got, g, 8, &n, &e), TPX_OK);
  ck_assert_uint_eq(n, 4);
  ck_assert_int_eq(g[0], TPX_LAYERS_LANGUAGE);
  ck_assert_int_eq(g[3], TPX_LAYERS_VISION);
  ck_assert_str_eq(tpx_model_module_fqn(m, got[3]), "vis.blocks.0");
  /* malformed, another class's, another key */
  static const struct {
    const char *trait;
    tpx_status st;
  } bad[] = {{"layers=FooVLM:text:lm.blocks", TPX_INVALID_ARGUMENT},
             {"layers=FooVLM:language:", TPX_INVALID_ARGUMENT},
             {"layers=FooVLM:language:a..b", TPX_INVALID_ARGUMENT},
             {"hf_prefix=FooVLM", TPX_INVALID_ARGUMENT},
             {"text_config_heads=FooVLM:x", TPX_INVALID_ARGUMENT},
             {"layers=BarVLM:language:lm.blocks", TPX_INVALID_ARGUMENT},
             {"own_flow=FooVLM", TPX_NOT_FOUND}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tpx_error_clear(&e);
    ck_assert_int_eq(tpx_model_add_trait(m, bad[i].trait, &e), bad[i].st);
    ck_assert_msg(strstr(e.message, bad[i].trait) != NULL, "%s", e.message);
  }
  tpx_model_destroy(m);
}
END_TEST

/* Regression: per-rank sums wrapped (signed overflow, UB) when a config
 * describes a model larger than int64 bytes (tpx plan on a config with
 * num_attention_heads 999999999989). They now saturate at INT64_MAX, as
 * tpx_slice_nbytes does for one slice. */
START_TEST(per_rank_bytes_saturate) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  static const char *const mods[] = {"layers.0", "layers.1", "head"};
  for (size_t i = 0; i < 3; i++) {
    /* the model's limit is 2^60 elements; 2^62 bytes each in f64 */
    int64_t shape[1] = {(int64_t)1 << 59};
    ck_assert_msg(
        tpx_model_add_module(m, mods[i], TPX_MODULE_LINEAR, NULL, &e) == TPX_OK,
        "%s", e.message);
    ck_assert_msg(tpx_model_add_param(m, mods[i], "weight", shape, 1,
                                      TPX_DTYPE_F64, NULL, &e) == TPX_OK,
                  "%s", e.message);
  }
  static const int64_t meshes[][3] = {{1, 1, 1}, {1, 1, 2}, {2, 1, 1}};
  for (size_t k = 0; k < 3; k++) {
    tpx_mesh *mesh = fx_mesh(meshes[k][0], meshes[k][1], meshes[k][2]);
    tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
    for (int64_t r = 0; r < tpx_mesh_world_size(mesh); r++) {
      ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, r), INT64_MAX);
      ck_assert_int_eq(tpx_sharding_rank_peak_bytes(sh, r), INT64_MAX);
    }
    for (size_t u = 0; u < tpx_sharding_num_fsdp_units(sh); u++)
      ck_assert_int_ge(tpx_sharding_fsdp_unit_gathered_bytes(sh, u, 0), 0);
    tpx_sharding_destroy(sh);
    tpx_mesh_destroy(mesh);
  }
  tpx_model_destroy(m);
}
END_TEST

/* fp32 parameter patterns (a plugin's tpx_selection_fp32): per-atom
 * fnmatch on the parameter FQN; matches are held and all-gathered in f32
 * (no bf16 cast), and the bytes count them so. */
START_TEST(fp32_params) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *base = fx_shard(m, NULL, mesh, NULL);
  static const char *const pats[] = {
      "model.layers.*.input_layernorm.weight", /* 2 params, [64] */
      "model.layers.1.mlp.gate_proj.w*",       /* 1 param, [128, 64] */
      "model.layers.*",                        /* fewer atoms: none */
  };
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.num_fp32_params = 3;
  so.fp32_params = pats;
  tpx_sharding *sh = fx_shard(m, NULL, mesh, &so);
  ck_assert_uint_eq(tpx_sharding_num_fp32_patterns(sh), 3);
  static const size_t want_matched[] = {2, 1, 0};
  for (size_t i = 0; i < 3; i++) {
    size_t n = 99;
    ck_assert_str_eq(tpx_sharding_fp32_pattern(sh, i, &n), pats[i]);
    ck_assert_uint_eq(n, want_matched[i]);
  }
  ck_assert_ptr_null(tpx_sharding_fp32_pattern(sh, 3, NULL));
  static const struct {
    const char *fqn;
    int fp32;
  } cases[] = {
      {"model.layers.0.input_layernorm.weight", 1},
      {"model.layers.1.input_layernorm.weight", 1},
      {"model.layers.1.mlp.gate_proj.weight", 1},
      {"model.layers.0.mlp.gate_proj.weight", 0},
      {"model.layers.0.post_attention_layernorm.weight", 0},
      {"model.norm.weight", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t p = tpx_model_find_param(m, cases[i].fqn);
    tpx_param_sharding ps;
    ck_assert_int_eq(tpx_sharding_param(sh, p, &ps, NULL), TPX_OK);
    ck_assert_msg(tpx_sharding_param_keeps_fp32(sh, p) == cases[i].fp32, "%s",
                  cases[i].fqn);
    ck_assert_int_eq(ps.param_dtype,
                     cases[i].fp32 ? TPX_DTYPE_F32 : TPX_DTYPE_BF16);
    ck_assert_int_eq(ps.reduce_dtype, TPX_DTYPE_F32);
  }
  ck_assert(!tpx_sharding_param_keeps_fp32(sh, -1));
  ck_assert(!tpx_sharding_param_keeps_fp32(NULL, 0));
  /* held bytes per rank: +2 bytes per element of each rank's slice
   * (dp_shard 2: 32 + 32 norm elements, 64 x 64 gate_proj elements) */
  for (int64_t r = 0; r < 2; r++)
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, r) -
                         tpx_sharding_rank_param_bytes(base, r),
                     2 * (32 + 32 + 64 * 64));
  /* gathered: layer 0 +64 norm elements, layer 1 +64 +128 x 64 */
  ck_assert_int_eq(tpx_sharding_fsdp_unit_gathered_bytes(sh, 0, 0) -
                       tpx_sharding_fsdp_unit_gathered_bytes(base, 0, 0),
                   2 * 64);
  ck_assert_int_eq(tpx_sharding_fsdp_unit_gathered_bytes(sh, 1, 0) -
                       tpx_sharding_fsdp_unit_gathered_bytes(base, 1, 0),
                   2 * (64 + 128 * 64));
  ck_assert_int_gt(tpx_sharding_rank_peak_bytes(sh, 0),
                   tpx_sharding_rank_peak_bytes(base, 0));
  tpx_sharding_destroy(sh);

  /* without FSDP the held (and compute) dtype is still f32 */
  so.fsdp = 0;
  sh = fx_shard(m, NULL, mesh, &so);
  tpx_param_sharding ps;
  ck_assert_int_eq(
      tpx_sharding_param(
          sh, tpx_model_find_param(m, "model.layers.1.mlp.gate_proj.weight"),
          &ps, NULL),
      TPX_OK);
  ck_assert_int_eq(ps.param_dtype, TPX_DTYPE_F32);
  tpx_sharding_destroy(sh);
  tpx_sharding_destroy(base);

  /* bad patterns */
  tpx_error e = {0};
  so = (tpx_sharding_options)TPX_SHARDING_OPTIONS_INIT;
  so.num_fp32_params = 1;
  ck_assert_int_eq(tpx_sharding_create(m, NULL, mesh, &so, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "fp32_params"));
  static const char *const empty[] = {""};
  so.fp32_params = empty;
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_sharding_create(m, NULL, mesh, &so, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "empty"));
  ck_assert_ptr_null(sh);

  /* a caller built before the fp32 fields: a shorter struct is accepted
   * (no fp32 patterns); shorter than that is refused */
  so = (tpx_sharding_options)TPX_SHARDING_OPTIONS_INIT;
  so.num_fp32_params = 1; /* past the old size: must be ignored */
  so.struct_size = offsetof(tpx_sharding_options, num_fp32_params);
  sh = fx_shard(m, NULL, mesh, &so);
  ck_assert_uint_eq(tpx_sharding_num_fp32_patterns(sh), 0);
  tpx_sharding_destroy(sh);
  so.struct_size = offsetof(tpx_sharding_options, fsdp_unit_reshard);
  ck_assert_int_eq(tpx_sharding_create(m, NULL, mesh, &so, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);

  /* a tied alias follows its target and is not counted itself */
  fx_opts o = {0, 1, 0, 0, NULL};
  m = fx_model(&o);
  mesh = fx_mesh(1, 2, 1);
  static const char *const emb[] = {"model.embed_tokens.weight"};
  so = (tpx_sharding_options)TPX_SHARDING_OPTIONS_INIT;
  so.num_fp32_params = 1;
  so.fp32_params = emb;
  sh = fx_shard(m, NULL, mesh, &so);
  ck_assert(tpx_sharding_param_keeps_fp32(
      sh, tpx_model_find_param(m, "lm_head.weight")));
  size_t n = 0;
  tpx_sharding_fp32_pattern(sh, 0, &n);
  ck_assert_uint_eq(n, 1);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

static Suite *fsdp_suite(void) {
  Suite *s = suite_create("fsdp");
  TCase *tc = tcase_create("fsdp");
  tcase_add_test(tc, units_default);
  tcase_add_test(tc, units_depths_and_override);
  tcase_add_test(tc, units_vlm_and_nested);
  tcase_add_test(tc, hsdp_and_strided_placements);
  tcase_add_loop_test(tc, mixed_precision_clearing, 0,
                      (int)(sizeof mp_cases / sizeof mp_cases[0]));
  tcase_add_test(tc, per_rank_bytes_table);
  tcase_add_test(tc, per_rank_bytes_uneven_and_tied);
  tcase_add_test(tc, bad_prefetch_depth);
  tcase_add_test(tc, per_rank_bytes_saturate);
  tcase_add_test(tc, fp32_params);
  tcase_add_test(tc, layer_groups_from_traits);
  tcase_add_loop_test(tc, layer_groups, 0,
                      (int)(sizeof lg_cases / sizeof lg_cases[0]));
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(fsdp_suite)
