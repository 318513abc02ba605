/* test_loader.c — the plugin loader and registry: every broken fixture is
 * refused with a precise reason, the good plugin's registration is copied
 * faithfully, the search path order, duplicate architectures, architecture
 * matching (bare / qualified), and thread-safe lookups and calls. */
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>

#include "plugin_test.h"
#include "tpx/plan.h"

static tpx_registry *new_registry(void) {
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  return r;
}

/* Each broken fixture: the status of load_file and words its reason must
 * hold (both versions for ABI refusals). */
static const struct {
  const char *file;
  tpx_status status;
  const char *reason[3];
} refusals[] = {
    {"no_symbols.so",
     TPX_PLUGIN,
     {"missing required symbol", "'register_parallel_strategy' and 'get_plan'",
      NULL}},
    {"missing_get_plan.so",
     TPX_PLUGIN,
     {"missing required symbol 'get_plan'", NULL, NULL}},
    {"abi_too_new.so",
     TPX_ABI_MISMATCH,
     {"ABI refused", "host speaks 1.0..1.", "plugin speaks 2.0"}},
    {"abi_too_old.so",
     TPX_ABI_MISMATCH,
     {"ABI refused", "answered ABI 0.9", "range 1.0..1."}},
    {"register_fails.so",
     TPX_PLUGIN,
     {"registration failed", "TPX_PLUGIN_ERROR",
      "the frobnicator table is missing"}},
    {"null_name.so", TPX_PLUGIN, {"registration: name is NULL", NULL, NULL}},
    {"no_architectures.so",
     TPX_PLUGIN,
     {"registration: architectures is empty", NULL, NULL}},
    {"bad_traits.so",
     TPX_PLUGIN,
     {"registration: traits[0] holds a space", NULL, NULL}},
    {"not_elf.so", TPX_PLUGIN, {"not an ELF file", "no ELF magic", NULL}},
    {"does_not_exist.so", TPX_PLUGIN, {"dlopen failed", NULL, NULL}},
};

START_TEST(broken_is_refused) {
  tpx_registry *r = new_registry();
  const char *path = BROKEN(refusals[_i].file);
  tpx_error e = {0};
  tpx_status s = tpx_registry_load_file(r, path, &e);
  ck_assert_msg(s == refusals[_i].status, "%s: got %s (%s)", path,
                tpx_status_name(s), e.message);
  ASSERT_CONTAINS(e.message, path);
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 0);
  ck_assert_uint_eq(tpx_registry_num_refused(r), 1);
  tpx_plugin_refusal ref;
  CHECK_OK(tpx_registry_refused(r, 0, &ref, &e_));
  ck_assert_str_eq(ref.path, path);
  for (int k = 0; k < 3 && refusals[_i].reason[k]; k++)
    ASSERT_CONTAINS(ref.reason, refusals[_i].reason[k]);
  tpx_registry_destroy(r);
}
END_TEST

/* Fixtures that load fine but fail when asked for a plan. */
static const struct {
  const char *file;
  const char *reason[2];
} bad_plans[] = {
    {"unknown_style.so",
     {"unknown style 'diagonalwise'", "model.layers.*.mlp.down_proj"}},
    {"malformed_key.so", {"model..layers.*.mlp.up_proj", "invalid value"}},
};

START_TEST(bad_plan_is_an_error) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, BROKEN(bad_plans[_i].file), &e_));
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  tpx_plan *p = NULL;
  tpx_error e = {0};
  tpx_status s = tpx_registry_get_plan(r, 0, m, NULL, NULL, 0, 2, &p, &e);
  ck_assert_int_eq(s, TPX_PLUGIN);
  ck_assert_ptr_null(p);
  for (int k = 0; k < 2; k++)
    ASSERT_CONTAINS(e.message, bad_plans[_i].reason[k]);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

START_TEST(extra_symbols_load) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, BROKEN("extra_symbols.so"), &e_));
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 1);
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  tpx_plan *p = NULL;
  CHECK_OK(tpx_registry_get_plan(r, 0, m, NULL, NULL, 0, 2, &p, &e_));
  ck_assert_uint_eq(tpx_plan_size(p), 1);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

