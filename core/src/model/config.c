/* config.c — a model's HF config.json: parsing (with Python-style Infinity /
 * NaN, see model/config.h for the sentinel scheme), architectures (or a
 * Diffusers config's "_class_name" when it has none), and path
 * lookups for the typed public reads. Not a JSON parser: jansson parses; the
 * pre-pass here only rewrites three bare tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/grow.h"
#include "model/config.h"
#include "model/config_attrs.h"
#include "model/model_impl.h"
#include "model/model_view.h"

/* Sentinel strings (NUL first, so the length must be compared too). */
#define S_INF "\0tpx:inf"
#define S_NINF "\0tpx:-inf"
#define S_NAN "\0tpx:nan"
/* ... and how they are spelled in JSON text. */
#define J_INF "\"\\u0000tpx:inf\""
#define J_NINF "\"\\u0000tpx:-inf\""
#define J_NAN "\"\\u0000tpx:nan\""

enum { CONFIG_MAX_BYTES = 64 * 1024 * 1024 };
/* A real config holds a handful of Infinity / NaN tokens; each becomes a
 * 16-byte sentinel and a jansson string (~100 bytes), so a file of nothing
 * else (60 MB: 1.66 GB) is refused past this many. */
enum { CONFIG_MAX_NONFINITE = 4096 };
/* An architecture (class) name longer than this is refused, not echoed. */
enum { CONFIG_MAX_ARCH_LEN = 256 };

static int ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '+' || c == '-';
}

/* Length of the bare non-finite token at text[i] (and its replacement), or 0.
 * A token counts only with a non-identifier character on both sides, so
 * "NaNx" or "1Infinity" stay as they are for jansson to reject, and only
 * where a value stands: a bare key ({NaN: 1}) is not JSON (nor Python's
 * json), and rewritten it would become a key holding the internal
 * sentinel. */
static size_t nonfinite_token(const char *text, size_t len, size_t i,
                              const char **repl) {
  static const struct {
    const char *tok;
    const char *json;
  } toks[] = {{"-Infinity", J_NINF}, {"Infinity", J_INF}, {"NaN", J_NAN}};
  if (i > 0 && ident_char(text[i - 1]))
    return 0;
  for (size_t k = 0; k < sizeof toks / sizeof *toks; k++) {
    size_t n = strlen(toks[k].tok);
    if (len - i >= n && memcmp(text + i, toks[k].tok, n) == 0 &&
        (i + n == len || !ident_char(text[i + n]))) {
      size_t j = i + n;
      while (j < len && strchr(" \t\r\n", text[j]) && text[j]) j++;
      if (j < len && text[j] == ':')
        return 0;
      *repl = toks[k].json;
      return n;
    }
  }
  return 0;
}

/* Rewrites bare Infinity/-Infinity/NaN outside strings. Returns a malloc'd
 * copy in *out (NULL when nothing needed rewriting). -1 when out of memory,
 * -2 past CONFIG_MAX_NONFINITE tokens. */
static int rewrite_nonfinite(const char *text, size_t len, char **out,
                             size_t *out_len) {
  char *buf = NULL;
  size_t pos = 0, copied = 0, cap = 0, count = 0;
  int in_string = 0;
  *out = NULL;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = 0;
      continue;
    }
    if (c == '"') {
      in_string = 1;
      continue;
    }
    if (c != 'I' && c != 'N' && c != '-')
      continue;
    const char *repl;
    size_t n = nonfinite_token(text, len, i, &repl);
    if (n == 0)
      continue;
    if (++count > CONFIG_MAX_NONFINITE) {
      free(buf);
      return -2;
    }
    size_t rlen = strlen(repl);
    size_t need = pos + (i - copied) + rlen + (len - i) + 1;
    if (TPX_GROW(buf, cap, need, len + 64)) {
      free(buf);
      return -1;
    }
    memcpy(buf + pos, text + copied, i - copied);
    pos += i - copied;
    memcpy(buf + pos, repl, rlen);
    pos += rlen;
    copied = i + n;
    i += n - 1;
  }
  if (buf == NULL)
    return 0;
  memcpy(buf + pos, text + copied, len - copied);
  pos += len - copied;
  buf[pos] = '\0';
  *out = buf;
  *out_len = pos;
  return 0;
}

