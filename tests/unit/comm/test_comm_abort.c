/* test_comm_abort.c — a rank that fails or hangs never leaves its peers
 * waiting (local backend): a rank whose function returns an error, one that
 * returns without joining, one that arrives later than the collective
 * timeout, and one whose temporary allocation fails inside a collective
 * (chunked all-gather / reduce-scatter, in-place all-to-all). Every peer
 * returns an error naming the collective, the mesh dim and the rank at
 * fault; tpx_local_run returns. Without the abort path these cases hang
 * (Check's timeout fails them). A rank that hangs in its own code (never
 * reaches a collective) does not hold up tpx_local_run past the timeout:
 * it is left running, detached. Also the timeout's configuration:
 * TPX_COMM_TIMEOUT (a value it cannot parse is refused),
 * tpx_local_options.timeout_s, tpx_comm_set_timeout. */
#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/local_test.h"
#include "tpx/comm.h"

#define MAXR 8

/* What each rank returned. */
typedef struct ranks_out {
  tpx_status st[MAXR];
  char msg[MAXR][TPX_ERROR_MESSAGE_SIZE];
  double seconds[MAXR]; /* time spent in the rank's function */
  const tpx_mesh *mesh;
  int which;                 /* the case of a loop test */
  atomic_int recorded[MAXR]; /* 1 once the rank called record() */
} ranks_out;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static tpx_status record(ranks_out *o, int r, double t0, tpx_status st,
                         const tpx_error *e) {
  o->st[r] = st;
  snprintf(o->msg[r], sizeof o->msg[r], "%s", e->message);
  o->seconds[r] = now_s() - t0;
  atomic_store(&o->recorded[r], 1);
  return st;
}

/* A rank tpx_local_run left running (detached) may still write to `o`:
 * wait until it recorded (at most `limit` s) before `o` goes away. */
static void wait_recorded(ranks_out *o, int r, double limit) {
  double t0 = now_s();
  while (!atomic_load(&o->recorded[r]) && now_s() - t0 < limit) sleep_s(0.01);
  ck_assert_msg(atomic_load(&o->recorded[r]), "rank %d never returned", r);
}

static tpx_status run_opts(int n, double timeout_s, unsigned fail_ranks,
                           tpx_local_fn fn, ranks_out *o, tpx_error *err) {
  tpx__local_test_options t = {TPX_LOCAL_OPTIONS_INIT, 0, 0, fail_ranks};
  t.base.timeout_s = timeout_s;
  return tpx__local_run_test(n, &t, fn, o, err);
}

/* ---- a rank that returns an error ---------------------------------------- */

static tpx_status body_rank2_fails(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w);
  double t0 = now_s();
  if (r == 2) {
    sleep_s(0.05); /* the others are waiting by now */
    return tpx_error_set(err, TPX_IO, "cannot read the batch");
  }
  float x = 1;
  tpx_status st =
      tpx_comm_all_reduce(w, &x, &x, 1, TPX_DTYPE_F32, TPX_REDUCE_SUM, err);
  return record(o, r, t0, st, err);
}

START_TEST(t_failed_rank_releases_peers) {
  ranks_out o;
  memset(&o, 0, sizeof o);
  tpx_error e = {0};
  tpx_status st = tpx_local_run(4, body_rank2_fails, &o, &e);
  ck_assert_int_ne(st, TPX_OK);
  for (int r = 0; r < 4; r++) {
    if (r == 2)
      continue;
    ck_assert_int_eq(o.st[r], TPX_COMM);
    ck_assert_msg(strstr(o.msg[r], "all_reduce over the world") &&
                      strstr(o.msg[r], "rank 2 failed: cannot read the "
                                       "batch"),
                  "rank %d: %s", r, o.msg[r]);
  }
  /* tpx_local_run reports the lowest failing rank. */
  ck_assert_msg(strstr(e.message, "local rank 0: ") == e.message, "%s",
                e.message);
}
END_TEST

