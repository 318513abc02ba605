/* cmd_plan_advise_print.c — the mesh advisor's output (see plan_advise.h):
 * the ranked table and the rejected meshes, the best mesh and each costed
 * alternative as a runnable `tpx plan` command, as text or as tpx-advice/1
 * JSON (docs/MEMORY.md "Mesh advisor"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_advise.h"

static json_t *jint_or_null(int ok, int64_t v) {
  return ok ? json_integer(v) : json_null();
}

/* Appends `arg` to the command in `b` (shell-quoted when it needs it),
 * after a space unless it is the first word. */
static void cmd_arg(char *b, size_t size, const char *arg) {
  size_t len = strlen(b);
  const char *sep = len ? " " : "";
  int plain = *arg != '\0';
  for (const char *p = arg; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789_./:=@%+,-",
                *p))
      plain = 0;
  if (plain) {
    snprintf(b + len, size - len, "%s%s", sep, arg);
    return;
  }
  len += (size_t)snprintf(b + len, size - len, "%s'", sep);
  for (const char *p = arg; *p && len + 5 < size; p++)
    len +=
        (size_t)snprintf(b + len, size - len, *p == '\'' ? "'\\''" : "%c", *p);
  if (len < size)
    snprintf(b + len, size - len, "'");
}

/* The `tpx plan` command that plans mesh `c` as the advice costed it: the
 * program as the user ran it (argv[0]: a build tree's tools/tpx is not on
 * PATH), the same inputs, the same memory options (--seq always: the
 * advisor's default, 4096, is not plan's). */
static void best_command(char *b, size_t size,
                         const struct tpx_cli_plan_args *pa, const cand_t *c,
                         const tpx_memory_options *mo) {
  char num[32];
  b[0] = '\0';
  cmd_arg(b, size, pa->prog && *pa->prog ? pa->prog : "tpx");
  cmd_arg(b, size, "plan");
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
  if (c->ep > 1) {
    len = strlen(b);
    snprintf(b + len, size - len, " --ep %lld", (long long)c->ep);
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
  if (mo->attention != TPX_ATTENTION_FLASH) {
    cmd_arg(b, size, "--attention");
    cmd_arg(b, size, tpx_attention_name(mo->attention));
  }
  if (mo->loss_in_place)
    cmd_arg(b, size, "--loss-in-place");
}

static json_t *json_mesh(const cand_t *c) {
  json_t *o = json_object();
  int ok = !c->rejected;
  json_object_set_new(o, "dp_replicate", json_integer(c->dpr));
  json_object_set_new(o, "dp_shard", json_integer(c->dps));
  json_object_set_new(o, "tp", json_integer(c->tp));
  json_object_set_new(o, "cp", json_integer(c->cp));
  if (c->ep > 1) /* only for a custom MoE model's expert-parallel meshes */
    json_object_set_new(o, "ep", json_integer(c->ep));
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
  json_object_set_new(o, "upstream_refuses",
                      ok && c->upstream[0] ? json_string(c->upstream)
                                           : json_null());
  json_object_set_new(o, "host_bytes_max", jint_or_null(ok, c->host_max));
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
    json_object_set_new(o, "comm_cp_bytes", json_integer(c->traffic.cp));
    if (c->ep > 1)
      json_object_set_new(o, "comm_ep_bytes", json_integer(c->traffic.ep));
  }
  return o;
}

static const char *const alt_name[ALT_N] = {
    "context parallelism", "activation checkpointing", "CPU offload",
    "context parallelism, activation checkpointing and CPU offload"};
static const char *const alt_key[ALT_N] = {"cp", "activation_checkpointing",
                                           "offload", "all"};

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
void advise_print_json(const advice_t *a, const alts_t *s,
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
  json_object_set_new(root, "host_mem", json_integer(x->host_mem));
  json_object_set_new(root, "optimizer",
                      json_string(tpx_optimizer_name(a->mo.optimizer)));
  json_object_set_new(root, "batch", json_integer(a->mo.batch));
  json_object_set_new(root, "seq", json_integer(a->mo.seq));
  json_object_set_new(root, "activation_checkpointing",
                      json_boolean(a->mo.activation_checkpointing));
  json_object_set_new(root, "offload", json_boolean(a->mo.offload));
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
 * mesh has cp > 1; an ep column, and the bytes sent over ep (the token
 * dispatch) beside tp's and fsdp's, when some mesh has ep > 1. */
static void print_table(const advice_t *a) {
  char p[32], t[32], d[32], e[32], x[32];
  int with_cp = 0, with_ep = 0;
  for (size_t i = 0; i < a->n; i++) with_cp |= a->c[i].cp > 1;
  for (size_t i = 0; i < a->n; i++) with_ep |= a->c[i].ep > 1;
  printf("  %-4s %6s %8s", "", "dp_rep", "dp_shard");
  if (with_cp)
    printf(" %4s", "cp");
  if (with_ep)
    printf(" %4s", "ep");
  printf(" %4s %11s %5s %4s %12s %12s %12s", "tp", "peak/rank", "fits", "band",
         "sent/step", "tp", "fsdp");
  if (with_ep)
    printf(" %12s", "ep");
  printf("\n");
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
    if (with_ep)
      printf(" %4lld", (long long)(c->ep > 1 ? c->ep : 1));
    printf(" %4lld %11s %5s %4s %12s %12s %12s", (long long)c->tp,
           tpx_format_bytes(c->worst.device, p, sizeof p),
           c->fits ? "yes" : "no", band,
           tpx_format_bytes(c->traffic.total, t, sizeof t),
           tpx_format_bytes(c->traffic.tp, d, sizeof d),
           tpx_format_bytes(c->traffic.fsdp, e, sizeof e));
    if (with_ep)
      printf(" %12s", tpx_format_bytes(c->traffic.ep, x, sizeof x));
    if (a->mo.offload)
      printf("  host %s", tpx_format_bytes(c->host_max, p, sizeof p));
    if (c->upstream[0])
      printf("  (upstream refuses: %s)", c->upstream);
    printf("\n");
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
        if (a->c[i].ep > 1)
          printf(" ep=%lld", (long long)a->c[i].ep);
        printf(" tp=%lld: %s\n", (long long)a->c[i].tp, a->c[i].why);
      }
  }
}

