/* harness/harness.c — the conformance harness, parent side: reads the
 * plugin's exports from its ELF file, then runs each group of checks in a
 * child (harness_child.c, run by plugin/child.c), reads the result lines it
 * sent, and turns a crash, exit() or hang (killed at the timeout) into a
 * failed check naming the step. The parent never runs plugin code, so it
 * always returns normally.
 *
 * Not the checks themselves (harness_child.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/grow.h"
#include "harness/harness_internal.h"
#include "plugin/child.h"

typedef struct hcheck {
  char *name;
  int passed;
  char *detail;
} hcheck;

struct tpx_harness_result {
  char *path;
  hcheck *checks;
  size_t count, cap;
  size_t passed, failed;
};

static tpx_status add_check(tpx_harness_result *r, int passed, const char *name,
                            const char *detail) {
  if (TPX_GROW(r->checks, r->cap, r->count + 1, 32) != 0)
    return TPX_NO_MEMORY;
  hcheck *c = &r->checks[r->count];
  c->name = strdup(name);
  c->detail = strdup(detail);
  c->passed = passed ? 1 : 0;
  if (!c->name || !c->detail) {
    free(c->name);
    free(c->detail);
    return TPX_NO_MEMORY;
  }
  r->count++;
  if (passed)
    r->passed++;
  else
    r->failed++;
  return TPX_OK;
}

void tpx_harness_result_destroy(tpx_harness_result *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->count; i++) {
    free(r->checks[i].name);
    free(r->checks[i].detail);
  }
  free(r->checks);
  free(r->path);
  free(r);
}

/* ---- one child --------------------------------------------------------------
 */

typedef enum { JOB_LOAD, JOB_NEGOTIATION, JOB_ARCH } job_kind;

/* What the parent learns from the load child. */
typedef struct learned {
  tpx__strvec archs;
  int dlopen_ok;
} learned;

/* Lines of the child's report the child did not write (harness_child.c's
 * tags only): the first one, for the message. */
typedef struct foreign {
  size_t count;
  char first[64];
} foreign;

