/* bench_plan.c — `tpx-bench-plan`: planning cost on a synthetic MoE model
 * with about a million parameter tensors (layers x experts x 3 linears plus
 * attention, norms and router), on a tp x dp_shard mesh.
 *
 * Times, best of --repeat runs: building the model with the builder API,
 * matching the plan's keys (tpx_match_plan), and the whole application
 * (tpx_sharding_create: match, TP placements, FSDP units, per-rank bytes).
 * With --dump-fqns PATH it writes the module FQNs and the plan keys for the
 * Python fnmatch baseline (plan_baseline.py). A benchmark, never a test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpx/fsdp.h"
#include "tpx/match.h"
#include "tpx/report.h"
#include "tpx/sharding.h"
#include "tpx/tpx.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
/* Wall time, and this process's CPU time: the machine may be shared, so
 * both are printed and CPU time is the steadier figure. */
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static int die(const char *what, const tpx_error *e) {
  fprintf(stderr, "tpx-bench-plan: %s: %s\n", what, e->message);
  return 1;
}

#define CHECK(call, what)                                                      \
  do {                                                                         \
    if ((call) != TPX_OK)                                                      \
      return die(what, &e);                                                    \
  } while (0)

typedef struct {
  int64_t layers, experts, hidden, inter, vocab;
} shape_t;

static int add_linear(tpx_model *m, const char *fqn, int64_t out, int64_t in) {
  tpx_error e = {0};
  int64_t w[2] = {out, in};
  CHECK(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e), fqn);
  CHECK(tpx_model_add_param(m, fqn, "weight", w, 2, TPX_DTYPE_BF16, NULL, &e),
        fqn);
  return 0;
}

static int add_norm(tpx_model *m, const char *fqn, int64_t h) {
  tpx_error e = {0};
  CHECK(tpx_model_add_module(m, fqn, TPX_MODULE_NORM, NULL, &e), fqn);
  CHECK(tpx_model_add_param(m, fqn, "weight", &h, 1, TPX_DTYPE_BF16, NULL, &e),
        fqn);
  return 0;
}

/* Appends decimal v at p; returns the new end. (snprintf per FQN would
 * cost as much as the matching being measured.) */
