/* plugin/registry.c — the plugin registry: the search path, loading every
 * plugin found (recording refusals and duplicate-architecture warnings),
 * architecture lookup, and the public calls into a plugin.
 *
 * Locking: loading takes the write lock, lookups and calls the read lock,
 * so plugins can be asked from many threads while nobody loads. Plugins are
 * unloaded only by tpx_registry_destroy.
 *
 * Not selection (select.c) and not the host table (host.c). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/grow.h"
#include "base/fqn.h"
#include "base/log_view.h"
#include "model/family_view.h"
#include "plugin/child.h"
#include "plugin/plugin_internal.h"
#include "tpx_config.h"

tpx_status tpx_registry_create(tpx_registry **out, tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_create: out is NULL");
  *out = NULL;
  tpx_registry *r = calloc(1, sizeof *r);
  if (!r)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (pthread_rwlock_init(&r->lock, NULL) != 0) {
    free(r);
    return tpx_error_set(err, TPX_INTERNAL, "cannot create the registry lock");
  }
  tpx_status s = tpx_diag_list_create(&r->diags, err);
  if (s != TPX_OK) {
    pthread_rwlock_destroy(&r->lock);
    free(r);
    return s;
  }
  r->probe = 1;
  r->child_memory = tpx__child_default_memory();
  *out = r;
  return TPX_OK;
}

void tpx_registry_destroy(tpx_registry *reg) {
  if (!reg)
    return;
  /* Unload in reverse order of loading. */
  for (size_t i = reg->num_plugins; i-- > 0;) tpx__plugin_free(reg->plugins[i]);
  free(reg->plugins);
  for (size_t i = 0; i < reg->num_refused; i++) {
    free(reg->refused[i].path);
    free(reg->refused[i].reason);
  }
  free(reg->refused);
  free(reg->dirs);
  tpx_diag_list_destroy(reg->diags);
  pthread_rwlock_destroy(&reg->lock);
  free(reg);
}

/* ---- loading ------------------------------------------------------------- */

static tpx_status add_refusal(tpx_registry *reg, const char *path,
                              const char *reason, tpx_status status,
                              const struct stat *st, int untrusted) {
  if (TPX_GROW(reg->refused, reg->cap_refused, reg->num_refused + 1, 8) != 0)
    return TPX_NO_MEMORY;
  tpx__refusal *r = &reg->refused[reg->num_refused];
  r->status = status;
  r->dev = st ? st->st_dev : 0;
  r->ino = st ? st->st_ino : 0;
  r->untrusted = untrusted;
  r->path = strdup(path);
  r->reason = strdup(reason);
  if (!r->path || !r->reason) {
    free(r->path);
    free(r->reason);
    return TPX_NO_MEMORY;
  }
  reg->num_refused++;
  return TPX_OK;
}

/* The refusal of the file `st` describes, when it was refused before (the
 * same file reached twice on the search path is examined once). A file
 * refused as untrusted is the same only under the same path: through
 * another directory (a hard link) it may be trusted. */
static const tpx__refusal *refused_before(const tpx_registry *reg,
                                          const char *path,
                                          const struct stat *st) {
  for (size_t i = 0; i < reg->num_refused; i++) {
    const tpx__refusal *r = &reg->refused[i];
    if ((r->dev || r->ino) && r->dev == st->st_dev && r->ino == st->st_ino &&
        (!r->untrusted || strcmp(r->path, path) == 0))
      return r;
  }
  return NULL;
}

/* 1 when the directory `st` describes was searched before; else records it
 * (-1: out of memory). */
static int dir_searched(tpx_registry *reg, const struct stat *st) {
  for (size_t i = 0; i < reg->num_dirs; i++)
    if (reg->dirs[i].dev == st->st_dev && reg->dirs[i].ino == st->st_ino)
      return 1;
  if (TPX_GROW(reg->dirs, reg->cap_dirs, reg->num_dirs + 1, 8) != 0)
    return -1;
  reg->dirs[reg->num_dirs].dev = st->st_dev;
  reg->dirs[reg->num_dirs++].ino = st->st_ino;
  return 0;
}

