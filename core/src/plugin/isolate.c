/* plugin/isolate.c — the protocol of an isolated plugin call
 * (tpx_registry_set_isolation): the child (call.c, run by child.c) makes the
 * call in-process against its own objects and sends the result back as one
 * JSON object (status, message, refused, and per op: a plan as tpx-plan/1,
 * a skeleton as modules / params / ties, diagnostics, strings); the parent
 * rebuilds it. A child that crashed, exited or outlived the timeout becomes
 * a TPX_PLUGIN error naming the plugin, its path and what happened.
 *
 * Costs one fork (plus a JSON round trip) per call. Not the calls themselves
 * (call.c) and not the fork / pipe / timeout (child.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "plugin/child.h"
#include "plugin/plugin_internal.h"

/* ---- the child's side ------------------------------------------------------
 */

static json_t *plan_payload(const tpx__call *c, tpx_status *s, tpx_error *err) {
  json_t *res = json_object();
  char *text = NULL;
  *s = tpx_plan_to_json(c->plan, 0, &text, err);
  if (*s == TPX_OK)
    json_object_set_new(res, "plan", json_string(text));
  free(text);
  if (c->function)
    json_object_set_new(res, "function", json_string(c->function));
  return res;
}

static json_t *int_list(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int d = 0; d < n; d++) json_array_append_new(a, json_integer(v[d]));
  return a;
}

/* The stored sources (host->skeleton_add_source) as [param, name, offsets,
 * lengths, transpose] items. */
static json_t *sources_payload(const tpx_model *sk) {
  json_t *arr = json_array();
  for (size_t i = 0; i < tpx_model_num_params(sk); i++) {
    size_t n = tpx_model_num_param_sources(sk, (int64_t)i);
    tpx_param_info pi;
    if (n == 0 || tpx_model_param(sk, (int64_t)i, &pi, NULL) != TPX_OK)
      continue;
    for (size_t k = 0; k < n; k++) {
      const char *name = NULL;
      tpx_slice b;
      int tr = 0;
      if (tpx_model_param_source(sk, (int64_t)i, k, &name, &b, &tr, NULL) ==
          TPX_OK)
        json_array_append_new(arr, json_pack("[s, s, o, o, b]", pi.fqn, name,
                                             int_list(b.offset, b.ndim),
                                             int_list(b.length, b.ndim), tr));
    }
  }
  return arr;
}

static json_t *skeleton_payload(const tpx_model *sk, tpx_status *s,
                                tpx_error *err) {
  json_t *res = json_object();
  json_t *mods = json_array(), *params = json_array(), *ties = json_array();
  for (size_t i = 1; i < tpx_model_num_modules(sk); i++)
    json_array_append_new(
        mods,
        json_pack("{s:s, s:i}", "fqn", tpx_model_module_fqn(sk, (int64_t)i),
                  "kind", (int)tpx_model_module_kind(sk, (int64_t)i)));
  for (size_t i = 0; i < tpx_model_num_params(sk) && *s == TPX_OK; i++) {
    tpx_param_info pi;
    *s = tpx_model_param(sk, (int64_t)i, &pi, err);
    if (*s != TPX_OK)
      break;
    if (pi.tied_to >= 0) {
      tpx_param_info t;
      *s = tpx_model_param(sk, pi.tied_to, &t, err);
      if (*s == TPX_OK)
        json_array_append_new(ties, json_pack("[s, s]", pi.fqn, t.fqn));
      continue;
    }
    json_t *shape = json_array();
    for (int d = 0; d < pi.ndim; d++)
      json_array_append_new(shape, json_integer(pi.shape[d]));
    const char *mod = tpx_model_module_fqn(sk, pi.module);
    json_array_append_new(params,
                          json_pack("{s:s, s:s, s:o, s:i}", "module",
                                    mod ? mod : "", "name", pi.name, "shape",
                                    shape, "dtype", (int)pi.dtype));
  }
  json_object_set_new(res, "modules", mods);
  json_object_set_new(res, "params", params);
  json_object_set_new(res, "ties", ties);
  if (*s == TPX_OK)
    json_object_set_new(res, "sources", sources_payload(sk));
  return res;
}

