/* test_blas_kernel.c — tpx-train's BLAS kernel decision (blas_decide.c):
 * CPUs (vendor, family, model, flags) x OpenBLAS kernels -> a fallback or
 * not, and the OPENBLAS_CORETYPE that fixes it (issue 30). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../blas_kernel.h"

#define AVX512 "avx,avx2,fma,avx512f,avx512bw,avx512vl,avx512dq"

/* the CPU, the kernel OpenBLAS chose, the CORETYPE wanted (NULL: fine) */
static const struct {
  const char *cpu, *core, *want;
} cases[] = {
    /* the Xeon: family 6 model 207, unknown to 0.3.21 */
    {"intel 6 207 " AVX512 ",avx512_bf16,amx_tile", "Prescott", "SkylakeX"},
    {"intel 6 207 " AVX512, "SkylakeX", NULL},
    {"intel 6 207 " AVX512, "Cooperlake", NULL},
    {"intel 6 207 " AVX512, "Haswell", "SkylakeX"},
    {"intel 6 207 " AVX512, "Sandybridge", "SkylakeX"},
    {"intel 6 207 " AVX512, "nehalem", "SkylakeX"}, /* any case */
    /* AVX-512 F alone (Knights Landing-like) is not SkylakeX's set */
    {"intel 6 87 avx,avx2,fma,avx512f", "Haswell", NULL},
    {"intel 6 87 avx,avx2,fma,avx512f", "Prescott", "Haswell"},
    /* AVX2 */
    {"intel 6 60 avx,avx2,fma", "Prescott", "Haswell"},
    {"intel 6 60 avx,avx2,fma", "Core2", "Haswell"},
    {"intel 6 60 avx,avx2,fma", "Sandybridge", "Haswell"},
    {"intel 6 60 avx,avx2,fma", "Haswell", NULL},
    {"intel 6 60 avx,avx2", "Sandybridge", NULL}, /* no FMA: not Haswell */
    {"amd 23 49 avx,avx2,fma", "Prescott", "Zen"},
    {"amd 23 49 avx,avx2,fma", "Zen", NULL},
    {"hygon 24 0 avx,avx2,fma", "Barcelona", "Zen"},
    {"amd 21 96 avx,avx2,fma", "Excavator", NULL},
    {"amd 25 17 " AVX512, "Zen", "SkylakeX"},
    {"amd 25 17 " AVX512, "Cooperlake", NULL},
    /* AVX */
    {"intel 6 42 avx", "Prescott", "Sandybridge"},
    {"intel 6 42 avx", "Sandybridge", NULL},
    {"amd 21 1 avx", "Opteron", "Bulldozer"},
    /* SSE only: nothing better */
    {"intel 6 23 sse4_1", "Prescott", NULL},
    {"intel 6 23 sse4_1", "Core2", NULL},
    /* a kernel it does not know (another build, another architecture) */
    {"intel 6 207 " AVX512, "armv8", NULL},
    {"intel 6 207 " AVX512, "", NULL},
};

START_TEST(decides) {
  tr_cpu cpu;
  ck_assert_int_eq(tr_cpu_parse(cases[_i].cpu, &cpu), 0);
  const char *got = tr_blas_better_core(&cpu, cases[_i].core);
  if (!cases[_i].want)
    ck_assert_msg(!got, "%s on %s: %s, wanted none", cases[_i].core,
                  cases[_i].cpu, got);
  else
    ck_assert_msg(got && !strcmp(got, cases[_i].want),
                  "%s on %s: %s, wanted %s", cases[_i].core, cases[_i].cpu,
                  got ? got : "none", cases[_i].want);
}
END_TEST

START_TEST(parses) {
  tr_cpu c;
  ck_assert_int_eq(tr_cpu_parse("intel 6 207 " AVX512, &c), 0);
  ck_assert_str_eq(c.vendor, "intel");
  ck_assert_int_eq(c.family, 6);
  ck_assert_int_eq(c.model, 207);
  ck_assert_int_eq(c.isa, TR_ISA_AVX512);
  ck_assert_str_eq(tr_isa_name(c.isa), "AVX-512");
  ck_assert_int_eq(tr_cpu_parse("intel 6", &c), -1);
  ck_assert_int_eq(tr_cpu_parse("amd 23 49", &c), 0); /* no flags: SSE */
  ck_assert_int_eq(c.isa, TR_ISA_SSE);
  ck_assert_int_eq(tr_blas_core_isa("Prescott"), TR_ISA_SSE);
  ck_assert_int_eq(tr_blas_core_isa("SAPPHIRERAPIDS"), TR_ISA_AVX512);
  ck_assert_int_eq(tr_blas_core_isa(NULL), TR_ISA_UNKNOWN);
}
END_TEST

/* this machine: cpuid answers on x86, and the tier is a known one */
START_TEST(detects) {
  tr_cpu c;
#if defined(__x86_64__) || defined(__i386__)
  ck_assert_int_eq(tr_cpu_detect(&c), 0);
  ck_assert_int_ge(c.isa, TR_ISA_SSE);
  ck_assert_int_le(c.isa, TR_ISA_AVX512);
  ck_assert_int_gt(c.family, 0);
#else
  ck_assert_int_eq(tr_cpu_detect(&c), -1);
#endif
}
END_TEST

int main(void) {
  Suite *s = suite_create("blas_kernel");
  TCase *tc = tcase_create("decide");
  tcase_add_loop_test(tc, decides, 0, (int)(sizeof cases / sizeof *cases));
  tcase_add_test(tc, parses);
  tcase_add_test(tc, detects);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int f = srunner_ntests_failed(r);
  srunner_free(r);
  return f ? EXIT_FAILURE : EXIT_SUCCESS;
}
