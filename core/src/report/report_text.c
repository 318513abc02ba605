/* report_text.c — the planning report for a person: which plan and why, a
 * module -> style -> placements table with repeated layers collapsed
 * ("model.layers.{0..15}.self_attn.q_proj"), FSDP units, per-rank memory and
 * the diagnostics with their codes and fixes.
 *
 * Same facts as the JSON (report_json.c), shaped for reading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fqn.h"
#include "base/grow.h"
#include "model/expert_fold.h"
#include "model/strmap.h"
#include "report/report_buffers.h"
#include "report/report_memory.h"
#include "report/report_util.h"
#include "report/report_verdict.h"
#include "tpx/fsdp.h"
#include "tpx/validate.h"

#define MAX_NUM_ATOMS 8

/* One collapsed table row: every parameter whose FQN differs only in its
 * numeric atoms and which has the same name, shape, style and placements. */
typedef struct {
  char *key;     /* template + attributes; owned, the map borrows it */
  char *tmpl;    /* module FQN with "\x01" where a numeric atom stood */
  int64_t first; /* first parameter (its text is shown) */
  int64_t count;
  int nnum;
  int64_t *vals[MAX_NUM_ATOMS]; /* numbers seen per position */
  size_t nvals, capvals;
} row_t;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Split numbers out of fqn; tmpl gets \x01 placeholders. */
static int templ(const char *fqn, char *tmpl, size_t size, int64_t *nums) {
  return tpx__fqn_template(fqn, tmpl, size, '\x01', nums, MAX_NUM_ATOMS);
}

static void render_set(tpx__sbuf *b, int64_t *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_i64);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || v[u - 1] != v[i])
      v[u++] = v[i];
  if (u == 1) {
    tpx__sbuf_printf(b, "%lld", (long long)v[0]);
  } else if (v[u - 1] - v[0] + 1 == (int64_t)u) {
    tpx__sbuf_printf(b, "{%lld..%lld}", (long long)v[0], (long long)v[u - 1]);
  } else {
    tpx__sbuf_printf(b, "{");
    for (size_t i = 0; i < u && i < 8; i++)
      tpx__sbuf_printf(b, "%s%lld", i ? "," : "", (long long)v[i]);
    if (u > 8)
      tpx__sbuf_printf(b, ",...+%zu", u - 8);
    tpx__sbuf_printf(b, "}");
  }
}

static void render_module(tpx__sbuf *b, row_t *r) {
  int k = 0;
  for (const char *p = r->tmpl; *p; p++) {
    if (*p == '\x01' && k < r->nnum) {
      render_set(b, r->vals[k], r->nvals);
      k++;
    } else {
      tpx__sbuf_printf(b, "%c", *p);
    }
  }
}

/* Placements of parameter p over the dims of the mesh it lives on; an
 * expert parameter on the MoE mesh (ep > 1) says so first ("moe:"). */
static void placements_text(const tpx_sharding *sh, int64_t p,
                            const tpx_placement *pl, char *out, size_t size) {
  const tpx_mesh *mesh = tpx_sharding_param_mesh(sh, p);
  size_t o = 0;
  int all_one = tpx_mesh_world_size(mesh) == 1;
  out[0] = '\0';
  if (mesh == tpx_sharding_moe_mesh(sh)) {
    int w = snprintf(out, size, "moe:");
    o = w > 0 ? (size_t)w : 0;
  }
  for (int d = 0; d < tpx_mesh_ndim(mesh) && o < size; d++) {
    char buf[48];
    if (!all_one && tpx_mesh_dim_size(mesh, d) == 1)
      continue; /* noise */
    tpx_placement_format(pl[d], buf, sizeof buf);
    int w = snprintf(out + o, size - o, "%s%s=%s", o ? " " : "",
                     tpx_mesh_dim_name(mesh, d), buf);
    if (w < 0)
      break;
    o += (size_t)w;
  }
}

