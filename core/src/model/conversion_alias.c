/* model/conversion_alias.c — the name alias rules that take a load's
 * checkpoint names to the module names transformers' renames give them
 * (conversion_load.h). A rule is derived from one renamed tensor: the
 * common trailing atoms of the old and new names dropped, layer and expert
 * indices as '*'. Dropping every common atom can make a rule too general:
 * axk1's `post_mlp_layernorm` -> `mlp.post_mlp_layernorm` would become
 * `model.layers.*` -> `model.layers.*.mlp` and move self_attn under mlp;
 * bailing_hybrid's `attention.A_log` -> `self_attn.forget_gate.A_log` would
 * clash with `attention` -> `self_attn`. So each rule keeps as few trailing
 * atoms as it can while renaming every tensor of the load it matches the
 * way the renames do (checked on the load's distinct names, indices as
 * '*'). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/conversion_load.h"
#include "model/strmap.h"

static tpx_status oom(tpx_error *err) {
  return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
}

static int atom_is_digits(const char *a, size_t n) {
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (a[i] < '0' || a[i] > '9')
      return 0;
  return 1;
}

/* "a.0.b" -> "a.*.b" into out; the digit atoms in order into idx (up to
 * 16), their count returned. */
static size_t generalise(const char *s, size_t len, char *out, int64_t *idx) {
  size_t n = 0, at = 0;
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && s[j] != '.') j++;
    if (atom_is_digits(s + i, j - i)) {
      if (n < 16)
        idx[n] = strtoll(s + i, NULL, 10);
      n++;
      out[at++] = '*';
    } else {
      memcpy(out + at, s + i, j - i);
      at += j - i;
    }
    if (j < len)
      out[at++] = '.';
    i = j + 1;
  }
  out[at] = '\0';
  return n;
}

static size_t count_atoms(const char *s) {
  size_t n = 1;
  for (; *s; s++) n += *s == '.';
  return n;
}

typedef struct alias_rule {
  char *from, *to;
} alias_rule;

static int by_depth(const void *a, const void *b) {
  size_t x = count_atoms(((const alias_rule *)a)->from);
  size_t y = count_atoms(((const alias_rule *)b)->from);
  return x < y   ? 1
         : x > y ? -1
                 : strcmp(((const alias_rule *)a)->from,
                          ((const alias_rule *)b)->from);
}

/* The alias rule that takes checkpoint name `old` to module name `new`:
 * up to `max_drop` of their common trailing atoms dropped (how many in
 * *dropped), digit atoms generalised to '*' when both hold the same
 * indices in the same order. -1 out of memory. */
static int derive_rule(const char *old, const char *new, size_t max_drop,
                       size_t *dropped, alias_rule *r) {
  size_t lo = strlen(old), ln = strlen(new), d = 0;
  /* drop common trailing atoms, keeping at least one atom on each side */
  while (d < max_drop) {
    const char *po = memchr(old, '.', lo) ? old + lo : NULL;
    size_t so = lo, sn = ln;
    while (so > 0 && old[so - 1] != '.') so--;
    while (sn > 0 && new[sn - 1] != '.') sn--;
    if (po == NULL || so == 0 || sn == 0 || lo - so != ln - sn ||
        memcmp(old + so, new + sn, lo - so) != 0)
      break;
    lo = so - 1;
    ln = sn - 1;
    d++;
  }
  *dropped = d;
  r->from = malloc(lo + 1);
  r->to = malloc(ln + 1);
  if (r->from == NULL || r->to == NULL)
    return -1;
  int64_t a[16], b[16];
  size_t na = generalise(old, lo, r->from, a);
  size_t nb = generalise(new, ln, r->to, b);
  if (na != nb || na > 16 || memcmp(a, b, na * sizeof *a) != 0) {
    memcpy(r->from, old, lo);
    r->from[lo] = '\0';
    memcpy(r->to, new, ln);
    r->to[ln] = '\0';
  }
  return 0;
}

static size_t atom_len(const char *s) {
  const char *d = strchr(s, '.');
  return d ? (size_t)(d - s) : strlen(s);
}

/* What the rule makes of `name` (as tpx_model_canonical_name applies it):
 * 1 and out filled when `from` matches its leading atoms, 0 when it does
 * not (or the result does not fit). */
static int apply_rule(const alias_rule *r, const char *name, char *out,
                      size_t size) {
  const char *cap[16];
  size_t cap_len[16], ncap = 0;
  const char *f = r->from, *s = name;
  for (;;) {
    size_t fl = atom_len(f), sl = atom_len(s);
    if (sl == 0)
      return 0;
    if (fl == 1 && f[0] == '*') {
      if (ncap == 16)
        return 0;
      cap[ncap] = s;
      cap_len[ncap++] = sl;
    } else if (fl != sl || memcmp(f, s, fl) != 0) {
      return 0;
    }
    f += fl;
    s += sl;
    if (*f == '\0' && (*s == '\0' || *s == '.'))
      break;
    if (*f == '\0' || *s == '\0')
      return 0;
    f++;
    s++;
  }
  size_t o = 0, k = 0;
  for (const char *t = r->to; *t;) {
    size_t tl = atom_len(t);
    const char *src = t;
    size_t sl = tl;
    if (tl == 1 && t[0] == '*' && k < ncap) {
      src = cap[k];
      sl = cap_len[k++];
    }
    if (o + sl + 2 >= size)
      return 0;
    memcpy(out + o, src, sl);
    o += sl;
    t += tl;
    if (*t == '.')
      out[o++] = *t++;
  }
  size_t rl = strlen(s);
  if (o + rl + 1 > size)
    return 0;
  memcpy(out + o, s, rl + 1);
  return 1;
}

