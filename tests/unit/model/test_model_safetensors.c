/* test_model_safetensors.c — importing safetensors headers (safetensors.c):
 * synthetic files written by the test (sparse: a header plus a data section
 * of the right size that is never written), phi-2's real index with
 * generated shards, kind inference, tied lm_head, agreement with existing
 * tensors, and the data-driven bad inputs under tests/data/model/bad/. */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tpx/model.h"

/* ---- helpers ---- */

static char *data_path(const char *rel) {
  const char *root = getenv("TPX_SOURCE_DIR");
  ck_assert_msg(root != NULL, "TPX_SOURCE_DIR is not set");
  size_t n = strlen(root) + strlen(rel) + 32;
  char *p = malloc(n);
  snprintf(p, n, "%s/tests/data/model/%s", root, rel);
  return p;
}

#include <sys/resource.h>

#include "model/st_header.h"
#include "../test_tmpdir.h"

typedef struct gen_tensor {
  const char *name;
  const char *dtype; /* safetensors name */
  int ndim;
  int64_t shape[4];
} gen_tensor;

static int64_t st_size(const char *dtype) {
  if (strcmp(dtype, "F64") == 0 || strcmp(dtype, "I64") == 0)
    return 8;
  if (strcmp(dtype, "F32") == 0 || strcmp(dtype, "I32") == 0)
    return 4;
  if (strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0)
    return 2;
  return 1;
}

/* Writes a valid safetensors file: offsets packed in order, the data section
 * sized by ftruncate (a sparse hole: nothing is ever written there). */
static void write_st(const char *path, const gen_tensor *t, size_t n,
                     int with_metadata) {
  json_t *hdr = json_object();
  if (with_metadata)
    json_object_set_new(hdr, "__metadata__",
                        json_pack("{s:s}", "format", "pt"));
  int64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t numel = 1;
    json_t *shape = json_array();
    for (int d = 0; d < t[i].ndim; d++) {
      numel *= t[i].shape[d];
      json_array_append_new(shape, json_integer(t[i].shape[d]));
    }
    int64_t bytes = numel * st_size(t[i].dtype);
    json_object_set_new(hdr, t[i].name,
                        json_pack("{s:s,s:o,s:[I,I]}", "dtype", t[i].dtype,
                                  "shape", shape, "data_offsets",
                                  (json_int_t)off, (json_int_t)(off + bytes)));
    off += bytes;
  }
  char *text = json_dumps(hdr, JSON_COMPACT);
  json_decref(hdr);
  size_t len = strlen(text);
  /* Writers pad the header with spaces to 8 bytes; do the same. */
  size_t padded = (len + 7) / 8 * 8;
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  unsigned char lb[8];
  for (int i = 0; i < 8; i++)
    lb[i] = (unsigned char)(((uint64_t)padded >> (8 * i)) & 0xff);
  ck_assert_int_eq(fwrite(lb, 1, 8, f), 8);
  ck_assert_int_eq(fwrite(text, 1, len, f), len);
  for (size_t i = len; i < padded; i++) fputc(' ', f);
  fclose(f);
  free(text);
  ck_assert_int_eq(truncate(path, (off_t)(8 + padded + (size_t)off)), 0);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static tpx_model *model_with_config(const char *json) {
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
  if (json != NULL)
    ck_assert_int_eq(tpx_model_set_config(m, json, strlen(json), "cfg", &err),
                     TPX_OK);
  return m;
}

static tpx_module_kind kind_of(const tpx_model *m, const char *fqn) {
  int64_t i = tpx_model_find_module(m, fqn);
  ck_assert_msg(i >= 0, "no module %s", fqn);
  return tpx_model_module_kind(m, i);
}

/* ---- a small llama-like single file ---- */

static const gen_tensor tiny[] = {
    {"model.embed_tokens.weight", "BF16", 2, {128, 16}},
    {"model.layers.0.input_layernorm.weight", "BF16", 1, {16}},
    {"model.layers.0.self_attn.q_proj.weight", "BF16", 2, {16, 16}},
    {"model.layers.0.self_attn.k_proj.weight", "BF16", 2, {8, 16}},
    {"model.layers.0.self_attn.q_norm.weight", "BF16", 1, {4}},
    {"model.layers.0.mlp.gate_proj.weight", "BF16", 2, {32, 16}},
    {"model.layers.0.mlp.experts.gate_up_proj", "BF16", 3, {4, 16, 64}},
    {"model.layers.10.input_layernorm.weight", "BF16", 1, {16}},
    {"model.layers.2.input_layernorm.weight", "BF16", 1, {16}},
    {"model.layers.2.mlp.router.bias", "F32", 1, {4}},
    {"model.norm.weight", "BF16", 1, {16}},
    {"model.rotary_emb.inv_freq", "F32", 1, {8}},
    {"transformer.ln_f.weight", "F32", 1, {16}},
    {"transformer.ln_f.bias", "F32", 1, {16}},
    {"transformer.wpe.weight", "F32", 2, {64, 16}},
    {"scale", "F32", 0, {0}},
};
enum { NTINY = sizeof tiny / sizeof *tiny };