static void shape_text(const tpx_param_info *pi, char *out, size_t size) {
  size_t o = 0;
  int w = snprintf(out, size, "[");
  o = w > 0 ? (size_t)w : 0;
  for (int d = 0; d < pi->ndim && o < size; d++) {
    w = snprintf(out + o, size - o, "%s%lld", d ? ", " : "",
                 (long long)pi->shape[d]);
    if (w < 0)
      break;
    o += (size_t)w;
  }
  if (o < size)
    snprintf(out + o, size - o, "]");
}

/* The collapsed rows of the parameter table, and the map from a row key
 * to its index. */
typedef struct {
  row_t *rows;
  size_t n, cap;
  tpx__strmap map;
} row_table;

static void row_table_free(row_table *t) {
  for (size_t i = 0; i < t->n; i++) {
    free(t->rows[i].key);
    free(t->rows[i].tmpl);
    for (int k = 0; k < MAX_NUM_ATOMS; k++) free(t->rows[i].vals[k]);
  }
  free(t->rows);
  tpx__strmap_free(&t->map);
}

/* The row for `key` (klen bytes), a new one holding parameter p when the
 * key is new; NULL when out of memory. */
static row_t *row_for(row_table *t, const char *key, size_t klen,
                      const char *tmpl, int nnum, size_t p) {
  int64_t idx = -1;
  if (tpx__strmap_find(&t->map, key, klen, &idx))
    return &t->rows[idx];
  if (TPX_GROW(t->rows, t->cap, t->n + 1, 64))
    return NULL;
  row_t *r = &t->rows[t->n];
  memset(r, 0, sizeof *r);
  r->key = malloc(klen + 1);
  r->tmpl = malloc(strlen(tmpl) + 1);
  if (!r->key || !r->tmpl) {
    free(r->key);
    free(r->tmpl);
    return NULL;
  }
  memcpy(r->key, key, klen);
  r->key[klen] = '\0';
  strcpy(r->tmpl, tmpl);
  r->first = (int64_t)p;
  r->nnum = nnum;
  if (tpx__strmap_set(&t->map, r->key, klen, (int64_t)t->n) != 0) {
    free(r->key);
    free(r->tmpl);
    return NULL;
  }
  t->n++;
  return r;
}

/* Count one more parameter in row r, with the numbers of its FQN. 0 on
 * success, -1 when out of memory. */
static int row_count(row_t *r, const int64_t *nums) {
  r->count++;
  if (r->nnum <= 0)
    return 0;
  if (r->nvals == r->capvals) {
    size_t cap = r->capvals;
    for (int k = 0; k < r->nnum; k++) {
      cap = r->capvals; /* each column grows to the same size */
      if (TPX_GROW(r->vals[k], cap, r->nvals + 1, 8))
        return -1;
    }
    r->capvals = cap;
  }
  for (int k = 0; k < r->nnum; k++) r->vals[k][r->nvals] = nums[k];
  r->nvals++;
  return 0;
}

/* Every parameter into its row: same FQN up to numeric atoms, same name,
 * shape, dtype, plan entry, placements and fp32 flag. */
static void collect_rows(tpx__sbuf *b, const tpx_sharding *sh, row_table *t) {
  const tpx_model *model = tpx_sharding_model(sh);
  size_t np = tpx_model_num_params(model);
  /* tmpl and key grow with the FQN: fixed buffers truncated long names,
   * and two modules whose FQNs differed only past the cut shared a row. */
  char *tmpl = NULL, *key = NULL, pls[256], shp[128];
  size_t tcap = 0, kcap = 0;
  int64_t nums[MAX_NUM_ATOMS];
  for (size_t p = 0; p < np && !b->failed; p++) {
    tpx_param_info pi;
    tpx_param_sharding ps;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK ||
        tpx_sharding_param(sh, (int64_t)p, &ps, NULL) != TPX_OK)
      continue;
    const char *mfqn = tpx_model_module_fqn(model, pi.module);
    if (TPX_GROW(tmpl, tcap, strlen(mfqn) + 3, 1)) {
      b->failed = 1;
      break;
    }
    int n = templ(mfqn, tmpl, tcap, nums);
    placements_text(sh, (int64_t)p, ps.placements, pls, sizeof pls);
    shape_text(&pi, shp, sizeof shp);
    const char *dts = tpx_dtype_short_name(pi.dtype);
    size_t need = strlen(tmpl) + strlen(pi.name) + strlen(shp) + strlen(dts) +
                  strlen(pls) + 32;
    if (TPX_GROW(key, kcap, need, 1)) {
      b->failed = 1;
      break;
    }
    int kl = snprintf(key, kcap, "%s|%s|%s|%s|%lld|%s|%d", tmpl, pi.name, shp,
                      dts, (long long)ps.plan_entry, pls,
                      tpx_sharding_param_keeps_fp32(sh, (int64_t)p));
    if (kl < 0)
      continue;
    size_t klen = (size_t)kl < kcap ? (size_t)kl : kcap - 1;
    row_t *r = row_for(t, key, klen, tmpl, n, p);
    if (!r || row_count(r, nums) != 0)
      b->failed = 1;
  }
  free(tmpl);
  free(key);
}

