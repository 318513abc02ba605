/* good.c — a small, complete, well-behaved test plugin ("tpxtest"), so the
 * plugin suite does not depend on the family plugins. It serves a made-up
 * Llama-shaped architecture under a bare and a qualified name, a named plan,
 * and every optional capability.
 *
 * Built twice: as libtpxtest_good.so and, with -DGOOD_DUPLICATE, as
 * libtpxtest_dup.so (same architectures, another name) for the
 * duplicate-architecture test. With -DGOOD_PROBE it also answers the probe
 * architecture "ProbeForCausalLM" whose get_plan exercises the host table
 * and reports every status code through set_error. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TPX_PLUGIN_DECLARE_ENTRY_POINTS
#include "tpx/plugin.h"

#ifdef GOOD_DUPLICATE
#define PLUGIN_NAME "tpxtest-dup"
#else
#define PLUGIN_NAME "tpxtest"
#endif

static const char *const architectures[] = {
    "TestForCausalLM", "tests.models.test.modeling_test.TestForCausalLM",
    "tests.models.qual.QualOnlyForCausalLM",
#ifdef GOOD_PROBE
    "ProbeForCausalLM",
#endif
    NULL};
static const char *const plan_names[] = {"tpxtest_named_plan", NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  const uint32_t mine = TPX_PLUGIN_ABI_VERSION(1, 0);
  if (host->abi_min > mine || host->abi_max < mine ||
      TPX_PLUGIN_ABI_VERSION_MAJOR(host->abi_max) != 1)
    return TPX_PLUGIN_ABI_UNSUPPORTED;
  info->abi_version = mine;
  info->name = PLUGIN_NAME;
  info->version = "1.2.3";
  info->description = "tpx test plugin (tests/unit/plugin/good)";
  info->architectures = architectures;
  info->plan_names = plan_names;
  return TPX_PLUGIN_OK;
}

static int add(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
               const char *module, const char *style, const char *in,
               const char *out, int local, int optional) {
  tpx_plugin_entry e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.module = module;
  e.style = style;
  const char *ins[1] = {in}, *outs[1] = {out};
  if (in) {
    e.input_layouts = ins;
    e.n_input_layouts = 1;
  }
  if (out) {
    e.output_layouts = outs;
    e.n_output_layouts = 1;
  }
  e.use_local_output = local;
  e.sequence_dim = TPX_PLUGIN_DEFAULT;
  e.optional = optional;
  return h->plan_add(ctx, &e);
}

#ifdef GOOD_PROBE
/* Append "name=code;" to buf. */
static void note(char *buf, size_t size, const char *name, int code) {
  size_t n = strlen(buf);
  snprintf(buf + n, size - n, "%s=%d;", name, code);
}

/* Four parts (tp=1 and 4: reads and queries, tp=2 and 3: building), so each
 * report fits in one error message whatever the path of the plugin. */
