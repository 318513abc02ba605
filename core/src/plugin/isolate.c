/* plugin/isolate.c — isolated plugin calls (tpx_registry_set_isolation):
 * each call runs in a forked child against the real host table, into the
 * child's own objects; the child sends the result back over a pipe as JSON
 * (a plan as tpx-plan/1, a skeleton as modules / params / ties, diagnostics,
 * strings, the plugin's status and message) and the parent rebuilds it. A
 * child that crashes, aborts, exits or outlives the timeout becomes a
 * TPX_PLUGIN error naming the plugin, its path and what happened.
 *
 * Costs one fork (plus a JSON round trip) per call. fork() copies only the
 * calling thread, so a multi-threaded host should not hold locks a plugin
 * might need while calling.
 *
 * Not the in-process calls themselves (call.c). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "plugin/plugin_internal.h"

typedef tpx_status (*child_fn)(void *arg, json_t *result, tpx_error *err);

static const char *signal_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGABRT: return "SIGABRT";
  case SIGBUS: return "SIGBUS";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGKILL: return "SIGKILL";
  case SIGTERM: return "SIGTERM";
  case SIGPIPE: return "SIGPIPE";
  default: return NULL;
  }
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The child's side: run, serialize, write, _exit (no atexit handlers, no
 * flushing of the parent's stdio buffers). */
static void child_main(int fd, child_fn fn, void *arg) {
  json_t *res = json_object();
  tpx_error e = {0};
  tpx_status s = res ? fn(arg, res, &e) : TPX_NO_MEMORY;
  char *text = NULL;
  if (res) {
    json_object_set_new(res, "status", json_integer(s));
    json_object_set_new(res, "message", json_string(e.message));
    text = json_dumps(res, JSON_COMPACT);
  }
  if (!text)
    _exit(3);
  size_t len = strlen(text), off = 0;
  while (off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(4);
    off += (size_t)w;
  }
  _exit(0);
}

/* Wait for `pid` until `deadline`; 1 when it ended (*status filled). */
static int wait_until(pid_t pid, int *status, double deadline) {
  for (;;) {
    pid_t w = waitpid(pid, status, WNOHANG);
    if (w == pid)
      return 1;
    if (w < 0 && errno != EINTR)
      return 1;
    if (now_seconds() >= deadline)
      return 0;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Run fn(arg) in a child; on success *result is the child's JSON (with
 * "status" and "message"). Failures of the child itself are TPX_PLUGIN. */
static tpx_status run_isolated(const tpx__plugin *p, const char *what,
                               child_fn fn, void *arg, json_t **result,
                               tpx_error *err) {
  *result = NULL;
  int fds[2];
  if (pipe(fds) != 0)
    return tpx_error_set(err, TPX_INTERNAL,
                         "plugin '%s' (%s): cannot isolate %s: pipe: %s",
                         p->name, p->path, what, strerror(errno));
  /* A plugin that calls exit() in the child flushes the stdio buffers it
   * inherited; empty them first so nothing is written twice. */
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    return tpx_error_set(err, TPX_INTERNAL,
                         "plugin '%s' (%s): cannot isolate %s: fork: %s",
                         p->name, p->path, what, strerror(e));
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], fn, arg);
  }
  close(fds[1]);
  const double timeout = p->isolate_timeout;
  const double deadline = now_seconds() + timeout;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int timed_out = 0, nomem = 0;
  for (;;) {
    double left = deadline - now_seconds();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {fds[0], POLLIN, 0};
    int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
    int pr = poll(&pf, 1, ms);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr == 0)
      continue; /* the deadline check above decides */
    if (pr < 0)
      break;
    if (len + 4096 + 1 > cap) {
      size_t ncap = cap ? cap * 2 : 16384;
      char *nb = realloc(buf, ncap);
      if (!nb) {
        nomem = 1;
        break;
      }
      buf = nb;
      cap = ncap;
    }
    ssize_t r = read(fds[0], buf + len, cap - len - 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break; /* EOF: the child is done (or gone) */
    len += (size_t)r;
  }
  close(fds[0]);
  int status = 0;
  if (timed_out || nomem || !wait_until(pid, &status, deadline + 1.0)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    free(buf);
    if (nomem)
      return tpx_error_set(err, TPX_NO_MEMORY,
                           "out of memory reading the result of %s from "
                           "plugin '%s' (%s)",
                           what, p->name, p->path);
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s) did not return within %g s from "
                         "%s; killed",
                         p->name, p->path, timeout, what);
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *sn = signal_name(sig);
    free(buf);
    if (sn)
      return tpx_error_set(err, TPX_PLUGIN,
                           "plugin '%s' (%s) crashed with %s in %s", p->name,
                           p->path, sn, what);
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s) crashed with signal %d in %s",
                         p->name, p->path, sig, what);
  }
  json_t *root = NULL;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && buf) {
    json_error_t jerr;
    root = json_loadb(buf, len, 0, &jerr);
  }
  free(buf);
  if (!root || !json_is_object(root) ||
      !json_is_integer(json_object_get(root, "status"))) {
    json_decref(root);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s) exited (status %d) in %s without "
                         "returning (exit() or _exit() in the plugin?)",
                         p->name, p->path, code, what);
  }
  *result = root;
  return TPX_OK;
}

