/* test_tp_mpi.c — the TP runtime cases (rt_cases.h) on the `mpi` backend,
 * one rank per process: meshes (1, 1, n) and, for even n, (1, 2, n/2) over
 * the world of n; the llama plugin's sp0 / sp1 plans and the style zoo.
 * Meson runs it as a singleton and under `mpirun -np 4`.
 *
 * No fork after MPI_Init (CK_NOFORK); every test agrees on its verdict over
 * the world before asserting, so all ranks run the same collectives. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mpi_verdict.h"

#include "rt_fixture.h"

static tpx_comm *world;

static void run(tpx_local_fn fn, rt_arg *a, const char *name) {
  mpi_run_agreed(world, fn, a, name);
}

/* plan: 0 zoo, 1 llama sp0, 2 llama sp1, 3 SP norm into colwise */
static void with_sharding(int plan, int64_t dp, int64_t vocab,
                          void (*body)(rt_arg *, const char *),
                          const char *label) {
  int n = tpx_comm_size(world);
  if (n % dp)
    return;
  int64_t tp = n / dp;
  tpx_model *m = rt_model(vocab);
  tpx_plan *p = plan == 0   ? rt_plan_json(rt_zoo_plan)
                : plan == 3 ? rt_plan_json(rt_sp_norm_plan)
                            : rt_llama_plan(m, plan == 2, tp);
  rt_world w = rt_world_of(m, p, dp, tp);
  tpx_sharding *sh = w.sh;
  rt_arg a = {sh, 7, 10, TPX_DTYPE_F32, vocab, 9, 0};
  body(&a, label);
  rt_world_free(&w);
}

static void all_cases(rt_arg *a, const char *label) {
  char l[128];
  snprintf(l, sizeof l, "%s: transitions", label);
  run(case_transitions, a, l);
  snprintf(l, sizeof l, "%s: embedding", label);
  run(case_embedding, a, l);
  snprintf(l, sizeof l, "%s: loss", label);
  run(case_loss, a, l);
}

static void block_case(rt_arg *a, const char *label) {
  char l[128];
  snprintf(l, sizeof l, "%s: mlp block", label);
  run(case_mlp_block, a, l);
  snprintf(l, sizeof l, "%s: head chain", label);
  run(case_head_chain, a, l);
}

START_TEST(t_zoo) {
  with_sharding(0, 1, 1000, all_cases, "zoo");
  with_sharding(0, 2, 1000, all_cases, "zoo dp 2");
}
END_TEST

START_TEST(t_llama) {
  with_sharding(1, 1, 1000, all_cases, "llama sp0");
  with_sharding(2, 1, 1000, all_cases, "llama sp1");
  with_sharding(2, 2, 10, all_cases, "llama sp1 dp 2, vocab 10");
}
END_TEST

START_TEST(t_block) {
  for (int plan = 1; plan <= 3; plan++) {
    with_sharding(plan, 1, 1000, block_case, "plan");
    with_sharding(plan, 2, 1000, block_case, "plan, dp 2");
  }
}
END_TEST

int main(void) {
  tpx_error e = {0};
  if (tpx_comm_create_mpi(NULL, &world, &e) != TPX_OK) {
    fprintf(stderr, "test_tp_mpi: %s\n", e.message);
    return EXIT_FAILURE;
  }
  Suite *s = suite_create("runtime-tp-mpi");
  TCase *tc = tcase_create("mpi");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, t_zoo);
  tcase_add_test(tc, t_llama);
  tcase_add_test(tc, t_block);
  suite_add_tcase(s, tc);
  return mpi_run_suite(s, world);
}