static int probe(const tpx_plugin_host *h, tpx_plugin_ctx *ctx, int64_t part) {
  char r[2048] = "";
  int64_t i64 = 0;
  double d = 0;
  int b = 0;
  const char *s = NULL;
  if (part == 2)
    goto building;
  if (part == 3)
    goto more_building;
  if (part == 4)
    goto more_reads;
  note(r, sizeof r, "int", h->config_get_int(ctx, "num_attention_heads", &i64));
  note(r, sizeof r, "int_value", (int)i64);
  note(r, sizeof r, "int_from_float",
       h->config_get_int(ctx, "two_float", &i64));
  note(r, sizeof r, "int_from_frac",
       h->config_get_int(ctx, "rms_norm_eps", &i64));
  note(r, sizeof r, "float", h->config_get_float(ctx, "rms_norm_eps", &d));
  note(r, sizeof r, "float_x1e6", (int)(d * 1e6 + 0.5));
  note(r, sizeof r, "float_from_int",
       h->config_get_float(ctx, "hidden_size", &d));
  note(r, sizeof r, "bool", h->config_get_bool(ctx, "tie_word_embeddings", &b));
  note(r, sizeof r, "bool_value", b);
  note(r, sizeof r, "bool_mismatch",
       h->config_get_bool(ctx, "hidden_size", &b));
  note(r, sizeof r, "string", h->config_get_string(ctx, "model_type", &s));
  note(r, sizeof r, "string_is_test", s && strcmp(s, "tpxtest") == 0);
  note(r, sizeof r, "missing", h->config_get_int(ctx, "no_such_key", &i64));
  note(r, sizeof r, "null", h->config_get_int(ctx, "null_value", &i64));
  note(r, sizeof r, "nested",
       h->config_get_int(ctx, "text_config.num_attention_heads", &i64));
  note(r, sizeof r, "nested_value", (int)i64);
  note(r, sizeof r, "array_item",
       h->config_get_int(ctx, "block_configs[1].n_heads", &i64));
  note(r, sizeof r, "array_item_value", (int)i64);
  h->set_error(ctx, r);
  return TPX_PLUGIN_REFUSED;
more_reads:
  note(r, sizeof r, "length_array",
       h->config_get_length(ctx, "block_configs", &i64));
  note(r, sizeof r, "length_array_value", (int)i64);
  note(r, sizeof r, "length_object",
       h->config_get_length(ctx, "text_config", &i64));
  note(r, sizeof r, "length_object_value", (int)i64);
  note(r, sizeof r, "key", h->config_get_key(ctx, "text_config", 1, &s));
  note(r, sizeof r, "key_is_second", s && strcmp(s, "second") == 0);
  note(r, sizeof r, "key_out_of_range",
       h->config_get_key(ctx, "text_config", 9, &s));
  note(r, sizeof r, "has", h->config_has(ctx, "rms_norm_eps"));
  note(r, sizeof r, "has_not", h->config_has(ctx, "nope"));
  note(r, sizeof r, "has_module",
       h->model_has_module(ctx, "model.embed_tokens"));
  note(r, sizeof r, "children",
       (int)h->model_count_children(ctx, "model.layers"));
  note(r, sizeof r, "children_missing",
       (int)h->model_count_children(ctx, "model.nope"));
  h->set_error(ctx, r);
  return TPX_PLUGIN_REFUSED;
building:
  note(r, sizeof r, "null_ctx", h->config_get_int(NULL, "hidden_size", &i64));
  note(r, sizeof r, "skeleton_in_get_plan",
       h->skeleton_add_module(ctx, "x", "linear"));
  note(r, sizeof r, "bad_style",
       add(h, ctx, "a.b", "diagonalwise", NULL, NULL, TPX_PLUGIN_DEFAULT, 0));
  note(r, sizeof r, "bad_layout",
       add(h, ctx, "a.b", "colwise", "sideways", NULL, TPX_PLUGIN_DEFAULT, 0));
  note(r, sizeof r, "bad_key",
       add(h, ctx, "a..b", "colwise", NULL, NULL, TPX_PLUGIN_DEFAULT, 0));
  note(r, sizeof r, "bad_local",
       add(h, ctx, "a.b", "colwise", NULL, NULL, 7, 0));
  note(r, sizeof r, "sp_with_layouts",
       add(h, ctx, "a.b", "sequence_parallel", "replicate", NULL,
           TPX_PLUGIN_DEFAULT, 0));
  {
    const char *in[2] = {"shard(1)", NULL}, *des[2] = {"replicate", NULL};
    tpx_plugin_entry e;
    memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.module = "p.q";
    e.style = "prepare_module_input";
    e.input_layouts = in;
    e.n_input_layouts = 2;
    e.desired_layouts = des;
    e.n_desired_layouts = 2;
    e.use_local_output = TPX_PLUGIN_DEFAULT;
    e.sequence_dim = TPX_PLUGIN_DEFAULT;
    note(r, sizeof r, "prep_in", h->plan_add(ctx, &e));
    e.style = "colwise";
    e.n_input_layouts = 2;
    e.desired_layouts = NULL;
    e.n_desired_layouts = 0;
    note(r, sizeof r, "none_in_colwise", h->plan_add(ctx, &e));
  }
  note(r, sizeof r, "good_add",
       add(h, ctx, "a.b", "colwise", "replicate", "shard(-1)", 0, 0));
  h->set_error(ctx, r);
  return TPX_PLUGIN_REFUSED;
more_building:
  note(r, sizeof r, "json_add",
       h->plan_add_json(ctx, "{\"module\":\"c.d\",\"style\":\"rowwise\"}"));
  note(r, sizeof r, "json_bad",
       h->plan_add_json(ctx, "{\"module\":\"c.d\",\"style\":\"bogus\"}"));
  note(r, sizeof r, "remove", h->plan_remove(ctx, "c.d"));
  note(r, sizeof r, "remove_missing", h->plan_remove(ctx, "c.d"));
  note(r, sizeof r, "function", h->plan_set_function(ctx, "probe_fn"));
  note(r, sizeof r, "diag_bad_code", h->diagnose(ctx, 1, "Bad Code", "m"));
  note(r, sizeof r, "fp32_in_get_plan", h->fp32_add(ctx, "x"));
  note(r, sizeof r, "strategy_in_get_plan", h->strategy_set(ctx, "name", "x"));
  note(r, sizeof r, "has_add_source",
       h->struct_size > offsetof(tpx_plugin_host, skeleton_add_source) &&
           h->skeleton_add_source != NULL);
  note(r, sizeof r, "source_in_get_plan",
       h->skeleton_add_source(ctx, "x.w", "y.w", NULL, NULL, 0, 0));
  h->set_error(ctx, r);
  return TPX_PLUGIN_REFUSED;
}
#endif

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
#ifdef GOOD_PROBE
  if (strcmp(req->architecture, "ProbeForCausalLM") == 0)
    return probe(h, ctx, req->tp_size);
