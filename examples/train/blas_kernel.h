/* blas_kernel.h — tpx-train's check of the BLAS kernel (issue 30).
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels when it loads, from the CPU's
 * family and model. A CPU newer than the OpenBLAS (Debian 12's 0.3.21 on
 * an Intel family 6 model 207, say) gets its generic fallback, Prescott:
 * sgemm at a fifth of the speed, and nothing says so. tpx-train compares
 * the kernel OpenBLAS chose (openblas_get_corename()) with the CPU's
 * features (cpuid); when the kernel is of an older instruction set than
 * the CPU has, it says so on stderr and runs itself again, once, with
 * OPENBLAS_CORETYPE naming the right kernel (OpenBLAS reads it only when
 * it loads, before main). An OPENBLAS_CORETYPE already set, the user's or
 * its own, is never overridden; TPX_BLAS_FIX=0 turns the re-run off (the
 * warning stays).
 *
 * For tests: TPX_TEST_FAKE_COREDETECT="CORE" pretends OpenBLAS chose CORE;
 * "CORE;VENDOR FAMILY MODEL FLAG,FLAG..." pretends the CPU too (see
 * tr_cpu_parse). Only the check sees them; the kernel OpenBLAS runs is
 * real. */
#ifndef TR_BLAS_KERNEL_H
#define TR_BLAS_KERNEL_H

#include <stddef.h>

/* instruction-set tiers, in order; a kernel's tier is the newest set it
 * uses */
enum {
  TR_ISA_UNKNOWN = -1,
  TR_ISA_SSE = 0, /* Prescott, Core2, Nehalem, Opteron, ... */
  TR_ISA_AVX,     /* Sandybridge, Bulldozer */
  TR_ISA_AVX2,    /* Haswell (with FMA), Zen */
  TR_ISA_AVX512   /* SkylakeX (F, BW, VL, DQ), Cooperlake, ... */
};

typedef struct tr_cpu {
  char vendor[16]; /* "intel", "amd" or another word */
  int family, model;
  int isa; /* the newest tier the CPU (and the OS) supports */
} tr_cpu;

/* Parses "VENDOR FAMILY MODEL FLAGS" (FLAGS: /proc/cpuinfo's names joined
 * by commas: avx, avx2, fma, avx512f, avx512bw, avx512vl, avx512dq; others
 * ignored), e.g. "intel 6 207 avx,avx2,fma,avx512f,avx512bw,avx512vl,
 * avx512dq". 0 on success, -1 malformed. */
int tr_cpu_parse(const char *spec, tr_cpu *cpu);
/* This CPU by cpuid (and xgetbv: the OS must save the registers); -1 when
 * it is not an x86 or cannot tell. */
int tr_cpu_detect(tr_cpu *cpu);
/* The tier of an OpenBLAS x86 core name (case-insensitive);
 * TR_ISA_UNKNOWN for a name it does not know (another architecture). */
int tr_blas_core_isa(const char *core);
/* The decision: the OPENBLAS_CORETYPE to run with when `core` is a
 * fallback on `cpu` (a known x86 kernel of an older tier than the CPU's),
 * else NULL. The names are ones OpenBLAS 0.3.21 accepts in
 * OPENBLAS_CORETYPE: SkylakeX (not Cooperlake or SapphireRapids, which it
 * only detects), Haswell (Zen on AMD), Sandybridge. */
const char *tr_blas_better_core(const tr_cpu *cpu, const char *core);
/* "AVX-512", "AVX2", "AVX", "SSE". */
const char *tr_isa_name(int isa);

/* At the top of main: the check above, the stderr line (when the launcher
 * says rank 0 or nothing), the re-run (execv of this program with the
 * same arguments). Returns when there is nothing to fix, the fix is off
 * or the re-run failed (said on stderr). */
void tr_blas_check(char **argv);
/* The BLAS for headers: name, version, kernel, threads, and what set the
 * kernel. Fills the fields (static strings or copies into the struct). */
typedef struct tr_blas_info {
  char name[32];       /* "OpenBLAS" */
  char version[32];    /* "0.3.21" */
  char kernel[32];     /* openblas_get_corename() */
  int threads;         /* the threads a rank's products run on */
  char chosen_by[160]; /* "detected", "OPENBLAS_CORETYPE (the user's)",
                         "tpx-train (OpenBLAS chose Prescott)" */
} tr_blas_info;
/* `threads`: the caller's (tpx-train: an OpenMP team per rank with
 * OpenBLAS single-threaded inside, tr_threads) */
void tr_blas_info_get(tr_blas_info *b, int threads);
/* One line for text headers:
 * "blas: OpenBLAS 0.3.21, kernel Haswell (detected), 2 threads per rank" */
void tr_blas_info_line(const tr_blas_info *b, char *buf, size_t n);

#endif
