/* match.c — resolve plan keys against a model's module tree with torch >= 2.9
 * parallelize_module semantics (docs/SEMANTICS.md "Plans and matching"):
 * atom-by-atom fnmatch over named_children in insertion order, "" = the root.
 * Reports unmatched and doubly-matched keys as diagnostics.
 *
 * Not style application. The atom matcher is our own (not fnmatch(3)) so it
 * follows Python's fnmatch exactly — backslash is literal, "[^a]" is a set
 * holding '^' and 'a', an unclosed '[' is literal, '?' takes one UTF-8 code
 * point — and so literal atoms, the common case, cost one strcmp. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "model/model_view.h"
#include "model/strmap.h"
#include "plan/match_internal.h"
#include "plan/plan_internal.h"
#include "tpx/match.h"

/* ---- atom matching (Python fnmatch semantics) ---- */

/* Decode one UTF-8 code point at s (never past the NUL); *n = bytes used.
 * Invalid bytes count as one code point each. */
static uint32_t utf8_next(const unsigned char *s, int *n) {
  uint32_t c = s[0];
  int len = c < 0x80         ? 1
            : (c >> 5) == 6  ? 2
            : (c >> 4) == 14 ? 3
            : (c >> 3) == 30 ? 4
                             : 1;
  if (len == 1) {
    *n = 1;
    return c;
  }
  uint32_t cp = c & (0x7Fu >> len);
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) {
      *n = 1;
      return c;
    }
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  *n = len;
  return cp;
}

/* If p (at '[') starts a valid class, return the index of its closing ']',
 * else 0 (the '[' is then a literal, as in Python). */
static size_t class_end(const char *p) {
  size_t j = 1;
  if (p[j] == '!')
    j++;
  if (p[j] == ']')
    j++;
  while (p[j] && p[j] != ']') j++;
  return p[j] ? j : 0;
}

/* Does code point c match the class p[1..end)? */
static int class_match(const char *p, size_t end, uint32_t c) {
  size_t t = 1;
  int neg = 0;
  if (p[t] == '!') {
    neg = 1;
    t++;
  }
  int hit = 0;
  while (t < end) {
    int n1;
    uint32_t lo = utf8_next((const unsigned char *)p + t, &n1);
    if (t + (size_t)n1 + 1 < end && p[t + n1] == '-') {
      int n2;
      uint32_t hi = utf8_next((const unsigned char *)p + t + n1 + 1, &n2);
      if (lo <= c && c <= hi)
        hit = 1; /* a reversed range is empty */
      t += (size_t)n1 + 1 + (size_t)n2;
    } else {
      if (c == lo)
        hit = 1;
      t += (size_t)n1;
    }
  }
  return hit != neg;
}

static int glob_match(const char *p, const char *s) {
  const char *star_p = NULL, *star_s = NULL;
  for (;;) {
    if (*p == '*') {
      while (*p == '*') p++;
      if (!*p)
        return 1;
      star_p = p;
      star_s = s;
      continue;
    }
    if (*s) {
      int ok = 0, pn = 1, sn = 1;
      if (*p == '?') {
        utf8_next((const unsigned char *)s, &sn);
        ok = 1;
      } else if (*p == '[' && class_end(p)) {
        size_t e = class_end(p);
        uint32_t c = utf8_next((const unsigned char *)s, &sn);
        ok = class_match(p, e, c);
        pn = (int)e + 1;
      } else if (*p) {
        ok = *p == *s;
      }
      if (ok) {
        p += pn;
        s += sn;
        continue;
      }
    } else if (!*p) {
      return 1;
    }
    if (!star_p)
      return 0;
    /* Backtrack: the last '*' takes one more code point. */
    int n;
    utf8_next((const unsigned char *)star_s, &n);
    if (!*star_s)
      return 0;
    star_s += n;
    p = star_p;
    s = star_s;
  }
}

static int atom_has_magic(const char *a) { return strpbrk(a, "*?[") != NULL; }

