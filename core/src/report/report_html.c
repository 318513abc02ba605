/* report_html.c — `tpx plan --html`: the planning report as one
 * self-contained page (inline CSS and SVG; no script, no network): the
 * verdict and diagnostics, per-rank memory as stacked bars, the module tree
 * with styles and placements, every parameter's block map by rank (hovering
 * a block shows its ranks, offsets and bytes through SVG <title>), and the
 * collectives around each styled module.
 *
 * Same facts as the text and JSON reports; repeated layers are collapsed
 * (a module list's consecutive children with identical subtrees, parameters
 * whose names differ only in numeric atoms). Not a printer: returns a
 * malloc'd string. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "model/model_view.h"
#include "model/strmap.h"
#include "report/report_util.h"
#include "tpx/fsdp.h"
#include "tpx/memory.h"
#include "tpx/tpx.h"

/* Ranks drawn per block map; larger worlds draw their first ranks. */
#define HTML_MAX_RANKS 256
/* Module tree nodes rendered before the tree is cut short. */
#define HTML_MAX_TREE_NODES 4000

static void esc(tpx__sbuf *b, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': tpx__sbuf_printf(b, "&amp;"); break;
    case '<': tpx__sbuf_printf(b, "&lt;"); break;
    case '>': tpx__sbuf_printf(b, "&gt;"); break;
    case '"': tpx__sbuf_printf(b, "&quot;"); break;
    default: tpx__sbuf_printf(b, "%c", *s);
    }
  }
}

static int atom_is_number(const char *p, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (p[i] < '0' || p[i] > '9') return 0;
  return 1;
}

/* fqn with every numeric atom replaced by "*" (malloc'd). */
static char *name_template(const char *fqn) {
  size_t n = strlen(fqn);
  char *t = malloc(n + 1);
  if (!t) return NULL;
  size_t o = 0;
  const char *p = fqn;
  for (;;) {
    const char *q = strchr(p, '.');
    size_t len = q ? (size_t)(q - p) : strlen(p);
    if (atom_is_number(p, len)) {
      t[o++] = '*';
    } else {
      memcpy(t + o, p, len);
      o += len;
    }
    if (!q) break;
    t[o++] = '.';
    p = q + 1;
  }
  t[o] = '\0';
  return t;
}

static void placements_html(tpx__sbuf *b, const tpx_sharding *sh,
                            const tpx_placement *pl) {
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  for (int d = 0; d < tpx_mesh_ndim(mesh); d++) {
    char buf[48];
    tpx_placement_format(pl[d], buf, sizeof buf);
    tpx__sbuf_printf(b, "%s%s=%s", d ? " " : "", tpx_mesh_dim_name(mesh, d),
                     buf);
  }
}

static void shape_html(tpx__sbuf *b, const tpx_param_info *pi) {
  tpx__sbuf_printf(b, "[");
  for (int d = 0; d < pi->ndim; d++)
    tpx__sbuf_printf(b, "%s%lld", d ? ", " : "", (long long)pi->shape[d]);
  tpx__sbuf_printf(b, "]");
}

/* Parameters of module m in insertion order (the model links them newest
 * first). *out is malloc'd (NULL when there are none); -1 on no memory. */
static int module_params(const tpx_model *model, int64_t m, int64_t **out,
                         size_t *n) {
  size_t count = 0;
  for (int64_t p = tpx__mv_module(model, m)->first_param; p >= 0;
       p = tpx__mv_param(model, p)->next_param)
    count++;
  *out = NULL;
  *n = count;
  if (!count) return 0;
  int64_t *v = malloc(count * sizeof *v);
  if (!v) return -1;
  size_t i = count;
  for (int64_t p = tpx__mv_module(model, m)->first_param; p >= 0;
       p = tpx__mv_param(model, p)->next_param)
    v[--i] = p;
  *out = v;
  return 0;
}

/* ---- header, verdict, diagnostics ---------------------------------------- */

