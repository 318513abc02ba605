/* cmd_plan_advise.c — `tpx plan --gpus N`: the mesh advisor. Every
 * (dp_replicate, dp_shard, tp) with product N (with --cp C: every
 * (dp_replicate, dp_shard, C, tp); for a custom MoE model each with every
 * ep dividing N, or the --ep given) is planned as `tpx plan`
 * would plan it (selection per tp size, so heads-not-divisible and invalid
 * plans are rejected with the selection's own message), then costed with
 * the library's training-memory and traffic estimates (tpx/memory.h) on its
 * worst rank.
 *
 * The order (RANK_RULE, printed with the advice): the meshes that fit, in
 * traffic bands, each band the meshes whose bytes sent per step are within
 * 10% (+ 1 MiB) of the band's least, lower traffic first, and within a band
 * the largest fit margin (the most memory left) first, so a mesh that sends
 * 0.06 GiB more but leaves 17 GiB more free ranks first; then the meshes
 * that do not fit, by peak; then the rejected. "Best:" is the first, as a
 * runnable `tpx plan` command. When nothing fits, the advice is costed
 * again with what would lower the device memory, each alone: context
 * parallelism (every cp > 1 dividing N whose 2 cp divides --seq),
 * activation checkpointing and CPU offload (then the device bytes must
 * fit in --gpu-mem and every rank's host bytes in --host-mem); when none
 * of them alone fits, all three together. A mesh the sharding says
 * upstream would refuse (upstream-refuses-mesh, cp-without-fsdp) is
 * ranked as any other and marked "(upstream refuses: ...)". The best of each
 * is suggested. The output is cmd_plan_advise_print.c's. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plan_advise.h"

#define BAND_REL 0.10
#define BAND_ABS ((int64_t)1 << 20)

static int tie_cmp(const cand_t *a, const cand_t *b) {
  if (a->tp != b->tp)
    return a->tp < b->tp ? -1 : 1;
  if (a->ep != b->ep)
    return a->ep < b->ep ? -1 : 1;
  if (a->cp != b->cp)
    return a->cp < b->cp ? -1 : 1;
  if (a->dps != b->dps)
    return a->dps > b->dps ? -1 : 1;
  return 0;
}

/* Fitting by traffic alone: the order bands are cut from. */
static int traffic_cmp(const void *pa, const void *pb) {
  const cand_t *a = pa, *b = pb;
  int ka = kind_of(a), kb = kind_of(b);
  if (ka != kb)
    return ka - kb;
  if (ka == 0 && a->traffic.total != b->traffic.total)
    return a->traffic.total < b->traffic.total ? -1 : 1;
  return tie_cmp(a, b);
}

/* RANK_RULE. */
static int cand_cmp(const void *pa, const void *pb) {
  const cand_t *a = pa, *b = pb;
  int ka = kind_of(a), kb = kind_of(b);
  if (ka != kb)
    return ka - kb;
  if (ka == 0 && a->band != b->band)
    return a->band < b->band ? -1 : 1;
  if (ka < 2 && a->worst.device != b->worst.device)
    return a->worst.device < b->worst.device ? -1 : 1;
  return tie_cmp(a, b);
}

/* Sorts c by RANK_RULE, numbering the traffic bands first. */
static void rank(cand_t *c, size_t n) {
  qsort(c, n, sizeof *c, traffic_cmp);
  int band = -1;
  int64_t start = 0;
  for (size_t i = 0; i < n; i++) {
    c[i].band = -1;
    if (kind_of(&c[i]) != 0)
      continue;
    if (band < 0 ||
        c[i].traffic.total >
            start + (int64_t)((double)start * BAND_REL) + BAND_ABS) {
      band++;
      start = c[i].traffic.total;
    }
    c[i].band = band;
  }
  qsort(c, n, sizeof *c, cand_cmp);
}

