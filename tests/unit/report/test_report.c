/* test_report.c — tpx-report/1 JSON (checked against a golden file, subset
 * semantics: every field in the golden must be present and equal; arrays
 * must have the same length) and the text report (layers collapsed,
 * memory, diagnostics with codes and fixes). */
#include <stddef.h>

#include <jansson.h>

#include "../shard/shard_fixture.h"
#include "tpx/report.h"

/* 1 when every field of `want` is in `got` with an equal value. */
static int subset(const json_t *want, const json_t *got, char *path,
                  size_t size) {
  if (json_is_object(want)) {
    if (!json_is_object(got))
      return 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)want, k, v) {
      size_t n = strlen(path);
      snprintf(path + n, size - n, ".%s", k);
      if (!subset(v, json_object_get(got, k), path, size))
        return 0;
      path[n] = '\0';
    }
    return 1;
  }
  if (json_is_array(want)) {
    if (!json_is_array(got) || json_array_size(got) != json_array_size(want))
      return 0;
    for (size_t i = 0; i < json_array_size(want); i++) {
      size_t n = strlen(path);
      snprintf(path + n, size - n, "[%zu]", i);
      if (!subset(json_array_get(want, i), json_array_get(got, i), path, size))
        return 0;
      path[n] = '\0';
    }
    return 1;
  }
  return got && json_equal((json_t *)want, (json_t *)got);
}

static const char *trace[2] = {"custom plan: none given",
                               "plugin llama: LlamaForCausalLM -> plan"};

static tpx_report_options plugin_opts(void) {
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.plan_source = "plugin";
  o.plugin_name = "llama";
  o.plugin_path = "/abs/libtpx_llama.so";
  o.function = "llama";
  o.num_trace = 2;
  o.trace = trace;
  return o;
}

static json_t *report_json(const tpx_sharding *sh,
                           const tpx_report_options *o) {
  char *text = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_report_json(sh, o, &text, &e) == TPX_OK, "%s", e.message);
  json_error_t je;
  json_t *j = json_loads(text, 0, &je);
  ck_assert_msg(j != NULL, "report JSON does not parse: %s", je.text);
  free(text);
  return j;
}

START_TEST(json_matches_golden) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_report_options o = plugin_opts();
  json_t *got = report_json(sh, &o);
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/report/llama_tp2_dp2.json",
           getenv("TPX_SOURCE_DIR") ? getenv("TPX_SOURCE_DIR") : ".");
  json_error_t je;
  json_t *want = json_load_file(path, 0, &je);
  ck_assert_msg(want != NULL, "%s: %s", path, je.text);
  char where[512] = "";
  ck_assert_msg(subset(want, got, where, sizeof where), "differs at %s", where);
  json_decref(want);
  json_decref(got);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(json_fields) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(2, 2, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_report_options o = plugin_opts();
  json_t *j = report_json(sh, &o);
  ck_assert_str_eq(json_string_value(json_object_get(j, "format")),
                   "tpx-report/1");
  json_t *model = json_object_get(j, "model");
  ck_assert_int_eq(json_integer_value(json_object_get(model, "total_params")),
                   115008);
  ck_assert_int_eq(json_integer_value(json_object_get(model, "total_bytes")),
                   230016);
  ck_assert_str_eq(json_string_value(json_object_get(model, "dtype")), "bf16");
  /* parameters: one per parameter, placements one per mesh dim */
  json_t *params = json_object_get(j, "parameters");
  ck_assert_uint_eq(json_array_size(params), tpx_model_num_params(m));
  size_t i;
  json_t *v;
  int saw_q = 0, saw_norm = 0;
  json_array_foreach(params, i, v) {
    json_t *pl = json_object_get(v, "placements");
    ck_assert_uint_eq(json_object_size(pl), 3);
    const char *name = json_string_value(json_object_get(v, "name"));
    if (strcmp(name, "model.layers.1.self_attn.q_proj.weight") == 0) {
      saw_q = 1;
      ck_assert_str_eq(json_string_value(json_object_get(pl, "tp")),
                       "shard(0)");
      ck_assert_str_eq(json_string_value(json_object_get(pl, "dp_shard")),
                       "strided_shard(0,4)");
      ck_assert_str_eq(json_string_value(json_object_get(pl, "dp_replicate")),
                       "replicate");
      ck_assert_str_eq(json_string_value(json_object_get(v, "fsdp_unit")),
                       "model.layers.1");
      ck_assert_str_eq(json_string_value(json_object_get(v, "plan_key")),
                       "model.layers.*.self_attn.q_proj");
    }
    if (strcmp(name, "model.norm.weight") == 0) {
      saw_norm = 1;
      ck_assert(json_is_null(json_object_get(v, "plan_key")));
      ck_assert_str_eq(json_string_value(json_object_get(v, "fsdp_unit")), "");
    }
  }
  ck_assert(saw_q && saw_norm);
  /* per rank: world entries, bytes as hand-computed (S/(tp*dps) + R/dps) */
  json_t *ranks = json_object_get(j, "per_rank");
  ck_assert_uint_eq(json_array_size(ranks), 16);
  json_array_foreach(ranks, i, v) {
    ck_assert_int_eq(json_integer_value(json_object_get(v, "rank")), (int)i);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "param_bytes")),
                     2 * (114688 / 8 + 320 / 2));
    json_t *c = json_object_get(v, "coords");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "tp")),
                     (int)(i % 4));
    ck_assert_int_eq(json_integer_value(json_object_get(c, "dp_replicate")),
                     (int)(i / 8));
  }
  ck_assert(json_is_true(json_object_get(j, "ok")));
  json_t *plan = json_object_get(j, "plan");
  ck_assert_str_eq(json_string_value(json_object_get(plan, "format")),
                   "tpx-plan/1");
  ck_assert_uint_eq(json_array_size(json_object_get(plan, "entries")),
                    tpx_plan_size(p));
  json_decref(j);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Errors make ok false, from the sharding (tied conflict) or from
 * selection-time diagnostics (heads); the plan is still in the report, also
 * at tp == 1. */