static const char *const css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;"
    "max-width:1200px}"
    "h1{font-size:22px;margin:0 0 4px}h1 small{font-weight:normal;color:#666}"
    "h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}"
    ".ok{color:#17692f;font-weight:bold}.bad{color:#b3261e;font-weight:bold}"
    "table{border-collapse:collapse}td,th{padding:3px 8px;text-align:left;"
    "vertical-align:top;border-bottom:1px solid #eee}"
    ".error{color:#b3261e}.warning{color:#8a5a00}.info{color:#555}"
    ".fix{color:#555;font-size:13px}code,.mono{font-family:ui-monospace,"
    "monospace;font-size:12.5px}"
    "ul.tree{list-style:none;padding-left:18px;margin:0}"
    "ul.tree li{margin:1px 0}.kind{color:#777}.style{color:#0b57d0;"
    "font-weight:600}.rep{color:#777;font-style:italic}"
    ".param{color:#444}.bm{display:inline-block;margin:6px 18px 12px 0;"
    "vertical-align:top}.bm .cap{font-size:12px;max-width:380px;"
    "word-break:break-all}"
    ".legend span{display:inline-block;margin-right:14px}"
    ".legend i{display:inline-block;width:12px;height:12px;"
    "margin-right:4px;vertical-align:-1px}";

static void diag_rows(tpx__sbuf *b, const tpx_diag_list *list) {
  size_t n = list ? tpx_diag_count(list) : 0;
  for (size_t i = 0; i < n; i++) {
    tpx_diag d;
    if (tpx_diag_get(list, i, &d, NULL) != TPX_OK) continue;
    const char *lv = tpx_diag_level_name(d.level);
    tpx__sbuf_printf(b, "<tr class=\"%s\"><td>%s</td><td><code>", lv, lv);
    esc(b, d.code);
    tpx__sbuf_printf(b, "</code></td><td>");
    esc(b, d.message);
    if (d.fix && *d.fix) {
      tpx__sbuf_printf(b, "<div class=\"fix\">fix: ");
      esc(b, d.fix);
      tpx__sbuf_printf(b, "</div>");
    }
    tpx__sbuf_printf(b, "</td></tr>\n");
  }
}

static void header(tpx__sbuf *b, const tpx_sharding *sh,
                   const tpx_report_options *opts) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : "(no architecture)";
  char x[32];
  tpx__sbuf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
                      "charset=\"utf-8\"><title>tpx plan: ");
  esc(b, arch);
  tpx__sbuf_printf(b, "</title><style>%s</style></head><body>\n<h1>", css);
  esc(b, arch);
  tpx__sbuf_printf(b, " <small>");
  for (int d = 0; d < tpx_mesh_ndim(mesh); d++)
    tpx__sbuf_printf(b, "%s%s=%lld", d ? " × " : "", tpx_mesh_dim_name(mesh, d),
                     (long long)tpx_mesh_dim_size(mesh, d));
  tpx__sbuf_printf(b, " (world %lld)</small></h1>\n",
                   (long long)tpx_mesh_world_size(mesh));
  tpx__sbuf_printf(b, "<p>%lld parameters, %s",
                   (long long)tpx_model_total_params(model),
                   tpx_format_bytes(tpx_model_total_bytes(model), x, sizeof x));
  if (tpx_model_source(model)) {
    tpx__sbuf_printf(b, " — ");
    esc(b, tpx_model_source(model));
  }
  tpx__sbuf_printf(b, "<br>Plan: <b>");
  esc(b, opts->plan_source ? opts->plan_source : "custom");
  tpx__sbuf_printf(b, "</b>");
  if (opts->plugin_name) {
    tpx__sbuf_printf(b, ", plugin <code>");
    esc(b, opts->plugin_name);
    tpx__sbuf_printf(b, "</code>");
  }
  if (opts->function) {
    tpx__sbuf_printf(b, ", function <code>");
    esc(b, opts->function);
    tpx__sbuf_printf(b, "</code>");
  }
  tpx__sbuf_printf(b, "; sequence parallel %s; %zu plan entries</p>\n",
                   opts->sequence_parallel ? "on" : "off",
                   tpx_plan_size(tpx_sharding_plan(sh)));
  if (opts->num_trace && opts->trace) {
    tpx__sbuf_printf(b, "<details><summary>Why this plan</summary><ul>");
    for (size_t i = 0; i < opts->num_trace; i++) {
      if (!opts->trace[i]) continue;
      tpx__sbuf_printf(b, "<li>");
      esc(b, opts->trace[i]);
      tpx__sbuf_printf(b, "</li>");
    }
    tpx__sbuf_printf(b, "</ul></details>\n");
  }

  const tpx_diag_list *sd = opts->selection_diags;
  const tpx_diag_list *ad = tpx_sharding_diagnostics(sh);
  size_t nerr = (sd ? tpx_diag_count_at_least(sd, TPX_DIAG_ERROR) : 0) +
                tpx_diag_count_at_least(ad, TPX_DIAG_ERROR);
  size_t nd = (sd ? tpx_diag_count(sd) : 0) + tpx_diag_count(ad);
  if (nerr)
    tpx__sbuf_printf(b, "<p class=\"bad\" id=\"verdict\">NOT OK: %zu error%s"
                        "</p>\n", nerr, nerr == 1 ? "" : "s");
  else
    tpx__sbuf_printf(b, "<p class=\"ok\" id=\"verdict\">OK</p>\n");
  tpx__sbuf_printf(b, "<h2>Diagnostics (%zu)</h2>\n", nd);
  if (!nd) {
    tpx__sbuf_printf(b, "<p>none</p>\n");
    return;
  }
  tpx__sbuf_printf(b, "<table id=\"diagnostics\">\n");
  diag_rows(b, sd);
  diag_rows(b, ad);
  tpx__sbuf_printf(b, "</table>\n");
}

