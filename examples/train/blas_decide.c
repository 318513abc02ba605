/* blas_decide.c — whether the BLAS kernel is a fallback on this CPU (see
 * blas_kernel.h): the CPU's instruction-set tier (cpuid, or a spec for
 * tests), each OpenBLAS x86 kernel's tier, and the decision. No BLAS
 * here: the unit test links this file alone. */
#include "blas_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

const char *tr_isa_name(int isa) {
  switch (isa) {
  case TR_ISA_AVX512: return "AVX-512";
  case TR_ISA_AVX2: return "AVX2";
  case TR_ISA_AVX: return "AVX";
  case TR_ISA_SSE: return "SSE";
  default: return "an unknown instruction set";
  }
}

/* OpenBLAS's x86 core names (driver/others/dynamic.c's corename[] of
 * 0.3.21, and the newer ones) with the newest instruction set each
 * kernel uses. */
static const struct {
  const char *name;
  int isa;
} cores[] = {
    {"Katmai", TR_ISA_SSE},        {"Coppermine", TR_ISA_SSE},
    {"Northwood", TR_ISA_SSE},     {"Prescott", TR_ISA_SSE},
    {"Banias", TR_ISA_SSE},        {"Atom", TR_ISA_SSE},
    {"Core2", TR_ISA_SSE},         {"Penryn", TR_ISA_SSE},
    {"Dunnington", TR_ISA_SSE},    {"Nehalem", TR_ISA_SSE},
    {"Athlon", TR_ISA_SSE},        {"Opteron", TR_ISA_SSE},
    {"Opteron_SSE3", TR_ISA_SSE},  {"Barcelona", TR_ISA_SSE},
    {"Nano", TR_ISA_SSE},          {"Bobcat", TR_ISA_SSE},
    {"Sandybridge", TR_ISA_AVX},   {"Bulldozer", TR_ISA_AVX},
    {"Piledriver", TR_ISA_AVX},    {"Steamroller", TR_ISA_AVX},
    {"Excavator", TR_ISA_AVX2},    {"Haswell", TR_ISA_AVX2},
    {"Zen", TR_ISA_AVX2},          {"SkylakeX", TR_ISA_AVX512},
    {"Cooperlake", TR_ISA_AVX512}, {"SapphireRapids", TR_ISA_AVX512},
};

int tr_blas_core_isa(const char *core) {
  if (!core)
    return TR_ISA_UNKNOWN;
  for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
    if (!strcasecmp(core, cores[i].name))
      return cores[i].isa;
  return TR_ISA_UNKNOWN;
}

const char *tr_blas_better_core(const tr_cpu *cpu, const char *core) {
  int have = tr_blas_core_isa(core);
  if (have == TR_ISA_UNKNOWN || cpu->isa <= have)
    return NULL;
  int amd = !strcmp(cpu->vendor, "amd") || !strcmp(cpu->vendor, "hygon");
  switch (cpu->isa) {
  case TR_ISA_AVX512: return "SkylakeX";
  case TR_ISA_AVX2: return amd ? "Zen" : "Haswell";
  case TR_ISA_AVX: return amd ? "Bulldozer" : "Sandybridge";
  default: return NULL;
  }
}

/* the tier of a set of flags: AVX-512 needs F, BW, VL and DQ (SkylakeX's
 * kernels use them all), AVX2 needs FMA too */
static int isa_of(int avx, int avx2, int fma, int avx512) {
  if (avx && avx2 && fma && avx512)
    return TR_ISA_AVX512;
  if (avx && avx2 && fma)
    return TR_ISA_AVX2;
  return avx ? TR_ISA_AVX : TR_ISA_SSE;
}

int tr_cpu_parse(const char *spec, tr_cpu *cpu) {
  char flags[512];
  memset(cpu, 0, sizeof *cpu);
  flags[0] = 0;
  int n = sscanf(spec, "%15s %d %d %511s", cpu->vendor, &cpu->family,
                 &cpu->model, flags);
  if (n < 3)
    return -1;
  int avx = 0, avx2 = 0, fma = 0, f512 = 0;
  char *save = NULL;
  for (char *t = strtok_r(flags, ",", &save); t;
       t = strtok_r(NULL, ",", &save)) {
    avx |= !strcmp(t, "avx");
    avx2 |= !strcmp(t, "avx2");
    fma |= !strcmp(t, "fma");
    f512 |= !strcmp(t, "avx512f")    ? 1
            : !strcmp(t, "avx512bw") ? 2
            : !strcmp(t, "avx512vl") ? 4
            : !strcmp(t, "avx512dq") ? 8
                                     : 0;
  }
  cpu->isa = isa_of(avx, avx2, fma, f512 == 15);
  return 0;
}

#if defined(__x86_64__) || defined(__i386__)
static unsigned long long xcr0(void) {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((unsigned long long)hi << 32) | lo;
}

int tr_cpu_detect(tr_cpu *cpu) {
  unsigned a, b, c, d;
  memset(cpu, 0, sizeof *cpu);
  if (!__get_cpuid(0, &a, &b, &c, &d))
    return -1;
  unsigned max = a;
  char v[13];
  memcpy(v, &b, 4), memcpy(v + 4, &d, 4), memcpy(v + 8, &c, 4), v[12] = 0;
  snprintf(cpu->vendor, sizeof cpu->vendor, "%s",
           !strcmp(v, "GenuineIntel")   ? "intel"
           : !strcmp(v, "AuthenticAMD") ? "amd"
           : !strcmp(v, "HygonGenuine") ? "hygon"
                                        : "other");
  __get_cpuid(1, &a, &b, &c, &d);
  int fam = (int)((a >> 8) & 0xf), mod = (int)((a >> 4) & 0xf);
  if (fam == 0xf)
    fam += (int)((a >> 20) & 0xff);
  if (fam == 6 || fam >= 0xf)
    mod |= (int)((a >> 16) & 0xf) << 4;
  cpu->family = fam, cpu->model = mod;
  int osx = (c >> 27) & 1, avx = 0, fma = (c >> 12) & 1, avx2 = 0, f512 = 0;
  unsigned long long x = osx ? xcr0() : 0;
  /* the OS saves the YMM (and for AVX-512 the opmask and ZMM) state */
  avx = ((c >> 28) & 1) && (x & 6) == 6;
  if (max >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    avx2 = (b >> 5) & 1;
    f512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) &&
           ((b >> 31) & 1) && (x & 0xe6) == 0xe6;
  }
  cpu->isa = isa_of(avx, avx2, fma, f512);
  return 0;
}
#else
int tr_cpu_detect(tr_cpu *cpu) {
  memset(cpu, 0, sizeof *cpu);
  return -1;
}
#endif
