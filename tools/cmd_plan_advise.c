/* cmd_plan_advise.c — `tpx plan --gpus N`: the mesh advisor. Every
 * (dp_replicate, dp_shard, tp) with product N is planned as `tpx plan`
 * would plan it (selection per tp size, so heads-not-divisible and invalid
 * plans are rejected with the selection's own message), then costed with
 * the library's training-memory and traffic estimates (tpx/memory.h) on its
 * worst rank. Fitting meshes come first, by bytes sent per step, then by
 * peak; then the ones that do not fit, by peak; then the rejected. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plan_extra.h"

typedef struct {
  int64_t dpr, dps, tp;
  int rejected;
  char why[512];
  tpx_memory worst; /* the rank with the largest peak */
  tpx_traffic traffic; /* the rank sending most */
  int fits;
} cand_t;

static int cand_cmp(const void *pa, const void *pb) {
  const cand_t *a = pa, *b = pb;
  int ka = a->rejected ? 2 : a->fits ? 0 : 1;
  int kb = b->rejected ? 2 : b->fits ? 0 : 1;
  if (ka != kb) return ka - kb;
  if (ka == 0 && a->traffic.total != b->traffic.total)
    return a->traffic.total < b->traffic.total ? -1 : 1;
  if (ka < 2 && a->worst.peak != b->worst.peak)
    return a->worst.peak < b->worst.peak ? -1 : 1;
  if (a->tp != b->tp) return a->tp < b->tp ? -1 : 1;
  if (a->dps != b->dps) return a->dps > b->dps ? -1 : 1;
  return 0;
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
    if (buf[r].peak > c->worst.peak) c->worst = buf[r];
  /* the rank sending most (TP traffic is the same on every rank, computed
   * once; FSDP traffic differs by uneven shards) */
  if (tpx_traffic_ranks(sh, mo, 0, (size_t)n, tbuf, &err) != TPX_OK) {
    c->rejected = 1;
    snprintf(c->why, sizeof c->why, "%s", err.message);
    goto out;
  }
  for (int64_t r = 0; r < n; r++)
    if (r == 0 || tbuf[r].total > c->traffic.total) c->traffic = tbuf[r];
  c->fits = c->worst.peak <= x->gpu_mem;
out:
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
}

static json_t *jint_or_null(int ok, int64_t v) {
  return ok ? json_integer(v) : json_null();
}

static void print_json(const cand_t *c, size_t n, const tpx_model *model,
                       const plan_extra *x, const tpx_memory_options *mo) {
  json_t *root = json_object(), *arr = json_array();
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : NULL;
  json_object_set_new(root, "format", json_string("tpx-advice/1"));
  json_object_set_new(root, "architecture",
                      arch ? json_string(arch) : json_null());
  json_object_set_new(root, "gpus", json_integer(x->gpus));
  json_object_set_new(root, "gpu_mem", json_integer(x->gpu_mem));
  json_object_set_new(root, "optimizer",
                      json_string(tpx_optimizer_name(mo->optimizer)));
  json_object_set_new(root, "batch", json_integer(mo->batch));
  json_object_set_new(root, "seq", json_integer(mo->seq));
  json_object_set_new(root, "activation_checkpointing",
                      json_boolean(mo->activation_checkpointing));
  for (size_t i = 0; i < n; i++) {
    json_t *o = json_object();
    int ok = !c[i].rejected;
    json_object_set_new(o, "dp_replicate", json_integer(c[i].dpr));
    json_object_set_new(o, "dp_shard", json_integer(c[i].dps));
    json_object_set_new(o, "tp", json_integer(c[i].tp));
    json_object_set_new(o, "peak_bytes", jint_or_null(ok, c[i].worst.peak));
    json_object_set_new(o, "fits", json_boolean(ok && c[i].fits));
    json_object_set_new(o, "comm_bytes_per_step",
                        jint_or_null(ok, c[i].traffic.total));
    json_object_set_new(o, "rejected_because",
                        ok ? json_null() : json_string(c[i].why));
    if (ok) {
      json_t *m = json_object();
      json_object_set_new(m, "params", json_integer(c[i].worst.params));
      json_object_set_new(m, "grads", json_integer(c[i].worst.grads));
      json_object_set_new(m, "optimizer", json_integer(c[i].worst.optimizer));
      json_object_set_new(m, "gather_peak",
                          json_integer(c[i].worst.gather_peak));
      json_object_set_new(m, "activations",
                          json_integer(c[i].worst.activations));
      json_object_set_new(m, "peak", json_integer(c[i].worst.peak));
      json_object_set_new(o, "memory", m);
      json_object_set_new(o, "comm_tp_bytes", json_integer(c[i].traffic.tp));
      json_object_set_new(o, "comm_fsdp_bytes",
                          json_integer(c[i].traffic.fsdp));
    }
    json_array_append_new(arr, o);
  }
  json_object_set_new(root, "advice", arr);
  char *s = json_dumps(root, JSON_PRESERVE_ORDER | JSON_INDENT(2));
  if (s) printf("%s\n", s);
  free(s);
  json_decref(root);
}

