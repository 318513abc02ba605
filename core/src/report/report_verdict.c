/* report/report_verdict.c — the first screen of the text report: the
 * verdict (OK / NOT OK), model, mesh, where the plan came from, per-rank
 * memory, and the errors with the warnings they cause folded under them;
 * and the Diagnostics section with the same folding. tpx_report_summary
 * returns this screen alone (`tpx plan --summary`).
 *
 * Folding: an uneven-shard warning follows from a heads-not-divisible
 * error when a tp size that the head counts allow would divide every dim
 * the requested tp leaves uneven in that parameter — choosing such a tp
 * (the error's fix) removes the warning too. Other warnings stand alone.
 * The infos for optional plan keys that matched nothing (keys for fused
 * or other checkpoint variants) fold into one line.
 * Not the rest of the text report (report_text.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_memory.h"
#include "report/report_verdict.h"
#include "tpx/validate.h"

/* Errors listed on the verdict screen before "... and N more". */
#define VERDICT_MAX_ERRORS 8
/* Refused plugin files listed on the verdict screen. */
#define VERDICT_MAX_REFUSED 3
/* Optional keys named on the folded line before "... (N more)". */
#define OPTIONAL_LISTED 6

typedef struct {
  tpx_diag d;
  int cause; /* index of the diagnostic it follows from, or -1 */
  int num_folded;
} item_t;

/* tp sizes > 1 that divide both head counts (none when unknown). */
static size_t valid_tps(const tpx_sharding *sh, int64_t *out, size_t cap) {
  tpx_head_counts hc = TPX_HEAD_COUNTS_INIT;
  if (tpx_head_counts_after_tp(tpx_sharding_model(sh), NULL, 1, &hc, NULL) !=
          TPX_OK ||
      hc.heads < 2)
    return 0;
  size_t n = 0;
  for (int64_t t = 2; t <= hc.heads && n < cap; t++)
    if (hc.heads % t == 0 && (hc.kv_heads <= 0 || hc.kv_heads % t == 0))
      out[n++] = t;
  return n;
}

static int follows_from_heads(const tpx_sharding *sh, const tpx_diag *w,
                              const int64_t *tps, size_t ntps) {
  if (strcmp(w->code, "uneven-shard") != 0 || !w->subject)
    return 0;
  const tpx_model *m = tpx_sharding_model(sh);
  int64_t pi = tpx_model_find_param(m, w->subject);
  tpx_param_info p;
  if (pi < 0 || tpx_model_param(m, pi, &p, NULL) != TPX_OK)
    return 0;
  int64_t tp = tpx_sharding_tp_size(sh);
  for (size_t k = 0; k < ntps; k++) {
    int all = 1;
    for (int d = 0; d < p.ndim && all; d++)
      if (p.shape[d] % tp != 0 && p.shape[d] % tps[k] != 0)
        all = 0;
    if (all)
      return 1;
  }
  return 0;
}

/* Every diagnostic (selection's first), with its cause. NULL on OOM. */
static item_t *collect_items(const tpx_sharding *sh,
                             const tpx_report_options *o, size_t *n) {
  const tpx_diag_list *lists[2] = {o->selection_diags,
                                   tpx_sharding_diagnostics(sh)};
  size_t total = 0;
  for (int l = 0; l < 2; l++) total += lists[l] ? tpx_diag_count(lists[l]) : 0;
  item_t *it = calloc(total ? total : 1, sizeof *it);
  if (!it)
    return NULL;
  size_t k = 0;
  int heads = -1;
  for (int l = 0; l < 2; l++)
    for (size_t i = 0; lists[l] && i < tpx_diag_count(lists[l]); i++) {
      if (tpx_diag_get(lists[l], i, &it[k].d, NULL) != TPX_OK)
        continue;
      it[k].cause = -1;
      if (heads < 0 && it[k].d.level == TPX_DIAG_ERROR &&
          strcmp(it[k].d.code, "heads-not-divisible") == 0)
        heads = (int)k;
      k++;
    }
  *n = k;
  if (heads >= 0) {
    int64_t tps[64];
    size_t ntps = valid_tps(sh, tps, 64);
    for (size_t i = 0; i < k; i++)
      if (it[i].d.level == TPX_DIAG_WARNING &&
          follows_from_heads(sh, &it[i].d, tps, ntps)) {
        it[i].cause = heads;
        it[heads].num_folded++;
      }
  }
  return it;
}

