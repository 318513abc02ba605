/* bench_rt.c — tpx-bench-rt: what the runtime's FSDP2 step costs on the
 * local backend, next to the bare collectives it has to run.
 *
 *   tpx-bench-rt [--layers L] [--hidden H] [--inter I] [--vocab V]
 *                [--dp-shard N] [--tp N] [--steps K] [--compute-ms X]
 *
 * A Llama-shaped model (f32; default hidden 512, intermediate 1408, 8
 * layers, vocab 32000: ~24M parameters) with the Llama TP plan, FSDP2 over
 * dp_shard. One "step" = zero_grads, forward (unshard / X ms of busy
 * compute / reshard per unit), backward (unshard, gradients written, X ms,
 * reduce_grads, reshard per unit), grad norm, clip, AdamW. Three modes:
 * prefetch on the comm thread (async), synchronous prefetch, no prefetch.
 * Columns: step ms (rank 0, median of the steps), exposed ms = time rank 0
 * spends inside unshard / reduce_grads / grad_norm (what compute does not
 * hide), and the baseline measured in the same run: the bare
 * tpx_comm_all_gather + tpx_comm_reduce_scatter of the same flat unit
 * sizes over dp_shard, per step, without the runtime.
 * A benchmark, not a test: meson never runs it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpx/tpx.h"

typedef struct bopts {
  int64_t layers, hidden, inter, vocab, dps, tp;
  int steps;
  double compute_ms;
} bopts;

typedef struct bctx {
  bopts o;
  tpx_model *model;
  tpx_plan *plan;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  int prefetch, async, baseline;
  double step_ms[64], exposed_ms[64];
} bctx;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void busy(double ms) {
  double end = now_ms() + ms;
  volatile double x = 1.0;
  while (now_ms() < end) x = x * 1.0000001 + 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n ? v[n / 2] : 0;
}

static void die(const char *what, const tpx_error *e) {
  fprintf(stderr, "tpx-bench-rt: %s: %s\n", what, e->message);
  exit(1);
}

static void add_linear(tpx_model *m, const char *fqn, int64_t out, int64_t in) {
  tpx_error e = {0};
  int64_t s[2] = {out, in};
  if (tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e) != TPX_OK ||
      tpx_model_add_param(m, fqn, "weight", s, 2, TPX_DTYPE_F32, NULL, &e) !=
          TPX_OK)
    die(fqn, &e);
}

static void add_norm(tpx_model *m, const char *fqn, int64_t h) {
  tpx_error e = {0};
  if (tpx_model_add_module(m, fqn, TPX_MODULE_NORM, NULL, &e) != TPX_OK ||
      tpx_model_add_param(m, fqn, "weight", &h, 1, TPX_DTYPE_F32, NULL, &e) !=
          TPX_OK)
    die(fqn, &e);
}

static void build(bctx *b) {
  tpx_error e = {0};
  const bopts *o = &b->o;
  if (tpx_model_create(&b->model, &e) != TPX_OK)
    die("model", &e);
  int64_t emb[2] = {o->vocab, o->hidden};
  if (tpx_model_add_module(b->model, "model.embed_tokens", TPX_MODULE_EMBEDDING,
                           NULL, &e) != TPX_OK ||
      tpx_model_add_param(b->model, "model.embed_tokens", "weight", emb, 2,
                          TPX_DTYPE_F32, NULL, &e) != TPX_OK)
    die("embed", &e);
  for (int64_t l = 0; l < o->layers; l++) {
    char p[128];
    static const char *const att[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    for (int i = 0; i < 4; i++) {
      snprintf(p, sizeof p, "model.layers.%lld.self_attn.%s", (long long)l,
               att[i]);
      add_linear(b->model, p, o->hidden, o->hidden);
    }
    snprintf(p, sizeof p, "model.layers.%lld.mlp.gate_proj", (long long)l);
    add_linear(b->model, p, o->inter, o->hidden);
    snprintf(p, sizeof p, "model.layers.%lld.mlp.up_proj", (long long)l);
    add_linear(b->model, p, o->inter, o->hidden);
    snprintf(p, sizeof p, "model.layers.%lld.mlp.down_proj", (long long)l);
    add_linear(b->model, p, o->hidden, o->inter);
    snprintf(p, sizeof p, "model.layers.%lld.input_layernorm", (long long)l);
    add_norm(b->model, p, o->hidden);
    snprintf(p, sizeof p, "model.layers.%lld.post_attention_layernorm",
             (long long)l);
    add_norm(b->model, p, o->hidden);
  }
  add_norm(b->model, "model.norm", o->hidden);
  add_linear(b->model, "lm_head", o->vocab, o->hidden);

  if (tpx_plan_create(&b->plan, &e) != TPX_OK)
    die("plan", &e);
  static const char *const col[] = {
      "model.layers.*.self_attn.q_proj", "model.layers.*.self_attn.k_proj",
      "model.layers.*.self_attn.v_proj", "model.layers.*.mlp.gate_proj",
      "model.layers.*.mlp.up_proj",      "lm_head"};
  static const char *const row[] = {"model.layers.*.self_attn.o_proj",
                                    "model.layers.*.mlp.down_proj"};
  tpx_style c = tpx_style_default(TPX_STYLE_COLWISE);
  tpx_style r = tpx_style_default(TPX_STYLE_ROWWISE);
  tpx_style emb_style = tpx_style_default(TPX_STYLE_ROWWISE);
  emb_style.input_layouts.items[0] = tpx_placement_replicate();
  if (tpx_plan_set(b->plan, "model.embed_tokens", &emb_style, 0, &e) != TPX_OK)
    die("plan", &e);
  for (size_t i = 0; i < sizeof col / sizeof col[0]; i++)
    if (tpx_plan_set(b->plan, col[i], &c, 0, &e) != TPX_OK)
      die("plan", &e);
  for (size_t i = 0; i < sizeof row / sizeof row[0]; i++)
    if (tpx_plan_set(b->plan, row[i], &r, 0, &e) != TPX_OK)
      die("plan", &e);
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {1, o->dps, o->tp};
  if (tpx_mesh_create(names, sizes, 3, &b->mesh, &e) != TPX_OK)
    die("mesh", &e);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.param_dtype = TPX_DTYPE_INVALID;
  if (tpx_sharding_create(b->model, b->plan, b->mesh, &so, &b->sh, &e) !=
      TPX_OK)
    die("sharding", &e);
}

#define TRY(call)                                                              \
  do {                                                                         \
    tpx_status st_ = (call);                                                   \
    if (st_ != TPX_OK)                                                         \
      return st_;                                                              \
  } while (0)

/* The bare collectives of one step: per unit an all-gather of its flat
 * buffer (forward and backward) and a reduce-scatter of its gradients. */