/* The first error-level diagnostic's message, or NULL. */
static const char *first_error(const tpx_diag_list *l) {
  for (size_t i = 0; l && i < tpx_diag_count(l); i++) {
    tpx_diag d;
    if (tpx_diag_get(l, i, &d, NULL) == TPX_OK && d.level == TPX_DIAG_ERROR)
      return d.message;
  }
  return NULL;
}

/* The sharding's diagnostics that say upstream would refuse a mesh tpx
 * plans (core/src/shard/cp_diags.c), with the reason shown beside it. */
static const struct {
  const char *code, *why;
} upstream_refusals[] = {
    {"upstream-refuses-mesh", "\"DDP usecase is not supported by FSDP2\""},
    {"cp-without-fsdp", "cp runs only under FSDP2"},
};

static void upstream_refuses(cand_t *c, const tpx_diag_list *l) {
  for (size_t i = 0; l && i < tpx_diag_count(l); i++) {
    tpx_diag d;
    if (tpx_diag_get(l, i, &d, NULL) != TPX_OK)
      continue;
    for (size_t k = 0;
         k < sizeof upstream_refusals / sizeof upstream_refusals[0]; k++)
      if (!strcmp(d.code, upstream_refusals[k].code)) {
        size_t len = strlen(c->upstream);
        snprintf(c->upstream + len, sizeof c->upstream - len, "%s%s",
                 len ? "; " : "", upstream_refusals[k].why);
      }
  }
}

/* Plan and cost one mesh whose tp selection is `sel` (NULL: rejected
 * already). */
static void cost(cand_t *c, const tpx_model *model, const tpx_selection *sel,
                 int fsdp, const plan_extra *x, const tpx_memory_options *mo,
                 tpx_memory *buf, tpx_traffic *tbuf) {
  tpx_error err;
  tpx_error_clear(&err);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = NULL;
  int64_t n = c->dpr * c->dps * c->cp * c->tp;
  if (plan_mesh(c->dpr, c->dps, c->cp, c->tp, &mesh, &err) != TPX_OK ||
      plan_shard(model, sel, mesh, fsdp, &sh, &err) != TPX_OK) {
    c->rejected = 1;
    snprintf(c->why, sizeof c->why, "%s", err.message);
    goto out;
  }
  const char *e = first_error(tpx_sharding_diagnostics(sh));
  if (e) {
    c->rejected = 1;
    snprintf(c->why, sizeof c->why, "%s", e);
    goto out;
  }
  upstream_refuses(c, tpx_sharding_diagnostics(sh));
  if (tpx_memory_ranks(sh, mo, 0, (size_t)n, buf, &err) != TPX_OK) {
    c->rejected = 1;
    snprintf(c->why, sizeof c->why, "%s", err.message);
    goto out;
  }
  /* the rank needing the most device memory (the peak without offload) */
  c->worst = buf[0];
  c->host_max = buf[0].host;
  for (int64_t r = 1; r < n; r++) {
    if (buf[r].device > c->worst.device)
      c->worst = buf[r];
    if (buf[r].host > c->host_max)
      c->host_max = buf[r].host;
  }
  /* the rank sending most (TP traffic is the same on every rank, computed
   * once; FSDP traffic differs by uneven shards) */
  if (tpx_traffic_ranks(sh, mo, 0, (size_t)n, tbuf, &err) != TPX_OK) {
    c->rejected = 1;
    snprintf(c->why, sizeof c->why, "%s", err.message);
    goto out;
  }
  for (int64_t r = 0; r < n; r++)
    if (r == 0 || tbuf[r].total > c->traffic.total)
      c->traffic = tbuf[r];
  /* with offload the host holds the shards: they must fit there too */
  c->fits = c->worst.device <= x->gpu_mem &&
            (!mo->offload || c->host_max <= x->host_mem);
out:
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
}

/* 1 when cp may shard sequences of `seq` tokens (the load balancer cuts
 * them into 2 cp chunks). */
static int cp_allowed(int64_t cp, int64_t seq) {
  return cp == 1 || (seq > 0 && seq % (2 * cp) == 0);
}

/* 1 when a plugin declares the model a custom MoE architecture (its
 * expert parallelism is enumerated). */
