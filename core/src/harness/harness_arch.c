/* harness/harness_arch.c — the per-architecture checks of the conformance
 * harness, run in a child (harness.c): the model (a real config or a
 * synthetic one), the skeleton, get_plan at every sp x tp (twice, for
 * determinism), concurrent calls, and the optional capabilities. Each step
 * is announced before the plugin runs, so a crash or hang is attributed.
 *
 * Everything allocated here is freed before returning: the child exits with
 * _exit, and under valgrind its leak report must stay clean. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fqn.h"
#include "harness/harness_internal.h"
#include "select/select_view.h"
#include "tpx/match.h"
#include "tpx/sharding.h"
#include "tpx/validate.h"

static const int64_t tps[4] = {1, 2, 4, 8};

/* A small Llama-shaped config whose head counts divide every tp checked. */
static char *synthetic_config(const char *arch) {
  static const char fmt[] =
      "{\"architectures\": [\"%s\"], \"hidden_size\": 256, "
      "\"intermediate_size\": 512, \"num_hidden_layers\": 2, "
      "\"num_attention_heads\": 8, \"num_key_value_heads\": 8, "
      "\"head_dim\": 32, \"vocab_size\": 1024, "
      "\"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-06, "
      "\"rope_theta\": 10000.0, \"torch_dtype\": \"bfloat16\", "
      "\"tie_word_embeddings\": false}";
  size_t n = sizeof fmt + strlen(arch);
  char *s = malloc(n);
  if (s)
    snprintf(s, n, fmt, arch);
  return s;
}

/* The placement a style gives a module's `weight` / `bias` (tpx's rule,
 * coarse: enough to see two names of one tensor disagree). */
typedef struct plan_run {
  tpx_status status;
  int refused;
  char message[TPX_ERROR_MESSAGE_SIZE];
  char *json; /* normalized plan, when OK */
  char *function;
  tpx_plan *plan;
} plan_run;

static void run_get_plan(const tpx__plugin *p, const tpx_model *m,
                         const char *arch, int sp, int64_t tp, plan_run *r) {
  memset(r, 0, sizeof *r);
  tpx_error e = {0};
  tpx__call c = {
      .op = TPX__OP_GET_PLAN, .model = m, .arch = arch, .sp = sp, .tp = tp};
  r->status = tpx__plugin_call(p, &c, &e);
  r->refused = c.refused;
  r->plan = c.plan;
  r->function = c.function;
  c.plan = NULL;
  c.function = NULL;
  tpx__call_release(&c);
  snprintf(r->message, sizeof r->message, "%s", e.message);
  if (r->status == TPX_OK) {
    tpx_error je = {0};
    if (tpx_plan_to_json(r->plan, 0, &r->json, &je) != TPX_OK)
      r->json = NULL;
  }
}

static void free_run(plan_run *r) {
  tpx_plan_destroy(r->plan);
  free(r->json);
  free(r->function);
  memset(r, 0, sizeof *r);
}

