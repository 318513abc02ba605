/* model/conversion.c — the rule engine over transformers' conversion
 * table (conversion.h): per model type, renaming rules applied in order to
 * a checkpoint name, converters (fused experts, concatenations, chunks,
 * splits with their sizes from the config) matched against the renamed
 * name, and the buffer patterns. Sources are
 * POSIX extended regexes (embed_conversion.py translates transformers'
 * Python ones); transformers' trailing negative lookahead is checked by
 * hand on the character after a match. */
#include "model/conversion.h"

#include <ctype.h>
#include <stdint.h>
#include <jansson.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv_source {
  regex_t re;
  int compiled;
  char look;    /* 0, 'w' (no word char after the match) or '_' */
  int position; /* the source's index as the rule writes it */
} conv_source;

typedef struct conv_rule {
  int converter;
  conv_source *src;
  size_t num_src;
  char **targets;
  size_t num_targets;
  int ops[4], dims[4];
  size_t num_ops;
  json_t *sizes; /* a Split's "z": per target [[coef, attr...]...] or "rest" */
} conv_rule;

struct tpx__conv {
  conv_rule *rules;
  size_t num_rules;
  char **buffers; /* patterns; '*' is one atom */
  size_t num_buffers;
  size_t skipped;
};

void tpx__conv_free(tpx__conv *c) {
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->num_rules; i++) {
    conv_rule *r = &c->rules[i];
    for (size_t k = 0; k < r->num_src; k++)
      if (r->src[k].compiled)
        regfree(&r->src[k].re);
    for (size_t k = 0; k < r->num_targets; k++) free(r->targets[k]);
    free(r->src);
    free(r->targets);
    json_decref(r->sizes);
  }
  for (size_t i = 0; i < c->num_buffers; i++) free(c->buffers[i]);
  free(c->buffers);
  free(c->rules);
  free(c);
}

static char **strings(json_t *arr, size_t *n) {
  *n = json_array_size(arr);
  char **out = calloc(*n ? *n : 1, sizeof *out);
  for (size_t i = 0; out && i < *n; i++) {
    const char *s = json_string_value(json_array_get(arr, i));
    out[i] = strdup(s ? s : "");
    if (out[i] == NULL) {
      for (size_t k = 0; k < i; k++) free(out[k]);
      free(out);
      return NULL;
    }
  }
  return out;
}

static int op_code(const char *name) {
  if (strcmp(name, "MergeModulelist") == 0)
    return TPX__CONV_MERGE;
  if (strcmp(name, "Concatenate") == 0)
    return TPX__CONV_CONCAT;
  if (strcmp(name, "Chunk") == 0)
    return TPX__CONV_CHUNK;
  if (strcmp(name, "Split") == 0)
    return TPX__CONV_SPLIT;
  return 0;
}

static tpx_status load_rule(conv_rule *r, json_t *j, const char *model_type,
                            tpx_error *err) {
  json_t *src = json_object_get(j, "s"), *pos = json_object_get(j, "g");
  r->converter = (int)json_integer_value(json_object_get(j, "c"));
  r->num_src = json_array_size(src);
  r->src = calloc(r->num_src ? r->num_src : 1, sizeof *r->src);
  r->targets = strings(json_object_get(j, "t"), &r->num_targets);
  if (r->src == NULL || r->targets == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t k = 0; k < r->num_src; k++) {
    json_t *s = json_array_get(src, k);
    const char *re = json_string_value(json_array_get(s, 0));
    const char *look = json_string_value(json_array_get(s, 1));
    conv_source *cs = &r->src[k];
    cs->look = look && look[0] ? look[0] : 0;
    cs->position = (int)json_integer_value(json_array_get(pos, k));
    if (re == NULL || regcomp(&cs->re, re, REG_EXTENDED) != 0)
      return tpx_error_set(err, TPX_INTERNAL,
                           "conversion table, model type '%s': source "
                           "pattern '%s' does not compile",
                           model_type, re ? re : "(null)");
    cs->compiled = 1;
  }
  json_t *ops = json_object_get(j, "ops");
  for (size_t k = 0; k < json_array_size(ops) && r->num_ops < 4; k++) {
    json_t *op = json_array_get(ops, k);
    r->ops[r->num_ops] = op_code(json_string_value(json_array_get(op, 0)));
    r->dims[r->num_ops++] = (int)json_integer_value(json_array_get(op, 1));
  }
  r->sizes = json_incref(json_object_get(j, "z"));
  return TPX_OK;
}

