/* plugin/plugin_internal.h — private types shared by the plugin area: the
 * registry object, the per-call context handed to plugin entry points
 * (tpx_plugin_ctx) and the isolation protocol, on top of what other areas
 * see (plugin/plugin_view.h).
 *
 * Not the public API (tpx/registry.h) and not the ABI (tpx/plugin.h). */
#ifndef TPX_PLUGIN_INTERNAL_H
#define TPX_PLUGIN_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/model.h"
#include "tpx/plan.h"
#include "tpx/plugin.h"
#include "tpx/registry.h"
#include "plugin/plugin_view.h"

/* One plugin that registered successfully. Every string is a host copy. */
struct tpx__plugin {
  char *path;      /* as found on the search path */
  char *real_path; /* realpath(), to load each file once */
  void *handle;    /* dlopen handle */
  char *name, *version, *description;
  uint32_t abi_version;
  char **archs;
  size_t num_archs;
  char **plan_names;
  size_t num_plan_names;
  char **traits; /* tpx_plugin_info.traits: "key=value" */
  size_t num_traits;
  tpx_plugin_register_fn reg_fn;
  tpx_plugin_get_plan_fn get_plan_fn;
  tpx_plugin_skeleton_fn skeleton_fn;
  tpx_plugin_validate_fn validate_fn;
  tpx_plugin_fsdp_units_fn fsdp_fn;
  tpx_plugin_fp32_params_fn fp32_fn;
  tpx_plugin_strategy_fn strategy_fn;
  /* tpx_registry_set_isolation, copied here by the registry so the calls
   * below need no registry: run each call in a forked child. */
  int isolate;
  double isolate_timeout; /* seconds */
  /* tpx_registry_set_child_limits: what an isolated child may use. */
  unsigned long long child_memory; /* bytes of address space, 0: none */
  double child_cpu;                /* seconds of CPU, 0: none */
};

/* Caps on what a plugin may hand over; beyond them the value is refused, so
 * a missing NUL terminator or list terminator cannot make the host walk off
 * into unrelated memory for long. */
#define TPX__PLUGIN_MAX_STRING 4096
#define TPX__PLUGIN_MAX_LIST 1024

typedef struct tpx__refusal {
  char *path;
  char *reason;
  tpx_status status;
  dev_t dev; /* the file refused (0/0: it could not be examined) */
  ino_t ino;
  int untrusted; /* by the trust check: it depends on the path too */
} tpx__refusal;

/* A directory already searched: one entry per (device, inode), so a
 * directory named many times (TPX_PLUGIN_PATH=d:d:d, a symlink to it) is
 * scanned once. */
typedef struct tpx__dir_id {
  dev_t dev;
  ino_t ino;
} tpx__dir_id;

struct tpx_registry {
  pthread_rwlock_t lock; /* writers: loading; readers: lookups and calls */
  tpx__plugin **plugins;
  size_t num_plugins, cap_plugins;
  tpx__refusal *refused;
  size_t num_refused, cap_refused;
  tpx_diag_list *diags;
  tpx__dir_id *dirs; /* searched directories */
  size_t num_dirs, cap_dirs;
  int probe;   /* tpx_registry_set_probe: load each file in a child first */
  int isolate; /* tpx_registry_set_isolation */
  double isolate_timeout;          /* seconds */
  unsigned long long child_memory; /* tpx_registry_set_child_limits */
  double child_cpu;
};

#define TPX__CTX_MAGIC 0x74707863u /* "tpxc" */

struct tpx_plugin_ctx {
  uint32_t magic;
  tpx__plugin_op op;
  const tpx__plugin *plugin;
  const tpx_model *model; /* config and module tree read by the plugin */
  tpx_plan *plan;         /* GET_PLAN: filled */
  tpx_model *skeleton;    /* SKELETON: filled */
  tpx_diag_list *diags;   /* VALIDATE (and any op): plugin diagnostics */
  tpx__strvec strings;    /* FSDP_UNITS / FP32: results */
  char *function;         /* plan_set_function */
  char message[TPX_ERROR_MESSAGE_SIZE]; /* set_error; first wins */
  int has_message;
  /* The first value the host refused during the call (bad style, bad
   * layout, ...). A call with an invalid value fails even when the plugin
   * ignored the status and returned TPX_PLUGIN_OK: its result would be
   * incomplete. */
  char invalid[TPX_ERROR_MESSAGE_SIZE];
  int has_invalid;
};

void tpx__ctx_init(tpx_plugin_ctx *ctx, tpx__plugin_op op,
                   const tpx__plugin *plugin, const tpx_model *model);
void tpx__ctx_release(tpx_plugin_ctx *ctx);

/* Text of a plugin status code ("TPX_PLUGIN_REFUSED"); static. */
const char *tpx__plugin_status_name(int status);

/* host.c: while `buf` is set (the loader, around one register call), the
 * first warning or error a plugin logs without a ctx is copied into it;
 * NULL ends the capture. Thread-local. */
void tpx__plugin_capture_registration_log(char *buf, size_t size);

/* tpx__plugin_call (plugin_view.h), always in-process (what an isolated
 * child runs). */
tpx_status tpx__plugin_call_direct(const tpx__plugin *p, tpx__call *c,
                                   tpx_error *err);

/* isolate.c — the protocol of an isolated call, nothing else. The child
 * writes the call's status, message and results to `fd` as one JSON
 * object; the parent reads the child's end (child.h) back into `c`, or
 * turns a crash, exit or timeout into TPX_PLUGIN naming the plugin. */
struct tpx__child_result;
void tpx__isolate_send(int fd, const tpx__call *c, tpx_status status,
                       const tpx_error *err);
tpx_status tpx__isolate_receive(const tpx__plugin *p, tpx__call *c,
                                const struct tpx__child_result *res,
                                tpx_error *err);

/* trust.c: 0 when the file at `path` (stat'ed into `st`, symlinks
 * followed; `real` its realpath, or NULL when there is none) may be opened
 * as a plugin: a regular file, trusted (owner and mode of the file and its
 * directory) and an ELF shared object. Else -1 with the reason, and
 * *untrusted set when the trust check refused it. */
int tpx__plugin_vet(const char *path, const char *real, const struct stat *st,
                    int *untrusted, char *reason, size_t size);
/* elf_peek.c: 0 when the file may be a plugin for this machine (an ELF
 * shared object whose dynamic symbols define both entry points, or one
 * that cannot be judged without loading it); else -1 with the reason. */
int tpx__plugin_elf_peek(const char *path, const struct stat *st, char *reason,
                         size_t size);
/* loader.c: "missing required symbol 'X' (not a tpx plugin?)" into
 * reason, naming the entry points that are not there (have_register,
 * have_get_plan: 0 when missing; at least one is). Returns TPX_PLUGIN. */
tpx_status tpx__plugin_missing_entry(int have_register, int have_get_plan,
                                     char *reason, size_t size);
/* TPX_PLUGIN_TRUST_ANY=1: the trust check is off. */
int tpx__plugin_trust_any(void);

#endif /* TPX_PLUGIN_INTERNAL_H */