int tpx_match_atom(const char *pattern, const char *name) {
  if (!pattern || !name)
    return 0;
  if (!atom_has_magic(pattern))
    return strcmp(pattern, name) == 0;
  return glob_match(pattern, name);
}

int tpx_match_fqn(const char *pattern, const char *fqn) {
  if (!pattern || !fqn)
    return 0;
  size_t lp = strlen(pattern), lf = strlen(fqn);
  char *buf = malloc(lp + lf + 2);
  if (!buf)
    return 0;
  char *pat = memcpy(buf, pattern, lp + 1);
  char *name = memcpy(buf + lp + 1, fqn, lf + 1);
  int ok = 1;
  for (;;) {
    char *pd = strchr(pat, '.'), *fd = strchr(name, '.');
    if ((pd == NULL) != (fd == NULL)) {
      ok = 0;
      break;
    }
    if (pd)
      *pd = *fd = '\0';
    if (!tpx_match_atom(pat, name)) {
      ok = 0;
      break;
    }
    if (!pd)
      break;
    pat = pd + 1;
    name = fd + 1;
  }
  free(buf);
  return ok;
}

/* ---- the walk ---- */

typedef struct walk_frame {
  int64_t module;
  size_t next, nc; /* next child to try, number of children */
  size_t cut;      /* offset of a child's name in its FQN */
  int any;         /* some child matched this frame's atom */
} walk_frame;

typedef struct walk_ctx {
  const tpx_model *model;
  walk_frame *frames; /* [natoms] */
  tpx_match *m;
  char **atoms;
  size_t *alen; /* strlen of each atom */
  int *magic;   /* 0 literal, 1 pattern, 2 only '*' (matches any name) */
  size_t natoms;
  /* deepest failure: atom index and the module whose children all failed */
  size_t fail_depth;
  int64_t fail_module;
  char *namebuf; /* a child's FQN, built to look it up by name */
  size_t namecap;
  int oom;
} walk_ctx;

/* The module's own name: the tail of its FQN. */
static const char *module_name(walk_ctx *w, int64_t idx) {
  return tpx__mv_module(w->model, idx)->fqn + tpx__mv_name_off(w->model, idx);
}

static void frame_enter(walk_ctx *w, walk_frame *f, int64_t module) {
  const tpx__module *m = tpx__mv_module(w->model, module);
  f->module = module;
  f->next = 0;
  f->nc = m->num_children;
  f->cut = module > 0 ? (size_t)m->fqn_len + 1 : 0;
  f->any = 0;
}

/* The child of f's module named by the literal atom `depth`, or -1: found
 * through the model's FQN index, not by reading every child (sibling names
 * are unique, so a literal atom takes one child at most). */
static int64_t literal_child(walk_ctx *w, const walk_frame *f, size_t depth) {
  const tpx__module *pm = tpx__mv_module(w->model, f->module);
  size_t plen = f->cut ? (size_t)pm->fqn_len : 0;
  size_t need = plen + (f->cut ? 1 : 0) + w->alen[depth] + 1;
  if (TPX_GROW(w->namebuf, w->namecap, need, 256)) {
    w->oom = 1;
    return -1;
  }
  memcpy(w->namebuf, pm->fqn, plen);
  if (f->cut)
    w->namebuf[plen++] = '.';
  memcpy(w->namebuf + plen, w->atoms[depth], w->alen[depth] + 1);
  int64_t c = tpx_model_find_module(w->model, w->namebuf);
  if (c < 0 || c >= w->m->nmodules || tpx__mv_parent(w->model, c) != f->module)
    return -1;
  return c;
}

static void record(walk_ctx *w, int64_t module) {
  tpx_match *m = w->m;
  if (TPX_GROW(m->mods, m->capmods, m->nmods + 1, 64)) {
    w->oom = 1;
    return;
  }
  m->mods[m->nmods++] = module;
}