/* A world that aborted stays aborted: the next collective fails at once. */
static tpx_status body_after_abort(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w);
  double t0 = now_s();
  if (r == 1)
    return tpx_error_set(err, TPX_IO, "rank one gives up");
  float x = 1;
  tpx_error e1 = {0};
  tpx_status st =
      tpx_comm_all_reduce(w, &x, &x, 1, TPX_DTYPE_F32, TPX_REDUCE_SUM, &e1);
  ck_assert_int_eq(st, TPX_COMM);
  st = tpx_comm_barrier(w, err);
  return record(o, r, t0, st, err);
}

START_TEST(t_aborted_world_stays_aborted) {
  ranks_out o;
  memset(&o, 0, sizeof o);
  ck_assert_int_ne(tpx_local_run(3, body_after_abort, &o, NULL), TPX_OK);
  for (int r = 0; r < 3; r += 2) {
    ck_assert_int_eq(o.st[r], TPX_COMM);
    ck_assert_msg(strstr(o.msg[r], "local barrier over the world: rank 1 "
                                   "failed: rank one gives up"),
                  "%s", o.msg[r]);
  }
}
END_TEST

/* ---- a rank that returns without joining ----------------------------------
 */

static tpx_status body_rank1_leaves(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w);
  double t0 = now_s();
  if (r == 1)
    return TPX_OK; /* forgets the all-gather */
  float x[3] = {1, 2, 3};
  tpx_status st = tpx_comm_all_gather(w, x, x, 1, TPX_DTYPE_F32, err);
  return record(o, r, t0, st, err);
}

START_TEST(t_rank_returns_without_joining) {
  ranks_out o;
  memset(&o, 0, sizeof o);
  ck_assert_int_ne(tpx_local_run(3, body_rank1_leaves, &o, NULL), TPX_OK);
  for (int r = 0; r < 3; r += 2) {
    ck_assert_int_eq(o.st[r], TPX_COMM);
    ck_assert_msg(strstr(o.msg[r], "rank 1 returned from its function "
                                   "without joining all_gather over the "
                                   "world"),
                  "rank %d: %s", r, o.msg[r]);
  }
}
END_TEST

/* ---- the timeout -----------------------------------------------------------
 */

/* Mesh (dp 2, tp 2): tp groups {0, 1} and {2, 3}. Rank 3 arrives at its tp
 * all-reduce 3 s late; the timeout is 0.3 s. */
static tpx_status body_rank3_late(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w);
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(w, o->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  ck_assert(fabs(tpx_comm_timeout(tpx_mesh_comm_dim(mc, 1)) - 0.3) < 1e-12);
  double t0 = now_s();
  if (r == 3)
    sleep_s(3.0);
  float x = 1;
  st = tpx_comm_all_reduce(tpx_mesh_comm_dim(mc, 1), &x, &x, 1, TPX_DTYPE_F32,
                           TPX_REDUCE_SUM, err);
  /* Ranks 0 and 1 reach the world barrier after rank 2 timed out, so the
   * cause they report is rank 3's, not their own wait for rank 2. (Not by
   * sleeping past the timeout: after the abort, tpx_local_run would count
   * them hung too.) */
  while (st == TPX_OK && r < 2 && !atomic_load(&o->recorded[2])) sleep_s(0.01);
  if (st == TPX_OK)
    st = tpx_comm_barrier(w, err);
  tpx_mesh_comm_destroy(mc);
  return record(o, r, t0, st, err);
}