START_TEST(json_errors_and_tp1) {
  fx_opts fo = {0, 1, 0, 0, NULL};
  tpx_model *m = fx_model(&fo);
  tpx_plan *p = fx_llama_plan();
  fx_set(p, "model.embed_tokens", TPX_STYLE_COLWISE, 0);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  json_t *j = report_json(sh, NULL);
  ck_assert(json_is_false(json_object_get(j, "ok")));
  json_t *d = json_object_get(j, "diagnostics");
  size_t i;
  json_t *v;
  int saw = 0;
  json_array_foreach(d, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "code")),
               "tied-embeddings") == 0) {
      saw = 1;
      ck_assert_str_eq(json_string_value(json_object_get(v, "level")), "error");
      ck_assert(json_string_value(json_object_get(v, "fix")) != NULL);
    }
  }
  ck_assert(saw);
  ck_assert_str_eq(json_string_value(json_object_get(
                       json_object_get(j, "selection"), "source")),
                   "custom");
  json_decref(j);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);

  /* tp 1 with a selection-time error */
  tpx_diag_list *sd = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&sd, NULL), TPX_OK);
  ck_assert_int_eq(tpx_diag_add(sd, TPX_DIAG_ERROR, "heads-not-divisible",
                                "num_key_value_heads", "use tp 1, 2, 4, 8",
                                "num_key_value_heads (8) must be divisible"),
                   TPX_OK);
  mesh = fx_mesh(1, 2, 1);
  sh = fx_shard(m, p, mesh, NULL);
  tpx_report_options o = plugin_opts();
  o.selection_diags = sd;
  ck_assert(!tpx_report_ok(sh, &o));
  j = report_json(sh, &o);
  ck_assert(json_is_false(json_object_get(j, "ok")));
  ck_assert_uint_eq(
      json_array_size(json_object_get(json_object_get(j, "plan"), "entries")),
      tpx_plan_size(p));
  json_t *first = json_array_get(json_object_get(j, "diagnostics"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(first, "code")),
                   "heads-not-divisible");
  json_decref(j);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_diag_list_destroy(sd);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(text_report) {
  fx_opts fo = {0, 1, 0, 0, NULL};
  tpx_model *m = fx_model(&fo);
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_report_options o = plugin_opts();
  char *text = NULL;
  ck_assert_int_eq(tpx_report_text(sh, &o, &text, NULL), TPX_OK);
  static const char *const needles[] = {
      "Model: LlamaForCausalLM",
      "Mesh: dp_replicate=1 dp_shard=2 tp=2 (world 4)",
      "Plan: plugin (plugin 'llama', function llama) from /abs/libtpx_llama.so",
      "  - plugin llama: LlamaForCausalLM -> plan",
      "model.layers.{0..1}.self_attn.q_proj.weight",
      "dp_shard=strided_shard(0,2) tp=shard(0)  x2",
      "model.layers.{0..1}.self_attn.o_proj.weight",
      "(tied to model.embed_tokens.weight)",
      "FSDP2: 3 units",
      "ranks 0-3",
      "per rank after TP: 4 heads, 4 kv heads",
      "Result: OK",
  };
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
    ck_assert_msg(strstr(text, needles[i]) != NULL, "missing '%s' in:\n%s",
                  needles[i], text);
  /* collapsed: layer 0 never appears on its own row */
  ck_assert_ptr_null(strstr(text, "model.layers.0.self_attn.q_proj.weight"));
  free(text);
  tpx_sharding_destroy(sh);

  /* diagnostics with codes and fixes */
  fx_set(p, "model.embed_tokens", TPX_STYLE_COLWISE, 0);
  sh = fx_shard(m, p, mesh, NULL);
  ck_assert_int_eq(tpx_report_text(sh, NULL, &text, NULL), TPX_OK);
  ck_assert_ptr_nonnull(strstr(text, "error [tied-embeddings]"));
  ck_assert_ptr_nonnull(strstr(text, "      fix: "));
  ck_assert_ptr_nonnull(strstr(text, "Result: NOT OK (1 error)"));
  free(text);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(format_bytes_and_bad_args) {
  char buf[32];
  ck_assert_str_eq(tpx_format_bytes(512, buf, sizeof buf), "512 B");
  ck_assert_str_eq(tpx_format_bytes(1536, buf, sizeof buf), "1.5 KiB");
  ck_assert_str_eq(tpx_format_bytes(12 << 20, buf, sizeof buf), "12.0 MiB");
  ck_assert_str_eq(tpx_format_bytes(3LL << 29, buf, sizeof buf), "1.50 GiB");
  char *out = (char *)1;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_report_json(NULL, NULL, &out, &e), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_report_text(NULL, NULL, &out, NULL),
                   TPX_INVALID_ARGUMENT);
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 1, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.struct_size = 3;
  ck_assert_int_eq(tpx_report_json(sh, &o, &out, NULL), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* The upstream release line always; the strategy's properties when given
 * (text and JSON); options from a caller whose struct ends at `indent`
 * (before the strategy fields) still work and carry no strategy. */
START_TEST(strategy_and_upstream) {
  static const char *const st[] = {"name=Wan", "mp_output_dtype=bf16",
                                   "activation_checkpointing=whole block",
                                   "no equals sign"};
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_report_options o = plugin_opts();
  o.num_strategy = 4;
  o.strategy = st;
  char *text = NULL;
  ck_assert_int_eq(tpx_report_text(sh, &o, &text, NULL), TPX_OK);
  ck_assert_ptr_nonnull(strstr(text, "Upstream: " TPX_UPSTREAM_VERSION));
  ck_assert_ptr_nonnull(strstr(text, "Strategy: Wan\n"));
  ck_assert_ptr_nonnull(strstr(text, "  mp_output_dtype: bf16\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "  activation_checkpointing: whole block\n"));
  ck_assert_ptr_null(strstr(text, "no equals sign"));
  free(text);
  json_t *j = report_json(sh, &o);
  json_t *sel = json_object_get(j, "selection");
  ck_assert_str_eq(json_string_value(json_object_get(sel, "upstream")),
                   "NeMo Automodel 0.7.0");
  json_t *so = json_object_get(sel, "strategy");
  ck_assert_uint_eq(json_object_size(so), 3);
  ck_assert_str_eq(json_string_value(json_object_get(so, "name")), "Wan");
  json_decref(j);
  /* an older caller: struct_size ends at indent */
  o.struct_size = offsetof(tpx_report_options, indent) + sizeof(int);
  ck_assert_int_eq(tpx_report_text(sh, &o, &text, NULL), TPX_OK);
  ck_assert_ptr_null(strstr(text, "Strategy:"));
  ck_assert_ptr_nonnull(strstr(text, "Upstream: "));
  free(text);
  j = report_json(sh, &o);
  ck_assert_ptr_null(
      json_object_get(json_object_get(j, "selection"), "strategy"));
  json_decref(j);
  /* one byte short of that is refused */
  o.struct_size -= 1;
  ck_assert_int_eq(tpx_report_text(sh, &o, &text, NULL), TPX_INVALID_ARGUMENT);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* Regression: jansson rejects invalid UTF-8 (json_string returns NULL), so
 * a config path or a plugin path in a legacy encoding silently dropped
 * "model.source" / "selection.path" and trace lines. They are now kept with
 * U+FFFD in place of the bad bytes. */
START_TEST(json_non_utf8_strings) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config(m, fx_llama_config,
                                        strlen(fx_llama_config),
                                        "dir/cf\xffg.json", &e),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_module(m, "l\xe9", TPX_MODULE_LINEAR, NULL, &e), TPX_OK);
  int64_t w[2] = {4, 4};
  ck_assert_int_eq(
      tpx_model_add_param(m, "l\xe9", "weight", w, 2, TPX_DTYPE_BF16, NULL, &e),
      TPX_OK);
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  static const char *const tr[2] = {"ok line", "bad \xc3( line"};
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.plan_source = "plugin";
  o.plugin_name = "x";
  o.plugin_path = "/lib/\xfe/libx.so";
  o.num_trace = 2;
  o.trace = tr;
  json_t *j = report_json(sh, &o);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_object_get(j, "model"), "source")),
      "dir/cf\xef\xbf\xbdg.json");
  json_t *sel = json_object_get(j, "selection");
  ck_assert_str_eq(json_string_value(json_object_get(sel, "path")),
                   "/lib/\xef\xbf\xbd/libx.so");
  ck_assert_int_eq(json_array_size(json_object_get(sel, "trace")), 2);
  ck_assert_str_eq(
      json_string_value(json_array_get(json_object_get(sel, "trace"), 1)),
      "bad \xef\xbf\xbd( line");
  json_t *p0 = json_array_get(json_object_get(j, "parameters"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(p0, "name")),
                   "l\xef\xbf\xbd.weight");
  ck_assert_str_eq(json_string_value(json_object_get(p0, "module")),
                   "l\xef\xbf\xbd");
  ck_assert(json_is_string(json_object_get(p0, "fsdp_unit")));
  json_decref(j);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* n top-level norms "n1".."n{n}", norm j has a [j] weight: over dp_shard
 * = n+1 with torch.chunk, rank r holds 1 element of each norm j > r, so
 * every rank has a different figure (n+1 groups). */
static tpx_model *staircase_model(int n) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  for (int j = 1; j <= n; j++) {
    char fqn[16];
    snprintf(fqn, sizeof fqn, "n%d", j);
    int64_t w[1] = {j};
    ck_assert_int_eq(tpx_model_add_module(m, fqn, TPX_MODULE_NORM, NULL, &e),
                     TPX_OK);
    ck_assert_int_eq(
        tpx_model_add_param(m, fqn, "weight", w, 1, TPX_DTYPE_F32, NULL, &e),
        TPX_OK);
  }
  return m;
}