static int is_custom_moe(const tpx_registry *reg, const tpx_model *model,
                         const tpx_select_options *base) {
  tpx_select_options so = *base;
  so.tp_size = 1;
  so.ep = 1;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  int moe = tpx_diag_list_create(&diags, NULL) == TPX_OK &&
            tpx_select_plan(reg, model, &so, &sel, diags, NULL) == TPX_OK &&
            tpx_selection_moe_custom(sel);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  return moe;
}

/* The meshes of one tp and ep: every (dp_replicate, dp_shard, cp), the
 * selection `sel` (or its refusal `why`) costed on each. */
static void add_meshes(advice_t *a, int64_t N, int64_t t, int64_t e,
                       int64_t cp_only, const char *why, const tpx_model *model,
                       const tpx_selection *sel, int fsdp, const plan_extra *x,
                       const tpx_memory_options *mo, tpx_memory *buf,
                       tpx_traffic *tbuf) {
  for (int64_t c = 1; c <= N / t; c++) {
    if ((N / t) % c || (cp_only ? c != cp_only : c == 1) ||
        !cp_allowed(c, mo->seq))
      continue;
    for (int64_t s = 1; s <= N / t / c; s++) {
      if ((N / t / c) % s)
        continue;
      cand_t *k = &a->c[a->n++];
      k->tp = t;
      k->ep = e;
      k->cp = c;
      k->dps = s;
      k->dpr = N / t / c / s;
      if (why) {
        k->rejected = 1;
        snprintf(k->why, sizeof k->why, "%s", why);
      } else {
        cost(k, model, sel, fsdp, x, mo, buf, tbuf);
      }
    }
  }
}

/* Plans and costs every mesh of x->gpus ranks with memory options `mo`
 * into *a (ranked): cp `cp_only` (0: every cp > 1 the sequence allows),
 * and for a custom MoE model every ep dividing the world (`ep_only` > 1:
 * that one). 0, or -1 out of memory (printed). */
static int advise_run(const tpx_registry *reg, const tpx_model *model,
                      const tpx_select_options *base, int fsdp,
                      const plan_extra *x, const tpx_memory_options *mo,
                      int64_t cp_only, int64_t ep_only, advice_t *a) {
  int64_t N = x->gpus;
  size_t cap = 0, neps = 0;
  int moe = ep_only > 1 || is_custom_moe(reg, model, base);
  for (int64_t e = 1; e <= N; e++)
    neps += N % e == 0 && (ep_only > 1 ? e == ep_only : moe || e == 1);
  for (int64_t t = 1; t <= N; t++)
    for (int64_t c = 1; N % t == 0 && c <= N / t; c++)
      for (int64_t s = 1; (N / t) % c == 0 && s <= N / t / c; s++)
        cap += (N / t / c) % s == 0;
  cap *= neps;
  a->mo = *mo;
  a->n = 0;
  a->c = calloc(cap ? cap : 1, sizeof *a->c);
  tpx_memory *buf = calloc((size_t)N, sizeof *buf);
  tpx_traffic *tbuf = calloc((size_t)N, sizeof *tbuf);
  if (!a->c || !buf || !tbuf) {
    fprintf(stderr, "tpx plan: out of memory\n");
    free(buf);
    free(tbuf);
    return -1;
  }
  for (int64_t t = 1; t <= N; t++) {
    for (int64_t e = 1; N % t == 0 && e <= N; e++) {
      if (N % e || (ep_only > 1 ? e != ep_only : !moe && e != 1))
        continue;
      tpx_select_options so = *base;
      so.tp_size = t;
      so.ep = e;
      tpx_selection *sel = NULL;
      tpx_diag_list *diags = NULL;
      tpx_error err;
      tpx_error_clear(&err);
      const char *why = NULL;
      if (tpx_diag_list_create(&diags, &err) != TPX_OK ||
          tpx_select_plan(reg, model, &so, &sel, diags, &err) != TPX_OK)
        why = err.message;
      else
        why = first_error(diags);
      add_meshes(a, N, t, e, cp_only, why, model, sel, fsdp, x, mo, buf, tbuf);
      tpx_selection_destroy(sel);
      tpx_diag_list_destroy(diags);
    }
  }
  rank(a->c, a->n);
  free(buf);
  free(tbuf);
  return 0;
}