/* Depth-first over the children matching each atom, in insertion order —
 * torch's recursion, made iterative so a deep model cannot exhaust the C
 * stack. frames[d] is the module whose children are matched against
 * atoms[d]. */
static void walk(walk_ctx *w, int64_t root) {
  walk_frame *fr = w->frames;
  size_t top = 1;
  frame_enter(w, &fr[0], root);
  while (top && !w->oom) {
    walk_frame *f = &fr[top - 1];
    size_t depth = top - 1;
    if (f->next == f->nc) {
      if (!f->any && (w->fail_module < 0 || depth > w->fail_depth)) {
        w->fail_depth = depth;
        w->fail_module = f->module;
      }
      top--;
      continue;
    }
    int mg = w->magic[depth];
    int64_t c;
    if (mg == 0) { /* a literal atom: the one child of that name, if any */
      f->next = f->nc;
      c = literal_child(w, f, depth);
      if (c < 0)
        continue;
    } else {
      c = tpx__mv_module(w->model, f->module)->children[f->next++];
      if (c < 0 || c >= w->m->nmodules)
        continue;
    }
    /* Names are FQN tails: a pattern is matched against the name; a bare
     * '*' takes every name without reading it. */
    if (mg == 1) {
      const tpx__module *cm = tpx__mv_module(w->model, c);
      if (!glob_match(w->atoms[depth], cm->fqn + f->cut))
        continue;
    }
    f->any = 1;
    if (depth + 1 == w->natoms) {
      record(w, c);
    } else {
      frame_enter(w, &fr[top++], c);
    }
  }
}

/* ---- grouped walk ----
 * Keys that differ only in their last atom (q/k/v/o_proj of one layer
 * stack, gate/up/down_proj of the experts) walk the same modules down to
 * the last level. They are walked once, together: each module at the last
 * level is tested against every key of the group and lands in that key's
 * list. Per key, the list is the module order its own walk would give (the
 * walk is the same up to the last atom, and the last level is visited in
 * order), so matching stays torch's order; a big MoE model is then read
 * once instead of once per expert linear. */

typedef struct group_key {
  const char *atom; /* last atom */
  size_t len;
  int magic; /* as walk_ctx.magic */
  int64_t *mods;
  size_t n, cap;
} group_key;

static void group_push(walk_ctx *w, group_key *g, int64_t module) {
  if (TPX_GROW(g->mods, g->cap, g->n + 1, 16)) {
    w->oom = 1;
    return;
  }
  g->mods[g->n++] = module;
}

/* The keys of one group: members[] index keys[]. A big group also has its
 * literal last atoms in a map (atom -> key index) and its pattern members
 * apart, so a child is tested against the keys that can take it, not
 * against every key of the group. */
typedef struct group_index {
  const size_t *members;
  size_t nmem;
  int use_map;
  tpx__strmap literal;
  const size_t *magic; /* members whose last atom is a pattern */
  size_t nmagic;
} group_index;

/* The keys of the group that take child `name` (the last atom). */
static void take_child(walk_ctx *w, group_key *keys, const group_index *gi,
                       int64_t c, const char *name, size_t nlen) {
  if (!gi->use_map) {
    for (size_t k = 0; k < gi->nmem; k++) {
      group_key *g = &keys[gi->members[k]];
      if (g->magic == 2 ||
          (g->magic ? glob_match(g->atom, name)
                    : nlen == g->len && memcmp(g->atom, name, nlen) == 0))
        group_push(w, g, c);
    }
    return;
  }
  int64_t k = -1;
  if (tpx__strmap_find(&gi->literal, name, nlen, &k))
    group_push(w, &keys[k], c);
  for (size_t j = 0; j < gi->nmagic; j++) {
    group_key *g = &keys[gi->magic[j]];
    if (g->magic == 2 || glob_match(g->atom, name))
      group_push(w, g, c);
  }
}