/* The style name of the row's plan entry, or NULL. */
static const char *row_style(const tpx_sharding *sh, const row_t *r) {
  tpx_param_sharding ps;
  tpx_plan_entry pe;
  if (tpx_sharding_param(sh, r->first, &ps, NULL) != TPX_OK ||
      ps.plan_entry < 0 || !ps.plan_key ||
      tpx_plan_get(tpx_sharding_plan(sh), (size_t)ps.plan_entry, &pe, NULL) !=
          TPX_OK)
    return NULL;
  return tpx_style_kind_name(pe.style.kind);
}

/* The rows' collapsed names (names[i], owned) and the column widths. */
static void measure_rows(tpx__sbuf *b, const tpx_sharding *sh,
                         const row_table *t, char **names, size_t *w_name,
                         size_t *w_shape, size_t *w_style) {
  const tpx_model *model = tpx_sharding_model(sh);
  char shp[128];
  for (size_t i = 0; i < t->n && !b->failed; i++) {
    tpx__sbuf nb = {NULL, 0, 0, 0};
    tpx_param_info pi;
    if (tpx_model_param(model, t->rows[i].first, &pi, NULL) != TPX_OK)
      continue;
    render_module(&nb, &t->rows[i]);
    tpx__sbuf_printf(&nb, "%s%s", *t->rows[i].tmpl ? "." : "", pi.name);
    if (nb.failed) {
      b->failed = 1;
      tpx__sbuf_free(&nb);
      break;
    }
    /* The buffer starts at 4 KiB: kept per row, a million rows held GBs. */
    char *fit = realloc(nb.data, nb.len + 1);
    names[i] = fit ? fit : nb.data;
    if (nb.len > *w_name)
      *w_name = nb.len;
    shape_text(&pi, shp, sizeof shp);
    size_t sl = strlen(shp) + 1 + strlen(tpx_dtype_short_name(pi.dtype));
    if (sl > *w_shape)
      *w_shape = sl;
    const char *style = row_style(sh, &t->rows[i]);
    if (style && strlen(style) > *w_style)
      *w_style = strlen(style);
  }
  if (*w_name > 90)
    *w_name = 90;
}

/* One line: name, shape and dtype, style, placements, and what else. */
static void print_row(tpx__sbuf *b, const tpx_sharding *sh, const row_t *r,
                      const char *name, size_t w_name, size_t w_shape,
                      size_t w_style) {
  const tpx_model *model = tpx_sharding_model(sh);
  tpx_param_info pi;
  tpx_param_sharding ps;
  if (!name || tpx_model_param(model, r->first, &pi, NULL) != TPX_OK ||
      tpx_sharding_param(sh, r->first, &ps, NULL) != TPX_OK)
    return;
  char sd[160], shp[128], pls[256];
  shape_text(&pi, shp, sizeof shp);
  snprintf(sd, sizeof sd, "%s %s", shp, tpx_dtype_short_name(pi.dtype));
  const char *style = row_style(sh, r);
  placements_text(sh, r->first, ps.placements, pls, sizeof pls);
  tpx__sbuf_printf(b, "  %-*s  %-*s  %-*s  %s", (int)w_name, name, (int)w_shape,
                   sd, (int)w_style, style ? style : "-", pls);
  if (r->count > 1)
    tpx__sbuf_printf(b, "  x%lld", (long long)r->count);
  if (tpx_sharding_param_keeps_fp32(sh, r->first))
    tpx__sbuf_printf(b, "  (kept in fp32)");
  if (pi.tied_to >= 0) {
    tpx_param_info ti;
    if (tpx_model_param(model, pi.tied_to, &ti, NULL) == TPX_OK)
      tpx__sbuf_printf(b, "  (tied to %s)", ti.fqn);
  }
  tpx__sbuf_printf(b, "\n");
}

