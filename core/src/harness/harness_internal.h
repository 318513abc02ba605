/* harness/harness_internal.h — private pieces of the conformance harness:
 * the ELF export reader, the child-side checks and the line protocol the
 * child uses to report over its pipe. */
#ifndef TPX_HARNESS_INTERNAL_H
#define TPX_HARNESS_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "plugin/plugin_view.h"
#include "tpx/harness.h"

/* The defined, default-visibility dynamic symbols of the ELF file at `path`
 * (sorted, malloc'd array of malloc'd strings). On failure returns -1 and
 * writes why into `reason` ("not an ELF file", ...). */
int tpx__elf_exports(const char *path, char ***names, size_t *count,
                     char *reason, size_t reason_size);
void tpx__elf_exports_free(char **names, size_t count);

/* Child side. Lines written to fd:
 *   R <tab> 1|0 <tab> name <tab> detail   a check result
 *   I <tab> key <tab> value               information for the parent
 *   S <tab> text                          the step being run now
 *   D                                     the child finished normally */
void tpx__h_result(int fd, int passed, const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void tpx__h_info(int fd, const char *key, const char *value);
void tpx__h_step(int fd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Child bodies; each reports through fd and returns normally. Load and
 * negotiation: harness_child.c; per architecture: harness_arch.c. */
typedef struct tpx__h_job {
  const char *path;
  const tpx_harness_options *opts;
  const char *arch;   /* per-architecture jobs */
  const char *config; /* a config.json path, or NULL for synthetic */
  int negotiation;    /* +1: host too new, -1: host too old */
} tpx__h_job;

/* The step the load check announces before dlclose; a crash there fails
 * the "unload" check (harness.c). */
#define TPX__H_UNLOAD_STEP "unloading the plugin (dlclose: its ELF destructors)"

/* Pin the plugin at `path` in this child (RTLD_NODELETE): its destructors
 * never run here. */
void tpx__h_pin(const char *path);
/* Catch what plugin code writes to stdout from here on (a temporary file,
 * or NULL); the check then fails "stdout" when anything was written. */
FILE *tpx__h_stdout_capture(void);
void tpx__h_stdout_check(int fd, FILE *f, const char *during);

void tpx__h_child_load(int fd, const tpx__h_job *job);
void tpx__h_child_negotiation(int fd, const tpx__h_job *job);
void tpx__h_child_arch(int fd, const tpx__h_job *job);

#endif
