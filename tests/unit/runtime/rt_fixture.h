/* rt_fixture.h — main-thread helpers of the TP runtime tests: the tiny
 * llama of tests/unit/shard/shard_fixture.h (plus a rotary module and q/k
 * norms for the style zoo), plans from the built llama plugin, a zoo plan
 * that uses every style, shardings, and running a case on local threads.
 * Header-only; every helper fails the current Check test on error. */
#ifndef TPX_TEST_RT_FIXTURE_H
#define TPX_TEST_RT_FIXTURE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shard/shard_fixture.h"
#include "comm/local_test.h"
#include "rt_cases.h"
#include "rt_util.h"
#include "tpx/registry.h"
#include "tpx/tpx.h"

/* The tiny llama (H 64, I 128, 2 layers) with vocab V, untied, plus
 * model.rotary_emb (rotary) and layers.*.self_attn.{q,k}_norm (norm [8]). */
static inline tpx_model *rt_model(int64_t vocab) {
  fx_opts o = {vocab, 0, 0, 0, NULL};
  tpx_model *m = fx_model(&o);
  tpx_error e = {0};
  ck_assert_int_eq(
      tpx_model_add_module(m, "model.rotary_emb", TPX_MODULE_ROTARY, NULL, &e),
      TPX_OK);
  int64_t hd[1] = {8};
  for (int l = 0; l < 2; l++)
    for (int k = 0; k < 2; k++) {
      char f[96];
      snprintf(f, sizeof f, "model.layers.%d.self_attn.%s", l,
               k ? "k_norm" : "q_norm");
      ck_assert_int_eq(tpx_model_add_module(m, f, TPX_MODULE_NORM, NULL, &e),
                       TPX_OK);
      ck_assert_msg(tpx_model_add_param(m, f, "weight", hd, 1, TPX_DTYPE_BF16,
                                        NULL, &e) == TPX_OK,
                    "%s", e.message);
    }
  return m;
}

/* Plugin `family`'s plan for architecture `arch` (sp on / off) at tp. */
static inline tpx_plan *rt_plugin_plan(const char *family, const char *arch,
                                       const tpx_model *m, int sp, int64_t tp) {
  const char *build = getenv("TPX_BUILD_DIR");
  ck_assert_msg(build != NULL, "TPX_BUILD_DIR is not set");
  char path[1024];
  snprintf(path, sizeof path, "%s/plugins/%s/libtpx_%s.so", build, family,
           family);
  tpx_registry *reg = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_create(&reg, &e), TPX_OK);
  ck_assert_msg(tpx_registry_load_file(reg, path, &e) == TPX_OK, "%s: %s", path,
                e.message);
  tpx_plan *p = NULL;
  ck_assert_msg(tpx_registry_get_plan(reg, 0, m, arch, NULL, sp, tp, &p, &e) ==
                    TPX_OK,
                "%s plan: %s", arch, e.message);
  tpx_registry_destroy(reg);
  return p;
}

/* The llama plugin's plan for LlamaForCausalLM (sp on / off) at tp. */
static inline tpx_plan *rt_llama_plan(const tpx_model *m, int sp, int64_t tp) {
  return rt_plugin_plan("llama", "LlamaForCausalLM", m, sp, tp);
}

static inline tpx_plan *rt_plan_json(const char *json) {
  tpx_plan *p = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_plan_from_json(json, strlen(json), "test", &p, &e) ==
                    TPX_OK,
                "plan json: %s", e.message);
  return p;
}

