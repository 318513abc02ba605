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

#include "base/fqn.h"
#include "base/grow.h"
#include "model/model_view.h"
#include "model/strmap.h"
#include "report/report_buffers.h"
#include "report/report_util.h"
#include "tpx/fsdp.h"
#include "tpx/memory.h"
#include "tpx/version.h"

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

/* fqn with every numeric atom replaced by "*" (malloc'd). */
static char *name_template(const char *fqn) {
  return tpx__fqn_generalize_dup(fqn);
}

/* Over the dims of the mesh parameter p lives on ("moe:" first for the
 * MoE mesh, ep > 1). */
static void placements_html(tpx__sbuf *b, const tpx_sharding *sh, int64_t p,
                            const tpx_placement *pl) {
  const tpx_mesh *mesh = tpx_sharding_param_mesh(sh, p);
  if (mesh == tpx_sharding_moe_mesh(sh))
    tpx__sbuf_printf(b, "moe: ");
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
  size_t count = tpx__mv_module_params(model, m, NULL, 0);
  *out = NULL;
  *n = count;
  if (!count)
    return 0;
  int64_t *v = malloc(count * sizeof *v);
  if (!v)
    return -1;
  tpx__mv_module_params(model, m, v, count);
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

/* The rows of `list` at `level`, in list order. */
static void diag_rows(tpx__sbuf *b, const tpx_diag_list *list,
                      tpx_diag_level level) {
  size_t n = list ? tpx_diag_count(list) : 0;
  for (size_t i = 0; i < n; i++) {
    tpx_diag d;
    if (tpx_diag_get(list, i, &d, NULL) != TPX_OK || d.level != level)
      continue;
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
  size_t nbuf = tpx_model_num_buffers(model);
  if (nbuf)
    tpx__sbuf_printf(
        b, "; %zu buffer%s, %s, whole on every rank (never sharded)", nbuf,
        nbuf == 1 ? "" : "s",
        tpx_format_bytes(tpx__report_buffer_bytes(model), x, sizeof x));
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
      if (!opts->trace[i])
        continue;
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
    tpx__sbuf_printf(b,
                     "<p class=\"bad\" id=\"verdict\">NOT OK: %zu error%s"
                     "</p>\n",
                     nerr, nerr == 1 ? "" : "s");
  else
    tpx__sbuf_printf(b, "<p class=\"ok\" id=\"verdict\">OK</p>\n");
  tpx__sbuf_printf(b, "<h2>Diagnostics (%zu)</h2>\n", nd);
  if (!nd) {
    tpx__sbuf_printf(b, "<p>none</p>\n");
    return;
  }
  tpx__sbuf_printf(b, "<table id=\"diagnostics\">\n");
  /* Errors first, then warnings, then infos (selection's before the
   * sharding's within a level). */
  static const tpx_diag_level order[] = {TPX_DIAG_ERROR, TPX_DIAG_WARNING,
                                         TPX_DIAG_INFO};
  for (size_t l = 0; l < sizeof order / sizeof order[0]; l++) {
    diag_rows(b, sd, order[l]);
    diag_rows(b, ad, order[l]);
  }
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
  if (tpx_memory_rank(sh, mo, rank, &m, NULL) != TPX_OK)
    return -1;
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

/* The ranks of group g as ranges ("0-3, 8-11"), cut short with "…" past
 * about `width` pixels of 12px text. */
static void rank_ranges(tpx__sbuf *b, const int64_t *group_of, int64_t n,
                        int64_t g, int width) {
  size_t start = b->len;
  int first = 1;
  for (int64_t r = 0; r < n; r++) {
    if (group_of[r] != g || (r > 0 && group_of[r - 1] == g))
      continue;
    int64_t e = r;
    while (e + 1 < n && group_of[e + 1] == g) e++;
    if (b->len - start > (size_t)width / 8) {
      tpx__sbuf_printf(b, ", …");
      return;
    }
    if (e > r)
      tpx__sbuf_printf(b, "%s%lld-%lld", first ? "" : ", ", (long long)r,
                       (long long)e);
    else
      tpx__sbuf_printf(b, "%s%lld", first ? "" : ", ", (long long)r);
    first = 0;
  }
}

static void memory(tpx__sbuf *b, const tpx_sharding *sh,
                   const tpx_memory_options *mo) {
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  int64_t drawn = world < HTML_MAX_RANKS ? world : HTML_MAX_RANKS;
  /* Group ranks with identical terms, in rank order of first appearance. */
  int64_t(*terms)[MEM_TERMS] = calloc((size_t)drawn, sizeof *terms);
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
    if (g == ngroups)
      first[ngroups++] = r;
    group_of[r] = g;
    count[g]++;
    int64_t total = 0;
    for (int t = 0; t < MEM_TERMS; t++) total = sat_add(total, terms[r][t]);
    if (total > max_total)
      max_total = total;
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
    tpx__sbuf_printf(b, "<p>First %lld of %lld ranks.</p>\n", (long long)drawn,
                     (long long)world);
  /* A group's row: its ranks, the stacked bar, the total, and under the
   * bar every segment's figure. */
  const int bar_w = 640, row_h = 22, label_w = 170, group_h = 40;
  tpx__sbuf_printf(b,
                   "<svg id=\"memory\" width=\"%d\" height=\"%lld\" "
                   "xmlns=\"http://www.w3.org/2000/svg\" "
                   "font-size=\"12\">\n",
                   label_w + bar_w + 120, (long long)(ngroups * group_h + 4));
  for (int64_t g = 0; g < ngroups; g++) {
    int64_t r0 = first[g], y = g * group_h + 2;
    char x[32];
    tpx__sbuf_printf(b, "<text x=\"0\" y=\"%lld\">%s ", (long long)(y + 15),
                     count[g] == 1 ? "rank" : "ranks");
    rank_ranges(b, group_of, drawn, g, label_w);
    tpx__sbuf_printf(b, "</text>\n");
    double x0 = label_w;
    int64_t total = 0;
    for (int t = 0; t < MEM_TERMS; t++) {
      double w = (double)terms[r0][t] / (double)max_total * bar_w;
      total = sat_add(total, terms[r0][t]);
      tpx__sbuf_printf(
          b,
          "<rect x=\"%.1f\" y=\"%lld\" width=\"%.1f\" "
          "height=\"%d\" fill=\"%s\"><title>%s: %s (%lld "
          "bytes)</title></rect>\n",
          x0, (long long)y, w, row_h - 4, mem_term_colors[t], mem_term_names[t],
          tpx_format_bytes(terms[r0][t], x, sizeof x), (long long)terms[r0][t]);
      x0 += w;
    }
    tpx__sbuf_printf(b, "<text x=\"%.1f\" y=\"%lld\">%s</text>\n", x0 + 6,
                     (long long)(y + 15), tpx_format_bytes(total, x, sizeof x));
    /* Every segment's figure, in order, under the bar. */
    tpx__sbuf_printf(b,
                     "<text x=\"%d\" y=\"%lld\" font-size=\"11\" "
                     "fill=\"#444\">",
                     label_w, (long long)(y + row_h + 9));
    for (int t = 0; t < MEM_TERMS; t++)
      tpx__sbuf_printf(b, "%s%s %s", t ? " · " : "", mem_term_names[t],
                       tpx_format_bytes(terms[r0][t], x, sizeof x));
    tpx__sbuf_printf(b, "</text>\n");
  }
  tpx__sbuf_printf(b, "</svg>\n");
out:
  free(terms);
  free(group_of);
  free(first);
  free(count);
}

/* ---- module tree -----------------------------------------------------------
 */

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
  if (module_params(model, m, &params, &np) != 0)
    sig->failed = 1;
  for (size_t i = 0; i < np; i++) {
    tpx_param_info pi;
    tpx_param_sharding ps;
    if (tpx_model_param(model, params[i], &pi, NULL) != TPX_OK ||
        tpx_sharding_param(sh, params[i], &ps, NULL) != TPX_OK)
      continue;
    tpx__sbuf_printf(sig, " %s", pi.name);
    for (int d = 0; d < pi.ndim; d++)
      tpx__sbuf_printf(sig, ",%lld", (long long)pi.shape[d]);
    const tpx_mesh *pm = tpx_sharding_param_mesh(sh, params[i]);
    if (pm != tpx_sharding_mesh(sh))
      tpx__sbuf_printf(sig, "/moe");
    for (int d = 0; d < tpx_mesh_ndim(pm); d++)
      tpx__sbuf_printf(sig, "/%d.%d", (int)ps.placements[d].kind,
                       (int)ps.placements[d].dim);
  }
  free(params);
  size_t nc = tpx_model_module_num_children(model, m);
  for (size_t i = 0; i < nc; i++) {
    int64_t c = tpx_model_module_child(model, m, i);
    tpx__sbuf_printf(sig, " %s",
                     tpx__fqn_last_atom(tpx_model_module_fqn(model, c)));
    subtree_sig(sh, c, sig);
  }
  tpx__sbuf_printf(sig, ")");
}

static void tree_node(tree_ctx *t, int64_t m, int depth, const char *label);

static void tree_children(tree_ctx *t, int64_t m, int depth) {
  const tpx_model *model = tpx_sharding_model(t->sh);
  size_t nc = tpx_model_module_num_children(model, m);
  if (!nc)
    return;
  tpx__sbuf_printf(t->b, "<ul class=\"tree\">\n");
  size_t i = 0;
  while (i < nc) {
    if (t->nodes >= HTML_MAX_TREE_NODES) {
      tpx__sbuf_printf(t->b,
                       "<li class=\"rep\">… (tree cut at %d modules)"
                       "</li>\n",
                       HTML_MAX_TREE_NODES);
      break;
    }
    int64_t c = tpx_model_module_child(model, m, i);
    const char *name = tpx__fqn_last_atom(tpx_model_module_fqn(model, c));
    size_t j = i + 1;
    if (tpx__fqn_is_digits(name)) {
      /* Run of numbered siblings with the same subtree. */
      tpx__sbuf s1 = {NULL, 0, 0, 0};
      subtree_sig(t->sh, c, &s1);
      while (j < nc) {
        int64_t c2 = tpx_model_module_child(model, m, j);
        if (!tpx__fqn_is_digits(
                tpx__fqn_last_atom(tpx_model_module_fqn(model, c2))))
          break;
        tpx__sbuf s2 = {NULL, 0, 0, 0};
        subtree_sig(t->sh, c2, &s2);
        int same = s1.data && s2.data && strcmp(s1.data, s2.data) == 0;
        tpx__sbuf_free(&s2);
        if (!same)
          break;
        j++;
      }
      tpx__sbuf_free(&s1);
    }
    if (j - i > 1) {
      const char *last = tpx__fqn_last_atom(
          tpx_model_module_fqn(model, tpx_model_module_child(model, m, j - 1)));
      char label[96];
      snprintf(label, sizeof label, "%s … %s (%zu identical)", name, last,
               j - i);
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
  if (module_params(model, m, &params, &np) != 0)
    t->b->failed = 1;
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
    tpx__sbuf_printf(t->b,
                     " <span class=\"style\">%s</span> <span "
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
  if (np)
    tpx__sbuf_printf(t->b, "<ul class=\"tree\">\n");
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
    placements_html(t->b, t->sh, p, ps.placements);
    if (pi.tied_to >= 0) {
      tpx__sbuf_printf(t->b, " · tied to ");
      esc(t->b, tpx__mv_param(model, pi.tied_to)->fqn);
    }
    tpx__sbuf_printf(t->b, "</li>\n");
  }
  free(params);
  if (np)
    tpx__sbuf_printf(t->b, "</ul>\n");
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

/* ---- block maps ------------------------------------------------------------
 */

/* One drawn block: a distinct box and the ranks holding it, with the tp
 * and dp_shard coordinates they share (-1 where they differ or the mesh
 * has no such dim): the block's group on the dp_shard × tp grid. */
typedef struct {
  tpx_slice s;
  int64_t first_rank, nranks, last_rank;
  int64_t tp, ds;
} block_t;

/* The mesh dims a block map groups by. */
typedef struct {
  const tpx_mesh *mesh;
  int tp_dim, ds_dim;
  int64_t tp_size;
  /* cp dim joined to dp_shard (FSDP over dp_shard_cp), else -1: a block's
   * "s" index is then its index in dp_shard_cp, s * cp + c */
  int cp_dim;
} grid_t;

static int64_t coord_of(const grid_t *g, int64_t rank, int dim) {
  int64_t c[16];
  if (dim < 0 || tpx_mesh_ndim(g->mesh) > 16 ||
      tpx_mesh_coords(g->mesh, rank, c, NULL) != TPX_OK)
    return -1;
  return c[dim];
}

/* The FSDP shard index of `rank`: its dp_shard coordinate, or its index in
 * dp_shard_cp when cp is joined to dp_shard. */
static int64_t shard_of(const grid_t *g, int64_t rank) {
  int64_t s = coord_of(g, rank, g->ds_dim);
  if (s < 0 || g->cp_dim < 0)
    return s;
  return s * tpx_mesh_dim_size(g->mesh, g->cp_dim) +
         coord_of(g, rank, g->cp_dim);
}

static void rank_list(char *out, size_t size, const block_t *k) {
  if (k->nranks == 1)
    snprintf(out, size, "rank %lld", (long long)k->first_rank);
  else
    snprintf(out, size, "ranks %lld…%lld (%lld)", (long long)k->first_rank,
             (long long)k->last_rank, (long long)k->nranks);
}

/* "t1·s0": the tp and dp_shard ranks every holder shares; "all" when the
 * block is the same on every tp and dp_shard rank. */
static void block_label(char *out, size_t size, const block_t *k) {
  if (k->tp >= 0 && k->ds >= 0)
    snprintf(out, size, "t%lld·s%lld", (long long)k->tp, (long long)k->ds);
  else if (k->tp >= 0)
    snprintf(out, size, "t%lld", (long long)k->tp);
  else if (k->ds >= 0)
    snprintf(out, size, "s%lld", (long long)k->ds);
  else
    snprintf(out, size, "all");
}

/* Distinct slices of parameter p over the drawn ranks; their count. */
static size_t collect_blocks(const tpx_sharding *sh, const grid_t *g, int64_t p,
                             int64_t drawn, block_t *blocks) {
  size_t nb = 0;
  for (int64_t r = 0; r < drawn; r++) {
    tpx_slice s;
    if (tpx_sharding_local_slice(sh, p, r, &s, NULL) != TPX_OK)
      continue;
    size_t k = 0;
    while (k < nb && memcmp(&blocks[k].s, &s, sizeof s) != 0) k++;
    int64_t tc = coord_of(g, r, g->tp_dim), dc = shard_of(g, r);
    if (k == nb) {
      blocks[nb].s = s;
      blocks[nb].first_rank = r;
      blocks[nb].nranks = 0;
      blocks[nb].tp = tc;
      blocks[nb].ds = dc;
      nb++;
    }
    if (blocks[k].tp != tc)
      blocks[k].tp = -1;
    if (blocks[k].ds != dc)
      blocks[k].ds = -1;
    blocks[k].nranks++;
    blocks[k].last_rank = r;
  }
  return nb;
}

/* The thinnest a non-empty block is drawn, in px: at many ranks a
 * proportional stripe (k_proj [512, 2048] on 64 ranks: 1.25 px) would not
 * be seen, let alone hovered. */
#define HTML_MIN_BLOCK_PX 3.0
/* Cuts along one axis: each block's start and end, and the box's ends. */
#define HTML_MAX_CUTS (2 * HTML_MAX_RANKS + 2)

/* Where element offsets land along one axis: cut[i] is drawn at px[i].
 * Between cuts the scale is the box's (size / extent), except that no
 * non-empty interval is drawn thinner than HTML_MIN_BLOCK_PX: the axis
 * then grows rather than a stripe vanishing. */
typedef struct {
  int64_t cut[HTML_MAX_CUTS];
  double px[HTML_MAX_CUTS];
  size_t n;
} axis_t;

/* Block geometry in the drawing. */
typedef struct {
  double W, H, ml, mt; /* box size, left and top margins */
  int64_t rows, cols;
  int rd, cd;   /* tensor dim drawn as rows / columns, or -1 */
  axis_t ax[2]; /* [0] columns, [1] rows */
} geom_t;

static int cut_cmp(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return a < b ? -1 : a > b;
}

/* Fills axis `a` from the blocks' extents along tensor dim `dim` (-1: the
 * whole axis is one interval) over `extent` elements drawn in about
 * `size` px; returns the axis's drawn size. */
static double axis_build(axis_t *a, const block_t *blocks, size_t nb, int dim,
                         int64_t extent, double size) {
  a->n = 0;
  a->cut[a->n++] = 0;
  a->cut[a->n++] = extent;
  for (size_t k = 0; dim >= 0 && k < nb && a->n + 2 <= HTML_MAX_CUTS; k++) {
    a->cut[a->n++] = blocks[k].s.offset[dim];
    a->cut[a->n++] = blocks[k].s.offset[dim] + blocks[k].s.length[dim];
  }
  qsort(a->cut, a->n, sizeof a->cut[0], cut_cmp);
  size_t u = 0;
  for (size_t i = 0; i < a->n; i++)
    if (u == 0 || a->cut[i] != a->cut[u - 1])
      a->cut[u++] = a->cut[i];
  a->n = u;
  a->px[0] = 0;
  for (size_t i = 1; i < a->n; i++) {
    double seg = size * (double)(a->cut[i] - a->cut[i - 1]) / (double)extent;
    if (seg > 0 && seg < HTML_MIN_BLOCK_PX)
      seg = HTML_MIN_BLOCK_PX;
    a->px[i] = a->px[i - 1] + seg;
  }
  return a->px[a->n - 1];
}

/* The drawn position of element offset v on axis a (a cut, found by
 * bisection; anything else is placed proportionally between its cuts). */
static double axis_at(const axis_t *a, int64_t v) {
  size_t lo = 0, hi = a->n - 1;
  if (v <= a->cut[0])
    return a->px[0];
  if (v >= a->cut[hi])
    return a->px[hi];
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (a->cut[mid] <= v)
      lo = mid;
    else
      hi = mid;
  }
  return a->px[lo] + (a->px[hi] - a->px[lo]) * (double)(v - a->cut[lo]) /
                         (double)(a->cut[hi] - a->cut[lo]);
}

static void block_box(const geom_t *G, const tpx_slice *s, double *x0,
                      double *y0, double *w, double *h) {
  *x0 = G->ml + 1, *y0 = G->mt + 1, *w = G->W, *h = G->H;
  if (G->cd >= 0) {
    double a = axis_at(&G->ax[0], s->offset[G->cd]);
    *x0 = G->ml + 1 + a;
    *w = axis_at(&G->ax[0], s->offset[G->cd] + s->length[G->cd]) - a;
  }
  if (G->rd >= 0) {
    double a = axis_at(&G->ax[1], s->offset[G->rd]);
    *y0 = G->mt + 1 + a;
    *h = axis_at(&G->ax[1], s->offset[G->rd] + s->length[G->rd]) - a;
  }
}

/* Labels for the tp bands in the margin, where blocks are too small for
 * their own: "tp j" beside the rows (or above the columns) its ranks hold,
 * thinned so that labels do not overlap. */
static void band_labels(tpx__sbuf *b, const geom_t *G, const block_t *blocks,
                        size_t nb, int64_t tp_size, int by_rows) {
  double last = -1e9;
  for (int64_t j = 0; j < tp_size; j++) {
    double lo = 1e18, hi = -1e18;
    for (size_t k = 0; k < nb; k++) {
      if (blocks[k].tp != j)
        continue;
      double x0, y0, w, h;
      block_box(G, &blocks[k].s, &x0, &y0, &w, &h);
      double a = by_rows ? y0 : x0, e = by_rows ? y0 + h : x0 + w;
      if (a < lo)
        lo = a;
      if (e > hi)
        hi = e;
    }
    if (hi < lo)
      continue;
    double mid = (lo + hi) / 2;
    if (mid - last < 12)
      continue; /* too close to the previous label */
    last = mid;
    if (by_rows)
      tpx__sbuf_printf(b,
                       "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\" "
                       "dominant-baseline=\"middle\">tp %lld</text>",
                       G->ml - 3, mid, (long long)j);
    else
      tpx__sbuf_printf(b,
                       "<text x=\"%.2f\" y=\"%.1f\" "
                       "text-anchor=\"middle\">tp %lld</text>",
                       mid, G->mt - 3, (long long)j);
  }
}

static void block_rect(tpx__sbuf *b, const geom_t *G, const block_t *k,
                       const tpx_param_info *pi, int64_t tp_size, int *small) {
  const tpx_slice *s = &k->s;
  double x0, y0, w, h;
  block_box(G, s, &x0, &y0, &w, &h);
  /* Hue by tp rank, lightness alternating by dp_shard rank; grey when the
   * block is the same on every tp rank. */
  int hue = k->tp >= 0 && tp_size > 0 ? (int)(k->tp * 300 / tp_size) : 0;
  int sat = k->tp >= 0 ? 55 : 0;
  int light = k->ds >= 0 && k->ds % 2 ? 80 : 68;
  char who[64], label[48], x[32];
  rank_list(who, sizeof who, k);
  block_label(label, sizeof label, k);
  tpx__sbuf_printf(b,
                   "<g><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                   "height=\"%.2f\" fill=\"hsl(%d,%d%%,%d%%)\" "
                   "stroke=\"#333\" stroke-width=\"0.5\"/><title>%s\n",
                   x0, y0, w, h, hue, sat, light, who);
  for (int d = 0; d < s->ndim; d++)
    tpx__sbuf_printf(b, "%sdim %d: [%lld, %lld)", d ? ", " : "", d,
                     (long long)s->offset[d],
                     (long long)(s->offset[d] + s->length[d]));
  int64_t nbytes = tpx_slice_nbytes(s, pi->dtype);
  tpx__sbuf_printf(b, "\n%s (%lld bytes)%s\ngroup %s</title>",
                   tpx_format_bytes(nbytes, x, sizeof x), (long long)nbytes,
                   tpx_slice_numel(s) == 0 ? " — empty shard" : "", label);
  /* The label at 11px, else at 9px, else the margin's band labels. */
  double len = (double)strlen(label);
  int font = w > 6.5 * len + 6 && h > 13   ? 11
             : w > 5.2 * len + 2 && h > 10 ? 9
                                           : 0;
  if (font)
    tpx__sbuf_printf(b,
                     "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" "
                     "dominant-baseline=\"middle\" font-size=\"%d\">%s"
                     "</text>",
                     x0 + w / 2, y0 + h / 2, font, label);
  else
    *small = 1;
  tpx__sbuf_printf(b, "</g>\n");
}

static void block_map(tpx__sbuf *b, const tpx_sharding *sh, int64_t p,
                      const char *title, int64_t copies) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  int64_t world = tpx_mesh_world_size(mesh);
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
  const char *view = tpx_sharding_fsdp_mesh_name(sh, NULL);
  grid_t g = {mesh, tpx_mesh_dim_index(mesh, "tp"),
              tpx_mesh_dim_index(mesh, "dp_shard"), 1,
              view && !strcmp(view, "dp_shard_cp")
                  ? tpx_mesh_dim_index(mesh, "cp")
                  : -1};
  if (g.tp_dim >= 0)
    g.tp_size = tpx_mesh_dim_size(mesh, g.tp_dim);
  size_t nb = collect_blocks(sh, &g, p, drawn, blocks);
  /* Geometry: rows = dim 0, columns = dim 1 (1-D tensors are one row). */
  geom_t G;
  G.rows = pi.ndim >= 2 ? pi.shape[0] : 1;
  G.cols = pi.ndim >= 2 ? pi.shape[1] : (pi.ndim == 1 ? pi.shape[0] : 1);
  G.rd = pi.ndim >= 2 ? 0 : -1;
  G.cd = pi.ndim >= 2 ? 1 : (pi.ndim ? 0 : -1);
  if (G.rows < 1)
    G.rows = 1;
  if (G.cols < 1)
    G.cols = 1;
  G.W = 320;
  G.H = pi.ndim >= 2 ? G.W * (double)G.rows / (double)G.cols : 26;
  if (G.H < 26)
    G.H = 26;
  if (G.H > 220)
    G.H = 220;
  G.W = axis_build(&G.ax[0], blocks, nb, G.cd, G.cols, G.W);
  G.H = axis_build(&G.ax[1], blocks, nb, G.rd, G.rows, G.H);
  /* Bands run along the dim the blocks split: rows when their row offsets
   * differ, else columns; their labels go in the margin on that side. */
  int by_rows = 0;
  for (size_t k = 1; k < nb && G.rd >= 0; k++)
    if (blocks[k].s.offset[G.rd] != blocks[0].s.offset[G.rd])
      by_rows = 1;
  /* With tp and dp_shard splitting different dims, the tp bands follow the
   * dim on which the first blocks of tp ranks 0 and 1 differ. */
  const block_t *t0 = NULL, *t1 = NULL;
  for (size_t k = 0; k < nb; k++) {
    if (blocks[k].tp == 0 && !t0)
      t0 = &blocks[k];
    if (blocks[k].tp == 1 && !t1)
      t1 = &blocks[k];
  }
  if (t0 && t1 && G.rd >= 0)
    by_rows = t0->s.offset[G.rd] != t1->s.offset[G.rd];
  G.ml = by_rows ? 44 : 0;
  G.mt = by_rows ? 0 : 14;
  tpx__sbuf_printf(b, "<div class=\"bm\"><div class=\"cap mono\">");
  esc(b, title);
  if (copies > 1)
    tpx__sbuf_printf(b, " <span class=\"rep\">×%lld</span>", (long long)copies);
  tpx__sbuf_printf(b, "<br>");
  shape_html(b, &pi);
  tpx__sbuf_printf(b, " · ");
  placements_html(b, sh, p, ps.placements);
  tpx__sbuf_printf(b,
                   "</div>\n<svg width=\"%.0f\" height=\"%.0f\" "
                   "xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">\n",
                   G.W + 2 + G.ml, G.H + 2 + G.mt);
  int small = 0;
  for (size_t k = 0; k < nb; k++)
    block_rect(b, &G, &blocks[k], &pi, g.tp_size, &small);
  if (small && g.tp_size > 1)
    band_labels(b, &G, blocks, nb, g.tp_size, by_rows);
  tpx__sbuf_printf(b, "</svg>");
  if (small) {
    /* What the unlabelled blocks are: per tp band, one per dp_shard rank. */
    int64_t per = 0;
    const block_t *d0 = NULL, *d1 = NULL;
    for (size_t k = 0; k < nb; k++) {
      if (blocks[k].tp != blocks[0].tp)
        continue;
      per++;
      if (blocks[k].ds == 0 && !d0)
        d0 = &blocks[k];
      if (blocks[k].ds == 1 && !d1)
        d1 = &blocks[k];
    }
    int ds_rows =
        d0 && d1 && G.rd >= 0 && d0->s.offset[G.rd] != d1->s.offset[G.rd];
    if (per > 1 && blocks[0].ds >= 0)
      tpx__sbuf_printf(
          b,
          "<div class=\"cap\">%s%lld blocks, one per %s "
          "rank (s0 first, %s)</div>",
          g.tp_size > 1 && blocks[0].tp >= 0 ? "each tp band: " : "",
          (long long)per, g.cp_dim >= 0 ? "dp_shard_cp" : "dp_shard",
          ds_rows ? "top to bottom" : "left to right");
  }
  tpx__sbuf_printf(b, "</div>\n");
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
  tpx__sbuf_printf(b,
                   "<h2>Who holds what</h2>\n<p>Each parameter as its "
                   "blocks (rows = dim 0, columns = dim 1). Ranks are "
                   "grouped by their place on the dp_shard × tp grid: a "
                   "label <b>t1·s0</b> marks the block held by the ranks "
                   "at tp rank 1 and dp_shard rank 0 (every dp_replicate "
                   "replica of them), <b>t1</b> one that all dp_shard "
                   "ranks of tp rank 1 share, <b>all</b> one every rank "
                   "holds. Colour follows the tp rank (grey: the same on "
                   "every tp rank), shade the dp_shard rank; where "
                   "blocks are too small for a label, the margin names "
                   "the tp bands. Hover a block for its ranks, offsets "
                   "and bytes. Names with * stand for every layer.%s</p>"
                   "\n<div id=\"blocks\">\n",
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

/* ---- FSDP units ------------------------------------------------------------
 */

static const char *dtype_or_none(tpx_dtype d) {
  return d ? tpx_dtype_short_name(d) : "none";
}

/* Whether units i and j read the same in the table (same list, reshard
 * flag, parameter count and gathered bytes on rank 0). */
static int same_unit_row(const tpx_sharding *sh, const tpx_fsdp_unit *a,
                         size_t i, const tpx_fsdp_unit *c, size_t j) {
  return !a->is_root && !c->is_root && a->group >= 0 && a->group == c->group &&
         a->reshard_after_forward == c->reshard_after_forward &&
         a->num_params == c->num_params &&
         tpx_sharding_fsdp_unit_gathered_bytes(sh, i, 0) ==
             tpx_sharding_fsdp_unit_gathered_bytes(sh, j, 0);
}

/* The FSDP2 units bottom-up, root last; runs of like layers on one row. */
static void fsdp_units(tpx__sbuf *b, const tpx_sharding *sh) {
  size_t nu = tpx_sharding_num_fsdp_units(sh);
  tpx__sbuf_printf(b, "<h2>FSDP2 units (%zu)</h2>\n", nu);
  if (!nu) {
    tpx__sbuf_printf(b, "<p>none: FSDP is off (no data-parallel rank "
                        "shards parameters)</p>\n");
    return;
  }
  tpx_mp_policy mp = tpx_sharding_mp_policy(sh);
  tpx__sbuf_printf(b,
                   "<p>Bottom-up, root last; mixed precision: param %s, "
                   "reduce %s, output %s. Gathered = the unit's "
                   "parameters all-gathered over data-parallel ranks on "
                   "rank 0.</p>\n<table id=\"fsdp\"><tr><th>unit</th>"
                   "<th>parameters</th><th>reshard after forward</th>"
                   "<th>prefetch fwd / bwd</th><th>gathered</th></tr>\n",
                   dtype_or_none(mp.param_dtype),
                   dtype_or_none(mp.reduce_dtype),
                   dtype_or_none(mp.output_dtype));
  for (size_t i = 0; i < nu;) {
    tpx_fsdp_unit u, v;
    if (tpx_sharding_fsdp_unit(sh, i, &u, NULL) != TPX_OK) {
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < nu && tpx_sharding_fsdp_unit(sh, j, &v, NULL) == TPX_OK &&
           same_unit_row(sh, &u, i, &v, j))
      j++;
    /* Prefetch counts over the run (the ends of a list prefetch less). */
    size_t lo[2] = {u.num_fwd_prefetch, u.num_bwd_prefetch};
    size_t hi[2] = {lo[0], lo[1]};
    for (size_t k = i + 1; k < j; k++) {
      if (tpx_sharding_fsdp_unit(sh, k, &v, NULL) != TPX_OK)
        continue;
      size_t c[2] = {v.num_fwd_prefetch, v.num_bwd_prefetch};
      for (int d = 0; d < 2; d++) {
        if (c[d] < lo[d])
          lo[d] = c[d];
        if (c[d] > hi[d])
          hi[d] = c[d];
      }
    }
    char x[32], pf[2][48];
    for (int d = 0; d < 2; d++)
      if (lo[d] == hi[d])
        snprintf(pf[d], sizeof pf[d], "%zu", lo[d]);
      else
        snprintf(pf[d], sizeof pf[d], "%zu-%zu", lo[d], hi[d]);
    tpx__sbuf_printf(b, "<tr><td class=\"mono\">");
    if (u.is_root) {
      tpx__sbuf_printf(b, "(root)");
    } else {
      esc(b, u.fqn);
      if (j - i > 1 && tpx_sharding_fsdp_unit(sh, j - 1, &v, NULL) == TPX_OK) {
        tpx__sbuf_printf(b, " … ");
        esc(b, v.fqn);
        tpx__sbuf_printf(b, " (%zu units)", j - i);
      }
    }
    tpx__sbuf_printf(
        b,
        "</td><td>%zu</td><td>%s</td><td>%s / %s</td>"
        "<td>%s</td></tr>\n",
        u.num_params, u.reshard_after_forward ? "yes" : "no", pf[0], pf[1],
        tpx_format_bytes(tpx_sharding_fsdp_unit_gathered_bytes(sh, i, 0), x,
                         sizeof x));
    i = j;
  }
  tpx__sbuf_printf(b, "</table>\n");
}

/* ---- collectives -----------------------------------------------------------
 */

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
      if (i == 0)
        esc(b, t);
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
  if (!rows)
    tpx__sbuf_printf(b, "<p>none (no style applies at this tp)</p>\n");
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
  if (ost != TPX_OK)
    return ost;
  opts = &def;
  tpx__sbuf b = {NULL, 0, 0, 0};
  header(&b, sh, opts);
  tpx_memory_options mo = TPX_MEMORY_OPTIONS_INIT;
  memory(&b, sh, opts->memory ? opts->memory : &mo);
  module_tree(&b, sh);
  block_maps(&b, sh);
  fsdp_units(&b, sh);
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
