/* test_apply.c — TP application (core/src/shard/apply.c, transitions.c):
 * placements of every parameter per style, biases, kinds torch rejects, tied
 * parameters, uneven shards, replicated-by-omission, tp == 1, and the
 * collectives of each module. */
#include "shard_fixture.h"

#define TP 2 /* mesh dim index of "tp" in fx_mesh */

typedef struct {
  const char *param;
  const char *tp;
} pl_case;

/* The Llama sp0 plan, untied lm_head, tp=4: every parameter. */
static const pl_case llama_cases[] = {
    {"model.embed_tokens.weight", "shard(0)"},
    {"model.layers.0.self_attn.q_proj.weight", "shard(0)"},
    {"model.layers.0.self_attn.k_proj.weight", "shard(0)"},
    {"model.layers.0.self_attn.v_proj.weight", "shard(0)"},
    {"model.layers.0.self_attn.o_proj.weight", "shard(1)"},
    {"model.layers.1.mlp.gate_proj.weight", "shard(0)"},
    {"model.layers.1.mlp.up_proj.weight", "shard(0)"},
    {"model.layers.1.mlp.down_proj.weight", "shard(1)"},
    {"model.layers.1.input_layernorm.weight", "replicate"},
    {"model.layers.1.post_attention_layernorm.weight", "replicate"},
    {"model.norm.weight", "replicate"},
    {"lm_head.weight", "shard(0)"},
};

START_TEST(llama_placements) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  char buf[64];
  for (size_t i = 0; i < sizeof llama_cases / sizeof llama_cases[0]; i++)
    ck_assert_msg(strcmp(fx_pl(sh, llama_cases[i].param, TP, buf, sizeof buf),
                         llama_cases[i].tp) == 0,
                  "%s: got %s want %s", llama_cases[i].param, buf,
                  llama_cases[i].tp);
  /* the optional fused keys match nothing: info, not error */
  ck_assert(tpx_sharding_ok(sh));
  ck_assert_uint_eq(
      fx_count(tpx_sharding_diagnostics(sh), TPX_DIAG_INFO, "unmatched-key"),
      2);
  /* plan keys per parameter */
  tpx_param_sharding ps;
  int64_t q = tpx_model_find_param(m, "model.layers.1.self_attn.q_proj.weight");
  ck_assert_int_eq(tpx_sharding_param(sh, q, &ps, NULL), TPX_OK);
  ck_assert_str_eq(ps.plan_key, "model.layers.*.self_attn.q_proj");
  int64_t n = tpx_model_find_param(m, "model.norm.weight");
  ck_assert_int_eq(tpx_sharding_param(sh, n, &ps, NULL), TPX_OK);
  ck_assert_ptr_null(ps.plan_key);
  ck_assert_int_eq(ps.plan_entry, -1);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* One style on q_proj (with bias) and on the embedding. */
typedef struct {
  tpx_style_kind kind;
  const char *lin_w, *lin_b, *emb_w;
  int lin_ok, emb_ok; /* expect no style-unsupported-module error */
} style_case;

static const style_case style_cases[] = {
    {TPX_STYLE_COLWISE, "shard(0)", "shard(0)", "shard(1)", 1, 1},
    {TPX_STYLE_ROWWISE, "shard(1)", "replicate", "shard(0)", 1, 1},
    {TPX_STYLE_VOCAB_PARALLEL_EMBEDDING, "shard(1)", "replicate", "shard(0)", 1,
     1},
    {TPX_STYLE_GEMMA4_VOCAB_PARALLEL_EMBEDDING, "shard(1)", "replicate",
     "shard(0)", 1, 1},
    {TPX_STYLE_GEMMA4_ROWWISE_PARALLEL, "shard(1)", "replicate", "shard(0)", 1,
     1},
    {TPX_STYLE_SEQUENCE_PARALLEL, "replicate", "replicate", "replicate", 1, 1},
    {TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION, "replicate", "replicate",
     "replicate", 1, 1},
    {TPX_STYLE_ROTARY_EMBED_PARALLEL, "replicate", "replicate", "replicate", 1,
     1},
    {TPX_STYLE_QK_NORM_SEQUENCE_PARALLEL, "replicate", "replicate", "replicate",
     1, 1},
};

