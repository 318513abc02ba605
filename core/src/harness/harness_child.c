/* harness/harness_child.c — the child's line protocol and the load and
 * negotiation checks, executed in a child by harness.c and reported line by
 * line over a pipe (see harness_internal.h); the per-architecture checks are
 * harness_arch.c. Before each call into the plugin the child announces
 * the step, so a crash or hang can be attributed to it.
 *
 * Everything allocated here is freed before returning: the child exits with
 * _exit, and under valgrind its leak report must stay clean. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/harness_internal.h"

/* ---- the line protocol ----------------------------------------------------
 */

static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

/* Tabs and newlines would break the protocol. */
static void clean(char *s) {
  for (; *s; s++)
    if (*s == '\t' || *s == '\n' || *s == '\r')
      *s = ' ';
}

void tpx__h_result(int fd, int passed, const char *name, const char *fmt, ...) {
  char detail[2048], nm[256], line[2400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  snprintf(nm, sizeof nm, "%s", name);
  clean(detail);
  clean(nm);
  int n = snprintf(line, sizeof line, "R\t%d\t%s\t%s\n", passed ? 1 : 0, nm,
                   detail);
  if (n >= (int)sizeof line) {
    n = (int)sizeof line - 1;
    line[n - 1] = '\n';
  }
  write_all(fd, line, (size_t)n);
}

void tpx__h_info(int fd, const char *key, const char *value) {
  char line[1200], v[1024];
  snprintf(v, sizeof v, "%s", value);
  clean(v);
  int n = snprintf(line, sizeof line, "I\t%s\t%s\n", key, v);
  write_all(fd, line,
            (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

void tpx__h_step(int fd, const char *fmt, ...) {
  char text[512], line[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  clean(text);
  int n = snprintf(line, sizeof line, "S\t%s\n", text);
  write_all(fd, line,
            (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

/* Which check a load failure belongs to, from the loader's reason. */
static const char *load_check_name(const char *reason) {
  if (strncmp(reason, "registration:", 13) == 0)
    return "registration";
  if (strncmp(reason, "ABI refused", 11) == 0)
    return "negotiation";
  return "load";
}

static void version_text(uint32_t v, char *buf, size_t size) {
  snprintf(buf, size, "%u.%u", (unsigned)TPX_PLUGIN_ABI_VERSION_MAJOR(v),
           (unsigned)TPX_PLUGIN_ABI_VERSION_MINOR(v));
}

/* Keep the plugin mapped until the child's _exit: its ELF destructors
 * then never run in this child, so a crashing destructor is reported once,
 * by the load check's unload step, not by every later check. */
void tpx__h_pin(const char *path) {
  char local[4096];
  const char *open_path = path;
  if (!strchr(path, '/') &&
      (size_t)snprintf(local, sizeof local, "./%s", path) < sizeof local)
    open_path = local;
  tpx__quiet_begin();
  (void)dlopen(open_path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  tpx__quiet_end();
}

FILE *tpx__h_stdout_capture(void) {
  FILE *f = tmpfile();
  if (f)
    tpx__quiet_sink(fileno(f));
  return f;
}

void tpx__h_stdout_check(int fd, FILE *f, const char *during) {
  if (!f)
    return;
  tpx__quiet_sink(-1);
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
  if (n > 0) {
    char head[81] = "";
    rewind(f);
    size_t got = fread(head, 1, sizeof head - 1, f);
    head[got] = '\0';
    for (char *c = head; *c; c++)
      if ((unsigned char)*c < 0x20)
        *c = ' ';
    tpx__h_result(fd, 0, "stdout",
                  "the plugin wrote %ld byte(s) to stdout during %s (\"%s\"); "
                  "stdout belongs to the host (tpx plan --format json): log "
                  "with host->log or write to stderr",
                  n, during, head);
  }
  fclose(f);
}

/* ---- load and registration ------------------------------------------------
 */

static void load_checks(int fd, const tpx__h_job *job);

void tpx__h_child_load(int fd, const tpx__h_job *job) {
  FILE *out = tpx__h_stdout_capture();
  load_checks(fd, job);
  tpx__h_stdout_check(fd, out, "loading and unloading");
}

static void load_checks(int fd, const tpx__h_job *job) {
  tpx__plugin *p = NULL;
  char reason[TPX_ERROR_MESSAGE_SIZE];
  tpx__h_step(fd, "dlopen and register_parallel_strategy");
  tpx_status s = tpx__plugin_open(job->path, tpx__plugin_host_table(), &p,
                                  reason, sizeof reason);
  if (s != TPX_OK) {
    tpx__h_result(fd, 0, load_check_name(reason), "%s", reason);
    if (strcmp(load_check_name(reason), "load") != 0)
      tpx__h_info(fd, "dlopen", "ok");
    return;
  }
  tpx__h_info(fd, "dlopen", "ok");
  tpx_plugin_desc d;
  tpx__plugin_desc_of(p, &d);
  const int strategy = tpx__plugin_has_strategy(p);
  char abi[32];
  version_text(d.abi_version, abi, sizeof abi);
  tpx__h_result(fd, 1, "load", "plugin '%s' version %s, ABI %s", d.name,
                d.version, abi);
  char list[1024] = "", names[512] = "";
  for (size_t i = 0; i < d.num_architectures; i++) {
    size_t n = strlen(list);
    snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "",
             d.architectures[i]);
    tpx__h_info(fd, "arch", d.architectures[i]);
  }
  for (size_t i = 0; i < d.num_plan_names; i++) {
    size_t n = strlen(names);
    snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "",
             d.plan_names[i]);
    tpx__h_info(fd, "plan_name", d.plan_names[i]);
  }
  tpx__h_result(
      fd, 1, "registration",
      "name '%s', version '%s', %zu architecture(s): %s; named "
      "plans: %s; optional capabilities:%s%s%s%s%s%s",
      d.name, d.version, d.num_architectures, list,
      d.num_plan_names ? names : "none",
      d.has_skeleton || d.has_validate || d.has_fsdp_units ||
              d.has_fp32_params || strategy
          ? ""
          : " none",
      d.has_skeleton ? " skeleton" : "", d.has_validate ? " validate" : "",
      d.has_fsdp_units ? " fsdp_units" : "",
      d.has_fp32_params ? " fp32_params" : "", strategy ? " strategy" : "");
  tpx__h_step(fd, "%s", TPX__H_UNLOAD_STEP);
  tpx__plugin_free(p);
}

void tpx__h_child_negotiation(int fd, const tpx__h_job *job) {
  const int newer = job->negotiation > 0;
  const char *name =
      newer ? "negotiation (host too new)" : "negotiation (host too old)";
  uint32_t lo, hi;
  if (newer) {
    lo = TPX_PLUGIN_ABI_VERSION(TPX_PLUGIN_ABI_MAJOR + 1, 0);
    hi = TPX_PLUGIN_ABI_VERSION(TPX_PLUGIN_ABI_MAJOR + 1, 0xffff);
  } else {
    lo = TPX_PLUGIN_ABI_VERSION(TPX_PLUGIN_ABI_MAJOR - 1, 0);
    hi = TPX_PLUGIN_ABI_VERSION(TPX_PLUGIN_ABI_MAJOR - 1, 0xffff);
  }
  tpx__h_pin(job->path);
  tpx_plugin_host host;
  tpx__plugin_host_table_with_range(lo, hi, &host);
  char l[32], h[32];
  version_text(lo, l, sizeof l);
  version_text(hi, h, sizeof h);
  tpx__h_step(fd, "register_parallel_strategy with a host speaking %s..%s", l,
              h);
  tpx__plugin *p = NULL;
  char reason[TPX_ERROR_MESSAGE_SIZE];
  tpx_status s = tpx__plugin_open(job->path, &host, &p, reason, sizeof reason);
  if (s == TPX_ABI_MISMATCH) {
    tpx__h_result(fd, 1, name, "refused cleanly: %s", reason);
  } else if (s == TPX_OK) {
    char a[32];
    tpx_plugin_desc d;
    tpx__plugin_desc_of(p, &d);
    version_text(d.abi_version, a, sizeof a);
    tpx__h_result(fd, 0, name,
                  "the plugin accepted a host speaking only %s..%s and "
                  "answered ABI %s; it must return TPX_PLUGIN_ABI_UNSUPPORTED "
                  "for versions it does not implement",
                  l, h, a);
    tpx__plugin_free(p);
  } else {
    tpx__h_result(fd, 0, name,
                  "expected TPX_PLUGIN_ABI_UNSUPPORTED for a host speaking "
                  "%s..%s, got: %s",
                  l, h, reason);
  }
}