/* w's atoms are the group's shared prefix plus the leader's last atom. */
static void walk_group(walk_ctx *w, group_key *keys, const group_index *gi) {
  walk_frame *fr = w->frames;
  size_t top = 1;
  frame_enter(w, &fr[0], 0);
  while (top && !w->oom) {
    walk_frame *f = &fr[top - 1];
    size_t depth = top - 1;
    if (f->next == f->nc) {
      top--;
      continue;
    }
    if (depth + 1 < w->natoms && w->magic[depth] == 0) {
      f->next = f->nc; /* a literal atom above the last level */
      int64_t c = literal_child(w, f, depth);
      if (c >= 0)
        frame_enter(w, &fr[top++], c);
      continue;
    }
    int64_t c = tpx__mv_module(w->model, f->module)->children[f->next++];
    if (c < 0 || c >= w->m->nmodules)
      continue;
    const tpx__module *cm = tpx__mv_module(w->model, c);
    const char *name = cm->fqn + f->cut;
    size_t nlen = (size_t)cm->fqn_len - f->cut;
    if (depth + 1 == w->natoms) {
      take_child(w, keys, gi, c, name, nlen);
      continue;
    }
    int mg = w->magic[depth];
    if (mg != 2 && (mg ? !glob_match(w->atoms[depth], name)
                       : nlen != w->alen[depth] ||
                             memcmp(w->atoms[depth], name, nlen) != 0))
      continue;
    frame_enter(w, &fr[top++], c);
  }
}

/* ---- diagnostics ---- */

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 128 || lb > 128)
    return la > lb ? la : lb;
  size_t row[129];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t cur = row[j];
      size_t best = prev + (a[i - 1] != b[j - 1]);
      if (row[j] + 1 < best)
        best = row[j] + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      prev = cur;
    }
  }
  return row[lb];
}

/* Append to buf (bounded; truncation is fine for a message). */
static void appendf(char *buf, size_t size, size_t *len, const char *fmt,
                    const char *s) {
  if (*len >= size)
    return;
  int n = snprintf(buf + *len, size - *len, fmt, s);
  if (n > 0)
    *len += (size_t)n;
  if (*len >= size)
    *len = size - 1;
}

/* Some descendant of `module` matches atoms[depth..] (the rest of the key
 * after the atom a suggestion replaces): only then is the suggested key a
 * path that exists. Depth-first, stops at the first hit; recursion is at
 * most natoms deep. */
static int rest_resolves(walk_ctx *w, int64_t module, size_t depth) {
  if (depth >= w->natoms)
    return 1;
  size_t nc = tpx_model_module_num_children(w->model, module);
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(w->model, module, i);
    if (c < 0 || c >= w->m->nmodules)
      continue;
    if (w->magic[depth] != 2 &&
        !tpx_match_atom(w->atoms[depth], module_name(w, c)))
      continue;
    if (rest_resolves(w, c, depth + 1))
      return 1;
  }
  return 0;
}

/* The key's first `natoms` atoms with atom `depth` replaced by `name`. */
static void suggestion_prefix(walk_ctx *w, size_t depth, const char *name,
                              size_t natoms, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < natoms; i++) {
    if (i)
      appendf(buf, size, &len, "%s", ".");
    appendf(buf, size, &len, "%s", i == depth ? name : w->atoms[i]);
  }
}