START_TEST(good_registration_copied) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 1);
  ck_assert_uint_eq(tpx_registry_num_refused(r), 0);
  tpx_plugin_desc d;
  CHECK_OK(tpx_registry_plugin(r, 0, &d, &e_));
  ck_assert_str_eq(d.name, "tpxtest");
  ck_assert_str_eq(d.version, "1.2.3");
  ASSERT_CONTAINS(d.description, "tests/unit/plugin/good");
  ck_assert_uint_eq(d.abi_version, 0x10000u);
  ck_assert_uint_eq(d.num_architectures, 3);
  ck_assert_str_eq(d.architectures[0], "TestForCausalLM");
  ck_assert_str_eq(d.architectures[2], "tests.models.qual.QualOnlyForCausalLM");
  ck_assert_uint_eq(d.num_plan_names, 1);
  ck_assert_str_eq(d.plan_names[0], "tpxtest_named_plan");
  ck_assert(d.has_skeleton && d.has_validate && d.has_fsdp_units &&
            d.has_fp32_params);
  ASSERT_CONTAINS(d.path, "libtpxtest_good.so");
  tpx_plugin_desc bad;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_plugin(r, 1, &bad, &e), TPX_OUT_OF_RANGE);
  tpx_registry_destroy(r);
}
END_TEST

static const struct {
  const char *arch;
  int64_t want;
} lookups[] = {
    {"TestForCausalLM", 0},
    {"tests.models.test.modeling_test.TestForCausalLM", 0},
    {"QualOnlyForCausalLM", 0}, /* last component of a qualified name */
    {"tests.models.qual.QualOnlyForCausalLM", 0},
    {"other.module.TestForCausalLM", 0},
    {"LlamaForCausalLM", -1},
    {"", -1},
    {"testforcausallm", -1}, /* case matters */
    {NULL, -1},
};

START_TEST(find_architecture) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  ck_assert_int_eq(tpx_registry_find(r, lookups[_i].arch), lookups[_i].want);
  tpx_registry_destroy(r);
}
END_TEST

START_TEST(duplicate_architecture_warns) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_dup.so"), &e_));
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 2);
  const tpx_diag_list *dl = tpx_registry_diagnostics(r);
  ck_assert_uint_eq(tpx_diag_count(dl), 3); /* one per shared architecture */
  tpx_diag d;
  CHECK_OK(tpx_diag_get(dl, 0, &d, &e_));
  ck_assert_str_eq(d.code, "duplicate-architecture");
  ck_assert_int_eq(d.level, TPX_DIAG_WARNING);
  ASSERT_CONTAINS(d.message, "libtpxtest_good.so");
  ASSERT_CONTAINS(d.message, "libtpxtest_dup.so");
  ASSERT_CONTAINS(d.message, "TestForCausalLM");
  /* The first loaded wins. */
  ck_assert_int_eq(tpx_registry_find(r, "TestForCausalLM"), 0);
  /* The same file twice is loaded once, silently. */
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 2);
  ck_assert_uint_eq(tpx_diag_count(dl), 3);
  tpx_registry_destroy(r);
}
END_TEST

/* A directory with a refused plugin at the top and a good one in a direct
 * subdirectory (the build tree's plugins/<family>/ layout); a deeper one is
 * not scanned. */
START_TEST(load_dir_scans_subdirectories) {
  char dir[] = "/tmp/tpx-plugin-test-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char a[1200], b[1200], c[1200], d[1200];
  snprintf(a, sizeof a, "%s/fam", dir);
  snprintf(b, sizeof b, "%s/fam/deeper", dir);
  ck_assert_int_eq(mkdir(a, 0700), 0);
  ck_assert_int_eq(mkdir(b, 0700), 0);
  snprintf(c, sizeof c, "%s/fam/libgood.so", dir);
  ck_assert_int_eq(symlink(GOOD("libtpxtest_good.so"), c), 0);
  snprintf(d, sizeof d, "%s/aaa_no_symbols.so", dir);
  ck_assert_int_eq(symlink(BROKEN("no_symbols.so"), d), 0);
  char e5[1200];
  snprintf(e5, sizeof e5, "%s/fam/deeper/libdup.so", dir);
  ck_assert_int_eq(symlink(GOOD("libtpxtest_dup.so"), e5), 0);

  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_dir(r, dir, &e_));
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 1);
  ck_assert_uint_eq(tpx_registry_num_refused(r), 1);
  tpx_plugin_refusal ref;
  CHECK_OK(tpx_registry_refused(r, 0, &ref, &e_));
  ck_assert_str_eq(ref.path, d);
  ASSERT_CONTAINS(ref.reason, "missing required symbol");
  tpx_plugin_desc desc;
  CHECK_OK(tpx_registry_plugin(r, 0, &desc, &e_));
  ck_assert_str_eq(desc.path, c);
  tpx_registry_destroy(r);
  unlink(e5);
  unlink(c);
  unlink(d);
  rmdir(b);
  rmdir(a);
  rmdir(dir);
}
END_TEST