START_TEST(t_timeout_names_rank_and_dim) {
  const char *names[] = {"dp", "tp"};
  int64_t sizes[] = {2, 2};
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, &mesh, NULL), TPX_OK);
  ranks_out o;
  memset(&o, 0, sizeof o);
  o.mesh = mesh;
  tpx_error e = {0};
  double t0 = now_s();
  ck_assert_int_eq(run_opts(4, 0.3, 0, body_rank3_late, &o, &e), TPX_TIMEOUT);
  /* Rank 3, asleep for 3 s past a timeout of 0.3 s, counts as hung:
   * tpx_local_run returned without it. */
  ck_assert_msg(now_s() - t0 < 2.9, "tpx_local_run took %.2f s", now_s() - t0);
  ck_assert_msg(strstr(e.message, "local rank") == e.message &&
                    strstr(e.message, "3 did not return"),
                "%s", e.message);
  /* (a rank stalled past the timeout on a loaded machine would be left
   * running too: wait for every one before reading `o`) */
  for (int r = 0; r < 4; r++) wait_recorded(&o, r, 20);
  /* Rank 2 waited for rank 3 in the tp all-reduce and timed out. */
  ck_assert_int_eq(o.st[2], TPX_TIMEOUT);
  ck_assert_msg(strstr(o.msg[2], "local all_reduce over mesh dim 'tp': "
                                 "rank 3 did not arrive at all_reduce over "
                                 "mesh dim 'tp' within 0.3 s"),
                "%s", o.msg[2]);
  ck_assert_msg(o.seconds[2] < 2.9, "rank 2 waited %.2f s", o.seconds[2]);
  /* Ranks 0 and 1 finished their tp all-reduce, then their world barrier
   * failed with the same cause; rank 3 found the world aborted. */
  for (int r = 0; r < 4; r++) {
    if (r == 2)
      continue;
    ck_assert_int_eq(o.st[r], TPX_TIMEOUT);
    ck_assert_msg(strstr(o.msg[r], "rank 3 did not arrive at all_reduce "
                                   "over mesh dim 'tp' within 0.3 s"),
                  "rank %d: %s", r, o.msg[r]);
  }
  tpx_mesh_destroy(mesh);
}
END_TEST

/* TPX_COMM_TIMEOUT sets the default (forked test: the environment stays
 * with this child). */
static tpx_status body_env(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w);
  ck_assert(fabs(tpx_comm_timeout(w) - 0.25) < 1e-12);
  double t0 = now_s();
  if (r == 0)
    sleep_s(1.5);
  tpx_status st = tpx_comm_barrier(w, err);
  return record(o, r, t0, st, err);
}

static tpx_status body_set_timeout(tpx_comm *w, void *arg, tpx_error *err);

START_TEST(t_env_timeout) {
  setenv("TPX_COMM_TIMEOUT", "0.25", 1);
  ck_assert(fabs(tpx_comm_timeout(NULL) - 0.25) < 1e-12);
  ranks_out o;
  memset(&o, 0, sizeof o);
  ck_assert_int_ne(tpx_local_run(2, body_env, &o, NULL), TPX_OK);
  /* rank 0 slept past the timeout: left running */
  for (int r = 0; r < 2; r++) wait_recorded(&o, r, 20);
  ck_assert_int_eq(o.st[1], TPX_TIMEOUT);
  ck_assert_msg(strstr(o.msg[1], "rank 0 did not arrive at barrier over the "
                                 "world within 0.25 s"),
                "%s", o.msg[1]);
  unsetenv("TPX_COMM_TIMEOUT");
  ck_assert(tpx_comm_timeout(NULL) == 600.0);
  setenv("TPX_COMM_TIMEOUT", "", 1); /* empty: unset */
  ck_assert_int_eq(tpx_local_run(2, body_set_timeout, NULL, NULL), TPX_OK);
}
END_TEST

/* A TPX_COMM_TIMEOUT that is not a number of seconds in (0, 1e9] is
 * refused where the world is created, naming the variable and the value
 * (it used to mean the 600 s default, silently). */
static const char *const bad_timeouts[] = {
    "5s", "abc", "-1", "0", "1e999", "1e10", "inf", "nan", " ", "5 ", "0x"};

static tpx_status body_never(tpx_comm *w, void *arg, tpx_error *err) {
  (void)w, (void)arg;
  return tpx_error_set(err, TPX_INTERNAL, "a rank ran");
}

START_TEST(t_env_timeout_refused) {
  const char *v = bad_timeouts[_i];
  setenv("TPX_COMM_TIMEOUT", v, 1);
  tpx_error e = {0};
  ck_assert_int_eq(tpx_local_run(2, body_never, NULL, &e),
                   TPX_INVALID_ARGUMENT);
  char want[64];
  snprintf(want, sizeof want, "TPX_COMM_TIMEOUT='%s' is not a", v);
  ck_assert_msg(strstr(e.message, want) == e.message, "%s", e.message);
  ck_assert_msg(strstr(e.message, "number of seconds"), "%s", e.message);
  /* The getter of no comm keeps the default. */
  ck_assert(tpx_comm_timeout(NULL) == 600.0);
  /* An explicit timeout does not read the variable. */
  tpx_local_options lo = TPX_LOCAL_OPTIONS_INIT;
  lo.timeout_s = 2;
  ck_assert_int_eq(tpx_local_run_opts(2, &lo, body_set_timeout, NULL, NULL),
                   TPX_OK);
}
END_TEST