START_TEST(style_table) {
  const style_case *c = &style_cases[_i];
  fx_opts o = {0, 0, 1, 0, NULL};
  tpx_model *m = fx_model(&o);
  tpx_plan *p = NULL;
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  fx_set(p, "model.layers.*.self_attn.q_proj", c->kind, 0);
  fx_set(p, "model.embed_tokens", c->kind, 0);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  char buf[64];
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", TP, buf, sizeof buf),
      c->lin_w);
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.1.self_attn.q_proj.bias", TP, buf, sizeof buf),
      c->lin_b);
  ck_assert_str_eq(fx_pl(sh, "model.embed_tokens.weight", TP, buf, sizeof buf),
                   c->emb_w);
  /* unplanned neighbours stay replicated */
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.k_proj.weight", TP, buf, sizeof buf),
      "replicate");
  ck_assert_uint_eq(fx_count(tpx_sharding_diagnostics(sh), TPX_DIAG_ERROR,
                             "style-unsupported-module"),
                    0);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(prepare_styles_keep_params) {
  tpx_model *m = fx_llama();
  tpx_plan *p = NULL;
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  tpx_style in = tpx_style_default(TPX_STYLE_PREPARE_MODULE_INPUT);
  in.input_layouts.count = 1;
  in.input_layouts.items[0] = tpx_placement_shard(1);
  in.desired_input_layouts.count = 1;
  in.desired_input_layouts.items[0] = tpx_placement_replicate();
  fx_set_style(p, "model.layers.*.self_attn", &in);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  char buf[64];
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", TP, buf, sizeof buf),
      "replicate");
  int64_t att = tpx_model_find_module(m, "model.layers.0.self_attn");
  const tpx_transition *t = NULL;
  size_t n = 0;
  ck_assert_int_eq(tpx_sharding_module_transitions(sh, att, &t, &n, NULL),
                   TPX_OK);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(t[0].side, TPX_TRANSITION_INPUT);
  ck_assert_str_eq(t[0].forward, "all-gather(dim=1)");
  ck_assert_str_eq(t[0].backward, "reduce-scatter(dim=1)");
  ck_assert(tpx_sharding_ok(sh));
  tpx_sharding_destroy(sh);
  /* use_local_output: the module sees a plain tensor, its grad comes back
   * replicated, and the gather's dual is a chunk (Gemma3's SP lm_head). */
  in.use_local_output = 1;
  fx_set_style(p, "model.layers.*.self_attn", &in);
  sh = fx_shard(m, p, mesh, NULL);
  ck_assert_int_eq(tpx_sharding_module_transitions(sh, att, &t, &n, NULL),
                   TPX_OK);
  ck_assert_str_eq(t[0].forward, "all-gather(dim=1)");
  ck_assert_str_eq(t[0].backward, "chunk(dim=1)");
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(colwise_on_norm_is_error) {
  tpx_model *m = fx_llama();
  tpx_plan *p = NULL;
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  fx_set(p, "model.norm", TPX_STYLE_COLWISE, 0);
  fx_set(p, "model.layers.*.self_attn", TPX_STYLE_ROWWISE, 0);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  const tpx_diag_list *d = tpx_sharding_diagnostics(sh);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_ERROR, "style-unsupported-module"), 2);
  ck_assert_ptr_nonnull(strstr(fx_msg(d, "style-unsupported-module"),
                               "nn.Linear and nn.Embedding"));
  char buf[64]; /* torch raises: nothing is applied */
  ck_assert_str_eq(fx_pl(sh, "model.norm.weight", TP, buf, sizeof buf),
                   "replicate");
  ck_assert(!tpx_sharding_ok(sh));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Tied lm_head: the Llama plan gives both Shard(0) (fine); a colwise
 * embedding (Shard(1)) with a colwise lm_head (Shard(0)) conflicts (error);
 * only one side styled is a warning (the re-tie decides the placement). */