/* ---- per-rank memory ----------------------------------------------------- */

#define MEM_TERMS 5
static const char *const mem_term_names[MEM_TERMS] = {
    "parameters", "gradients", "optimizer state", "FSDP all-gather peak",
    "activations"};
static const char *const mem_term_colors[MEM_TERMS] = {
    "#4e79a7", "#59a14f", "#b07aa1", "#f28e2b", "#e15759"};

/* The training-memory terms of tpx/memory.h (options from the report). */
static int mem_terms(const tpx_sharding *sh, const tpx_memory_options *mo,
                     int64_t rank, int64_t out[MEM_TERMS]) {
  tpx_memory m;
  if (tpx_memory_rank(sh, mo, rank, &m, NULL) != TPX_OK) return -1;
  out[0] = m.params;
  out[1] = m.grads;
  out[2] = m.optimizer;
  out[3] = m.gather_peak;
  out[4] = m.activations;
  return 0;
}

/* Terms are >= 0; their sum saturates as tpx_memory's peak does. */
static int64_t sat_add(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static void memory(tpx__sbuf *b, const tpx_sharding *sh,
                   const tpx_memory_options *mo) {
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  int64_t drawn = world < HTML_MAX_RANKS ? world : HTML_MAX_RANKS;
  /* Group ranks with identical terms, in rank order of first appearance. */
  int64_t (*terms)[MEM_TERMS] = calloc((size_t)drawn, sizeof *terms);
  int64_t *group_of = malloc((size_t)drawn * sizeof *group_of);
  int64_t *first = malloc((size_t)drawn * sizeof *first);
  int64_t *count = calloc((size_t)drawn, sizeof *count);
  if (!terms || !group_of || !first || !count) {
    b->failed = 1;
    goto out;
  }
  int64_t ngroups = 0, max_total = 1;
  for (int64_t r = 0; r < drawn; r++) {
    if (mem_terms(sh, mo, r, terms[r]) != 0) {
      tpx__sbuf_printf(b, "<h2>Per-rank memory</h2>\n<p>unavailable</p>\n");
      goto out;
    }
    int64_t g = 0;
    while (g < ngroups &&
           memcmp(terms[first[g]], terms[r], sizeof terms[r]) != 0)
      g++;
    if (g == ngroups) first[ngroups++] = r;
    group_of[r] = g;
    count[g]++;
    int64_t total = 0;
    for (int t = 0; t < MEM_TERMS; t++) total = sat_add(total, terms[r][t]);
    if (total > max_total) max_total = total;
  }
  tpx__sbuf_printf(b, "<h2>Per-rank training memory</h2>\n<p>Optimizer %s; ",
                   tpx_optimizer_name(mo->optimizer));
  if (mo->seq > 0)
    tpx__sbuf_printf(b, "activations for batch %lld × seq %lld%s",
                     (long long)mo->batch, (long long)mo->seq,
                     mo->activation_checkpointing ? ", checkpointed" : "");
  else
    tpx__sbuf_printf(b, "no activations (give --seq to count them)");
  tpx__sbuf_printf(b, " (formulas: docs/MEMORY.md).</p>\n<p class=\"legend\">");
  for (int t = 0; t < MEM_TERMS; t++)
    tpx__sbuf_printf(b, "<span><i style=\"background:%s\"></i>%s</span>",
                     mem_term_colors[t], mem_term_names[t]);
  tpx__sbuf_printf(b, "</p>\n");
  if (drawn < world)
    tpx__sbuf_printf(b, "<p>First %lld of %lld ranks.</p>\n",
                     (long long)drawn, (long long)world);
  const int bar_w = 640, row_h = 22, label_w = 150;
  tpx__sbuf_printf(b, "<svg id=\"memory\" width=\"%d\" height=\"%lld\" "
                      "xmlns=\"http://www.w3.org/2000/svg\" "
                      "font-size=\"12\">\n",
                   label_w + bar_w + 120, (long long)(ngroups * row_h + 4));
  for (int64_t g = 0; g < ngroups; g++) {
    int64_t r0 = first[g], y = g * row_h + 2;
    char label[64], x[32];
    if (count[g] == 1)
      snprintf(label, sizeof label, "rank %lld", (long long)r0);
    else
      snprintf(label, sizeof label, "ranks %lld,… (%lld)", (long long)r0,
               (long long)count[g]);
    tpx__sbuf_printf(b, "<text x=\"0\" y=\"%lld\">%s</text>\n",
                     (long long)(y + 15), label);
    double x0 = label_w;
    int64_t total = 0;
    for (int t = 0; t < MEM_TERMS; t++) {
      double w = (double)terms[r0][t] / (double)max_total * bar_w;
      total = sat_add(total, terms[r0][t]);
      tpx__sbuf_printf(b, "<rect x=\"%.1f\" y=\"%lld\" width=\"%.1f\" "
                          "height=\"%d\" fill=\"%s\"><title>%s: %s (%lld "
                          "bytes)</title></rect>\n",
                       x0, (long long)y, w, row_h - 4, mem_term_colors[t],
                       mem_term_names[t],
                       tpx_format_bytes(terms[r0][t], x, sizeof x),
                       (long long)terms[r0][t]);
      x0 += w;
    }
    tpx__sbuf_printf(b, "<text x=\"%.1f\" y=\"%lld\">%s</text>\n", x0 + 6,
                     (long long)(y + 15), tpx_format_bytes(total, x, sizeof x));
  }
  tpx__sbuf_printf(b, "</svg>\n");
out:
  free(terms);
  free(group_of);
  free(first);
  free(count);
}

/* ---- module tree ----------------------------------------------------------- */

typedef struct {
  tpx__sbuf *b;
  const tpx_sharding *sh;
  size_t nodes; /* rendered so far */
} tree_ctx;

/* Signature of a subtree relative to its root: names, kinds, plan keys,
 * parameter shapes and placements. Two children of a module list with equal
 * signatures render once. */
static void subtree_sig(const tpx_sharding *sh, int64_t m, tpx__sbuf *sig) {
  const tpx_model *model = tpx_sharding_model(sh);
  tpx__sbuf_printf(sig, "(%d:%lld", (int)tpx_model_module_kind(model, m),
                   (long long)tpx_sharding_module_entry(sh, m));
  int64_t *params;
  size_t np;
  if (module_params(model, m, &params, &np) != 0) sig->failed = 1;
  for (size_t i = 0; i < np; i++) {
    tpx_param_info pi;
    tpx_param_sharding ps;
    if (tpx_model_param(model, params[i], &pi, NULL) != TPX_OK ||
        tpx_sharding_param(sh, params[i], &ps, NULL) != TPX_OK)
      continue;
    tpx__sbuf_printf(sig, " %s", pi.name);
    for (int d = 0; d < pi.ndim; d++)
      tpx__sbuf_printf(sig, ",%lld", (long long)pi.shape[d]);
    for (int d = 0; d < tpx_mesh_ndim(tpx_sharding_mesh(sh)); d++)
      tpx__sbuf_printf(sig, "/%d.%d", (int)ps.placements[d].kind,
                       (int)ps.placements[d].dim);
  }
  free(params);
  size_t nc = tpx_model_module_num_children(model, m);
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(model, m, i);
    const char *f = tpx_model_module_fqn(model, c);
    const char *dot = strrchr(f, '.');
    tpx__sbuf_printf(sig, " %s", dot ? dot + 1 : f);
    subtree_sig(sh, c, sig);
  }
  tpx__sbuf_printf(sig, ")");
}

