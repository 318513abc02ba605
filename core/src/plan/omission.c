/* omission.c — the one producer of the "replicated-by-omission" warning: a
 * parameter left replicated over tp because no plan key covers it, while
 * its look-alike is sharded — most likely a key forgotten from the plan
 * (docs/SEMANTICS.md "Plans and matching").
 *
 * Two rules, run at the two moments the facts exist: the sibling rule when
 * keys are matched (tpx_match_plan; which keys shard which modules), the
 * placement rule once the styles are applied (which parameters really are
 * sharded on tp). The names the first rule warned about travel in the
 * match, so the second names every parameter at most once. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fqn.h"
#include "base/grow.h"
#include "model/model_view.h"
#include "plan/match_internal.h"
#include "plan/plan_internal.h"

/* ---- the sibling rule (matching) ----
 *
 * A parameter whose module no key covers (no key matches the module or any
 * of its ancestors), while a sibling module (same parent) is sharded by a
 * parameter-sharding key and holds a parameter of the same name and shape
 * (e.g. v_proj next to sharded q_proj / k_proj). Reported once per
 * generalized name (numeric atoms as '*', so one line per layer stack). */

typedef struct omission {
  char *general;         /* "model.layers.*.self_attn.v_proj.weight" */
  int64_t param;         /* first parameter seen */
  int64_t sibling_param; /* its same-shaped sharded sibling */
  size_t entry;          /* the key sharding the sibling */
  size_t count;
} omission;

/* Kept in the match after reporting, for tpx__match_omitted. */
struct tpx__name_set {
  omission *items;
  size_t count, cap;
  int64_t *slots;
  size_t nslots;
  int oom;
};
typedef struct tpx__name_set omission_set;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static void omission_add(omission_set *os, const char *fqn, int64_t param,
                         int64_t sibling_param, size_t entry) {
  if (os->oom)
    return;
  char *g = tpx__fqn_generalize_dup(fqn);
  if (!g) {
    os->oom = 1;
    return;
  }
  uint64_t h = hash_str(g);
  if (os->nslots) {
    size_t mask = os->nslots - 1;
    for (size_t i = (size_t)h & mask; os->slots[i] >= 0; i = (i + 1) & mask) {
      omission *o = &os->items[os->slots[i]];
      if (strcmp(o->general, g) == 0) {
        o->count++;
        free(g);
        return;
      }
    }
  }
  if (TPX_GROW(os->items, os->cap, os->count + 1, 16)) {
    free(g);
    os->oom = 1;
    return;
  }
  if ((os->count + 1) * 2 > os->nslots) {
    size_t n = os->nslots ? os->nslots * 2 : 32;
    int64_t *sl = malloc(n * sizeof *sl);
    if (!sl) {
      free(g);
      os->oom = 1;
      return;
    }
    for (size_t i = 0; i < n; i++) sl[i] = -1;
    for (size_t k = 0; k < os->count; k++) {
      size_t i = (size_t)hash_str(os->items[k].general) & (n - 1);
      while (sl[i] >= 0) i = (i + 1) & (n - 1);
      sl[i] = (int64_t)k;
    }
    free(os->slots);
    os->slots = sl;
    os->nslots = n;
  }
  omission *o = &os->items[os->count];
  o->general = g;
  o->param = param;
  o->sibling_param = sibling_param;
  o->entry = entry;
  o->count = 1;
  size_t i = (size_t)h & (os->nslots - 1);
  while (os->slots[i] >= 0) i = (i + 1) & (os->nslots - 1);
  os->slots[i] = (int64_t)os->count++;
}

static int shards_params(const tpx_style *s) {
  return tpx_style_kind_traits(s->kind).shards_params;
}

static void format_shape(const tpx_param_info *p, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  len += (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < p->ndim && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "",
                            (long long)p->shape[i]);
  if (len < size)
    snprintf(buf + len, size - len, "]");
}