/* The parameter table, one row per group of parameters that differ only
 * in their layer indices. */
static void table(tpx__sbuf *b, const tpx_sharding *sh) {
  row_table t = {NULL, 0, 0, TPX__STRMAP_INIT};
  collect_rows(b, sh, &t);
  /* Render the collapsed names first to size the columns. */
  char **names = calloc(t.n ? t.n : 1, sizeof *names);
  size_t w_name = 18, w_shape = 11, w_style = 5;
  if (!names)
    b->failed = 1;
  if (!b->failed)
    measure_rows(b, sh, &t, names, &w_name, &w_shape, &w_style);
  tpx__sbuf_printf(b, "  %-*s  %-*s  %-*s  %s\n", (int)w_name,
                   "module.parameter", (int)w_shape, "shape dtype",
                   (int)w_style, "style", "placements");
  for (size_t i = 0; i < t.n && !b->failed; i++)
    print_row(b, sh, &t.rows[i], names[i], w_name, w_shape, w_style);
  if (names)
    for (size_t i = 0; i < t.n; i++) free(names[i]);
  free(names);
  row_table_free(&t);
}

/* Styled modules with their collectives, one line per (key, module class). */
static void collectives(tpx__sbuf *b, const tpx_sharding *sh) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_plan *plan = tpx_sharding_plan(sh);
  size_t ne = tpx_plan_size(plan), nm = tpx_model_num_modules(model);
  int64_t *first = malloc((ne ? ne : 1) * sizeof *first);
  int64_t *count = calloc(ne ? ne : 1, sizeof *count);
  if (!first || !count) {
    free(first);
    free(count);
    b->failed = 1;
    return;
  }
  for (size_t e = 0; e < ne; e++) first[e] = -1;
  for (size_t m = 0; m < nm; m++) {
    int64_t e = tpx_sharding_module_entry(sh, (int64_t)m);
    if (e < 0 || (size_t)e >= ne)
      continue;
    if (first[e] < 0)
      first[e] = (int64_t)m;
    count[e]++;
  }
  int any = 0;
  for (size_t e = 0; e < ne; e++) {
    if (first[e] < 0)
      continue;
    const tpx_transition *tr = NULL;
    size_t nt = 0;
    tpx_sharding_module_transitions(sh, first[e], &tr, &nt, NULL);
    if (!nt)
      continue;
    tpx_plan_entry pe;
    if (tpx_plan_get(plan, e, &pe, NULL) != TPX_OK)
      continue;
    if (!any)
      tpx__sbuf_printf(
          b, "\nCollectives per styled module (forward / backward):\n");
    any = 1;
    tpx__sbuf_printf(b, "  %s  [%s, %lld module%s]\n", pe.module,
                     tpx_style_kind_name(pe.style.kind), (long long)count[e],
                     count[e] == 1 ? "" : "s");
    for (size_t i = 0; i < nt; i++) {
      char f[48], t[48];
      if (tr[i].from_is_none) {
        tpx__sbuf_printf(b, "    %s %d: pass-through\n",
                         tr[i].side == TPX_TRANSITION_INPUT ? "input"
                                                            : "output",
                         tr[i].index);
        continue;
      }
      tpx_placement_format(tr[i].from, f, sizeof f);
      tpx_placement_format(tr[i].to, t, sizeof t);
      tpx__sbuf_printf(b, "    %-6s %d: %s -> %s: %s / %s\n",
                       tr[i].side == TPX_TRANSITION_INPUT ? "input" : "output",
                       tr[i].index, f, t, tr[i].forward, tr[i].backward);
    }
  }
  free(first);
  free(count);
}

