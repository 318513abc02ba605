/* plugin_test.h — helpers shared by the plugin-suite Check tests: paths of
 * the fixture plugins, models from inline config JSON, error assertions
 * (CHECK_OK, CHECK_FAILS and run_suite: ../check_util.h). */
#ifndef TPX_TESTS_PLUGIN_TEST_H
#define TPX_TESTS_PLUGIN_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/error.h"
#include "tpx/model.h"
#include "tpx/registry.h"

#include "../check_util.h"

#define ASSERT_CONTAINS(hay, needle)                                           \
  ck_assert_msg((hay) != NULL && strstr((hay), (needle)) != NULL,              \
                "\"%s\" does not contain \"%s\"", (hay) ? (hay) : "(null)",    \
                (needle))

/* "<dir from env>/<name>" in a static rotating buffer. */
static inline const char *fixture_path(const char *env, const char *name) {
  static char bufs[8][1024];
  static int next;
  char *b = bufs[next++ % 8];
  const char *dir = getenv(env);
  snprintf(b, 1024, "%s/%s", dir ? dir : ".", name);
  return b;
}
#define BROKEN(name) fixture_path("TPX_TEST_BROKEN_DIR", name)
#define GOOD(name) fixture_path("TPX_TEST_GOOD_DIR", name)
#define DATA(name) fixture_path("TPX_TEST_DATA_DIR", name)

/* A model with this config (no modules). */
static inline tpx_model *model_from_json(const char *json) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_model_create(&m, &e) == TPX_OK, "%s", e.message);
  ck_assert_msg(tpx_model_set_config(m, json, strlen(json), "test", &e) ==
                    TPX_OK,
                "%s", e.message);
  return m;
}

/* The test architecture's config (Llama-shaped, 2 layers). */
#define TEST_CONFIG(extra)                                                     \
  "{\"architectures\": [\"TestForCausalLM\"], \"model_type\": \"tpxtest\", "   \
  "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 128, "       \
  "\"intermediate_size\": 96, \"num_attention_heads\": 8, "                    \
  "\"num_key_value_heads\": 4, \"torch_dtype\": \"bfloat16\", "                \
  "\"tie_word_embeddings\": true" extra "}"

#endif