/* In-process, a plugin crashing in its registration takes the process down:
 * nothing can prevent that (documented); the load probe (on by default)
 * and the harness fork for this. With the probe turned off: */
START_TEST(register_crash_is_fatal_in_process) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_set_probe(r, 0, &e_));
  tpx_registry_load_file(r, BROKEN("register_crashes.so"), NULL);
  tpx_registry_destroy(r);
}
END_TEST

START_TEST(plugin_path_order) {
  /* TPX_PLUGIN_PATH first: the good dir holds good, dup and probe; the
   * first by file name (libtpxtest_dup.so) wins TestForCausalLM. */
  char path[2048];
  snprintf(path, sizeof path, "/nonexistent/dir::%s",
           getenv("TPX_TEST_GOOD_DIR"));
  setenv("TPX_PLUGIN_PATH", path, 1);
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_default(r, &e_));
  ck_assert_uint_ge(tpx_registry_num_plugins(r), 3);
  tpx_plugin_desc d;
  CHECK_OK(tpx_registry_plugin(r, 0, &d, &e_));
  ASSERT_CONTAINS(d.path, "libtpxtest_dup.so");
  int64_t i = tpx_registry_find(r, "TestForCausalLM");
  ck_assert_int_eq(i, 0);
  tpx_registry_destroy(r);
  unsetenv("TPX_PLUGIN_PATH");
}
END_TEST

START_TEST(bad_arguments) {
  tpx_registry *r = new_registry();
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_create(NULL, &e), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_registry_load_file(r, NULL, NULL), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_registry_load_dir(NULL, "x", NULL),
                   TPX_INVALID_ARGUMENT);
  CHECK_OK(tpx_registry_load_dir(r, "/nonexistent/dir", &e_));
  ck_assert_uint_eq(tpx_registry_num_plugins(NULL), 0);
  ck_assert_int_eq(tpx_registry_find(NULL, "x"), -1);
  tpx_plugin_refusal ref;
  ck_assert_int_eq(tpx_registry_refused(r, 0, &ref, &e), TPX_OUT_OF_RANGE);
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  tpx_plan *p = NULL;
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_registry_get_plan(r, 0, m, NULL, NULL, 0, 0, &p, &e2),
                   TPX_INVALID_ARGUMENT);
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_registry_get_plan(r, 0, m, NULL, "nope", 0, 1, &p, &e3),
                   TPX_NOT_FOUND);
  ASSERT_CONTAINS(e3.message, "no named plan 'nope'");
  tpx_error e4 = {0};
  ck_assert_int_eq(tpx_registry_get_plan(r, 5, m, NULL, NULL, 0, 1, &p, &e4),
                   TPX_OUT_OF_RANGE);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
  tpx_registry_destroy(NULL);
}
END_TEST

START_TEST(get_plan_refusal_names_plugin) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  tpx_plan *p = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_get_plan(r, 0, m, NULL, NULL, 0, 3, &p, &e),
                   TPX_PLUGIN);
  ASSERT_CONTAINS(e.message, "plugin 'tpxtest'");
  ASSERT_CONTAINS(e.message, "refused get_plan");
  ASSERT_CONTAINS(e.message, "not divisible by tp=3");
  CHECK_OK(tpx_registry_get_plan(r, 0, m, NULL, NULL, 1, 4, &p, &e_));
  ck_assert_uint_eq(tpx_plan_size(p), 11);
  ck_assert_int_ge(tpx_plan_find(p, "model.norm"), 0);
  tpx_plan_entry en;
  CHECK_OK(tpx_plan_get(p, (size_t)tpx_plan_find(p, "lm_head"), &en, &e_));
  ck_assert_int_eq(en.style.kind, TPX_STYLE_COLWISE);
  ck_assert_int_eq(en.style.input_layouts.items[0].kind, TPX_SHARD);
  ck_assert_int_eq(en.style.input_layouts.items[0].dim, 1);
  ck_assert_int_eq(en.style.use_local_output, 0);
  CHECK_OK(tpx_plan_get(
      p, (size_t)tpx_plan_find(p, "model.layers.*.self_attn.qkv_proj"), &en,
      &e_));
  ck_assert_int_eq(en.optional, 1);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