/* Parameters kept in fp32: one line per pattern with its match count. */
static void fp32_lines(tpx__sbuf *b, const tpx_sharding *sh) {
  size_t n = tpx_sharding_num_fp32_patterns(sh);
  if (!n)
    return;
  tpx__sbuf_printf(b, "  kept in fp32 (held and all-gathered in f32, no "
                      "param-dtype cast):\n");
  for (size_t i = 0; i < n; i++) {
    size_t matched = 0;
    const char *pat = tpx_sharding_fp32_pattern(sh, i, &matched);
    tpx__sbuf_printf(b, "    %s: %zu parameter%s\n", pat, matched,
                     matched == 1 ? "" : "s");
  }
}

/* A routed-experts unit (ep > 1) shards over ep_shard on the MoE mesh. */
static const char *over_ep_shard(const tpx_sharding *sh, size_t unit) {
  const char *dim = tpx_sharding_fsdp_unit_dim(sh, unit);
  return dim && strcmp(dim, "ep_shard") == 0 ? ", over ep_shard (MoE mesh)"
                                             : "";
}

static void fsdp_section(tpx__sbuf *b, const tpx_sharding *sh) {
  size_t n = tpx_sharding_num_fsdp_units(sh);
  if (!n) {
    tpx__sbuf_printf(b, "\nFSDP: off\n");
    fp32_lines(b, sh);
    return;
  }
  tpx__sbuf_printf(b, "\nFSDP2: %zu units (bottom-up, root last)\n", n);
  int64_t over = 1;
  const char *view = tpx_sharding_fsdp_mesh_name(sh, &over);
  /* Said only where it is not plain dp_shard (cp > 1): reports of cp-less
   * meshes stay as they were. */
  if (view && strcmp(view, "dp_shard") != 0)
    tpx__sbuf_printf(b,
                     "  sharded over %s (%lld ranks: one torch.chunk of dim "
                     "0, docs/SEMANTICS.md \"Context parallelism\")\n",
                     view, (long long)over);
  tpx_mp_policy mp = tpx_sharding_mp_policy(sh);
  tpx__sbuf_printf(
      b, "  mixed precision: param %s, reduce %s, output %s\n",
      mp.param_dtype ? tpx_dtype_short_name(mp.param_dtype) : "none",
      mp.reduce_dtype ? tpx_dtype_short_name(mp.reduce_dtype) : "none",
      mp.output_dtype ? tpx_dtype_short_name(mp.output_dtype) : "none");
  fp32_lines(b, sh);
  /* Collapse consecutive units that differ only in numbers. */
  size_t i = 0;
  while (i < n) {
    tpx_fsdp_unit u;
    if (tpx_sharding_fsdp_unit(sh, i, &u, NULL) != TPX_OK)
      break;
    char t1[512];
    int64_t nums[MAX_NUM_ATOMS];
    templ(u.fqn, t1, sizeof t1, nums);
    size_t j = i + 1;
    size_t resharded = (size_t)u.reshard_after_forward;
    const char *last_no = u.reshard_after_forward ? NULL : u.fqn;
    while (j < n && !u.is_root) {
      tpx_fsdp_unit v;
      char t2[512];
      int64_t n2[MAX_NUM_ATOMS];
      if (tpx_sharding_fsdp_unit(sh, j, &v, NULL) != TPX_OK || v.is_root ||
          v.group != u.group)
        break;
      templ(v.fqn, t2, sizeof t2, n2);
      if (strcmp(t1, t2) != 0)
        break;
      resharded += (size_t)v.reshard_after_forward;
      if (!v.reshard_after_forward)
        last_no = v.fqn;
      j++;
    }
    if (u.is_root) {
      tpx__sbuf_printf(b, "  (root)  %zu params, reshard_after_forward=%s\n",
                       u.num_params,
                       u.reshard_after_forward ? "true" : "false");
    } else if (j - i == 1) {
      tpx__sbuf_printf(b, "  %s  %zu params, reshard_after_forward=%s%s\n",
                       u.fqn, u.num_params,
                       u.reshard_after_forward ? "true" : "false",
                       over_ep_shard(sh, i));
    } else {
      tpx_fsdp_unit l;
      tpx_sharding_fsdp_unit(sh, j - 1, &l, NULL);
      tpx__sbuf_printf(b,
                       "  %s .. %s  (%zu units), reshard_after_forward=true "
                       "for %zu",
                       u.fqn, l.fqn, j - i, resharded);
      if (last_no)
        tpx__sbuf_printf(b, ", false for %s", last_no);
      tpx__sbuf_printf(b, "; prefetch fwd %zu / bwd up to %zu%s\n",
                       u.num_fwd_prefetch, l.num_bwd_prefetch,
                       over_ep_shard(sh, i));
    }
    i = j;
  }
}