START_TEST(test_single_file_kinds_and_order) {
  make_tmpdir();
  write_st(tmp("model.safetensors"), tiny, NTINY, 1);
  tpx_model *m = model_with_config(NULL);
  tpx_error err = {0};
  /* Both the file and its directory are accepted. */
  tpx_status st =
      _i == 0 ? tpx_model_add_safetensors(m, tmp("model.safetensors"), &err)
              : tpx_model_add_safetensors(m, tmpdir, &err);
  ck_assert_msg(st == TPX_OK, "%s", err.message);
  ck_assert_uint_eq(tpx_model_num_params(m), NTINY);
  for (size_t i = 0; i < NTINY; i++) {
    int64_t p = tpx_model_find_param(m, tiny[i].name);
    ck_assert_msg(p >= 0, "%s missing", tiny[i].name);
    tpx_param_info info;
    ck_assert_int_eq(tpx_model_param(m, p, &info, &err), TPX_OK);
    ck_assert_int_eq(info.ndim, tiny[i].ndim);
    for (int d = 0; d < tiny[i].ndim; d++)
      ck_assert_int_eq(info.shape[d], tiny[i].shape[d]);
    ck_assert_int_eq(info.dtype, strcmp(tiny[i].dtype, "F32") == 0
                                     ? TPX_DTYPE_F32
                                     : TPX_DTYPE_BF16);
    ck_assert_int_eq(info.tied_to, -1);
  }
  static const struct {
    const char *fqn;
    tpx_module_kind kind;
  } kinds[] = {
      {"model", TPX_MODULE_CONTAINER},
      {"model.embed_tokens", TPX_MODULE_EMBEDDING},
      {"model.layers", TPX_MODULE_CONTAINER},
      {"model.layers.0", TPX_MODULE_CONTAINER},
      {"model.layers.0.input_layernorm", TPX_MODULE_NORM},
      {"model.layers.0.self_attn", TPX_MODULE_CONTAINER},
      {"model.layers.0.self_attn.q_proj", TPX_MODULE_LINEAR},
      {"model.layers.0.self_attn.q_norm", TPX_MODULE_NORM},
      {"model.layers.0.mlp.gate_proj", TPX_MODULE_LINEAR},
      {"model.layers.0.mlp.experts", TPX_MODULE_OTHER},
      {"model.layers.2.mlp.router", TPX_MODULE_OTHER},
      {"model.norm", TPX_MODULE_NORM},
      {"model.rotary_emb", TPX_MODULE_OTHER},
      {"transformer.ln_f", TPX_MODULE_NORM},
      {"transformer.wpe", TPX_MODULE_EMBEDDING},
      {"", TPX_MODULE_CONTAINER},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    ck_assert_msg(kind_of(m, kinds[i].fqn) == kinds[i].kind, "%s: %s",
                  kinds[i].fqn, tpx_module_kind_name(kind_of(m, kinds[i].fqn)));
  /* Layers come out in numeric order. */
  int64_t layers = tpx_model_find_module(m, "model.layers");
  ck_assert_uint_eq(tpx_model_module_num_children(m, layers), 3);
  ck_assert_str_eq(
      tpx_model_module_fqn(m, tpx_model_module_child(m, layers, 0)),
      "model.layers.0");
  ck_assert_str_eq(
      tpx_model_module_fqn(m, tpx_model_module_child(m, layers, 1)),
      "model.layers.2");
  ck_assert_str_eq(
      tpx_model_module_fqn(m, tpx_model_module_child(m, layers, 2)),
      "model.layers.10");
  /* No config: no tie, no lm_head. */
  ck_assert_int_eq(tpx_model_find_param(m, "lm_head.weight"), -1);
  int64_t bytes = 0;
  for (size_t i = 0; i < NTINY; i++) {
    int64_t n = st_size(tiny[i].dtype);
    for (int d = 0; d < tiny[i].ndim; d++) n *= tiny[i].shape[d];
    bytes += n;
  }
  ck_assert_int_eq(tpx_model_total_bytes(m), bytes);
  /* Reading the same file again agrees with what is there: no change. */
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_params(m), NTINY);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* ---- tied lm_head ---- */

static const gen_tensor tied_file[] = {
    {"model.embed_tokens.weight", "BF16", 2, {1000, 64}},
    {"model.norm.weight", "BF16", 1, {64}},
    {"model.layers.0.mlp.down_proj.weight", "BF16", 2, {64, 256}},
};

START_TEST(test_tied_lm_head) {
  static const struct {
    const char *config;
    int tied;
  } cases[] = {
      {"{\"tie_word_embeddings\": true}", 1},
      {"{\"tie_word_embeddings\": false}", 0},
      {"{}", 0}, /* absent counts as false */
      {"{\"text_config\": {\"tie_word_embeddings\": true}}", 1},
      {"{\"tie_word_embeddings\": null, \"text_config\": "
       "{\"tie_word_embeddings\": true}}",
       1},
  };
  make_tmpdir();
  write_st(tmp("model.safetensors"), tied_file, 3, 0);
  tpx_model *m = model_with_config(cases[_i].config);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
  int64_t head = tpx_model_find_param(m, "lm_head.weight");
  int64_t emb = tpx_model_find_param(m, "model.embed_tokens.weight");
  int64_t base = 1000 * 64 + 64 + 64 * 256;
  ck_assert_int_eq(tpx_model_total_params(m), base);
  ck_assert_int_eq(tpx_model_total_bytes(m), base * 2);
  if (!cases[_i].tied) {
    ck_assert_int_eq(head, -1);
  } else {
    ck_assert_int_ge(head, 0);
    tpx_param_info info;
    ck_assert_int_eq(tpx_model_param(m, head, &info, &err), TPX_OK);
    ck_assert_int_eq(info.tied_to, emb);
    ck_assert_int_eq(info.shape[0], 1000);
    ck_assert_int_eq(info.shape[1], 64);
    ck_assert_int_eq(kind_of(m, "lm_head"), TPX_MODULE_LINEAR);
    ck_assert_uint_eq(tpx_model_num_params(m), 4);
  }
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

START_TEST(test_existing_tensors_must_agree) {
  make_tmpdir();
  write_st(tmp("model.safetensors"), tied_file, 3, 0);
  /* A skeleton that agrees: tensors are matched, kinds kept. */
  tpx_model *m = model_with_config("{\"tie_word_embeddings\": true}");
  tpx_error err = {0};
  int64_t s1[2] = {1000, 64};
  ck_assert_int_eq(tpx_model_add_module(m, "model.embed_tokens",
                                        TPX_MODULE_OTHER, NULL, &err),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.embed_tokens", "weight", s1, 2,
                                       TPX_DTYPE_BF16, NULL, &err),
                   TPX_OK);
  /* The skeleton already tied lm_head: the file lacks it, that is fine. */
  ck_assert_int_eq(
      tpx_model_tie(m, "lm_head.weight", "model.embed_tokens.weight", &err),
      TPX_OK);
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_params(m), 4);
  ck_assert_int_eq(kind_of(m, "model.embed_tokens"), TPX_MODULE_OTHER);
  tpx_model_destroy(m);

  /* Shape and dtype disagreements name the tensor and both shapes. */
  static const struct {
    int64_t shape[2];
    int ndim;
    tpx_dtype dtype;
    const char *msg1, *msg2;
  } bad[] = {
      {{1000, 32}, 2, TPX_DTYPE_BF16, "[1000, 64] BF16", "[1000, 32] BF16"},
      {{1000, 64}, 2, TPX_DTYPE_F32, "[1000, 64] BF16", "[1000, 64] F32"},
      {{64000}, 1, TPX_DTYPE_BF16, "[1000, 64]", "[64000]"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    m = model_with_config(NULL);
    ck_assert_int_eq(tpx_model_add_param(m, "model.embed_tokens", "weight",
                                         bad[k].shape, bad[k].ndim,
                                         bad[k].dtype, NULL, &err),
                     TPX_OK);
    tpx_error e = {0};
    ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &e), TPX_VALIDATION);
    ck_assert_msg(strstr(e.message, "model.embed_tokens.weight") &&
                      strstr(e.message, "model.safetensors") &&
                      strstr(e.message, bad[k].msg1) &&
                      strstr(e.message, bad[k].msg2),
                  "%s", e.message);
    /* Nothing was added. */
    ck_assert_uint_eq(tpx_model_num_params(m), 1);
    ck_assert_int_eq(tpx_model_find_module(m, "model.norm"), -1);
    tpx_model_destroy(m);
  }
  remove_tmpdir();
}
END_TEST