/* Every style and several layout pairs, on the rt_model. */
static const char rt_zoo_plan[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": ["
    "{\"module\": \"model.embed_tokens\", \"style\": "
    "\"gemma4_vocab_parallel_embedding\", \"input_layouts\": [\"replicate\"],"
    " \"output_layouts\": [\"shard(1)\"], \"use_local_output\": false},"
    "{\"module\": \"model.rotary_emb\", \"style\": \"rotary_embed_parallel\"},"
    "{\"module\": \"model.layers.*.input_layernorm\", \"style\": "
    "\"sequence_parallel\"},"
    "{\"module\": \"model.layers.*.post_attention_layernorm\", \"style\": "
    "\"sequence_parallel_allgather_activation\"},"
    "{\"module\": \"model.layers.*.self_attn.q_norm\", \"style\": "
    "\"qk_norm_sequence_parallel\", \"sequence_dim\": 2},"
    "{\"module\": \"model.layers.*.self_attn.k_norm\", \"style\": "
    "\"qk_norm_sequence_parallel\", \"sequence_dim\": 2},"
    "{\"module\": \"model.layers.0.self_attn.q_proj\", \"style\": "
    "\"colwise\", \"input_layouts\": [\"shard(1)\"], \"output_layouts\": "
    "[\"replicate\"]},"
    "{\"module\": \"model.layers.0.self_attn.k_proj\", \"style\": "
    "\"colwise\", \"output_layouts\": [\"shard(1)\"]},"
    "{\"module\": \"model.layers.0.self_attn.v_proj\", \"style\": "
    "\"prepare_module_input\", \"input_layouts\": [\"shard(1)\", null, "
    "\"partial\", \"replicate\", \"shard(2)\"], \"desired_input_layouts\": "
    "[\"replicate\", null, \"shard(1)\", \"shard(-1)\", \"shard(1)\"]},"
    "{\"module\": \"model.layers.0.self_attn.o_proj\", \"style\": "
    "\"gemma4_rowwise_parallel\", \"output_layouts\": [\"shard(1)\"]},"
    "{\"module\": \"model.layers.0.mlp.gate_proj\", \"style\": \"rowwise\","
    " \"input_layouts\": [\"replicate\"]},"
    "{\"module\": \"model.layers.0.mlp.up_proj\", \"style\": "
    "\"prepare_module_output\", \"output_layouts\": [\"partial\", "
    "\"replicate\", \"shard(1)\", \"replicate\"], \"desired_output_layouts\":"
    " [\"replicate\", \"shard(2)\", \"shard(-1)\", \"partial\"]},"
    "{\"module\": \"model.layers.0.mlp.down_proj\", \"style\": "
    "\"rowwise\", \"output_layouts\": [\"shard(1)\"]},"
    "{\"module\": \"model.layers.1.mlp.*_proj\", \"style\": \"colwise\"},"
    "{\"module\": \"lm_head\", \"style\": \"prepare_module_input\", "
    "\"input_layouts\": [\"shard(1)\"], \"desired_input_layouts\": "
    "[\"replicate\"], \"use_local_output\": true}"
    "]}";

/* The Qwen plan's SP MLP: an SP norm (Shard(1) DTensor) straight into a
 * default colwise (input Replicate): the DTensor arrival path. */
static const char rt_sp_norm_plan[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": ["
    "{\"module\": \"model.layers.*.post_attention_layernorm\", \"style\": "
    "\"sequence_parallel\"},"
    "{\"module\": \"model.layers.*.mlp.up_proj\", \"style\": \"colwise\"},"
    "{\"module\": \"model.layers.*.mlp.down_proj\", \"style\": \"rowwise\","
    " \"output_layouts\": [\"shard(1)\"], \"use_local_output\": false}"
    "]}";

/* A model, a plan and their sharding on mesh (dp_replicate 1, dp_shard dp,
 * tp), FSDP off; owns all four. */
typedef struct rt_world {
  tpx_model *m;
  tpx_plan *p;
  tpx_mesh *mesh;
  tpx_sharding *sh;
} rt_world;

/* Takes ownership of m and p. */
static inline rt_world rt_world_of(tpx_model *m, tpx_plan *p, int64_t dp,
                                   int64_t tp) {
  rt_world w = {m, p, fx_mesh(1, dp, tp), NULL};
  tpx_sharding_options o = TPX_SHARDING_OPTIONS_INIT;
  o.fsdp = 0;
  w.sh = fx_shard(m, p, w.mesh, &o);
  return w;
}

/* A real config (`config`: relative to the source dir) through plugin
 * `family`'s skeleton and its plan for `arch` (sp on / off) at tp, on
 * mesh (1, 1, tp), FSDP off. */
static inline rt_world rt_config_world(const char *family, const char *config,
                                       const char *arch, int sp, int64_t tp) {
  const char *src = getenv("TPX_SOURCE_DIR");
  const char *build = getenv("TPX_BUILD_DIR");
  ck_assert(src && build);
  char path[1024];
  tpx_error e = {0};
  tpx_registry *reg = NULL;
  ck_assert_int_eq(tpx_registry_create(&reg, &e), TPX_OK);
  snprintf(path, sizeof path, "%s/plugins/%s/libtpx_%s.so", build, family,
           family);
  ck_assert_msg(tpx_registry_load_file(reg, path, &e) == TPX_OK, "%s",
                e.message);
  snprintf(path, sizeof path, "%s/%s", src, config);
  tpx_model *m = NULL;
  ck_assert_msg(tpx_model_load_config(path, &m, &e) == TPX_OK, "%s", e.message);
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &e) == TPX_OK, "%s",
                e.message);
  tpx_plan *p = NULL;
  ck_assert_msg(tpx_registry_get_plan(reg, 0, m, arch, NULL, sp, tp, &p, &e) ==
                    TPX_OK,
                "%s", e.message);
  tpx_registry_destroy(reg);
  return rt_world_of(m, p, 1, tp);
}