static tpx_status baseline_step(tpx_comm *dp, void *piece, void *full,
                                const size_t *unit_bytes, size_t nu,
                                tpx_error *err) {
  size_t n = (size_t)tpx_comm_size(dp);
  for (int pass = 0; pass < 2; pass++)
    for (size_t u = 0; u < nu; u++)
      TRY(tpx_comm_all_gather(dp, piece, full, (unit_bytes[u] / 4 + n - 1) / n,
                              TPX_DTYPE_F32, err));
  for (size_t u = 0; u < nu; u++)
    TRY(tpx_comm_reduce_scatter(dp, full, piece,
                                (unit_bytes[u] / 4 + n - 1) / n, TPX_DTYPE_F32,
                                TPX_REDUCE_SUM, err));
  return TPX_OK;
}

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  bctx *b = arg;
  tpx_mesh_comm *mc = NULL;
  TRY(tpx_mesh_comm_create(world, b->mesh, &mc, err));
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.prefetch = b->prefetch;
  ro.async = b->async;
  tpx_runtime *rt = NULL;
  TRY(tpx_runtime_create(b->sh, mc, &ro, &rt, err));
  int rank = tpx_comm_rank(world);
  size_t nu = tpx_runtime_num_units(rt), np = tpx_model_num_params(b->model);
  size_t *unit_bytes = calloc(nu, sizeof *unit_bytes);
  size_t maxb = 0;
  for (size_t p = 0; p < np; p++) {
    tpx_runtime_param_info in;
    TRY(tpx_runtime_param(rt, (int64_t)p, &in, err));
    unit_bytes[in.unit] += (size_t)in.local_numel * 4;
  }
  for (size_t u = 0; u < nu; u++)
    if (unit_bytes[u] > maxb)
      maxb = unit_bytes[u];
  /* per-rank piece and gathered buffer, rounded up to whole pieces */
  void *piece = b->baseline ? calloc(1, maxb + 64) : NULL;
  void *full = b->baseline ? calloc((size_t)b->o.dps, maxb + 64) : NULL;
  tpx_comm *dp = tpx_mesh_comm_dim(mc, 1);
  for (int s = 0; s < b->o.steps; s++) {
    double t0 = now_ms(), exposed = 0;
    if (b->baseline) {
      TRY(baseline_step(dp, piece, full, unit_bytes, nu, err));
    } else {
      TRY(tpx_runtime_zero_grads(rt, err));
      for (size_t k = 0; k < nu; k++) {
        size_t u = k == 0 ? nu - 1 : k - 1;
        double a = now_ms();
        TRY(tpx_runtime_unshard(rt, u, TPX_RUNTIME_FORWARD, err));
        exposed += now_ms() - a;
        busy(b->o.compute_ms);
        TRY(tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, err));
      }
      for (size_t k = nu; k-- > 0;) {
        size_t u = k == 0 ? nu - 1 : k - 1;
        double a = now_ms();
        TRY(tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, err));
        exposed += now_ms() - a;
        for (size_t p = 0; p < np; p++) {
          tpx_runtime_param_info in;
          TRY(tpx_runtime_param(rt, (int64_t)p, &in, err));
          if ((size_t)in.unit == u && in.unsharded_grad)
            memset(in.unsharded_grad, 0x3c, (size_t)in.local_numel * 4);
        }
        busy(b->o.compute_ms);
        a = now_ms();
        TRY(tpx_runtime_reduce_grads(rt, u, err));
        exposed += now_ms() - a;
        TRY(tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, err));
      }
      double a = now_ms(), norm = 0;
      TRY(tpx_runtime_clip_grad_norm(rt, 1.0, 2.0, &norm, err));
      exposed += now_ms() - a;
      tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
      TRY(tpx_runtime_adamw_step(rt, &ao, err));
    }
    if (rank == 0 && s < 64) {
      b->step_ms[s] = now_ms() - t0;
      b->exposed_ms[s] = exposed;
    }
  }
  free(piece);
  free(full);
  free(unit_bytes);
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