static void memory_section(tpx__sbuf *b, const tpx_sharding *sh) {
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  int64_t world = tpx_mesh_world_size(mesh);
  char a[32], c[32];
  tpx__sbuf_printf(b, "\nPer-rank parameter memory (sharded state; peak while "
                      "FSDP units are gathered):\n");
  int64_t r = 0;
  size_t groups = 0;
  /* Group ranks with identical figures; list each distinct figure once. */
  uint8_t *done = calloc((size_t)world, 1);
  if (!done) {
    b->failed = 1;
    return;
  }
  for (r = 0; r < world && groups < 16; r++) {
    if (done[r])
      continue;
    int64_t pb = tpx_sharding_rank_param_bytes(sh, r);
    int64_t pk = tpx_sharding_rank_peak_bytes(sh, r);
    int64_t cnt = 0, lo = r, hi = r, contiguous = 1;
    for (int64_t q = r; q < world; q++) {
      if (done[q] || tpx_sharding_rank_param_bytes(sh, q) != pb ||
          tpx_sharding_rank_peak_bytes(sh, q) != pk)
        continue;
      done[q] = 1;
      if (q != hi + 1 && q != r)
        contiguous = 0;
      hi = q;
      cnt++;
    }
    tpx__sbuf_printf(b, "  rank%s ", cnt > 1 ? "s" : "");
    if (cnt == 1)
      tpx__sbuf_printf(b, "%lld", (long long)lo);
    else if (contiguous)
      tpx__sbuf_printf(b, "%lld-%lld", (long long)lo, (long long)hi);
    else
      tpx__sbuf_printf(b, "%lld,... (%lld ranks)", (long long)lo,
                       (long long)cnt);
    tpx__sbuf_pad(b, 24);
    tpx__sbuf_printf(b, "%s (%lld bytes), peak %s\n",
                     tpx_format_bytes(pb, a, sizeof a), (long long)pb,
                     tpx_format_bytes(pk, c, sizeof c));
    groups++;
  }
  /* The loop stops after 16 groups; ranks already listed in those groups
   * may lie beyond r, so only an unlisted rank means more. */
  while (r < world && done[r]) r++;
  if (r < world)
    tpx__sbuf_printf(b, "  ... (more ranks in the JSON report)\n");
  free(done);
}