#endif
  /* Misbehaviours on request, for the harness tests (config flags). */
  int untie = 0, unmatched = 0, ignore_heads = 0, flaky = 0, silent = 0;
  h->config_get_bool(ctx, "tpxtest_untie_plan", &untie);
  h->config_get_bool(ctx, "tpxtest_unmatched_key", &unmatched);
  h->config_get_bool(ctx, "tpxtest_ignore_heads", &ignore_heads);
  h->config_get_bool(ctx, "tpxtest_nondeterministic", &flaky);
  h->config_get_bool(ctx, "tpxtest_refuse_silently", &silent);
  int64_t heads = 0, kv = 0;
  if (h->config_get_int(ctx, "num_attention_heads", &heads) != TPX_PLUGIN_OK)
    heads = 0;
  if (h->config_get_int(ctx, "num_key_value_heads", &kv) != TPX_PLUGIN_OK)
    kv = heads;
  if (!ignore_heads &&
      ((heads && heads % req->tp_size) || (kv && kv % req->tp_size))) {
    if (silent)
      return TPX_PLUGIN_REFUSED; /* no set_error: what the harness rejects */
    char msg[160];
    snprintf(msg, sizeof msg,
             "num_attention_heads (%lld) / num_key_value_heads (%lld) are not "
             "divisible by tp=%lld",
             (long long)heads, (long long)kv, (long long)req->tp_size);
    h->set_error(ctx, msg);
    return TPX_PLUGIN_REFUSED;
  }
  const int sp = req->sequence_parallel;
  const int named = req->plan_name != NULL;
  int rc = 0;
  if (untie) /* colwise embedding: Shard(1), against lm_head's Shard(0) */
    rc |= add(h, ctx, "model.embed_tokens", "colwise", NULL, NULL,
              TPX_PLUGIN_DEFAULT, 0);
  else
    rc |= add(h, ctx, "model.embed_tokens", "vocab_parallel_embedding",
              "replicate", sp ? "shard(1)" : NULL, sp ? 0 : TPX_PLUGIN_DEFAULT,
              0);
  if (unmatched)
    rc |= add(h, ctx, "model.layers.*.mlp.gate_proj", "colwise", NULL, NULL,
              TPX_PLUGIN_DEFAULT, 0);
  if (flaky) {
    /* Global mutable state: exactly what the ABI forbids. */
    static atomic_int calls;
    if (atomic_fetch_add(&calls, 1) % 2)
      rc |= add(h, ctx, "model.layers.*.mlp.flaky", "colwise", NULL, NULL,
                TPX_PLUGIN_DEFAULT, 1);
  }
  rc |= add(h, ctx, "model.layers.*.self_attn.q_proj", "colwise", NULL, NULL,
            TPX_PLUGIN_DEFAULT, 0);
  rc |= add(h, ctx, "model.layers.*.self_attn.k_proj", "colwise", NULL, NULL,
            TPX_PLUGIN_DEFAULT, 0);
  rc |= add(h, ctx, "model.layers.*.self_attn.v_proj", "colwise", NULL, NULL,
            TPX_PLUGIN_DEFAULT, 0);
  rc |= add(h, ctx, "model.layers.*.self_attn.qkv_proj", "colwise", NULL, NULL,
            TPX_PLUGIN_DEFAULT, 1);
  rc |= add(h, ctx, "model.layers.*.self_attn.o_proj", "rowwise", NULL,
            sp ? "shard(1)" : NULL, sp ? 0 : TPX_PLUGIN_DEFAULT, 0);
  rc |= add(h, ctx, "model.layers.*.mlp.up_proj", "colwise", NULL, NULL,
            TPX_PLUGIN_DEFAULT, 0);
  rc |= add(h, ctx, "model.layers.*.mlp.down_proj", "rowwise", NULL,
            sp ? "shard(1)" : NULL, sp ? 0 : TPX_PLUGIN_DEFAULT, 0);
  rc |= add(h, ctx, "lm_head", "colwise", sp ? "shard(1)" : NULL,
            named ? "replicate" : "shard(-1)", 0, 0);
  if (sp) {
    rc |= h->plan_add_json(ctx, "{\"module\": \"model.norm\", \"style\": "
                                "\"sequence_parallel\"}");
    rc |= add(h, ctx, "model.layers.*.input_layernorm",
              "sequence_parallel_allgather_activation", NULL, NULL,
              TPX_PLUGIN_DEFAULT, 0);
  }
  h->plan_set_function(ctx, named ? "tpxtest_named_plan" : "tpxtest_plan");
  if (rc != TPX_PLUGIN_OK) {
    h->set_error(ctx, "building the plan failed");
    return TPX_PLUGIN_ERROR;
  }
  return TPX_PLUGIN_OK;
}

