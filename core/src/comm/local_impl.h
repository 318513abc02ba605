/* comm/local_impl.h — what local.c (the local backend's collectives) and
 * local_run.c (tpx_local_run, the launcher) share: the world's shared
 * state, the groups, a rank's handle context and clock. Private to
 * core/src/comm. */
#ifndef TPX_COMM_LOCAL_IMPL_H
#define TPX_COMM_LOCAL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "comm/barrier.h"
#include "comm/comm_impl.h"

typedef struct lslot {
  _Alignas(64) int coll;   /* one cache line per rank: no false sharing */
  _Atomic uint64_t enters; /* collectives this rank entered in the group */
  int op;
  int root;
  tpx_dtype dtype;
  size_t count;
  const void *send;
  void *recv;
} lslot;

typedef struct lgroup {
  tpx__barrier bar;
  _Alignas(64) atomic_size_t next_item; /* work counter of the current call */
  int size;
  int refs;           /* live handles; guarded by the universe mutex */
  uint64_t id;        /* unique in the universe */
  uint64_t parent_id; /* split key: (parent_id, seq, leader) */
  uint64_t seq;
  int64_t leader;
  struct lgroup *next;
  lslot *slots;    /* [size] */
  int *world_rank; /* [size] launcher rank of each member */
} lgroup;

/* When a rank that runs its own code (outside tpx's collectives) counts as
 * hung once the world is aborted (local_run.c). One cache line per rank:
 * every collective writes it. */
typedef struct lclock {
  /* collectives this rank is inside (its thread, and a runtime comm
   * thread's on its behalf): never hung then, it returns from there once
   * the world is aborted */
  _Alignas(64) atomic_int busy;
  /* CLOCK_MONOTONIC ns: when it last left a collective (or started) plus
   * that comm's timeout; INT64_MAX before it started */
  _Atomic int64_t idle_until;
  _Atomic int64_t timeout_ns; /* that comm's timeout */
  int named; /* under mu: a collective timed out waiting for this rank */
} lclock;

typedef struct luniverse {
  pthread_mutex_t mu;
  lgroup *groups;
  uint64_t next_id;
  /* The abort: why is written once (under mu) before aborted is set. */
  atomic_int aborted;
  tpx_status why_status;
  char why[TPX_ERROR_MESSAGE_SIZE];
  atomic_int *done; /* [world size] 1 once the rank's function returned */
  /* [world size] each rank's clock, read by the launcher (wait_ranks) */
  struct lclock *clock;
  int64_t aborted_ns; /* under mu: when the world was aborted */
  /* With mu: a rank's thread finished or the world was aborted (the
   * launcher waits on it). */
  pthread_cond_t changed;
} luniverse;

typedef struct lctx {
  luniverse *u;
  lgroup *g;
  tpx_comm *self; /* the handle (timeout and mesh dim for messages) */
  int rank;
  lclock *clock;   /* this rank's entry of u->clock */
  uint64_t splits; /* how many splits this handle made (same on all ranks) */
  const tpx__memspace *ms; /* host, sim or cuda: this rank's space */
  /* 1: the device path (sim, cuda): slots hold the buffers' own pointers
   * and the work goes through the memory space (local_dev.c), with this
   * rank's stream synced around the rendezvous. 0: host shared memory. */
  int dev;
} lctx;

/* The local backend's interface (local.c). */
extern const tpx_comm_iface tpx__local_iface;

/* A group of `size` members in u (refs 0, members' world ranks -1); NULL
 * when out of memory. */
lgroup *tpx__lgroup_new(luniverse *u, int size);
void tpx__lgroup_free(lgroup *g);

/* Abort the world (the first reason wins): every wait at a collective's
 * entry returns an error naming why, and the launcher is woken. */
void tpx__lworld_abort(luniverse *u, tpx_status st, const char *fmt, ...);

static inline int is_aborted(const luniverse *u) {
  return atomic_load_explicit(&u->aborted, memory_order_acquire);
}

static inline int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* t + d in ns, saturating (tpx_comm_set_timeout has no upper bound). */
static inline int64_t add_ns(int64_t t, int64_t d) {
  return d >= INT64_MAX - t ? INT64_MAX : t + d;
}

/* The rank starts, or leaves tpx's code, to run its own code for at most
 * `timeout_s` before it counts as hung (once the world is aborted). */
static inline void lclock_idle(lclock *k, double timeout_s) {
  double ns = timeout_s * 1e9;
  int64_t d = ns >= 9e18 ? INT64_MAX : (int64_t)ns;
  atomic_store_explicit(&k->timeout_ns, d, memory_order_relaxed);
  atomic_store_explicit(&k->idle_until, add_ns(now_ns(), d),
                        memory_order_release);
}
/* Around every collective. */
static inline void lclock_enter(lclock *k) {
  atomic_fetch_add_explicit(&k->busy, 1, memory_order_acq_rel);
}
static inline void lclock_leave(lclock *k, double timeout_s) {
  lclock_idle(k, timeout_s);
  atomic_fetch_sub_explicit(&k->busy, 1, memory_order_acq_rel);
}

#endif /* TPX_COMM_LOCAL_IMPL_H */