/* Concurrent lookups and calls on one registry. */
typedef struct {
  tpx_registry *reg;
  tpx_model *model;
  int failures;
  char *first;
} worker_arg;

static void *worker(void *p) {
  worker_arg *a = p;
  for (int i = 0; i < 50; i++) {
    if (tpx_registry_find(a->reg, "TestForCausalLM") != 0)
      a->failures++;
    tpx_plan *plan = NULL;
    tpx_error e = {0};
    if (tpx_registry_get_plan(a->reg, 0, a->model, NULL, NULL, i % 2, 2, &plan,
                              &e) != TPX_OK) {
      a->failures++;
      continue;
    }
    char *json = NULL;
    if (tpx_plan_to_json(plan, 0, &json, &e) != TPX_OK)
      a->failures++;
    if (i == 0)
      a->first = json;
    else
      free(json);
    tpx_plan_destroy(plan);
  }
  return NULL;
}

START_TEST(concurrent_calls) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  pthread_t th[8];
  worker_arg args[8];
  for (int i = 0; i < 8; i++) {
    args[i] = (worker_arg){r, m, 0, NULL};
    ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 8; i++) {
    ck_assert_int_eq(args[i].failures, 0);
    ck_assert_ptr_nonnull(args[i].first);
    ck_assert_str_eq(args[i].first, args[0].first);
  }
  for (int i = 0; i < 8; i++) free(args[i].first);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

/* Probe mode: a crashing registration is a refusal, not a dead process. */
START_TEST(probe_survives_crash) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_set_probe(r, 1, &e_));
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_load_file(r, BROKEN("register_crashes.so"), &e),
                   TPX_PLUGIN);
  ASSERT_CONTAINS(e.message, "crashed with SIGSEGV (signal 11) while loading");
  ck_assert_uint_eq(tpx_registry_num_refused(r), 1);
  /* Ordinary files still load, ordinary refusals keep their reason. */
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_registry_load_file(r, BROKEN("abi_too_new.so"), &e2),
                   TPX_ABI_MISMATCH);
  ASSERT_CONTAINS(e2.message, "the plugin speaks 2.0");
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 1);
  ck_assert_uint_eq(tpx_registry_num_refused(r), 2);
  ck_assert_int_eq(tpx_registry_set_probe(NULL, 1, NULL), TPX_INVALID_ARGUMENT);
  tpx_registry_destroy(r);
}
END_TEST

/* The whole broken directory in probe mode: each fixture loads or is
 * refused; none takes the process down. One warning per duplicate. */
START_TEST(probe_broken_dir) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_set_probe(r, 1, &e_));
  CHECK_OK(tpx_registry_load_dir(r, getenv("TPX_TEST_BROKEN_DIR"), &e_));
  /* loaded: extra_symbols, generic_message, get_plan_allocates,
   * get_plan_crashes, get_plan_hangs, get_plan_null_write, grandchild,
   * malformed_key, pipe_garbage, stdout_noise, unknown_style; refused: the
   * other 13 (ctor_crashes, dtor_crashes and register_exits by the probe;
   * bad_traits) */
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 11);
  ck_assert_uint_eq(tpx_registry_num_refused(r), 13);
  /* 10 duplicate-architecture warnings + one plugin-failed per refusal,
   * naming the file */
  const tpx_diag_list *dl = tpx_registry_diagnostics(r);
  ck_assert_uint_eq(tpx_diag_count(dl), 10 + 13);
  size_t failed = 0;
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    CHECK_OK(tpx_diag_get(dl, i, &d, &e_));
    if (strcmp(d.code, "plugin-failed") != 0)
      continue;
    tpx_plugin_refusal ref;
    CHECK_OK(tpx_registry_refused(r, failed, &ref, &e_));
    ck_assert_str_eq(d.subject, ref.path);
    ASSERT_CONTAINS(d.message, ref.path);
    ASSERT_CONTAINS(d.message, ref.reason);
    failed++;
  }
  ck_assert_uint_eq(failed, 13);
  tpx_registry_destroy(r);
}
END_TEST

