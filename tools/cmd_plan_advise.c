/* cmd_plan_advise.c — `tpx plan --gpus N`: the mesh advisor. Every
 * (dp_replicate, dp_shard, tp) with product N (with --cp C: every
 * (dp_replicate, dp_shard, C, tp)) is planned as `tpx plan`
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
 * fit); when none of them alone fits, all three together. The best of each
 * is suggested. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plan_extra.h"
#include "plan_setup.h"

#define RANK_RULE                                                              \
  "meshes that fit, in traffic bands (bytes sent per step within 10% of the "  \
  "band's least), the most memory left first within a band; then those "       \
  "that do not fit, by peak; then the rejected"
#define BAND_REL 0.10
#define BAND_ABS ((int64_t)1 << 20)

typedef struct {
  int64_t dpr, dps, cp, tp;
  int rejected;
  char why[512];
  tpx_memory worst;    /* the rank with the largest peak */
  tpx_traffic traffic; /* the rank sending most */
  int fits;
  int band; /* traffic band among the fitting meshes, 0 first; -1 none */
} cand_t;

static int kind_of(const cand_t *c) {
  return c->rejected ? 2 : c->fits ? 0 : 1;
}

static int tie_cmp(const cand_t *a, const cand_t *b) {
  if (a->tp != b->tp)
    return a->tp < b->tp ? -1 : 1;
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
  if (tpx_memory_ranks(sh, mo, 0, (size_t)n, buf, &err) != TPX_OK) {
    c->rejected = 1;
    snprintf(c->why, sizeof c->why, "%s", err.message);
    goto out;
  }
  /* the rank needing the most device memory (the peak without offload) */
  c->worst = buf[0];
  for (int64_t r = 1; r < n; r++)
    if (buf[r].device > c->worst.device)
      c->worst = buf[r];
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
  c->fits = c->worst.device <= x->gpu_mem;
out:
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
}

static json_t *jint_or_null(int ok, int64_t v) {
  return ok ? json_integer(v) : json_null();
}

/* One advice run: every mesh of x->gpus ranks, planned, costed, ranked. */
typedef struct {
  cand_t *c;
  size_t n;
  tpx_memory_options mo;
} advice_t;

/* Appends `arg` to the command in `b` (shell-quoted when it needs it). */
static void cmd_arg(char *b, size_t size, const char *arg) {
  size_t len = strlen(b);
  int plain = *arg != '\0';
  for (const char *p = arg; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789_./:=@%+,-",
                *p))
      plain = 0;
  if (plain) {
    snprintf(b + len, size - len, " %s", arg);
    return;
  }
  len += (size_t)snprintf(b + len, size - len, " '");
  for (const char *p = arg; *p && len + 5 < size; p++)
    len +=
        (size_t)snprintf(b + len, size - len, *p == '\'' ? "'\\''" : "%c", *p);
  if (len < size)
    snprintf(b + len, size - len, "'");
}

/* The `tpx plan` command that plans mesh `c` as the advice costed it: the
 * same inputs, the same memory options (--seq always: the advisor's
 * default, 4096, is not plan's). */