/* ---- per-expert tensors folded onto fused experts ---- */

/* A model holding one MoE layer the transformers-5 way: experts.gate_up_proj
 * [3, 8, 4] (E 3, I 4, H 4), experts.down_proj [3, 4, 4], router
 * mlp.gate.weight [3, 4]. */
static tpx_model *fused_model(void) {
  tpx_model *m = model_with_config(NULL);
  tpx_error err = {0};
  int64_t gu[3] = {3, 8, 4}, dn[3] = {3, 4, 4}, rt[2] = {3, 4};
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.mlp.experts",
                                       "gate_up_proj", gu, 3, TPX_DTYPE_BF16,
                                       NULL, &err),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.mlp.experts",
                                       "down_proj", dn, 3, TPX_DTYPE_BF16, NULL,
                                       &err),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.mlp.gate", "weight",
                                       rt, 2, TPX_DTYPE_BF16, NULL, &err),
                   TPX_OK);
  return m;
}

/* Fill t[] with the 9 per-expert tensors (names in `style`: 0 HF
 * gate/up/down_proj, 1 Mixtral w1/w3/w2 under block_sparse_moe) and the
 * router; returns the count. */
static size_t per_expert(gen_tensor *t, char names[][96], int style) {
  static const char *const hf[] = {"gate_proj", "up_proj", "down_proj"};
  static const char *const mx[] = {"w1", "w3", "w2"};
  const char *blk = style ? "block_sparse_moe" : "mlp";
  size_t n = 0;
  for (int e = 0; e < 3; e++)
    for (int k = 0; k < 3; k++, n++) {
      snprintf(names[n], 96, "model.layers.0.%s.experts.%d.%s.weight", blk, e,
               style ? mx[k] : hf[k]);
      t[n].name = names[n];
      t[n].dtype = "BF16";
      t[n].ndim = 2;
      t[n].shape[0] = 4;
      t[n].shape[1] = 4;
    }
  snprintf(names[n], 96, "model.layers.0.%s.gate.weight", blk);
  t[n].name = names[n];
  t[n].dtype = "BF16";
  t[n].ndim = 2;
  t[n].shape[0] = 3;
  t[n].shape[1] = 4;
  return n + 1;
}

START_TEST(test_expert_fold) {
  gen_tensor t[12];
  char names[12][96];
  tpx_error err = {0};
  /* Both naming styles fold onto the three fused parameters: nothing is
   * added. */
  for (int style = 0; style < 2; style++) {
    size_t n = per_expert(t, names, style);
    make_tmpdir();
    write_st(tmp("model.safetensors"), t, n, 0);
    tpx_model *m = fused_model();
    ck_assert_msg(tpx_model_add_safetensors(m, tmpdir, &err) == TPX_OK, "%s",
                  err.message);
    ck_assert_uint_eq(tpx_model_num_params(m), 3);
    tpx_model_destroy(m);
    remove_tmpdir();
  }
  /* Without fused parameters the per-expert tensors are ordinary ones. */
  {
    size_t n = per_expert(t, names, 0);
    make_tmpdir();
    write_st(tmp("model.safetensors"), t, n, 0);
    tpx_model *m = model_with_config(NULL);
    ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
    ck_assert_uint_eq(tpx_model_num_params(m), n);
    tpx_model_destroy(m);
    remove_tmpdir();
  }
  /* Broken checkpoints: one tensor changed (index k of the 10, its new
   * name / shape / dtype), or one left out (drop). */
  static const struct {
    int k;
    const char *name; /* NULL: keep */
    int64_t d0, d1;   /* 0: keep */
    const char *dtype;
    int drop;
    const char *want;
  } bad[] = {
      {4, NULL, 3, 0, NULL, 0, "rows [I, 2I)"}, /* expert 1 up_proj short */
      {2, NULL, 0, 5, NULL, 0, "the whole"},    /* down_proj wide */
      {0, NULL, 0, 0, "F32", 0, "F32"},         /* gate_proj dtype */
      {0, "model.layers.0.mlp.experts.3.gate_proj.weight", 0, 0, NULL, 0,
       "expert 3"},                                   /* expert out of range */
      {9, NULL, 4, 0, NULL, 0, "Mixtral"},            /* router shape */
      {5, NULL, 0, 0, NULL, 1, "needs 3 (down_proj"}, /* a down_proj missing */
      {3, NULL, 0, 0, NULL, 1, "needs 6 (gate_proj and up_proj"},
      /* expert 1's gate_proj renamed to a second expert-0 gate (Mixtral's
       * name): 6 slices counted, but expert 1's gate rows are missing */
      {3, "model.layers.0.block_sparse_moe.experts.0.w1.weight", 0, 0, NULL, 0,
       "gate_proj rows of expert 0"},
      {7, "model.layers.0.mlp.experts.1.w3.weight", 0, 0, NULL, 0,
       "up_proj rows of expert 1"},
  };
  for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
    size_t n = per_expert(t, names, bad[b].k == 9 ? 1 : 0);
    gen_tensor u[12];
    size_t m_n = 0;
    for (size_t i = 0; i < n; i++) {
      if (bad[b].drop && (int)i == bad[b].k)
        continue;
      u[m_n] = t[i];
      if ((int)i == bad[b].k) {
        if (bad[b].name)
          u[m_n].name = bad[b].name;
        if (bad[b].d0)
          u[m_n].shape[0] = bad[b].d0;
        if (bad[b].d1)
          u[m_n].shape[1] = bad[b].d1;
        if (bad[b].dtype)
          u[m_n].dtype = bad[b].dtype;
      }
      m_n++;
    }
    make_tmpdir();
    write_st(tmp("model.safetensors"), u, m_n, 0);
    tpx_model *m = fused_model();
    tpx_error e = {0};
    ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &e), TPX_VALIDATION);
    ck_assert_msg(strstr(e.message, bad[b].want), "case %zu: %s", b, e.message);
    tpx_model_destroy(m);
    remove_tmpdir();
  }
}
END_TEST