static void appendf(char *buf, size_t size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void appendf(char *buf, size_t size, const char *fmt, ...) {
  size_t n = strlen(buf);
  if (n + 1 >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, size - n, fmt, ap);
  va_end(ap);
}

/* Every check on one successful plan; problems appended to `bad`, facts to
 * `ok`. */
static void check_plan(const tpx_model *m, const tpx_plan *plan, int64_t tp,
                       char *ok, size_t ok_size, char *bad, size_t bad_size) {
  size_t n = tpx_plan_size(plan);
  appendf(ok, ok_size, "%zu entries", n);
  /* duplicate keys */
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      tpx_plan_entry a, b;
      if (tpx_plan_get(plan, i, &a, NULL) == TPX_OK &&
          tpx_plan_get(plan, j, &b, NULL) == TPX_OK &&
          strcmp(a.module, b.module) == 0)
        appendf(bad, bad_size, "; duplicate key '%s'", a.module);
    }
  appendf(ok, ok_size, ", styles and layouts valid, keys unique");
  /* keys against the module tree */
  if (tpx_model_num_modules(m) > 1) {
    tpx_match *match = NULL;
    tpx_error e = {0};
    if (tpx_match_plan(plan, m, &match, NULL, &e) != TPX_OK) {
      appendf(bad, bad_size, "; matching failed: %s", e.message);
    } else {
      size_t unmatched = 0;
      for (size_t i = 0; i < n; i++) {
        tpx_plan_entry en;
        if (tpx_plan_get(plan, i, &en, NULL) != TPX_OK || en.optional)
          continue;
        if (tpx_match_entry_count(match, i) == 0) {
          if (unmatched++ < 4)
            appendf(bad, bad_size,
                    "; required key '%s' matches no module of the skeleton "
                    "(fix the pattern or mark it optional)",
                    en.module);
        }
      }
      if (unmatched > 4)
        appendf(bad, bad_size, "; %zu more unmatched keys", unmatched - 4);
      if (!unmatched)
        appendf(ok, ok_size,
                ", every required key matches one of %zu "
                "modules",
                tpx_model_num_modules(m));
      /* tied parameters: apply the plan as tpx plan would (TP only) and
       * fail on the error-level tied-embeddings diagnostic: two styles
       * laying one tensor out two ways */
      size_t np = tpx_model_num_params(m), tied = 0, tied_bad = 0;
      for (size_t i = 0; i < np; i++) {
        tpx_param_info pi;
        if (tpx_model_param(m, (int64_t)i, &pi, NULL) == TPX_OK &&
            pi.tied_to >= 0)
          tied++;
      }
      tpx_mesh *mesh = NULL;
      tpx_sharding *sh = NULL;
      const char *tp_name[] = {"tp"};
      tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
      so.fsdp = 0;
      if (tied && tpx_mesh_create(tp_name, &tp, 1, &mesh, NULL) == TPX_OK &&
          tpx_sharding_create(m, plan, mesh, &so, &sh, NULL) == TPX_OK) {
        const tpx_diag_list *dl = tpx_sharding_diagnostics(sh);
        for (size_t i = 0; i < tpx_diag_count(dl); i++) {
          tpx_diag d;
          if (tpx_diag_get(dl, i, &d, NULL) == TPX_OK &&
              d.level == TPX_DIAG_ERROR &&
              strcmp(d.code, "tied-embeddings") == 0 && tied_bad++ < 2)
            appendf(bad, bad_size, "; %s", d.message);
        }
      }
      tpx_sharding_destroy(sh);
      tpx_mesh_destroy(mesh);
      if (tied && !tied_bad)
        appendf(ok, ok_size, ", %zu tied parameter(s) agree", tied);
      tpx_match_destroy(match);
    }
  } else
    appendf(ok, ok_size, ", keys not checked (no skeleton)");
}

/* What the host's own validate_tp_mesh (tpx_validate_tp_mesh, run at tp > 1
 * before selection, for every plan) says about `tp` on this
 * model. Upstream's plan functions never look at tp or the head counts, so a
 * plugin may hand out its plan at a tp the heads do not allow, or refuse with a
 * message: either way the host reports the problem once, as an error, and the
 * plan is not used. Writes that note into `note` and returns 1 when validation
 * reports an error; returns 0 (note empty) when it reports none. */