static void report_unmatched(walk_ctx *w, tpx_diag_list *diags, const char *key,
                             int optional) {
  tpx_diag_level level = optional ? TPX_DIAG_INFO : TPX_DIAG_WARNING;
  const char *atom = w->atoms[w->fail_depth];
  const char *where = tpx_model_module_fqn(w->model, w->fail_module);
  int root = !where || !where[0];
  char fix[1024];
  size_t flen = 0;
  fix[0] = '\0';
  size_t nc = tpx_model_module_num_children(w->model, w->fail_module);
  /* Up to three closest child names, by edit distance then order; a child
   * under which the rest of the key exists comes before one under which it
   * does not (that one is suggested as the module alone, which exists). */
  int64_t best[3] = {-1, -1, -1};
  size_t bestd[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
  int full[3] = {0, 0, 0};
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(w->model, w->fail_module, i);
    if (c < 0 || c >= w->m->nmodules)
      continue;
    int resolves = rest_resolves(w, c, w->fail_depth + 1);
    /* resolving children rank ahead of all others */
    size_t d = edit_distance(atom, module_name(w, c)) +
               (resolves ? 0 : (size_t)1 << 20);
    for (int k = 0; k < 3; k++) {
      if (d < bestd[k]) {
        for (int j = 2; j > k; j--) {
          best[j] = best[j - 1];
          bestd[j] = bestd[j - 1];
        }
        for (int j = 2; j > k; j--) full[j] = full[j - 1];
        best[k] = c;
        bestd[k] = d;
        full[k] = resolves;
        break;
      }
    }
  }
  if (best[0] >= 0) {
    appendf(fix, sizeof fix, &flen, "%s", "closest existing: ");
    for (int k = 0; k < 3 && best[k] >= 0; k++) {
      char sug[512];
      suggestion_prefix(w, w->fail_depth, module_name(w, best[k]),
                        full[k] ? w->natoms : w->fail_depth + 1, sug,
                        sizeof sug);
      appendf(fix, sizeof fix, &flen, k ? ", '%s'" : "'%s'", sug);
    }
    appendf(fix, sizeof fix, &flen, "%s", "; ");
  } else {
    appendf(fix, sizeof fix, &flen, "'%s' has no submodules; ",
            root ? "(root)" : where);
  }
  appendf(fix, sizeof fix, &flen, "%s",
          optional ? "the entry is optional, so it is ignored"
                   : "if the key is meant for this model, fix it; else "
                     "remove it, or mark the entry optional if the module "
                     "exists only in some variants");
  tpx_diag_add(diags, level, "unmatched-key", key, fix,
               "plan key '%s' matches no module: no child of %s%s%s matches "
               "atom '%s' (atom %zu of %zu)%s",
               key, root ? "the root module" : "'", root ? "" : where,
               root ? "" : "'", atom, w->fail_depth + 1, w->natoms,
               optional ? ""
                        : "; the entry is skipped, as torch's "
                          "parallelize_module skips it with a warning, and "
                          "what it meant to style stays replicated over tp");
}

typedef struct conflict {
  int64_t other;
  int64_t first_module;
  size_t count;
} conflict;

static void report_duplicates(const tpx_plan *plan, const tpx_model *model,
                              size_t e, const conflict *cs, size_t ncs,
                              tpx_diag_list *diags) {
  for (size_t i = 0; i < ncs; i++) {
    const char *k1 = tpx__plan_key(plan, (size_t)cs[i].other);
    const char *k2 = tpx__plan_key(plan, e);
    const char *mod = tpx_model_module_fqn(model, cs[i].first_module);
    char more[64] = "";
    if (cs[i].count > 1)
      snprintf(more, sizeof more, " (and %zu more modules)", cs[i].count - 1);
    tpx_diag_add(diags, TPX_DIAG_ERROR, "duplicate-match", k2,
                 "remove one of the two keys or narrow its pattern so each "
                 "module gets one style",
                 "plan keys '%s' (entry %lld) and '%s' (entry %zu) both "
                 "resolve to module '%s'%s; torch would apply both styles to "
                 "it",
                 k1, (long long)cs[i].other, k2, e, mod && mod[0] ? mod : "",
                 more);
  }
}

/* ---- public ---- */