/* The skeleton: embed, N layers of attention + MLP + norms, norm, lm_head
 * (tied to the embedding when tie_word_embeddings is true). */
TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *h,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture) {
  int64_t hidden, layers, vocab, inter, heads, kv;
  if (h->config_get_int(ctx, "hidden_size", &hidden) ||
      h->config_get_int(ctx, "num_hidden_layers", &layers) ||
      h->config_get_int(ctx, "vocab_size", &vocab) ||
      h->config_get_int(ctx, "intermediate_size", &inter) ||
      h->config_get_int(ctx, "num_attention_heads", &heads)) {
    h->set_error(ctx, "config lacks hidden_size, num_hidden_layers, "
                      "vocab_size, intermediate_size or num_attention_heads");
    return TPX_PLUGIN_REFUSED;
  }
  if (h->config_get_int(ctx, "num_key_value_heads", &kv))
    kv = heads;
  if (heads <= 0 || hidden % heads || layers < 0 || layers > 4096) {
    h->set_error(ctx, "implausible head or layer counts");
    return TPX_PLUGIN_REFUSED;
  }
  int tie = 0;
  if (h->config_get_bool(ctx, "tie_word_embeddings", &tie))
    tie = 0;
  const int64_t hd = hidden / heads;
  int rc = 0;
  int64_t shape[2];
  rc |= h->skeleton_add_module(ctx, "model.embed_tokens", "embedding");
  shape[0] = vocab, shape[1] = hidden;
  rc |= h->skeleton_add_param(ctx, "model.embed_tokens", "weight", shape, 2,
                              NULL);
  char fqn[128];
  for (int64_t i = 0; i < layers && rc == 0; i++) {
    static const char *const lin[] = {"self_attn.q_proj", "self_attn.k_proj",
                                      "self_attn.v_proj", "self_attn.o_proj",
                                      "mlp.up_proj",      "mlp.down_proj"};
    const int64_t shapes[6][2] = {{heads * hd, hidden}, {kv * hd, hidden},
                                  {kv * hd, hidden},    {hidden, heads * hd},
                                  {inter, hidden},      {hidden, inter}};
    for (int k = 0; k < 6; k++) {
      snprintf(fqn, sizeof fqn, "model.layers.%lld.%s", (long long)i, lin[k]);
      rc |= h->skeleton_add_module(ctx, fqn, "linear");
      rc |= h->skeleton_add_param(ctx, fqn, "weight", shapes[k], 2, NULL);
    }
    snprintf(fqn, sizeof fqn, "model.layers.%lld.input_layernorm",
             (long long)i);
    rc |= h->skeleton_add_module(ctx, fqn, "norm");
    rc |= h->skeleton_add_param(ctx, fqn, "weight", &hidden, 1, NULL);
  }
  rc |= h->skeleton_add_module(ctx, "model.norm", "norm");
  rc |=
      h->skeleton_add_param(ctx, "model.norm", "weight", &hidden, 1, "float32");
  rc |= h->skeleton_add_module(ctx, "lm_head", "linear");
  if (tie) {
    rc |= h->skeleton_tie(ctx, "lm_head.weight", "model.embed_tokens.weight");
  } else {
    shape[0] = vocab, shape[1] = hidden;
    rc |= h->skeleton_add_param(ctx, "lm_head", "weight", shape, 2, NULL);
  }
  (void)architecture;
  return rc ? TPX_PLUGIN_ERROR : TPX_PLUGIN_OK;
}