/* The child's status and message, as the caller's status and error. */
static tpx_status child_status(json_t *root, tpx_error *err) {
  json_int_t v = json_integer_value(json_object_get(root, "status"));
  if (v == TPX_OK)
    return TPX_OK;
  tpx_status s = v > 0 && v < TPX_STATUS_COUNT ? (tpx_status)v : TPX_PLUGIN;
  const char *m = json_string_value(json_object_get(root, "message"));
  return tpx_error_set(err, s, "%s", m ? m : "(no message)");
}

static tpx_status bad_result(const tpx__plugin *p, const char *what,
                             tpx_error *err) {
  return tpx_error_set(err, TPX_PLUGIN,
                       "plugin '%s' (%s): the isolated %s sent back a "
                       "malformed result",
                       p->name, p->path, what);
}

/* ---- get_plan ------------------------------------------------------------ */

typedef struct plan_args {
  const tpx__plugin *p;
  const tpx_model *model;
  const char *arch, *plan_name;
  int sp;
  int64_t tp;
} plan_args;

static tpx_status plan_child(void *arg, json_t *res, tpx_error *err) {
  const plan_args *a = arg;
  tpx_plan *plan = NULL;
  char *function = NULL;
  int refused = 0;
  tpx_status s = tpx__plugin_get_plan_direct(a->p, a->model, a->arch,
                                             a->plan_name, a->sp, a->tp, &plan,
                                             &function, &refused, err);
  json_object_set_new(res, "refused", json_boolean(refused));
  if (s == TPX_OK) {
    char *text = NULL;
    s = tpx_plan_to_json(plan, 0, &text, err);
    if (s == TPX_OK)
      json_object_set_new(res, "plan", json_string(text));
    free(text);
    if (function)
      json_object_set_new(res, "function", json_string(function));
  }
  tpx_plan_destroy(plan);
  free(function);
  return s;
}

tpx_status tpx__isolate_get_plan(const tpx__plugin *p, const tpx_model *model,
                                 const char *architecture,
                                 const char *plan_name, int sequence_parallel,
                                 int64_t tp_size, tpx_plan **out,
                                 char **function_out, int *refused,
                                 tpx_error *err) {
  plan_args a = {p, model, architecture, plan_name, sequence_parallel,
                 tp_size};
  json_t *root = NULL;
  tpx_status s = run_isolated(p, "get_plan", plan_child, &a, &root, err);
  if (s != TPX_OK)
    return s;
  if (refused)
    *refused = json_is_true(json_object_get(root, "refused"));
  s = child_status(root, err);
  if (s == TPX_OK) {
    const char *text = json_string_value(json_object_get(root, "plan"));
    const char *fn = json_string_value(json_object_get(root, "function"));
    tpx_error perr = {0};
    if (!text || tpx_plan_from_json(text, strlen(text), NULL, out, &perr) !=
                     TPX_OK) {
      s = bad_result(p, "get_plan", err);
    } else if (fn && function_out && !(*function_out = strdup(fn))) {
      tpx_plan_destroy(*out);
      *out = NULL;
      s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    }
  }
  json_decref(root);
  return s;
}

/* ---- skeleton ------------------------------------------------------------ */

typedef struct skel_args {
  const tpx__plugin *p;
  const tpx_model *model;
  const char *arch;
} skel_args;