static int host_validation_note(const tpx_model *m, int64_t tp, char *note,
                                size_t size) {
  note[0] = '\0';
  if (tp <= 1)
    return 0;
  tpx_diag_list *dl = NULL;
  if (tpx_diag_list_create(&dl, NULL) != TPX_OK)
    return 0;
  int found = 0;
  if (tpx_validate_tp_mesh(m, tp, dl, NULL) == TPX_OK) {
    for (size_t i = 0; i < tpx_diag_count(dl) && !found; i++) {
      tpx_diag d;
      if (tpx_diag_get(dl, i, &d, NULL) != TPX_OK || d.level != TPX_DIAG_ERROR)
        continue;
      found = 1;
      if (strcmp(d.code, "heads-not-divisible") == 0)
        snprintf(note, size,
                 "heads not divisible by tp=%lld: the host's validate_tp_mesh "
                 "reports heads-not-divisible (error); plan not used",
                 (long long)tp);
      else
        snprintf(note, size,
                 "tp=%lld: the host's validate_tp_mesh reports %s (error); "
                 "plan not used",
                 (long long)tp, d.code);
    }
  }
  tpx_diag_list_destroy(dl);
  return found;
}

typedef struct conc_arg {
  const tpx__plugin *p;
  const tpx_model *m;
  const char *arch;
  int64_t tp;
  const char *want;
  int iterations;
  int mismatches, failures;
} conc_arg;

static void *conc_worker(void *v) {
  conc_arg *a = v;
  for (int i = 0; i < a->iterations; i++) {
    plan_run r;
    run_get_plan(a->p, a->m, a->arch, 0, a->tp, &r);
    if (r.status != TPX_OK || !r.json)
      a->failures++;
    else if (strcmp(r.json, a->want) != 0)
      a->mismatches++;
    free_run(&r);
  }
  return NULL;
}

/* The model the checks run on: the job's config (and the plugin's own
 * string serving its class, in *arch) or a synthetic one. NULL when it
 * cannot be had (the failure is reported). `label` is updated. */
static tpx_model *arch_model(int fd, const tpx__h_job *job,
                             const tpx__plugin *p, const char **arch,
                             char *label, size_t label_size) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  char name[700];
  *arch = job->arch;
  if (!job->config) {
    char *cfg = synthetic_config(job->arch);
    if (!cfg || tpx_model_create(&m, &e) != TPX_OK ||
        tpx_model_set_config(m, cfg, strlen(cfg), "synthetic config", &e) !=
            TPX_OK) {
      tpx__h_result(fd, 0, "harness", "cannot build the synthetic model: %s",
                    e.message);
      tpx_model_destroy(m);
      m = NULL;
    }
    free(cfg);
    return m;
  }
  snprintf(name, sizeof name, "config %s", job->config);
  if (tpx_model_load_config(job->config, &m, &e) != TPX_OK) {
    tpx__h_result(fd, 0, name, "cannot read the config: %s", e.message);
    return NULL;
  }
  const char *carch = tpx_model_architecture(m, 0);
  tpx_plugin_desc d;
  tpx__plugin_desc_of(p, &d);
  *arch = NULL;
  /* The plugin's own string that serves the config's class. */
  for (size_t i = 0; carch && i < d.num_architectures && !*arch; i++)
    if (strcmp(d.architectures[i], carch) == 0)
      *arch = d.architectures[i];
  for (size_t i = 0; carch && i < d.num_architectures && !*arch; i++) {
    if (strcmp(tpx__fqn_bare_arch(d.architectures[i]), carch) == 0)
      *arch = d.architectures[i];
  }
  if (!*arch) {
    tpx__h_result(fd, 0, name,
                  "architecture '%s' of the config is not served by the "
                  "plugin",
                  carch ? carch : "(none)");
    tpx_model_destroy(m);
    return NULL;
  }
  if (tpx__plugin_describe_model(p, m, &e) != TPX_OK) {
    tpx__h_result(fd, 0, name, "cannot apply the plugin's traits: %s",
                  e.message);
    tpx_model_destroy(m);
    return NULL;
  }
  snprintf(label, label_size, "%s [%s]", *arch, job->config);
  return m;
}

/* Names the check `what` on `label` into name[size]; a check that does not
 * apply to this plugin passes, saying why: 1 when it was reported so (the
 * caller stops), 0 when the check runs. */
static int passes_unrun(int fd, char *name, size_t size, const char *what,
                        const char *label, int applies, const char *why) {
  snprintf(name, size, "%s %s", what, label);
  if (applies)
    return 0;
  tpx__h_result(fd, 1, name, "%s", why);
  return 1;
}

