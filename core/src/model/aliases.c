/* aliases.c — name aliases of a model's tensors: another naming of the same
 * tensors (the module names of a different implementation of the
 * architecture, e.g. NeMo Automodel's own class beside the published
 * checkpoint's), as rules over leading dotted atoms ('*' one atom). A
 * family's plugin declares them (trait name_alias, docs/PLUGIN_ABI.md);
 * tpx_model_add_safetensors reads header names through them, the
 * checkpoint reader finds a parameter stored under an alias
 * (tpx__model_alias_name, the way back), and the reports list them.
 * Strings live in the model's arena. */
#include <string.h>

#include "base/grow.h"
#include "model/aliases.h"
#include "model/model_impl.h"

static size_t count_stars(const char *p) {
  size_t n = 0;
  for (const char *a = p; a; a = strchr(a, '.')) {
    if (*a == '.')
      a++;
    n += a[0] == '*' && (a[1] == '.' || a[1] == '\0');
  }
  return n;
}

tpx_status tpx_model_add_name_alias(tpx_model *model, const char *alias,
                                    const char *canonical, tpx_error *err) {
  if (model == NULL || alias == NULL || canonical == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_name_alias: NULL argument");
  tpx_status st = tpx__model_check_fqn(alias, strlen(alias), "alias", err);
  if (st == TPX_OK)
    st = tpx__model_check_fqn(canonical, strlen(canonical), "alias", err);
  if (st != TPX_OK)
    return st;
  if (alias[0] == '\0' || canonical[0] == '\0' ||
      count_stars(alias) != count_stars(canonical))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "name alias '%s' -> '%s': both must be non-empty "
                         "and hold the same number of '*' atoms",
                         alias, canonical);
  const char *f = tpx__arena_strndup(&model->arena, alias, strlen(alias));
  const char *t =
      tpx__arena_strndup(&model->arena, canonical, strlen(canonical));
  if (!f || !t ||
      TPX_GROW(model->aliases, model->cap_aliases, model->num_aliases + 1, 8))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory (name alias)");
  model->aliases[model->num_aliases].from = f;
  model->aliases[model->num_aliases++].to = t;
  return TPX_OK;
}

size_t tpx_model_num_name_aliases(const tpx_model *model) {
  return model ? model->num_aliases : 0;
}

tpx_status tpx_model_name_alias(const tpx_model *model, size_t index,
                                const char **alias, const char **canonical,
                                tpx_error *err) {
  if (model == NULL || index >= model->num_aliases)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_model_name_alias: index %zu of %zu", index,
                         model ? model->num_aliases : (size_t)0);
  if (alias)
    *alias = model->aliases[index].from;
  if (canonical)
    *canonical = model->aliases[index].to;
  return TPX_OK;
}

/* The length of the next atom of `s` (up to '.' or the end). */
static size_t atom_len(const char *s) {
  const char *d = strchr(s, '.');
  return d ? (size_t)(d - s) : strlen(s);
}

/* Does rule `from` match the leading atoms of `name`? Fills the captured
 * atoms ('*') and returns where the rest of `name` starts, or NULL. */
static const char *match_rule(const char *from, const char *name,
                              const char **cap, size_t *cap_len,
                              size_t max_caps, size_t *ncap) {
  *ncap = 0;
  for (;;) {
    size_t fl = atom_len(from), nl = atom_len(name);
    if (nl == 0)
      return NULL;
    if (fl == 1 && from[0] == '*') {
      if (*ncap == max_caps)
        return NULL;
      cap[*ncap] = name;
      cap_len[(*ncap)++] = nl;
    } else if (fl != nl || memcmp(from, name, fl) != 0) {
      return NULL;
    }
    from += fl;
    name += nl;
    if (*from == '\0')
      return *name == '\0' || *name == '.' ? name : NULL;
    if (*name == '\0')
      return NULL;
    from++;
    name++;
  }
}

/* `pattern` with its '*' atoms replaced by the captures in order, then
 * `rest`, into buf: 0, or -1 when it does not fit. */
static int substitute(const char *pattern, const char *const *cap,
                      const size_t *cap_len, size_t ncap, const char *rest,
                      char *buf, size_t size) {
  size_t o = 0, k = 0;
  for (const char *t = pattern; *t;) {
    size_t tl = atom_len(t);
    const char *src = t;
    size_t sl = tl;
    if (tl == 1 && t[0] == '*' && k < ncap) {
      src = cap[k];
      sl = cap_len[k++];
    }
    if (o + sl + 1 >= size)
      return -1;
    memcpy(buf + o, src, sl);
    o += sl;
    t += tl;
    if (*t == '.') {
      buf[o++] = '.';
      t++;
    }
  }
  size_t rl = strlen(rest);
  if (o + rl + 1 > size)
    return -1;
  memcpy(buf + o, rest, rl + 1);
  return 0;
}

enum { MAX_CAPS = 16 };

int tpx_model_canonical_name(const tpx_model *model, const char *name,
                             char *buf, size_t size) {
  const char *cap[MAX_CAPS];
  size_t cap_len[MAX_CAPS], ncap;
  if (model == NULL || name == NULL || buf == NULL || size == 0)
    return -1;
  for (size_t r = 0; r < model->num_aliases; r++) {
    const char *rest =
        match_rule(model->aliases[r].from, name, cap, cap_len, MAX_CAPS, &ncap);
    if (rest != NULL)
      return substitute(model->aliases[r].to, cap, cap_len, ncap, rest, buf,
                        size) == 0
                 ? 1
                 : -1;
  }
  size_t nl = strlen(name);
  if (nl + 1 > size)
    return -1;
  memcpy(buf, name, nl + 1);
  return 0;
}

int tpx__model_alias_name(const tpx_model *model, size_t rule,
                          const char *canonical, char *buf, size_t size) {
  const char *cap[MAX_CAPS];
  size_t cap_len[MAX_CAPS], ncap;
  if (model == NULL || canonical == NULL || rule >= model->num_aliases)
    return 0;
  const char *rest = match_rule(model->aliases[rule].to, canonical, cap,
                                cap_len, MAX_CAPS, &ncap);
  if (rest == NULL)
    return 0;
  if (substitute(model->aliases[rule].from, cap, cap_len, ncap, rest, buf,
                 size) != 0)
    return -1;
  /* the first rule that matches a name applies: the alias name must come
   * back to `canonical` through the rules */
  char back[1024];
  return tpx_model_canonical_name(model, buf, back, sizeof back) == 1 &&
                 strcmp(back, canonical) == 0
             ? 1
             : 0;
}