static void tree_node(tree_ctx *t, int64_t m, int depth, const char *label);

static void tree_children(tree_ctx *t, int64_t m, int depth) {
  const tpx_model *model = tpx_sharding_model(t->sh);
  size_t nc = tpx_model_module_num_children(model, m);
  if (!nc) return;
  tpx__sbuf_printf(t->b, "<ul class=\"tree\">\n");
  size_t i = 0;
  while (i < nc) {
    if (t->nodes >= HTML_MAX_TREE_NODES) {
      tpx__sbuf_printf(t->b, "<li class=\"rep\">… (tree cut at %d modules)"
                             "</li>\n", HTML_MAX_TREE_NODES);
      break;
    }
    int64_t c = tpx_model_module_child(model, m, i);
    const char *f = tpx_model_module_fqn(model, c);
    const char *dot = strrchr(f, '.');
    const char *name = dot ? dot + 1 : f;
    size_t j = i + 1;
    if (atom_is_number(name, strlen(name))) {
      /* Run of numbered siblings with the same subtree. */
      tpx__sbuf s1 = {NULL, 0, 0, 0};
      subtree_sig(t->sh, c, &s1);
      while (j < nc) {
        int64_t c2 = tpx_model_module_child(model, m, j);
        const char *f2 = tpx_model_module_fqn(model, c2);
        const char *d2 = strrchr(f2, '.');
        const char *n2 = d2 ? d2 + 1 : f2;
        if (!atom_is_number(n2, strlen(n2))) break;
        tpx__sbuf s2 = {NULL, 0, 0, 0};
        subtree_sig(t->sh, c2, &s2);
        int same = s1.data && s2.data && strcmp(s1.data, s2.data) == 0;
        tpx__sbuf_free(&s2);
        if (!same) break;
        j++;
      }
      tpx__sbuf_free(&s1);
    }
    if (j - i > 1) {
      const char *lf = tpx_model_module_fqn(model,
                                            tpx_model_module_child(model, m, j - 1));
      const char *ld = strrchr(lf, '.');
      char label[96];
      snprintf(label, sizeof label, "%s … %s (%zu identical)", name,
               ld ? ld + 1 : lf, j - i);
      tree_node(t, c, depth, label);
    } else {
      tree_node(t, c, depth, name);
    }
    i = j;
  }
  tpx__sbuf_printf(t->b, "</ul>\n");
}