tpx_status tpx__config_parse(const char *text, size_t len, const char *source,
                             json_t **out, tpx_error *err) {
  const char *src = source ? source : "config";
  char *rewritten = NULL;
  size_t rlen = 0;
  *out = NULL;
  if (text == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: no config text", src);
  int rw = rewrite_nonfinite(text, len, &rewritten, &rlen);
  if (rw == -2)
    return tpx_error_set(err, TPX_PARSE,
                         "%s: more than %d Infinity / NaN values; a config "
                         "holds a few",
                         src, (int)CONFIG_MAX_NONFINITE);
  if (rw != 0)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: out of memory", src);
  json_error_t jerr;
  json_t *root = rewritten ? json_loadb(rewritten, rlen, JSON_ALLOW_NUL, &jerr)
                           : json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
  free(rewritten);
  if (root == NULL)
    /* Lines are unchanged by the rewrite; columns may shift after a
     * rewritten token on the same line. */
    return tpx_error_set(err, TPX_PARSE, "%s: invalid JSON at line %d: %s", src,
                         jerr.line, jerr.text);
  if (!json_is_object(root)) {
    json_decref(root);
    return tpx_error_set(err, TPX_PARSE,
                         "%s: config must be a JSON object, not an array", src);
  }
  *out = root;
  return TPX_OK;
}

static tpx_status read_architectures(json_t *root, const char *src,
                                     const char ***names, size_t *n,
                                     tpx_error *err) {
  json_t *arch = json_object_get(root, "architectures");
  *names = NULL;
  *n = 0;
  if (arch == NULL || json_is_null(arch)) {
    /* A Diffusers component config names its one class in "_class_name"
     * instead (a transformer or VAE class): that is its architecture. */
    json_t *cls = json_object_get(root, "_class_name");
    if (cls == NULL || json_is_null(cls))
      return TPX_OK;
    if (!json_is_string(cls) || json_string_length(cls) == 0 ||
        strlen(json_string_value(cls)) != json_string_length(cls))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: \"_class_name\" must be a non-empty string",
                           src);
    if (json_string_length(cls) > CONFIG_MAX_ARCH_LEN)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: \"_class_name\" is %zu characters long "
                           "(\"%.40s...\"); a class name has at most %d",
                           src, json_string_length(cls), json_string_value(cls),
                           (int)CONFIG_MAX_ARCH_LEN);
    const char **one = calloc(1, sizeof *one);
    if (one == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "%s: out of memory", src);
    one[0] = json_string_value(cls);
    *names = one;
    *n = 1;
    return TPX_OK;
  }
  if (!json_is_array(arch))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: \"architectures\" must be a list of strings",
                         src);
  size_t count = json_array_size(arch);
  const char **list = calloc(count ? count : 1, sizeof *list);
  if (list == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: out of memory", src);
  for (size_t i = 0; i < count; i++) {
    json_t *item = json_array_get(arch, i);
    if (!json_is_string(item) || json_string_length(item) == 0 ||
        strlen(json_string_value(item)) != json_string_length(item)) {
      free(list);
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: \"architectures\"[%zu] must be a non-empty "
                           "string",
                           src, i);
    }
    if (json_string_length(item) > CONFIG_MAX_ARCH_LEN) {
      free(list);
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: \"architectures\"[%zu] is %zu characters "
                           "long (\"%.40s...\"); a class name has at most %d",
                           src, i, json_string_length(item),
                           json_string_value(item), (int)CONFIG_MAX_ARCH_LEN);
    }
    list[i] = json_string_value(item);
  }
  *names = list;
  *n = count;
  return TPX_OK;
}

