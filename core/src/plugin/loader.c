/* plugin/loader.c — opening one plugin file: dlopen, the two required
 * symbols and the optional ones, ABI negotiation, and the checked copy of
 * what register_parallel_strategy answered.
 *
 * Every failure becomes a reason string naming what was wrong; the registry
 * (registry.c) records it with the path. A plugin that crashes inside
 * register_parallel_strategy takes the process down — nothing in-process
 * can prevent that; the conformance harness runs plugins in a child. */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "model/family_view.h"
#include "plugin/plugin_internal.h"

void tpx__plugin_free(tpx__plugin *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->num_archs; i++) free(p->archs[i]);
  free(p->archs);
  for (size_t i = 0; i < p->num_plan_names; i++) free(p->plan_names[i]);
  free(p->plan_names);
  for (size_t i = 0; i < p->num_traits; i++) free(p->traits[i]);
  free(p->traits);
  free(p->name);
  free(p->version);
  free(p->description);
  free(p->path);
  free(p->real_path);
  if (p->handle) {
    tpx__quiet_begin(); /* its destructors may print */
    dlclose(p->handle);
    tpx__quiet_end();
  }
  free(p);
}

static tpx_status fail(char *reason, size_t size, tpx_status s, const char *fmt,
                       ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static tpx_status fail(char *reason, size_t size, tpx_status s, const char *fmt,
                       ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, size, fmt, ap);
  va_end(ap);
  return s;
}

/* A registration string: non-NULL, NUL-terminated within `max`, printable
 * (no control characters), and optionally without spaces. */
static const char *check_string(const char *s, size_t max, int allow_empty,
                                int allow_space) {
  if (!s)
    return "is NULL";
  const char *end = memchr(s, '\0', max + 1);
  if (!end)
    return "is too long or not NUL-terminated";
  if (!allow_empty && end == s)
    return "is empty";
  for (const char *c = s; c < end; c++) {
    unsigned char u = (unsigned char)*c;
    if (u < 0x20 || u == 0x7f)
      return "holds a control character";
    if (!allow_space && u == ' ')
      return "holds a space";
  }
  return NULL;
}

/* Copy a NULL-terminated list of identifiers. Returns a reason or NULL. */
static const char *copy_list(const char *const *list, char ***out,
                             size_t *count, int required, const char *what,
                             char *reason, size_t size) {
  *out = NULL;
  *count = 0;
  if (!list) {
    if (!required)
      return NULL;
    snprintf(reason, size, "registration: %s is NULL", what);
    return reason;
  }
  size_t n = 0;
  while (n <= TPX__PLUGIN_MAX_LIST && list[n]) n++;
  if (n > TPX__PLUGIN_MAX_LIST) {
    snprintf(reason, size,
             "registration: %s has more than %d items (missing NULL "
             "terminator?)",
             what, TPX__PLUGIN_MAX_LIST);
    return reason;
  }
  if (n == 0) {
    if (!required)
      return NULL;
    snprintf(reason, size,
             "registration: %s is empty (the plugin serves "
             "nothing)",
             what);
    return reason;
  }
  char **v = calloc(n, sizeof *v);
  if (!v) {
    snprintf(reason, size, "out of memory");
    return reason;
  }
  for (size_t i = 0; i < n; i++) {
    const char *why = check_string(list[i], 512, 0, 0);
    if (why) {
      snprintf(reason, size, "registration: %s[%zu] %s", what, i, why);
      goto bad;
    }
    for (size_t j = 0; j < i; j++)
      if (strcmp(v[j], list[i]) == 0) {
        snprintf(reason, size, "registration: %s lists '%s' twice", what,
                 list[i]);
        goto bad;
      }
    v[i] = strdup(list[i]);
    if (!v[i]) {
      snprintf(reason, size, "out of memory");
      goto bad;
    }
  }
  *out = v;
  *count = n;
  return NULL;
bad:
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
  return reason;
}

static void version_text(uint32_t v, char *buf, size_t size) {
  snprintf(buf, size, "%u.%u", (unsigned)TPX_PLUGIN_ABI_VERSION_MAJOR(v),
           (unsigned)TPX_PLUGIN_ABI_VERSION_MINOR(v));
}

tpx_status tpx__plugin_missing_entry(int have_register, int have_get_plan,
                                     char *reason, size_t size) {
  return fail(reason, size, TPX_PLUGIN,
              "missing required symbol %s (not a tpx plugin?)",
              !have_register && !have_get_plan
                  ? "'" TPX_PLUGIN_REGISTER_SYMBOL
                    "' and '" TPX_PLUGIN_GET_PLAN_SYMBOL "'"
              : !have_register ? "'" TPX_PLUGIN_REGISTER_SYMBOL "'"
                               : "'" TPX_PLUGIN_GET_PLAN_SYMBOL "'");
}

