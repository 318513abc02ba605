/* plugin/search_path.c — which plugin directory tpx_registry_load_default
 * searches after $TPX_PLUGIN_PATH, decided at run time from where libtpx
 * itself was loaded:
 *   - libtpx loaded from its build tree (the tests, build/tools/tpx): the
 *     build tree's plugins/ directory;
 *   - an installed libtpx: <the directory holding libtpx.so>/tpx/plugins,
 *     i.e. <libdir>/tpx/plugins of that installation, wherever it was
 *     installed or copied (a `meson install --destdir` tree works as is);
 *   - where the library cannot tell (linked statically): the configured
 *     <prefix>/<libdir>/tpx/plugins.
 * An installed layout (<dir of libtpx>/tpx/plugins exists) is an
 * installation even below the build tree (a relative --destdir).
 * So an installed tpx never loads the build tree's plugins (which would
 * serve every architecture twice). Not the scanning itself (registry.c). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tpx/registry.h"
#include "tpx_config.h"

/* Any object inside libtpx: dladdr on it names the file libtpx came from. */
static const char g_anchor = 0;

/* `path` is `root` or below it (both canonical). */
static int is_under(const char *path, const char *root) {
  size_t n = strlen(root);
  return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static tpx_status put(char *buf, size_t size, const char *dir, tpx_error *err) {
  if ((size_t)snprintf(buf, size, "%s", dir) >= size)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_registry_default_dir: the directory '%s' does "
                         "not fit in %zu bytes",
                         dir, size);
  return TPX_OK;
}

tpx_status tpx_registry_default_dir(char *buf, size_t size, int *build_tree,
                                    tpx_error *err) {
  if (!buf || size == 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_default_dir: buf is NULL or size is 0");
  if (build_tree)
    *build_tree = 0;
  Dl_info info;
  char lib[PATH_MAX], root[PATH_MAX];
  if (!dladdr(&g_anchor, &info) || !info.dli_fname ||
      !realpath(info.dli_fname, lib))
    return put(buf, size, TPX_INSTALL_PLUGIN_DIR, err);
  char *slash = strrchr(lib, '/');
  int shared = slash && strncmp(slash + 1, "libtpx", 6) == 0;
  char dir[PATH_MAX + 16];
  if (shared) {
    *slash = '\0';
    snprintf(dir, sizeof dir, "%s/tpx/plugins", lib[0] ? lib : "/");
    *slash = '/';
  }
  /* An installation's <libdir>/tpx/plugins wins even inside the build
   * tree: `meson install --destdir staging` with a relative destdir puts
   * the installed tree under the build directory. */
  struct stat st;
  int installed = shared && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
  if (!installed && realpath(TPX_BUILD_ROOT, root) && is_under(lib, root)) {
    if (build_tree)
      *build_tree = 1;
    return put(buf, size, TPX_BUILD_PLUGIN_DIR, err);
  }
  /* A static libtpx lives in the executable: its directory says nothing. */
  if (!shared)
    return put(buf, size, TPX_INSTALL_PLUGIN_DIR, err);
  return put(buf, size, dir, err);
}
