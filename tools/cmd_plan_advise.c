/* cmd_plan_advise.c — `tpx plan --gpus N`: the mesh advisor. Every
 * (dp_replicate, dp_shard, tp) with product N is planned as `tpx plan`
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
 * runnable `tpx plan` command; when nothing fits and activation
 * checkpointing is off, the advice is costed again with it and the best of
 * that is suggested. */
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
  int64_t dpr, dps, tp;
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
  if (ka < 2 && a->worst.peak != b->worst.peak)
    return a->worst.peak < b->worst.peak ? -1 : 1;
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
  int64_t n = c->dpr * c->dps * c->tp;
  if (plan_mesh(c->dpr, c->dps, c->tp, &mesh, &err) != TPX_OK ||
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
  c->worst = buf[0];
  for (int64_t r = 1; r < n; r++)
    if (buf[r].peak > c->worst.peak)
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
  c->fits = c->worst.peak <= x->gpu_mem;
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
  if (mo->attention != TPX_ATTENTION_FLASH) {
    cmd_arg(b, size, "--attention");
    cmd_arg(b, size, tpx_attention_name(mo->attention));
  }
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
  json_object_set_new(o, "peak_bytes", jint_or_null(ok, c->worst.peak));
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
    json_object_set_new(m, "optimizer_torch",
                        json_integer(c->worst.optimizer_torch));
    json_object_set_new(o, "memory", m);
    json_object_set_new(o, "comm_tp_bytes", json_integer(c->traffic.tp));
    json_object_set_new(o, "comm_fsdp_bytes", json_integer(c->traffic.fsdp));
  }
  return o;
}

/* "best": the command for the first mesh when it fits, else null;
 * "suggestion": with activation checkpointing (`ac`, when it was costed). */
static void print_json(const advice_t *a, const advice_t *ac,
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
  json_object_set_new(root, "attention",
                      json_string(tpx_attention_name(a->mo.attention)));
  json_object_set_new(root, "rule", json_string(RANK_RULE));
  for (size_t i = 0; i < a->n; i++)
    json_array_append_new(arr, json_mesh(&a->c[i]));
  json_object_set_new(root, "advice", arr);
  int best = a->n && kind_of(&a->c[0]) == 0;
  if (best)
    best_command(cmd, sizeof cmd, pa, &a->c[0], &a->mo);
  json_object_set_new(root, "best", best ? json_string(cmd) : json_null());
  json_t *sug = json_null();
  if (ac && ac->n && kind_of(&ac->c[0]) == 0) {
    sug = json_object();
    best_command(cmd, sizeof cmd, pa, &ac->c[0], &ac->mo);
    json_object_set_new(sug, "activation_checkpointing", json_true());
    json_object_set_new(sug, "fitting",
                        json_integer((json_int_t)count_fitting(ac)));
    json_object_set_new(sug, "mesh", json_mesh(&ac->c[0]));
    json_object_set_new(sug, "command", json_string(cmd));
  }
  json_object_set_new(root, "suggestion", sug);
  char *s = json_dumps(root, JSON_PRESERVE_ORDER | JSON_INDENT(2));
  if (s)
    printf("%s\n", s);
  free(s);
  json_decref(root);
}

/* The table of costed meshes and the rejected ones. */
static void print_table(const advice_t *a) {
  char p[32], t[32], d[32], e[32];
  printf("  %-4s %6s %8s %4s %11s %5s %4s %12s %12s %12s\n", "", "dp_rep",
         "dp_shard", "tp", "peak/rank", "fits", "band", "sent/step", "tp",
         "fsdp");
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
    printf("  %-4zu %6lld %8lld %4lld %11s %5s %4s %12s %12s %12s\n", ++shown,
           (long long)c->dpr, (long long)c->dps, (long long)c->tp,
           tpx_format_bytes(c->worst.peak, p, sizeof p), c->fits ? "yes" : "no",
           band, tpx_format_bytes(c->traffic.total, t, sizeof t),
           tpx_format_bytes(c->traffic.tp, d, sizeof d),
           tpx_format_bytes(c->traffic.fsdp, e, sizeof e));
  }
  if (!shown)
    printf("  (no mesh the model allows)\n");
  if (rej) {
    printf("\nRejected (%zu):\n", rej);
    for (size_t i = 0; i < a->n; i++)
      if (a->c[i].rejected)
        printf("  dp_replicate=%lld dp_shard=%lld tp=%lld: %s\n",
               (long long)a->c[i].dpr, (long long)a->c[i].dps,
               (long long)a->c[i].tp, a->c[i].why);
  }
}