START_TEST(tied_ok_and_conflicts) {
  fx_opts o = {0, 1, 0, 0, NULL};
  tpx_model *m = fx_model(&o);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  char buf[64];

  tpx_plan *p = fx_llama_plan();
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  ck_assert_uint_eq(
      fx_count(tpx_sharding_diagnostics(sh), TPX_DIAG_ERROR, "tied-embeddings"),
      0);
  ck_assert_str_eq(fx_pl(sh, "lm_head.weight", TP, buf, sizeof buf),
                   "shard(0)");
  /* counted once: the same bytes as the untied model minus lm_head */
  tpx_sharding_destroy(sh);

  fx_set(p, "model.embed_tokens", TPX_STYLE_COLWISE, 0);
  sh = fx_shard(m, p, mesh, NULL);
  const tpx_diag_list *d = tpx_sharding_diagnostics(sh);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_ERROR, "tied-embeddings"), 1);
  const char *msg = fx_msg(d, "tied-embeddings");
  ck_assert_ptr_nonnull(strstr(msg, "lm_head.weight"));
  ck_assert_ptr_nonnull(strstr(msg, "model.embed_tokens.weight"));
  ck_assert_ptr_nonnull(strstr(msg, "shard(0)"));
  ck_assert_ptr_nonnull(strstr(msg, "shard(1)"));
  ck_assert_ptr_nonnull(strstr(fx_fix(d, "tied-embeddings"), "untie"));
  /* one placement in the end: the embedding's */
  ck_assert_str_eq(fx_pl(sh, "lm_head.weight", TP, buf, sizeof buf),
                   "shard(1)");
  ck_assert(!tpx_sharding_ok(sh));
  tpx_sharding_destroy(sh);

  /* Only the embedding styled (Gemma4 E-series): the re-tie hands lm_head
   * the embedding's Shard(0) DTensor; a warning, not an error. */
  ck_assert_int_eq(tpx_plan_remove(p, "lm_head", NULL), TPX_OK);
  fx_set(p, "model.embed_tokens", TPX_STYLE_VOCAB_PARALLEL_EMBEDDING, 0);
  sh = fx_shard(m, p, mesh, NULL);
  d = tpx_sharding_diagnostics(sh);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_ERROR, "tied-embeddings"), 0);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_WARNING, "tied-embeddings"), 1);
  msg = fx_msg(d, "tied-embeddings");
  ck_assert_ptr_nonnull(strstr(msg, "'lm_head.weight' (no TP style)"));
  ck_assert_ptr_nonnull(strstr(msg, "model.embed_tokens.weight"));
  ck_assert_ptr_nonnull(strstr(msg, "inherits shard(0)"));
  ck_assert_ptr_nonnull(strstr(msg, "module 'lm_head' has no TP style"));
  ck_assert_ptr_nonnull(strstr(msg, "F.linear"));
  ck_assert_ptr_nonnull(strstr(msg, "Gemma4 E-series"));
  ck_assert_str_eq(fx_pl(sh, "lm_head.weight", TP, buf, sizeof buf),
                   "shard(0)");
  ck_assert(tpx_sharding_ok(sh));
  tpx_sharding_destroy(sh);

  /* Only lm_head styled: the re-tie gives it the plain embedding tensor
   * (replicate), undoing its colwise sharding; a warning naming both. */
  ck_assert_int_eq(tpx_plan_remove(p, "model.embed_tokens", NULL), TPX_OK);
  fx_set(p, "lm_head", TPX_STYLE_COLWISE, 0);
  sh = fx_shard(m, p, mesh, NULL);
  d = tpx_sharding_diagnostics(sh);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_ERROR, "tied-embeddings"), 0);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_WARNING, "tied-embeddings"), 1);
  msg = fx_msg(d, "tied-embeddings");
  ck_assert_ptr_nonnull(strstr(msg, "'lm_head.weight' (shard(0) on tp, key "
                                    "'lm_head')"));
  ck_assert_ptr_nonnull(
      strstr(msg, "'model.embed_tokens.weight' (no TP style, replicate)"));
  ck_assert_ptr_nonnull(strstr(msg, "ends replicate"));
  ck_assert_str_eq(fx_pl(sh, "lm_head.weight", TP, buf, sizeof buf),
                   "replicate");
  ck_assert(tpx_sharding_ok(sh));
  tpx_sharding_destroy(sh);

  /* Both styled alike: nothing to say. Neither styled: nothing either. */
  fx_set(p, "model.embed_tokens", TPX_STYLE_VOCAB_PARALLEL_EMBEDDING, 0);
  sh = fx_shard(m, p, mesh, NULL);
  ck_assert_uint_eq(fx_count(tpx_sharding_diagnostics(sh), TPX_DIAG_WARNING,
                             "tied-embeddings") +
                        fx_count(tpx_sharding_diagnostics(sh), TPX_DIAG_ERROR,
                                 "tied-embeddings"),
                    0);
  tpx_sharding_destroy(sh);
  tpx_plan_destroy(p);
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  sh = fx_shard(m, p, mesh, NULL);
  ck_assert_uint_eq(tpx_diag_count(tpx_sharding_diagnostics(sh)), 0);
  tpx_sharding_destroy(sh);
  tpx_plan_destroy(p);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* vocab 10 over tp 4: torch.chunk gives 3,3,3,1. */
