/* test_log.c — the process-wide logger: handler, threshold from TPX_DEBUG,
 * nothing delivered without a handler, thread safety.
 *
 * Built with core/src/base/log.c compiled in, because tpx__log is hidden in
 * libtpx.so. Check forks each test, so each one reads TPX_DEBUG afresh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log_view.h"
#include "base_test.h"

typedef struct capture {
  pthread_mutex_t mu;
  int count;
  int last_level;
  char last[2048];
} capture;

static void on_log(void *user, int level, const char *message) {
  capture *c = user;
  pthread_mutex_lock(&c->mu);
  c->count++;
  c->last_level = level;
  snprintf(c->last, sizeof c->last, "%s", message);
  pthread_mutex_unlock(&c->mu);
}

START_TEST(test_default_errors_only) {
  unsetenv("TPX_DEBUG");
  ck_assert_int_eq(tpx_log_level(), TPX_LOG_ERROR);
  capture c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  tpx_log_set_handler(on_log, &c);
  tpx__log(TPX_LOG_WARN, "dropped %d", 1);
  tpx__log(TPX_LOG_TRACE, "dropped");
  ck_assert_int_eq(c.count, 0);
  ck_assert(!tpx__log_enabled(TPX_LOG_INFO));
  ck_assert(tpx__log_enabled(TPX_LOG_ERROR));
  tpx__log(TPX_LOG_ERROR, "plugin %s failed: %d", "x.so", 3);
  ck_assert_int_eq(c.count, 1);
  ck_assert_int_eq(c.last_level, TPX_LOG_ERROR);
  ck_assert_str_eq(c.last, "plugin x.so failed: 3");
  tpx_log_set_handler(NULL, NULL);
}
END_TEST

START_TEST(test_no_handler_no_output) {
  setenv("TPX_DEBUG", "trace", 1);
  tpx_log_set_handler(NULL, NULL);
  ck_assert(!tpx__log_enabled(TPX_LOG_ERROR));
  tpx__log(TPX_LOG_ERROR, "nobody hears this"); /* must not crash or print */
}
END_TEST

START_TEST(test_levels_from_env) {
  static const struct {
    const char *value;
    int level;
  } cases[] = {{"warn", TPX_LOG_WARN},   {"info", TPX_LOG_INFO},
               {"trace", TPX_LOG_TRACE}, {"TRACE", TPX_LOG_TRACE},
               {"1", TPX_LOG_INFO},      {"debug", TPX_LOG_INFO},
               {"DEBUG", TPX_LOG_INFO},  {"on", TPX_LOG_INFO},
               {"2", TPX_LOG_TRACE},     {"0", TPX_LOG_ERROR},
               {"off", TPX_LOG_ERROR},   {"error", TPX_LOG_ERROR},
               {"bogus", TPX_LOG_WARN},  {"", TPX_LOG_ERROR}};
  /* The threshold is read once per process: test each value in a child. */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      setenv("TPX_DEBUG", cases[i].value, 1);
      _exit(tpx_log_level() == cases[i].level ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "TPX_DEBUG=%s",
                  cases[i].value);
  }
}
END_TEST

/* TPX_DEBUG=1 and =debug log (they printed nothing); an unknown value is
 * one warning to the first handler installed, naming it, and warnings. */
START_TEST(test_alias_logs) {
  setenv("TPX_DEBUG", "1", 1);
  capture c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  tpx_log_set_handler(on_log, &c);
  ck_assert_int_eq(c.count, 0); /* a known value: nothing to say */
  tpx__log(TPX_LOG_INFO, "loaded %s", "x.so");
  ck_assert_int_eq(c.count, 1);
  ck_assert_str_eq(c.last, "loaded x.so");
  tpx_log_set_handler(NULL, NULL);
}
END_TEST

