/* cmd_plugins.c — `tpx plugins`: every model-family plugin found on the
 * search path (path, name, version, ABI, architectures, named plans,
 * capabilities), every one refused with the reason, and load warnings such
 * as duplicate architectures. Text or JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "tpx/diag.h"
#include "tpx/plugin.h"
#include "tpx/registry.h"

static void usage(FILE *out) {
  char dir[4096];
  int build_tree = 0;
  if (tpx_registry_default_dir(dir, sizeof dir, &build_tree, NULL) != TPX_OK)
    snprintf(dir, sizeof dir, "?");
  fprintf(out,
          "usage: tpx plugins [--format text|json] [--dir DIR]... [--help]\n"
          "\n"
          "List the model-family plugins tpx finds, and those it refused with "
          "the reason.\n"
          "\n"
          "Search order (the first plugin serving an architecture wins):\n"
          "  1. $TPX_PLUGIN_PATH (colon-separated directories)\n"
          "  2. %s: %s\n"
          "     (and its subdirectories)\n"
          "\n"
          "options:\n"
          "  --format FMT  text (default) or json (tpx-plugins/1)\n"
          "  --dir DIR     look only in DIR (and its direct subdirectories) "
          "instead\n"
          "                of the search path; may be repeated\n"
          "  -h, --help    show this help\n"
          "\n"
          "Each file is first loaded in a child process, so a plugin that "
          "crashes or\nhangs while loading is listed as refused. A directory "
          "that is missing, not\na directory or unreadable (a --dir or a "
          "TPX_PLUGIN_PATH entry) is a\nplugin-dir-unusable warning naming "
          "it, also printed on stderr.\n"
          "A file that others could change (it or its directory writable by "
          "others or\nby a group not the owner's own, or owned by neither "
          "you nor root) is refused\nas untrusted; TPX_PLUGIN_TRUST_ANY=1 "
          "loads it anyway.\n"
          "\n"
          "Exit status: 0 when every plugin found loaded, 1 when some were "
          "refused or\na directory could not be searched, 2 on bad usage or "
          "when no --dir could\nbe searched at all.\n",
          build_tree ? "the build tree (this tpx runs from it)"
                     : "the installed plugin directory",
          dir);
}

static void abi_text(uint32_t v, char *buf, size_t size) {
  snprintf(buf, size, "%u.%u", (unsigned)TPX_PLUGIN_ABI_VERSION_MAJOR(v),
           (unsigned)TPX_PLUGIN_ABI_VERSION_MINOR(v));
}

/* The registry's plugin-failed and plugin-untrusted warnings repeat its
 * refusals, which are listed on their own. */
static int is_refusal(const tpx_diag_list *dl, size_t i) {
  tpx_diag d;
  return tpx_diag_get(dl, i, &d, NULL) == TPX_OK && cli_is_refusal_code(d.code);
}

static void print_text(const tpx_registry *reg) {
  size_t n = tpx_registry_num_plugins(reg);
  printf("%zu plugin(s) loaded\n", n);
  for (size_t i = 0; i < n; i++) {
    tpx_plugin_desc d;
    if (tpx_registry_plugin(reg, i, &d, NULL) != TPX_OK)
      continue;
    char abi[32];
    abi_text(d.abi_version, abi, sizeof abi);
    printf("\n%s %s (ABI %s)\n  path: %s\n", d.name, d.version, abi, d.path);
    if (d.description && d.description[0])
      printf("  description: %s\n", d.description);
    printf("  architectures:\n");
    for (size_t k = 0; k < d.num_architectures; k++)
      printf("    %s\n", d.architectures[k]);
    if (d.num_plan_names) {
      printf("  named plans:");
      for (size_t k = 0; k < d.num_plan_names; k++)
        printf(" %s", d.plan_names[k]);
      printf("\n");
    }
    printf("  capabilities:%s%s%s%s%s%s\n", " get_plan",
           d.has_skeleton ? " skeleton" : "", d.has_validate ? " validate" : "",
           d.has_fsdp_units ? " fsdp_units" : "",
           d.has_fp32_params ? " fp32_params" : "",
           tpx_registry_plugin_has_strategy(reg, i) ? " strategy" : "");
  }
  size_t r = tpx_registry_num_refused(reg);
  if (r) {
    printf("\n%zu plugin(s) refused\n", r);
    for (size_t i = 0; i < r; i++) {
      tpx_plugin_refusal ref;
      if (tpx_registry_refused(reg, i, &ref, NULL) == TPX_OK)
        printf("  %s\n    %s\n", ref.path, ref.reason);
    }
  }
  const tpx_diag_list *dl = tpx_registry_diagnostics(reg);
  size_t nd = 0;
  for (size_t i = 0; i < tpx_diag_count(dl); i++) nd += !is_refusal(dl, i);
  if (nd) {
    printf("\n%zu warning(s)\n", nd);
    for (size_t i = 0; i < tpx_diag_count(dl); i++) {
      tpx_diag d;
      if (!is_refusal(dl, i) && tpx_diag_get(dl, i, &d, NULL) == TPX_OK)
        printf("  %s: %s\n", d.code, d.message);
    }
  }
}

static json_t *string_array(const char *const *items, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    json_array_append_new(a, json_string(items[i]));
  return a;
}

