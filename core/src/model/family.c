/* family.c — a model class's family facts (model/family_view.h): the
 * parser of the plugin traits `layers`, `text_config_heads`, `hf_prefix`,
 * `inner_model` and `block_configs` (sdk/include/tpx/plugin.h), and the
 * facts a model keeps (tpx_model_add_trait). Not the selection traits
 * (select/traits.c) and not where the facts are used (shard/layers.c,
 * select/validate.c, select/hf_plan.c). */
#include <stdlib.h>
#include <string.h>

#include "model/family_view.h"
#include "model/model_impl.h"

static const char *const keys[] = {"layers", "text_config_heads", "hf_prefix",
                                   "inner_model", "block_configs"};
enum { K_LAYERS, K_TEXT_HEADS, K_HF_PREFIX, K_INNER, K_BLOCKS, K_COUNT };

static int key_of(const char *trait, const char **value) {
  for (int k = 0; k < K_COUNT; k++) {
    size_t n = strlen(keys[k]);
    if (strncmp(trait, keys[k], n) == 0 && trait[n] == '=') {
      *value = trait + n + 1;
      return k;
    }
  }
  return -1;
}

int tpx__family_is_trait(const char *trait) {
  const char *v;
  return trait && key_of(trait, &v) >= 0;
}

static tpx_status bad(const char *trait, const char *why, tpx_error *err) {
  return tpx_error_set(err, TPX_INVALID_ARGUMENT, "trait '%s': %s", trait, why);
}

/* Copy of [s, s + n) (n > 0, no ':'), or NULL. */
static char *dup_n(const char *s, size_t n) {
  char *c = malloc(n + 1);
  if (c) {
    memcpy(c, s, n);
    c[n] = '\0';
  }
  return c;
}

static int valid_atoms(const char *s, size_t n) {
  if (!n || s[0] == '.' || s[n - 1] == '.')
    return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] == ':' || s[i] == ',' || s[i] == ' ' ||
        (s[i] == '.' && s[i + 1] == '.'))
      return 0;
  return 1;
}

/* "language:<fqn>[,<fqn>...]" or "vision:..." into f (when f). */
static tpx_status parse_layers(tpx__family *f, const char *trait,
                               const char *rest, tpx_error *err) {
  int vision = strncmp(rest, "vision:", 7) == 0;
  if (!vision && strncmp(rest, "language:", 9) != 0)
    return bad(trait, "expected layers=<class>:language|vision:<fqn>[,...]",
               err);
  const char *p = rest + (vision ? 7 : 9);
  char **out = f ? (vision ? f->vision : f->language) : NULL;
  size_t *num = f ? (vision ? &f->num_vision : &f->num_language) : NULL;
  size_t count = 0;
  /* A group's list is replaced whole: declaring it again changes nothing. */
  for (size_t i = 0; f && i < *num; i++) {
    free(out[i]);
    out[i] = NULL;
  }
  if (f)
    *num = 0;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (!valid_atoms(p, n))
      return bad(trait, "a layer list is a dotted module name", err);
    if (count == TPX__FAMILY_MAX_CANDIDATES)
      return bad(trait, "more than 8 candidates", err);
    if (f && *num < TPX__FAMILY_MAX_CANDIDATES) {
      if (!(out[*num] = dup_n(p, n)))
        return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      (*num)++;
    }
    count++;
    if (!comma)
      break;
    p = comma + 1;
  }
  if (f)
    f->has_layers = 1;
  return TPX_OK;
}

static tpx_status set_string(char **slot, const char *trait, const char *s,
                             tpx_error *err) {
  if (!valid_atoms(s, strlen(s)))
    return bad(trait, "the value is a dotted module name", err);
  if (!slot)
    return TPX_OK;
  char *c = dup_n(s, strlen(s));
  if (!c)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  free(*slot);
  *slot = c;
  return TPX_OK;
}

tpx_status tpx__family_add(tpx__family *f, const char *trait, const char *arch,
                           int *applied, tpx_error *err) {
  const char *v = NULL;
  int k = trait ? key_of(trait, &v) : -1;
  if (applied)
    *applied = 0;
  if (k < 0)
    return tpx_error_set(err, TPX_NOT_FOUND, "'%s' is no family trait",
                         trait ? trait : "(null)");
  const char *colon = strchr(v, ':');
  size_t cl = colon ? (size_t)(colon - v) : strlen(v);
  if (!cl)
    return bad(trait, "no class name", err);
  if ((k == K_TEXT_HEADS) != !colon)
    return bad(trait,
               k == K_TEXT_HEADS ? "expected text_config_heads=<class>"
                                 : "expected <key>=<class>:<value>",
               err);
  int mine = 0;
  if (arch) {
    const char *dot = strrchr(arch, '.');
    const char *bare = dot ? dot + 1 : arch;
    mine = strlen(bare) == cl && strncmp(bare, v, cl) == 0;
  }
  tpx__family *into = mine ? f : NULL;
  tpx_status st = TPX_OK;
  switch (k) {
  case K_LAYERS: st = parse_layers(into, trait, colon + 1, err); break;
  case K_TEXT_HEADS:
    if (into)
      into->text_config_heads = 1;
    break;
  case K_HF_PREFIX:
    st = set_string(into ? &into->hf_prefix : NULL, trait, colon + 1, err);
    break;
  case K_INNER:
    st = set_string(into ? &into->inner_model : NULL, trait, colon + 1, err);
    break;
  default:
    st = set_string(into ? &into->block_configs : NULL, trait, colon + 1, err);
    break;
  }
  if (st == TPX_OK && applied)
    *applied = mine;
  return st;
}

void tpx__family_free(tpx__family *f) {
  if (!f)
    return;
  for (size_t i = 0; i < f->num_language; i++) free(f->language[i]);
  for (size_t i = 0; i < f->num_vision; i++) free(f->vision[i]);
  free(f->hf_prefix);
  free(f->inner_model);
  free(f->block_configs);
  memset(f, 0, sizeof *f);
}

const tpx__family *tpx__model_family(const tpx_model *model) {
  return &model->family;
}

tpx_status tpx_model_add_trait(tpx_model *model, const char *trait,
                               tpx_error *err) {
  if (!model || !trait)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_trait: NULL argument");
  /* the primary architecture, read in place (model.c owns the list) */
  const char *arch = model->num_architectures ? model->architectures[0] : NULL;
  if (!arch)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_model_add_trait: trait '%s': the model has no "
                         "architecture to apply it to",
                         trait);
  int applied = 0;
  tpx_status st = tpx__family_add(&model->family, trait, arch, &applied, err);
  if (st == TPX_OK && !applied)
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_model_add_trait: trait '%s' is about another "
                       "class than the model's architecture '%s'",
                       trait, arch);
  return st;
}