/* A plugin that printf()s while loading, planning and unloading, called
 * in-process: none of it reaches the host's stdout (it goes to stderr), and
 * the host's own stdout still works around it. */
START_TEST(plugin_stdout_stays_off_stdout) {
  fflush(stdout);
  FILE *cap = tmpfile();
  ck_assert_ptr_nonnull(cap);
  int saved = dup(STDOUT_FILENO);
  ck_assert_int_ge(saved, 0);
  ck_assert_int_ge(dup2(fileno(cap), STDOUT_FILENO), 0);
  printf("host-before\n");
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, BROKEN("stdout_noise.so"), &e_));
  tpx_model *m = model_from_json("{\"architectures\": [\"BrokenForCausalLM\"], "
                                 "\"model_type\": \"qwen2\"}");
  tpx_plan *plan = NULL;
  CHECK_OK(tpx_registry_get_plan(r, 0, m, NULL, NULL, 0, 2, &plan, &e_));
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
  printf("host-after\n");
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  char buf[256] = "";
  rewind(cap);
  size_t n = fread(buf, 1, sizeof buf - 1, cap);
  buf[n] = '\0';
  fclose(cap);
  ck_assert_str_eq(buf, "host-before\nhost-after\n");
}
END_TEST

/* A plugin that fails after the host refused one of its entries, with a
 * generic message: the host's reason (key, style, value) comes first, the
 * plugin's words after it. */
START_TEST(host_reason_wins_over_generic_message) {
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, BROKEN("generic_message.so"), &e_));
  tpx_model *m = model_from_json("{\"architectures\": [\"BrokenForCausalLM\"], "
                                 "\"model_type\": \"qwen2\"}");
  tpx_plan *plan = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_get_plan(r, 0, m, NULL, NULL, 0, 2, &plan, &e),
                   TPX_PLUGIN);
  ASSERT_CONTAINS(e.message,
                  "get_plan failed (TPX_PLUGIN_ERROR): host->plan_add: key "
                  "'model.layers.*.mlp.down_proj', style 'rowwise': "
                  "input_layouts[0] 'bogus' is not a layout");
  ASSERT_CONTAINS(e.message, "(the plugin said: the host refused a plan "
                             "entry (see the log))");
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

/* A config asking for a skeleton beyond reason (num_hidden_layers:
 * 1000000; or a MoE whose experts multiply it) is refused before the
 * plugin builds anything, naming the key and the cost; the model is left
 * untouched. A large but real config still builds. */
START_TEST(skeleton_bounded_by_config) {
  static const struct {
    const char *extra;
    const char *want;
  } cases[] = {
      {"\"num_hidden_layers\": 1000000",
       "config num_hidden_layers 1000000: the skeleton for 1000000 layers "
       "needs about 7.6 GiB; tpx builds skeletons of at most 1 GiB"},
      {"\"text_config\": {\"num_hidden_layers\": 3000000}",
       "config text_config.num_hidden_layers 3000000"},
      {"\"num_hidden_layers\": 10000, \"num_local_experts\": 65536",
       "of 65536 experts each (num_local_experts)"},
  };
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"TestForCausalLM\"], "
             "\"model_type\": \"tpxtest\", \"hidden_size\": 64, "
             "\"vocab_size\": 128, \"intermediate_size\": 96, "
             "\"num_attention_heads\": 8, \"num_key_value_heads\": 4, %s}",
             cases[i].extra);
    tpx_model *m = model_from_json(cfg);
    tpx_error e = {0};
    ck_assert_int_eq(tpx_registry_build_skeleton(r, m, &e),
                     TPX_INVALID_ARGUMENT);
    ASSERT_CONTAINS(e.message, cases[i].want);
    ck_assert_uint_eq(tpx_model_num_params(m), 0);
    tpx_model_destroy(m);
  }
  tpx_model *m = model_from_json(
      "{\"architectures\": [\"TestForCausalLM\"], \"model_type\": "
      "\"tpxtest\", \"hidden_size\": 64, \"num_hidden_layers\": 1000, "
      "\"vocab_size\": 128, \"intermediate_size\": 96, "
      "\"num_attention_heads\": 8, \"num_key_value_heads\": 4}");
  CHECK_OK(tpx_registry_build_skeleton(r, m, &e_));
  ck_assert_uint_gt(tpx_model_num_params(m), 1000);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