static void best_command(char *b, size_t size,
                         const struct tpx_cli_plan_args *pa, const cand_t *c,
                         const tpx_memory_options *mo) {
  char num[32];
  snprintf(b, size, "tpx plan");
  cmd_arg(b, size, "--config");
  cmd_arg(b, size, pa->config);
  if (pa->weights) {
    cmd_arg(b, size, "--weights");
    cmd_arg(b, size, pa->weights);
  }
  if (pa->dtype) {
    cmd_arg(b, size, "--dtype");
    cmd_arg(b, size, pa->dtype);
  }
  if (pa->plan) {
    cmd_arg(b, size, "--plan");
    cmd_arg(b, size, pa->plan);
  }
  if (pa->sp)
    cmd_arg(b, size, "--sp");
  if (!pa->fsdp)
    cmd_arg(b, size, "--no-fsdp");
  size_t len = strlen(b);
  snprintf(b + len, size - len,
           " --dp-replicate %lld --dp-shard %lld --tp %lld", (long long)c->dpr,
           (long long)c->dps, (long long)c->tp);
  if (c->cp > 1) {
    len = strlen(b);
    snprintf(b + len, size - len, " --cp %lld", (long long)c->cp);
  }
  if (mo->optimizer != TPX_OPTIMIZER_ADAMW) {
    cmd_arg(b, size, "--optimizer");
    cmd_arg(b, size, tpx_optimizer_name(mo->optimizer));
  }
  snprintf(num, sizeof num, "%lld", (long long)mo->batch);
  cmd_arg(b, size, "--batch");
  cmd_arg(b, size, num);
  snprintf(num, sizeof num, "%lld", (long long)mo->seq);
  cmd_arg(b, size, "--seq");
  cmd_arg(b, size, num);
  if (mo->activation_checkpointing)
    cmd_arg(b, size, "--activation-checkpointing");
  if (mo->offload)
    cmd_arg(b, size, "--offload");
}

static size_t count_fitting(const advice_t *a) {
  size_t k = 0;
  for (size_t i = 0; i < a->n; i++) k += kind_of(&a->c[i]) == 0;
  return k;
}

static json_t *json_mesh(const cand_t *c) {
  json_t *o = json_object();
  int ok = !c->rejected;
  json_object_set_new(o, "dp_replicate", json_integer(c->dpr));
  json_object_set_new(o, "dp_shard", json_integer(c->dps));
  json_object_set_new(o, "tp", json_integer(c->tp));
  json_object_set_new(o, "cp", json_integer(c->cp));
  json_object_set_new(o, "peak_bytes", jint_or_null(ok, c->worst.peak));
  json_object_set_new(o, "device_bytes", jint_or_null(ok, c->worst.device));
  json_object_set_new(o, "host_bytes", jint_or_null(ok, c->worst.host));
  json_object_set_new(o, "fits", json_boolean(ok && c->fits));
  json_object_set_new(o, "traffic_band",
                      c->band >= 0 ? json_integer(c->band) : json_null());
  json_object_set_new(o, "comm_bytes_per_step",
                      jint_or_null(ok, c->traffic.total));
  json_object_set_new(o, "rejected_because",
                      ok ? json_null() : json_string(c->why));
  if (ok) {
    json_t *m = json_object();
    json_object_set_new(m, "params", json_integer(c->worst.params));
    json_object_set_new(m, "grads", json_integer(c->worst.grads));
    json_object_set_new(m, "optimizer", json_integer(c->worst.optimizer));
    json_object_set_new(m, "gather_peak", json_integer(c->worst.gather_peak));
    json_object_set_new(m, "activations", json_integer(c->worst.activations));
    json_object_set_new(m, "peak", json_integer(c->worst.peak));
    json_object_set_new(o, "memory", m);
    json_object_set_new(o, "comm_tp_bytes", json_integer(c->traffic.tp));
    json_object_set_new(o, "comm_fsdp_bytes", json_integer(c->traffic.fsdp));
    json_object_set_new(o, "comm_cp_bytes", json_integer(c->traffic.cp));
  }
  return o;
}

/* What would make a mesh fit when none does (see the file comment): the
 * same advice costed with cp, activation checkpointing, CPU offload, or
 * all three. */
enum { ALT_CP, ALT_AC, ALT_OFFLOAD, ALT_ALL, ALT_N };
static const char *const alt_name[ALT_N] = {
    "context parallelism", "activation checkpointing", "CPU offload",
    "context parallelism, activation checkpointing and CPU offload"};
static const char *const alt_key[ALT_N] = {"cp", "activation_checkpointing",
                                           "offload", "all"};

typedef struct {
  advice_t run[ALT_N];
  int costed[ALT_N];
} alts_t;

