/* local_run.c — tpx_local_run, the launcher of the local backend: one
 * thread per rank over one world, and the wait for them.
 *
 * A hung rank (one that never comes back from its own code) cannot be
 * returned from, so once the world is aborted the launcher stops waiting
 * for a rank that has run its own code past its timeout (each rank's
 * lclock, local_impl.h) and leaves its thread running, detached.
 * Everything such a thread can still touch (the universe, the groups, its
 * handles, the launcher's gate) lives in one heap block, lrun, freed by
 * whoever leaves last: the launcher, or the detached thread if it returns
 * after all. Not here: the collectives (local.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/local_impl.h"
#include "comm/local_test.h"

/* ---- launcher ----------------------------------------------------------- */

/* The tests' failing host space (comm/local_test.h, fail_alloc_ranks). */
static tpx_status fail_alloc(const tpx__memspace *ms, size_t bytes, int zero,
                             void **out, tpx_error *err) {
  (void)ms;
  (void)zero;
  *out = NULL;
  return tpx_error_set(err, TPX_NO_MEMORY,
                       "injected allocation failure of %zu bytes (the "
                       "tests' fail_alloc_ranks)",
                       bytes);
}

typedef struct lgate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state; /* 0 wait, 1 go, -1 abort (not every thread could start) */
} lgate;

struct lrun;

typedef struct lthread {
  pthread_t tid;
  struct lrun *run;
  int rank;
  tpx_comm *comm;
  tpx_local_fn fn;
  void *arg;
  tpx__memspace *own_ms; /* cuda_memory: this rank's space (its stream) */
  tpx_status st;
  tpx_error err;
  int finished; /* under u.mu: the thread is past fn (or never ran it) */
  int detached; /* under u.mu: the launcher returned without it */
} lthread;

/* What the rank threads share with the launcher. On the heap: a hung rank
 * (below) may outlive tpx_local_run, so whoever leaves last frees it, the
 * launcher or a detached thread that returns after all. */
typedef struct lrun {
  luniverse u;
  lgate gate;
  int refs;                 /* under u.mu: the launcher + detached threads */
  lthread *th;              /* [nranks] */
  tpx__ms_buffers fail_buf; /* the tests' failing space (fail_alloc_ranks) */
  tpx__memspace fail_ms;
} lrun;

/* Frees r with the groups left (sub-groups whose handles ranks leaked). */
static void lrun_free(lrun *r) {
  while (r->u.groups) {
    lgroup *g = r->u.groups;
    r->u.groups = g->next;
    tpx__lgroup_free(g);
  }
  free(r->th);
  free(r->u.done);
  free(r->u.clock);
  pthread_cond_destroy(&r->u.changed);
  pthread_cond_destroy(&r->gate.cv);
  pthread_mutex_destroy(&r->gate.mu);
  pthread_mutex_destroy(&r->u.mu);
  free(r);
}

/* A run of `n` ranks with its world group (every rank's reference taken);
 * NULL when out of memory. */
static lrun *lrun_new(int n) {
  lrun *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  atomic_init(&r->u.aborted, 0);
  pthread_mutex_init(&r->u.mu, NULL);
  pthread_mutex_init(&r->gate.mu, NULL);
  pthread_cond_init(&r->gate.cv, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->u.changed, &ca);
  pthread_condattr_destroy(&ca);
  r->refs = 1;
  r->th = calloc((size_t)n, sizeof *r->th);
  r->u.done = calloc((size_t)n, sizeof *r->u.done);
  r->u.clock = aligned_alloc(64, (size_t)n * sizeof *r->u.clock);
  if (r->u.clock)
    memset(r->u.clock, 0, (size_t)n * sizeof *r->u.clock);
  lgroup *world =
      r->th && r->u.done && r->u.clock ? tpx__lgroup_new(&r->u, n) : NULL;
  if (!world) {
    lrun_free(r);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    atomic_init(&r->u.clock[i].busy, 0);
    atomic_init(&r->u.clock[i].idle_until, INT64_MAX); /* not started */
    atomic_init(&r->u.clock[i].timeout_ns, 0);
    world->world_rank[i] = i;
  }
  world->refs = n;
  r->u.groups = world;
  r->fail_buf = tpx__ms_host_buffers;
  r->fail_buf.alloc = fail_alloc;
  r->fail_ms = tpx__ms_host;
  r->fail_ms.buf = &r->fail_buf;
  return r;
}