static char *put_int(char *p, int64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

static char *put_str(char *p, const char *s) {
  size_t n = strlen(s);
  memcpy(p, s, n);
  return p + n;
}

static int build(const shape_t *s, tpx_model **out) {
  tpx_error e = {0};
  tpx_model *m = NULL;
  char p[160];
  CHECK(tpx_model_create(&m, &e), "create");
  int64_t emb[2] = {s->vocab, s->hidden};
  CHECK(tpx_model_add_module(m, "model.embed_tokens", TPX_MODULE_EMBEDDING,
                             NULL, &e),
        "embed");
  CHECK(tpx_model_add_param(m, "model.embed_tokens", "weight", emb, 2,
                            TPX_DTYPE_BF16, NULL, &e),
        "embed");
  static const char *const att[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
  static const char *const exp3[3] = {"gate_proj", "up_proj", "down_proj"};
  for (int64_t l = 0; l < s->layers; l++) {
    for (int i = 0; i < 4; i++) {
      snprintf(p, sizeof p, "model.layers.%lld.self_attn.%s", (long long)l,
               att[i]);
      if (add_linear(m, p, s->hidden, s->hidden))
        return 1;
    }
    snprintf(p, sizeof p, "model.layers.%lld.mlp.gate", (long long)l);
    if (add_linear(m, p, s->experts, s->hidden))
      return 1;
    char *base = put_str(p, "model.layers.");
    base = put_int(base, l);
    base = put_str(base, ".mlp.experts.");
    for (int64_t x = 0; x < s->experts; x++)
      for (int i = 0; i < 3; i++) {
        char *q = put_int(base, x);
        *q++ = '.';
        q = put_str(q, exp3[i]);
        *q = '\0';
        int64_t rows = i == 2 ? s->hidden : s->inter;
        int64_t in = i == 2 ? s->inter : s->hidden;
        if (add_linear(m, p, rows, in))
          return 1;
      }
    snprintf(p, sizeof p, "model.layers.%lld.input_layernorm", (long long)l);
    if (add_norm(m, p, s->hidden))
      return 1;
    snprintf(p, sizeof p, "model.layers.%lld.post_attention_layernorm",
             (long long)l);
    if (add_norm(m, p, s->hidden))
      return 1;
  }
  if (add_norm(m, "model.norm", s->hidden))
    return 1;
  if (add_linear(m, "lm_head", s->vocab, s->hidden))
    return 1;
  *out = m;
  return 0;
}

static const struct {
  const char *key;
  tpx_style_kind kind;
} plan_keys[] = {
    {"model.embed_tokens", TPX_STYLE_VOCAB_PARALLEL_EMBEDDING},
    {"model.layers.*.self_attn.q_proj", TPX_STYLE_COLWISE},
    {"model.layers.*.self_attn.k_proj", TPX_STYLE_COLWISE},
    {"model.layers.*.self_attn.v_proj", TPX_STYLE_COLWISE},
    {"model.layers.*.self_attn.o_proj", TPX_STYLE_ROWWISE},
    {"model.layers.*.mlp.experts.*.gate_proj", TPX_STYLE_COLWISE},
    {"model.layers.*.mlp.experts.*.up_proj", TPX_STYLE_COLWISE},
    {"model.layers.*.mlp.experts.*.down_proj", TPX_STYLE_ROWWISE},
    {"lm_head", TPX_STYLE_COLWISE},
};
#define NKEYS (sizeof plan_keys / sizeof plan_keys[0])

int main(int argc, char **argv) {
  shape_t s = {100, 3328, 2048, 768, 151936};
  int64_t tp = 8, dps = 8;
  int repeat = 3;
  const char *dump = NULL;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--layers") && v)
      s.layers = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--experts") && v)
      s.experts = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--tp") && v)
      tp = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--dp-shard") && v)
      dps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--repeat") && v)
      repeat = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dump-fqns") && v)
      dump = argv[++i];
    else {
      fprintf(stderr,
              "usage: tpx-bench-plan [--layers N] [--experts N] [--tp N] "
              "[--dp-shard N] [--repeat N] [--dump-fqns PATH]\n");
      return 2;
    }
  }
  if (s.layers < 1 || s.experts < 1 || tp < 1 || dps < 1 || repeat < 1) {
    fprintf(stderr, "tpx-bench-plan: sizes must be >= 1\n");
    return 2;
  }
  tpx_error e = {0};
  tpx_plan *plan = NULL;
  CHECK(tpx_plan_create(&plan, &e), "plan");
  for (size_t k = 0; k < NKEYS; k++) {
    tpx_style st = tpx_style_default(plan_keys[k].kind);
    CHECK(tpx_plan_set(plan, plan_keys[k].key, &st, 0, &e), plan_keys[k].key);
  }
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {1, dps, tp};
  tpx_mesh *mesh = NULL;
  CHECK(tpx_mesh_create(names, sizes, 3, &mesh, &e), "mesh");

  double t_build = 1e30, t_match = 1e30, t_apply = 1e30;
  double c_build = 1e30, c_match = 1e30, c_apply = 1e30;
  tpx_model *model = NULL;
  size_t matched = 0;
  int64_t bytes0 = 0, peak0 = 0;
  size_t ndiag = 0, units = 0;
  for (int r = 0; r < repeat; r++) {
    tpx_model_destroy(model);
    model = NULL;
    double c0 = cpu(), t0 = now();
    if (build(&s, &model))
      return 1;
    double t1 = now(), c1 = cpu();
    tpx_match *match = NULL;
    CHECK(tpx_match_plan(plan, model, &match, NULL, &e), "match");
    double t2 = now(), c2 = cpu();
    matched = 0;
    for (size_t k = 0; k < NKEYS; k++)
      matched += tpx_match_entry_count(match, k);
    tpx_match_destroy(match);
    double c3 = cpu(), t3 = now();
    tpx_sharding *sh = NULL;
    CHECK(tpx_sharding_create(model, plan, mesh, NULL, &sh, &e), "sharding");
    double t4 = now(), c4 = cpu();
    bytes0 = tpx_sharding_rank_param_bytes(sh, 0);
    peak0 = tpx_sharding_rank_peak_bytes(sh, 0);
    ndiag = tpx_diag_count(tpx_sharding_diagnostics(sh));
    units = tpx_sharding_num_fsdp_units(sh);
    tpx_sharding_destroy(sh);
    if (t1 - t0 < t_build)
      t_build = t1 - t0;
    if (t2 - t1 < t_match)
      t_match = t2 - t1;
    if (t4 - t3 < t_apply)
      t_apply = t4 - t3;
    if (c1 - c0 < c_build)
      c_build = c1 - c0;
    if (c2 - c1 < c_match)
      c_match = c2 - c1;
    if (c4 - c3 < c_apply)
      c_apply = c4 - c3;
  }
  size_t ntensors = tpx_model_num_params(model);
  size_t nmodules = tpx_model_num_modules(model);
  if (dump) {
    FILE *f = fopen(dump, "w");
    if (!f) {
      perror(dump);
      return 1;
    }
    for (size_t k = 0; k < NKEYS; k++) fprintf(f, "key %s\n", plan_keys[k].key);
    for (size_t m = 1; m < nmodules; m++)
      fprintf(f, "%s\n", tpx_model_module_fqn(model, (int64_t)m));
    fclose(f);
  }
  char b0[32], p0[32];
  printf("# tpx-bench-plan: synthetic MoE, %lld layers x %lld experts x 3 "
         "linears + attention\n",
         (long long)s.layers, (long long)s.experts);
  printf("# mesh dp_shard=%lld x tp=%lld, %zu plan keys, best of %d\n",
         (long long)dps, (long long)tp, NKEYS, repeat);
  printf("# apply = tpx_sharding_create: match + TP placements + FSDP + "
         "per-rank bytes\n");
  printf("# %5s %10s %10s %10s %10s %10s %12s\n", "clock", "tensors", "modules",
         "build_s", "match_s", "apply_s", "build+apply");
  printf("  %5s %10zu %10zu %10.4f %10.4f %10.4f %12.4f\n", "wall", ntensors,
         nmodules, t_build, t_match, t_apply, t_build + t_apply);
  printf("  %5s %10zu %10zu %10.4f %10.4f %10.4f %12.4f\n", "cpu", ntensors,
         nmodules, c_build, c_match, c_apply, c_build + c_apply);
  printf("# matched modules %zu, FSDP units %zu, diagnostics %zu, rank 0: %s "
         "sharded, peak %s\n",
         matched, units, ndiag, tpx_format_bytes(bytes0, b0, sizeof b0),
         tpx_format_bytes(peak0, p0, sizeof p0));
  printf("RESULT tensors=%zu modules=%zu matched=%zu build_s=%.6f "
         "match_s=%.6f apply_s=%.6f build_cpu=%.6f match_cpu=%.6f "
         "apply_cpu=%.6f\n",
         ntensors, nmodules, matched, t_build, t_match, t_apply, c_build,
         c_match, c_apply);
  tpx_model_destroy(model);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(plan);
  return 0;
}