static inline void rt_world_free(rt_world *w) {
  tpx_sharding_destroy(w->sh);
  tpx_mesh_destroy(w->mesh);
  tpx_plan_destroy(w->p);
  tpx_model_destroy(w->m);
}

/* In a rank body: fail (TPX_VALIDATION into err) unless `call`, which
 * writes into the local tpx_error e_, returns `want_st` with `needle` in
 * its message. */
#define RT_EXPECT(call, want_st, needle)                                       \
  do {                                                                         \
    tpx_error e_ = {0};                                                        \
    tpx_status got_ = (call);                                                  \
    if (got_ != (want_st) || !strstr(e_.message, (needle)))                    \
      return tpx_error_set(err, TPX_VALIDATION,                                \
                           "line %d: got %s '%s', want %s with '%s'",          \
                           __LINE__, tpx_status_name(got_), e_.message,        \
                           tpx_status_name(want_st), (needle));                \
  } while (0)

/* A rank body's argument: the sharding. */
typedef struct rt_sh_arg {
  const tpx_sharding *sh;
} rt_sh_arg;

/* Run a rank body on local threads over the sharding's whole mesh, on
 * host memory and, when `sim` is set, again with the world in the sim
 * memory space (the body then wraps each library call in RTU_SIM and
 * checks its own results both times). */
static inline void rt_run_body_mem(tpx_local_fn fn, const tpx_sharding *sh,
                                   int sim_too) {
  rt_sh_arg a = {sh};
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  for (int sim = 0; sim <= sim_too; sim++) {
    tpx_error e = {0};
    ck_assert_msg(tpx__local_run_sim((int)world, sim, fn, &a, &e) == TPX_OK,
                  "%s%s", e.message, sim ? " (sim memory)" : "");
  }
}

/* A body whose library calls take host buffers directly: host only. */
static inline void rt_run_body(tpx_local_fn fn, const tpx_sharding *sh) {
  rt_run_body_mem(fn, sh, 0);
}

/* Run a case on local threads over the sharding's whole mesh. Run the case
 * twice: on host memory, then with the world in the sim memory space (every
 * tensor a library call sees is a pointer that faults on a host access); both
 * pass their checks and every tensor after every call is bit-identical (the
 * per-rank digests match). */
static inline void rt_run(tpx_local_fn fn, rt_arg *a, const char *what) {
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(a->sh));
  ck_assert_int_le(world, RT_MAX_RANKS);
  uint64_t host[RT_MAX_RANKS];
  int host_runs = 0;
  for (int sim = 0; sim < 2; sim++) {
    tpx_error e = {0};
    for (int r = 0; r < RT_MAX_RANKS; r++)
      rtu_digest[r] = 14695981039346656037ULL;
    tpx_status st = tpx__local_run_sim((int)world, sim, fn, a, &e);
    ck_assert_msg(st == TPX_OK, "%s (world %lld%s): %s", what, (long long)world,
                  sim ? ", sim memory" : "", e.message);
    if (!sim) {
      memcpy(host, rtu_digest, sizeof host);
      host_runs = a->cases_run;
      continue;
    }
    ck_assert_int_eq(a->cases_run, host_runs);
    for (int r = 0; r < world; r++)
      ck_assert_msg(rtu_digest[r] == host[r],
                    "%s: rank %d's tensors differ between host and sim "
                    "memory",
                    what, r);
  }
}

#endif