/* Handle one complete protocol line from the child. */
static tpx_status handle_line(tpx_harness_result *r, learned *l, char *line,
                              char *step, size_t step_size, int *done,
                              foreign *junk) {
  char *f[4] = {line, NULL, NULL, NULL};
  for (int i = 1; i < 4; i++) {
    char *tab = f[i - 1] ? strchr(f[i - 1], '\t') : NULL;
    if (!tab)
      break;
    *tab = '\0';
    f[i] = tab + 1;
  }
  if (strcmp(f[0], "D") == 0) {
    *done = 1;
  } else if (strcmp(f[0], "S") == 0 && f[1]) {
    snprintf(step, step_size, "%s", f[1]);
  } else if (strcmp(f[0], "R") == 0 && f[1] && f[2] && f[3]) {
    return add_check(r, strcmp(f[1], "1") == 0, f[2], f[3]);
  } else if (strcmp(f[0], "I") == 0 && f[1] && f[2] && l) {
    if (strcmp(f[1], "arch") == 0 && tpx__strvec_push(&l->archs, f[2], 0))
      return TPX_NO_MEMORY;
    if (strcmp(f[1], "dlopen") == 0)
      l->dlopen_ok = 1;
  } else if (!(strcmp(f[0], "I") == 0 && f[1] && f[2])) {
    if (junk->count++ == 0) {
      snprintf(junk->first, sizeof junk->first, "%s", f[0]);
      for (char *c = junk->first; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
          *c = '?';
    }
  }
  return TPX_OK;
}

typedef struct child_job {
  job_kind kind;
  const tpx__h_job *job;
} child_job;

/* The child's body: one group of checks, then "D" (finished normally). */
static void child_body(int fd, void *arg) {
  const child_job *cj = arg;
  if (cj->kind == JOB_LOAD)
    tpx__h_child_load(fd, cj->job);
  else if (cj->kind == JOB_NEGOTIATION)
    tpx__h_child_negotiation(fd, cj->job);
  else
    tpx__h_child_arch(fd, cj->job);
  if (write(fd, "D\n", 2) != 2) {
    /* the parent is gone; nothing to report to */
  }
}

static tpx_status run_child(tpx_harness_result *r, learned *l, job_kind kind,
                            const tpx__h_job *job, const char *what,
                            double timeout, tpx_error *err) {
  child_job cj = {kind, job};
  tpx__child_spec spec = {child_body, &cj, timeout, tpx__child_default_memory(),
                          0};
  tpx__child_result res;
  tpx_error cerr = {0};
  tpx_status s = tpx__child_run(&spec, &res, &cerr);
  if (s != TPX_OK)
    return tpx_error_set(err, s, "harness: %s", cerr.message);
  /* The complete lines, in order; the last "S" names the step a crash or
   * hang happened in. */
  char step[600] = "startup";
  int done = 0;
  foreign junk = {0, ""};
  char *start = res.out, *nl;
  while (s == TPX_OK && start &&
         (nl = memchr(start, '\n', res.len - (size_t)(start - res.out)))) {
    *nl = '\0';
    s = handle_line(r, l, start, step, sizeof step, &done, &junk);
    start = nl + 1;
  }
  tpx__child_result_free(&res);
  char detail[1024];
  if (s == TPX_OK && junk.count) {
    snprintf(detail, sizeof detail,
             "%zu line(s) of the report were not written by the harness "
             "(\"%s\"): the plugin wrote onto a file descriptor it does "
             "not own",
             junk.count, junk.first);
    s = add_check(r, 0, "pipes", detail);
  }
  if (s == TPX_OK && res.held_open)
    s = add_check(r, 0, "processes",
                  "a process the plugin started (fork) outlived the checks "
                  "and held their pipe open: a plugin must not leave "
                  "processes behind");
  if (s != TPX_OK)
    return tpx_error_set(err, s, "harness: out of memory");
  if (done)
    return TPX_OK;
  if (res.end == TPX__CHILD_TIMED_OUT) {
    snprintf(detail, sizeof detail,
             "timed out after %.1f s (killed) during: %s", timeout, step);
  } else if (res.end == TPX__CHILD_SIGNALED) {
    const char *sn = tpx__signal_name(res.code);
    snprintf(detail, sizeof detail, "crashed with %s (signal %d) during: %s",
             sn ? sn : "signal", res.code, step);
  } else {
    snprintf(detail, sizeof detail,
             "the process exited with status %d (exit() called inside the "
             "plugin?) during: %s",
             res.code, step);
  }
  /* A crash or exit while unloading belongs to the unload, not to the
   * checks that passed before it. */
  if (strcmp(step, TPX__H_UNLOAD_STEP) == 0)
    what = "unload";
  if (add_check(r, 0, what, detail) != TPX_OK)
    return tpx_error_set(err, TPX_NO_MEMORY, "harness: out of memory");
  return TPX_OK;
}

/* ---- exports
 * ------------------------------------------------------------------ */

static int is_optional_symbol(const char *s) {
  return strcmp(s, TPX_PLUGIN_SKELETON_SYMBOL) == 0 ||
         strcmp(s, TPX_PLUGIN_VALIDATE_SYMBOL) == 0 ||
         strcmp(s, TPX_PLUGIN_FSDP_UNITS_SYMBOL) == 0 ||
         strcmp(s, TPX_PLUGIN_FP32_PARAMS_SYMBOL) == 0 ||
         strcmp(s, TPX_PLUGIN_STRATEGY_SYMBOL) == 0;
}

/* Symbols the toolchain adds (every shared object, or sanitizer builds). */
static int is_toolchain_symbol(const char *s) {
  return strncmp(s, "__odr_asan", 10) == 0 || strncmp(s, "__asan", 6) == 0 ||
         strncmp(s, "__ubsan", 7) == 0 || strncmp(s, "__sanitizer", 11) == 0 ||
         strncmp(s, "__gcov", 6) == 0 || strcmp(s, "_init") == 0 ||
         strcmp(s, "_fini") == 0 || strcmp(s, "_edata") == 0 ||
         strcmp(s, "_end") == 0 || strcmp(s, "__bss_start") == 0;
}

static tpx_status check_exports(tpx_harness_result *r, const char *path) {
  char **names = NULL;
  size_t n = 0;
  char reason[256];
  if (tpx__elf_exports(path, &names, &n, reason, sizeof reason) != 0) {
    char detail[512];
    snprintf(detail, sizeof detail, "cannot read exports: %s", reason);
    return add_check(r, 0, "exports", detail);
  }
  int has_reg = 0, has_get = 0;
  char optional[512] = "", other[1024] = "";
  size_t n_other = 0;
  for (size_t i = 0; i < n; i++) {
    const char *s = names[i];
    if (strcmp(s, TPX_PLUGIN_REGISTER_SYMBOL) == 0) {
      has_reg = 1;
    } else if (strcmp(s, TPX_PLUGIN_GET_PLAN_SYMBOL) == 0) {
      has_get = 1;
    } else if (is_optional_symbol(s)) {
      size_t k = strlen(optional);
      snprintf(optional + k, sizeof optional - k, "%s%s", k ? ", " : "", s);
    } else if (!is_toolchain_symbol(s)) {
      size_t k = strlen(other);
      if (k < sizeof other - 64)
        snprintf(other + k, sizeof other - k, "%s%s", k ? ", " : "", s);
      n_other++;
    }
  }
  tpx__elf_exports_free(names, n);
  char detail[2048];
  if (!has_reg || !has_get)
    snprintf(detail, sizeof detail,
             "missing required symbol(s):%s%s; optional: %s; other exports: "
             "%s",
             has_reg ? "" : " " TPX_PLUGIN_REGISTER_SYMBOL,
             has_get ? "" : " " TPX_PLUGIN_GET_PLAN_SYMBOL,
             optional[0] ? optional : "none", n_other ? other : "none");
  else
    snprintf(detail, sizeof detail,
             "required: %s, %s; optional: %s; other exports: %s%s",
             TPX_PLUGIN_REGISTER_SYMBOL, TPX_PLUGIN_GET_PLAN_SYMBOL,
             optional[0] ? optional : "none", n_other ? other : "none",
             n_other ? " (not part of the ABI: build with "
                       "-fvisibility=hidden)"
                     : "");
  return add_check(r, has_reg && has_get, "exports", detail);
}

/* ---- the run
 * -------------------------------------------------------------------- */

tpx_status tpx_harness_run(const char *path, const tpx_harness_options *opts,
                           tpx_harness_result **out, tpx_error *err) {
  if (out)
    *out = NULL;
  if (!path || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_harness_run: path or out is NULL");
  tpx_harness_options o = TPX_HARNESS_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof(size_t) + sizeof(double))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_harness_run: opts->struct_size=%zu is too "
                           "small (use TPX_HARNESS_OPTIONS_INIT)",
                           opts->struct_size);
    memcpy(&o, opts,
           opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    o.struct_size = sizeof o;
  }
  if (!(o.timeout_sec > 0))
    o.timeout_sec = TPX__CHILD_DEFAULT_TIMEOUT;
  if (o.num_configs && !o.configs)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_harness_run: num_configs=%zu but configs is "
                         "NULL",
                         o.num_configs);
  tpx_harness_result *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  learned l;
  memset(&l, 0, sizeof l);
  tpx_status s = check_exports(r, path);
  tpx__h_job job = {path, &o, NULL, NULL, 0};
  if (s == TPX_OK)
    s = run_child(r, &l, JOB_LOAD, &job, "load", o.timeout_sec, err);
  /* Negotiation needs a plugin that dlopens and has the entry points. */
  if (s == TPX_OK && l.dlopen_ok) {
    for (int k = 0; k < 2 && s == TPX_OK; k++) {
      job.negotiation = k == 0 ? 1 : -1;
      s = run_child(r, NULL, JOB_NEGOTIATION, &job,
                    k == 0 ? "negotiation (host too new)"
                           : "negotiation (host too old)",
                    o.timeout_sec, err);
    }
    job.negotiation = 0;
  }
  char what[700];
  if (s == TPX_OK && l.archs.count) {
    if (o.num_configs) {
      for (size_t i = 0; i < o.num_configs && s == TPX_OK; i++) {
        job.arch = NULL;
        job.config = o.configs[i];
        snprintf(what, sizeof what, "checks for config %s", o.configs[i]);
        s = run_child(r, NULL, JOB_ARCH, &job, what, o.timeout_sec, err);
      }
    } else {
      for (size_t i = 0; i < l.archs.count && s == TPX_OK; i++) {
        job.arch = l.archs.items[i];
        job.config = NULL;
        snprintf(what, sizeof what, "checks for %s", l.archs.items[i]);
        s = run_child(r, NULL, JOB_ARCH, &job, what, o.timeout_sec, err);
      }
    }
  }
  tpx__strvec_free(&l.archs);
  if (s != TPX_OK) {
    tpx_harness_result_destroy(r);
    if (s == TPX_NO_MEMORY)
      tpx_error_set(err, s, "harness: out of memory");
    return s;
  }
  *out = r;
  return TPX_OK;
}