START_TEST(test_skeleton_untied_lm_head) {
  /* A skeleton declared lm_head.weight untied; the config ties and the file
   * lacks it: the import ties it (or says why it cannot). */
  static const struct {
    int64_t shape[2];
    tpx_status want;
  } cases[] = {
      {{1000, 64}, TPX_OK},
      {{1000, 32}, TPX_INVALID_ARGUMENT},
  };
  make_tmpdir();
  write_st(tmp("model.safetensors"), tied_file, 3, 0);
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    tpx_model *m = model_with_config("{\"tie_word_embeddings\": true}");
    tpx_error err = {0};
    ck_assert_int_eq(
        tpx_model_add_module(m, "lm_head", TPX_MODULE_LINEAR, NULL, &err),
        TPX_OK);
    ck_assert_int_eq(tpx_model_add_param(m, "lm_head", "weight", cases[k].shape,
                                         2, TPX_DTYPE_BF16, NULL, &err),
                     TPX_OK);
    tpx_status st = tpx_model_add_safetensors(m, tmpdir, &err);
    ck_assert_msg(st == cases[k].want, "%zu: %s", k, err.message);
    tpx_param_info info;
    ck_assert_int_eq(tpx_model_param(m,
                                     tpx_model_find_param(m, "lm_head.weight"),
                                     &info, NULL),
                     TPX_OK);
    if (st == TPX_OK) {
      ck_assert_int_eq(info.tied_to,
                       tpx_model_find_param(m, "model.embed_tokens.weight"));
      ck_assert_int_eq(tpx_model_total_params(m), 1000 * 64 + 64 + 64 * 256);
    } else {
      ck_assert_msg(strstr(err.message, "lm_head.weight") &&
                        strstr(err.message, "[1000, 32]"),
                    "%s", err.message);
      ck_assert_int_eq(info.tied_to, -1);
    }
    tpx_model_destroy(m);
  }
  /* The checkpoint holds its own lm_head: no tie even if the config says so
   * (the validator reports that, not the importer). */
  gen_tensor with_head[4];
  memcpy(with_head, tied_file, sizeof tied_file);
  with_head[3] = (gen_tensor){"lm_head.weight", "BF16", 2, {1000, 64}};
  write_st(tmp("model.safetensors"), with_head, 4, 0);
  tpx_model *m = model_with_config("{\"tie_word_embeddings\": true}");
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
  tpx_param_info info;
  tpx_model_param(m, tpx_model_find_param(m, "lm_head.weight"), &info, NULL);
  ck_assert_int_eq(info.tied_to, -1);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