tpx_status tpx_model_set_config(tpx_model *model, const char *json_text,
                                size_t len, const char *source,
                                tpx_error *err) {
  if (model == NULL || json_text == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_set_config: NULL argument");
  const char *src = source ? source : "config";
  json_t *root;
  tpx_status st = tpx__config_parse(json_text, len, src, &root, err);
  if (st != TPX_OK)
    return st;
  const char **names;
  size_t n;
  st = read_architectures(root, src, &names, &n, err);
  if (st == TPX_OK && n > 0)
    st = tpx__model_set_architectures(model, names, n, err);
  free(names);
  if (st == TPX_OK && source != NULL)
    st = tpx__model_set_source(model, source, err);
  if (st != TPX_OK) {
    json_decref(root);
    return st;
  }
  /* Config keys under both the names transformers reads and writes
   * (num_experts / num_local_experts, ...). */
  if (tpx__config_apply_attrs(root) < 0) {
    json_decref(root);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (%s)", src);
  }
  if (model->config != NULL)
    json_decref(model->config);
  model->config = root;
  return TPX_OK;
}

int tpx__model_config_dtype(const tpx_model *model, int float_only,
                            tpx_dtype *out) {
  static const char *const keys[] = {
      "torch_dtype", "dtype", "text_config.torch_dtype", "text_config.dtype"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    const char *s = NULL;
    tpx_dtype d;
    if (tpx_model_config_string(model, keys[i], &s, NULL) == TPX_OK && s &&
        tpx_dtype_parse(s, &d, NULL) == TPX_OK &&
        (!float_only || tpx_dtype_is_float(d))) {
      *out = d;
      return 1;
    }
  }
  return 0;
}

tpx_status tpx_model_set_config_dtype(tpx_model *model, tpx_dtype dtype,
                                      tpx_error *err) {
  if (model == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_set_config_dtype: NULL model");
  if (!tpx_dtype_is_float(dtype))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_set_config_dtype: %s is not a "
                         "floating-point dtype (bf16, f16, f32, ...)",
                         tpx_dtype_short_name(dtype));
  if (model->config == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_set_config_dtype: the model has no "
                         "config (tpx_model_load_config first)");
  if (json_object_set_new(model->config, "torch_dtype",
                          json_string(tpx_dtype_hf_name(dtype))) != 0)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return TPX_OK;
}

tpx_status tpx_model_load_config(const char *path, tpx_model **out,
                                 tpx_error *err) {
  if (path == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_load_config: NULL argument");
  *out = NULL;
  char *text;
  size_t len;
  tpx_status st = tpx__file_read(path, CONFIG_MAX_BYTES, &text, &len, err);
  if (st != TPX_OK)
    return st;
  tpx_model *model;
  st = tpx_model_create(&model, err);
  if (st == TPX_OK) {
    st = tpx_model_set_config(model, text, len, path, err);
    if (st != TPX_OK) {
      tpx_model_destroy(model);
      model = NULL;
    }
  }
  free(text);
  *out = model;
  return st;
}

/* ---- lookups ---- */

json_t *tpx__model_config(const tpx_model *model) {
  return model ? model->config : NULL;
}

json_t *tpx__config_lookup(json_t *root, const char *path) {
  if (root == NULL || path == NULL)
    return NULL;
  json_t *cur = root;
  const char *p = path;
  if (*p == '\0')
    return root;
  for (;;) {
    size_t klen = strcspn(p, ".[");
    if (klen == 0)
      return NULL; /* empty key, or a "[i]" on the root object */
    if (!json_is_object(cur))
      return NULL;
    /* json_object_getn needs jansson 2.14; the build accepts 2.11. */
    char small[128];
    char *key = klen < sizeof small ? small : malloc(klen + 1);
    if (key == NULL)
      return NULL;
    memcpy(key, p, klen);
    key[klen] = '\0';
    cur = json_object_get(cur, key);
    if (key != small)
      free(key);
    if (cur == NULL)
      return NULL;
    p += klen;
    while (*p == '[') {
      p++;
      if (*p < '0' || *p > '9')
        return NULL;
      size_t idx = 0;
      while (*p >= '0' && *p <= '9') {
        if (idx > (SIZE_MAX - 9) / 10)
          return NULL;
        idx = idx * 10 + (size_t)(*p - '0');
        p++;
      }
      if (*p != ']' || !json_is_array(cur))
        return NULL;
      p++;
      cur = json_array_get(cur, idx);
      if (cur == NULL)
        return NULL;
    }
    if (*p == '\0')
      return cur;
    if (*p != '.')
      return NULL;
    p++;
  }
}

static int sentinel_is(const json_t *v, const char *s, size_t n) {
  return json_string_length(v) == n && memcmp(json_string_value(v), s, n) == 0;
}

int tpx__config_is_nonfinite(const json_t *v) {
  if (!json_is_string(v) || json_string_value(v)[0] != '\0')
    return 0;
  return sentinel_is(v, S_INF, sizeof S_INF - 1) ||
         sentinel_is(v, S_NINF, sizeof S_NINF - 1) ||
         sentinel_is(v, S_NAN, sizeof S_NAN - 1);
}

int tpx__config_number(const json_t *v, double *out) {
  double d;
  if (json_is_number(v)) {
    d = json_number_value(v);
  } else if (!tpx__config_is_nonfinite(v)) {
    return 0;
  } else if (sentinel_is(v, S_INF, sizeof S_INF - 1)) {
    d = HUGE_VAL;
  } else if (sentinel_is(v, S_NINF, sizeof S_NINF - 1)) {
    d = -HUGE_VAL;
  } else {
    d = NAN;
  }
  if (out != NULL)
    *out = d;
  return 1;
}

int tpx__config_integer(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    if (out != NULL)
      *out = (int64_t)json_integer_value(v);
    return 1;
  }
  if (!json_is_real(v))
    return 0;
  double d = json_real_value(v);
  /* 2^63 is exactly representable; anything below it converts safely. */
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) ||
      d != floor(d))
    return 0;
  if (out != NULL)
    *out = (int64_t)d;
  return 1;
}

