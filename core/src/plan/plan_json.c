/* plan_json.c — the tpx-plan/1 text form (docs/PLAN_FORMAT.md): reading
 * (missing fields take torch's defaults, anything unknown or malformed is an
 * error naming the entry index, module key and offending value; nothing is
 * half-built) and writing the normalized form (every field of the style,
 * "optional" only when true).
 *
 * Not the HF tp-plan reader (hf_style.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/file.h"
#include "base/grow.h"
#include "plan/plan_internal.h"
#include "plan/style_internal.h"
#include "tpx/plan.h"

#define FORMAT_NAME "tpx-plan/1"

static const char *json_type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  case JSON_NULL: return "null";
  default: return "an unknown JSON value";
  }
}

/* ---- reading ---- */

/* One layout from a JSON string; null handled by callers. */
static tpx_status parse_layout(const json_t *v, const char *field, int idx,
                               tpx_placement *out, tpx_error *err) {
  if (!json_is_string(v))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s[%d]: expected a layout string (\"replicate\", "
                         "\"shard(N)\", \"partial\"), got %s",
                         field, idx, json_type_name(v));
  const char *text = json_string_value(v);
  tpx_error pe = {0};
  if (tpx_placement_parse(text, out, &pe) != TPX_OK ||
      out->kind == TPX_STRIDED_SHARD || out->kind == TPX_JOINED)
    return tpx_error_set(err, TPX_PARSE,
                         "%s[%d]: layout '%s' does not parse (expected "
                         "\"replicate\", \"shard(N)\" or \"partial\")",
                         field, idx, text);
  return TPX_OK;
}

/* A layout list: null -> not given (-1); a single string -> 1 item (torch
 * wraps a lone Placement); an array of strings (or nulls when allowed). */
static tpx_status parse_layout_list(const json_t *v, const char *field,
                                    int allow_null_items, tpx_layout_list *out,
                                    tpx_error *err) {
  memset(out, 0, sizeof *out);
  if (json_is_null(v)) {
    out->count = -1;
    return TPX_OK;
  }
  if (json_is_string(v)) {
    out->count = 1;
    return parse_layout(v, field, 0, &out->items[0], err);
  }
  if (!json_is_array(v))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: expected a list of layouts, got %s", field,
                         json_type_name(v));
  size_t n = json_array_size(v);
  if (n > TPX_STYLE_MAX_LAYOUTS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "%s: %zu layouts (at most %d)",
                         field, n, TPX_STYLE_MAX_LAYOUTS);
  out->count = (int32_t)n;
  for (size_t i = 0; i < n; i++) {
    const json_t *it = json_array_get(v, i);
    if (json_is_null(it)) {
      if (!allow_null_items)
        return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                             "%s[%zu]: null layout not allowed for this style",
                             field, i);
      out->is_none[i] = 1;
      continue;
    }
    tpx_status st = parse_layout(it, field, (int)i, &out->items[i], err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

static tpx_status parse_kwargs(const json_t *v, const char *field,
                               tpx_kwarg_layout_list *out, tpx_error *err) {
  memset(out, 0, sizeof *out);
  if (json_is_null(v))
    return TPX_OK; /* torch: None -> {} */
  if (!json_is_object(v))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: expected an object {kwarg: layout}, got %s",
                         field, json_type_name(v));
  if (json_object_size(v) > TPX_STYLE_MAX_KWARGS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "%s: %zu kwargs (at most %d)",
                         field, json_object_size(v), TPX_STYLE_MAX_KWARGS);
  const char *name;
  json_t *lv;
  json_object_foreach((json_t *)v, name, lv) {
    size_t n = strlen(name);
    if (n == 0 || n >= TPX_STYLE_KWARG_NAME_SIZE)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: kwarg name '%s' is empty or longer than %d",
                           field, name, TPX_STYLE_KWARG_NAME_SIZE - 1);
    tpx_kwarg_layout *k = &out->items[out->count];
    memcpy(k->name, name, n + 1);
    if (json_is_null(lv)) {
      k->is_none = 1;
    } else {
      tpx_status st = parse_layout(lv, field, (int)out->count, &k->layout, err);
      if (st != TPX_OK)
        return st;
    }
    out->count++;
  }
  return TPX_OK;
}