static json_t *diags_payload(const tpx_diag_list *d) {
  json_t *res = json_object(), *arr = json_array();
  for (size_t i = 0; i < tpx_diag_count(d); i++) {
    tpx_diag g;
    if (tpx_diag_get(d, i, &g, NULL) != TPX_OK)
      continue;
    json_array_append_new(
        arr, json_pack("[i, s, s, s, s]", (int)g.level, g.code ? g.code : "",
                       g.subject ? g.subject : "", g.fix ? g.fix : "",
                       g.message ? g.message : ""));
  }
  json_object_set_new(res, "diags", arr);
  return res;
}

static json_t *strings_payload(const tpx__strvec *v) {
  json_t *res = json_object(), *arr = json_array();
  for (size_t i = 0; i < v->count; i++)
    json_array_append_new(
        arr, json_pack("[s, i]", v->items[i], v->ints ? v->ints[i] : 0));
  json_object_set_new(res, "strings", arr);
  return res;
}

/* Runs in the child: on a write failure the child ends with status 3 / 4,
 * which the parent reads as "exited without returning". */
void tpx__isolate_send(int fd, const tpx__call *c, tpx_status status,
                       const tpx_error *err) {
  tpx_error e = *err;
  json_t *res = NULL;
  if (status == TPX_OK) {
    switch (c->op) {
    case TPX__OP_GET_PLAN: res = plan_payload(c, &status, &e); break;
    case TPX__OP_SKELETON:
      res = skeleton_payload(c->skeleton, &status, &e);
      break;
    case TPX__OP_VALIDATE: res = diags_payload(c->diags); break;
    default: res = strings_payload(&c->strings); break;
    }
  } else {
    res = json_object();
  }
  char *text = NULL;
  if (res) {
    json_object_set_new(res, "refused", json_boolean(c->refused));
    json_object_set_new(res, "status", json_integer(status));
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
}

/* ---- the parent's side -----------------------------------------------------
 */

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

/* The stored sources the child sent (absent: none). */
static tpx_status sources_rebuild(json_t *arr, tpx_model *sk, tpx_error *err) {
  size_t i;
  json_t *v;
  if (arr == NULL)
    return TPX_OK;
  if (!json_is_array(arr))
    return TPX_PARSE;
  json_array_foreach(arr, i, v) {
    const char *param = json_string_value(json_array_get(v, 0));
    const char *name = json_string_value(json_array_get(v, 1));
    json_t *off = json_array_get(v, 2), *len = json_array_get(v, 3);
    json_t *tr = json_array_get(v, 4);
    size_t nd = json_array_size(off);
    if (!param || !name || !json_is_array(off) || !json_is_array(len) ||
        json_array_size(len) != nd || nd > TPX_MAX_TENSOR_DIMS ||
        !json_is_boolean(tr))
      return TPX_PARSE;
    tpx_slice box;
    memset(&box, 0, sizeof box);
    box.ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
      box.offset[d] = (int64_t)json_integer_value(json_array_get(off, d));
      box.length[d] = (int64_t)json_integer_value(json_array_get(len, d));
    }
    /* _box: a part of a tensor cut into several parameters too */
    tpx_status s = tpx_model_add_param_source_box(sk, param, name, &box,
                                                  json_is_true(tr), err);
    if (s != TPX_OK)
      return s;
  }
  return TPX_OK;
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
    tpx_status s =
        tpx_model_add_param(sk, mod, name, dims, (int)json_array_size(shape),
                            (tpx_dtype)json_integer_value(dt), NULL, err);
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
  return sources_rebuild(json_object_get(root, "sources"), sk, err);
}