/* A directory somebody named that cannot be searched is a warning naming
 * it (missing, a regular file); the call itself still succeeds. */
START_TEST(unusable_dir_warns) {
  static const struct {
    const char *dir;
    const char *why;
  } cases[] = {
      {"/nonexistent/tpx-plugins", "No such file or directory"},
      {"/proc/self/status", "Not a directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tpx_registry *r = new_registry();
    CHECK_OK(tpx_registry_load_dir(r, cases[i].dir, &e_));
    const tpx_diag_list *dl = tpx_registry_diagnostics(r);
    ck_assert_uint_eq(tpx_diag_count(dl), 1);
    tpx_diag d;
    CHECK_OK(tpx_diag_get(dl, 0, &d, &e_));
    ck_assert_str_eq(d.code, "plugin-dir-unusable");
    ck_assert_int_eq(d.level, TPX_DIAG_WARNING);
    ck_assert_str_eq(d.subject, cases[i].dir);
    ck_assert_ptr_nonnull(strstr(d.message, cases[i].dir));
    ck_assert_ptr_nonnull(strstr(d.message, cases[i].why));
    ck_assert_uint_eq(tpx_registry_num_plugins(r), 0);
    tpx_registry_destroy(r);
  }
}
END_TEST

/* From the build tree, the default directory is the build tree's plugins/;
 * a TPX_PLUGIN_PATH entry that does not exist is a warning naming it. */
START_TEST(default_dir_from_build_tree) {
  char dir[4096];
  int build_tree = -1;
  CHECK_OK(tpx_registry_default_dir(dir, sizeof dir, &build_tree, &e_));
  ck_assert_int_eq(build_tree, 1);
  char want[4096];
  snprintf(want, sizeof want, "%s/plugins", getenv("TPX_BUILD_DIR"));
  ck_assert_str_eq(dir, want);
  char tiny[4];
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_default_dir(tiny, sizeof tiny, NULL, &e),
                   TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_registry_default_dir(NULL, 0, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  setenv("TPX_PLUGIN_PATH", "/nonexistent/a::/nonexistent/b", 1);
  tpx_registry *r = new_registry();
  CHECK_OK(tpx_registry_load_default(r, &e_));
  const tpx_diag_list *dl = tpx_registry_diagnostics(r);
  size_t unusable = 0;
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    CHECK_OK(tpx_diag_get(dl, i, &d, &e_));
    if (strcmp(d.code, "plugin-dir-unusable") == 0) {
      ck_assert_msg(strcmp(d.subject, "/nonexistent/a") == 0 ||
                        strcmp(d.subject, "/nonexistent/b") == 0,
                    "subject %s", d.subject);
      unusable++;
    }
  }
  ck_assert_uint_eq(unusable, 2);
  ck_assert_uint_gt(tpx_registry_num_plugins(r), 0);
  tpx_registry_destroy(r);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("plugin-loader");
  TCase *tc = tcase_create("loader");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, broken_is_refused, 0,
                      sizeof refusals / sizeof refusals[0]);
  tcase_add_loop_test(tc, bad_plan_is_an_error, 0,
                      sizeof bad_plans / sizeof bad_plans[0]);
  tcase_add_test(tc, extra_symbols_load);
  tcase_add_test(tc, good_registration_copied);
  tcase_add_loop_test(tc, find_architecture, 0,
                      sizeof lookups / sizeof lookups[0]);
  tcase_add_test(tc, duplicate_architecture_warns);
  tcase_add_test(tc, load_dir_scans_subdirectories);
  tcase_add_test_raise_signal(tc, register_crash_is_fatal_in_process, SIGSEGV);
  tcase_add_test(tc, plugin_path_order);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, unusable_dir_warns);
  tcase_add_test(tc, default_dir_from_build_tree);
  tcase_add_test(tc, get_plan_refusal_names_plugin);
  tcase_add_test(tc, concurrent_calls);
  tcase_add_test(tc, probe_survives_crash);
  tcase_add_test(tc, probe_broken_dir);
  tcase_add_test(tc, plugin_stdout_stays_off_stdout);
  tcase_add_test(tc, host_reason_wins_over_generic_message);
  tcase_add_test(tc, skeleton_bounded_by_config);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