static tpx_status skel_child(void *arg, json_t *res, tpx_error *err) {
  const skel_args *a = arg;
  tpx_model *sk = NULL;
  tpx_status s = tpx__plugin_skeleton_build(a->p, a->model, a->arch, &sk, err);
  if (s != TPX_OK)
    return s;
  json_t *mods = json_array(), *params = json_array(), *ties = json_array();
  for (size_t i = 1; i < tpx_model_num_modules(sk); i++)
    json_array_append_new(
        mods, json_pack("{s:s, s:i}", "fqn",
                        tpx_model_module_fqn(sk, (int64_t)i), "kind",
                        (int)tpx_model_module_kind(sk, (int64_t)i)));
  for (size_t i = 0; i < tpx_model_num_params(sk) && s == TPX_OK; i++) {
    tpx_param_info pi;
    s = tpx_model_param(sk, (int64_t)i, &pi, err);
    if (s != TPX_OK)
      break;
    if (pi.tied_to >= 0) {
      tpx_param_info t;
      s = tpx_model_param(sk, pi.tied_to, &t, err);
      if (s == TPX_OK)
        json_array_append_new(ties, json_pack("[s, s]", pi.fqn, t.fqn));
      continue;
    }
    json_t *shape = json_array();
    for (int d = 0; d < pi.ndim; d++)
      json_array_append_new(shape, json_integer(pi.shape[d]));
    const char *mod = tpx_model_module_fqn(sk, pi.module);
    json_array_append_new(
        params, json_pack("{s:s, s:s, s:o, s:i}", "module", mod ? mod : "",
                          "name", pi.name, "shape", shape, "dtype",
                          (int)pi.dtype));
  }
  json_object_set_new(res, "modules", mods);
  json_object_set_new(res, "params", params);
  json_object_set_new(res, "ties", ties);
  tpx_model_destroy(sk);
  return s;
}

/* Rebuild the scratch skeleton the child described. */
static tpx_status skel_rebuild(json_t *root, tpx_model *sk, tpx_error *err) {
  json_t *mods = json_object_get(root, "modules");
  json_t *params = json_object_get(root, "params");
  json_t *ties = json_object_get(root, "ties");
  if (!json_is_array(mods) || !json_is_array(params) || !json_is_array(ties))
    return TPX_PARSE;
  size_t i;
  json_t *v;
  json_array_foreach(mods, i, v) {
    const char *fqn = json_string_value(json_object_get(v, "fqn"));
    json_t *k = json_object_get(v, "kind");
    if (!fqn || !json_is_integer(k))
      return TPX_PARSE;
    if (tpx_model_find_module(sk, fqn) >= 0)
      continue; /* created implicitly as the parent of an earlier one */
    tpx_status s = tpx_model_add_module(
        sk, fqn, (tpx_module_kind)json_integer_value(k), NULL, err);
    if (s != TPX_OK)
      return s;
  }
  json_array_foreach(params, i, v) {
    const char *mod = json_string_value(json_object_get(v, "module"));
    const char *name = json_string_value(json_object_get(v, "name"));
    json_t *shape = json_object_get(v, "shape");
    json_t *dt = json_object_get(v, "dtype");
    if (!mod || !name || !json_is_array(shape) || !json_is_integer(dt) ||
        json_array_size(shape) > TPX_MAX_TENSOR_DIMS)
      return TPX_PARSE;
    int64_t dims[TPX_MAX_TENSOR_DIMS] = {0};
    for (size_t d = 0; d < json_array_size(shape); d++)
      dims[d] = (int64_t)json_integer_value(json_array_get(shape, d));
    tpx_status s = tpx_model_add_param(sk, mod, name, dims,
                                       (int)json_array_size(shape),
                                       (tpx_dtype)json_integer_value(dt),
                                       NULL, err);
    if (s != TPX_OK)
      return s;
  }
  json_array_foreach(ties, i, v) {
    const char *a = json_string_value(json_array_get(v, 0));
    const char *b = json_string_value(json_array_get(v, 1));
    if (!a || !b)
      return TPX_PARSE;
    tpx_status s = tpx_model_tie(sk, a, b, err);
    if (s != TPX_OK)
      return s;
  }
  return TPX_OK;
}

tpx_status tpx__isolate_skeleton(const tpx__plugin *p, const tpx_model *model,
                                 const char *architecture, tpx_model **out,
                                 tpx_error *err) {
  *out = NULL;
  skel_args a = {p, model, architecture};
  json_t *root = NULL;
  tpx_status s = run_isolated(p, TPX_PLUGIN_SKELETON_SYMBOL, skel_child, &a,
                              &root, err);
  if (s != TPX_OK)
    return s;
  s = child_status(root, err);
  if (s == TPX_OK) {
    tpx_model *sk = NULL;
    s = tpx_model_create(&sk, err);
    if (s == TPX_OK) {
      tpx_error rerr = {0};
      s = skel_rebuild(root, sk, &rerr);
      if (s == TPX_NO_MEMORY)
        tpx_error_set(err, s, "out of memory");
      else if (s != TPX_OK)
        s = bad_result(p, TPX_PLUGIN_SKELETON_SYMBOL, err);
    }
    if (s == TPX_OK)
      *out = sk;
    else
      tpx_model_destroy(sk);
  }
  json_decref(root);
  return s;
}

/* ---- validate ------------------------------------------------------------ */

typedef struct validate_args {
  const tpx__plugin *p;
  const tpx_model *model;
  const char *arch, *plan_name;
  int sp;
  int64_t tp;
} validate_args;