TPX_PLUGIN_EXPORT int tpx_plugin_validate(const tpx_plugin_host *h,
                                          tpx_plugin_ctx *ctx,
                                          const tpx_plugin_plan_request *req) {
  int64_t layers = 0;
  if (h->config_get_int(ctx, "num_hidden_layers", &layers) == TPX_PLUGIN_OK &&
      layers == 0)
    h->diagnose(ctx, TPX_PLUGIN_DIAG_WARNING, "tpxtest-no-layers",
                "the model has no layers");
  h->diagnose(ctx, TPX_PLUGIN_DIAG_INFO, "tpxtest-validated",
              req->sequence_parallel ? "validated with sp" : "validated");
  return TPX_PLUGIN_OK;
}

TPX_PLUGIN_EXPORT int tpx_plugin_fsdp_units(const tpx_plugin_host *h,
                                            tpx_plugin_ctx *ctx,
                                            const char *architecture) {
  int64_t n = h->model_count_children(ctx, "model.layers");
  char fqn[64];
  for (int64_t i = 0; i < n; i++) {
    snprintf(fqn, sizeof fqn, "model.layers.%lld", (long long)i);
    if (h->fsdp_add_unit(ctx, fqn, i + 1 == n ? 0 : TPX_PLUGIN_DEFAULT))
      return TPX_PLUGIN_ERROR;
  }
  (void)architecture;
  return TPX_PLUGIN_OK;
}

/* Strategy properties: a key set twice keeps its place with the new value;
 * a key tpx cannot read fails the call when the config asks for it. */
TPX_PLUGIN_EXPORT int tpx_plugin_strategy(const tpx_plugin_host *h,
                                          tpx_plugin_ctx *ctx,
                                          const char *architecture) {
  int bad = 0, bad_mp = 0, st;
  (void)architecture;
  if (h->struct_size <= offsetof(tpx_plugin_host, strategy_set))
    return TPX_PLUGIN_OK;
  h->config_get_bool(ctx, "tpxtest_bad_strategy_key", &bad);
  if (bad)
    return h->strategy_set(ctx, "Bad Key", "x");
  h->config_get_bool(ctx, "tpxtest_bad_mp", &bad_mp);
  if (bad_mp)
    return h->strategy_set(ctx, "mp_param_dtype", "float7");
  if ((st = h->strategy_set(ctx, "name", "first")) != TPX_PLUGIN_OK ||
      (st = h->strategy_set(ctx, "mp_output_dtype", "bf16")) != TPX_PLUGIN_OK ||
      (st = h->strategy_set(ctx, "activation_checkpointing",
                            "whole block: each model.layers[i]")) !=
          TPX_PLUGIN_OK)
    return st;
  return h->strategy_set(ctx, "name", "TpxTest");
}

TPX_PLUGIN_EXPORT int tpx_plugin_fp32_params(const tpx_plugin_host *h,
                                             tpx_plugin_ctx *ctx,
                                             const char *architecture) {
  (void)architecture;
  return h->fp32_add(ctx, "model.norm.weight");
}