static void tree_node(tree_ctx *t, int64_t m, int depth, const char *label) {
  const tpx_model *model = tpx_sharding_model(t->sh);
  const tpx_plan *plan = tpx_sharding_plan(t->sh);
  t->nodes++;
  int64_t *params;
  size_t np;
  if (module_params(model, m, &params, &np) != 0) t->b->failed = 1;
  int has_kids = tpx_model_module_num_children(model, m) > 0 || np > 0;
  tpx__sbuf_printf(t->b, "<li>");
  if (has_kids)
    tpx__sbuf_printf(t->b, "<details%s><summary>", depth < 2 ? " open" : "");
  tpx__sbuf_printf(t->b, "<span class=\"mono\">");
  esc(t->b, label);
  tpx__sbuf_printf(t->b, "</span> <span class=\"kind\">%s</span>",
                   tpx_module_kind_name(tpx_model_module_kind(model, m)));
  int64_t e = tpx_sharding_module_entry(t->sh, m);
  tpx_plan_entry pe;
  if (e >= 0 && tpx_plan_get(plan, (size_t)e, &pe, NULL) == TPX_OK) {
    tpx__sbuf_printf(t->b, " <span class=\"style\">%s</span> <span "
                           "class=\"kind\">(",
                     tpx_style_kind_name(pe.style.kind));
    esc(t->b, pe.module);
    tpx__sbuf_printf(t->b, ")</span>");
  }
  if (!has_kids) {
    tpx__sbuf_printf(t->b, "</li>\n");
    return;
  }
  tpx__sbuf_printf(t->b, "</summary>\n");
  if (np) tpx__sbuf_printf(t->b, "<ul class=\"tree\">\n");
  for (size_t i = 0; i < np; i++) {
    int64_t p = params[i];
    tpx_param_info pi;
    tpx_param_sharding ps;
    if (tpx_model_param(model, p, &pi, NULL) != TPX_OK ||
        tpx_sharding_param(t->sh, p, &ps, NULL) != TPX_OK)
      continue;
    tpx__sbuf_printf(t->b, "<li class=\"param mono\">");
    esc(t->b, pi.name);
    tpx__sbuf_printf(t->b, " ");
    shape_html(t->b, &pi);
    tpx__sbuf_printf(t->b, " %s · ", tpx_dtype_short_name(pi.dtype));
    placements_html(t->b, t->sh, ps.placements);
    if (pi.tied_to >= 0) {
      tpx__sbuf_printf(t->b, " · tied to ");
      esc(t->b, tpx__mv_param(model, pi.tied_to)->fqn);
    }
    tpx__sbuf_printf(t->b, "</li>\n");
  }
  free(params);
  if (np) tpx__sbuf_printf(t->b, "</ul>\n");
  tree_children(t, m, depth + 1);
  tpx__sbuf_printf(t->b, "</details></li>\n");
}