/* What registration answered, checked and copied into p (names, version,
 * description, lists); on failure p is left to the caller to free. */
static tpx_status keep_info(tpx__plugin *p, const tpx_plugin_info *info,
                            char *reason, size_t size) {
  const char *why;
  if ((why = check_string(info->name, 128, 0, 0)))
    return fail(reason, size, TPX_PLUGIN, "registration: name %s", why);
  if ((why = check_string(info->version, 128, 0, 0)))
    return fail(reason, size, TPX_PLUGIN,
                "registration: version %s (plugin '%s')", why, info->name);
  /* The description is free text: only its length is checked; control
   * characters (a newline) are turned into spaces below. */
  if (info->description && !memchr(info->description, '\0', 1025)) {
    why = "is too long or not NUL-terminated";
    return fail(reason, size, TPX_PLUGIN,
                "registration: description %s (plugin '%s')", why, info->name);
  }
  p->name = strdup(info->name);
  p->version = strdup(info->version);
  p->description = strdup(info->description ? info->description : "");
  if (!p->name || !p->version || !p->description)
    return fail(reason, size, TPX_NO_MEMORY, "out of memory");
  for (char *c = p->description; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = ' ';
  if (copy_list(info->architectures, &p->archs, &p->num_archs, 1,
                "architectures", reason, size) ||
      copy_list(info->plan_names, &p->plan_names, &p->num_plan_names, 0,
                "plan_names", reason, size) ||
      copy_list(info->traits, &p->traits, &p->num_traits, 0, "traits", reason,
                size))
    return TPX_PLUGIN;
  /* A family trait (model/family_view.h) is checked here, once: a model
   * later takes it as it is. */
  for (size_t i = 0; i < p->num_traits; i++) {
    tpx_error e = {0};
    if (tpx__family_is_trait(p->traits[i]) &&
        tpx__family_add(NULL, p->traits[i], NULL, NULL, &e) != TPX_OK)
      return fail(reason, size, TPX_PLUGIN, "registration: %s (plugin '%s')",
                  e.message, p->name);
  }
  return TPX_OK;
}

tpx_status tpx__plugin_open(const char *path, const tpx_plugin_host *host,
                            tpx__plugin **out, char *reason,
                            size_t reason_size) {
  *out = NULL;
  reason[0] = '\0';
  tpx__plugin *p = calloc(1, sizeof *p);
  if (!p)
    return fail(reason, reason_size, TPX_NO_MEMORY, "out of memory");
  p->path = strdup(path);
  char rp[PATH_MAX];
  p->real_path = strdup(realpath(path, rp) ? rp : path);
  if (!p->path || !p->real_path) {
    tpx__plugin_free(p);
    return fail(reason, reason_size, TPX_NO_MEMORY, "out of memory");
  }

  /* dlopen searches the library path for a name without a slash; a plugin
   * path is a file path, so "foo.so" means ./foo.so. */
  char local[PATH_MAX];
  const char *open_path = path;
  if (!strchr(path, '/') &&
      (size_t)snprintf(local, sizeof local, "./%s", path) < sizeof local)
    open_path = local;
  /* dlopen would wait forever on a FIFO (and read a device without end):
   * what is not a regular file is refused; a missing or unreadable one is
   * left to dlopen, whose message says why */
  int fd;
  struct stat sb;
  tpx_error ferr = {0};
  tpx_status fst = tpx__file_open(open_path, &fd, &sb, &ferr);
  if (fst == TPX_INVALID_ARGUMENT) {
    tpx__plugin_free(p);
    return fail(reason, reason_size, TPX_PLUGIN, "%s", ferr.message);
  }
  if (fst == TPX_OK)
    close(fd);
  dlerror();
  tpx__quiet_begin(); /* its constructors may print */
  p->handle = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
  tpx__quiet_end();
  if (!p->handle) {
    const char *e = dlerror();
    tpx__plugin_free(p);
    return fail(reason, reason_size, TPX_PLUGIN, "dlopen failed: %s",
                e ? e : "unknown error");
  }
  /* Function pointers from dlsym: POSIX guarantees the conversion; the
   * memcpy keeps -Wpedantic quiet about object-to-function casts. */
  void *sym = dlsym(p->handle, TPX_PLUGIN_REGISTER_SYMBOL);
  memcpy(&p->reg_fn, &sym, sizeof sym);
  sym = dlsym(p->handle, TPX_PLUGIN_GET_PLAN_SYMBOL);
  memcpy(&p->get_plan_fn, &sym, sizeof sym);
  if (!p->reg_fn || !p->get_plan_fn) {
    int have_reg = p->reg_fn != NULL, have_get = p->get_plan_fn != NULL;
    tpx__plugin_free(p);
    return tpx__plugin_missing_entry(have_reg, have_get, reason, reason_size);
  }
  sym = dlsym(p->handle, TPX_PLUGIN_SKELETON_SYMBOL);
  memcpy(&p->skeleton_fn, &sym, sizeof sym);
  sym = dlsym(p->handle, TPX_PLUGIN_VALIDATE_SYMBOL);
  memcpy(&p->validate_fn, &sym, sizeof sym);
  sym = dlsym(p->handle, TPX_PLUGIN_FSDP_UNITS_SYMBOL);
  memcpy(&p->fsdp_fn, &sym, sizeof sym);
  sym = dlsym(p->handle, TPX_PLUGIN_FP32_PARAMS_SYMBOL);
  memcpy(&p->fp32_fn, &sym, sizeof sym);
  sym = dlsym(p->handle, TPX_PLUGIN_STRATEGY_SYMBOL);
  memcpy(&p->strategy_fn, &sym, sizeof sym);

  /* Negotiate and register. */
  tpx_plugin_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  char logged[256];
  tpx__plugin_capture_registration_log(logged, sizeof logged);
  tpx__quiet_begin();
  int rc = p->reg_fn(host, &info);
  tpx__quiet_end();
  tpx__plugin_capture_registration_log(NULL, 0);

  char hmin[32], hmax[32], pv[32];
  version_text(host->abi_min, hmin, sizeof hmin);
  version_text(host->abi_max, hmax, sizeof hmax);
  version_text(info.abi_version, pv, sizeof pv);
  if (rc == TPX_PLUGIN_ABI_UNSUPPORTED) {
    tpx__plugin_free(p);
    if (info.abi_version)
      return fail(reason, reason_size, TPX_ABI_MISMATCH,
                  "ABI refused: the host speaks %s..%s, the plugin speaks %s",
                  hmin, hmax, pv);
    return fail(reason, reason_size, TPX_ABI_MISMATCH,
                "ABI refused: the host speaks %s..%s, the plugin speaks none "
                "of them%s%s",
                hmin, hmax, logged[0] ? ": " : "", logged);
  }
  if (rc != TPX_PLUGIN_OK) {
    tpx__plugin_free(p);
    return fail(reason, reason_size, TPX_PLUGIN,
                "registration failed: %s returned %s (%d)%s%s",
                TPX_PLUGIN_REGISTER_SYMBOL, tpx__plugin_status_name(rc), rc,
                logged[0] ? ": " : "", logged);
  }
  if (info.abi_version < host->abi_min || info.abi_version > host->abi_max) {
    tpx__plugin_free(p);
    return fail(reason, reason_size, TPX_ABI_MISMATCH,
                "ABI refused: the plugin answered ABI %s, outside the host's "
                "range %s..%s",
                pv, hmin, hmax);
  }
  p->abi_version = info.abi_version;

  tpx_status kst = keep_info(p, &info, reason, reason_size);
  if (kst != TPX_OK) {
    tpx__plugin_free(p);
    return kst;
  }
  *out = p;
  return TPX_OK;
}

/* ---- accessors (plugin_view.h) ------------------------------------------
 */

void tpx__plugin_desc_of(const tpx__plugin *p, tpx_plugin_desc *out) {
  memset(out, 0, sizeof *out);
  out->path = p->path;
  out->name = p->name;
  out->version = p->version;
  out->description = p->description;
  out->abi_version = p->abi_version;
  out->num_architectures = p->num_archs;
  out->architectures = (const char *const *)p->archs;
  out->num_plan_names = p->num_plan_names;
  out->plan_names = (const char *const *)p->plan_names;
  out->has_skeleton = p->skeleton_fn != NULL;
  out->has_validate = p->validate_fn != NULL;
  out->has_fsdp_units = p->fsdp_fn != NULL;
  out->has_fp32_params = p->fp32_fn != NULL;
}

const char *tpx__plugin_name(const tpx__plugin *p) { return p->name; }

const char *tpx__plugin_path(const tpx__plugin *p) { return p->path; }

int tpx__plugin_has_strategy(const tpx__plugin *p) {
  return p && p->strategy_fn != NULL;
}

size_t tpx__plugin_num_traits(const tpx__plugin *p) {
  return p ? p->num_traits : 0;
}

const char *tpx__plugin_trait(const tpx__plugin *p, size_t i) {
  return p && i < p->num_traits ? p->traits[i] : NULL;
}