/* Regression: the memory section lists up to 16 groups of ranks and then
 * said "... (more ranks in the JSON report)" whenever it stopped early, even
 * when the 16 groups already covered every rank. */
START_TEST(text_memory_more_ranks) {
  static const struct {
    int norms;
    int64_t dps;
    int more;
  } cases[] = {{15, 16, 0}, {16, 17, 1}, {3, 4, 0}, {20, 21, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tpx_model *m = staircase_model(cases[i].norms);
    tpx_mesh *mesh = fx_mesh(1, cases[i].dps, 1);
    tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, 0), 4 * cases[i].norms);
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, cases[i].dps - 1), 0);
    char *text = NULL;
    ck_assert_int_eq(tpx_report_text(sh, NULL, &text, NULL), TPX_OK);
    ck_assert_msg((strstr(text, "more ranks") != NULL) == cases[i].more,
                  "case %zu: 'more ranks' %s expected in:\n%s", i,
                  cases[i].more ? "is" : "is not", text);
    free(text);
    tpx_sharding_destroy(sh);
    tpx_mesh_destroy(mesh);
    tpx_model_destroy(m);
  }
}
END_TEST

/* The modules array names each styled module's kind (what the style's
 * placements depend on: colwise Linear Shard(0), colwise Embedding Shard(1)).
 */