START_TEST(test_tied_lm_head_names) {
  /* Where the output projection goes for the common embedding names. */
  static const struct {
    const char *embedding, *head;
  } cases[] = {
      {"model.embed_tokens.weight", "lm_head.weight"},
      {"model.language_model.embed_tokens.weight", "lm_head.weight"},
      {"language_model.model.embed_tokens.weight",
       "language_model.lm_head.weight"},
      {"transformer.wte.weight", "lm_head.weight"},
      {"backbone.embeddings.weight", "lm_head.weight"},
  };
  gen_tensor t[3] = {
      {cases[_i].embedding, "BF16", 2, {320, 16}},
      {"transformer.wpe.weight", "BF16", 2, {64, 16}},
      {"vision_tower.patch_embed.proj.bias", "BF16", 1, {16}},
  };
  make_tmpdir();
  write_st(tmp("model.safetensors"), t, 3, 0);
  tpx_model *m =
      model_with_config("{\"text_config\": {\"tie_word_embeddings\": true}}");
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
  int64_t head = tpx_model_find_param(m, cases[_i].head);
  ck_assert_msg(head >= 0, "%s missing", cases[_i].head);
  tpx_param_info info;
  ck_assert_int_eq(tpx_model_param(m, head, &info, NULL), TPX_OK);
  ck_assert_int_eq(info.tied_to, tpx_model_find_param(m, cases[_i].embedding));
  ck_assert_int_eq(info.shape[0], 320);
  ck_assert_uint_eq(tpx_model_num_params(m), 4);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* ---- phi-2: the real index, generated shards ---- */

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* phi-2's shapes (hidden 2560, intermediate 10240, vocab 51200), by name. */
static void phi2_shape(const char *name, gen_tensor *t) {
  const int64_t h = 2560, ff = 10240, vocab = 51200;
  t->name = name;
  t->dtype = "F16";
  int bias = ends_with(name, ".bias");
  if (strstr(name, "embed_tokens")) {
    t->ndim = 2, t->shape[0] = vocab, t->shape[1] = h;
  } else if (strncmp(name, "lm_head", 7) == 0) {
    t->ndim = bias ? 1 : 2, t->shape[0] = vocab, t->shape[1] = h;
  } else if (strstr(name, "mlp.fc1")) {
    t->ndim = bias ? 1 : 2, t->shape[0] = ff, t->shape[1] = h;
  } else if (strstr(name, "mlp.fc2")) {
    t->ndim = bias ? 1 : 2, t->shape[0] = h, t->shape[1] = ff;
  } else if (strstr(name, "layernorm")) {
    t->ndim = 1, t->shape[0] = h;
  } else {
    ck_assert_msg(strstr(name, "self_attn") != NULL, "unexpected %s", name);
    t->ndim = bias ? 1 : 2, t->shape[0] = h, t->shape[1] = h;
  }
}

START_TEST(test_phi2_index) {
  char *index_path = data_path("phi-2/model.safetensors.index.json");
  json_error_t jerr;
  json_t *index = json_load_file(index_path, 0, &jerr);
  ck_assert_msg(index != NULL, "%s", jerr.text);
  json_t *map = json_object_get(index, "weight_map");
  size_t n = json_object_size(map);
  ck_assert_uint_eq(n, 453);
  gen_tensor *shard[2];
  size_t count[2] = {0, 0};
  shard[0] = calloc(n, sizeof **shard);
  shard[1] = calloc(n, sizeof **shard);
  const char *key;
  json_t *v;
  json_object_foreach(map, key, v) {
    int s = strcmp(json_string_value(v), "model-00001-of-00002.safetensors")
                ? 1
                : 0;
    phi2_shape(key, &shard[s][count[s]++]);
  }
  make_tmpdir();
  write_st(tmp("model-00001-of-00002.safetensors"), shard[0], count[0], 1);
  write_st(tmp("model-00002-of-00002.safetensors"), shard[1], count[1], 1);
  char *text = json_dumps(index, 0);
  write_text(tmp("model.safetensors.index.json"), text);
  free(text);

  char *config = data_path("configs/phi-2/config.json");
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_load_config(config, &m, &err), TPX_OK);
  /* Index path form (the directory form is covered by the tiny model). */
  tpx_status st = tpx_model_add_safetensors(
      m, _i == 0 ? tmp("model.safetensors.index.json") : tmpdir, &err);
  ck_assert_msg(st == TPX_OK, "%s", err.message);
  ck_assert_uint_eq(tpx_model_num_params(m), 453);
  /* metadata.total_size is the byte count of the real checkpoint. */
  ck_assert_int_eq(tpx_model_total_bytes(m),
                   json_integer_value(json_object_get(
                       json_object_get(index, "metadata"), "total_size")));
  ck_assert_int_eq(tpx_model_total_params(m), 2779683840LL);
  /* tie_word_embeddings is false and lm_head is in the file, untied. */
  tpx_param_info info;
  ck_assert_int_eq(tpx_model_param(m, tpx_model_find_param(m, "lm_head.weight"),
                                   &info, &err),
                   TPX_OK);
  ck_assert_int_eq(info.tied_to, -1);
  ck_assert_int_eq(info.dtype, TPX_DTYPE_F16);
  ck_assert_int_eq(kind_of(m, "lm_head"), TPX_MODULE_LINEAR);
  ck_assert_int_eq(kind_of(m, "model.embed_tokens"), TPX_MODULE_EMBEDDING);
  ck_assert_int_eq(kind_of(m, "model.final_layernorm"), TPX_MODULE_NORM);
  ck_assert_int_eq(kind_of(m, "model.layers.31.input_layernorm"),
                   TPX_MODULE_NORM);
  ck_assert_int_eq(kind_of(m, "model.layers.7.mlp.fc1"), TPX_MODULE_LINEAR);
  ck_assert_int_eq(kind_of(m, "model.layers.7.self_attn.dense"),
                   TPX_MODULE_LINEAR);
  ck_assert_int_eq(kind_of(m, "model.layers.7.self_attn"),
                   TPX_MODULE_CONTAINER);
  int64_t layers = tpx_model_find_module(m, "model.layers");
  ck_assert_uint_eq(tpx_model_module_num_children(m, layers), 32);
  for (size_t i = 0; i < 32; i++) {
    char want[64];
    snprintf(want, sizeof want, "model.layers.%zu", i);
    ck_assert_str_eq(
        tpx_model_module_fqn(m, tpx_model_module_child(m, layers, i)), want);
  }
  ck_assert_str_eq(tpx_model_architecture(m, 0), "PhiForCausalLM");
  tpx_model_destroy(m);
  json_decref(index);
  free(shard[0]);
  free(shard[1]);
  free(config);
  free(index_path);
  remove_tmpdir();
}
END_TEST

/* ---- bad inputs, one folder each ---- */

static char **list_cases(const char *dir, size_t *n) {
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  char **names = NULL;
  *n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    names = realloc(names, (*n + 1) * sizeof *names);
    names[(*n)++] = strdup(e->d_name);
  }
  closedir(d);
  return names;
}

START_TEST(test_bad_inputs) {
  char *bad = data_path("bad");
  size_t n = 0;
  char **cases = list_cases(bad, &n);
  ck_assert_uint_ge(n, 30);
  size_t checked = 0;
  for (size_t i = 0; i < n; i++) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/%s", bad, cases[i]);
    snprintf(path, sizeof path, "%s/expected", dir);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s has no expected file", dir);
    char expected[16][256];
    size_t nexp = 0;
    while (nexp < 16 && fgets(expected[nexp], sizeof expected[nexp], f)) {
      expected[nexp][strcspn(expected[nexp], "\n")] = '\0';
      if (expected[nexp][0])
        nexp++;
    }
    fclose(f);
    ck_assert_msg(nexp > 0, "%s: empty expected file", dir);

    tpx_error err = {0};
    tpx_status st;
    tpx_model *m = NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, F_OK) == 0) {
      m = (tpx_model *)1;
      st = tpx_model_load_config(path, &m, &err);
      ck_assert_msg(m == NULL, "%s: model returned on error", cases[i]);
    } else {
      m = model_with_config(NULL);
      st = tpx_model_add_safetensors(m, dir, &err);
      /* A failed import leaves the model as it was. */
      ck_assert_msg(tpx_model_num_params(m) == 0, "%s: params added", cases[i]);
      ck_assert_msg(tpx_model_num_modules(m) == 1, "%s: modules added",
                    cases[i]);
      tpx_model_destroy(m);
    }
    ck_assert_msg(st != TPX_OK, "%s: accepted", cases[i]);
    ck_assert_msg(err.status == st, "%s: status mismatch", cases[i]);
    for (size_t k = 0; k < nexp; k++)
      ck_assert_msg(strstr(err.message, expected[k]) != NULL,
                    "%s: message '%s' lacks '%s'", cases[i], err.message,
                    expected[k]);
    checked++;
    free(cases[i]);
  }
  ck_assert_uint_eq(checked, n);
  free(cases);
  free(bad);
}
END_TEST