static void arch_skeleton(int fd, const tpx__h_job *job, const tpx__plugin *p,
                          tpx_model *m, const char *arch, const char *label) {
  char name[700];
  tpx_plugin_desc d;
  tpx__plugin_desc_of(p, &d);
  if (passes_unrun(fd, name, sizeof name, "skeleton", label, d.has_skeleton,
                   "no skeleton capability; plan keys are not checked "
                   "against a module tree"))
    return;
  tpx__h_step(fd, "%s for %s", TPX_PLUGIN_SKELETON_SYMBOL, label);
  tpx_error se = {0};
  tpx_status s = tpx__plugin_skeleton(p, m, arch, &se);
  if (s == TPX_OK) {
    size_t tied = 0, np = tpx_model_num_params(m), srcs = 0, flipped = 0;
    size_t parts = 0;
    for (size_t i = 0; i < np; i++) {
      tpx_param_info pi;
      int ok = tpx_model_param(m, (int64_t)i, &pi, NULL) == TPX_OK;
      if (ok && pi.tied_to >= 0)
        tied++;
      size_t ns = tpx_model_num_param_sources(m, (int64_t)i);
      for (size_t k = 0; ok && k < ns; k++) {
        int tr = 0, past = 0;
        tpx_slice b;
        srcs++;
        if (tpx_model_param_source(m, (int64_t)i, k, NULL, &b, &tr, NULL) !=
            TPX_OK)
          continue;
        flipped += tr != 0;
        for (int dim = 0; dim < b.ndim; dim++)
          past |= b.offset[dim] < 0 ||
                  b.offset[dim] + b.length[dim] > pi.shape[dim];
        parts += past; /* a part of a bigger (split) stored tensor */
      }
    }
    char more[128] = "";
    if (srcs && parts) /* host->skeleton_add_split_source, checked to tile */
      snprintf(more, sizeof more,
               ", %zu stored sources (%zu transposed, %zu parts of split "
               "tensors)",
               srcs, flipped, parts);
    else if (srcs) /* host->skeleton_add_source, checked to tile each one */
      snprintf(more, sizeof more, ", %zu stored sources (%zu transposed)", srcs,
               flipped);
    tpx__h_result(fd, np > 0, name, "%zu modules, %zu parameters, %zu tied%s%s",
                  tpx_model_num_modules(m), np, tied, more,
                  np ? "" : " (a skeleton without parameters is useless)");
  } else if (!job->config && !strstr(se.message, "gave no message") &&
             !strstr(se.message, "invalid value") &&
             !strstr(se.message, "do not tile") &&
             !strstr(se.message, "does not fit")) {
    /* A synthetic config may lack what a real one has: a refusal or an
     * error with a message is fine here; --config checks for real. */
    tpx__h_result(fd, 1, name,
                  "not built from the synthetic config (pass --config with "
                  "a real config.json to check the skeleton): %s",
                  se.message);
  } else {
    tpx__h_result(fd, 0, name, "%s", se.message);
  }
}

/* The plan to compare concurrent calls against: the sp=0 plan at tp 2, else
 * at the first tp that gave one. */
typedef struct ref_plan {
  char *json;
  int64_t tp;
} ref_plan;

/* get_plan twice at (sp, tp): every check on the result, determinism, and
 * what the host's validation will say. */