static tpx_status split_key(const char *key, walk_ctx *w, char **buf,
                            size_t *cap_atoms, tpx_error *err) {
  size_t n = strlen(key);
  char *copy = malloc(n + 1);
  if (!copy)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
  memcpy(copy, key, n + 1);
  size_t na = 1;
  for (size_t i = 0; i < n; i++) na += key[i] == '.';
  if (na > *cap_atoms) {
    char **a = realloc(w->atoms, na * sizeof *a);
    if (a)
      w->atoms = a;
    int *mg = a ? realloc(w->magic, na * sizeof *mg) : NULL;
    if (mg)
      w->magic = mg;
    size_t *al = mg ? realloc(w->alen, na * sizeof *al) : NULL;
    if (al)
      w->alen = al;
    walk_frame *fr = al ? realloc(w->frames, na * sizeof *fr) : NULL;
    if (fr)
      w->frames = fr;
    if (!a || !mg || !al || !fr) {
      free(copy);
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
    }
    *cap_atoms = na;
  }
  w->natoms = 0;
  char *s = copy;
  for (;;) {
    char *dot = strchr(s, '.');
    if (dot)
      *dot = '\0';
    w->atoms[w->natoms] = s;
    w->alen[w->natoms] = strlen(s);
    w->magic[w->natoms] = !atom_has_magic(s)          ? 0
                          : s[strspn(s, "*")] == '\0' ? 2
                                                      : 1;
    w->natoms++;
    if (!dot)
      break;
    s = dot + 1;
  }
  free(*buf);
  *buf = copy;
  return TPX_OK;
}

/* The scratch of one tpx_match_plan call. */
typedef struct match_run {
  const tpx_plan *plan;
  tpx_diag_list *diags;
  walk_ctx w;
  char *keybuf; /* the atoms of the key being walked */
  size_t cap_atoms;
  group_key *gkeys; /* [ne] each key's last atom and its matches */
  size_t *members;  /* [ne] one group's entries */
  int64_t *next;    /* [ne] the next entry of the same group, or -1 */
  conflict *cs;     /* duplicate matches of the current entry */
  size_t ncs, capcs;
  int64_t *slot; /* [ne] entry -> index in cs, or -1 */
} match_run;

static void match_run_free(match_run *r, size_t ne) {
  free(r->keybuf);
  free(r->w.namebuf);
  free(r->w.atoms);
  free(r->w.magic);
  free(r->w.alen);
  free(r->w.frames);
  free(r->cs);
  free(r->slot);
  for (size_t e = 0; r->gkeys && e < ne; e++) free(r->gkeys[e].mods);
  free(r->gkeys);
  free(r->members);
  free(r->next);
}

static void group_key_init(group_key *g, const char *key) {
  const char *d = strrchr(key, '.');
  g->atom = d ? d + 1 : key;
  g->len = strlen(g->atom);
  g->magic = !atom_has_magic(g->atom)                ? 0
             : g->atom[strspn(g->atom, "*")] == '\0' ? 2
                                                     : 1;
}

/* Walk the group whose first entry is `first` (its key already split). */
static tpx_status walk_one_group(match_run *r, size_t first, tpx_error *err) {
  group_index gi;
  memset(&gi, 0, sizeof gi);
  size_t nmem = 0;
  for (int64_t k = (int64_t)first; k >= 0; k = r->next[k])
    r->members[nmem++] = (size_t)k;
  gi.members = r->members;
  gi.nmem = nmem;
  gi.use_map = nmem > 8;
  size_t *magic = NULL;
  tpx_status st = TPX_OK;
  if (gi.use_map) {
    magic = malloc(nmem * sizeof *magic);
    if (!magic || tpx__strmap_reserve(&gi.literal, nmem) != 0)
      st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
    for (size_t k = 0; k < nmem && st == TPX_OK; k++) {
      const group_key *g = &r->gkeys[r->members[k]];
      if (g->magic)
        magic[gi.nmagic++] = r->members[k];
      else if (tpx__strmap_set(&gi.literal, g->atom, g->len,
                               (int64_t)r->members[k]) != 0)
        st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
    }
    gi.magic = magic;
  }
  if (st == TPX_OK) {
    walk_group(&r->w, r->gkeys, &gi);
    if (r->w.oom)
      st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
  }
  free(magic);
  tpx__strmap_free(&gi.literal);
  return st;
}