static tpx_status receive_plan(const tpx__plugin *p, json_t *root, tpx__call *c,
                               tpx_error *err) {
  const char *text = json_string_value(json_object_get(root, "plan"));
  const char *fn = json_string_value(json_object_get(root, "function"));
  tpx_error perr = {0};
  if (!text ||
      tpx_plan_from_json(text, strlen(text), NULL, &c->plan, &perr) != TPX_OK)
    return bad_result(p, "get_plan", err);
  if (fn && !(c->function = strdup(fn)))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return TPX_OK;
}

static tpx_status receive_skeleton(const tpx__plugin *p, json_t *root,
                                   tpx__call *c, tpx_error *err) {
  tpx_status s = tpx_model_create(&c->skeleton, err);
  if (s != TPX_OK)
    return s;
  tpx_error rerr = {0};
  s = skel_rebuild(root, c->skeleton, &rerr);
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(err, s, "out of memory");
  if (s != TPX_OK)
    return bad_result(p, TPX_PLUGIN_SKELETON_SYMBOL, err);
  return TPX_OK;
}

static tpx_status receive_diags(const tpx__plugin *p, json_t *root,
                                tpx__call *c, tpx_error *err) {
  json_t *arr = json_object_get(root, "diags");
  if (!json_is_array(arr))
    return bad_result(p, TPX_PLUGIN_VALIDATE_SYMBOL, err);
  if (!c->diags)
    return TPX_OK;
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    const char *code = json_string_value(json_array_get(v, 1));
    const char *subj = json_string_value(json_array_get(v, 2));
    const char *fix = json_string_value(json_array_get(v, 3));
    const char *msg = json_string_value(json_array_get(v, 4));
    json_t *lv = json_array_get(v, 0);
    if (!code || !subj || !fix || !msg || !json_is_integer(lv))
      continue;
    tpx_status s =
        tpx_diag_add(c->diags, (tpx_diag_level)json_integer_value(lv), code,
                     subj, fix, "%s", msg);
    if (s != TPX_OK)
      return tpx_error_set(err, s, "out of memory adding a diagnostic");
  }
  return TPX_OK;
}

static tpx_status receive_strings(const tpx__plugin *p, json_t *root,
                                  tpx__call *c, tpx_error *err) {
  const char *sym = tpx__plugin_op_symbol(c->op);
  json_t *arr = json_object_get(root, "strings");
  if (!json_is_array(arr))
    return bad_result(p, sym, err);
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    const char *str = json_string_value(json_array_get(v, 0));
    json_t *n = json_array_get(v, 1);
    if (!str || !json_is_integer(n))
      return bad_result(p, sym, err);
    if (tpx__strvec_push(&c->strings, str, (int)json_integer_value(n)) != 0)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  return TPX_OK;
}

static tpx_status child_ended(const tpx__plugin *p, const char *what,
                              const tpx__child_result *res, tpx_error *err);

/* How the child ended, when it did not send a result: a TPX_PLUGIN error
 * naming the plugin and what happened; and the memory limit when one was
 * set and the evidence points at it: the child's resident memory grew to
 * at least half the address space it may add (an allocator that cannot
 * return NULL aborts at the limit; a plugin that ignores NULL crashes
 * there). A crash with little memory in use (a plain NULL write) is not
 * blamed on memory. */
static tpx_status child_failed(const tpx__plugin *p, const char *what,
                               const tpx__child_result *res, tpx_error *err) {
  tpx_status s = child_ended(p, what, res, err);
  if (p->child_memory && err && res->end != TPX__CHILD_TIMED_OUT &&
      res->rss_growth >= p->child_memory / 2) {
    char m[TPX_ERROR_MESSAGE_SIZE];
    snprintf(m, sizeof m, "%s", err->message);
    tpx_error_clear(err);
    tpx_error_set(err, s,
                  "%s (it had grown by %llu MiB; the isolated child may add "
                  "at most %llu MiB of address space: out of memory? "
                  "TPX_PLUGIN_MEMORY_MB or tpx_registry_set_child_limits)",
                  m, res->rss_growth >> 20, p->child_memory >> 20);
  }
  return s;
}