#define PLUGIN_FALLBACK_SIZE 4200
/* ": the plugin <path> failed; fell back to the <source> plan" when the
 * family's plugin failed in get_plan (selection's plugin-failed error, its
 * subject the plugin's path), written into `buf`; else "". */
static const char *plugin_fallback(const item_t *it, size_t n,
                                   const tpx_report_options *o, char *buf) {
  for (size_t i = 0; i < n; i++)
    if (it[i].d.level == TPX_DIAG_ERROR &&
        strcmp(it[i].d.code, "plugin-failed") == 0) {
      snprintf(buf, PLUGIN_FALLBACK_SIZE,
               ": the plugin %s failed; fell back to the %s plan",
               it[i].d.subject ? it[i].d.subject : "(unknown)",
               o->plan_source ? o->plan_source : "custom");
      return buf;
    }
  return "";
}

static void diag_line(tpx__sbuf *b, const tpx_diag *d, int indent) {
  tpx__sbuf_printf(b, "%*s%s [%s] %s\n", indent, "",
                   tpx_diag_level_name(d->level), d->code, d->message);
  if (d->fix && *d->fix)
    tpx__sbuf_printf(b, "%*s    fix: %s\n", indent, "", d->fix);
}

/* Plugin files refused while loading (registry warnings plugin-failed and
 * plugin-untrusted, copied into the selection's diagnostics by the CLI):
 * on the verdict screen too, since a refused file may be the family's
 * plugin whose plan is missing. */
static void refused_lines(tpx__sbuf *b, const item_t *it, size_t n) {
  size_t shown = 0, total = 0;
  for (size_t i = 0; i < n; i++) {
    if (it[i].d.level != TPX_DIAG_WARNING ||
        (strcmp(it[i].d.code, "plugin-failed") != 0 &&
         strcmp(it[i].d.code, "plugin-untrusted") != 0))
      continue;
    if (total++ < VERDICT_MAX_REFUSED) {
      diag_line(b, &it[i].d, 2);
      shown++;
    }
  }
  if (total > shown)
    tpx__sbuf_printf(b,
                     "  ... and %zu more refused plugin(s) under "
                     "Diagnostics\n",
                     total - shown);
}

/* The items, or NULL with the buffer marked failed (out of memory). */
static item_t *collect(tpx__sbuf *b, const tpx_sharding *sh,
                       const tpx_report_options *o, size_t *n) {
  item_t *it = collect_items(sh, o, n);
  if (!it)
    b->failed = 1;
  return it;
}

