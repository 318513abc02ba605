/* startup.c — the watchdog of the MPI phases no timeout covers (see
 * startup.h). One thread, armed per phase; it never calls MPI. */
#include "startup.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct tr_watchdog {
  pthread_t tid;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC: a phase was entered or left */
  double timeout_s;
  int rank;
  int quit;
  const char *phase;     /* armed when not NULL */
  struct timespec until; /* the armed phase's deadline */
  double limit_s;        /* its timeout + extra, for the message */
};

/* The launcher's rank number (Open MPI, Hydra, MVAPICH); -1 unknown. */
static int launcher_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                     "MV2_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return atoi(v);
  }
  return -1;
}

static void *watch(void *p) {
  tr_watchdog *w = p;
  pthread_mutex_lock(&w->mu);
  while (!w->quit) {
    if (!w->phase) {
      pthread_cond_wait(&w->cv, &w->mu);
      continue;
    }
    if (pthread_cond_timedwait(&w->cv, &w->mu, &w->until) == 0 || !w->phase)
      continue;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec < w->until.tv_sec ||
        (now.tv_sec == w->until.tv_sec && now.tv_nsec < w->until.tv_nsec))
      continue;
    fprintf(stderr,
            "tpx-train: rank %d: %s did not complete within %g s: another "
            "rank is stopped, hung or missing (the collective timeout: "
            "TPX_COMM_TIMEOUT); ending this process\n",
            w->rank, w->phase, w->limit_s);
    fflush(stderr);
    _exit(3); /* the stuck call cannot be returned from */
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

tr_watchdog *tr_watchdog_start(double timeout_s) {
  tr_watchdog *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->timeout_s = timeout_s;
  w->rank = launcher_rank();
  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&w->tid, NULL, watch, w)) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

/* TPX_TRAIN_TEST_STOP=R:NAME names this rank and phase. */
static int test_stop(int rank, const char *name) {
  const char *v = getenv("TPX_TRAIN_TEST_STOP");
  char want[64];
  snprintf(want, sizeof want, "%d:%s", rank, name);
  return v && name && !strcmp(v, want);
}

void tr_watchdog_enter(tr_watchdog *w, const char *phase, const char *test_name,
                       double extra_s) {
  if (w) {
    pthread_mutex_lock(&w->mu);
    double s = w->timeout_s + extra_s;
    clock_gettime(CLOCK_MONOTONIC, &w->until);
    time_t whole = (time_t)s;
    w->until.tv_sec += whole;
    w->until.tv_nsec += (long)((s - (double)whole) * 1e9);
    if (w->until.tv_nsec >= 1000000000L) {
      w->until.tv_sec++;
      w->until.tv_nsec -= 1000000000L;
    }
    w->limit_s = s;
    w->phase = phase;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
  if (test_stop(w ? w->rank : launcher_rank(), test_name))
    raise(SIGSTOP);
}

void tr_watchdog_leave(tr_watchdog *w) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->phase = NULL;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void tr_watchdog_set_rank(tr_watchdog *w, int rank) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->rank = rank;
  pthread_mutex_unlock(&w->mu);
}

void tr_watchdog_stop(tr_watchdog *w) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->quit = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->tid, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