/* Every non-empty key's modules, walked by groups of keys that share all
 * but the last atom (see walk_group). The groups are found in one pass
 * with a map from the shared prefix to the group's first entry, so a plan
 * of n entries costs O(n) here, not O(n^2). A key without a dot has the
 * empty prefix; a key with one never does (keys have no empty atoms). */
static tpx_status walk_groups(match_run *r, size_t ne, tpx_error *err) {
  tpx__strmap heads = TPX__STRMAP_INIT;
  int64_t *tail = malloc((ne ? ne : 1) * sizeof *tail);
  tpx_status st = TPX_OK;
  if (!tail)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
  for (size_t e = 0; e < ne; e++) {
    const char *key = tpx__plan_key(r->plan, e);
    r->next[e] = -1;
    tail[e] = -1;
    if (key[0] == '\0')
      continue;
    const char *ld = strrchr(key, '.');
    size_t plen = ld ? (size_t)(ld - key) : 0;
    int64_t head = -1;
    group_key_init(&r->gkeys[e], key);
    if (tpx__strmap_find(&heads, key, plen, &head)) {
      r->next[tail[head]] = (int64_t)e;
      tail[head] = (int64_t)e;
    } else if (tpx__strmap_set(&heads, key, plen, (int64_t)e) != 0) {
      st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
      break;
    } else {
      tail[e] = (int64_t)e;
    }
  }
  /* Walk each group once, in the order of its first entry. */
  for (size_t e = 0; e < ne && st == TPX_OK && r->w.m->nmodules > 0; e++) {
    if (tail[e] < 0)
      continue; /* not a group's first entry */
    st = split_key(tpx__plan_key(r->plan, e), &r->w, &r->keybuf, &r->cap_atoms,
                   err);
    if (st != TPX_OK)
      break;
    st = walk_one_group(r, (size_t)e, err);
  }
  free(tail);
  tpx__strmap_free(&heads);
  return st;
}

/* Entry e's matches into m->mods (taken from its group walk), its
 * unmatched-key diagnostic, and duplicate-match against earlier entries. */
static tpx_status collect_entry(match_run *r, size_t e, tpx_error *err) {
  walk_ctx *w = &r->w;
  tpx_match *m = w->m;
  const tpx_plan *plan = r->plan;
  const char *key = tpx__plan_key(plan, e);
  int64_t nmod = m->nmodules;
  size_t start = m->nmods;
  m->off[e] = start;
  w->fail_module = -1;
  w->fail_depth = 0;
  if (key[0] == '\0') {
    if (nmod > 0)
      record(w, 0);
  } else if (r->gkeys[e].n) {
    group_key *g = &r->gkeys[e];
    if (TPX_GROW(m->mods, m->capmods, m->nmods + g->n, 64))
      goto oom;
    memcpy(m->mods + m->nmods, g->mods, g->n * sizeof *g->mods);
    m->nmods += g->n;
    free(g->mods);
    g->mods = NULL;
  }
  if (w->oom)
    goto oom;
  size_t cnt = m->nmods - start;
  if (cnt == 0 && r->diags && key[0] != '\0' && nmod > 0) {
    /* Where the key's own walk stops, for the message (matches none). */
    tpx_status st = split_key(key, w, &r->keybuf, &r->cap_atoms, err);
    if (st != TPX_OK)
      return st;
    walk(w, 0);
    if (w->oom)
      goto oom;
  }
  if (cnt == 0 && r->diags) {
    if (key[0] == '\0' || nmod <= 0 || w->fail_module < 0) {
      tpx_diag_add(r->diags,
                   tpx__plan_optional(plan, e) ? TPX_DIAG_INFO
                                               : TPX_DIAG_WARNING,
                   "unmatched-key", key, "the model has no modules",
                   "plan key '%s' matches no module", key);
    } else {
      report_unmatched(w, r->diags, key, tpx__plan_optional(plan, e));
    }
  }
  r->ncs = 0;
  for (size_t i = start; i < m->nmods; i++) {
    int64_t mod = m->mods[i];
    int64_t prev = m->module_entry[mod];
    if (prev < 0) {
      m->module_entry[mod] = (int64_t)e;
      continue;
    }
    if (r->slot[prev] < 0) {
      if (TPX_GROW(r->cs, r->capcs, r->ncs + 1, 8))
        goto oom;
      r->cs[r->ncs].other = prev;
      r->cs[r->ncs].first_module = mod;
      r->cs[r->ncs].count = 0;
      r->slot[prev] = (int64_t)r->ncs++;
    }
    r->cs[r->slot[prev]].count++;
  }
  if (r->ncs && r->diags)
    report_duplicates(plan, w->model, e, r->cs, r->ncs, r->diags);
  for (size_t i = 0; i < r->ncs; i++) r->slot[r->cs[i].other] = -1;
  return TPX_OK;
oom:
  return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
}