static tpx_status parse_bool(const json_t *v, const char *field, int *out,
                             tpx_error *err) {
  if (!json_is_boolean(v))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: expected true or false, got %s", field,
                         json_type_name(v));
  *out = json_is_true(v);
  return TPX_OK;
}

/* Which fields each family accepts (besides module, style, optional). */
static int field_allowed(tpx_style_family f, const char *k) {
  if (strcmp(k, "use_local_output") == 0)
    return 1;
  switch (f) {
  case TPX_STYLE_FAMILY_COLWISE:
  case TPX_STYLE_FAMILY_ROWWISE:
    return !strcmp(k, "input_layouts") || !strcmp(k, "output_layouts");
  case TPX_STYLE_FAMILY_SEQUENCE: return !strcmp(k, "sequence_dim");
  case TPX_STYLE_FAMILY_PREPARE_INPUT:
    return !strcmp(k, "input_layouts") || !strcmp(k, "desired_input_layouts") ||
           !strcmp(k, "input_kwarg_layouts") ||
           !strcmp(k, "desired_input_kwarg_layouts");
  case TPX_STYLE_FAMILY_PREPARE_OUTPUT:
    return !strcmp(k, "output_layouts") || !strcmp(k, "desired_output_layouts");
  default: return 0;
  }
}

/* Parse the style fields of one entry object (the style kind is known).
 * Errors name the field; the caller adds entry index and key. */
static tpx_status parse_style(const json_t *obj, tpx_style_kind kind,
                              tpx_style *out, int *optional, tpx_error *err) {
  tpx_style_family fam = tpx__style_family_of(kind);
  tpx_style s = tpx_style_default(kind);
  int allow_null_items = fam == TPX_STYLE_FAMILY_PREPARE_INPUT ||
                         fam == TPX_STYLE_FAMILY_PREPARE_OUTPUT;
  const char *k;
  json_t *v;
  tpx_status st = TPX_OK;
  *optional = 0;
  json_object_foreach((json_t *)obj, k, v) {
    if (!strcmp(k, "module") || !strcmp(k, "style"))
      continue;
    if (!strcmp(k, "optional")) {
      st = parse_bool(v, "optional", optional, err);
    } else if (!field_allowed(fam, k)) {
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "unknown field '%s' for style '%s'", k,
                           tpx_style_kind_name(kind));
    } else if (!strcmp(k, "use_local_output")) {
      st = parse_bool(v, k, &s.use_local_output, err);
    } else if (!strcmp(k, "sequence_dim")) {
      if (!json_is_integer(v))
        return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                             "sequence_dim: expected an integer, got %s",
                             json_type_name(v));
      json_int_t d = json_integer_value(v);
      if (d < -64 || d > 64)
        return tpx_error_set(err, TPX_OUT_OF_RANGE,
                             "sequence_dim: %lld out of range [-64, 64]",
                             (long long)d);
      s.sequence_dim = (int32_t)d;
    } else if (!strcmp(k, "input_layouts")) {
      st = parse_layout_list(v, k, allow_null_items, &s.input_layouts, err);
    } else if (!strcmp(k, "output_layouts")) {
      st = parse_layout_list(v, k, allow_null_items, &s.output_layouts, err);
    } else if (!strcmp(k, "desired_input_layouts")) {
      st = parse_layout_list(v, k, 1, &s.desired_input_layouts, err);
    } else if (!strcmp(k, "desired_output_layouts")) {
      st = parse_layout_list(v, k, 1, &s.desired_output_layouts, err);
    } else if (!strcmp(k, "input_kwarg_layouts")) {
      st = parse_kwargs(v, k, &s.input_kwarg_layouts, err);
    } else if (!strcmp(k, "desired_input_kwarg_layouts")) {
      st = parse_kwargs(v, k, &s.desired_input_kwarg_layouts, err);
    }
    if (st != TPX_OK)
      return st;
  }
  st = tpx_style_validate(&s, err);
  if (st != TPX_OK)
    return st;
  tpx__style_canonical(&s, out);
  return TPX_OK;
}