/* The largest accepted values, and the forms strtod reads. */
START_TEST(t_env_timeout_accepted) {
  const char *ok[] = {"1e9", "5", "0.5", "  7", "1E2"};
  const double want[] = {1e9, 5, 0.5, 7, 100};
  for (int i = 0; i < 5; i++) {
    setenv("TPX_COMM_TIMEOUT", ok[i], 1);
    ck_assert_msg(tpx_comm_timeout(NULL) == want[i], "%s", ok[i]);
    ck_assert_int_eq(tpx_local_run(1, body_set_timeout, NULL, NULL), TPX_OK);
  }
}
END_TEST

/* ---- a rank that hangs in its own code ------------------------------------
 */

/* Rank 2 blocks on a pipe (its own code, not a collective) while ranks 0
 * and 1 wait for it at a barrier with a 0.3 s timeout. tpx_local_run
 * returns the timeout naming rank 2 within about the timeout, leaving
 * rank 2's thread running; it used to wait for that thread (forever here,
 * so Check's timeout failed the case). */
static int hang_pipe[2];

static tpx_status body_rank2_hangs(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w);
  double t0 = now_s();
  if (r == 2) {
    char b;
    ck_assert_int_eq(read(hang_pipe[0], &b, 1), 1);
  }
  tpx_status st = tpx_comm_barrier(w, err);
  return record(o, r, t0, st, err);
}

START_TEST(t_hung_rank_left_running) {
  ck_assert_int_eq(pipe(hang_pipe), 0);
  ranks_out o;
  memset(&o, 0, sizeof o);
  tpx_error e = {0};
  double t0 = now_s();
  ck_assert_int_eq(run_opts(3, 0.3, 0, body_rank2_hangs, &o, &e), TPX_TIMEOUT);
  double took = now_s() - t0;
  ck_assert_msg(took < 10, "tpx_local_run took %.2f s", took);
  ck_assert_msg(strstr(e.message, "local rank 2 did not return: the world "
                                  "was aborted") == e.message,
                "%s", e.message);
  ck_assert_msg(strstr(e.message, "left running, detached"), "%s", e.message);
  ck_assert_msg(strstr(e.message, "; local rank 0: local barrier over the "
                                  "world: rank 2 did not arrive at barrier "
                                  "over the world within 0.3 s"),
                "%s", e.message);
  ck_assert(!atomic_load(&o.recorded[2]));
  for (int r = 0; r < 2; r++) {
    wait_recorded(&o, r, 20);
    ck_assert_int_eq(o.st[r], TPX_TIMEOUT);
  }
  /* Release it: it finds the world aborted and cleans up after itself. */
  ck_assert_int_eq(write(hang_pipe[1], "x", 1), 1);
  wait_recorded(&o, 2, 20);
  ck_assert_int_eq(o.st[2], TPX_TIMEOUT);
}
END_TEST

/* A rank busy in its own code for less than the timeout after the abort
 * is waited for, not left behind. */
static tpx_status body_rank1_busy(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w);
  double t0 = now_s();
  if (r == 0)
    return tpx_error_set(err, TPX_IO, "rank zero gives up");
  sleep_s(0.5);
  return record(o, r, t0, TPX_OK, err);
}

START_TEST(t_busy_rank_waited_for) {
  ranks_out o;
  memset(&o, 0, sizeof o);
  tpx_error e = {0};
  ck_assert_int_eq(run_opts(2, 20, 0, body_rank1_busy, &o, &e), TPX_IO);
  ck_assert(atomic_load(&o.recorded[1]));
  ck_assert_msg(strstr(e.message, "local rank 0: rank zero gives up") ==
                    e.message,
                "%s", e.message);
}
END_TEST