tpx_status tpx_match_plan(const tpx_plan *plan, const tpx_model *model,
                          tpx_match **out, tpx_diag_list *diags,
                          tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "tpx_match_plan: NULL out");
  *out = NULL;
  if (!plan || !model)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_match_plan: NULL plan or model");
  size_t ne = tpx_plan_size(plan);
  size_t ne1 = ne ? ne : 1;
  int64_t nmod = (int64_t)tpx_model_num_modules(model);
  tpx_match *m = calloc(1, sizeof *m);
  match_run r;
  memset(&r, 0, sizeof r);
  tpx_status st = TPX_OK;
  if (!m)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
  r.plan = plan;
  r.diags = diags;
  r.w.model = model;
  r.w.m = m;
  m->nentries = ne;
  m->nmodules = nmod;
  m->off = calloc(ne + 1, sizeof *m->off);
  m->module_entry = malloc((size_t)(nmod > 0 ? nmod : 1) * sizeof(int64_t));
  r.slot = malloc(ne1 * sizeof *r.slot);
  r.gkeys = calloc(ne1, sizeof *r.gkeys);
  r.members = malloc(ne1 * sizeof *r.members);
  r.next = malloc(ne1 * sizeof *r.next);
  if (!m->off || !m->module_entry || !r.slot || !r.gkeys || !r.members ||
      !r.next) {
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
    goto done;
  }
  for (int64_t i = 0; i < nmod; i++) m->module_entry[i] = -1;
  for (size_t i = 0; i < ne; i++) r.slot[i] = -1;
  st = walk_groups(&r, ne, err);
  for (size_t e = 0; e < ne && st == TPX_OK; e++)
    st = collect_entry(&r, e, err);
  m->off[ne] = m->nmods;
  if (st == TPX_OK && diags &&
      tpx__omission_by_sibling(m, plan, model, diags) != TPX_OK)
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory (match)");
done:
  match_run_free(&r, ne);
  if (st != TPX_OK) {
    tpx_match_destroy(m);
    return st;
  }
  *out = m;
  return TPX_OK;
}

void tpx_match_destroy(tpx_match *m) {
  if (!m)
    return;
  free(m->off);
  free(m->mods);
  free(m->module_entry);
  tpx__name_set_destroy(m->omitted);
  free(m);
}

size_t tpx_match_entry_total(const tpx_match *m) { return m ? m->nentries : 0; }

size_t tpx_match_entry_count(const tpx_match *m, size_t entry) {
  if (!m || entry >= m->nentries)
    return 0;
  return m->off[entry + 1] - m->off[entry];
}

int64_t tpx_match_entry_module(const tpx_match *m, size_t entry, size_t i) {
  if (!m || entry >= m->nentries)
    return -1;
  if (i >= m->off[entry + 1] - m->off[entry])
    return -1;
  return m->mods[m->off[entry] + i];
}

int64_t tpx_match_module_entry(const tpx_match *m, int64_t module) {
  if (!m || module < 0 || module >= m->nmodules)
    return -1;
  return m->module_entry[module];
}