static void arch_plan(int fd, const tpx__plugin *p, const tpx_model *m,
                      const char *arch, const char *label, int sp, int64_t tp,
                      ref_plan *ref) {
  char name[700];
  snprintf(name, sizeof name, "plan %s sp=%d tp=%lld", label, sp,
           (long long)tp);
  tpx__h_step(fd, "get_plan for %s sp=%d tp=%lld", label, sp, (long long)tp);
  plan_run a, b;
  run_get_plan(p, m, arch, sp, tp, &a);
  tpx__h_step(fd, "get_plan (again) for %s sp=%d tp=%lld", label, sp,
              (long long)tp);
  run_get_plan(p, m, arch, sp, tp, &b);
  char ok[2048] = "", bad[2048] = "";
  int deterministic =
      a.status == b.status && a.refused == b.refused &&
      strcmp(a.message, b.message) == 0 &&
      ((!a.json && !b.json) ||
       (a.json && b.json && strcmp(a.json, b.json) == 0)) &&
      ((!a.function && !b.function) ||
       (a.function && b.function && strcmp(a.function, b.function) == 0));
  char note[256];
  /* The host validates every plan at tp > 1, before choosing it, unless the
   * strategy has its own flow: docs/SEMANTICS.md "Plan selection". */
  int invalid = tpx__sel_plugin_own_flow(p, arch)
                    ? (note[0] = '\0', 0)
                    : host_validation_note(m, tp, note, sizeof note);
  if (a.status == TPX_OK) {
    check_plan(m, a.plan, tp, ok, sizeof ok, bad, sizeof bad);
    if (!ref->json && sp == 0 && a.json) {
      ref->json = strdup(a.json);
      ref->tp = tp;
    }
    if (ref->json && sp == 0 && tp == 2 && a.json && ref->tp != 2) {
      free(ref->json);
      ref->json = strdup(a.json);
      ref->tp = 2;
    }
  } else if (a.refused && !strstr(a.message, "gave no message")) {
    appendf(ok, sizeof ok, "refused cleanly: %s", a.message);
  } else if (a.refused) {
    appendf(bad, sizeof bad,
            "; refused without a message (call host->set_error)");
  } else {
    appendf(bad, sizeof bad, "; %s", a.message);
  }
  if (!deterministic)
    appendf(bad, sizeof bad,
            "; not deterministic: two calls gave different results");
  else
    appendf(ok, sizeof ok, ", deterministic");
  if (invalid)
    appendf(ok, sizeof ok, "; %s", note);
  if (bad[0])
    tpx__h_result(fd, 0, name, "%s", bad + 2);
  else
    tpx__h_result(fd, 1, name, "%s", ok);
  free_run(&a);
  free_run(&b);
}

static void arch_concurrency(int fd, const tpx__h_job *job,
                             const tpx__plugin *p, const tpx_model *m,
                             const char *arch, const char *label,
                             const ref_plan *ref) {
  char name[700];
  if (passes_unrun(fd, name, sizeof name, "concurrent", label,
                   ref->json != NULL,
                   "not run: get_plan refused every tp without sequence "
                   "parallelism"))
    return;
  int nt = job->opts->threads > 0 ? job->opts->threads : 4;
  if (nt > 64)
    nt = 64;
  pthread_t th[64];
  conc_arg args[64];
  tpx__h_step(fd, "get_plan from %d threads at once for %s", nt, label);
  int started = 0;
  for (int i = 0; i < nt; i++) {
    args[i] = (conc_arg){p, m, arch, ref->tp, ref->json, 8, 0, 0};
    if (pthread_create(&th[i], NULL, conc_worker, &args[i]) != 0)
      break;
    started++;
  }
  int mism = 0, fails = 0;
  for (int i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    mism += args[i].mismatches;
    fails += args[i].failures;
  }
  if (started < nt)
    tpx__h_result(fd, 0, name, "could not start %d threads", nt);
  else if (mism || fails)
    tpx__h_result(fd, 0, name,
                  "%d threads x 8 calls (sp=0 tp=%lld): %d different "
                  "plan(s), %d failed call(s); the plugin keeps mutable "
                  "global state",
                  nt, (long long)ref->tp, mism, fails);
  else
    tpx__h_result(fd, 1, name,
                  "%d threads x 8 calls (sp=0 tp=%lld) gave identical plans",
                  nt, (long long)ref->tp);
}