/* One alternative's line(s) when nothing fits: activation checkpointing
 * keeps the wording it always had. */
static void print_alt(const alts_t *s, int k,
                      const struct tpx_cli_plan_args *pa, int64_t host_mem) {
  char m[32], h[32], g[32], cmd[4096];
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
             tpx_format_bytes(r->c[0].host_max, h, sizeof h));
    printf("):\n  %s\n", cmd);
    if (r->c[0].upstream[0])
      printf("  (upstream refuses: %s)\n", r->c[0].upstream);
  } else if (!r->c[0].rejected) {
    printf("Even with %s nothing fits (smallest peak %s", alt_name[k],
           tpx_format_bytes(r->c[0].worst.device, m, sizeof m));
    if (r->mo.offload)
      printf(" on the device, %s on the host; --host-mem %s per rank",
             tpx_format_bytes(r->c[0].host_max, h, sizeof h),
             tpx_format_bytes(host_mem, g, sizeof g));
    printf(")%s\n", k == ALT_AC ? ": use more GPUs, a smaller --batch or "
                                  "--seq, or a lighter --optimizer"
                                : "");
  }
}

void advise_print_text(const advice_t *a, const alts_t *s,
                       const tpx_model *model, const plan_extra *x,
                       const struct tpx_cli_plan_args *pa) {
  char m[32], g[32], l[32], cmd[4096];
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : "(no architecture)";
  tpx_format_bytes(x->gpu_mem, g, sizeof g);
  printf("Mesh advice: %s on %lld GPUs of %s\n", arch, (long long)x->gpus, g);
  printf("  optimizer %s; activations for batch %lld x seq %lld%s%s%s%s; "
         "worst rank shown; docs/MEMORY.md\n",
         tpx_optimizer_name(a->mo.optimizer), (long long)a->mo.batch,
         (long long)a->mo.seq,
         a->mo.activation_checkpointing ? ", activation checkpointing" : "",
         a->mo.attention != TPX_ATTENTION_FLASH ? ", attention " : "",
         a->mo.attention != TPX_ATTENTION_FLASH
             ? tpx_attention_name(a->mo.attention)
             : "",
         a->mo.offload ? "; CPU offload (device bytes shown, host bytes "
                         "within --host-mem)"
                       : "");
  printf("  order: %s\n\n", RANK_RULE);
  print_table(a);
  size_t shown = a->n && !a->c[0].rejected;
  if (shown && a->c[0].fits) {
    best_command(cmd, sizeof cmd, pa, &a->c[0], &a->mo);
    printf("\nBest: %s\n  (peak %s of %s, %s left)\n", cmd,
           tpx_format_bytes(a->c[0].worst.device, m, sizeof m), g,
           tpx_format_bytes(x->gpu_mem - a->c[0].worst.device, l, sizeof l));
    if (a->c[0].upstream[0])
      printf("  (upstream refuses: %s)\n", a->c[0].upstream);
    return;
  }
  if (shown) {
    char cps[64] = "";
    if (a->c[0].cp > 1)
      snprintf(cps, sizeof cps, " cp=%lld", (long long)a->c[0].cp);
    if (a->c[0].ep > 1)
      snprintf(cps + strlen(cps), sizeof cps - strlen(cps), " ep=%lld",
               (long long)a->c[0].ep);
    printf("\nNo mesh fits in %s per GPU; the smallest peak is %s "
           "(dp_replicate=%lld dp_shard=%lld%s tp=%lld)\n",
           g, tpx_format_bytes(a->c[0].worst.device, m, sizeof m),
           (long long)a->c[0].dpr, (long long)a->c[0].dps, cps,
           (long long)a->c[0].tp);
  }
  int any = 0;
  for (int k = 0; k < ALT_N; k++) {
    print_alt(s, k, pa, x->host_mem);
    any |= s->costed[k];
  }
  if (!any && shown && a->mo.activation_checkpointing)
    printf("Activation checkpointing is already on: use more GPUs, a "
           "smaller --batch or --seq, or a lighter --optimizer\n");
}