static int already_seen(const tpx_registry *reg, const char *real_path) {
  for (size_t i = 0; i < reg->num_plugins; i++)
    if (strcmp(reg->plugins[i]->real_path, real_path) == 0)
      return 1;
  return 0;
}

/* Lookup without locking (callers hold a lock). */
static int64_t find_arch_unlocked(const tpx_registry *reg, const char *arch,
                                  const char **matched) {
  if (matched)
    *matched = NULL;
  if (!arch || !arch[0])
    return -1;
  /* Exact string match first (bare or qualified), in load order. */
  for (size_t i = 0; i < reg->num_plugins; i++)
    for (size_t j = 0; j < reg->plugins[i]->num_archs; j++)
      if (strcmp(reg->plugins[i]->archs[j], arch) == 0) {
        if (matched)
          *matched = reg->plugins[i]->archs[j];
        return (int64_t)i;
      }
  /* Then the class name against the last component of qualified names (a
   * config only knows the bare class name). */
  const char *want = tpx__fqn_bare_arch(arch);
  for (size_t i = 0; i < reg->num_plugins; i++)
    for (size_t j = 0; j < reg->plugins[i]->num_archs; j++)
      if (strcmp(tpx__fqn_bare_arch(reg->plugins[i]->archs[j]), want) == 0) {
        if (matched)
          *matched = reg->plugins[i]->archs[j];
        return (int64_t)i;
      }
  return -1;
}

tpx_status tpx_registry_set_probe(tpx_registry *reg, int on, tpx_error *err) {
  if (!reg)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_set_probe: registry is NULL");
  pthread_rwlock_wrlock(&reg->lock);
  reg->probe = on ? 1 : 0;
  pthread_rwlock_unlock(&reg->lock);
  return TPX_OK;
}

tpx_status tpx_registry_set_isolation(tpx_registry *reg, int enabled,
                                      double timeout_seconds, tpx_error *err) {
  if (!reg)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_set_isolation: registry is NULL");
  if (enabled && !(timeout_seconds > 0 && timeout_seconds <= 86400))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_set_isolation: timeout_seconds=%g; it "
                         "must be > 0 and <= 86400",
                         timeout_seconds);
  pthread_rwlock_wrlock(&reg->lock);
  reg->isolate = enabled ? 1 : 0;
  reg->isolate_timeout = enabled ? timeout_seconds : 0;
  for (size_t i = 0; i < reg->num_plugins; i++) {
    reg->plugins[i]->isolate = reg->isolate;
    reg->plugins[i]->isolate_timeout = reg->isolate_timeout;
  }
  pthread_rwlock_unlock(&reg->lock);
  return TPX_OK;
}

tpx_status tpx_registry_set_child_limits(tpx_registry *reg,
                                         unsigned long long max_bytes,
                                         double max_cpu_seconds,
                                         tpx_error *err) {
  if (!reg)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_set_child_limits: registry is NULL");
  if (!(max_cpu_seconds >= 0 && max_cpu_seconds <= 86400))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_set_child_limits: max_cpu_seconds=%g; "
                         "it must be >= 0 and <= 86400",
                         max_cpu_seconds);
  pthread_rwlock_wrlock(&reg->lock);
  reg->child_memory = max_bytes;
  reg->child_cpu = max_cpu_seconds;
  for (size_t i = 0; i < reg->num_plugins; i++) {
    reg->plugins[i]->child_memory = max_bytes;
    reg->plugins[i]->child_cpu = max_cpu_seconds;
  }
  pthread_rwlock_unlock(&reg->lock);
  return TPX_OK;
}

/* The probe child: load the file, say so, unload it, say so. What it wrote
 * tells the parent which step a crash or exit() belongs to. */
static void probe_body(int fd, void *arg) {
  tpx__plugin *p = NULL;
  char why[TPX_ERROR_MESSAGE_SIZE];
  /* An ordinary refusal is the in-process load's to report. */
  (void)tpx__plugin_open(arg, tpx__plugin_host_table(), &p, why, sizeof why);
  if (write(fd, "L", 1) != 1)
    return;
  tpx__plugin_free(p);
  if (write(fd, "U", 1) != 1)
    return;
}

/* Load `path` once in a child (child.c). 0 when the child got through (the
 * in-process load will then report any ordinary refusal itself), -1 with
 * `reason` when loading or unloading crashed, exited or hung there. */
