/* fqn.c — dotted-name helpers (base/fqn.h): last atom, digit atoms, bare
 * architecture names, and FQNs generalized over layer indices. Pure string
 * work; no model knowledge. */
#include "base/fqn.h"

#include <stdlib.h>
#include <string.h>

int tpx__fqn_is_digits(const char *s) {
  if (!*s)
    return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return 0;
  return 1;
}

const char *tpx__fqn_last_atom(const char *fqn) {
  const char *dot = strrchr(fqn, '.');
  return dot ? dot + 1 : fqn;
}

const char *tpx__fqn_bare_arch(const char *arch) {
  return tpx__fqn_last_atom(arch);
}

/* The one walk behind generalize and template: nums == NULL replaces every
 * digit atom; otherwise only those it can parse and store. */
static int rewrite(const char *fqn, char *out, size_t size, char mark,
                   int64_t *nums, int max_nums, size_t *len) {
  int n = 0;
  size_t o = 0;
  const char *p = fqn;
  while (*p && o + 2 < size) {
    const char *q = p;
    int digits = 1;
    while (*q && *q != '.') {
      if (*q < '0' || *q > '9')
        digits = 0;
      q++;
    }
    if (q == p)
      digits = 0;
    if (digits && nums && (n >= max_nums || q - p >= 18))
      digits = 0;
    if (digits) {
      if (nums)
        nums[n] = strtoll(p, NULL, 10);
      n++;
      out[o++] = mark;
    } else {
      size_t alen = (size_t)(q - p);
      if (o + alen + 2 >= size)
        alen = size - o - 2;
      memcpy(out + o, p, alen);
      o += alen;
    }
    if (*q == '.' && o + 1 < size)
      out[o++] = '.';
    p = *q ? q + 1 : q;
  }
  if (size)
    out[o] = '\0';
  *len = o;
  return n;
}

size_t tpx__fqn_generalize(const char *fqn, char *out, size_t size) {
  size_t len = 0;
  if (size == 0)
    return 0;
  rewrite(fqn, out, size, '*', NULL, 0, &len);
  return len;
}

char *tpx__fqn_generalize_dup(const char *fqn) {
  size_t size = strlen(fqn) + 3; /* room enough never to truncate */
  char *g = malloc(size);
  if (g)
    tpx__fqn_generalize(fqn, g, size);
  return g;
}

int tpx__fqn_template(const char *fqn, char *out, size_t size, char mark,
                      int64_t *nums, int max_nums) {
  size_t len = 0;
  if (size == 0)
    return 0;
  return rewrite(fqn, out, size, mark, nums, max_nums, &len);
}