/* covered[mod] = 1 when `mod` or one of its ancestors is matched by a key.
 * torch's distribute_module runs its partition function for every submodule
 * of a styled module, so a parameter below a styled ancestor is placed by
 * that key (the report's plan_key says so) and is not "omitted". Memoized
 * walk up the parents; no recursion. */
static uint8_t *covered_modules(const tpx_match *m, const tpx_model *model) {
  int64_t nmod = m->nmodules;
  uint8_t *cov = malloc((size_t)nmod); /* 0 no, 1 yes, 2 unknown */
  int64_t *chain = malloc((size_t)nmod * sizeof *chain);
  if (!cov || !chain) {
    free(cov);
    free(chain);
    return NULL;
  }
  for (int64_t i = 0; i < nmod; i++) cov[i] = m->module_entry[i] >= 0 ? 1 : 2;
  for (int64_t i = 0; i < nmod; i++) {
    size_t n = 0;
    int64_t x = i;
    uint8_t v = 0;
    while (x >= 0 && x < nmod && cov[x] == 2 && n < (size_t)nmod) {
      chain[n++] = x;
      x = tpx__mv_parent(model, x);
    }
    if (x >= 0 && x < nmod && cov[x] != 2)
      v = cov[x];
    while (n) cov[chain[--n]] = v;
  }
  free(chain);
  return cov;
}

/* Parameters of module `mod` in index order (the model keeps them newest
 * first) into *buf, grown as needed; their count, or SIZE_MAX when out of
 * memory. */
static size_t module_params(const tpx_model *model, int64_t mod, int64_t **buf,
                            size_t *cap) {
  size_t n = tpx__mv_module_params(model, mod, *buf, *cap);
  if (n > *cap) {
    int64_t *b = realloc(*buf, n * sizeof *b);
    if (!b)
      return SIZE_MAX;
    *buf = b;
    *cap = n;
    tpx__mv_module_params(model, mod, b, n);
  }
  return n;
}

static int same_param_shape(const tpx_model *model, const tpx__param *a,
                            const tpx__param *b) {
  return a->ndim == b->ndim &&
         (a->ndim == 0 ||
          memcmp(tpx__mv_shape(model, a), tpx__mv_shape(model, b),
                 a->ndim * sizeof(int64_t)) == 0);
}

/* Modules that a colwise/rowwise-family key covers; "some child of this
 * parent is sharded" is the cheap filter before looking at parameters,
 * which are read per module from the model's lists. */