static void module_tree(tpx__sbuf *b, const tpx_sharding *sh) {
  tree_ctx t = {b, sh, 0};
  tpx__sbuf_printf(b, "<h2>Module tree</h2>\n<ul class=\"tree\" "
                      "id=\"tree\">\n");
  tree_node(&t, 0, 0, "(root)");
  tpx__sbuf_printf(b, "</ul>\n");
}

/* ---- block maps ------------------------------------------------------------ */

/* One drawn block: a distinct box and the ranks holding it. */
typedef struct {
  tpx_slice s;
  int64_t first_rank, nranks, last_rank;
} block_t;

static void rank_list(char *out, size_t size, const block_t *k) {
  if (k->nranks == 1)
    snprintf(out, size, "rank %lld", (long long)k->first_rank);
  else
    snprintf(out, size, "ranks %lld…%lld (%lld)", (long long)k->first_rank,
             (long long)k->last_rank, (long long)k->nranks);
}

static void block_map(tpx__sbuf *b, const tpx_sharding *sh, int64_t p,
                      const char *title, int64_t copies) {
  const tpx_model *model = tpx_sharding_model(sh);
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  int64_t drawn = world < HTML_MAX_RANKS ? world : HTML_MAX_RANKS;
  tpx_param_info pi;
  tpx_param_sharding ps;
  if (tpx_model_param(model, p, &pi, NULL) != TPX_OK ||
      tpx_sharding_param(sh, p, &ps, NULL) != TPX_OK)
    return;
  block_t *blocks = malloc((size_t)drawn * sizeof *blocks);
  if (!blocks) {
    b->failed = 1;
    return;
  }
  size_t nb = 0;
  for (int64_t r = 0; r < drawn; r++) {
    tpx_slice s;
    if (tpx_sharding_local_slice(sh, p, r, &s, NULL) != TPX_OK) continue;
    size_t k = 0;
    while (k < nb && memcmp(&blocks[k].s, &s, sizeof s) != 0) k++;
    if (k == nb) {
      blocks[nb].s = s;
      blocks[nb].first_rank = r;
      blocks[nb].nranks = 0;
      nb++;
    }
    blocks[k].nranks++;
    blocks[k].last_rank = r;
  }
  /* Geometry: rows = dim 0, columns = dim 1 (1-D tensors are one row). */
  int64_t rows = pi.ndim >= 2 ? pi.shape[0] : 1;
  int64_t cols = pi.ndim >= 2 ? pi.shape[1] : (pi.ndim == 1 ? pi.shape[0] : 1);
  int rd = pi.ndim >= 2 ? 0 : -1, cd = pi.ndim >= 2 ? 1 : (pi.ndim ? 0 : -1);
  if (rows < 1) rows = 1;
  if (cols < 1) cols = 1;
  const double W = 320;
  double H = pi.ndim >= 2 ? W * (double)rows / (double)cols : 26;
  if (H < 26) H = 26;
  if (H > 220) H = 220;
  char x[32];
  tpx__sbuf_printf(b, "<div class=\"bm\"><div class=\"cap mono\">");
  esc(b, title);
  if (copies > 1) tpx__sbuf_printf(b, " <span class=\"rep\">×%lld</span>",
                                   (long long)copies);
  tpx__sbuf_printf(b, "<br>");
  shape_html(b, &pi);
  tpx__sbuf_printf(b, " · ");
  placements_html(b, sh, ps.placements);
  tpx__sbuf_printf(b, "</div>\n<svg width=\"%.0f\" height=\"%.0f\" "
                      "xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">\n",
                   W + 2, H + 2);
  for (size_t k = 0; k < nb; k++) {
    const tpx_slice *s = &blocks[k].s;
    double x0 = 1, y0 = 1, w = W, h = H;
    if (cd >= 0) {
      x0 = 1 + W * (double)s->offset[cd] / (double)cols;
      w = W * (double)s->length[cd] / (double)cols;
    }
    if (rd >= 0) {
      y0 = 1 + H * (double)s->offset[rd] / (double)rows;
      h = H * (double)s->length[rd] / (double)rows;
    }
    int hue = (int)((blocks[k].first_rank * 137) % 360);
    char who[64];
    rank_list(who, sizeof who, &blocks[k]);
    tpx__sbuf_printf(b, "<g><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                        "height=\"%.2f\" fill=\"hsl(%d,55%%,72%%)\" "
                        "stroke=\"#333\" stroke-width=\"0.5\"/><title>%s\n",
                     x0, y0, w, h, hue, who);
    for (int d = 0; d < s->ndim; d++)
      tpx__sbuf_printf(b, "%sdim %d: [%lld, %lld)", d ? ", " : "", d,
                       (long long)s->offset[d],
                       (long long)(s->offset[d] + s->length[d]));
    int64_t nbytes = tpx_slice_nbytes(s, pi.dtype);
    tpx__sbuf_printf(b, "\n%s (%lld bytes)%s</title>",
                     tpx_format_bytes(nbytes, x, sizeof x), (long long)nbytes,
                     tpx_slice_numel(s) == 0 ? " — empty shard" : "");
    if (w > 34 && h > 13)
      tpx__sbuf_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" "
                          "dominant-baseline=\"middle\">r%lld%s</text>",
                       x0 + w / 2, y0 + h / 2, (long long)blocks[k].first_rank,
                       blocks[k].nranks > 1 ? "+" : "");
    tpx__sbuf_printf(b, "</g>\n");
  }
  tpx__sbuf_printf(b, "</svg></div>\n");
  free(blocks);
}