static int probe_file(const tpx_registry *reg, const char *path, char *reason,
                      size_t size) {
  const double timeout = TPX__CHILD_DEFAULT_TIMEOUT;
  tpx__child_spec spec = {probe_body, (void *)path, timeout, reg->child_memory,
                          reg->child_cpu};
  tpx__child_result res;
  tpx_error ignored = {0};
  if (tpx__child_run(&spec, &res, &ignored) != TPX_OK)
    return 0; /* cannot probe: load as usual */
  const int loaded = res.len && memchr(res.out, 'L', res.len);
  const int unloaded = res.len && memchr(res.out, 'U', res.len);
  tpx__child_result_free(&res);
  const char *step =
      !loaded ? "while loading (dlopen or register_parallel_strategy)"
              : "while unloading (dlclose: an ELF destructor of the plugin)";
  if (res.end == TPX__CHILD_TIMED_OUT) {
    snprintf(reason, size, "hung for %g s %s; not loaded", timeout, step);
    return -1;
  }
  if (res.end == TPX__CHILD_SIGNALED) {
    const char *sn = tpx__signal_name(res.code);
    snprintf(reason, size, "crashed with %s (signal %d) %s; not loaded",
             sn ? sn : "a signal", res.code, step);
    return -1;
  }
  if (res.code != 0 || !unloaded) {
    snprintf(reason, size,
             "the process exited with status %d %s instead of returning "
             "(exit() in the plugin?); not loaded",
             res.code, step);
    return -1;
  }
  return 0;
}

/* Record a refusal: the list, the log, and a `plugin-failed` warning
 * (`plugin-untrusted` when the trust check refused it) naming the file, so
 * `tpx plan` and friends mention it. `st`: the file, when it could be
 * examined (a second visit then repeats the refusal without a new one). */
static tpx_status refuse(tpx_registry *reg, const char *path,
                         const char *reason, tpx_status s,
                         const struct stat *st, int untrusted, tpx_error *err) {
  tpx__log(TPX_LOG_WARN, "plugin %s refused: %s", path, reason);
  if (add_refusal(reg, path, reason, s, st, untrusted) != TPX_OK ||
      tpx_diag_add(reg->diags, TPX_DIAG_WARNING,
                   untrusted ? "plugin-untrusted" : "plugin-failed", path,
                   untrusted ? NULL /* the reason says how */
                             : "fix or remove the file (`tpx check-plugin` "
                               "tells more)",
                   "plugin %s refused: %s", path, reason) != TPX_OK)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return tpx_error_set(err, s, "plugin %s refused: %s", path, reason);
}