tpx_status tpx__conv_open(const char *model_type, const char *json,
                          tpx__conv **out, tpx_error *err) {
  *out = NULL;
  if (model_type == NULL)
    return TPX_OK;
  for (size_t i = 0; json == NULL && i < tpx__conv_num_entries; i++)
    if (strcmp(tpx__conv_entries[i].model_type, model_type) == 0)
      json = tpx__conv_entries[i].json;
  if (json == NULL)
    return TPX_OK;
  json_error_t jerr;
  json_t *root = json_loads(json, 0, &jerr);
  if (root == NULL)
    return tpx_error_set(err, TPX_INTERNAL,
                         "conversion table, model type '%s': %s", model_type,
                         jerr.text);
  tpx__conv *c = calloc(1, sizeof *c);
  json_t *rules = json_object_get(root, "r");
  tpx_status st = TPX_OK;
  if (c != NULL) {
    c->rules = calloc(json_array_size(rules) + 1, sizeof *c->rules);
    c->buffers = strings(json_object_get(root, "b"), &c->num_buffers);
    c->skipped = (size_t)json_integer_value(json_object_get(root, "x"));
  }
  if (c == NULL || c->rules == NULL || c->buffers == NULL)
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t i = 0; st == TPX_OK && i < json_array_size(rules); i++)
    st = load_rule(&c->rules[c->num_rules++], json_array_get(rules, i),
                   model_type, err);
  json_decref(root);
  if (st != TPX_OK) {
    tpx__conv_free(c);
    return st;
  }
  *out = c;
  return TPX_OK;
}

/* First match of source `s` in name whose lookahead holds: 1 with the
 * groups in m[0..n), 0 when none. */
static int search(const conv_source *s, const char *name, regmatch_t *m,
                  size_t n) {
  size_t off = 0, len = strlen(name);
  while (off <= len) {
    if (regexec(&s->re, name + off, n, m, off ? REG_NOTBOL : 0) != 0)
      return 0;
    for (size_t k = 0; k < n; k++)
      if (m[k].rm_so >= 0) {
        m[k].rm_so += (regoff_t)off;
        m[k].rm_eo += (regoff_t)off;
      }
    unsigned char next = (unsigned char)name[m[0].rm_eo];
    int bad = s->look == 'w'   ? (isalnum(next) || next == '_')
              : s->look == '_' ? next == '_'
                               : 0;
    if (!bad)
      return 1;
    off = (size_t)m[0].rm_so + 1;
  }
  return 0;
}

/* name with m[0] replaced by target (its "\1" the first group) into buf. */
static int substitute(const char *name, const regmatch_t *m, const char *target,
                      char *buf, size_t size) {
  size_t at = 0;
#define PUT(p, n)                                                              \
  do {                                                                         \
    if (at + (n) + 1 > size)                                                   \
      return -1;                                                               \
    memcpy(buf + at, (p), (n));                                                \
    at += (n);                                                                 \
  } while (0)
  PUT(name, (size_t)m[0].rm_so);
  for (const char *t = target; *t; t++) {
    if (t[0] == '\\' && t[1] == '1') {
      if (m[1].rm_so >= 0)
        PUT(name + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so));
      t++;
    } else {
      PUT(t, 1);
    }
  }
  const char *rest = name + m[0].rm_eo;
  PUT(rest, strlen(rest));
#undef PUT
  buf[at] = '\0';
  return 1;
}

int tpx__conv_rename(const tpx__conv *c, const char *name, char *buf,
                     size_t size) {
  size_t n = strlen(name);
  if (n + 1 > size)
    return -1;
  memcpy(buf, name, n + 1);
  if (c == NULL)
    return 0;
  char tmp[1024];
  int changed = 0;
  for (size_t i = 0; i < c->num_rules; i++) {
    const conv_rule *r = &c->rules[i];
    if (r->converter || r->num_targets == 0)
      continue;
    for (size_t k = 0; k < r->num_src; k++) {
      regmatch_t m[2];
      if (!search(&r->src[k], buf, m, 2))
        continue;
      if (substitute(buf, m, r->targets[0], tmp, sizeof tmp) < 0 ||
          strlen(tmp) + 1 > size)
        return -1;
      changed |= strcmp(tmp, buf) != 0;
      strcpy(buf, tmp);
      break;
    }
  }
  return changed;
}