tpx_status tpx__omission_by_sibling(tpx_match *m, const tpx_plan *plan,
                                    const tpx_model *model,
                                    tpx_diag_list *diags) {
  size_t np = tpx_model_num_params(model);
  int64_t nmod = m->nmodules;
  if (np == 0 || nmod <= 0)
    return TPX_OK;
  /* Parents with at least one sharded child. */
  uint8_t *hot = calloc((size_t)nmod, 1);
  uint8_t *covered = NULL;
  int64_t *mine = NULL, *theirs = NULL;
  size_t cap_mine = 0, cap_theirs = 0;
  omission_set os;
  memset(&os, 0, sizeof os);
  tpx_status st = TPX_OK;
  if (!hot)
    return TPX_NO_MEMORY;
  int any = 0;
  for (int64_t mod = 0; mod < nmod; mod++) {
    int64_t e = m->module_entry[mod];
    if (e < 0 || !shards_params(tpx__plan_style(plan, (size_t)e)))
      continue;
    int64_t parent = tpx__mv_parent(model, mod);
    if (parent >= 0 && parent < nmod) {
      hot[parent] = 1;
      any = 1;
    }
  }
  if (!any)
    goto done;
  covered = covered_modules(m, model);
  if (!covered) {
    st = TPX_NO_MEMORY;
    goto done;
  }
  for (int64_t mod = 0; mod < nmod && !os.oom; mod++) {
    if (covered[mod])
      continue;
    int64_t parent = tpx__mv_parent(model, mod);
    if (parent < 0 || parent >= nmod || !hot[parent] ||
        tpx__mv_module(model, mod)->first_param < 0)
      continue;
    const tpx__module *pm = tpx__mv_module(model, parent);
    size_t nmine = module_params(model, mod, &mine, &cap_mine);
    if (nmine == SIZE_MAX) {
      os.oom = 1;
      break;
    }
    for (size_t pi = 0; pi < nmine && !os.oom; pi++) {
      const tpx__param *p = tpx__mv_param(model, mine[pi]);
      if (p->tied_to >= 0)
        continue; /* follows the tensor it aliases */
      int found = 0;
      for (size_t c = 0; c < pm->num_children && !found && !os.oom; c++) {
        int64_t sib = pm->children[c];
        if (sib < 0 || sib >= nmod || sib == mod)
          continue;
        int64_t e = m->module_entry[sib];
        if (e < 0 || !shards_params(tpx__plan_style(plan, (size_t)e)))
          continue;
        size_t ntheirs = module_params(model, sib, &theirs, &cap_theirs);
        if (ntheirs == SIZE_MAX) {
          os.oom = 1;
          break;
        }
        for (size_t si = 0; si < ntheirs; si++) {
          const tpx__param *q = tpx__mv_param(model, theirs[si]);
          if (strcmp(tpx__mv_param_name(q), tpx__mv_param_name(p)) == 0 &&
              same_param_shape(model, p, q)) {
            omission_add(&os, p->fqn, mine[pi], theirs[si], (size_t)e);
            found = 1;
            break;
          }
        }
      }
    }
  }
  if (os.oom) {
    st = TPX_NO_MEMORY;
    goto done;
  }
  for (size_t k = 0; k < os.count && diags; k++) {
    const omission *o = &os.items[k];
    tpx_param_info p, q;
    if (tpx_model_param(model, o->param, &p, NULL) != TPX_OK ||
        tpx_model_param(model, o->sibling_param, &q, NULL) != TPX_OK)
      continue;
    const char *mod = tpx_model_module_fqn(model, p.module);
    char shape[160], more[64] = "", fix[768];
    format_shape(&p, shape, sizeof shape);
    if (o->count > 1)
      snprintf(more, sizeof more, " (and %zu more like it)", o->count - 1);
    char *gmod = tpx__fqn_generalize_dup(mod ? mod : "");
    snprintf(fix, sizeof fix,
             "add a plan key for '%s' (as for its sibling), or ignore this "
             "if it is meant to stay replicated",
             gmod ? gmod : (mod ? mod : ""));
    free(gmod);
    tpx_diag_add(
        diags, TPX_DIAG_WARNING, "replicated-by-omission", o->general, fix,
        "parameter '%s' %s stays replicated: no plan key covers "
        "module '%s', while its sibling '%s' of the same shape is "
        "sharded by '%s' (%s)%s",
        p.fqn, shape, mod ? mod : "", q.fqn, tpx__plan_key(plan, o->entry),
        tpx_style_kind_name(tpx__plan_style(plan, o->entry)->kind), more);
  }
done:
  if (st == TPX_OK && os.count && (m->omitted = malloc(sizeof os)) != NULL) {
    *m->omitted = os; /* kept: the placement rule skips these names */
  } else {
    if (st == TPX_OK && os.count)
      st = TPX_NO_MEMORY;
    for (size_t k = 0; k < os.count; k++) free(os.items[k].general);
    free(os.items);
    free(os.slots);
  }
  free(hot);
  free(covered);
  free(mine);
  free(theirs);
  return st;
}

int tpx__match_omitted(const tpx_match *m, const char *general) {
  const omission_set *os = m ? m->omitted : NULL;
  if (!os || !os->nslots)
    return 0;
  size_t mask = os->nslots - 1;
  for (size_t i = (size_t)hash_str(general) & mask; os->slots[i] >= 0;
       i = (i + 1) & mask)
    if (strcmp(os->items[os->slots[i]].general, general) == 0)
      return 1;
  return 0;
}