START_TEST(uneven_shard_warning) {
  fx_opts o = {10, 0, 0, 0, NULL};
  tpx_model *m = fx_model(&o);
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  const tpx_diag_list *d = tpx_sharding_diagnostics(sh);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_WARNING, "uneven-shard"), 2);
  const char *msg = fx_msg(d, "uneven-shard");
  ck_assert_ptr_nonnull(strstr(msg, "model.embed_tokens.weight"));
  ck_assert_ptr_nonnull(strstr(msg, "dim 0 of size 10"));
  ck_assert_ptr_nonnull(strstr(msg, "3,3,3,1"));
  ck_assert(tpx_sharding_ok(sh)); /* a warning only */
  /* the slices follow torch.chunk */
  int64_t e = tpx_model_find_param(m, "model.embed_tokens.weight");
  static const int64_t off[4] = {0, 3, 6, 9}, len[4] = {3, 3, 3, 1};
  for (int64_t r = 0; r < 4; r++) {
    tpx_slice s;
    ck_assert_int_eq(tpx_sharding_local_slice(sh, e, r, &s, NULL), TPX_OK);
    ck_assert_int_eq(s.offset[0], off[r]);
    ck_assert_int_eq(s.length[0], len[r]);
    ck_assert_int_eq(s.length[1], FX_H);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(replicated_by_omission) {
  tpx_model *m = fx_llama();
  tpx_error e = {0};
  /* (b) a sibling of q_proj with the same shape and no key */
  fx_linear(m, "model.layers.0.self_attn.extra_proj", FX_H, FX_H, 0);
  tpx_plan *p = fx_llama_plan();
  /* (a) down_proj only in layer 0: layer 1's is replicated by omission */
  ck_assert_int_eq(tpx_plan_remove(p, "model.layers.*.mlp.down_proj", &e),
                   TPX_OK);
  fx_set(p, "model.layers.0.mlp.down_proj", TPX_STYLE_ROWWISE, 0);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  const tpx_diag_list *d = tpx_sharding_diagnostics(sh);
  for (size_t i = 0; getenv("FX_DEBUG") && i < tpx_diag_count(d); i++) {
    tpx_diag g;
    tpx_diag_get(d, i, &g, NULL);
    fprintf(stderr, "%s: %s\n", g.code, g.message);
  }
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_WARNING, "replicated-by-omission"), 2);
  int saw_down = 0, saw_extra = 0;
  for (size_t i = 0; i < tpx_diag_count(d); i++) {
    tpx_diag g;
    tpx_diag_get(d, i, &g, NULL);
    if (strcmp(g.code, "replicated-by-omission") != 0)
      continue;
    if (strcmp(g.subject, "model.layers.1.mlp.down_proj.weight") == 0) {
      saw_down = 1;
      ck_assert_ptr_nonnull(
          strstr(g.message, "model.layers.0.mlp.down_proj.weight"));
    }
    /* the sibling case is reported by matching (subject generalized) */
    if (strstr(g.message, "'model.layers.0.self_attn.extra_proj.weight'"))
      saw_extra = 1;
  }
  ck_assert(saw_down && saw_extra);
  /* norms are replicated in every layer: no warning for them */
  ck_assert(strstr(fx_msg(d, "replicated-by-omission"), "layernorm") == NULL);
  tpx_sharding_destroy(sh);
  tpx_plan_destroy(p);

  /* A sequence_parallel key on model.layers.* covers every submodule (the
   * partition runs for each): o_proj (no key of its own, siblings q/k/v
   * colwise) reports plan_key model.layers.* and no omission warning, in
   * matching or in application. The nesting itself is an error. */
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  fx_set(p, "model.layers.*", TPX_STYLE_SEQUENCE_PARALLEL, 0);
  fx_set(p, "model.layers.*.self_attn.[qkv]_proj", TPX_STYLE_COLWISE, 0);
  sh = fx_shard(m, p, mesh, NULL);
  d = tpx_sharding_diagnostics(sh);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_WARNING, "replicated-by-omission"), 0);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_ERROR, "nested-styles"), 1);
  tpx_param_sharding ps;
  ck_assert_int_eq(
      tpx_sharding_param(
          sh, tpx_model_find_param(m, "model.layers.0.self_attn.o_proj.weight"),
          &ps, NULL),
      TPX_OK);
  ck_assert_str_eq(ps.plan_key, "model.layers.*");
  tpx_sharding_destroy(sh);
  tpx_plan_destroy(p);

  /* prepare_module_input on the attention block: its parameters are keyed
   * (not omitted), though no style places them. */
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  fx_set(p, "model.layers.*.self_attn", TPX_STYLE_PREPARE_MODULE_INPUT, 0);
  fx_set(p, "model.layers.*.mlp.up_proj", TPX_STYLE_COLWISE, 0);
  sh = fx_shard(m, p, mesh, NULL);
  d = tpx_sharding_diagnostics(sh);
  for (size_t i = 0; i < tpx_diag_count(d); i++) {
    tpx_diag g;
    tpx_diag_get(d, i, &g, NULL);
    ck_assert_msg(strcmp(g.code, "replicated-by-omission") != 0 ||
                      strstr(g.message, "self_attn") == NULL,
                  "%s", g.message);
  }
  /* gate_proj, same shape as the sharded up_proj, is still omitted */
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_WARNING, "replicated-by-omission"), 1);
  ck_assert_ptr_nonnull(
      strstr(fx_msg(d, "replicated-by-omission"), "gate_proj"));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(tp_one_applies_nothing) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  char buf[64];
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", TP, buf, sizeof buf),
      "replicate");
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", 1, buf, sizeof buf),
      "shard(0)");
  ck_assert_int_eq(tpx_sharding_tp_size(sh), 1);
  /* the plan is kept for the report */
  ck_assert_uint_eq(tpx_plan_size(tpx_sharding_plan(sh)), tpx_plan_size(p));
  ck_assert(tpx_sharding_ok(sh));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