static int print_json(const tpx_registry *reg) {
  json_t *root = json_object();
  json_t *plugins = json_array(), *refused = json_array(),
         *warnings = json_array();
  if (!root || !plugins || !refused || !warnings) {
    json_decref(root);
    json_decref(plugins);
    json_decref(refused);
    json_decref(warnings);
    return -1;
  }
  json_object_set_new(root, "format", json_string("tpx-plugins/1"));
  char dir[4096];
  int build_tree = 0;
  if (tpx_registry_default_dir(dir, sizeof dir, &build_tree, NULL) == TPX_OK)
    json_object_set_new(
        root, "default_dir",
        json_pack("{s:s, s:b}", "path", dir, "build_tree", build_tree));
  for (size_t i = 0; i < tpx_registry_num_plugins(reg); i++) {
    tpx_plugin_desc d;
    if (tpx_registry_plugin(reg, i, &d, NULL) != TPX_OK)
      continue;
    char abi[32];
    abi_text(d.abi_version, abi, sizeof abi);
    json_t *caps = json_array();
    json_array_append_new(caps, json_string("get_plan"));
    if (d.has_skeleton)
      json_array_append_new(caps, json_string("skeleton"));
    if (d.has_validate)
      json_array_append_new(caps, json_string("validate"));
    if (d.has_fsdp_units)
      json_array_append_new(caps, json_string("fsdp_units"));
    if (d.has_fp32_params)
      json_array_append_new(caps, json_string("fp32_params"));
    if (tpx_registry_plugin_has_strategy(reg, i))
      json_array_append_new(caps, json_string("strategy"));
    json_array_append_new(
        plugins,
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "path", d.path,
                  "name", d.name, "version", d.version, "description",
                  d.description ? d.description : "", "abi", abi,
                  "architectures",
                  string_array(d.architectures, d.num_architectures),
                  "plan_names", string_array(d.plan_names, d.num_plan_names),
                  "capabilities", caps));
  }
  for (size_t i = 0; i < tpx_registry_num_refused(reg); i++) {
    tpx_plugin_refusal ref;
    if (tpx_registry_refused(reg, i, &ref, NULL) == TPX_OK)
      json_array_append_new(refused, json_pack("{s:s, s:s}", "path", ref.path,
                                               "reason", ref.reason));
  }
  const tpx_diag_list *dl = tpx_registry_diagnostics(reg);
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    if (!is_refusal(dl, i) && tpx_diag_get(dl, i, &d, NULL) == TPX_OK)
      json_array_append_new(warnings, json_pack("{s:s, s:s, s:s}", "code",
                                                d.code, "subject", d.subject,
                                                "message", d.message));
  }
  json_object_set_new(root, "plugins", plugins);
  json_object_set_new(root, "refused", refused);
  json_object_set_new(root, "warnings", warnings);
  char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!s)
    return -1;
  printf("%s\n", s);
  free(s);
  return 0;
}

int tpx_cmd_plugins(int argc, char **argv) {
  int json = 0;
  const char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
  size_t ndirs = 0;
  if (!dirs) {
    fprintf(stderr, "tpx plugins: out of memory\n");
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      free(dirs);
      return 0;
    } else if ((strcmp(a, "--format") == 0 && i + 1 < argc) ||
               strncmp(a, "--format=", 9) == 0) {
      const char *v = a[8] == '=' ? a + 9 : argv[++i];
      if (strcmp(v, "json") == 0) {
        json = 1;
      } else if (strcmp(v, "text") == 0) {
        json = 0;
      } else {
        fprintf(stderr, "tpx plugins: unknown format '%s' (text, json)\n", v);
        free(dirs);
        return 2;
      }
    } else if (strcmp(a, "--dir") == 0 && i + 1 < argc) {
      dirs[ndirs++] = argv[++i];
    } else {
      fprintf(stderr, "tpx plugins: unknown argument '%s'\n\n", a);
      usage(stderr);
      free(dirs);
      return 2;
    }
  }
  tpx_registry *reg = NULL;
  tpx_error err = {0};
  tpx_status s = tpx_registry_create(&reg, &err);
  /* A listing tool must survive a plugin that crashes while loading. */
  if (s == TPX_OK)
    s = tpx_registry_set_probe(reg, 1, &err);
  if (s == TPX_OK) {
    if (ndirs)
      for (size_t i = 0; i < ndirs && s == TPX_OK; i++)
        s = tpx_registry_load_dir(reg, dirs[i], &err);
    else
      s = tpx_registry_load_default(reg, &err);
  }
  free(dirs);
  if (s != TPX_OK) {
    fprintf(stderr, "tpx plugins: %s\n", err.message);
    tpx_registry_destroy(reg);
    return 2;
  }
  int rc = tpx_registry_num_refused(reg) ? 1 : 0;
  size_t unusable = cli_report_unusable_dirs(reg, "tpx plugins");
  if (unusable)
    rc = 1;
  if (ndirs && unusable >= ndirs) {
    fprintf(stderr, "tpx plugins: none of the directories given with --dir "
                    "could be searched\n");
    rc = 2;
  }
  if (json) {
    if (print_json(reg) != 0) {
      fprintf(stderr, "tpx plugins: out of memory\n");
      rc = 2;
    }
  } else {
    print_text(reg);
  }
  tpx_registry_destroy(reg);
  return rc;
}