/* Drop one reference to r; the last frees it. */
static void lrun_release(lrun *r) {
  pthread_mutex_lock(&r->u.mu);
  int last = --r->refs == 0;
  pthread_mutex_unlock(&r->u.mu);
  if (last)
    lrun_free(r);
}

static void *rank_main(void *p) {
  lthread *t = p;
  lrun *r = t->run;
  pthread_mutex_lock(&r->gate.mu);
  while (r->gate.state == 0) pthread_cond_wait(&r->gate.cv, &r->gate.mu);
  int go = r->gate.state > 0;
  pthread_mutex_unlock(&r->gate.mu);
  if (go && t->own_ms) /* the rank's thread works on the space's GPU */
    t->st = tpx__ms_bind_thread(t->own_ms, &t->err);
  if (go) {
    lclock_idle(&r->u.clock[t->rank], t->comm->timeout_s);
    if (t->st == TPX_OK)
      t->st = t->fn(t->comm, t->arg, &t->err);
    /* A failed rank releases the peers that wait for it; one that is done
     * lets them see it will never come (wait_entry). */
    if (t->st != TPX_OK)
      tpx__lworld_abort(&r->u, TPX_COMM, "rank %d failed: %s", t->rank,
                        t->err.message[0] ? t->err.message
                                          : tpx_status_str(t->st));
    atomic_store_explicit(&r->u.done[t->rank], 1, memory_order_release);
  }
  pthread_mutex_lock(&r->u.mu);
  t->finished = 1;
  int detached = t->detached;
  pthread_cond_broadcast(&r->u.changed);
  pthread_mutex_unlock(&r->u.mu);
  if (detached) { /* tpx_local_run returned without this rank: clean up */
    tpx_comm_destroy(t->comm);
    tpx__ms_cuda_destroy(t->own_ms);
    lrun_release(r);
  }
  return NULL;
}

/* Under u->mu, the world aborted: rank i has run its own code past its
 * timeout. A rank a collective timed out for is past it from its last
 * collective on; any other gets its timeout from the abort on too (it may
 * just be busy: it returns at its next collective). */
static int is_hung(const luniverse *u, int i, int64_t now) {
  const lclock *k = &u->clock[i];
  if (atomic_load_explicit(&k->busy, memory_order_acquire) > 0)
    return 0; /* inside a collective: it returns from there */
  int64_t until = atomic_load_explicit(&k->idle_until, memory_order_acquire);
  if (!k->named) {
    int64_t t =
        add_ns(u->aborted_ns,
               atomic_load_explicit(&k->timeout_ns, memory_order_relaxed));
    until = t > until ? t : until;
  }
  return now > until;
}

/* Wait until every started thread finished, or the world is aborted and
 * each one still running is hung: it has run its own code (outside tpx's
 * collectives) past its comm's timeout. Those are marked detached (each
 * holds a reference to r); returns how many. */
static int wait_ranks(lrun *r, int started) {
  luniverse *u = &r->u;
  int hung = 0;
  pthread_mutex_lock(&u->mu);
  for (;;) {
    int running = 0, aborted = is_aborted(u);
    int64_t now = now_ns();
    hung = 0;
    for (int i = 0; i < started; i++) {
      if (r->th[i].finished)
        continue;
      running++;
      hung += aborted && is_hung(u, i, now);
    }
    if (running == hung)
      break;
    if (!aborted) {
      pthread_cond_wait(&u->changed, &u->mu);
      continue;
    }
    /* poll: the ranks' clocks do not signal `changed` */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 20 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&r->u.changed, &u->mu, &ts);
  }
  for (int i = 0; i < started; i++) {
    if (!r->th[i].finished) {
      r->th[i].detached = 1;
      r->refs++;
    }
  }
  pthread_mutex_unlock(&u->mu);
  return hung;
}

/* The run's verdict once the threads are joined or detached (`hung` of
 * them): the lowest failing rank's error, after the hung ranks. */