START_TEST(test_missing_paths) {
  tpx_model *m = model_with_config(NULL);
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_model_add_safetensors(m, "/nonexistent/x.safetensors", &err),
      TPX_NOT_FOUND);
  ck_assert_msg(strstr(err.message, "/nonexistent/x.safetensors"), "%s",
                err.message);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, NULL, &e2),
                   TPX_INVALID_ARGUMENT);
  tpx_model_destroy(m);
}
END_TEST

/* Many tensors in one header, in reverse order: natural order and speed
 * (no timing asserted; this just must not be quadratic enough to time out). */
START_TEST(test_many_tensors) {
  enum { L = 200, X = 64 };
  static char names[L * X][64];
  static gen_tensor t[L * X];
  size_t n = 0;
  for (int l = L - 1; l >= 0; l--)
    for (int x = 0; x < X; x++) {
      snprintf(names[n], sizeof names[n], "model.layers.%d.experts.%d.w.weight",
               l, x);
      t[n].name = names[n];
      t[n].dtype = "BF16";
      t[n].ndim = 2;
      t[n].shape[0] = 8;
      t[n].shape[1] = 4;
      n++;
    }
  make_tmpdir();
  write_st(tmp("model.safetensors"), t, n, 0);
  tpx_model *m = model_with_config(NULL);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_params(m), n);
  int64_t layers = tpx_model_find_module(m, "model.layers");
  ck_assert_uint_eq(tpx_model_module_num_children(m, layers), L);
  ck_assert_str_eq(
      tpx_model_module_fqn(m, tpx_model_module_child(m, layers, 199)),
      "model.layers.199");
  int64_t ex = tpx_model_find_module(m, "model.layers.5.experts");
  ck_assert_str_eq(tpx_model_module_fqn(m, tpx_model_module_child(m, ex, 10)),
                   "model.layers.5.experts.10");
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* One tensor whose name has 50 000 dotted components: refused at once with
 * a clear error (every component would become a module repeating its
 * parents' names: memory quadratic in the depth, 2.5 GB), the name not
 * echoed whole. Run under a 100 MB address-space budget on top of what the
 * test process already maps. A name at the limit still loads. */
START_TEST(test_deep_name_bounded) {
  enum { ATOMS = 50000 };
  char *deep = malloc(2 * ATOMS + 16);
  ck_assert_ptr_nonnull(deep);
  char *w = deep;
  for (int i = 0; i < ATOMS; i++) {
    *w++ = 'a';
    *w++ = '.';
  }
  strcpy(w, "weight");
  char edge[2 * TPX__ST_MAX_NAME_DEPTH + 16];
  w = edge;
  for (int i = 0; i < TPX__ST_MAX_NAME_DEPTH - 1; i++) {
    *w++ = 'b';
    *w++ = '.';
  }
  strcpy(w, "weight");
  make_tmpdir();
  gen_tensor t[1] = {{deep, "BF16", 1, {2}}};
  write_st(tmp("model.safetensors"), t, 1, 0);
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  ck_assert_int_eq(fscanf(f, "%llu", &pages), 1);
  fclose(f);
  unsigned long long vm = pages * (unsigned long long)sysconf(_SC_PAGESIZE);
  struct rlimit rl = {(rlim_t)(vm + (100ull << 20)),
                      (rlim_t)(vm + (100ull << 20))};
  ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
  tpx_model *m = model_with_config(NULL);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_PARSE);
  ck_assert_msg(strstr(err.message, "has 50001 dot-separated components, "
                                    "more than the 256 tpx accepts"),
                "%s", err.message);
  ck_assert_uint_lt(strlen(err.message), 400);
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  tpx_model_destroy(m);
  t[0].name = edge;
  write_st(tmp("model.safetensors"), t, 1, 0);
  m = model_with_config(NULL);
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_params(m), 1);
  tpx_model_destroy(m);
  remove_tmpdir();
  free(deep);
}
END_TEST

/* ---- transformers' conversion rules (issue 26) ---- */

static int64_t shape_of(const tpx_model *m, const char *fqn, int64_t *out) {
  int64_t i = tpx_model_find_param(m, fqn);
  ck_assert_msg(i >= 0, "no parameter %s", fqn);
  tpx_param_info info;
  ck_assert_int_eq(tpx_model_param(m, i, &info, NULL), TPX_OK);
  memcpy(out, info.shape, (size_t)info.ndim * sizeof *out);
  return info.ndim;
}

/* olmoe: per-expert tensors become the fused 3-D parameters
 * (MergeModulelist + Concatenate), as from_pretrained builds them. */
static const gen_tensor olmoe_file[] = {
    {"model.embed_tokens.weight", "BF16", 2, {64, 16}},
    {"model.layers.0.mlp.gate.weight", "BF16", 2, {3, 16}},
    {"model.layers.0.mlp.experts.0.gate_proj.weight", "BF16", 2, {8, 16}},
    {"model.layers.0.mlp.experts.0.up_proj.weight", "BF16", 2, {8, 16}},
    {"model.layers.0.mlp.experts.0.down_proj.weight", "BF16", 2, {16, 8}},
    {"model.layers.0.mlp.experts.1.gate_proj.weight", "BF16", 2, {8, 16}},
    {"model.layers.0.mlp.experts.1.up_proj.weight", "BF16", 2, {8, 16}},
    {"model.layers.0.mlp.experts.1.down_proj.weight", "BF16", 2, {16, 8}},
    {"model.layers.0.mlp.experts.2.gate_proj.weight", "BF16", 2, {8, 16}},
    {"model.layers.0.mlp.experts.2.up_proj.weight", "BF16", 2, {8, 16}},
    {"model.layers.0.mlp.experts.2.down_proj.weight", "BF16", 2, {16, 8}},
};