void tpx__report_verdict(tpx__sbuf *b, const tpx_sharding *sh,
                         const tpx_report_options *o) {
  size_t n = 0;
  item_t *it = collect(b, sh, o, &n);
  if (!it)
    return;
  size_t nerr = 0, nwarn = 0, nfolded = 0;
  for (size_t i = 0; i < n; i++) {
    if (it[i].d.level == TPX_DIAG_ERROR)
      nerr++;
    else if (it[i].cause >= 0)
      nfolded++;
    else if (it[i].d.level == TPX_DIAG_WARNING)
      nwarn++;
  }
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  char x[32], y[32], z[32];
  char fb[PLUGIN_FALLBACK_SIZE];
  if (nerr)
    tpx__sbuf_printf(b, "Verdict: NOT OK (%zu error%s)%s\n", nerr,
                     nerr == 1 ? "" : "s", plugin_fallback(it, n, o, fb));
  else
    tpx__sbuf_printf(b, "Verdict: OK%s\n", nwarn ? " (with warnings)" : "");
  tpx__sbuf_printf(b, "  model     %s, %lld parameters, %s\n",
                   tpx_model_num_architectures(model)
                       ? tpx_model_architecture(model, 0)
                       : "(no architecture)",
                   (long long)tpx_model_total_params(model),
                   tpx_format_bytes(tpx_model_total_bytes(model), x, sizeof x));
  tpx__sbuf_printf(b, "  mesh     ");
  for (int d = 0; d < tpx_mesh_ndim(mesh); d++)
    tpx__sbuf_printf(b, " %s=%lld", tpx_mesh_dim_name(mesh, d),
                     (long long)tpx_mesh_dim_size(mesh, d));
  tpx__sbuf_printf(b, " (world %lld)\n", (long long)tpx_mesh_world_size(mesh));
  const tpx_mesh *moe = tpx_sharding_moe_mesh(sh);
  if (moe)
    tpx__sbuf_printf(b, "  moe mesh  ep_shard=%lld ep=%lld (experts)\n",
                     (long long)tpx_mesh_dim_size(moe, 0),
                     (long long)tpx_mesh_dim_size(moe, 1));
  const char *src = o->plan_source ? o->plan_source : "custom";
  if (o->plugin_name && strcmp(src, "plugin") == 0)
    tpx__sbuf_printf(b, "  plan      plugin '%s'", o->plugin_name);
  else
    tpx__sbuf_printf(b, "  plan      %s", src);
  if (o->function && strcmp(o->function, src) != 0)
    tpx__sbuf_printf(b, " (function %s)", o->function);
  tpx__sbuf_printf(b, ", %zu entries, sequence parallel %s\n",
                   tpx_plan_size(tpx_sharding_plan(sh)),
                   o->sequence_parallel ? "on" : "off");
  int64_t world = tpx_mesh_world_size(mesh);
  int64_t lo = -1, hi = -1, peak = -1;
  for (int64_t r = 0; r < world; r++) {
    int64_t pb = tpx_sharding_rank_param_bytes(sh, r);
    int64_t pk = tpx_sharding_rank_peak_bytes(sh, r);
    if (lo < 0 || pb < lo)
      lo = pb;
    if (pb > hi)
      hi = pb;
    if (pk > peak)
      peak = pk;
  }
  if (world > 0) {
    tpx__sbuf_printf(b, "  per rank  parameters %s",
                     tpx_format_bytes(hi, x, sizeof x));
    if (lo != hi)
      tpx__sbuf_printf(b, " (least loaded rank %s)",
                       tpx_format_bytes(lo, y, sizeof y));
    int64_t tpeak = 0, trank = 0;
    int off = tpx__report_memory_offload(o->memory);
    if (tpx__report_training_peak(sh, o->memory, &tpeak, &trank))
      tpx__sbuf_printf(
          b, ", training peak %s%s (rank %lld, batch %lld x seq %lld, %s)\n",
          tpx_format_bytes(tpeak, z, sizeof z), off ? " on the device" : "",
          (long long)trank, (long long)o->memory->batch,
          (long long)o->memory->seq,
          off ? "gathered units and activations; the rest on the host"
              : "with gradients, optimizer and activations");
    else
      tpx__sbuf_printf(b, ", peak %s while FSDP units are gathered\n",
                       tpx_format_bytes(peak, z, sizeof z));
  }
  size_t shown = 0;
  for (size_t i = 0; i < n; i++) {
    if (it[i].d.level != TPX_DIAG_ERROR)
      continue;
    if (shown++ == VERDICT_MAX_ERRORS) {
      tpx__sbuf_printf(b, "  ... and %zu more error(s) under Diagnostics\n",
                       nerr - VERDICT_MAX_ERRORS);
      break;
    }
    diag_line(b, &it[i].d, 2);
    if (it[i].num_folded)
      tpx__sbuf_printf(b,
                       "      (%d uneven-shard warning%s follow%s from it: "
                       "the fix above removes %s)\n",
                       it[i].num_folded, it[i].num_folded == 1 ? "" : "s",
                       it[i].num_folded == 1 ? "s" : "",
                       it[i].num_folded == 1 ? "it" : "them");
  }
  refused_lines(b, it, n);
  if (nwarn)
    tpx__sbuf_printf(b, "  %zu warning%s under Diagnostics\n", nwarn,
                     nwarn == 1 ? "" : "s");
  free(it);
}