static tpx_status verdict(const lrun *r, int nranks, int hung, tpx_error *err) {
  const lthread *th = r->th;
  int first = -1;
  for (int i = 0; i < nranks && first < 0; i++)
    if (!th[i].detached && th[i].st != TPX_OK)
      first = i;
  const char *msg = "";
  if (first >= 0)
    msg = th[first].err.message[0] ? th[first].err.message
                                   : tpx_status_str(th[first].st);
  if (!hung)
    return first < 0 ? TPX_OK
                     : tpx_error_set(err, th[first].st, "local rank %d: %s",
                                     first, msg);
  char who[96] = "";
  size_t k = 0;
  for (int i = 0, n = 0; i < nranks && k + 16 < sizeof who; i++)
    if (th[i].detached)
      k +=
          (size_t)snprintf(who + k, sizeof who - k, "%s%d", n++ ? ", " : "", i);
  char first_err[TPX_ERROR_MESSAGE_SIZE + 32] = "";
  if (first >= 0)
    snprintf(first_err, sizeof first_err, "; local rank %d: %s", first, msg);
  return tpx_error_set(
      err, TPX_TIMEOUT,
      "local rank%s %s did not return: the world was aborted and %s ran its "
      "own code past the collective timeout without entering a collective; "
      "tpx_local_run returns without %s (left running, detached: end the "
      "process)%s",
      hung > 1 ? "s" : "", who, hung > 1 ? "they" : "it",
      hung > 1 ? "them" : "it", first_err);
}

/* How the ranks of a run are made. */
typedef struct lspec {
  const tpx__memspace *ms; /* host or sim */
  int dev;                 /* the device path (local_dev.c) */
  int cuda, managed;       /* a cuda space (and stream) per rank */
  int sim;                 /* the tests' sim space */
  unsigned fail_ranks;     /* the tests' failing ranks */
  double timeout_s;
  tpx_local_fn fn;
  void *arg;
} lspec;

/* Every rank's handle, before any thread runs, so no rank can fail to join
 * a collective for lack of memory. *made = the handles made (each to be
 * destroyed); an error when a rank's cuda space could not be made. */
static tpx_status make_ranks(lrun *r, int nranks, const lspec *sp, int *made,
                             tpx_error *err) {
  tpx_status st = TPX_OK;
  for (*made = 0; *made < nranks && st == TPX_OK; ++*made) {
    int i = *made;
    lctx *c = calloc(1, sizeof *c);
    tpx_comm *comm = c ? tpx__comm_new(&tpx__local_iface, c, i, nranks) : NULL;
    if (!comm) {
      free(c);
      return TPX_OK; /* *made < nranks says it */
    }
    lthread *t = &r->th[i];
    *c = (lctx){.u = &r->u,
                .g = r->u.groups,
                .self = comm,
                .rank = i,
                .clock = &r->u.clock[i],
                .ms = sp->ms,
                .dev = sp->dev};
    if (sp->cuda) { /* a stream per rank, freed with the handle */
      st = tpx__ms_cuda_create(&t->own_ms, sp->managed, err);
      c->ms = t->own_ms ? t->own_ms : sp->ms;
    } else if (i < 32 && (sp->fail_ranks >> i & 1u) &&
               sp->ms == &tpx__ms_host) {
      c->ms = &r->fail_ms;
    }
    comm->ms = c->ms;
    comm->timeout_s = sp->timeout_s;
    *t = (lthread){.run = r,
                   .rank = i,
                   .comm = comm,
                   .fn = sp->fn,
                   .arg = sp->arg,
                   .own_ms = t->own_ms};
  }
  return st;
}

/* The public options (NULL = defaults): a tpx_local_options of this or an
 * older size, nothing larger. */