typedef struct {
  const char *module;
  size_t n;
  const char *fwd[2], *bwd[2];
} tr_case;

START_TEST(collectives_per_style) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  /* sequence-parallel overrides: o_proj / down_proj out Shard(1), norms sp */
  tpx_style row_sp = tpx_style_default(TPX_STYLE_ROWWISE);
  row_sp.output_layouts.items[0] = tpx_placement_shard(1);
  row_sp.use_local_output = 0;
  fx_set_style(p, "model.layers.*.self_attn.o_proj", &row_sp);
  fx_set(p, "model.layers.*.input_layernorm",
         TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION, 0);
  fx_set(p, "model.norm", TPX_STYLE_SEQUENCE_PARALLEL, 0);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  static const tr_case cases[] = {
      {"model.layers.0.self_attn.q_proj",
       2,
       {"none", "none"},
       {"all-reduce", "none"}},
      {"model.layers.0.mlp.down_proj",
       2,
       {"none", "all-reduce"},
       {"none", "none"}},
      {"model.layers.1.self_attn.o_proj",
       2,
       {"none", "reduce-scatter(dim=1)"},
       {"none", "all-gather(dim=1)"}},
      {"model.embed_tokens",
       2,
       {"none", "mask + all-reduce"},
       {"none", "none"}},
      {"lm_head", 2, {"none", "none"}, {"all-reduce", "none"}},
      {"model.layers.0.input_layernorm",
       2,
       {"none", "all-gather(dim=1)"},
       {"none", "reduce-scatter(dim=1)"}},
      {"model.norm", 2, {"none", "none"}, {"none", "none"}},
      {"model.layers.0.self_attn", 0, {NULL, NULL}, {NULL, NULL}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t mod = tpx_model_find_module(m, cases[i].module);
    const tpx_transition *t = NULL;
    size_t n = 9;
    ck_assert_int_eq(tpx_sharding_module_transitions(sh, mod, &t, &n, NULL),
                     TPX_OK);
    ck_assert_msg(n == cases[i].n, "%s: %zu transitions", cases[i].module, n);
    for (size_t j = 0; j < n; j++) {
      ck_assert_msg(strcmp(t[j].forward, cases[i].fwd[j]) == 0,
                    "%s[%zu] fwd %s", cases[i].module, j, t[j].forward);
      ck_assert_msg(strcmp(t[j].backward, cases[i].bwd[j]) == 0,
                    "%s[%zu] bwd %s", cases[i].module, j, t[j].backward);
    }
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(bad_arguments) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = (tpx_sharding *)1;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_sharding_create(NULL, NULL, mesh, NULL, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(sh);
  tpx_sharding_options o = TPX_SHARDING_OPTIONS_INIT;
  o.struct_size = 4;
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_sharding_create(m, NULL, mesh, &o, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "struct_size"));
  tpx_sharding_options o2 = TPX_SHARDING_OPTIONS_INIT;
  o2.dp_shard_dim = "tp";
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_sharding_create(m, NULL, mesh, &o2, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  /* an empty plan: everything replicated over tp, still fine */
  sh = fx_shard(m, NULL, mesh, NULL);
  tpx_param_sharding ps;
  ck_assert_int_eq(tpx_sharding_param(sh, 100000, &ps, &e), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, 2), -1);
  ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, -1), -1);
  const tpx_transition *t;
  size_t n;
  ck_assert_int_eq(tpx_sharding_module_transitions(sh, -3, &t, &n, NULL),
                   TPX_OUT_OF_RANGE);
  tpx_sharding_destroy(sh);
  tpx_sharding_destroy(NULL);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* Custom mesh dim names; a mesh without the TP dim means tp 1. */