static int64_t arg_int(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "tpx-bench-rt: %s needs a value\n", argv[*i]);
    exit(2);
  }
  char *end = NULL;
  long long v = strtoll(argv[++*i], &end, 10);
  if (!end || *end || v < 0) {
    fprintf(stderr, "tpx-bench-rt: bad value '%s' for %s\n", argv[*i],
            argv[*i - 1]);
    exit(2);
  }
  return (int64_t)v;
}

int main(int argc, char **argv) {
  bctx b;
  memset(&b, 0, sizeof b);
  b.o = (bopts){8, 512, 1408, 32000, 2, 1, 5, 2.0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--layers"))
      b.o.layers = arg_int(argc, argv, &i);
    else if (!strcmp(argv[i], "--hidden"))
      b.o.hidden = arg_int(argc, argv, &i);
    else if (!strcmp(argv[i], "--inter"))
      b.o.inter = arg_int(argc, argv, &i);
    else if (!strcmp(argv[i], "--vocab"))
      b.o.vocab = arg_int(argc, argv, &i);
    else if (!strcmp(argv[i], "--dp-shard"))
      b.o.dps = arg_int(argc, argv, &i);
    else if (!strcmp(argv[i], "--tp"))
      b.o.tp = arg_int(argc, argv, &i);
    else if (!strcmp(argv[i], "--steps"))
      b.o.steps = (int)arg_int(argc, argv, &i);
    else if (!strcmp(argv[i], "--compute-ms"))
      b.o.compute_ms = (double)arg_int(argc, argv, &i);
    else {
      fprintf(stderr, "usage: tpx-bench-rt [--layers L] [--hidden H] "
                      "[--inter I] [--vocab V] [--dp-shard N] [--tp N] "
                      "[--steps K] [--compute-ms X]\n");
      return 2;
    }
  }
  if (b.o.steps < 1 || b.o.steps > 64 || b.o.dps < 1 || b.o.tp < 1) {
    fprintf(stderr, "tpx-bench-rt: steps 1..64, dp-shard and tp >= 1\n");
    return 2;
  }
  build(&b);
  int world = (int)(b.o.dps * b.o.tp);
  printf("# tpx-bench-rt: %lld params, %lld layers, hidden %lld, vocab %lld; "
         "mesh dp_shard=%lld tp=%lld (local threads); %.0f ms compute per "
         "unit per pass; %d steps (median)\n",
         (long long)tpx_model_total_params(b.model), (long long)b.o.layers,
         (long long)b.o.hidden, (long long)b.o.vocab, (long long)b.o.dps,
         (long long)b.o.tp, b.o.compute_ms, b.o.steps);
  printf("# %-28s %10s %12s\n", "mode", "step ms", "exposed ms");
  static const struct {
    const char *name;
    int prefetch, async, baseline;
  } modes[] = {{"baseline: bare collectives", 0, 0, 1},
               {"prefetch, comm thread", 1, 1, 0},
               {"prefetch, synchronous", 1, 0, 0},
               {"no prefetch", 0, 0, 0}};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    b.prefetch = modes[m].prefetch;
    b.async = modes[m].async;
    b.baseline = modes[m].baseline;
    tpx_error e = {0};
    if (tpx_local_run(world, body, &b, &e) != TPX_OK)
      die("run", &e);
    double s = median(b.step_ms, b.o.steps),
           x = median(b.exposed_ms, b.o.steps);
    if (b.baseline)
      printf("  %-28s %10.1f %12s\n", modes[m].name, s, "-");
    else
      printf("  %-28s %10.1f %12.1f\n", modes[m].name, s, x);
  }
  tpx_sharding_destroy(b.sh);
  tpx_mesh_destroy(b.mesh);
  tpx_plan_destroy(b.plan);
  tpx_model_destroy(b.model);
  return 0;
}