static tpx_status child_ended(const tpx__plugin *p, const char *what,
                              const tpx__child_result *res, tpx_error *err) {
  if (res->end == TPX__CHILD_TIMED_OUT)
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s) did not return within %g s from "
                         "%s; killed",
                         p->name, p->path, p->isolate_timeout, what);
  if (res->end == TPX__CHILD_SIGNALED && p->child_cpu > 0 &&
      (res->code == SIGXCPU || res->code == SIGKILL))
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s) used more than its CPU limit of %g "
                         "s in %s; killed (tpx_registry_set_child_limits)",
                         p->name, p->path, p->child_cpu, what);
  if (res->end == TPX__CHILD_SIGNALED) {
    const char *sn = tpx__signal_name(res->code);
    if (sn)
      return tpx_error_set(err, TPX_PLUGIN,
                           "plugin '%s' (%s) crashed with %s in %s", p->name,
                           p->path, sn, what);
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s) crashed with signal %d in %s",
                         p->name, p->path, res->code, what);
  }
  if (res->code == 0 && res->len > 0) {
    /* The child got through, but the pipe holds more (or other) than the
     * result it wrote: something in the plugin wrote onto it. */
    char head[61];
    size_t n = res->len < sizeof head - 1 ? res->len : sizeof head - 1;
    for (size_t i = 0; i < n; i++) {
      unsigned char ch = (unsigned char)res->out[i];
      head[i] = ch < 0x20 || ch >= 0x7f ? '?' : (char)ch;
    }
    head[n] = '\0';
    return tpx_error_set(err, TPX_PLUGIN,
                         "plugin '%s' (%s): %s returned, but its result pipe "
                         "held %zu byte(s) that are not a result (\"%s%s\"): "
                         "the plugin wrote onto a file descriptor it does not "
                         "own",
                         p->name, p->path, what, res->len, head,
                         res->len > n ? "..." : "");
  }
  return tpx_error_set(err, TPX_PLUGIN,
                       "plugin '%s' (%s) exited (status %d) in %s without "
                       "returning (exit() or _exit() in the plugin?)",
                       p->name, p->path, res->code, what);
}

tpx_status tpx__isolate_receive(const tpx__plugin *p, tpx__call *c,
                                const tpx__child_result *res, tpx_error *err) {
  const char *what = tpx__plugin_op_symbol(c->op);
  json_t *root = NULL;
  if (res->end == TPX__CHILD_EXITED && res->code == 0 && res->out) {
    json_error_t jerr;
    root = json_loadb(res->out, res->len, 0, &jerr);
  }
  if (!root || !json_is_object(root) ||
      !json_is_integer(json_object_get(root, "status"))) {
    json_decref(root);
    return child_failed(p, what, res, err);
  }
  c->refused = json_is_true(json_object_get(root, "refused"));
  tpx_status s = child_status(root, err);
  if (s == TPX_NO_MEMORY && p->child_memory && err) {
    char m[TPX_ERROR_MESSAGE_SIZE];
    snprintf(m, sizeof m, "%s", err->message);
    tpx_error_clear(err); /* the same error, said more precisely */
    tpx_error_set(err, s,
                  "%s (the isolated child may add at most %llu MiB of "
                  "address space: TPX_PLUGIN_MEMORY_MB or "
                  "tpx_registry_set_child_limits)",
                  m, p->child_memory >> 20);
  }
  if (s == TPX_OK) {
    switch (c->op) {
    case TPX__OP_GET_PLAN: s = receive_plan(p, root, c, err); break;
    case TPX__OP_SKELETON: s = receive_skeleton(p, root, c, err); break;
    case TPX__OP_VALIDATE: s = receive_diags(p, root, c, err); break;
    default: s = receive_strings(p, root, c, err); break;
    }
    if (s != TPX_OK)
      tpx__call_release(c); /* a partial result is no result */
  }
  json_decref(root);
  return s;
}