/* ---- results
 * ---------------------------------------------------------------------- */

size_t tpx_harness_num_checks(const tpx_harness_result *r) {
  return r ? r->count : 0;
}
size_t tpx_harness_num_passed(const tpx_harness_result *r) {
  return r ? r->passed : 0;
}
size_t tpx_harness_num_failed(const tpx_harness_result *r) {
  return r ? r->failed : 0;
}

tpx_status tpx_harness_check_get(const tpx_harness_result *r, size_t index,
                                 tpx_harness_check *out, tpx_error *err) {
  if (!r || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_harness_check_get: result or out is NULL");
  if (index >= r->count)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "check index %zu is out of range (%zu checks)", index,
                         r->count);
  out->name = r->checks[index].name;
  out->passed = r->checks[index].passed;
  out->detail = r->checks[index].detail;
  return TPX_OK;
}

tpx_status tpx_harness_to_text(const tpx_harness_result *r, char **out,
                               tpx_error *err) {
  if (!r || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_harness_to_text: result or out is NULL");
  size_t size = 64;
  for (size_t i = 0; i < r->count; i++)
    size += strlen(r->checks[i].name) + strlen(r->checks[i].detail) + 16;
  char *s = malloc(size);
  if (!s)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < r->count; i++)
    n += (size_t)snprintf(s + n, size - n, "%s %s: %s\n",
                          r->checks[i].passed ? "PASS" : "FAIL",
                          r->checks[i].name, r->checks[i].detail);
  snprintf(s + n, size - n, "%zu passed, %zu failed\n", r->passed, r->failed);
  *out = s;
  return TPX_OK;
}

tpx_status tpx_harness_to_json(const tpx_harness_result *r, int indent,
                               char **out, tpx_error *err) {
  if (!r || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_harness_to_json: result or out is NULL");
  json_t *root = json_object(), *checks = json_array();
  int bad = !root || !checks;
  for (size_t i = 0; !bad && i < r->count; i++) {
    json_t *c =
        json_pack("{s:s, s:b, s:s}", "name", r->checks[i].name, "passed",
                  r->checks[i].passed, "detail", r->checks[i].detail);
    bad = !c || json_array_append_new(checks, c) != 0;
  }
  if (!bad)
    bad = json_object_set_new(root, "plugin", json_string(r->path)) ||
          json_object_set(root, "checks", checks) ||
          json_object_set_new(root, "passed",
                              json_integer((json_int_t)r->passed)) ||
          json_object_set_new(root, "failed",
                              json_integer((json_int_t)r->failed));
  char *s = bad ? NULL
                : json_dumps(root, JSON_PRESERVE_ORDER |
                                       (indent > 0 ? JSON_INDENT(indent)
                                                   : JSON_COMPACT));
  json_decref(checks);
  json_decref(root);
  if (!s)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  *out = s;
  return TPX_OK;
}