static tpx_status parse_entry(tpx_plan *plan, const json_t *ent, size_t i,
                              tpx_error *err) {
  if (!json_is_object(ent))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "entry %zu: expected an object, got %s", i,
                         json_type_name(ent));
  const json_t *m = json_object_get(ent, "module");
  if (!m)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "entry %zu: missing \"module\"", i);
  if (!json_is_string(m))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "entry %zu: \"module\" must be a string, got %s", i,
                         json_type_name(m));
  const char *key = json_string_value(m);
  tpx_error e = {0};
  if (tpx__plan_key_validate(key, &e) != TPX_OK)
    return tpx_error_set(err, e.status, "entry %zu (module '%s'): %s", i, key,
                         e.message);
  const json_t *sv = json_object_get(ent, "style");
  if (!sv)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "entry %zu (module '%s'): missing \"style\"", i, key);
  if (!json_is_string(sv))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "entry %zu (module '%s'): \"style\" must be a "
                         "string, got %s",
                         i, key, json_type_name(sv));
  tpx_style_kind kind;
  if (tpx_style_kind_parse(json_string_value(sv), &kind, &e) != TPX_OK)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "entry %zu (module '%s'): %s", i, key, e.message);
  tpx_style canon;
  int optional = 0;
  if (parse_style(ent, kind, &canon, &optional, &e) != TPX_OK)
    return tpx_error_set(err, e.status, "entry %zu (module '%s', style %s): %s",
                         i, key, tpx_style_kind_name(kind), e.message);
  int64_t prev = tpx_plan_find(plan, key);
  if (prev >= 0)
    return tpx_error_set(err, TPX_ALREADY_EXISTS,
                         "entry %zu (module '%s'): duplicate key (already "
                         "entry %lld; a document may name a key once)",
                         i, key, (long long)prev);
  return tpx__plan_set_nocheck(plan, key, &canon, optional, NULL, err);
}

static tpx_status parse_doc(const char *text, size_t len, tpx_plan **out,
                            tpx_error *err) {
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return tpx_error_set(err, TPX_PARSE,
                         "invalid JSON at line %d column %d: %s", je.line,
                         je.column, je.text);
  tpx_status st = TPX_OK;
  tpx_plan *plan = NULL;
  if (!json_is_object(root)) {
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "a tpx-plan/1 document must be a JSON object, got %s",
                       json_type_name(root));
    goto done;
  }
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    if (strcmp(k, "format") && strcmp(k, "entries")) {
      st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "unknown top-level field '%s' (expected \"format\" "
                         "and \"entries\")",
                         k);
      goto done;
    }
  }
  const json_t *fmt = json_object_get(root, "format");
  if (!fmt || !json_is_string(fmt) ||
      strcmp(json_string_value(fmt), FORMAT_NAME) != 0) {
    st = tpx_error_set(err, TPX_PARSE,
                       "\"format\" must be \"" FORMAT_NAME "\", got %s%s%s",
                       fmt && json_is_string(fmt) ? "'" : "",
                       !fmt                  ? "nothing"
                       : json_is_string(fmt) ? json_string_value(fmt)
                                             : json_type_name(fmt),
                       fmt && json_is_string(fmt) ? "'" : "");
    goto done;
  }
  const json_t *ents = json_object_get(root, "entries");
  if (!ents || !json_is_array(ents)) {
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "\"entries\" must be an array, got %s",
                       ents ? json_type_name(ents) : "nothing");
    goto done;
  }
  st = tpx_plan_create(&plan, err);
  if (st != TPX_OK)
    goto done;
  for (size_t i = 0; i < json_array_size(ents); i++) {
    st = parse_entry(plan, json_array_get(ents, i), i, err);
    if (st != TPX_OK)
      goto done;
  }
done:
  json_decref(root);
  if (st != TPX_OK) {
    tpx_plan_destroy(plan);
    plan = NULL;
  }
  *out = plan;
  return st;
}

tpx_status tpx_plan_from_json(const char *text, size_t len, const char *source,
                              tpx_plan **out, tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_from_json: NULL out");
  *out = NULL;
  if (!text)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_from_json: NULL text");
  tpx_error e = {0};
  tpx_status st = parse_doc(text, len, out, &e);
  if (st != TPX_OK)
    return tpx_error_set(err, st, "%s: %s", source ? source : "plan",
                         e.message);
  return TPX_OK;
}