static void print_text(const advice_t *a, const advice_t *ac,
                       const tpx_model *model, const plan_extra *x,
                       const struct tpx_cli_plan_args *pa) {
  char m[32], g[32], l[32], cmd[4096];
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : "(no architecture)";
  tpx_format_bytes(x->gpu_mem, g, sizeof g);
  printf("Mesh advice: %s on %lld GPUs of %s\n", arch, (long long)x->gpus, g);
  printf("  optimizer %s; activations for batch %lld x seq %lld%s%s%s; "
         "worst rank shown; docs/MEMORY.md\n",
         tpx_optimizer_name(a->mo.optimizer), (long long)a->mo.batch,
         (long long)a->mo.seq,
         a->mo.activation_checkpointing ? ", activation checkpointing" : "",
         a->mo.attention != TPX_ATTENTION_FLASH ? ", attention " : "",
         a->mo.attention != TPX_ATTENTION_FLASH
             ? tpx_attention_name(a->mo.attention)
             : "");
  printf("  order: %s\n\n", RANK_RULE);
  print_table(a);
  size_t shown = a->n && !a->c[0].rejected;
  if (shown && a->c[0].fits) {
    best_command(cmd, sizeof cmd, pa, &a->c[0], &a->mo);
    printf("\nBest: %s\n  (peak %s of %s, %s left)\n", cmd,
           tpx_format_bytes(a->c[0].worst.peak, m, sizeof m), g,
           tpx_format_bytes(x->gpu_mem - a->c[0].worst.peak, l, sizeof l));
    return;
  }
  if (shown)
    printf("\nNo mesh fits in %s per GPU; the smallest peak is %s "
           "(dp_replicate=%lld dp_shard=%lld tp=%lld)\n",
           g, tpx_format_bytes(a->c[0].worst.peak, m, sizeof m),
           (long long)a->c[0].dpr, (long long)a->c[0].dps,
           (long long)a->c[0].tp);
  if (ac && ac->n && kind_of(&ac->c[0]) == 0) {
    best_command(cmd, sizeof cmd, pa, &ac->c[0], &ac->mo);
    printf("With activation checkpointing %zu mesh%s fit; the best (peak "
           "%s):\n  %s\n",
           count_fitting(ac), count_fitting(ac) == 1 ? "" : "es",
           tpx_format_bytes(ac->c[0].worst.peak, m, sizeof m), cmd);
  } else if (ac && ac->n && !ac->c[0].rejected) {
    printf("Even with activation checkpointing nothing fits (smallest peak "
           "%s): use more GPUs, a smaller --batch or --seq, or a lighter "
           "--optimizer\n",
           tpx_format_bytes(ac->c[0].worst.peak, m, sizeof m));
  } else if (shown && a->mo.activation_checkpointing) {
    printf("Activation checkpointing is already on: use more GPUs, a "
           "smaller --batch or --seq, or a lighter --optimizer\n");
  }
}

/* Plans and costs every mesh of x->gpus ranks with memory options `mo`
 * into *a (ranked). 0, or -1 out of memory (printed). */
static int advise_run(const tpx_registry *reg, const tpx_model *model,
                      const tpx_select_options *base, int fsdp,
                      const plan_extra *x, const tpx_memory_options *mo,
                      advice_t *a) {
  int64_t N = x->gpus;
  size_t cap = 0;
  for (int64_t t = 1; t <= N; t++)
    if (N % t == 0)
      for (int64_t s = 1; s <= N / t; s++)
        if ((N / t) % s == 0)
          cap++;
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
    for (int64_t s = 1; s <= N / t; s++) {
      if ((N / t) % s)
        continue;
      cand_t *k = &a->c[a->n++];
      k->tp = t;
      k->dps = s;
      k->dpr = N / t / s;
      if (why) {
        k->rejected = 1;
        snprintf(k->why, sizeof k->why, "%s", why);
      } else {
        cost(k, model, sel, fsdp, x, mo, buf, tbuf);
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
  advice_t a = {NULL, 0, mo}, ac = {NULL, 0, mo};
  int code = 1, with_ac = 0;
  if (advise_run(reg, model, base, pa->fsdp, x, &mo, &a) != 0)
    goto out;
  /* Nothing fits: what activation checkpointing would change. */
  if (!(a.n && kind_of(&a.c[0]) == 0) && !mo.activation_checkpointing && a.n &&
      !a.c[0].rejected) {
    tpx_memory_options mac = mo;
    mac.activation_checkpointing = 1;
    if (advise_run(reg, model, base, pa->fsdp, x, &mac, &ac) != 0)
      goto out;
    with_ac = 1;
  }
  if (json)
    print_json(&a, with_ac ? &ac : NULL, model, x, pa);
  else
    print_text(&a, with_ac ? &ac : NULL, model, x, pa);
  code = a.n && kind_of(&a.c[0]) == 0 ? 0 : 1;
  if (fflush(stdout) != 0)
    code = 1;
out:
  free(a.c);
  free(ac.c);
  return code;
}