START_TEST(test_conversion_fused_experts) {
  write_st(tmp("olmoe.safetensors"), olmoe_file,
           sizeof olmoe_file / sizeof *olmoe_file, 1);
  tpx_model *m = model_with_config("{\"model_type\": \"olmoe\"}");
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmp("olmoe.safetensors"), &err),
                   TPX_OK);
  int64_t sh[8];
  ck_assert_int_eq(shape_of(m, "model.layers.0.mlp.experts.gate_up_proj", sh),
                   3);
  ck_assert_int_eq(sh[0], 3);
  ck_assert_int_eq(sh[1], 16); /* gate and up rows concatenated */
  ck_assert_int_eq(sh[2], 16);
  ck_assert_int_eq(shape_of(m, "model.layers.0.mlp.experts.down_proj", sh), 3);
  ck_assert_int_eq(sh[0], 3);
  ck_assert_int_eq(sh[1], 16);
  ck_assert_int_eq(sh[2], 8);
  ck_assert_int_lt(
      tpx_model_find_param(m, "model.layers.0.mlp.experts.0.gate_proj.weight"),
      0);
  ck_assert_int_eq(tpx_model_num_params(m), 4);
  ck_assert_ptr_nonnull(strstr(tpx_model_conversion_note(m), "5.25"));
  tpx_model_destroy(m);
}
END_TEST

/* lara_mini: Split makes one saved tensor (linear_attn.in_proj) into the
 * module's four projections, sized from the config as transformers' built
 * module has them (qkv takes the rest); a config without the sizes, or
 * sizes that do not fit the tensor, leave it as saved. */
static const gen_tensor lara_file[] = {
    {"model.layers.0.linear_attn.in_proj.weight", "BF16", 2, {200, 64}},
    {"model.layers.0.linear_attn.out_norm.weight", "BF16", 1, {16}},
};

START_TEST(test_conversion_split) {
  static const char *const cfgs[] = {
      "{\"model_type\": \"lara_mini\", \"linear_num_value_heads\": 4, "
      "\"linear_value_head_dim\": 16}",
      "{\"model_type\": \"lara_mini\", \"linear_num_value_heads\": 4}",
      "{\"model_type\": \"lara_mini\", \"linear_num_value_heads\": 8, "
      "\"linear_value_head_dim\": 32}",
  };
  write_st(tmp("lara.safetensors"), lara_file,
           sizeof lara_file / sizeof *lara_file, 1);
  tpx_model *m = model_with_config(cfgs[_i]);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmp("lara.safetensors"), &err),
                   TPX_OK);
  static const char *const names[] = {"qkv", "z", "b", "a"};
  static const int64_t rows[] = {128, 64, 4, 4};
  int64_t sh[8];
  char fqn[128];
  for (size_t i = 0; i < 4; i++) {
    snprintf(fqn, sizeof fqn, "model.layers.0.linear_attn.in_proj_%s.weight",
             names[i]);
    if (_i != 0) {
      ck_assert_int_lt(tpx_model_find_param(m, fqn), 0);
      continue;
    }
    ck_assert_int_eq(shape_of(m, fqn, sh), 2);
    ck_assert_int_eq(sh[0], rows[i]);
    ck_assert_int_eq(sh[1], 64);
  }
  ck_assert_int_eq(
      tpx_model_find_param(m, "model.layers.0.linear_attn.in_proj.weight") >= 0,
      _i != 0);
  ck_assert_int_ge(
      tpx_model_find_param(m, "model.layers.0.linear_attn.norm.weight"), 0);
  ck_assert_int_eq(tpx_model_num_params(m), _i == 0 ? 5 : 2);
  tpx_model_destroy(m);
}
END_TEST

/* exaone: transformer.h.* etc. renamed to the module tree; the checkpoint
 * names stay as aliases. gpt_neox: embed_out -> lm_head. */
static const gen_tensor exaone_file[] = {
    {"transformer.wte.weight", "BF16", 2, {64, 16}},
    {"transformer.h.0.ln_1.weight", "BF16", 1, {16}},
    {"transformer.h.0.attn.attention.q_proj.weight", "BF16", 2, {16, 16}},
    {"transformer.h.0.attn.attention.out_proj.weight", "BF16", 2, {16, 16}},
    {"transformer.h.0.mlp.c_fc_0.weight", "BF16", 2, {32, 16}},
    {"transformer.h.1.mlp.c_proj.weight", "BF16", 2, {16, 32}},
    {"transformer.ln_f.weight", "BF16", 1, {16}},
    {"embed_out.weight", "BF16", 2, {64, 16}},
};

START_TEST(test_conversion_renames) {
  write_st(tmp("exaone.safetensors"), exaone_file,
           sizeof exaone_file / sizeof *exaone_file, 1);
  tpx_model *m = model_with_config(_i == 0 ? "{\"model_type\": \"exaone\"}"
                                           : "{\"model_type\": \"llama\"}");
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_model_add_safetensors(m, tmp("exaone.safetensors"), &err), TPX_OK);
  const char *want[] = {
      "model.embed_tokens.weight",
      "model.layers.0.input_layernorm.weight",
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.1.mlp.down_proj.weight",
      "model.norm.weight",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    ck_assert_msg((tpx_model_find_param(m, want[i]) >= 0) == (_i == 0), "%s",
                  want[i]);
  ck_assert_int_eq(tpx_model_find_param(m, "transformer.h.0.ln_1.weight") >= 0,
                   _i == 1);
  if (_i == 0) {
    char buf[256];
    ck_assert_int_eq(
        tpx_model_canonical_name(
            m, "transformer.h.7.attn.attention.q_proj.bias", buf, sizeof buf),
        1);
    ck_assert_str_eq(buf, "model.layers.7.self_attn.q_proj.bias");
    ck_assert_ptr_nonnull(tpx_model_conversion_note(m));
  } else {
    ck_assert_ptr_null(tpx_model_conversion_note(m));
  }
  tpx_model_destroy(m);
}
END_TEST