static int alt_fits(const alts_t *s, int k) {
  return s->costed[k] && s->run[k].n && kind_of(&s->run[k].c[0]) == 0;
}

static json_t *json_alt(const advice_t *r, const struct tpx_cli_plan_args *pa,
                        const char *key) {
  char cmd[4096];
  json_t *o = json_object();
  int fits = r->n && kind_of(&r->c[0]) == 0;
  json_object_set_new(o, "with", json_string(key));
  json_object_set_new(o, "fitting", json_integer((json_int_t)count_fitting(r)));
  json_object_set_new(o, "mesh", r->n ? json_mesh(&r->c[0]) : json_null());
  if (fits)
    best_command(cmd, sizeof cmd, pa, &r->c[0], &r->mo);
  json_object_set_new(o, "command", fits ? json_string(cmd) : json_null());
  return o;
}

/* "best": the command for the first mesh when it fits, else null;
 * "suggestion": with activation checkpointing (when it was costed and
 * fits); "suggestions": every alternative costed, fitting or not. */
static void print_json(const advice_t *a, const alts_t *s,
                       const tpx_model *model, const plan_extra *x,
                       const struct tpx_cli_plan_args *pa) {
  json_t *root = json_object(), *arr = json_array();
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : NULL;
  char cmd[4096];
  json_object_set_new(root, "format", json_string("tpx-advice/1"));
  json_object_set_new(root, "architecture",
                      arch ? json_string(arch) : json_null());
  json_object_set_new(root, "gpus", json_integer(x->gpus));
  json_object_set_new(root, "gpu_mem", json_integer(x->gpu_mem));
  json_object_set_new(root, "optimizer",
                      json_string(tpx_optimizer_name(a->mo.optimizer)));
  json_object_set_new(root, "batch", json_integer(a->mo.batch));
  json_object_set_new(root, "seq", json_integer(a->mo.seq));
  json_object_set_new(root, "activation_checkpointing",
                      json_boolean(a->mo.activation_checkpointing));
  json_object_set_new(root, "offload", json_boolean(a->mo.offload));
  json_object_set_new(root, "rule", json_string(RANK_RULE));
  for (size_t i = 0; i < a->n; i++)
    json_array_append_new(arr, json_mesh(&a->c[i]));
  json_object_set_new(root, "advice", arr);
  int best = a->n && kind_of(&a->c[0]) == 0;
  if (best)
    best_command(cmd, sizeof cmd, pa, &a->c[0], &a->mo);
  json_object_set_new(root, "best", best ? json_string(cmd) : json_null());
  json_t *sug = json_null();
  const advice_t *ac = &s->run[ALT_AC];
  if (alt_fits(s, ALT_AC)) {
    sug = json_object();
    best_command(cmd, sizeof cmd, pa, &ac->c[0], &ac->mo);
    json_object_set_new(sug, "activation_checkpointing", json_true());
    json_object_set_new(sug, "fitting",
                        json_integer((json_int_t)count_fitting(ac)));
    json_object_set_new(sug, "mesh", json_mesh(&ac->c[0]));
    json_object_set_new(sug, "command", json_string(cmd));
  }
  json_object_set_new(root, "suggestion", sug);
  json_t *all = json_array();
  for (int k = 0; k < ALT_N; k++)
    if (s->costed[k])
      json_array_append_new(all, json_alt(&s->run[k], pa, alt_key[k]));
  json_object_set_new(root, "suggestions", all);
  char *out = json_dumps(root, JSON_PRESERVE_ORDER | JSON_INDENT(2));
  if (out)
    printf("%s\n", out);
  free(out);
  json_decref(root);
}

/* The table of costed meshes and the rejected ones; a cp column when some
 * mesh has cp > 1. */