tpx_status tpx_plan_load(const char *path, tpx_plan **out, tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "tpx_plan_load: NULL out");
  *out = NULL;
  if (!path)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "tpx_plan_load: NULL path");
  char *buf;
  size_t len;
  /* no size limit of its own: a caller that wants one checks first */
  tpx_status st = tpx__file_read(path, SIZE_MAX - 1, &buf, &len, err);
  if (st != TPX_OK)
    return st;
  st = tpx_plan_from_json(buf, len, path, out, err);
  free(buf);
  return st;
}

/* ---- writing ----
 *
 * Written by hand, not through jansson objects: plans can hold hundreds of
 * thousands of entries and building then dumping a jansson tree costs ~10x
 * more. The layout is exactly what json_dumps(JSON_INDENT(n) |
 * JSON_PRESERVE_ORDER) prints (or JSON_COMPACT for indent 0). */

typedef struct sbuf {
  char *data;
  size_t len, cap;
  int oom;
  int indent; /* 0 = compact */
} sbuf;

static void sb_grow(sbuf *b, size_t need) {
  if (b->oom)
    return;
  if (TPX_GROW(b->data, b->cap, b->len + need + 1, 4096))
    b->oom = 1;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
  sb_grow(b, n);
  if (b->oom)
    return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* Newline plus indentation for nesting `depth` (nothing when compact). */
static void sb_nl(sbuf *b, int depth) {
  if (!b->indent)
    return;
  sb_grow(b, 1 + (size_t)(b->indent * depth));
  if (b->oom)
    return;
  b->data[b->len++] = '\n';
  for (int i = 0; i < b->indent * depth; i++) b->data[b->len++] = ' ';
  b->data[b->len] = '\0';
}

/* A JSON string with jansson's escaping (", \, control characters; UTF-8
 * passes through). */
static void sb_json_str(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  const char *run = s;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c != '"' && c != '\\' && c >= 0x20)
      continue;
    sb_put(b, run, (size_t)(s - run));
    char esc[8];
    switch (c) {
    case '"': sb_put(b, "\\\"", 2); break;
    case '\\': sb_put(b, "\\\\", 2); break;
    case '\b': sb_put(b, "\\b", 2); break;
    case '\f': sb_put(b, "\\f", 2); break;
    case '\n': sb_put(b, "\\n", 2); break;
    case '\r': sb_put(b, "\\r", 2); break;
    case '\t': sb_put(b, "\\t", 2); break;
    default:
      snprintf(esc, sizeof esc, "\\u%04X", (unsigned)c);
      sb_put(b, esc, 6);
    }
    run = s + 1;
  }
  sb_put(b, run, (size_t)(s - run));
  sb_put(b, "\"", 1);
}

/* `"key": ` at nesting depth; `first` says whether a comma is needed. */
static void sb_key(sbuf *b, int depth, int *first, const char *key) {
  if (!*first)
    sb_put(b, ",", 1);
  *first = 0;
  sb_nl(b, depth);
  sb_json_str(b, key);
  if (b->indent)
    sb_put(b, ": ", 2);
  else
    sb_put(b, ":", 1);
}

static void sb_layout(sbuf *b, tpx_placement p, int is_none) {
  if (is_none) {
    sb_put(b, "null", 4);
    return;
  }
  char buf[64];
  tpx_placement_format(p, buf, sizeof buf);
  sb_json_str(b, buf);
}

static void sb_layout_list(sbuf *b, int depth, int *first, const char *key,
                           const tpx_layout_list *l) {
  sb_key(b, depth, first, key);
  if (l->count < 0) {
    sb_put(b, "null", 4);
    return;
  }
  if (l->count == 0) {
    sb_put(b, "[]", 2);
    return;
  }
  sb_put(b, "[", 1);
  for (int32_t i = 0; i < l->count; i++) {
    if (i)
      sb_put(b, ",", 1);
    sb_nl(b, depth + 1);
    sb_layout(b, l->items[i], l->is_none[i]);
  }
  sb_nl(b, depth);
  sb_put(b, "]", 1);
}