static tpx_status body_set_timeout(tpx_comm *w, void *arg, tpx_error *err) {
  (void)arg;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_comm_set_timeout(w, 0, &e), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_comm_set_timeout(w, NAN, NULL), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_comm_set_timeout(w, -1, NULL), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_comm_set_timeout(w, 12.5, err), TPX_OK);
  ck_assert(tpx_comm_timeout(w) == 12.5);
  return tpx_comm_barrier(w, err);
}

START_TEST(t_set_timeout) {
  tpx_error e = {0};
  ck_assert_int_eq(tpx_local_run(2, body_set_timeout, NULL, &e), TPX_OK);
  ck_assert_int_eq(tpx_comm_set_timeout(NULL, 1, NULL), TPX_INVALID_ARGUMENT);
  tpx_local_options lo = TPX_LOCAL_OPTIONS_INIT;
  lo.timeout_s = -1;
  ck_assert_int_eq(tpx_local_run_opts(2, &lo, body_set_timeout, NULL, &e),
                   TPX_INVALID_ARGUMENT);
}
END_TEST

/* ---- a temporary that fails inside a collective ----------------------------
 */

/* Loop index: which collective. Rank 1's allocations fail; it does not
 * return at once (it sleeps 3 s), so only the collective's own abort can
 * release the others in time. */
static tpx_status body_alloc_fails(tpx_comm *w, void *arg, tpx_error *err) {
  ranks_out *o = arg;
  int r = tpx_comm_rank(w), which = o->which;
  double t0 = now_s();
  float send[8 * 3] = {0}, recv[8 * 3];
  tpx_status st;
  if (which == 0) /* 7 over 3 ranks: uneven, padded through a temporary */
    st = tpx_comm_all_gather_chunked(w, send, recv, 7, TPX_DTYPE_F32, err);
  else if (which == 1)
    st = tpx_comm_reduce_scatter_chunked(w, send, recv, 7, TPX_DTYPE_F32,
                                         TPX_REDUCE_SUM, err);
  else /* in place: the send copy is a temporary */
    st = tpx_comm_all_to_all(w, send, send, 2, TPX_DTYPE_F32, err);
  if (r == 1)
    sleep_s(3.0);
  return record(o, r, t0, st, err);
}

static const char *const alloc_colls[] = {
    "all_gather_chunked", "reduce_scatter_chunked", "all_to_all"};

START_TEST(t_alloc_failure_releases_peers) {
  ranks_out o;
  memset(&o, 0, sizeof o);
  o.which = _i;
  ck_assert_int_ne(run_opts(3, 0, 1u << 1, body_alloc_fails, &o, NULL), TPX_OK);
  ck_assert_int_eq(o.st[1], TPX_NO_MEMORY);
  for (int r = 0; r < 3; r += 2) {
    ck_assert_int_eq(o.st[r], TPX_COMM);
    char want[160];
    snprintf(want, sizeof want,
             "rank 1 failed: %s failed on this rank "
             "before the collective: injected allocation "
             "failure",
             alloc_colls[_i]);
    ck_assert_msg(strstr(o.msg[r], want), "rank %d: %s", r, o.msg[r]);
    ck_assert_msg(o.seconds[r] < 2.5, "rank %d waited %.2f s", r, o.seconds[r]);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("comm-abort");
  TCase *tc = tcase_create("abort");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, t_failed_rank_releases_peers);
  tcase_add_test(tc, t_aborted_world_stays_aborted);
  tcase_add_test(tc, t_rank_returns_without_joining);
  tcase_add_test(tc, t_timeout_names_rank_and_dim);
  tcase_add_test(tc, t_env_timeout);
  tcase_add_loop_test(tc, t_env_timeout_refused, 0,
                      (int)(sizeof bad_timeouts / sizeof *bad_timeouts));
  tcase_add_test(tc, t_env_timeout_accepted);
  tcase_add_test(tc, t_hung_rank_left_running);
  tcase_add_test(tc, t_busy_rank_waited_for);
  tcase_add_test(tc, t_set_timeout);
  tcase_add_loop_test(tc, t_alloc_failure_releases_peers, 0, 3);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