static tpx_status validate_child(void *arg, json_t *res, tpx_error *err) {
  const validate_args *a = arg;
  tpx_diag_list *d = NULL;
  tpx_status s = tpx_diag_list_create(&d, err);
  if (s != TPX_OK)
    return s;
  s = tpx__plugin_validate_direct(a->p, a->model, a->arch, a->plan_name, a->sp,
                                  a->tp, d, err);
  json_t *arr = json_array();
  for (size_t i = 0; s == TPX_OK && i < tpx_diag_count(d); i++) {
    tpx_diag g;
    if (tpx_diag_get(d, i, &g, NULL) != TPX_OK)
      continue;
    json_array_append_new(arr, json_pack("[i, s, s, s, s]", (int)g.level,
                                         g.code ? g.code : "",
                                         g.subject ? g.subject : "",
                                         g.fix ? g.fix : "",
                                         g.message ? g.message : ""));
  }
  json_object_set_new(res, "diags", arr);
  tpx_diag_list_destroy(d);
  return s;
}

tpx_status tpx__isolate_validate(const tpx__plugin *p, const tpx_model *model,
                                 const char *architecture,
                                 const char *plan_name, int sequence_parallel,
                                 int64_t tp_size, tpx_diag_list *diags,
                                 tpx_error *err) {
  validate_args a = {p, model, architecture, plan_name, sequence_parallel,
                     tp_size};
  json_t *root = NULL;
  tpx_status s = run_isolated(p, TPX_PLUGIN_VALIDATE_SYMBOL, validate_child,
                              &a, &root, err);
  if (s != TPX_OK)
    return s;
  s = child_status(root, err);
  json_t *arr = json_object_get(root, "diags");
  if (s == TPX_OK && !json_is_array(arr))
    s = bad_result(p, TPX_PLUGIN_VALIDATE_SYMBOL, err);
  size_t i;
  json_t *v;
  if (s == TPX_OK && diags) {
    json_array_foreach(arr, i, v) {
      const char *code = json_string_value(json_array_get(v, 1));
      const char *subj = json_string_value(json_array_get(v, 2));
      const char *fix = json_string_value(json_array_get(v, 3));
      const char *msg = json_string_value(json_array_get(v, 4));
      json_t *lv = json_array_get(v, 0);
      if (!code || !subj || !fix || !msg || !json_is_integer(lv))
        continue;
      s = tpx_diag_add(diags, (tpx_diag_level)json_integer_value(lv), code,
                       subj, fix, "%s", msg);
      if (s != TPX_OK) {
        tpx_error_set(err, s, "out of memory adding a diagnostic");
        break;
      }
    }
  }
  json_decref(root);
  return s;
}

/* ---- FSDP units / fp32 parameters ---------------------------------------- */

typedef struct strings_args {
  const tpx__plugin *p;
  tpx__plugin_op op;
  const tpx_model *model;
  const char *arch;
} strings_args;

static tpx_status strings_child(void *arg, json_t *res, tpx_error *err) {
  const strings_args *a = arg;
  tpx__strvec v;
  tpx_status s = tpx__plugin_strings_direct(a->p, a->op, a->model, a->arch, &v,
                                            err);
  if (s != TPX_OK)
    return s;
  json_t *arr = json_array();
  for (size_t i = 0; i < v.count; i++)
    json_array_append_new(arr, json_pack("[s, i]", v.items[i],
                                         v.ints ? v.ints[i] : 0));
  json_object_set_new(res, "strings", arr);
  tpx__strvec_free(&v);
  return TPX_OK;
}

tpx_status tpx__isolate_strings(const tpx__plugin *p, tpx__plugin_op op,
                                const tpx_model *model,
                                const char *architecture, tpx__strvec *out,
                                tpx_error *err) {
  memset(out, 0, sizeof *out);
  strings_args a = {p, op, model, architecture};
  const char *sym = tpx__plugin_op_symbol(op);
  json_t *root = NULL;
  tpx_status s = run_isolated(p, sym, strings_child, &a, &root, err);
  if (s != TPX_OK)
    return s;
  s = child_status(root, err);
  json_t *arr = json_object_get(root, "strings");
  if (s == TPX_OK && !json_is_array(arr))
    s = bad_result(p, sym, err);
  size_t i;
  json_t *v;
  if (s == TPX_OK) {
    json_array_foreach(arr, i, v) {
      const char *str = json_string_value(json_array_get(v, 0));
      json_t *n = json_array_get(v, 1);
      if (!str || !json_is_integer(n)) {
        s = bad_result(p, sym, err);
        break;
      }
      if (tpx__strvec_push(out, str, (int)json_integer_value(n)) != 0) {
        s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
        break;
      }
    }
  }
  if (s != TPX_OK)
    tpx__strvec_free(out);
  json_decref(root);
  return s;
}