/* The model (sources, other namings, conversion) and the mesh(es). */
static void model_and_mesh(tpx__sbuf *b, const tpx_sharding *sh) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  char x[32];
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : "(no architecture)";
  tpx_dtype dt = tpx__report_model_dtype(model);
  tpx__sbuf_printf(b, "Model: %s", arch);
  if (tpx_model_source(model))
    tpx__sbuf_printf(b, " (%s)", tpx_model_source(model));
  tpx__sbuf_printf(b, "\n  %lld parameters, %s%s%s\n",
                   (long long)tpx_model_total_params(model),
                   tpx_format_bytes(tpx_model_total_bytes(model), x, sizeof x),
                   dt ? ", " : "", dt ? tpx_dtype_short_name(dt) : "");
  /* Other namings of the same tensors (a checkpoint under either matches). */
  for (size_t i = 0; i < tpx_model_num_name_aliases(model); i++) {
    const char *from = NULL, *to = NULL;
    tpx_model_name_alias(model, i, &from, &to, NULL);
    tpx__sbuf_printf(b, "  also named: %s.* = %s.*\n", from, to);
  }
  if (tpx_model_conversion_note(model))
    tpx__sbuf_printf(b, "  converted: %s\n", tpx_model_conversion_note(model));
  tpx__sbuf_printf(b, "Mesh:");
  for (int d = 0; d < tpx_mesh_ndim(mesh); d++)
    tpx__sbuf_printf(b, " %s=%lld", tpx_mesh_dim_name(mesh, d),
                     (long long)tpx_mesh_dim_size(mesh, d));
  tpx__sbuf_printf(b, " (world %lld)\n", (long long)tpx_mesh_world_size(mesh));
  const tpx_mesh *moe = tpx_sharding_moe_mesh(sh);
  if (moe)
    tpx__sbuf_printf(b,
                     "MoE mesh: ep_shard=%lld ep=%lld (the same ranks, %lld "
                     "consecutive per EP group; expert parameters live on "
                     "it, marked moe: below)\n",
                     (long long)tpx_mesh_dim_size(moe, 0),
                     (long long)tpx_mesh_dim_size(moe, 1),
                     (long long)tpx_mesh_dim_size(moe, 1));
}

/* How the parameters are stored in the checkpoint, where not one tensor
 * each: fused experts, transposed sources, split tensors. */
static void stored_notes(tpx__sbuf *b, const tpx_model *model) {
  const char *fold_note = tpx__expert_fold_note(model);
  if (fold_note)
    tpx__sbuf_printf(b, "  Fused experts: %s\n", fold_note);
  const char *src_note = tpx__fold_sources_note(model);
  if (src_note)
    tpx__sbuf_printf(b, "  Stored transposed: %s\n", src_note);
  char split_buf[1200];
  const char *split_note =
      tpx__fold_split_note(model, split_buf, sizeof split_buf);
  if (split_note)
    tpx__sbuf_printf(b, "  Stored split: %s\n", split_note);
}