static void block_maps(tpx__sbuf *b, const tpx_sharding *sh) {
  const tpx_model *model = tpx_sharding_model(sh);
  size_t np = tpx_model_num_params(model);
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  tpx__strmap seen = TPX__STRMAP_INIT;
  int64_t *reps = malloc((np ? np : 1) * sizeof *reps);
  int64_t *copies = calloc(np ? np : 1, sizeof *copies);
  char **titles = calloc(np ? np : 1, sizeof *titles);
  size_t nreps = 0;
  if (!reps || !copies || !titles) {
    b->failed = 1;
    goto out;
  }
  for (size_t p = 0; p < np; p++) {
    tpx_param_info pi;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK ||
        pi.tied_to >= 0)
      continue;
    char *t = name_template(pi.fqn);
    if (!t) {
      b->failed = 1;
      goto out;
    }
    int64_t idx = tpx__strmap_get(&seen, t, -1);
    if (idx >= 0) {
      copies[idx]++;
      free(t);
      continue;
    }
    if (tpx__strmap_put(&seen, t, strlen(t), (int64_t)nreps, NULL) != 0) {
      free(t);
      b->failed = 1;
      goto out;
    }
    titles[nreps] = t;
    reps[nreps] = (int64_t)p;
    copies[nreps] = 1;
    nreps++;
  }
  tpx__sbuf_printf(b, "<h2>Who holds what</h2>\n<p>Each parameter as its "
                      "blocks (rows = dim 0, columns = dim 1), coloured by "
                      "the first rank holding them; hover a block for its "
                      "ranks, offsets and bytes. Names with * stand for "
                      "every layer.%s</p>\n<div id=\"blocks\">\n",
                   world > HTML_MAX_RANKS ? " Only the first 256 ranks are "
                                            "drawn."
                                          : "");
  for (size_t i = 0; i < nreps; i++)
    block_map(b, sh, reps[i], titles[i], copies[i]);
  tpx__sbuf_printf(b, "</div>\n");
out:
  for (size_t i = 0; titles && i < nreps; i++) free(titles[i]);
  free(titles);
  free(reps);
  free(copies);
  tpx__strmap_free(&seen);
}