START_TEST(test_unknown_value_warned_once) {
  setenv("TPX_DEBUG", "verbose", 1);
  capture c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  tpx_log_set_handler(on_log, &c);
  ck_assert_int_eq(c.count, 1);
  ck_assert_int_eq(c.last_level, TPX_LOG_WARN);
  ck_assert_msg(strstr(c.last, "TPX_DEBUG='verbose' is not a log level") &&
                    strstr(c.last, "trace"),
                "%s", c.last);
  tpx__log(TPX_LOG_WARN, "w");
  tpx__log(TPX_LOG_INFO, "dropped");
  ck_assert_int_eq(c.count, 2);
  tpx_log_set_handler(on_log, &c); /* once per process, not per install */
  tpx_log_set_handler(NULL, NULL);
  tpx_log_set_handler(on_log, &c);
  ck_assert_int_eq(c.count, 2);
  tpx_log_set_handler(NULL, NULL);
}
END_TEST

START_TEST(test_read_once) {
  setenv("TPX_DEBUG", "info", 1);
  ck_assert_int_eq(tpx_log_level(), TPX_LOG_INFO);
  setenv("TPX_DEBUG", "trace", 1);
  ck_assert_int_eq(tpx_log_level(), TPX_LOG_INFO);
  capture c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  tpx_log_set_handler(on_log, &c);
  tpx__log(TPX_LOG_INFO, "kept");
  tpx__log(TPX_LOG_TRACE, "dropped");
  ck_assert_int_eq(c.count, 1);
  ck_assert_str_eq(c.last, "kept");
  tpx_log_set_handler(NULL, NULL);
}
END_TEST

START_TEST(test_long_message_truncated) {
  setenv("TPX_DEBUG", "warn", 1);
  capture c = {.mu = PTHREAD_MUTEX_INITIALIZER};
  tpx_log_set_handler(on_log, &c);
  char big[3000];
  memset(big, 'y', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tpx__log(TPX_LOG_WARN, "%s", big);
  ck_assert_int_eq(c.count, 1);
  ck_assert_uint_eq(strlen(c.last), 1023);
  tpx_log_set_handler(NULL, NULL);
}
END_TEST

static capture g_cap = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *spam(void *arg) {
  for (int i = 0; i < 2000; i++) {
    if (arg != NULL && i % 100 == 0)
      tpx_log_set_handler(on_log, &g_cap); /* racing re-installs */
    tpx__log(TPX_LOG_ERROR, "t%d", i);
  }
  return NULL;
}

START_TEST(test_threads) {
  unsetenv("TPX_DEBUG");
  tpx_log_set_handler(on_log, &g_cap);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, spam, i == 0 ? &g_cap : NULL),
                     0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  ck_assert_int_eq(g_cap.count, 8000);
  tpx_log_set_handler(NULL, NULL);
}
END_TEST

START_TEST(test_level_names) {
  ck_assert_str_eq(tpx_log_level_name(TPX_LOG_ERROR), "error");
  ck_assert_str_eq(tpx_log_level_name(TPX_LOG_WARN), "warn");
  ck_assert_str_eq(tpx_log_level_name(TPX_LOG_INFO), "info");
  ck_assert_str_eq(tpx_log_level_name(TPX_LOG_TRACE), "trace");
  ck_assert_str_eq(tpx_log_level_name(9), "unknown");
}
END_TEST

static Suite *log_suite(void) {
  Suite *s = suite_create("log");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_default_errors_only);
  tcase_add_test(tc, test_no_handler_no_output);
  tcase_add_test(tc, test_levels_from_env);
  tcase_add_test(tc, test_alias_logs);
  tcase_add_test(tc, test_unknown_value_warned_once);
  tcase_add_test(tc, test_read_once);
  tcase_add_test(tc, test_long_message_truncated);
  tcase_add_test(tc, test_threads);
  tcase_add_test(tc, test_level_names);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  /* The threshold is read once per process, so these tests need a fresh
   * process each: force fork mode whatever CK_FORK says. */
  SRunner *sr = srunner_create(log_suite());
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