tpx_status tpx_report_text(const tpx_sharding *sh,
                           const tpx_report_options *opts, char **out,
                           tpx_error *err) {
  tpx_report_options def;
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_report_text: NULL sharding or out");
  *out = NULL;
  tpx_status ost = tpx__report_opts(opts, &def, "tpx_report_text", err);
  if (ost != TPX_OK)
    return ost;
  opts = &def;
  tpx_status mst = tpx__report_memory_check(sh, opts->memory, err);
  if (mst != TPX_OK)
    return mst;
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_plan *plan = tpx_sharding_plan(sh);
  tpx__sbuf b = {NULL, 0, 0, 0};
  tpx__report_verdict(&b, sh, opts);
  tpx__sbuf_printf(&b, "\n");

  model_and_mesh(&b, sh);

  tpx__sbuf_printf(&b, "\nPlan: %s",
                   opts->plan_source ? opts->plan_source : "custom");
  if (opts->plugin_name)
    tpx__sbuf_printf(&b, " (plugin '%s'", opts->plugin_name);
  if (opts->function)
    tpx__sbuf_printf(&b, "%sfunction %s", opts->plugin_name ? ", " : " (",
                     opts->function);
  if (opts->plugin_name || opts->function)
    tpx__sbuf_printf(&b, ")");
  if (opts->plugin_path)
    tpx__sbuf_printf(&b, " from %s", opts->plugin_path);
  tpx__sbuf_printf(&b, "; sequence parallel %s; %zu entries\n",
                   opts->sequence_parallel ? "on" : "off", tpx_plan_size(plan));
  tpx__sbuf_printf(&b,
                   "Upstream: %s behaviour (validate_tp_mesh at tp > 1 "
                   "for every plan, before choosing it; untied input and "
                   "output embeddings as FSDP units)\n",
                   TPX_UPSTREAM_VERSION);
  if (opts->num_strategy) {
    const char *name = tpx__report_strategy(opts, "name");
    tpx__sbuf_printf(&b, "Strategy: %s\n", name ? name : "(unnamed)");
    for (size_t i = 0; opts->strategy && i < opts->num_strategy; i++) {
      const char *kv = opts->strategy[i], *eq = kv ? strchr(kv, '=') : NULL;
      if (!eq || strncmp(kv, "name=", 5) == 0)
        continue;
      tpx__sbuf_printf(&b, "  %.*s: %s\n", (int)(eq - kv), kv, eq + 1);
    }
  }
  if (opts->num_trace) {
    tpx__sbuf_printf(&b, "Why:\n");
    for (size_t i = 0; i < opts->num_trace; i++)
      if (opts->trace && opts->trace[i])
        tpx__sbuf_printf(&b, "  - %s\n", opts->trace[i]);
  }
  for (size_t i = 0; i < tpx_plan_size(plan); i++) {
    tpx_plan_entry pe;
    if (tpx_plan_get(plan, i, &pe, NULL) != TPX_OK)
      continue;
    tpx__sbuf_printf(&b, "  %-50s %s%s\n", pe.module[0] ? pe.module : "\"\"",
                     tpx_style_kind_name(pe.style.kind),
                     pe.optional ? " (optional)" : "");
  }
  if (tpx_sharding_tp_size(sh) <= 1)
    tpx__sbuf_printf(&b, "  (tp = 1: the plan is matched but not applied, as "
                         "Automodel skips tensor parallelism at tp 1)\n");

  tpx_head_counts hc = TPX_HEAD_COUNTS_INIT;
  if (tpx_head_counts_after_tp(model, plan, tpx_sharding_tp_size(sh), &hc,
                               NULL) == TPX_OK &&
      hc.heads >= 0) {
    tpx__sbuf_printf(&b, "Attention: %lld heads, %lld kv heads, head_dim %lld",
                     (long long)hc.heads, (long long)hc.kv_heads,
                     (long long)hc.head_dim);
    int64_t tp = tpx_sharding_tp_size(sh);
    if (hc.rewritten && !tpx__report_heads_split(&hc, tp))
      tpx__sbuf_printf(&b,
                       "; tp %lld cannot split them per rank "
                       "(heads-not-divisible)\n",
                       (long long)tp);
    else if (hc.rewritten)
      tpx__sbuf_printf(&b, "; per rank after TP: %lld heads, %lld kv heads\n",
                       (long long)hc.local_heads, (long long)hc.local_kv_heads);
    else
      tpx__sbuf_printf(&b, "; not head-sharded\n");
  }

  tpx__sbuf_printf(&b, "\nParameters (identical layers collapsed):\n");
  table(&b, sh);
  stored_notes(&b, model);
  tpx__report_buffers_text(&b, model);
  collectives(&b, sh);
  fsdp_section(&b, sh);
  memory_section(&b, sh);
  tpx__report_memory_text(&b, sh, opts->memory);

  const tpx_diag_list *sd = opts->selection_diags;
  const tpx_diag_list *ad = tpx_sharding_diagnostics(sh);
  tpx__report_diagnostics(&b, sh, opts);
  size_t nerr = (sd ? tpx_diag_count_at_least(sd, TPX_DIAG_ERROR) : 0) +
                tpx_diag_count_at_least(ad, TPX_DIAG_ERROR);
  if (nerr)
    tpx__sbuf_printf(&b, "\nResult: NOT OK (%zu error%s)\n", nerr,
                     nerr == 1 ? "" : "s");
  else
    tpx__sbuf_printf(&b, "\nResult: OK\n");
  if (b.failed) {
    tpx__sbuf_free(&b);
    return tpx_error_set(err, TPX_NO_MEMORY, "tpx_report_text: out of memory");
  }
  *out = b.data;
  return TPX_OK;
}