static void print_text(const cand_t *c, size_t n, const tpx_model *model,
                       const plan_extra *x, const tpx_memory_options *mo) {
  char a[32], b[32], d[32], e[32];
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : "(no architecture)";
  printf("Mesh advice: %s on %lld GPUs of %s\n", arch, (long long)x->gpus,
         tpx_format_bytes(x->gpu_mem, a, sizeof a));
  printf("  optimizer %s; activations for batch %lld x seq %lld%s; worst "
         "rank shown; docs/MEMORY.md\n\n",
         tpx_optimizer_name(mo->optimizer), (long long)mo->batch,
         (long long)mo->seq,
         mo->activation_checkpointing ? ", activation checkpointing" : "");
  printf("  %-4s %6s %8s %4s %11s %5s %12s %12s %12s\n", "", "dp_rep",
         "dp_shard", "tp", "peak/rank", "fits", "sent/step", "tp", "fsdp");
  size_t shown = 0, rej = 0;
  for (size_t i = 0; i < n; i++) {
    if (c[i].rejected) {
      rej++;
      continue;
    }
    printf("  %-4zu %6lld %8lld %4lld %11s %5s %12s %12s %12s\n", ++shown,
           (long long)c[i].dpr, (long long)c[i].dps, (long long)c[i].tp,
           tpx_format_bytes(c[i].worst.peak, a, sizeof a),
           c[i].fits ? "yes" : "no",
           tpx_format_bytes(c[i].traffic.total, b, sizeof b),
           tpx_format_bytes(c[i].traffic.tp, d, sizeof d),
           tpx_format_bytes(c[i].traffic.fsdp, e, sizeof e));
  }
  if (!shown) printf("  (no mesh the model allows)\n");
  if (rej) {
    printf("\nRejected (%zu):\n", rej);
    for (size_t i = 0; i < n; i++)
      if (c[i].rejected)
        printf("  dp_replicate=%lld dp_shard=%lld tp=%lld: %s\n",
               (long long)c[i].dpr, (long long)c[i].dps, (long long)c[i].tp,
               c[i].why);
  }
  if (shown && c[0].fits) {
    printf("\nBest: tpx plan --dp-replicate %lld --dp-shard %lld --tp %lld "
           "(peak %s of %s)\n",
           (long long)c[0].dpr, (long long)c[0].dps, (long long)c[0].tp,
           tpx_format_bytes(c[0].worst.peak, a, sizeof a),
           tpx_format_bytes(x->gpu_mem, b, sizeof b));
  } else if (shown) {
    printf("\nNo mesh fits in %s per GPU; the smallest peak is %s "
           "(dp_replicate=%lld dp_shard=%lld tp=%lld)\n",
           tpx_format_bytes(x->gpu_mem, a, sizeof a),
           tpx_format_bytes(c[0].worst.peak, b, sizeof b),
           (long long)c[0].dpr, (long long)c[0].dps, (long long)c[0].tp);
  }
}

int plan_advise(const tpx_registry *reg, const tpx_model *model,
                const tpx_select_options *base, int fsdp,
                const plan_extra *x, int json) {
  tpx_memory_options mo = x->mem;
  if (!x->seq_given) mo.seq = 4096;
  int64_t N = x->gpus;
  /* plan_extra_arg allows 1..2^20; said again so the compiler sees the
   * bound (-Walloc-size-larger-than= in the sanitizer build) */
  if (N < 1 || N > ((int64_t)1 << 20)) {
    fprintf(stderr, "tpx plan: --gpus %lld is outside 1..%lld\n",
            (long long)N, (long long)1 << 20);
    return 2;
  }
  size_t cap = 0;
  for (int64_t t = 1; t <= N; t++)
    if (N % t == 0)
      for (int64_t s = 1; s <= N / t; s++)
        if ((N / t) % s == 0) cap++;
  cand_t *c = calloc(cap ? cap : 1, sizeof *c);
  tpx_memory *buf = calloc((size_t)N, sizeof *buf);
  tpx_traffic *tbuf = calloc((size_t)N, sizeof *tbuf);
  if (!c || !buf || !tbuf) {
    fprintf(stderr, "tpx plan: out of memory\n");
    free(c);
    free(buf);
    free(tbuf);
    return 1;
  }
  size_t n = 0;
  for (int64_t t = 1; t <= N; t++) {
    if (N % t) continue;
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
      if ((N / t) % s) continue;
      cand_t *k = &c[n++];
      k->tp = t;
      k->dps = s;
      k->dpr = N / t / s;
      if (why) {
        k->rejected = 1;
        snprintf(k->why, sizeof k->why, "%s", why);
      } else {
        cost(k, model, sel, fsdp, x, &mo, buf, tbuf);
      }
    }
    tpx_selection_destroy(sel);
    tpx_diag_list_destroy(diags);
  }
  qsort(c, n, sizeof *c, cand_cmp);
  if (json) print_json(c, n, model, x, &mo);
  else print_text(c, n, model, x, &mo);
  int code = n && !c[0].rejected && c[0].fits ? 0 : 1;
  if (fflush(stdout) != 0) code = 1;
  free(c);
  free(buf);
  free(tbuf);
  return code;
}