int tpx__conv_convert(const tpx__conv *c, const char *name, size_t target,
                      char *buf, size_t size, int *rule, int *source,
                      int64_t *index) {
  for (size_t i = 0; c != NULL && i < c->num_rules; i++) {
    const conv_rule *r = &c->rules[i];
    if (!r->converter || target >= r->num_targets)
      continue;
    for (size_t k = 0; k < r->num_src; k++) {
      regmatch_t m[2];
      if (!search(&r->src[k], name, m, 2))
        continue;
      *rule = (int)i;
      *source = r->src[k].position;
      *index = m[1].rm_so >= 0 && m[1].rm_eo > m[1].rm_so
                   ? strtoll(name + m[1].rm_so, NULL, 10)
                   : -1;
      return substitute(name, m, r->targets[target], buf, size);
    }
  }
  return 0;
}

size_t tpx__conv_num_targets(const tpx__conv *c, int rule) {
  return c->rules[rule].num_targets;
}

size_t tpx__conv_num_sources(const tpx__conv *c, int rule) {
  return c->rules[rule].num_src;
}

int tpx__conv_op(const tpx__conv *c, int rule, size_t k, int *dim) {
  const conv_rule *r = &c->rules[rule];
  if (k >= r->num_ops)
    return 0;
  *dim = r->dims[k];
  return r->ops[k];
}

/* A config attribute as a positive integer (the config's own key, else
 * text_config's), or -1. */
static int64_t config_int(json_t *config, const char *attr) {
  json_t *v = json_object_get(config, attr);
  if (v == NULL)
    v = json_object_get(json_object_get(config, "text_config"), attr);
  if (json_is_integer(v))
    return json_integer_value(v);
  if (json_is_real(v) &&
      json_real_value(v) == (double)(int64_t)json_real_value(v))
    return (int64_t)json_real_value(v);
  return -1;
}

int64_t tpx__conv_split_size(const tpx__conv *c, int rule, size_t target,
                             json_t *config) {
  json_t *z = json_array_get(c->rules[rule].sizes, target);
  if (json_is_string(z))
    return strcmp(json_string_value(z), "rest") == 0 ? -2 : -1;
  if (!json_is_array(z) || json_array_size(z) == 0)
    return -1;
  int64_t total = 0;
  for (size_t t = 0; t < json_array_size(z); t++) {
    json_t *term = json_array_get(z, t);
    int64_t prod = json_integer_value(json_array_get(term, 0));
    for (size_t k = 1; k < json_array_size(term); k++) {
      int64_t v =
          config_int(config, json_string_value(json_array_get(term, k)));
      if (v <= 0 || prod > INT64_MAX / v)
        return -1;
      prod *= v;
    }
    if (prod <= 0 || total > INT64_MAX - prod)
      return -1;
    total += prod;
  }
  return total;
}

/* Atom-wise match; '*' in the pattern is one atom. */
static int atoms_match(const char *pat, const char *name) {
  for (;;) {
    const char *pe = strchr(pat, '.'), *ne = strchr(name, '.');
    size_t pl = pe ? (size_t)(pe - pat) : strlen(pat);
    size_t nl = ne ? (size_t)(ne - name) : strlen(name);
    if (!(pl == 1 && pat[0] == '*' && nl > 0) &&
        (pl != nl || memcmp(pat, name, pl) != 0))
      return 0;
    if (!pe || !ne)
      return !pe && !ne;
    pat = pe + 1;
    name = ne + 1;
  }
}

int tpx__conv_is_buffer(const tpx__conv *c, const char *name) {
  for (size_t i = 0; c != NULL && i < c->num_buffers; i++)
    if (atoms_match(c->buffers[i], name))
      return 1;
  return 0;
}

size_t tpx__conv_num_skipped(const tpx__conv *c) { return c ? c->skipped : 0; }