void tpx__name_set_destroy(tpx__name_set *s) {
  if (!s)
    return;
  for (size_t k = 0; k < s->count; k++) free(s->items[k].general);
  free(s->items);
  free(s->slots);
  free(s);
}

/* ---- the placement rule (application) ---- */

/* Hash of (local name, ndim, shape): the prefilter for "same name and
 * shape"; equal hashes are confirmed field by field. */
static uint64_t shape_hash(const char *name, int ndim, const int64_t *shape) {
  uint64_t h = 1469598103934665603ULL;
  for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ULL;
  h = (h ^ (uint64_t)ndim) * 1099511628211ULL;
  for (int d = 0; d < ndim; d++)
    h = (h ^ (uint64_t)shape[d]) * 1099511628211ULL;
  return h ? h : 1;
}

static int same_name_shape(const tpx_param_info *a, const tpx_param_info *b) {
  if (a->ndim != b->ndim || strcmp(a->name, b->name) != 0)
    return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d])
      return 0;
  return 1;
}

static int sharded_on_tp(const tpx__omission_in *in, int64_t p) {
  tpx_placement pl = in->tp_placement[(size_t)p * in->stride];
  return pl.kind == TPX_SHARD || pl.kind == TPX_STRIDED_SHARD;
}

/* A parameter no key covers, while a same-named, same-shaped parameter at
 * the same place in another layer, or in a sibling module of the same
 * parent, is TP-sharded: likely a missing plan key. `phash` is nonzero for
 * the parameters compared (0 for aliases, scalars and key-covered ones);
 * this fills in shape_hash for the candidates. Sharded parameters are
 * hashed only when some candidate has their rank and first dim (`shapes`,
 * a one-word filter): a million sharded experts next to a few replicated
 * norms then cost a compare each. */
static int shape_bit(int ndim, const int64_t *shape) {
  uint64_t h = (uint64_t)ndim * 0x9e3779b97f4a7c15ULL ^
               (uint64_t)shape[0] * 0xc2b2ae3d27d4eb4fULL;
  return (int)(h >> 58);
}

static uint64_t param_hash(const tpx_model *model, int64_t p) {
  const tpx__param *r = tpx__mv_param(model, p);
  return shape_hash(tpx__mv_param_name(r), r->ndim, tpx__mv_shape(model, r));
}

