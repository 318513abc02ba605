/* placement.c — DTensor-like placement values: constructors, literal
 * equality, dim normalisation and the text form ("shard(-1)", ...).
 *
 * Not the layout arithmetic: see layout.c for which slice a rank holds. */
#include "tpx/placement.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tpx_placement tpx_placement_replicate(void) {
  tpx_placement p = {TPX_REPLICATE, 0, TPX_REDUCE_SUM, 1};
  return p;
}

tpx_placement tpx_placement_shard(int32_t dim) {
  tpx_placement p = {TPX_SHARD, dim, TPX_REDUCE_SUM, 1};
  return p;
}

tpx_placement tpx_placement_partial(tpx_reduce_op op) {
  tpx_placement p = {TPX_PARTIAL, 0, op, 1};
  return p;
}

tpx_placement tpx_placement_strided_shard(int32_t dim, int32_t split_factor) {
  tpx_placement p = {TPX_STRIDED_SHARD, dim, TPX_REDUCE_SUM, split_factor};
  return p;
}

tpx_placement tpx_placement_joined(void) {
  tpx_placement p = {TPX_JOINED, 0, TPX_REDUCE_SUM, 1};
  return p;
}

/* Only the fields that matter for the kind are compared, so a zeroed
 * Replicate equals tpx_placement_replicate() whatever the spare fields say. */
int tpx_placement_equal(tpx_placement a, tpx_placement b) {
  if (a.kind != b.kind)
    return 0;
  switch (a.kind) {
  case TPX_SHARD: return a.dim == b.dim;
  case TPX_STRIDED_SHARD:
    return a.dim == b.dim && a.split_factor == b.split_factor;
  case TPX_PARTIAL: return a.op == b.op;
  case TPX_REPLICATE:
  default: return 1;
  }
}

tpx_status tpx_placement_normalize(tpx_placement p, int ndim,
                                   tpx_placement *out, tpx_error *err) {
  if (out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_placement_normalize: out is NULL");
  if (p.kind == TPX_SHARD || p.kind == TPX_STRIDED_SHARD) {
    if (ndim < 0 || p.dim < -ndim || p.dim >= ndim) {
      char buf[64];
      tpx_placement_format(p, buf, sizeof buf);
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "placement %s: dim %d is out of range for a "
                           "%d-dim tensor (valid: %d..%d)",
                           buf, (int)p.dim, ndim, -ndim, ndim - 1);
    }
    if (p.dim < 0)
      p.dim += ndim;
  }
  *out = p;
  return TPX_OK;
}

const char *tpx_reduce_op_name(tpx_reduce_op op) {
  switch (op) {
  case TPX_REDUCE_SUM: return "sum";
  case TPX_REDUCE_AVG: return "avg";
  case TPX_REDUCE_MAX: return "max";
  case TPX_REDUCE_MIN: return "min";
  default: return "unknown";
  }
}

int tpx_placement_format(tpx_placement p, char *buf, size_t size) {
  char dummy[1];
  if (buf == NULL || size == 0) {
    buf = dummy;
    size = 1;
  }
  switch (p.kind) {
  case TPX_REPLICATE: return snprintf(buf, size, "replicate");
  case TPX_SHARD: return snprintf(buf, size, "shard(%d)", (int)p.dim);
  case TPX_STRIDED_SHARD:
    return snprintf(buf, size, "strided_shard(%d,%d)", (int)p.dim,
                    (int)p.split_factor);
  case TPX_JOINED: return snprintf(buf, size, "joined");
  case TPX_PARTIAL:
    if (p.op == TPX_REDUCE_SUM)
      return snprintf(buf, size, "partial");
    return snprintf(buf, size, "partial(%s)", tpx_reduce_op_name(p.op));
  default: return snprintf(buf, size, "invalid(%d)", (int)p.kind);
  }
}

/* ---- parsing ----------------------------------------------------------- */

typedef struct cursor {
  const char *s;
} cursor;

static void skip_ws(cursor *c) {
  while (isspace((unsigned char)*c->s)) c->s++;
}

/* Match a keyword case-insensitively, not followed by an identifier char. */
static int eat_word(cursor *c, const char *word) {
  size_t n = strlen(word);
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)c->s[i]) != word[i])
      return 0;
  unsigned char next = (unsigned char)c->s[n];
  if (isalnum(next) || next == '_')
    return 0;
  c->s += n;
  return 1;
}

static int eat_char(cursor *c, char ch) {
  skip_ws(c);
  if (*c->s != ch)
    return 0;
  c->s++;
  return 1;
}

static int eat_int32(cursor *c, int32_t *out) {
  skip_ws(c);
  const char *p = c->s;
  if (*p == '+' || *p == '-')
    p++;
  if (!isdigit((unsigned char)*p))
    return 0;
  errno = 0;
  char *end;
  long v = strtol(c->s, &end, 10);
  if (errno != 0 || v < INT32_MIN || v > INT32_MAX)
    return 0;
  c->s = end;
  *out = (int32_t)v;
  return 1;
}

static tpx_status parse_error(const char *text, const char *why,
                              tpx_error *err) {
  return tpx_error_set(err, TPX_PARSE,
                       "cannot parse placement \"%.200s\": %s (expected "
                       "\"replicate\", \"shard(D)\", \"partial\", "
                       "\"partial(sum|avg|max|min)\", "
                       "\"strided_shard(D,K)\" or \"joined\")",
                       text, why);
}

tpx_status tpx_placement_parse(const char *text, tpx_placement *out,
                               tpx_error *err) {
  if (text == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_placement_parse: %s is NULL",
                         text == NULL ? "text" : "out");
  cursor c = {text};
  tpx_placement p;
  skip_ws(&c);
  if (eat_word(&c, "replicate")) {
    p = tpx_placement_replicate();
  } else if (eat_word(&c, "shard")) {
    int32_t d;
    if (!eat_char(&c, '(') || !eat_int32(&c, &d) || !eat_char(&c, ')'))
      return parse_error(text, "shard needs one integer dim", err);
    p = tpx_placement_shard(d);
  } else if (eat_word(&c, "strided_shard")) {
    int32_t d, k;
    if (!eat_char(&c, '(') || !eat_int32(&c, &d) || !eat_char(&c, ',') ||
        !eat_int32(&c, &k) || !eat_char(&c, ')'))
      return parse_error(text, "strided_shard needs a dim and a split factor",
                         err);
    if (k < 1)
      return parse_error(text, "the split factor must be >= 1", err);
    p = tpx_placement_strided_shard(d, k);
  } else if (eat_word(&c, "joined")) {
    p = tpx_placement_joined();
  } else if (eat_word(&c, "partial")) {
    p = tpx_placement_partial(TPX_REDUCE_SUM);
    if (eat_char(&c, '(')) {
      static const tpx_reduce_op ops[] = {TPX_REDUCE_SUM, TPX_REDUCE_AVG,
                                          TPX_REDUCE_MAX, TPX_REDUCE_MIN};
      int found = 0;
      skip_ws(&c);
      for (size_t i = 0; i < sizeof ops / sizeof ops[0] && !found; i++)
        if (eat_word(&c, tpx_reduce_op_name(ops[i]))) {
          p.op = ops[i];
          found = 1;
        }
      if (!found || !eat_char(&c, ')'))
        return parse_error(text, "unknown reduce op", err);
    }
  } else {
    return parse_error(text, "unknown placement kind", err);
  }
  skip_ws(&c);
  if (*c.s != '\0')
    return parse_error(text, "trailing characters", err);
  *out = p;
  return TPX_OK;
}