/* Nothing fits: cost each alternative that is not on already, and all
 * three together when none alone fits. 0, or -1 out of memory. */
static int advise_alternatives(const tpx_registry *reg, const tpx_model *model,
                               const tpx_select_options *base,
                               const struct tpx_cli_plan_args *pa,
                               const plan_extra *x,
                               const tpx_memory_options *mo, int64_t cp,
                               alts_t *s) {
  int64_t N = x->gpus, cp_room = 0;
  for (int64_t c = 2; c <= N; c++)
    cp_room |= N % c == 0 && cp_allowed(c, mo->seq);
  for (int k = 0; k < ALT_N; k++) {
    tpx_memory_options m = *mo;
    int64_t only = cp;
    if (k == ALT_CP && (cp > 1 || !cp_room))
      continue;
    if (k == ALT_AC && mo->activation_checkpointing)
      continue;
    if (k == ALT_OFFLOAD && mo->offload)
      continue;
    if (k == ALT_ALL &&
        (alt_fits(s, ALT_CP) || alt_fits(s, ALT_AC) ||
         alt_fits(s, ALT_OFFLOAD) ||
         s->costed[ALT_CP] + s->costed[ALT_AC] + s->costed[ALT_OFFLOAD] < 2))
      continue;
    if (k == ALT_CP || (k == ALT_ALL && cp <= 1 && cp_room))
      only = 0;
    m.activation_checkpointing |= k == ALT_AC || k == ALT_ALL;
    m.offload |= k == ALT_OFFLOAD || k == ALT_ALL;
    if (advise_run(reg, model, base, pa->fsdp, x, &m, only, pa->ep,
                   &s->run[k]) != 0)
      return -1;
    s->costed[k] = 1;
  }
  return 0;
}

int plan_advise(const struct tpx_cli_plan_args *pa, const tpx_registry *reg,
                const tpx_model *model, const tpx_select_options *base,
                const plan_extra *x, int json) {
  tpx_memory_options mo = x->mem;
  if (!x->seq_given)
    mo.seq = 4096;
  /* plan_extra_arg allows 1..2^20; said again so the compiler sees the
   * bound (-Walloc-size-larger-than= in the sanitizer build) */
  if (x->gpus < 1 || x->gpus > ((int64_t)1 << 20)) {
    fprintf(stderr, "tpx plan: --gpus %lld is outside 1..%lld\n",
            (long long)x->gpus, (long long)1 << 20);
    return 2;
  }
  int64_t cp = pa->cp > 1 ? pa->cp : 1;
  if (!cp_allowed(cp, mo.seq)) {
    fprintf(stderr,
            "tpx plan: --cp %lld needs --seq divisible by 2 x cp = %lld "
            "(got %lld)\n",
            (long long)cp, (long long)(2 * cp), (long long)mo.seq);
    return 2;
  }
  advice_t a = {NULL, 0, mo};
  alts_t s;
  memset(&s, 0, sizeof s);
  int code = 1;
  if (advise_run(reg, model, base, pa->fsdp, x, &mo, cp, pa->ep, &a) != 0)
    goto out;
  if (!(a.n && kind_of(&a.c[0]) == 0) && a.n && !a.c[0].rejected &&
      advise_alternatives(reg, model, base, pa, x, &mo, cp, &s) != 0)
    goto out;
  if (json)
    advise_print_json(&a, &s, model, x, pa);
  else
    advise_print_text(&a, &s, model, x, pa);
  code = a.n && kind_of(&a.c[0]) == 0 ? 0 : 1;
  if (cli_output_failed("tpx plan", 0))
    code = 1;
out:
  free(a.c);
  for (int k = 0; k < ALT_N; k++) free(s.run[k].c);
  return code;
}