tpx_status tpx__omission_by_placement(const tpx__omission_in *in,
                                      tpx_diag_list *diags, tpx_error *err) {
  const tpx_model *model = in->model;
  size_t np = in->num_params;
  uint64_t *phash = in->compare;
  tpx_status st = TPX_OK;
  int64_t *cand = NULL, *next = NULL, *example = NULL, *slots = NULL;
  size_t nc = 0, nslots = 0;
  char gen_a[512], gen_b[512];
  for (size_t p = 0; p < np; p++)
    if (in->param_styled[p] < 0 && phash[p])
      nc++;
  if (nc == 0)
    return TPX_OK;
  nslots = 16;
  while (nslots < nc * 2) nslots *= 2;
  cand = malloc(nc * sizeof *cand);
  next = malloc(nc * sizeof *next);
  example = malloc(nc * sizeof *example);
  slots = malloc(nslots * sizeof *slots);
  if (!cand || !next || !example || !slots) {
    st = tpx_error_set(err, TPX_NO_MEMORY,
                       "out of memory (omission candidates)");
    goto done;
  }
  for (size_t i = 0; i < nslots; i++) slots[i] = -1;
  nc = 0;
  /* Candidates chained per hash slot (slots hold the chain head). */
  uint64_t shapes = 0;
  for (size_t p = 0; p < np; p++) {
    if (in->param_styled[p] >= 0 || !phash[p])
      continue;
    const tpx__param *r = tpx__mv_param(model, (int64_t)p);
    shapes |= (uint64_t)1 << shape_bit(r->ndim, tpx__mv_shape(model, r));
    phash[p] = param_hash(model, (int64_t)p);
    size_t s = (size_t)phash[p] & (nslots - 1);
    cand[nc] = (int64_t)p;
    example[nc] = -1;
    next[nc] = slots[s];
    slots[s] = (int64_t)nc;
    nc++;
  }
  for (size_t p = 0; p < np; p++) {
    if (in->param_styled[p] < 0 || !phash[p] || !sharded_on_tp(in, (int64_t)p))
      continue;
    const tpx__param *r = tpx__mv_param(model, (int64_t)p);
    if (!((shapes >> shape_bit(r->ndim, tpx__mv_shape(model, r))) & 1))
      continue;
    uint64_t h = param_hash(model, (int64_t)p);
    int64_t c = slots[(size_t)h & (nslots - 1)];
    if (c < 0)
      continue;
    tpx_param_info pi;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK)
      continue;
    int64_t sparent = tpx_model_module_parent(model, pi.module);
    int have_gen = 0;
    for (; c >= 0; c = next[c]) {
      if (example[c] >= 0 || phash[cand[c]] != h)
        continue;
      tpx_param_info ci;
      if (tpx_model_param(model, cand[c], &ci, NULL) != TPX_OK ||
          !same_name_shape(&pi, &ci))
        continue;
      int hit = ci.module != pi.module &&
                tpx_model_module_parent(model, ci.module) == sparent;
      if (!hit) {
        if (!have_gen) {
          tpx__fqn_generalize(pi.fqn, gen_a, sizeof gen_a);
          have_gen = 1;
        }
        tpx__fqn_generalize(ci.fqn, gen_b, sizeof gen_b);
        hit = strcmp(gen_a, gen_b) == 0; /* same place in another layer */
      }
      if (hit)
        example[c] = (int64_t)p;
    }
  }
  /* One warning per generalized name, with the count of its parameters. */
  for (size_t c = 0; c < nc && st == TPX_OK; c++) {
    if (example[c] < 0)
      continue;
    tpx_param_info ci, si;
    if (tpx_model_param(model, cand[c], &ci, NULL) != TPX_OK ||
        tpx_model_param(model, example[c], &si, NULL) != TPX_OK)
      continue;
    tpx__fqn_generalize(ci.fqn, gen_b, sizeof gen_b);
    int64_t count = 1;
    for (size_t k = c + 1; k < nc; k++) {
      if (example[k] < 0)
        continue;
      tpx_param_info ki;
      if (tpx_model_param(model, cand[k], &ki, NULL) != TPX_OK)
        continue;
      tpx__fqn_generalize(ki.fqn, gen_a, sizeof gen_a);
      if (strcmp(gen_a, gen_b) == 0) {
        count++;
        example[k] = -1; /* reported with this one */
      }
    }
    /* matching warned about it already: one warning per parameter */
    if (tpx__match_omitted(in->match, gen_b))
      continue;
    char pl[48];
    tpx_placement_format(in->tp_placement[(size_t)example[c] * in->stride], pl,
                         sizeof pl);
    char more[64] = "";
    if (count > 1)
      snprintf(more, sizeof more, " (%lld parameters like it)",
               (long long)count);
    int64_t e = in->param_entry[example[c]];
    const char *key =
        e >= 0 && (size_t)e < in->num_entries ? in->entry_keys[e] : NULL;
    st = tpx_diag_add(diags, TPX_DIAG_WARNING, "replicated-by-omission", ci.fqn,
                      "add a plan key for its module if it should be sharded "
                      "like its siblings (or mark it intentionally replicated)",
                      "parameter '%s'%s is replicated because no plan key "
                      "covers it, while '%s' of the same name and shape is "
                      "sharded (%s on tp, key '%s')",
                      ci.fqn, more, si.fqn, pl, key);
    if (st != TPX_OK)
      st = tpx_error_set(err, st, "out of memory adding a diagnostic");
  }
done:
  free(cand);
  free(next);
  free(example);
  free(slots);
  return st;
}