START_TEST(custom_dim_names) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  const char *names[2] = {"dp", "model"};
  int64_t sizes[2] = {2, 4};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, &mesh, NULL), TPX_OK);
  tpx_sharding_options o = TPX_SHARDING_OPTIONS_INIT;
  o.tp_dim = "model";
  o.dp_shard_dim = "dp";
  o.dp_replicate_dim = NULL;
  tpx_sharding *sh = fx_shard(m, p, mesh, &o);
  char buf[64];
  ck_assert_int_eq(tpx_sharding_tp_size(sh), 4);
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", 1, buf, sizeof buf),
      "shard(0)");
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", 0, buf, sizeof buf),
      "strided_shard(0,4)");
  ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, 0),
                   2 * (114688 / 8 + 320 / 2));
  tpx_sharding_destroy(sh);
  /* default names: no "tp" in this mesh -> nothing TP-sharded */
  sh = fx_shard(m, p, mesh, NULL);
  ck_assert_int_eq(tpx_sharding_tp_size(sh), 1);
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", 1, buf, sizeof buf),
      "replicate");
  ck_assert_str_eq(
      fx_pl(sh, "model.layers.0.self_attn.q_proj.weight", 0, buf, sizeof buf),
      "replicate");
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* replicated_with_grad_allreduce (NeMo Automodel 0.7.0's style for Qwen3's
 * per-head q_norm / k_norm): the norm stays replicated over tp, its key is
 * reported as covering it, its gradient is summed over tp, and the
 * partial-grad-replicated warning (for the unstyled norm) goes away. The
 * tpx-plan/1 text form round-trips. */