static void arch_capabilities(int fd, const tpx__plugin *p, const tpx_model *m,
                              const char *arch, const char *label) {
  char name[700];
  snprintf(name, sizeof name, "capabilities %s", label);
  char ok[1024] = "", bad[1024] = "";
  tpx_plugin_desc d;
  tpx__plugin_desc_of(p, &d);
  if (d.has_validate) {
    tpx_diag_list *dl = NULL;
    tpx_error ve = {0};
    tpx__h_step(fd, "%s for %s", TPX_PLUGIN_VALIDATE_SYMBOL, label);
    tpx__call c = {.op = TPX__OP_VALIDATE, .model = m, .arch = arch, .tp = 2};
    tpx_status vs = tpx_diag_list_create(&dl, &ve);
    if (vs == TPX_OK) {
      c.diags = dl;
      vs = tpx__plugin_call(p, &c, &ve);
    }
    if (vs == TPX_OK)
      appendf(ok, sizeof ok, "validate: %zu diagnostic(s); ",
              tpx_diag_count(dl));
    else
      appendf(bad, sizeof bad, "; validate: %s", ve.message);
    tpx__call_release(&c);
    tpx_diag_list_destroy(dl);
  }
  const tpx__plugin_op ops[3] = {TPX__OP_FSDP_UNITS, TPX__OP_FP32,
                                 TPX__OP_STRATEGY};
  const int has[3] = {d.has_fsdp_units, d.has_fp32_params,
                      tpx__plugin_has_strategy(p)};
  const char *what[3] = {"fsdp units", "fp32 params", "strategy properties"};
  for (int k = 0; k < 3; k++) {
    if (!has[k])
      continue;
    tpx_error ce = {0};
    tpx__h_step(fd, "%s for %s", what[k], label);
    tpx__call c = {.op = ops[k], .model = m, .arch = arch};
    if (tpx__plugin_call(p, &c, &ce) == TPX_OK)
      appendf(ok, sizeof ok, "%s: %zu; ", what[k], c.strings.count);
    else
      appendf(bad, sizeof bad, "; %s: %s", what[k], ce.message);
    tpx__call_release(&c);
  }
  if (bad[0]) {
    tpx__h_result(fd, 0, name, "%s", bad + 2);
  } else if (ok[0]) {
    ok[strlen(ok) - 2] = '\0'; /* the trailing "; " */
    tpx__h_result(fd, 1, name, "%s", ok);
  } else {
    tpx__h_result(fd, 1, name, "no optional capabilities");
  }
}

void tpx__h_child_arch(int fd, const tpx__h_job *job) {
  char label[512];
  if (job->config)
    snprintf(label, sizeof label, "%s [%s]", job->arch ? job->arch : "?",
             job->config);
  else
    snprintf(label, sizeof label, "%s [synthetic config]", job->arch);

  tpx__plugin *p = NULL;
  char reason[TPX_ERROR_MESSAGE_SIZE];
  tpx__h_step(fd, "loading the plugin for %s", label);
  tpx__h_pin(job->path);
  if (tpx__plugin_open(job->path, tpx__plugin_host_table(), &p, reason,
                       sizeof reason) != TPX_OK)
    return; /* reported by the load check */
  FILE *out = tpx__h_stdout_capture();
  const char *arch = NULL;
  tpx_model *m = arch_model(fd, job, p, &arch, label, sizeof label);
  if (m) {
    arch_skeleton(fd, job, p, m, arch, label);
    ref_plan ref = {NULL, 0};
    for (int sp = 0; sp <= 1; sp++)
      for (int t = 0; t < 4; t++)
        arch_plan(fd, p, m, arch, label, sp, tps[t], &ref);
    arch_concurrency(fd, job, p, m, arch, label, &ref);
    free(ref.json);
    arch_capabilities(fd, p, m, arch, label);
  }
  tpx_model_destroy(m);
  tpx__h_stdout_check(fd, out, label);
  tpx__plugin_free(p);
}
