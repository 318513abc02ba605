/* blas_kernel.c — tpx-train's BLAS kernel check and re-run, and the BLAS
 * line of its headers (see blas_kernel.h). */
#include "blas_kernel.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* set with OPENBLAS_CORETYPE by the re-run: the kernel OpenBLAS chose */
#define FIXED_VAR "TPX_BLAS_FIXED_FROM"

/* rank 0 of the launcher, or no launcher: the one to speak */
static int speaks(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                     "MV2_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return atoi(v) == 0;
  }
  return 1;
}

static void blas_version(char *name, size_t nn, char *ver, size_t nv) {
  const char *cfg = openblas_get_config();
  char n[32] = "OpenBLAS", v[32] = "?";
  if (cfg)
    sscanf(cfg, "%31s %31s", n, v);
  snprintf(name, nn, "%s", n);
  snprintf(ver, nv, "%s", v);
}

/* the kernel and the CPU the check sees: real, or the test's pretence */
static int observed(char *core, size_t n, tr_cpu *cpu) {
  const char *fake = getenv("TPX_TEST_FAKE_COREDETECT");
  const char *semi = fake ? strchr(fake, ';') : NULL;
  if (fake && *fake) {
    size_t len = semi ? (size_t)(semi - fake) : strlen(fake);
    snprintf(core, n, "%.*s", (int)len, fake);
  } else {
    const char *c = openblas_get_corename();
    snprintf(core, n, "%s", c ? c : "");
  }
  return semi ? tr_cpu_parse(semi + 1, cpu) : tr_cpu_detect(cpu);
}

void tr_blas_check(char **argv) {
  if (getenv("OPENBLAS_CORETYPE")) /* the user's, or our re-run's */
    return;
  char core[64], name[32], ver[32];
  tr_cpu cpu;
  if (observed(core, sizeof core, &cpu))
    return;
  const char *want = tr_blas_better_core(&cpu, core);
  if (!want)
    return;
  const char *fix = getenv("TPX_BLAS_FIX");
  int off = fix && !strcmp(fix, "0");
  blas_version(name, sizeof name, ver, sizeof ver);
  if (speaks()) {
    fprintf(stderr,
            "tpx-train: %s %s chose its %s kernel on a CPU with %s (family %d "
            "model %d); ",
            name, ver, core, tr_isa_name(cpu.isa), cpu.family, cpu.model);
    if (off)
      fprintf(stderr,
              "TPX_BLAS_FIX=0: left as it is (OPENBLAS_CORETYPE=%s would "
              "run the right one)\n",
              want);
    else
      fprintf(stderr, "running with OPENBLAS_CORETYPE=%s\n", want);
    fflush(stderr);
  }
  if (off)
    return;
  if (setenv("OPENBLAS_CORETYPE", want, 1) || setenv(FIXED_VAR, core, 1))
    return;
  execv("/proc/self/exe", argv);
  int e = errno;
  execvp(argv[0], argv);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(FIXED_VAR);
  if (speaks())
    fprintf(stderr,
            "tpx-train: could not run itself again (%s): going on with the "
            "%s kernel\n",
            strerror(e), core);
}

/* the fields go into JSON strings: no quote, backslash or control byte
 * (a user's OPENBLAS_CORETYPE could hold one) */
static void plain(char *s) {
  for (; *s; s++)
    if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
      *s = '?';
}

void tr_blas_info_get(tr_blas_info *b, int threads) {
  memset(b, 0, sizeof *b);
  blas_version(b->name, sizeof b->name, b->version, sizeof b->version);
  const char *c = openblas_get_corename();
  snprintf(b->kernel, sizeof b->kernel, "%s", c ? c : "?");
  b->threads = threads;
  const char *set = getenv("OPENBLAS_CORETYPE");
  const char *from = getenv(FIXED_VAR);
  if (!set)
    snprintf(b->chosen_by, sizeof b->chosen_by, "detected");
  else if (from && *from)
    snprintf(b->chosen_by, sizeof b->chosen_by,
             "OPENBLAS_CORETYPE=%.31s set by tpx-train: %.31s chose %.31s", set,
             b->name, from);
  else
    snprintf(b->chosen_by, sizeof b->chosen_by, "OPENBLAS_CORETYPE=%.64s", set);
  plain(b->name), plain(b->version), plain(b->kernel), plain(b->chosen_by);
}

void tr_blas_info_line(const tr_blas_info *b, char *buf, size_t n) {
  snprintf(buf, n, "blas: %s %s, kernel %s (%s), %d thread%s per rank", b->name,
           b->version, b->kernel, b->chosen_by, b->threads,
           b->threads == 1 ? "" : "s");
}