/* The value at path, or an error: NOT_FOUND when absent or null. */
static tpx_status config_get(const tpx_model *model, const char *path,
                             json_t **out, tpx_error *err) {
  if (model == NULL || path == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "config read: NULL argument");
  const char *src = model->source ? model->source : "model config";
  if (model->config == NULL)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "config key '%s': the model has no config", path);
  json_t *v = tpx__config_lookup(model->config, path);
  if (v == NULL || json_is_null(v))
    return tpx_error_set(err, TPX_NOT_FOUND, "%s: no config key '%s'", src,
                         path);
  *out = v;
  return TPX_OK;
}

static const char *type_name(const json_t *v) {
  if (tpx__config_is_nonfinite(v))
    return "a non-finite number";
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "a list";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

static tpx_status mismatch(const tpx_model *model, const char *path,
                           const json_t *v, const char *want, tpx_error *err) {
  return tpx_error_set(
      err, TPX_INVALID_ARGUMENT, "%s: config key '%s' is %s, expected %s",
      model->source ? model->source : "model config", path, type_name(v), want);
}

tpx_status tpx_model_config_int(const tpx_model *model, const char *path,
                                int64_t *out, tpx_error *err) {
  json_t *v = NULL;
  tpx_status st = config_get(model, path, &v, err);
  if (st != TPX_OK)
    return st;
  if (!tpx__config_integer(v, out))
    return mismatch(model, path, v, "an integer", err);
  return TPX_OK;
}

tpx_status tpx_model_config_float(const tpx_model *model, const char *path,
                                  double *out, tpx_error *err) {
  json_t *v = NULL;
  tpx_status st = config_get(model, path, &v, err);
  if (st != TPX_OK)
    return st;
  if (!tpx__config_number(v, out))
    return mismatch(model, path, v, "a number", err);
  return TPX_OK;
}

tpx_status tpx_model_config_bool(const tpx_model *model, const char *path,
                                 int *out, tpx_error *err) {
  json_t *v = NULL;
  tpx_status st = config_get(model, path, &v, err);
  if (st != TPX_OK)
    return st;
  if (!json_is_boolean(v))
    return mismatch(model, path, v, "true or false", err);
  if (out != NULL)
    *out = json_is_true(v);
  return TPX_OK;
}

tpx_status tpx_model_config_string(const tpx_model *model, const char *path,
                                   const char **out, tpx_error *err) {
  json_t *v = NULL;
  tpx_status st = config_get(model, path, &v, err);
  if (st != TPX_OK)
    return st;
  if (!json_is_string(v) || tpx__config_is_nonfinite(v))
    return mismatch(model, path, v, "a string", err);
  if (out != NULL)
    *out = json_string_value(v);
  return TPX_OK;
}

char *tpx__config_dumps(const json_t *v) {
  char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (text == NULL)
    return NULL;
  static const struct {
    const char *json, *tok;
  } map[] = {{J_NINF, "-Infinity"}, {J_INF, "Infinity"}, {J_NAN, "NaN"}};
  /* Each sentinel is longer than its token: rewrite in place. */
  for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
    size_t jl = strlen(map[k].json), tl = strlen(map[k].tok);
    char *at;
    while ((at = strstr(text, map[k].json)) != NULL) {
      memcpy(at, map[k].tok, tl);
      memmove(at + tl, at + jl, strlen(at + jl) + 1);
    }
  }
  return text;
}
