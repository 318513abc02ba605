/* st_members.c — walking the members of a safetensors header's top-level
 * object by shape alone (model/st_members.h). Not a JSON parser: values
 * are handed over as byte ranges, to be parsed one by one. */
#include "model/st_members.h"

static int is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const char *t, size_t len, size_t p) {
  while (p < len && is_ws(t[p])) p++;
  return p;
}

/* t[p] is '"': the index just past the closing quote, or 0 when the string
 * does not end (or holds a raw control character, which JSON forbids).
 * *plain is cleared when the string holds an escape or a non-ASCII byte. */
static size_t skip_string(const char *t, size_t len, size_t p, int *plain) {
  for (p++; p < len; p++) {
    unsigned char c = (unsigned char)t[p];
    if (c == '"')
      return p + 1;
    if (c < 0x20)
      return 0;
    if (c == '\\') {
      *plain = 0;
      p++;
    } else if (c >= 0x7f) {
      *plain = 0;
    }
  }
  return 0;
}

/* A value starting at t[p]: the index just past it, or 0. Brackets are
 * counted, not matched by kind: a value the count accepts is parsed
 * afterwards, which names any fault inside it. */
static size_t skip_value(const char *t, size_t len, size_t p) {
  int plain = 1;
  if (p >= len)
    return 0;
  if (t[p] == '"')
    return skip_string(t, len, p, &plain);
  if (t[p] == '{' || t[p] == '[') {
    size_t depth = 0;
    while (p < len) {
      char c = t[p];
      if (c == '"') {
        p = skip_string(t, len, p, &plain);
        if (p == 0)
          return 0;
        continue;
      }
      if (c == '{' || c == '[')
        depth++;
      else if (c == '}' || c == ']') {
        if (--depth == 0)
          return p + 1;
      }
      p++;
    }
    return 0;
  }
  size_t start = p;
  while (p < len && !is_ws(t[p]) && t[p] != ',' && t[p] != '}' && t[p] != ']' &&
         t[p] != '"' && t[p] != '{' && t[p] != '[')
    p++;
  return p > start ? p : 0;
}

/* The object's end at t[p] ('}'): 0 when only whitespace follows, else
 * -1. */
static int end_of_object(const char *t, size_t len, size_t p, size_t *pos) {
  p = skip_ws(t, len, p + 1);
  *pos = p;
  return p == len ? 0 : -1;
}

int tpx__st_next_member(const char *text, size_t len, size_t *pos,
                        tpx__st_member *m) {
  size_t p = skip_ws(text, len, *pos);
  if (*pos == 0) {
    if (p >= len || text[p] != '{')
      return -1;
    p = skip_ws(text, len, p + 1);
    if (p < len && text[p] == '}')
      return end_of_object(text, len, p, pos);
  } else {
    if (p < len && text[p] == '}')
      return end_of_object(text, len, p, pos);
    if (p >= len || text[p] != ',')
      return -1;
    p = skip_ws(text, len, p + 1);
  }
  if (p >= len || text[p] != '"')
    return -1;
  m->plain = 1;
  size_t end = skip_string(text, len, p, &m->plain);
  if (end == 0)
    return -1;
  m->key = p + 1;
  m->key_len = end - p - 2;
  p = skip_ws(text, len, end);
  if (p >= len || text[p] != ':')
    return -1;
  p = skip_ws(text, len, p + 1);
  end = skip_value(text, len, p);
  if (end == 0)
    return -1;
  m->value = p;
  m->value_len = end - p;
  *pos = end;
  return 1;
}