/* ---- collectives ----------------------------------------------------------- */

static void collectives(tpx__sbuf *b, const tpx_sharding *sh) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_plan *plan = tpx_sharding_plan(sh);
  size_t nm = tpx_model_num_modules(model), rows = 0;
  tpx__strmap seen = TPX__STRMAP_INIT;
  char **keys = NULL;
  size_t nkeys = 0, capkeys = 0;
  tpx__sbuf_printf(b, "<h2>Collectives around styled modules</h2>\n"
                      "<table id=\"collectives\"><tr><th>module</th><th>style"
                      "</th><th>side</th><th>layout</th><th>forward</th><th>"
                      "backward</th></tr>\n");
  for (size_t m = 0; m < nm; m++) {
    const tpx_transition *tr = NULL;
    size_t nt = 0;
    int64_t e = tpx_sharding_module_entry(sh, (int64_t)m);
    tpx_plan_entry pe;
    if (e < 0 || tpx_plan_get(plan, (size_t)e, &pe, NULL) != TPX_OK ||
        tpx_sharding_module_transitions(sh, (int64_t)m, &tr, &nt, NULL) !=
            TPX_OK ||
        !nt)
      continue;
    /* One row group per module template; the map borrows the keys, which
     * live in `keys` until the end. */
    char *t = name_template(tpx_model_module_fqn(model, (int64_t)m));
    if (t && tpx__strmap_get(&seen, t, -1) >= 0) {
      free(t);
      continue;
    }
    if (!t || TPX_GROW(keys, capkeys, nkeys + 1, 64)) {
      free(t);
      b->failed = 1;
      break;
    }
    keys[nkeys++] = t;
    if (tpx__strmap_put(&seen, t, strlen(t), 0, NULL) < 0) {
      b->failed = 1;
      break;
    }
    for (size_t i = 0; i < nt; i++) {
      tpx__sbuf_printf(b, "<tr><td class=\"mono\">");
      if (i == 0) esc(b, t);
      tpx__sbuf_printf(b, "</td><td>%s</td><td>%s %d</td><td class=\"mono\">",
                       i == 0 ? tpx_style_kind_name(pe.style.kind) : "",
                       tr[i].side == TPX_TRANSITION_INPUT ? "input" : "output",
                       tr[i].index);
      if (tr[i].from_is_none) {
        tpx__sbuf_printf(b, "pass-through</td><td></td><td></td></tr>\n");
        continue;
      }
      char f[48], to[48];
      tpx_placement_format(tr[i].from, f, sizeof f);
      tpx_placement_format(tr[i].to, to, sizeof to);
      tpx__sbuf_printf(b, "%s → %s</td><td>", f, to);
      esc(b, tr[i].forward);
      tpx__sbuf_printf(b, "</td><td>");
      esc(b, tr[i].backward);
      tpx__sbuf_printf(b, "</td></tr>\n");
    }
    rows++;
  }
  tpx__sbuf_printf(b, "</table>\n");
  if (!rows) tpx__sbuf_printf(b, "<p>none (no style applies at this tp)</p>\n");
  for (size_t i = 0; i < nkeys; i++) free(keys[i]);
  free(keys);
  tpx__strmap_free(&seen);
}

tpx_status tpx_report_html(const tpx_sharding *sh,
                           const tpx_report_options *opts, char **out,
                           tpx_error *err) {
  tpx_report_options def;
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_report_html: NULL sharding or out");
  *out = NULL;
  tpx_status ost = tpx__report_opts(opts, &def, "tpx_report_html", err);
  if (ost != TPX_OK) return ost;
  opts = &def;
  tpx__sbuf b = {NULL, 0, 0, 0};
  header(&b, sh, opts);
  tpx_memory_options mo = TPX_MEMORY_OPTIONS_INIT;
  memory(&b, sh, opts->memory ? opts->memory : &mo);
  module_tree(&b, sh);
  block_maps(&b, sh);
  collectives(&b, sh);
  tpx__sbuf_printf(&b, "<p class=\"info\">tpx %s</p>\n</body></html>\n",
                   tpx_version());
  if (b.failed) {
    tpx__sbuf_free(&b);
    return tpx_error_set(err, TPX_NO_MEMORY, "tpx_report_html: out of memory");
  }
  *out = b.data;
  return TPX_OK;
}