static void sb_kwargs(sbuf *b, int depth, int *first, const char *key,
                      const tpx_kwarg_layout_list *l) {
  sb_key(b, depth, first, key);
  if (l->count == 0) {
    sb_put(b, "{}", 2);
    return;
  }
  sb_put(b, "{", 1);
  int kfirst = 1;
  for (int32_t i = 0; i < l->count; i++) {
    sb_key(b, depth + 1, &kfirst, l->items[i].name);
    sb_layout(b, l->items[i].layout, l->items[i].is_none);
  }
  sb_nl(b, depth);
  sb_put(b, "}", 1);
}

static void sb_bool(sbuf *b, int depth, int *first, const char *key, int v) {
  sb_key(b, depth, first, key);
  sb_str(b, v ? "true" : "false");
}

/* One entry object at nesting `depth` (its braces' depth). */
static void sb_entry(sbuf *b, int depth, const char *key, const tpx_style *s,
                     int optional) {
  int first = 1, d = depth + 1;
  sb_put(b, "{", 1);
  sb_key(b, d, &first, "module");
  sb_json_str(b, key);
  sb_key(b, d, &first, "style");
  sb_json_str(b, tpx_style_kind_name(s->kind));
  switch (tpx__style_family_of(s->kind)) {
  case TPX_STYLE_FAMILY_COLWISE:
  case TPX_STYLE_FAMILY_ROWWISE:
    sb_layout_list(b, d, &first, "input_layouts", &s->input_layouts);
    sb_layout_list(b, d, &first, "output_layouts", &s->output_layouts);
    break;
  case TPX_STYLE_FAMILY_SEQUENCE: {
    char num[32];
    sb_key(b, d, &first, "sequence_dim");
    snprintf(num, sizeof num, "%d", (int)s->sequence_dim);
    sb_str(b, num);
    break;
  }
  case TPX_STYLE_FAMILY_PREPARE_INPUT:
    sb_layout_list(b, d, &first, "input_layouts", &s->input_layouts);
    sb_layout_list(b, d, &first, "desired_input_layouts",
                   &s->desired_input_layouts);
    sb_kwargs(b, d, &first, "input_kwarg_layouts", &s->input_kwarg_layouts);
    sb_kwargs(b, d, &first, "desired_input_kwarg_layouts",
              &s->desired_input_kwarg_layouts);
    break;
  case TPX_STYLE_FAMILY_PREPARE_OUTPUT:
    sb_layout_list(b, d, &first, "output_layouts", &s->output_layouts);
    sb_layout_list(b, d, &first, "desired_output_layouts",
                   &s->desired_output_layouts);
    break;
  default: break;
  }
  sb_bool(b, d, &first, "use_local_output", s->use_local_output);
  if (optional)
    sb_bool(b, d, &first, "optional", 1);
  sb_nl(b, depth);
  sb_put(b, "}", 1);
}

tpx_status tpx_plan_to_json(const tpx_plan *plan, int indent, char **out,
                            tpx_error *err) {
  if (!plan || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_plan_to_json: NULL argument");
  *out = NULL;
  if (indent < 0 || indent > 31)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_plan_to_json: indent %d not in 0..31", indent);
  sbuf b = {0};
  b.indent = indent;
  int first = 1;
  sb_put(&b, "{", 1);
  sb_key(&b, 1, &first, "format");
  sb_json_str(&b, FORMAT_NAME);
  sb_key(&b, 1, &first, "entries");
  size_t n = tpx_plan_size(plan);
  if (n == 0) {
    sb_put(&b, "[]", 2);
  } else {
    sb_put(&b, "[", 1);
    for (size_t i = 0; i < n && !b.oom; i++) {
      if (i)
        sb_put(&b, ",", 1);
      sb_nl(&b, 2);
      sb_entry(&b, 2, tpx__plan_key(plan, i), tpx__plan_style(plan, i),
               tpx__plan_optional(plan, i));
    }
    sb_nl(&b, 1);
    sb_put(&b, "]", 1);
  }
  sb_nl(&b, 0);
  sb_put(&b, "}", 1);
  if (indent)
    sb_put(&b, "\n", 1);
  if (b.oom) {
    free(b.data);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (plan JSON)");
  }
  *out = b.data;
  return TPX_OK;
}