/* An optional plan key that matched nothing (info level; a required one
 * is a warning): expected, as such keys serve other checkpoint variants. */
static int is_optional_unmatched(const tpx_diag *d) {
  /* a required key at tp 1 is an info too (no plan is applied there, see
   * shard/sharding.c match_not_applied), but not an optional one: listed */
  return d->level == TPX_DIAG_INFO && strcmp(d->code, "unmatched-key") == 0 &&
         strncmp(d->message, "not applied at tp 1", 19) != 0;
}

/* The optional keys that matched nothing, folded into one line. */
static void optional_line(tpx__sbuf *b, const item_t *it, size_t n) {
  size_t count = 0, listed = 0;
  for (size_t i = 0; i < n; i++) count += is_optional_unmatched(&it[i].d);
  tpx__sbuf_printf(b,
                   "  info [unmatched-key] %zu optional key%s for other "
                   "checkpoint variants (e.g. fused projections) matched "
                   "nothing, as expected:",
                   count, count == 1 ? "" : "s");
  for (size_t i = 0; i < n; i++) {
    if (!is_optional_unmatched(&it[i].d))
      continue;
    if (listed++ == OPTIONAL_LISTED) {
      tpx__sbuf_printf(b, " ... (%zu more)", count - OPTIONAL_LISTED);
      break;
    }
    tpx__sbuf_printf(b, "%s '%s'", listed > 1 ? "," : "",
                     it[i].d.subject ? it[i].d.subject : "");
  }
  tpx__sbuf_printf(b, "\n");
}

void tpx__report_diagnostics(tpx__sbuf *b, const tpx_sharding *sh,
                             const tpx_report_options *o) {
  size_t n = 0;
  item_t *it = collect(b, sh, o, &n);
  if (!it)
    return;
  /* The optional unmatched keys share one line: say so in the count, so
   * that it matches the lines below. */
  size_t nopt = 0;
  for (size_t i = 0; i < n; i++) nopt += is_optional_unmatched(&it[i].d);
  if (nopt > 1)
    tpx__sbuf_printf(b, "\nDiagnostics (%zu, on %zu line%s):\n", n,
                     n - nopt + 1, n - nopt + 1 == 1 ? "" : "s");
  else
    tpx__sbuf_printf(b, "\nDiagnostics (%zu):\n", n);
  if (!n)
    tpx__sbuf_printf(b, "  none\n");
  int optional_done = 0;
  for (size_t i = 0; i < n; i++) {
    if (it[i].cause >= 0)
      continue;
    if (is_optional_unmatched(&it[i].d)) {
      if (!optional_done++)
        optional_line(b, it, n);
      continue;
    }
    diag_line(b, &it[i].d, 2);
    if (!it[i].num_folded)
      continue;
    tpx__sbuf_printf(b, "      following from it (%d):\n", it[i].num_folded);
    for (size_t j = 0; j < n; j++)
      if (it[j].cause == (int)i)
        diag_line(b, &it[j].d, 8);
  }
  free(it);
}

tpx_status tpx_report_summary(const tpx_sharding *sh,
                              const tpx_report_options *opts, char **out,
                              tpx_error *err) {
  tpx_report_options def = TPX_REPORT_OPTIONS_INIT;
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_report_summary: NULL sharding or out");
  *out = NULL;
  tpx_status ost = tpx__report_opts(opts, &def, "tpx_report_summary", err);
  if (ost != TPX_OK)
    return ost;
  tpx__sbuf b = {NULL, 0, 0, 0};
  tpx__report_verdict(&b, sh, &def);
  if (b.failed) {
    tpx__sbuf_free(&b);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_report_summary: out of memory");
  }
  *out = b.data;
  return TPX_OK;
}