START_TEST(json_module_kind) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  fx_set(p, "model.embed_tokens", TPX_STYLE_COLWISE, 0);
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  json_t *j = report_json(sh, NULL);
  json_t *mods = json_object_get(j, "modules");
  int seen_emb = 0, seen_lin = 0;
  for (size_t i = 0; i < json_array_size(mods); i++) {
    json_t *x = json_array_get(mods, i);
    const char *name = json_string_value(json_object_get(x, "module"));
    const char *kind = json_string_value(json_object_get(x, "kind"));
    ck_assert_ptr_nonnull(kind);
    if (strcmp(name, "model.embed_tokens") == 0) {
      ck_assert_str_eq(kind, "embedding");
      seen_emb = 1;
    } else if (strstr(name, "q_proj")) {
      ck_assert_str_eq(kind, "linear");
      seen_lin = 1;
    }
  }
  ck_assert(seen_emb && seen_lin);
  json_decref(j);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* per_rank is spliced into the dumped JSON as text (a jansson tree cost
 * ~1 KB per rank: 1.9 GB at a million ranks). The result must parse and
 * hold every rank, for compact and indented output, with escaped names. */
START_TEST(json_per_rank_text) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  const char *names[3] = {"dp\"r", "dp_shard", "tp"};
  int64_t sizes[3] = {2, 64, 2};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 3, &mesh, NULL), TPX_OK);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.dp_replicate_dim = "dp\"r";
  tpx_sharding *sh = fx_shard(m, p, mesh, &so);
  static const int indents[] = {0, 2, 40};
  for (size_t k = 0; k < 3; k++) {
    tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
    o.indent = indents[k];
    json_t *j = report_json(sh, &o);
    json_t *pr = json_object_get(j, "per_rank");
    ck_assert_uint_eq(json_array_size(pr), 256);
    for (size_t r = 0; r < 256; r++) {
      json_t *e = json_array_get(pr, r);
      ck_assert_int_eq(json_integer_value(json_object_get(e, "rank")),
                       (json_int_t)r);
      json_t *c = json_object_get(e, "coords");
      ck_assert_int_eq(json_integer_value(json_object_get(c, "dp\"r")),
                       (json_int_t)(r / 128));
      ck_assert_int_eq(json_integer_value(json_object_get(c, "dp_shard")),
                       (json_int_t)(r / 2 % 64));
      ck_assert_int_eq(json_integer_value(json_object_get(c, "tp")),
                       (json_int_t)(r % 2));
      ck_assert_int_eq(json_integer_value(json_object_get(e, "param_bytes")),
                       tpx_sharding_rank_param_bytes(sh, (int64_t)r));
      ck_assert_int_eq(json_integer_value(json_object_get(e, "peak_bytes")),
                       tpx_sharding_rank_peak_bytes(sh, (int64_t)r));
    }
    /* the fields after per_rank survive the splice */
    ck_assert(json_is_array(json_object_get(j, "diagnostics")));
    ck_assert(json_is_boolean(json_object_get(j, "ok")));
    json_decref(j);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Regression: the text table keyed rows by a 1024-byte template of the
 * module FQN, so two modules whose FQNs differed only after ~1020 bytes
 * shared one row ("x2") under a truncated name. */
START_TEST(text_long_names) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  char a[1400], b[1400];
  memset(a, 'x', sizeof a);
  memcpy(a, "model.", 6);
  snprintf(a + 1300, sizeof a - 1300, ".first");
  memcpy(b, a, sizeof b);
  snprintf(b + 1300, sizeof b - 1300, ".other");
  int64_t w[2] = {4, 4};
  ck_assert_int_eq(tpx_model_add_module(m, a, TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_param(m, a, "weight", w, 2, TPX_DTYPE_BF16, NULL, &e),
      TPX_OK);
  ck_assert_int_eq(tpx_model_add_module(m, b, TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_param(m, b, "weight", w, 2, TPX_DTYPE_BF16, NULL, &e),
      TPX_OK);
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  char *text = NULL;
  ck_assert_int_eq(tpx_report_text(sh, NULL, &text, NULL), TPX_OK);
  char wa[1500], wb[1500];
  snprintf(wa, sizeof wa, "%s.weight", a);
  snprintf(wb, sizeof wb, "%s.weight", b);
  ck_assert_msg(strstr(text, wa) != NULL, "first row missing");
  ck_assert_msg(strstr(text, wb) != NULL, "second row missing");
  ck_assert_ptr_null(strstr(text, "  x2"));
  free(text);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* fp32-kept parameters: per parameter fsdp_param_dtype (and keep_fp32 on
 * the matches), the patterns with their counts under fsdp.mixed_precision,
 * and a text line per pattern. */
START_TEST(fp32_params_in_report) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  static const char *const pats[] = {"model.layers.*.input_layernorm.weight",
                                     "model.no_such.weight"};
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.num_fp32_params = 2;
  so.fp32_params = pats;
  tpx_sharding *sh = fx_shard(m, p, mesh, &so);
  json_t *j = report_json(sh, NULL);
  size_t i;
  json_t *v;
  int kept = 0;
  json_array_foreach(json_object_get(j, "parameters"), i, v) {
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *dt = json_string_value(json_object_get(v, "fsdp_param_dtype"));
    int norm = strstr(name, "input_layernorm") != NULL;
    ck_assert_msg(dt && strcmp(dt, norm ? "f32" : "bf16") == 0, "%s: %s", name,
                  dt ? dt : "null");
    ck_assert_int_eq(json_is_true(json_object_get(v, "keep_fp32")), norm);
    kept += norm;
  }
  ck_assert_int_eq(kept, 2);
  json_t *f32 = json_object_get(
      json_object_get(json_object_get(j, "fsdp"), "mixed_precision"),
      "fp32_params");
  ck_assert_uint_eq(json_array_size(f32), 2);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(f32, 0), "pattern")),
      pats[0]);
  ck_assert_int_eq(
      json_integer_value(json_object_get(json_array_get(f32, 0), "params")), 2);
  ck_assert_int_eq(
      json_integer_value(json_object_get(json_array_get(f32, 1), "params")), 0);
  json_decref(j);
  char *text = NULL;
  ck_assert_int_eq(tpx_report_text(sh, NULL, &text, NULL), TPX_OK);
  ck_assert_ptr_nonnull(strstr(text, "mixed precision: param bf16, reduce "
                                     "f32, output f32"));
  ck_assert_ptr_nonnull(strstr(text, "kept in fp32"));
  ck_assert_ptr_nonnull(
      strstr(text, "model.layers.*.input_layernorm.weight: 2 parameters"));
  ck_assert_ptr_nonnull(strstr(text, "model.no_such.weight: 0 parameters"));
  ck_assert_ptr_nonnull(strstr(text, "x2  (kept in fp32)"));
  free(text);
  tpx_sharding_destroy(sh);

  /* FSDP off: fsdp_param_dtype is null, the patterns are still listed */
  so.fsdp = 0;
  sh = fx_shard(m, p, mesh, &so);
  j = report_json(sh, NULL);
  ck_assert(json_is_null(
      json_object_get(json_array_get(json_object_get(j, "parameters"), 0),
                      "fsdp_param_dtype")));
  json_decref(j);
  ck_assert_int_eq(tpx_report_text(sh, NULL, &text, NULL), TPX_OK);
  ck_assert_ptr_nonnull(strstr(text, "FSDP: off\n  kept in fp32"));
  free(text);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Buffers (issue 26): a `buffers` section with name, shape, dtype and
 * bytes, replicated; the per-rank parameter bytes do not count them, as
 * upstream's per_rank_param_bytes do not (tests/data/upstream goldens). */