static tpx_status load_file_locked(tpx_registry *reg, const char *path,
                                   tpx_error *err) {
  char rp[PATH_MAX];
  const char *real = realpath(path, rp);
  if (real && already_seen(reg, rp))
    return TPX_OK; /* the same file reached twice on the search path */
  /* What cannot be examined (a missing file) is dlopen's to report. */
  struct stat st;
  const int examined = stat(path, &st) == 0;
  if (examined) {
    const tpx__refusal *before = refused_before(reg, path, &st);
    if (before)
      return tpx_error_set(err, before->status, "plugin %s refused: %s", path,
                           before->reason);
    char why[TPX_ERROR_MESSAGE_SIZE];
    int untrusted = 0;
    if (tpx__plugin_vet(path, real, &st, &untrusted, why, sizeof why) != 0)
      return refuse(reg, path, why, TPX_PLUGIN, &st, untrusted, err);
  }
  const struct stat *id = examined ? &st : NULL;
  if (reg->probe) {
    char why[TPX_ERROR_MESSAGE_SIZE];
    if (probe_file(reg, path, why, sizeof why) != 0)
      return refuse(reg, path, why, TPX_PLUGIN, id, 0, err);
  }
  tpx__plugin *p = NULL;
  char reason[TPX_ERROR_MESSAGE_SIZE];
  tpx_status s = tpx__plugin_open(path, tpx__plugin_host_table(), &p, reason,
                                  sizeof reason);
  if (s != TPX_OK)
    return refuse(reg, path, reason, s, id, 0, err);
  /* Duplicate architectures: the first loaded keeps serving them; one
   * warning per architecture, naming the file that serves it. */
  for (size_t j = 0; j < p->num_archs; j++) {
    const tpx__plugin *q = NULL;
    for (size_t i = 0; i < reg->num_plugins && !q; i++)
      for (size_t k = 0; k < reg->plugins[i]->num_archs; k++)
        if (strcmp(reg->plugins[i]->archs[k], p->archs[j]) == 0) {
          q = reg->plugins[i];
          break;
        }
    if (!q)
      continue;
    tpx_diag_add(reg->diags, TPX_DIAG_WARNING, "duplicate-architecture",
                 p->archs[j],
                 "remove one of the files or reorder TPX_PLUGIN_PATH",
                 "architecture '%s' is served by both %s (plugin '%s', used) "
                 "and %s (plugin '%s', ignored for it)",
                 p->archs[j], q->path, q->name, p->path, p->name);
    tpx__log(TPX_LOG_WARN,
             "architecture '%s' served by both %s and %s; using %s",
             p->archs[j], q->path, p->path, q->path);
  }
  if (TPX_GROW(reg->plugins, reg->cap_plugins, reg->num_plugins + 1, 8) != 0) {
    tpx__plugin_free(p);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  p->isolate = reg->isolate;
  p->isolate_timeout = reg->isolate_timeout;
  p->child_memory = reg->child_memory;
  p->child_cpu = reg->child_cpu;
  reg->plugins[reg->num_plugins++] = p;
  tpx__log(TPX_LOG_INFO, "loaded plugin '%s' %s from %s", p->name, p->version,
           p->path);
  return TPX_OK;
}

tpx_status tpx_registry_load_file(tpx_registry *reg, const char *path,
                                  tpx_error *err) {
  if (!reg || !path)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_load_file: registry or path is NULL");
  pthread_rwlock_wrlock(&reg->lock);
  tpx_status s = load_file_locked(reg, path, err);
  pthread_rwlock_unlock(&reg->lock);
  return s;
}

static int has_so_suffix(const char *name) {
  size_t n = strlen(name);
  return n > 3 && strcmp(name + n - 3, ".so") == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.so in `dir`, sorted by name so the load order is reproducible;
 * with `recurse`, also those in its direct subdirectories (after the files
 * of `dir` itself). */
static tpx_status scan_dir(tpx_registry *reg, const char *dir, int recurse,
                           int warn, tpx_error *err) {
  DIR *d = opendir(dir);
  if (!d) {
    /* The default directory may well be missing; a directory somebody
     * named (TPX_PLUGIN_PATH, tpx_registry_load_dir) is worth a warning. */
    int e = errno;
    if (!warn)
      return TPX_OK;
    tpx__log(TPX_LOG_WARN, "plugin directory '%s' cannot be searched: %s", dir,
             strerror(e));
    if (tpx_diag_add(reg->diags, TPX_DIAG_WARNING, "plugin-dir-unusable", dir,
                     "check the path given in TPX_PLUGIN_PATH or --dir",
                     "plugin directory '%s' cannot be searched: %s", dir,
                     strerror(e)) != TPX_OK)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    return TPX_OK;
  }
  struct stat dst;
  int seen = fstat(dirfd(d), &dst) == 0 ? dir_searched(reg, &dst) : 0;
  if (seen != 0) {
    closedir(d);
    return seen > 0 ? TPX_OK
                    : tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  char **files = NULL, **subdirs = NULL;
  size_t nf = 0, ns = 0, cf = 0, cs = 0;
  tpx_status s = TPX_OK;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    char *full = malloc(len);
    if (!full) {
      s = TPX_NO_MEMORY;
      break;
    }
    snprintf(full, len, "%s/%s", dir, e->d_name);
    struct stat st;
    int is_dir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
    char ***vec = NULL;
    size_t *n = NULL, *c = NULL;
    if (is_dir && recurse) {
      vec = &subdirs, n = &ns, c = &cs;
    } else if (!is_dir && has_so_suffix(e->d_name)) {
      vec = &files, n = &nf, c = &cf;
    }
    if (!vec) {
      free(full);
      continue;
    }
    if (TPX_GROW(*vec, *c, *n + 1, 16) != 0) {
      free(full);
      s = TPX_NO_MEMORY;
      break;
    }
    (*vec)[(*n)++] = full;
  }
  closedir(d);
  if (s == TPX_OK) {
    if (nf)
      qsort(files, nf, sizeof *files, cmp_str);
    if (ns)
      qsort(subdirs, ns, sizeof *subdirs, cmp_str);
    for (size_t i = 0; i < nf && s != TPX_NO_MEMORY; i++) {
      tpx_error ignored = {0};
      s = load_file_locked(reg, files[i], &ignored);
      if (s != TPX_NO_MEMORY)
        s = TPX_OK; /* refusals are recorded, not returned */
    }
    for (size_t i = 0; i < ns && s == TPX_OK; i++)
      s = scan_dir(reg, subdirs[i], 0, 1, err);
  }
  for (size_t i = 0; i < nf; i++) free(files[i]);
  for (size_t i = 0; i < ns; i++) free(subdirs[i]);
  free(files);
  free(subdirs);
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(err, s, "out of memory while scanning %s", dir);
  return s;
}

tpx_status tpx_registry_load_dir(tpx_registry *reg, const char *dir,
                                 tpx_error *err) {
  if (!reg || !dir)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_load_dir: registry or dir is NULL");
  pthread_rwlock_wrlock(&reg->lock);
  tpx_status s = scan_dir(reg, dir, 1, 1, err);
  pthread_rwlock_unlock(&reg->lock);
  return s;
}

tpx_status tpx_registry_load_default(tpx_registry *reg, tpx_error *err) {
  if (!reg)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_load_default: registry is NULL");
  const char *env = getenv("TPX_PLUGIN_PATH");
  if (env && env[0]) {
    char *copy = strdup(env);
    if (!copy)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir;
         dir = strtok_r(NULL, ":", &save)) {
      tpx_status s = tpx_registry_load_dir(reg, dir, err);
      if (s != TPX_OK) {
        free(copy);
        return s;
      }
    }
    free(copy);
  }
  char dir[PATH_MAX];
  tpx_status s = tpx_registry_default_dir(dir, sizeof dir, NULL, err);
  if (s != TPX_OK)
    return s;
  pthread_rwlock_wrlock(&reg->lock);
  s = scan_dir(reg, dir, 1, 0, err);
  pthread_rwlock_unlock(&reg->lock);
  return s;
}

/* ---- queries ------------------------------------------------------------- */

size_t tpx_registry_num_plugins(const tpx_registry *reg) {
  if (!reg)
    return 0;
  tpx_registry *r = (tpx_registry *)reg;
  pthread_rwlock_rdlock(&r->lock);
  size_t n = r->num_plugins;
  pthread_rwlock_unlock(&r->lock);
  return n;
}

size_t tpx_registry_num_refused(const tpx_registry *reg) {
  if (!reg)
    return 0;
  tpx_registry *r = (tpx_registry *)reg;
  pthread_rwlock_rdlock(&r->lock);
  size_t n = r->num_refused;
  pthread_rwlock_unlock(&r->lock);
  return n;
}

tpx_status tpx_registry_plugin(const tpx_registry *reg, size_t index,
                               tpx_plugin_desc *out, tpx_error *err) {
  if (!reg || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_plugin: registry or out is NULL");
  tpx_registry *r = (tpx_registry *)reg;
  pthread_rwlock_rdlock(&r->lock);
  tpx_status s = TPX_OK;
  if (index >= r->num_plugins) {
    s = tpx_error_set(err, TPX_OUT_OF_RANGE,
                      "plugin index %zu is out of range (%zu loaded)", index,
                      r->num_plugins);
  } else {
    tpx__plugin_desc_of(r->plugins[index], out);
  }
  pthread_rwlock_unlock(&r->lock);
  return s;
}

tpx_status tpx_registry_refused(const tpx_registry *reg, size_t index,
                                tpx_plugin_refusal *out, tpx_error *err) {
  if (!reg || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_refused: registry or out is NULL");
  tpx_registry *r = (tpx_registry *)reg;
  pthread_rwlock_rdlock(&r->lock);
  tpx_status s = TPX_OK;
  if (index >= r->num_refused) {
    s = tpx_error_set(err, TPX_OUT_OF_RANGE,
                      "refusal index %zu is out of range (%zu refused)", index,
                      r->num_refused);
  } else {
    out->path = r->refused[index].path;
    out->reason = r->refused[index].reason;
  }
  pthread_rwlock_unlock(&r->lock);
  return s;
}

const tpx_diag_list *tpx_registry_diagnostics(const tpx_registry *reg) {
  return reg ? reg->diags : NULL;
}

int64_t tpx__registry_find_arch(const tpx_registry *reg, const char *arch,
                                const char **matched) {
  if (!reg)
    return -1;
  tpx_registry *r = (tpx_registry *)reg;
  pthread_rwlock_rdlock(&r->lock);
  int64_t i = find_arch_unlocked(r, arch, matched);
  pthread_rwlock_unlock(&r->lock);
  return i;
}

int64_t tpx_registry_find(const tpx_registry *reg, const char *architecture) {
  return tpx__registry_find_arch(reg, architecture, NULL);
}

int64_t tpx__registry_find_plan_name(const tpx_registry *reg,
                                     const char *plan_name) {
  if (!reg || !plan_name)
    return -1;
  tpx_registry *r = (tpx_registry *)reg;
  int64_t found = -1;
  pthread_rwlock_rdlock(&r->lock);
  for (size_t i = 0; i < r->num_plugins && found < 0; i++)
    for (size_t j = 0; j < r->plugins[i]->num_plan_names; j++)
      if (strcmp(r->plugins[i]->plan_names[j], plan_name) == 0) {
        found = (int64_t)i;
        break;
      }
  pthread_rwlock_unlock(&r->lock);
  return found;
}

const tpx__plugin *tpx__registry_at(const tpx_registry *reg, size_t index) {
  if (!reg)
    return NULL;
  tpx_registry *r = (tpx_registry *)reg;
  pthread_rwlock_rdlock(&r->lock);
  const tpx__plugin *p = index < r->num_plugins ? r->plugins[index] : NULL;
  pthread_rwlock_unlock(&r->lock);
  return p;
}

/* ---- calls -----------------------------------------------------------------
 */

/* The value after "<key><class>:" of plugin trait k when it is declared
 * for `arch`'s class (bare name), else NULL. */
static const char *class_trait(const tpx__plugin *p, size_t k, const char *key,
                               const char *arch) {
  const char *dot = strrchr(arch, '.');
  const char *bare = dot ? dot + 1 : arch;
  size_t bl = strlen(bare), kl = strlen(key);
  const char *t = p->traits[k];
  if (strncmp(t, key, kl) != 0)
    return NULL;
  t += kl;
  const char *colon = strchr(t, ':');
  if (!colon || (size_t)(colon - t) != bl || strncmp(t, bare, bl) != 0)
    return NULL;
  return colon + 1;
}

/* The serving plugin's name aliases for `arch` (traits
 * "name_alias=<class>:<alias>=<canonical>", docs/PLUGIN_ABI.md) onto the
 * model, so safetensors headers under either naming match it. */
static tpx_status add_name_aliases(const tpx__plugin *p, tpx_model *model,
                                   const char *arch, tpx_error *err) {
  for (size_t k = 0; k < p->num_traits; k++) {
    const char *v = class_trait(p, k, "name_alias=", arch);
    const char *eq = v ? strchr(v, '=') : NULL;
    if (!eq)
      continue;
    char alias[512];
    size_t al = (size_t)(eq - v);
    if (al >= sizeof alias)
      continue;
    memcpy(alias, v, al);
    alias[al] = '\0';
    tpx_status st = tpx_model_add_name_alias(model, alias, eq + 1, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

/* The serving plugin's buffer rules for `arch` (traits
 * "buffer=<class>:<pattern>", docs/PLUGIN_ABI.md) onto the model, so the
 * checkpoint tensors they name are recorded as buffers. */
static tpx_status add_buffer_rules(const tpx__plugin *p, tpx_model *model,
                                   const char *arch, tpx_error *err) {
  for (size_t k = 0; k < p->num_traits; k++) {
    const char *v = class_trait(p, k, "buffer=", arch);
    tpx_status st = v ? tpx_model_add_buffer_rule(model, v, err) : TPX_OK;
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

tpx_status tpx_registry_build_skeleton(const tpx_registry *reg,
                                       tpx_model *model, tpx_error *err) {
  if (!reg || !model)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_build_skeleton: registry or model is "
                         "NULL");
  const char *arch = tpx_model_architecture(model, 0);
  if (!arch)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "the model has no architecture (config.json has no "
                         "\"architectures\"), so no plugin can build its "
                         "skeleton");
  const char *matched = NULL;
  int64_t i = tpx__registry_find_arch(reg, arch, &matched);
  if (i < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "no plugin serves architecture '%s' (see `tpx "
                         "plugins`); load the model's tensors from its "
                         "safetensors files instead",
                         arch);
  const tpx__plugin *p = tpx__registry_at(reg, (size_t)i);
  tpx_status st = tpx__plugin_skeleton(p, model, matched, err);
  if (st == TPX_OK)
    st = add_name_aliases(p, model, arch, err);
  if (st == TPX_OK)
    st = add_buffer_rules(p, model, arch, err);
  return st == TPX_OK ? tpx_registry_describe_model(reg, model, err) : st;
}

/* ---- family traits (model/family_view.h) ----
 * Any loaded plugin's declaration about the model's class counts, in load
 * order; each plugin's part is describe.c's. */

tpx_status tpx__registry_family(const tpx_registry *reg, const char *arch,
                                tpx__family *out, tpx_error *err) {
  for (size_t i = 0; reg && arch && i < tpx_registry_num_plugins(reg); i++) {
    const tpx__plugin *p = tpx__registry_at(reg, i);
    for (size_t k = 0; p && k < p->num_traits; k++) {
      if (!tpx__family_is_trait(p->traits[k]))
        continue;
      tpx_status st = tpx__family_add(out, p->traits[k], arch, NULL, err);
      if (st != TPX_OK)
        return st;
    }
  }
  return TPX_OK;
}

tpx_status tpx_registry_describe_model(const tpx_registry *reg,
                                       tpx_model *model, tpx_error *err) {
  if (!reg || !model)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_describe_model: registry or model is "
                         "NULL");
  for (size_t i = 0; i < tpx_registry_num_plugins(reg); i++) {
    tpx_status st =
        tpx__plugin_describe_model(tpx__registry_at(reg, i), model, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

tpx_status tpx_registry_get_plan(const tpx_registry *reg, size_t index,
                                 const tpx_model *model,
                                 const char *architecture,
                                 const char *plan_name, int sequence_parallel,
                                 int64_t tp_size, tpx_plan **out,
                                 tpx_error *err) {
  if (out)
    *out = NULL;
  if (!reg || !model || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_get_plan: registry, model or out is "
                         "NULL");
  const tpx__plugin *p = tpx__registry_at(reg, index);
  if (!p)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "plugin index %zu is out of range", index);
  if (tp_size < 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp_size=%lld; it must be >= 1", (long long)tp_size);
  if (sequence_parallel != 0 && sequence_parallel != 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "sequence_parallel=%d; it must be 0 or 1",
                         sequence_parallel);
  if (plan_name) {
    int known = 0;
    for (size_t j = 0; j < p->num_plan_names; j++)
      known |= strcmp(p->plan_names[j], plan_name) == 0;
    if (!known)
      return tpx_error_set(err, TPX_NOT_FOUND,
                           "plugin '%s' (%s) has no named plan '%s'", p->name,
                           p->path, plan_name);
  }
  if (!architecture)
    architecture = tpx_model_architecture(model, 0);
  if (!architecture)
    architecture = p->archs[0];
  return tpx__plugin_get_plan(p, model, architecture, plan_name,
                              sequence_parallel, tp_size, out, NULL, NULL, err);
}

int tpx_registry_plugin_has_strategy(const tpx_registry *reg, size_t index) {
  if (!reg)
    return 0;
  tpx_registry *r = (tpx_registry *)reg;
  pthread_rwlock_rdlock(&r->lock);
  int has = index < r->num_plugins && r->plugins[index]->strategy_fn != NULL;
  pthread_rwlock_unlock(&r->lock);
  return has;
}