/* deepseek_v3's router bias is a buffer: listed with its bytes, not a
 * parameter. */
static const gen_tensor ds_file[] = {
    {"model.layers.1.mlp.gate.weight", "BF16", 2, {4, 16}},
    {"model.layers.1.mlp.gate.e_score_correction_bias", "F32", 1, {4}},
};

START_TEST(test_conversion_buffers) {
  write_st(tmp("ds.safetensors"), ds_file, 2, 1);
  tpx_model *m = model_with_config("{\"model_type\": \"deepseek_v3\"}");
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmp("ds.safetensors"), &err),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_num_params(m), 1);
  ck_assert_int_lt(tpx_model_find_param(
                       m, "model.layers.1.mlp.gate.e_score_correction_bias"),
                   0);
  ck_assert_uint_eq(tpx_model_num_buffers(m), 1);
  const char *fqn;
  const int64_t *shape;
  int ndim;
  tpx_dtype dt;
  ck_assert_int_eq(tpx_model_buffer(m, 0, &fqn, &shape, &ndim, &dt, &err),
                   TPX_OK);
  ck_assert_str_eq(fqn, "model.layers.1.mlp.gate.e_score_correction_bias");
  ck_assert_int_eq(ndim, 1);
  ck_assert_int_eq(shape[0], 4);
  ck_assert_int_eq(dt, TPX_DTYPE_F32);
  ck_assert_int_eq(tpx_model_buffer_bytes(m, 0), 16);
  ck_assert_int_eq(tpx_model_buffer(m, 1, NULL, NULL, NULL, NULL, &err),
                   TPX_OUT_OF_RANGE);
  tpx_model_destroy(m);
}
END_TEST

/* An alias rule is only as general as the load allows: axk1's
 * post_mlp_layernorm -> mlp.post_mlp_layernorm must not move self_attn
 * under mlp; bailing_hybrid's attention.A_log -> self_attn.forget_gate.A_log
 * must not lose to attention -> self_attn (nor turn q_proj into
 * forget_gate.q_proj). */
static const gen_tensor axk1_file[] = {
    {"model.layers.0.post_mlp_layernorm.weight", "BF16", 1, {16}},
    {"model.layers.0.self_attn.o_proj.weight", "BF16", 2, {16, 16}},
    {"model.layers.1.post_mlp_layernorm.weight", "BF16", 1, {16}},
    {"model.layers.1.self_attn.o_proj.weight", "BF16", 2, {16, 16}},
};
static const gen_tensor bailing_file[] = {
    {"model.layers.0.attention.q_proj.weight", "BF16", 2, {16, 16}},
    {"model.layers.0.attention.A_log", "F32", 1, {4}},
    {"model.layers.0.attention.f_proj.weight", "BF16", 2, {4, 16}},
    {"model.layers.0.attention.dense.weight", "BF16", 2, {16, 16}},
};

START_TEST(test_conversion_alias_specific) {
  const gen_tensor *file = _i == 0 ? axk1_file : bailing_file;
  write_st(tmp("alias.safetensors"), file, 4, 1);
  tpx_model *m =
      model_with_config(_i == 0 ? "{\"model_type\": \"axk1\"}"
                                : "{\"model_type\": \"bailing_hybrid\"}");
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmp("alias.safetensors"), &err),
                   TPX_OK);
  static const char *const want0[] = {
      "model.layers.0.mlp.post_mlp_layernorm.weight",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.1.mlp.post_mlp_layernorm.weight",
      "model.layers.1.self_attn.o_proj.weight"};
  static const char *const want1[] = {
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.forget_gate.A_log",
      "model.layers.0.self_attn.forget_gate.f_proj.weight",
      "model.layers.0.self_attn.o_proj.weight"};
  const char *const *want = _i == 0 ? want0 : want1;
  ck_assert_uint_eq(tpx_model_num_params(m), 4);
  for (size_t i = 0; i < 4; i++)
    ck_assert_msg(tpx_model_find_param(m, want[i]) >= 0, "no %s", want[i]);
  char buf[256];
  ck_assert_int_eq(tpx_model_canonical_name(
                       m,
                       _i == 0 ? "model.layers.7.post_mlp_layernorm.weight"
                               : "model.layers.7.attention.A_log",
                       buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, _i == 0 ? "model.layers.7.mlp.post_mlp_layernorm.weight"
                                : "model.layers.7.self_attn.forget_gate.A_log");
  tpx_model_destroy(m);
}
END_TEST

static Suite *st_suite(void) {
  Suite *s = suite_create("model_safetensors");
  TCase *tc = tcase_create("safetensors");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_single_file_kinds_and_order, 0, 2);
  tcase_add_loop_test(tc, test_tied_lm_head, 0, 5);
  tcase_add_test(tc, test_existing_tensors_must_agree);
  tcase_add_test(tc, test_expert_fold);
  tcase_add_test(tc, test_skeleton_untied_lm_head);
  tcase_add_loop_test(tc, test_tied_lm_head_names, 0, 5);
  tcase_add_loop_test(tc, test_phi2_index, 0, 2);
  tcase_add_test(tc, test_bad_inputs);
  tcase_add_test(tc, test_missing_paths);
  tcase_add_test(tc, test_many_tensors);
  tcase_add_test(tc, test_deep_name_bounded);
  tcase_add_test(tc, test_conversion_fused_experts);
  tcase_add_loop_test(tc, test_conversion_split, 0, 3);
  tcase_add_loop_test(tc, test_conversion_renames, 0, 2);
  tcase_add_test(tc, test_conversion_buffers);
  tcase_add_loop_test(tc, test_conversion_alias_specific, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(st_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