START_TEST(buffers_in_report) {
  tpx_model *m = fx_llama(), *plain = fx_llama();
  tpx_error e = {0};
  int64_t shape[1] = {4};
  ck_assert_int_eq(
      tpx_model_add_buffer(m, "model.layers.0.mlp.gate.e_score_correction_bias",
                           shape, 1, TPX_DTYPE_F32, &e),
      TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_buffer(m, "model.layers.1.mlp.gate.e_score_correction_bias",
                           shape, 1, TPX_DTYPE_F32, &e),
      TPX_OK);
  ck_assert_int_eq(tpx_model_add_buffer(m, "model.rotary_emb.inv_freq", NULL, 0,
                                        TPX_DTYPE_BF16, &e),
                   TPX_OK);
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_sharding *sh0 = fx_shard(plain, p, mesh, NULL);
  for (int64_t r = 0; r < 4; r++) {
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, r),
                     tpx_sharding_rank_param_bytes(sh0, r));
    ck_assert_int_eq(tpx_sharding_rank_peak_bytes(sh, r),
                     tpx_sharding_rank_peak_bytes(sh0, r));
  }
  json_t *j = report_json(sh, NULL);
  json_t *b = json_object_get(j, "buffers");
  ck_assert_ptr_nonnull(b);
  ck_assert_str_eq(json_string_value(json_object_get(b, "placement")),
                   "replicate");
  ck_assert_int_eq(json_integer_value(json_object_get(b, "total_bytes")), 34);
  json_t *items = json_object_get(b, "items");
  ck_assert_uint_eq(json_array_size(items), 3);
  json_t *it = json_array_get(items, 0);
  ck_assert_str_eq(json_string_value(json_object_get(it, "name")),
                   "model.layers.0.mlp.gate.e_score_correction_bias");
  ck_assert_int_eq(
      json_integer_value(json_array_get(json_object_get(it, "shape"), 0)), 4);
  ck_assert_str_eq(json_string_value(json_object_get(it, "dtype")), "f32");
  ck_assert_int_eq(json_integer_value(json_object_get(it, "bytes")), 16);
  it = json_array_get(items, 2);
  ck_assert_uint_eq(json_array_size(json_object_get(it, "shape")), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(it, "bytes")), 2);
  /* no buffer is a parameter */
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(j, "parameters"), i, v)
      ck_assert_ptr_null(strstr(json_string_value(json_object_get(v, "name")),
                                "e_score_correction_bias"));
  json_decref(j);
  j = report_json(sh0, NULL);
  ck_assert_ptr_null(json_object_get(j, "buffers"));
  json_decref(j);
  char *text = NULL;
  ck_assert_int_eq(tpx_report_text(sh, NULL, &text, NULL), TPX_OK);
  ck_assert_ptr_nonnull(strstr(text, "\nBuffers ("));
  ck_assert_ptr_nonnull(strstr(text, "never sharded"));
  ck_assert_msg(
      strstr(text, "model.layers.*.mlp.gate.e_score_correction_bias") &&
          strstr(text, "[4] f32, 16 B each, x2\n"),
      "%s", text);
  ck_assert_ptr_nonnull(strstr(text, "model.rotary_emb.inv_freq"));
  ck_assert_ptr_nonnull(strstr(text, "3 buffers, 34 B on every rank\n"));
  free(text);
  ck_assert_int_eq(tpx_report_html(sh, NULL, &text, NULL), TPX_OK);
  ck_assert_ptr_nonnull(
      strstr(text, "; 3 buffers, 34 B, whole on every rank (never sharded)"));
  free(text);
  tpx_sharding_destroy(sh);
  tpx_sharding_destroy(sh0);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
  tpx_model_destroy(plain);
}
END_TEST

static Suite *report_suite(void) {
  Suite *s = suite_create("report");
  TCase *tc = tcase_create("report");
  tcase_add_test(tc, json_matches_golden);
  tcase_add_test(tc, json_fields);
  tcase_add_test(tc, json_errors_and_tp1);
  tcase_add_test(tc, text_report);
  tcase_add_test(tc, format_bytes_and_bad_args);
  tcase_add_test(tc, strategy_and_upstream);
  tcase_add_test(tc, json_non_utf8_strings);
  tcase_add_test(tc, text_memory_more_ranks);
  tcase_add_test(tc, json_module_kind);
  tcase_add_test(tc, json_per_rank_text);
  tcase_add_test(tc, text_long_names);
  tcase_add_test(tc, fp32_params_in_report);
  tcase_add_test(tc, buffers_in_report);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(report_suite)