START_TEST(replicated_with_grad_allreduce_style) {
  for (int styled = 0; styled < 2; styled++) {
    tpx_model *m = NULL;
    ck_assert_int_eq(tpx_model_create(&m, NULL), TPX_OK);
    fx_linear(m, "model.layers.0.self_attn.q_proj", 4 * FX_H, FX_H, 0);
    fx_norm(m, "model.layers.0.self_attn.q_norm"); /* [FX_H]: one head */
    fx_linear(m, "model.layers.0.self_attn.o_proj", FX_H, 4 * FX_H, 0);
    tpx_plan *p = NULL;
    ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
    fx_set(p, "model.layers.*.self_attn.q_proj", TPX_STYLE_COLWISE, 0);
    if (styled)
      fx_set(p, "model.layers.*.self_attn.q_norm",
             TPX_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE, 0);
    fx_set(p, "model.layers.*.self_attn.o_proj", TPX_STYLE_ROWWISE, 0);
    tpx_mesh *mesh = fx_mesh(1, 1, 4);
    tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
    const tpx_diag_list *d = tpx_sharding_diagnostics(sh);
    ck_assert_uint_eq(fx_count(d, TPX_DIAG_WARNING, "partial-grad-replicated"),
                      styled ? 0 : 1);
    ck_assert(tpx_sharding_ok(sh));
    int64_t w =
        tpx_model_find_param(m, "model.layers.0.self_attn.q_norm.weight");
    char buf[64];
    ck_assert_str_eq(fx_pl(sh, "model.layers.0.self_attn.q_norm.weight", TP,
                           buf, sizeof buf),
                     "replicate");
    tpx_param_sharding ps;
    ck_assert_int_eq(tpx_sharding_param(sh, w, &ps, NULL), TPX_OK);
    if (styled)
      ck_assert_str_eq(ps.plan_key, "model.layers.*.self_attn.q_norm");
    else
      ck_assert_ptr_null(ps.plan_key);
    /* summed over tp either way: styled, or unstyled beside a colwise */
    ck_assert_int_eq(tpx_tp_param_grad_needs_allreduce(sh, w), 1);
    /* no collectives of its own */
    ck_assert_uint_eq(fx_count(d, TPX_DIAG_ERROR, "style-unsupported-module"),
                      0);
    if (styled) {
      char *json = NULL;
      tpx_plan *q = NULL;
      ck_assert_int_eq(tpx_plan_to_json(p, 0, &json, NULL), TPX_OK);
      ck_assert_ptr_nonnull(
          strstr(json, "\"style\":\"replicated_with_grad_allreduce\""));
      ck_assert_int_eq(tpx_plan_from_json(json, strlen(json), "rt", &q, NULL),
                       TPX_OK);
      tpx_plan_entry pe;
      ck_assert_int_eq(tpx_plan_get(q, 1, &pe, NULL), TPX_OK);
      ck_assert_int_eq(pe.style.kind, TPX_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE);
      ck_assert(tpx_style_kind_traits(pe.style.kind).sums_grad_over_tp);
      ck_assert_int_eq(tpx_style_kind_traits(pe.style.kind).family,
                       TPX_STYLE_FAMILY_REPLICATED);
      tpx_plan_destroy(q);
      free(json);
    }
    tpx_sharding_destroy(sh);
    tpx_mesh_destroy(mesh);
    tpx_plan_destroy(p);
    tpx_model_destroy(m);
  }
}
END_TEST

/* Issue 26: a config written by a transformers newer than the embedded
 * conversion table gets the conversion-table-older info naming both
 * versions and the regeneration doc; the table's own release, older ones
 * and a config without the key get nothing. */
START_TEST(conversion_table_older) {
  static const char *const versions[] = {"5.26.0.dev0", "6.0",    "5.25.1",
                                         "5.25.0",      "4.57.1", NULL};
  const char *v = versions[_i];
  char cfg[512];
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": "
           "\"llama\", \"hidden_size\": 64, \"num_attention_heads\": 8, "
           "\"num_key_value_heads\": 8, \"num_hidden_layers\": 2%s%s%s}",
           v ? ", \"transformers_version\": \"" : "", v ? v : "",
           v ? "\"" : "");
  fx_opts o = {0, 0, 0, 0, cfg};
  tpx_model *m = fx_model(&o);
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  const tpx_diag_list *d = tpx_sharding_diagnostics(sh);
  int newer = _i < 3;
  ck_assert_str_eq(tpx_model_conversion_table_version(), "5.25.0");
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_INFO, "conversion-table-older"),
                    (size_t)newer);
  for (size_t i = 0; i < tpx_diag_count(d); i++) {
    tpx_diag g;
    tpx_diag_get(d, i, &g, NULL);
    if (strcmp(g.code, "conversion-table-older") != 0)
      continue;
    ck_assert_int_eq(g.level, TPX_DIAG_INFO);
    ck_assert_str_eq(g.subject, "transformers_version");
    ck_assert_msg(strstr(g.message, v) && strstr(g.message, "5.25.0"), "%s",
                  g.message);
    ck_assert_ptr_nonnull(strstr(g.fix, "docs/CONVERSION.md"));
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

static Suite *apply_suite(void) {
  Suite *s = suite_create("apply");
  TCase *tc = tcase_create("apply");
  tcase_add_test(tc, llama_placements);
  tcase_add_loop_test(tc, style_table, 0,
                      (int)(sizeof style_cases / sizeof style_cases[0]));
  tcase_add_test(tc, prepare_styles_keep_params);
  tcase_add_test(tc, colwise_on_norm_is_error);
  tcase_add_test(tc, tied_ok_and_conflicts);
  tcase_add_test(tc, uneven_shard_warning);
  tcase_add_test(tc, replicated_by_omission);
  tcase_add_test(tc, tp_one_applies_nothing);
  tcase_add_test(tc, collectives_per_style);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, custom_dim_names);
  tcase_add_test(tc, replicated_with_grad_allreduce_style);
  tcase_add_loop_test(tc, conversion_table_older, 0, 6);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(apply_suite)