static tpx_status read_options(const tpx_local_options *opts, lspec *sp,
                               tpx_error *err) {
  tpx_local_options o = TPX_LOCAL_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof o)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "local_run: options struct_size %zu is not a "
                           "tpx_local_options size (use "
                           "TPX_LOCAL_OPTIONS_INIT)",
                           opts->struct_size);
    memcpy(&o, opts, opts->struct_size);
  }
  if (!(o.timeout_s >= 0) || o.timeout_s > 1e9)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "local_run: timeout_s %g must be >= 0 seconds (0 = "
                         "the default)",
                         o.timeout_s);
  o.cuda_memory |= sp->managed;
  sp->ms = sp->sim ? &tpx__ms_sim : &tpx__ms_host;
  sp->dev = sp->sim || o.cuda_memory;
  sp->cuda = o.cuda_memory;
  sp->timeout_s = o.timeout_s;
  /* 0: the default, TPX_COMM_TIMEOUT (refused when malformed) or 600 */
  return o.timeout_s > 0 ? TPX_OK : tpx__comm_env_timeout(&sp->timeout_s, err);
}

tpx_status tpx_local_run(int nranks, tpx_local_fn fn, void *arg,
                         tpx_error *err) {
  return tpx_local_run_opts(nranks, NULL, fn, arg, err);
}

/* One world: `sp` holds the body and the tests' switches, the rest comes
 * from the public options. */
static tpx_status run_world(int nranks, const tpx_local_options *opts, lspec sp,
                            tpx_error *err) {
  tpx_status st = read_options(opts, &sp, err);
  if (st != TPX_OK)
    return st;
  if (!sp.fn)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "local_run: fn is NULL");
  if (nranks < 1 || nranks > TPX_LOCAL_MAX_RANKS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "local_run: nranks %d out of range 1..%d", nranks,
                         TPX_LOCAL_MAX_RANKS);
  lrun *r = lrun_new(nranks);
  if (!r)
    return tpx_error_set(err, TPX_NO_MEMORY, "local_run: %d ranks", nranks);
  int made = 0, started = 0;
  st = make_ranks(r, nranks, &sp, &made, err);
  if (made == nranks && st == TPX_OK) {
    for (; started < nranks; started++)
      if (pthread_create(&r->th[started].tid, NULL, rank_main, &r->th[started]))
        break;
  }
  pthread_mutex_lock(&r->gate.mu);
  r->gate.state = started == nranks ? 1 : -1;
  pthread_cond_broadcast(&r->gate.cv);
  pthread_mutex_unlock(&r->gate.mu);
  int hung = wait_ranks(r, started);
  for (int i = 0; i < started; i++) {
    if (r->th[i].detached)
      pthread_detach(r->th[i].tid);
    else
      pthread_join(r->th[i].tid, NULL);
  }
  if (st != TPX_OK) {
    /* a rank's cuda space could not be made: err says why */
  } else if (made < nranks || started < nranks) {
    st = tpx_error_set(err, made < nranks ? TPX_NO_MEMORY : TPX_INTERNAL,
                       "local_run: could not %s rank %d of %d",
                       made < nranks ? "allocate" : "start a thread for",
                       made < nranks ? made : started, nranks);
  } else {
    st = verdict(r, nranks, hung, err);
  }
  /* Handles release the world (and free it with the last one); a detached
   * rank releases its own when it returns, if it ever does. */
  for (int i = 0; i < made; i++) {
    if (!r->th[i].detached) {
      tpx_comm_destroy(r->th[i].comm);
      tpx__ms_cuda_destroy(r->th[i].own_ms);
    }
  }
  lrun_release(r);
  return st;
}

tpx_status tpx_local_run_opts(int nranks, const tpx_local_options *opts,
                              tpx_local_fn fn, void *arg, tpx_error *err) {
  lspec sp = {.fn = fn, .arg = arg};
  return run_world(nranks, opts, sp, err);
}

/* The tests' entry (comm/local_test.h): the public options plus the
 * switches no caller of the public API can reach. */
tpx_status tpx__local_run_test(int nranks, const tpx__local_test_options *opts,
                               tpx_local_fn fn, void *arg, tpx_error *err) {
  lspec sp = {.fn = fn, .arg = arg};
  if (opts) {
    sp.sim = opts->sim_device_memory;
    sp.fail_ranks = opts->fail_alloc_ranks;
    sp.managed = opts->cuda_managed;
  }
  return run_world(nranks, opts ? &opts->base : NULL, sp, err);
}