static void print_table(const advice_t *a) {
  char p[32], t[32], d[32], e[32];
  int with_cp = 0;
  for (size_t i = 0; i < a->n; i++) with_cp |= a->c[i].cp > 1;
  printf("  %-4s %6s %8s", "", "dp_rep", "dp_shard");
  if (with_cp)
    printf(" %4s", "cp");
  printf(" %4s %11s %5s %4s %12s %12s %12s\n", "tp", "peak/rank", "fits",
         "band", "sent/step", "tp", "fsdp");
  size_t shown = 0, rej = 0;
  for (size_t i = 0; i < a->n; i++) {
    const cand_t *c = &a->c[i];
    if (c->rejected) {
      rej++;
      continue;
    }
    char band[16] = "-";
    if (c->band >= 0)
      snprintf(band, sizeof band, "%d", c->band + 1);
    printf("  %-4zu %6lld %8lld", ++shown, (long long)c->dpr,
           (long long)c->dps);
    if (with_cp)
      printf(" %4lld", (long long)c->cp);
    printf(" %4lld %11s %5s %4s %12s %12s %12s\n", (long long)c->tp,
           tpx_format_bytes(c->worst.device, p, sizeof p),
           c->fits ? "yes" : "no", band,
           tpx_format_bytes(c->traffic.total, t, sizeof t),
           tpx_format_bytes(c->traffic.tp, d, sizeof d),
           tpx_format_bytes(c->traffic.fsdp, e, sizeof e));
  }
  if (!shown)
    printf("  (no mesh the model allows)\n");
  if (rej) {
    printf("\nRejected (%zu):\n", rej);
    for (size_t i = 0; i < a->n; i++)
      if (a->c[i].rejected) {
        printf("  dp_replicate=%lld dp_shard=%lld", (long long)a->c[i].dpr,
               (long long)a->c[i].dps);
        if (a->c[i].cp > 1)
          printf(" cp=%lld", (long long)a->c[i].cp);
        printf(" tp=%lld: %s\n", (long long)a->c[i].tp, a->c[i].why);
      }
  }
}

/* One alternative's line(s) when nothing fits: activation checkpointing
 * keeps the wording it always had. */
static void print_alt(const alts_t *s, int k,
                      const struct tpx_cli_plan_args *pa) {
  char m[32], h[32], cmd[4096];
  const advice_t *r = &s->run[k];
  if (!s->costed[k] || !r->n)
    return;
  if (alt_fits(s, k)) {
    size_t n = count_fitting(r);
    best_command(cmd, sizeof cmd, pa, &r->c[0], &r->mo);
    printf("With %s %zu mesh%s fit; the best (peak %s", alt_name[k], n,
           n == 1 ? "" : "es",
           tpx_format_bytes(r->c[0].worst.device, m, sizeof m));
    if (r->mo.offload)
      printf(" on the device, %s on the host",
             tpx_format_bytes(r->c[0].worst.host, h, sizeof h));
    printf("):\n  %s\n", cmd);
  } else if (!r->c[0].rejected) {
    printf("Even with %s nothing fits (smallest peak %s)%s\n", alt_name[k],
           tpx_format_bytes(r->c[0].worst.device, m, sizeof m),
           k == ALT_AC ? ": use more GPUs, a smaller --batch or --seq, or a "
                         "lighter --optimizer"
                       : "");
  }
}