/* The load's distinct names with indices as '*', and what the renames make
 * of each. */
typedef struct gname {
  char *old, *new;
} gname;

typedef struct alias_work {
  gname *g;
  size_t ng, capg;
  tpx__strmap seen; /* g[i].old -> i (keys borrowed from g) */
  alias_rule *rules;
  size_t nr, capr;
} alias_work;

/* 1 when the rule renames every distinct name it matches as the renames
 * do. */
static int rule_safe(const alias_work *w, const alias_rule *r) {
  char out[1024];
  for (size_t i = 0; i < w->ng; i++)
    if (apply_rule(r, w->g[i].old, out, sizeof out) &&
        strcmp(out, w->g[i].new) != 0)
      return 0;
  return 1;
}

/* Adds *r to the rules unless one with its `from` is there (then frees
 * it). -1 out of memory. */
static int push_rule(alias_work *w, alias_rule *r) {
  for (size_t i = 0; i < w->nr; i++)
    if (strcmp(w->rules[i].from, r->from) == 0) {
      free(r->from);
      free(r->to);
      return 0;
    }
  if (w->nr == w->capr) {
    size_t cap = w->capr ? 2 * w->capr : 16;
    void *p = realloc(w->rules, cap * sizeof *w->rules);
    if (p == NULL) {
      free(r->from);
      free(r->to);
      return -1;
    }
    w->rules = p;
    w->capr = cap;
  }
  w->rules[w->nr++] = *r;
  return 0;
}

/* Records tensor `name` renamed to `renamed` (== name when untouched): a
 * rename that changes the indices gets its own literal rule at once. */
static int note_name(alias_work *w, const char *name, const char *renamed) {
  size_t lo = strlen(name), ln = strlen(renamed);
  int64_t a[16], b[16];
  char *go = malloc(lo + 1), *gn = malloc(ln + 1);
  if (go == NULL || gn == NULL) {
    free(go);
    free(gn);
    return -1;
  }
  size_t na = generalise(name, lo, go, a), nb = generalise(renamed, ln, gn, b);
  if (na != nb || na > 16 || memcmp(a, b, na * sizeof *a) != 0) {
    free(go);
    free(gn);
    if (strcmp(name, renamed) == 0)
      return 0; /* untouched, more indices than are compared */
    alias_rule r;
    size_t d;
    if (derive_rule(name, renamed, SIZE_MAX, &d, &r) < 0) {
      free(r.from);
      free(r.to);
      return -1;
    }
    return push_rule(w, &r);
  }
  if (tpx__strmap_find(&w->seen, go, strlen(go), NULL)) {
    free(go);
    free(gn);
    return 0;
  }
  if (w->ng == w->capg) {
    size_t cap = w->capg ? 2 * w->capg : 64;
    void *p = realloc(w->g, cap * sizeof *w->g);
    if (p == NULL) {
      free(go);
      free(gn);
      return -1;
    }
    w->g = p;
    w->capg = cap;
  }
  w->g[w->ng].old = go;
  w->g[w->ng].new = gn;
  if (tpx__strmap_put(&w->seen, go, strlen(go), (int64_t)w->ng, NULL) < 0) {
    free(go);
    free(gn);
    return -1;
  }
  w->ng++;
  return 0;
}

/* The most general safe rule for distinct name i (the whole name when no
 * shorter one is safe). */
static int general_rule(alias_work *w, size_t i) {
  for (size_t drop = SIZE_MAX;;) {
    alias_rule r;
    size_t d;
    if (derive_rule(w->g[i].old, w->g[i].new, drop, &d, &r) < 0) {
      free(r.from);
      free(r.to);
      return -1;
    }
    if (d == 0 || rule_safe(w, &r))
      return push_rule(w, &r);
    free(r.from);
    free(r.to);
    drop = d - 1;
  }
}

static void work_free(alias_work *w) {
  for (size_t i = 0; i < w->ng; i++) {
    free(w->g[i].old);
    free(w->g[i].new);
  }
  free(w->g);
  tpx__strmap_free(&w->seen);
  for (size_t i = 0; i < w->nr; i++) {
    free(w->rules[i].from);
    free(w->rules[i].to);
  }
  free(w->rules);
}

tpx_status tpx__conv_add_aliases(tpx_model *model, const tpx__conv *c,
                                 const tpx__st_load *l, size_t *renamed,
                                 tpx_error *err) {
  alias_work w;
  memset(&w, 0, sizeof w);
  tpx__strmap_init(&w.seen);
  tpx_status st = TPX_OK;
  char buf[1024];
  for (size_t k = 0; k < l->n && st == TPX_OK; k++) {
    int r = tpx__conv_rename(c, l->t[k].name, buf, sizeof buf);
    if (r < 0)
      st = tpx_error_set(err, TPX_VALIDATION,
                         "tensor '%s': its converted name is too long",
                         l->t[k].name);
    else if (note_name(&w, l->t[k].name, buf) < 0)
      st = oom(err);
    *renamed += r > 0;
  }
  for (size_t i = 0; i < w.ng && st == TPX_OK; i++)
    if (strcmp(w.g[i].old, w.g[i].new) != 0 && general_rule(&w, i) < 0)
      st = oom(err);
  if (st == TPX_OK && w.nr > 0)
    qsort(w.rules, w.nr, sizeof *w.rules, by_depth);
  for (size_t i = 0; i < w.nr && st == TPX_OK; i++)
    st = tpx_model_add_name_alias(model, w.rules[i].from, w.rules[i].to, err);
  work_free(&w);
  return st;
}