static void print_text(const advice_t *a, const alts_t *s,
                       const tpx_model *model, const plan_extra *x,
                       const struct tpx_cli_plan_args *pa) {
  char m[32], g[32], l[32], cmd[4096];
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : "(no architecture)";
  tpx_format_bytes(x->gpu_mem, g, sizeof g);
  printf("Mesh advice: %s on %lld GPUs of %s\n", arch, (long long)x->gpus, g);
  printf("  optimizer %s; activations for batch %lld x seq %lld%s%s; worst "
         "rank shown; docs/MEMORY.md\n",
         tpx_optimizer_name(a->mo.optimizer), (long long)a->mo.batch,
         (long long)a->mo.seq,
         a->mo.activation_checkpointing ? ", activation checkpointing" : "",
         a->mo.offload ? "; CPU offload (device bytes shown)" : "");
  printf("  order: %s\n\n", RANK_RULE);
  print_table(a);
  size_t shown = a->n && !a->c[0].rejected;
  if (shown && a->c[0].fits) {
    best_command(cmd, sizeof cmd, pa, &a->c[0], &a->mo);
    printf("\nBest: %s\n  (peak %s of %s, %s left)\n", cmd,
           tpx_format_bytes(a->c[0].worst.device, m, sizeof m), g,
           tpx_format_bytes(x->gpu_mem - a->c[0].worst.device, l, sizeof l));
    return;
  }
  if (shown) {
    char cps[32] = "";
    if (a->c[0].cp > 1)
      snprintf(cps, sizeof cps, " cp=%lld", (long long)a->c[0].cp);
    printf("\nNo mesh fits in %s per GPU; the smallest peak is %s "
           "(dp_replicate=%lld dp_shard=%lld%s tp=%lld)\n",
           g, tpx_format_bytes(a->c[0].worst.device, m, sizeof m),
           (long long)a->c[0].dpr, (long long)a->c[0].dps, cps,
           (long long)a->c[0].tp);
  }
  int any = 0;
  for (int k = 0; k < ALT_N; k++) {
    print_alt(s, k, pa);
    any |= s->costed[k];
  }
  if (!any && shown && a->mo.activation_checkpointing)
    printf("Activation checkpointing is already on: use more GPUs, a "
           "smaller --batch or --seq, or a lighter --optimizer\n");
}

/* 1 when cp may shard sequences of `seq` tokens (the load balancer cuts
 * them into 2 cp chunks). */
static int cp_allowed(int64_t cp, int64_t seq) {
  return cp == 1 || (seq > 0 && seq % (2 * cp) == 0);
}

/* Plans and costs every mesh of x->gpus ranks with memory options `mo`
 * into *a (ranked): cp `cp_only` (0: every cp > 1 the sequence allows).
 * 0, or -1 out of memory (printed). */
static int advise_run(const tpx_registry *reg, const tpx_model *model,
                      const tpx_select_options *base, int fsdp,
                      const plan_extra *x, const tpx_memory_options *mo,
                      int64_t cp_only, advice_t *a) {
  int64_t N = x->gpus;
  size_t cap = 0;
  for (int64_t t = 1; t <= N; t++)
    for (int64_t c = 1; N % t == 0 && c <= N / t; c++)
      for (int64_t s = 1; (N / t) % c == 0 && s <= N / t / c; s++)
        cap += (N / t / c) % s == 0;
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
    if (N % t)
      continue;
    tpx_select_options so = *base;
    so.tp_size = t;
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
    for (int64_t c = 1; c <= N / t; c++) {
      if ((N / t) % c || (cp_only ? c != cp_only : c == 1) ||
          !cp_allowed(c, mo->seq))
        continue;
      for (int64_t s = 1; s <= N / t / c; s++) {
        if ((N / t / c) % s)
          continue;
        cand_t *k = &a->c[a->n++];
        k->tp = t;
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
    tpx_selection_destroy(sel);
    tpx_diag_list_destroy(diags);
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
    if (advise_run(reg, model, base, pa->fsdp, x, &m, only, &s->run[k]) != 0)
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
  if (advise_run(reg, model, base, pa->fsdp, x, &mo, cp, &a) != 0)
    goto out;
  if (!(a.n && kind_of(&a.c[0]) == 0) && a.n && !a.c[0].rejected &&
      advise_alternatives(reg, model, base, pa, x, &mo, cp, &s) != 0)
    goto out;
  if (json)
    print_json(&a, &s, model, x, pa);
  else
    print_text(&a, &s, model, x, pa);
  code = a.n && kind_of(&a.c[0]) == 0 ? 0 : 1;
  if (fflush(stdout) != 0)
    code = 1;
out:
  free(a.c);
  for (int k = 0; k < ALT_N; k++) free(s.run[k].c);
  return code;
}
