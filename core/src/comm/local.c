/* local.c — the `local` backend: ranks are threads of one process.
 *
 * Every collective publishes this rank's buffers in a per-group slot, meets
 * the others at a barrier, then works directly on the other ranks' buffers
 * (shared memory, no staging copies), and meets them again before returning
 * so no buffer is read or written after its owner left the call. The work
 * is cut into chunks that ranks take from a shared counter, so when ranks
 * outnumber cores (4 ranks on 2 cores in CI) the threads that are running
 * do the work instead of waiting for a descheduled one:
 *  - all_reduce: a chunk of the element range is reduced from all n send
 *    buffers and written straight into all n recv buffers (a fused
 *    reduce-scatter + all-gather over shared pointers: each element is read
 *    once per rank and written once per rank, nothing else);
 *  - reduce_scatter: a chunk of block q is reduced from all sends into q's
 *    recv;
 *  - all_gather / broadcast: a chunk of one source is read once and written
 *    into every recv;
 *  - all_to_all: each rank pulls its blocks.
 * Because all slots are visible, ranks that disagree on the collective,
 * count, dtype, op or root all get the same TPX_INVALID_ARGUMENT instead of
 * corrupting memory.
 *
 * Failure: the world (every group split from it) shares one abort flag. A
 * rank whose function returns an error, or returns while its peers wait
 * for it, or fails before a collective (tpx_comm_iface.abort), sets it; a
 * rank that waits longer than the comm's timeout for a peer sets it naming
 * that peer. Every wait at a collective's entry checks it and cancels its
 * barrier generation (comm/barrier.h), so every rank returns an error
 * naming the collective, the mesh dim and the rank at fault, and every
 * later collective fails at once. The exit barrier is never abandoned:
 * once a group is inside a collective, each rank still reads the others'
 * buffers until all are done.
 *
 * A hung rank (one that never comes back from its own code) cannot be
 * returned from, so once the world is aborted the launcher stops waiting
 * for a rank that has run its own code past its timeout (each rank's
 * lclock) and leaves its thread running, detached. Everything such a
 * thread can still touch (the universe, the groups, its handles, the
 * launcher's gate) lives in one heap block, lrun, freed by whoever leaves
 * last: the launcher, or the detached thread if it returns after all.
 *
 * Also here: tpx_local_run, the launcher. Not here: argument checks and
 * defaults (comm.c), the reduction kernels (device/elem_reduce.c). */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/barrier.h"
#include "comm/comm_impl.h"
#include "comm/local_dev.h"
#include "comm/local_test.h"
#include "device/elem.h"

/* Outputs at least this large are written with non-temporal stores. */
#define STREAM_BYTES ((size_t)1 << 20)

enum {
  C_ALL_GATHER = 1,
  C_REDUCE_SCATTER,
  C_ALL_REDUCE,
  C_BROADCAST,
  C_ALL_TO_ALL,
  C_BARRIER
};
static const char *coll_name(int c) {
  static const char *names[] = {"?",          "all_gather", "reduce_scatter",
                                "all_reduce", "broadcast",  "all_to_all",
                                "barrier"};
  return c >= 1 && c <= 6 ? names[c] : "?";
}

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
 * hung once the world is aborted. */
typedef struct lclock {
  /* CLOCK_MONOTONIC ns: when it last left a collective (or started) plus
   * its comm's timeout; INT64_MAX while it is inside a collective (it
   * returns from there once the world is aborted). */
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

static const tpx_comm_iface local_iface;

/* ---- groups ------------------------------------------------------------- */

static lgroup *group_new(luniverse *u, int size) {
  lgroup *g = aligned_alloc(64, (sizeof(lgroup) + 63) / 64 * 64);
  if (!g)
    return NULL;
  memset(g, 0, sizeof *g);
  g->slots = aligned_alloc(64, sizeof(lslot) * (size_t)size);
  if (!g->slots) {
    free(g);
    return NULL;
  }
  memset(g->slots, 0, sizeof(lslot) * (size_t)size);
  g->world_rank = malloc((size_t)size * sizeof *g->world_rank);
  if (!g->world_rank) {
    free(g->slots);
    free(g);
    return NULL;
  }
  for (int i = 0; i < size; i++)
    g->world_rank[i] = -1; /* until that member joins (local_split) */
  tpx__barrier_init(&g->bar, (unsigned)size);
  g->size = size;
  g->id = ++u->next_id;
  return g;
}

static void group_free(lgroup *g) {
  if (g) {
    free(g->world_rank);
    free(g->slots);
    free(g);
  }
}

/* Drop one reference (under the mutex); frees the group at zero. */
static void group_release(luniverse *u, lgroup *g) {
  pthread_mutex_lock(&u->mu);
  if (--g->refs == 0) {
    for (lgroup **p = &u->groups; *p; p = &(*p)->next) {
      if (*p == g) {
        *p = g->next;
        break;
      }
    }
    group_free(g);
  }
  pthread_mutex_unlock(&u->mu);
}

static void local_destroy(void *ctx) {
  lctx *c = ctx;
  if (!c)
    return;
  group_release(c->u, c->g);
  free(c);
}

static tpx_status local_split(tpx_comm *world, const int64_t *group, int gsize,
                              int index, tpx_comm **out, tpx_error *err) {
  lctx *w = world->ctx;
  uint64_t seq = ++w->splits;
  lctx *c = calloc(1, sizeof *c);
  if (!c)
    return tpx_error_set(err, TPX_NO_MEMORY, "local split");
  pthread_mutex_lock(&w->u->mu);
  lgroup *g = w->u->groups;
  while (g &&
         !(g->parent_id == w->g->id && g->seq == seq && g->leader == group[0]))
    g = g->next;
  if (!g) {
    g = group_new(w->u, gsize);
    if (g) {
      g->parent_id = w->g->id;
      g->seq = seq;
      g->leader = group[0];
      g->next = w->u->groups;
      w->u->groups = g;
    }
  }
  if (g) {
    g->refs++;
    g->world_rank[index] = w->g->world_rank[w->rank];
  }
  pthread_mutex_unlock(&w->u->mu);
  if (!g) {
    free(c);
    return tpx_error_set(err, TPX_NO_MEMORY, "local split: group of %d", gsize);
  }
  c->u = w->u;
  c->g = g;
  c->rank = index;
  c->clock = w->clock;
  c->ms = w->ms;
  c->dev = w->dev;
  *out = tpx__comm_new(&local_iface, c, index, gsize);
  if (!*out) {
    local_destroy(c);
    return tpx_error_set(err, TPX_NO_MEMORY, "local split");
  }
  (*out)->ms = c->ms;
  c->self = *out;
  return TPX_OK;
}

/* ---- clocks ------------------------------------------------------------ */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* t + d in ns, saturating (tpx_comm_set_timeout has no upper bound). */
static int64_t add_ns(int64_t t, int64_t d) {
  return d >= INT64_MAX - t ? INT64_MAX : t + d;
}

/* This rank is in tpx's code (inside a collective: never hung) or leaves
 * it now, to run its own code for at most `timeout_s` before it counts as
 * hung (once the world is aborted). */
static void mark_busy(lclock *k) {
  atomic_store_explicit(&k->idle_until, INT64_MAX, memory_order_release);
}
static void mark_idle(lclock *k, double timeout_s) {
  double ns = timeout_s * 1e9;
  int64_t d = ns >= 9e18 ? INT64_MAX : (int64_t)ns;
  atomic_store_explicit(&k->timeout_ns, d, memory_order_relaxed);
  atomic_store_explicit(&k->idle_until, add_ns(now_ns(), d),
                        memory_order_release);
}

/* ---- the abort ---------------------------------------------------------- */

/* Abort the world (the first reason wins). */
static void world_abort(luniverse *u, tpx_status st, const char *fmt, ...) {
  pthread_mutex_lock(&u->mu);
  if (!atomic_load_explicit(&u->aborted, memory_order_relaxed)) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->why, sizeof u->why, fmt, ap);
    va_end(ap);
    u->why_status = st;
    u->aborted_ns = now_ns();
    atomic_store_explicit(&u->aborted, 1, memory_order_release);
    pthread_cond_broadcast(&u->changed);
  }
  pthread_mutex_unlock(&u->mu);
}

static int is_aborted(const luniverse *u) {
  return atomic_load_explicit(&u->aborted, memory_order_acquire);
}

/* This rank's error for `coll` once the world is aborted. */
static tpx_status aborted_error(lctx *c, int coll, tpx_error *err) {
  char where[64];
  tpx__comm_where(c->self, where, sizeof where);
  return tpx_error_set(err, c->u->why_status, "local %s over %s: %s",
                       coll_name(coll), where, c->u->why);
}

static void local_abort(void *ctx, const char *why) {
  lctx *c = ctx;
  world_abort(c->u, TPX_COMM, "rank %d failed: %s", c->g->world_rank[c->rank],
              why);
}

/* Group member that has not entered this rank's `seq`-th collective (the
 * lowest), or -1. */
static int missing_member(const lgroup *g, uint64_t seq) {
  for (int j = 0; j < g->size; j++)
    if (atomic_load_explicit(&g->slots[j].enters, memory_order_acquire) < seq)
      return j;
  return -1;
}

/* A collective timed out for the members that have not entered this
 * rank's `seq`-th one: the launcher counts them hung from their last
 * collective on (is_hung). */
static void name_missing(const lctx *c, uint64_t seq) {
  const lgroup *g = c->g;
  pthread_mutex_lock(&c->u->mu);
  for (int j = 0; j < g->size; j++)
    if (atomic_load_explicit(&g->slots[j].enters, memory_order_acquire) < seq &&
        g->world_rank[j] >= 0)
      c->u->clock[g->world_rank[j]].named = 1;
  pthread_mutex_unlock(&c->u->mu);
}

/* Wait at the entry barrier of this rank's `seq`-th collective. Gives up
 * when the world is aborted, a missing peer's function has returned, or
 * the comm's timeout passes; then cancels the barrier generation. */
static tpx_status wait_entry(lctx *c, int coll, uint64_t seq, uint32_t gen,
                             tpx_error *err) {
  lgroup *g = c->g;
  luniverse *u = c->u;
  double t0 = now_s(), limit = c->self->timeout_s;
  for (;;) {
    int r = tpx__barrier_wait_gen(&g->bar, gen, 20);
    if (r > 0)
      return TPX_OK;
    if (r == 0 && !is_aborted(u)) {
      int m = missing_member(g, seq);
      int wr = -1;
      char where[64], who[64];
      tpx__comm_where(c->self, where, sizeof where);
      pthread_mutex_lock(&u->mu); /* world_rank is written under it */
      if (m >= 0)
        wr = g->world_rank[m];
      pthread_mutex_unlock(&u->mu);
      if (wr >= 0)
        snprintf(who, sizeof who, "rank %d", wr);
      else
        snprintf(who, sizeof who, "group member %d (not in the group yet)", m);
      if (wr >= 0 && u->done &&
          atomic_load_explicit(&u->done[wr], memory_order_acquire)) {
        world_abort(u, TPX_COMM,
                    "rank %d returned from its function without joining "
                    "%s over %s",
                    wr, coll_name(coll), where);
      } else if (now_s() - t0 > limit) {
        name_missing(c, seq);
        world_abort(u, TPX_TIMEOUT,
                    "%s did not arrive at %s over %s within %g s "
                    "(the collective timeout: TPX_COMM_TIMEOUT or "
                    "tpx_comm_set_timeout)",
                    who, coll_name(coll), where, limit);
      } else {
        continue;
      }
    }
    /* Aborted (or cancelled by a peer): leave unless everyone is in. */
    if (tpx__barrier_cancel(&g->bar, gen) == 0)
      return TPX_OK;
    return aborted_error(c, coll, err);
  }
}

/* ---- the collective protocol -------------------------------------------- */

/* Publish this rank's call, wait for everyone, check they all agree. Every
 * rank reaches the same verdict, so on mismatch all return the error (after
 * leave()). TPX_COMM / TPX_TIMEOUT when the world is aborted before every
 * rank entered: then the caller must NOT leave(). */
static tpx_status enter(lctx *c, int coll, const void *send, void *recv,
                        size_t count, tpx_dtype dtype, int op, int root,
                        int *joined, tpx_error *err) {
  lgroup *g = c->g;
  *joined = 0;
  lslot *s = &g->slots[c->rank];
  /* Nobody takes work before the barrier below, and everyone finished the
   * previous call's work before its leave(): rank 0 may reset. */
  if (c->rank == 0)
    atomic_store_explicit(&g->next_item, 0, memory_order_relaxed);
  s->coll = coll;
  /* Device path: this rank's buffers are final (its stream is done) before
   * anyone reads them, and the pointers are the space's own. */
  tpx_status synced = c->dev ? tpx__ms_sync(c->ms, err) : TPX_OK;
  s->send = c->dev ? send : tpx__ms_host_view(c->ms, send);
  s->recv = c->dev ? recv : tpx__ms_host_view(c->ms, recv);
  s->count = count;
  s->dtype = dtype;
  s->op = op;
  s->root = root;
  if (is_aborted(c->u))
    return aborted_error(c, coll, err);
  uint64_t seq = atomic_load_explicit(&s->enters, memory_order_relaxed) + 1;
  atomic_store_explicit(&s->enters, seq, memory_order_release);
  uint32_t gen = 0;
  int r = tpx__barrier_arrive(&g->bar, &gen);
  if (r < 0)
    return aborted_error(c, coll, err);
  if (r == 0) {
    tpx_status st = wait_entry(c, coll, seq, gen, err);
    if (st != TPX_OK)
      return st;
  }
  *joined = 1;
  const lslot *a = &g->slots[0];
  for (int j = 1; j < g->size; j++) {
    const lslot *b = &g->slots[j];
    if (b->coll != a->coll || b->count != a->count || b->dtype != a->dtype ||
        b->op != a->op || b->root != a->root)
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT,
          "local %s: ranks disagree: rank 0 called %s(count=%zu, dtype=%s, "
          "op=%d, root=%d) but rank %d called %s(count=%zu, dtype=%s, op=%d, "
          "root=%d); every rank must make the same call",
          coll_name(coll), coll_name(a->coll), a->count,
          tpx_dtype_short_name(a->dtype), a->op, a->root, j, coll_name(b->coll),
          b->count, tpx_dtype_short_name(b->dtype), b->op, b->root);
  }
  return synced;
}

/* The exit barrier of a collective every rank entered (joined); on the
 * device path this rank's reads and writes are done first (so no buffer is
 * touched after its owner returned). */
static tpx_status leave(lctx *c, int joined, tpx_status st, tpx_error *err) {
  if (!joined)
    return st;
  if (c->dev) {
    tpx_status synced = tpx__ms_sync(c->ms, st == TPX_OK ? err : NULL);
    if (st == TPX_OK)
      st = synced;
  }
  tpx__barrier_wait(&c->g->bar);
  return st;
}

/* The group's published buffers, for the device path. */
static tpx__ldev_peers peers_of(const lctx *c, const void **sends,
                                void **recvs) {
  for (int j = 0; j < c->g->size; j++) {
    sends[j] = c->g->slots[j].send;
    recvs[j] = c->g->slots[j].recv;
  }
  tpx__ldev_peers p = {c->ms, c->rank, c->g->size, sends, recvs};
  return p;
}

/* Chunk length in elements for `count` elements: about a quarter of a
 * rank's share, between 16 KiB and 256 KiB, whole cache lines. */
static size_t chunk_len(size_t count, size_t es, int n) {
  size_t bytes = count * es / (4 * (size_t)n);
  if (bytes < ((size_t)16 << 10))
    bytes = (size_t)16 << 10;
  if (bytes > ((size_t)256 << 10))
    bytes = (size_t)256 << 10;
  size_t len = bytes / es;
  size_t align = 64 / es ? 64 / es : 1;
  len = len / align * align;
  return len ? len : 1;
}

static size_t take(lgroup *g) {
  return atomic_fetch_add_explicit(&g->next_item, 1, memory_order_relaxed);
}

#define MAXR TPX_LOCAL_MAX_RANKS

/* One collective call, as every rank publishes it. */
typedef struct lcall {
  int coll;
  const void *send;
  void *recv;
  size_t count;
  tpx_dtype dtype;
  tpx_reduce_op op;
  int root;
} lcall;

/* The device path: each rank moves its share through its space's kernels
 * and copies (comm/local_dev.h). */
static tpx_status on_device(const lctx *c, const lcall *k, tpx_error *err) {
  const void *sends[MAXR];
  void *recvs[MAXR];
  tpx__ldev_peers p = peers_of(c, sends, recvs);
  size_t bytes = k->count * tpx_dtype_size(k->dtype);
  switch (k->coll) {
  case C_ALL_REDUCE:
    return tpx__ldev_all_reduce(&p, k->count, k->dtype, k->op, err);
  case C_REDUCE_SCATTER:
    return tpx__ldev_reduce_scatter(&p, k->count, k->dtype, k->op, err);
  case C_ALL_GATHER: return tpx__ldev_all_gather(&p, bytes, err);
  case C_BROADCAST: return tpx__ldev_broadcast(&p, bytes, k->root, err);
  default: return tpx__ldev_all_to_all(&p, bytes, err);
  }
}

/* Host paths: the ranks take chunks of the work from a shared counter. */
static void host_all_reduce(lgroup *g, const lcall *k) {
  size_t count = k->count, es = tpx_dtype_size(k->dtype);
  size_t len = chunk_len(count, es, g->size);
  size_t nchunks = (count + len - 1) / len;
  int stream = count * es >= STREAM_BYTES;
  const void *srcs[MAXR];
  void *dsts[MAXR];
  for (size_t it; (it = take(g)) < nchunks;) {
    size_t lo = it * len, n = count - lo < len ? count - lo : len;
    for (int j = 0; j < g->size; j++) {
      srcs[j] = (const unsigned char *)g->slots[j].send + lo * es;
      dsts[j] = (unsigned char *)g->slots[j].recv + lo * es;
    }
    tpx__reduce_into(dsts, g->size, srcs, g->size, n, k->dtype, k->op, g->size,
                     stream);
  }
}

static void host_reduce_scatter(lgroup *g, const lcall *k) {
  size_t count = k->count, es = tpx_dtype_size(k->dtype);
  size_t len = chunk_len(count, es, 1);
  size_t per = (count + len - 1) / len; /* chunks per block */
  int stream = count * es >= STREAM_BYTES;
  const void *srcs[MAXR];
  for (size_t it; (it = take(g)) < per * (size_t)g->size;) {
    size_t q = it / per, lo = (it % per) * len;
    size_t n = count - lo < len ? count - lo : len;
    void *dst = (unsigned char *)g->slots[q].recv + lo * es;
    for (int j = 0; j < g->size; j++)
      srcs[j] = (const unsigned char *)g->slots[j].send + (q * count + lo) * es;
    tpx__reduce_into(&dst, 1, srcs, g->size, n, k->dtype, k->op, g->size,
                     stream);
  }
}

static void host_all_gather(lgroup *g, const lcall *k) {
  size_t bytes = k->count * tpx_dtype_size(k->dtype);
  size_t len = chunk_len(bytes, 1, 1), per = (bytes + len - 1) / len;
  int stream = bytes >= STREAM_BYTES;
  void *dsts[MAXR];
  for (size_t it; (it = take(g)) < per * (size_t)g->size;) {
    size_t q = it / per, lo = (it % per) * len;
    size_t n = bytes - lo < len ? bytes - lo : len;
    for (int j = 0; j < g->size; j++)
      dsts[j] = (unsigned char *)g->slots[j].recv + q * bytes + lo;
    tpx__copy_into(dsts, g->size, (const unsigned char *)g->slots[q].send + lo,
                   n, stream);
  }
}

static void host_broadcast(lgroup *g, const lcall *k) {
  size_t bytes = k->count * tpx_dtype_size(k->dtype);
  size_t len = chunk_len(bytes, 1, 1), per = (bytes + len - 1) / len;
  int stream = bytes >= STREAM_BYTES;
  const unsigned char *src = g->slots[k->root].send;
  void *dsts[MAXR];
  for (size_t it; (it = take(g)) < per;) {
    size_t lo = it * len, n = bytes - lo < len ? bytes - lo : len;
    for (int j = 0; j < g->size; j++)
      dsts[j] = (unsigned char *)g->slots[j].recv + lo;
    tpx__copy_into(dsts, g->size, src + lo, n, stream);
  }
}

/* Each rank pulls its own block from every peer. */
static void host_all_to_all(const lctx *c, const lcall *k) {
  lgroup *g = c->g;
  size_t bytes = k->count * tpx_dtype_size(k->dtype);
  unsigned char *mine = g->slots[c->rank].recv;
  for (int j = 0; j < g->size; j++)
    memcpy(mine + (size_t)j * bytes,
           (const unsigned char *)g->slots[j].send + (size_t)c->rank * bytes,
           bytes);
}

/* enter, the work (none for an empty call or a barrier), leave. */
static tpx_status run(lctx *c, const lcall *k, tpx_error *err) {
  int joined;
  mark_busy(c->clock);
  tpx_status st = enter(c, k->coll, k->send, k->recv, k->count, k->dtype, k->op,
                        k->root, &joined, err);
  if (st == TPX_OK && k->count > 0 && c->dev) {
    st = on_device(c, k, err);
  } else if (st == TPX_OK && k->count > 0) {
    switch (k->coll) {
    case C_ALL_REDUCE: host_all_reduce(c->g, k); break;
    case C_REDUCE_SCATTER: host_reduce_scatter(c->g, k); break;
    case C_ALL_GATHER: host_all_gather(c->g, k); break;
    case C_BROADCAST: host_broadcast(c->g, k); break;
    case C_ALL_TO_ALL: host_all_to_all(c, k); break;
    default: break;
    }
  }
  st = leave(c, joined, st, err);
  mark_idle(c->clock, c->self->timeout_s);
  return st;
}

static tpx_status local_all_reduce(void *ctx, const void *send, void *recv,
                                   size_t count, tpx_dtype dtype,
                                   tpx_reduce_op op, tpx_error *err) {
  lcall k = {C_ALL_REDUCE, send, recv, count, dtype, op, 0};
  return run(ctx, &k, err);
}

static tpx_status local_reduce_scatter(void *ctx, const void *send, void *recv,
                                       size_t count, tpx_dtype dtype,
                                       tpx_reduce_op op, tpx_error *err) {
  lcall k = {C_REDUCE_SCATTER, send, recv, count, dtype, op, 0};
  return run(ctx, &k, err);
}

static tpx_status local_all_gather(void *ctx, const void *send, void *recv,
                                   size_t count, tpx_dtype dtype,
                                   tpx_error *err) {
  lcall k = {C_ALL_GATHER, send, recv, count, dtype, 0, 0};
  return run(ctx, &k, err);
}

static tpx_status local_broadcast(void *ctx, const void *send, void *recv,
                                  size_t count, tpx_dtype dtype, int root,
                                  tpx_error *err) {
  lcall k = {C_BROADCAST, send, recv, count, dtype, 0, root};
  return run(ctx, &k, err);
}

static tpx_status local_all_to_all(void *ctx, const void *send, void *recv,
                                   size_t count, tpx_dtype dtype,
                                   tpx_error *err) {
  lcall k = {C_ALL_TO_ALL, send, recv, count, dtype, 0, 0};
  return run(ctx, &k, err);
}

static tpx_status local_barrier(void *ctx, tpx_error *err) {
  lcall k = {C_BARRIER, NULL, NULL, 0, TPX_DTYPE_U8, 0, 0};
  return run(ctx, &k, err);
}

static const tpx_comm_iface local_iface = {
    .name = "local",
    .split = local_split,
    .destroy = local_destroy,
    .all_gather = local_all_gather,
    .reduce_scatter = local_reduce_scatter,
    .all_reduce = local_all_reduce,
    .broadcast = local_broadcast,
    .all_to_all = local_all_to_all,
    .barrier = local_barrier,
    .abort = local_abort,
    .has_avg = 1,
};

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
    group_free(g);
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
  r->u.clock = calloc((size_t)n, sizeof *r->u.clock);
  lgroup *world = r->th && r->u.done && r->u.clock ? group_new(&r->u, n) : NULL;
  if (!world) {
    lrun_free(r);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
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
    mark_idle(&r->u.clock[t->rank], t->comm->timeout_s);
    if (t->st == TPX_OK)
      t->st = t->fn(t->comm, t->arg, &t->err);
    /* A failed rank releases the peers that wait for it; one that is done
     * lets them see it will never come (wait_entry). */
    if (t->st != TPX_OK)
      world_abort(&r->u, TPX_COMM, "rank %d failed: %s", t->rank,
                  t->err.message[0] ? t->err.message : tpx_status_str(t->st));
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
  int64_t until = atomic_load_explicit(&k->idle_until, memory_order_acquire);
  if (until == INT64_MAX)
    return 0; /* inside a collective: it returns from there */
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
    tpx_comm *comm = c ? tpx__comm_new(&local_iface, c, i, nranks) : NULL;
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

/* The options, the tests' switches among them (comm/local_test.h). */
static tpx_status read_options(const tpx_local_options *opts, lspec *sp,
                               tpx_error *err) {
  tpx_local_options o = TPX_LOCAL_OPTIONS_INIT;
  int sim = 0;
  if (opts && opts->struct_size == sizeof(tpx__local_test_options) &&
      ((const tpx__local_test_options *)opts)->magic == TPX__LOCAL_TEST_MAGIC) {
    const tpx__local_test_options *t = (const tpx__local_test_options *)opts;
    sim = t->sim_device_memory;
    sp->fail_ranks = t->fail_alloc_ranks;
    sp->managed = t->cuda_managed;
    memcpy(&o, opts, sizeof o);
    o.struct_size = sizeof o;
    o.cuda_memory |= sp->managed;
  } else if (opts) {
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
  sp->ms = sim ? &tpx__ms_sim : &tpx__ms_host;
  sp->dev = sim || o.cuda_memory;
  sp->cuda = o.cuda_memory;
  sp->timeout_s = o.timeout_s;
  /* 0: the default, TPX_COMM_TIMEOUT (refused when malformed) or 600 */
  return o.timeout_s > 0 ? TPX_OK : tpx__comm_env_timeout(&sp->timeout_s, err);
}

tpx_status tpx_local_run(int nranks, tpx_local_fn fn, void *arg,
                         tpx_error *err) {
  return tpx_local_run_opts(nranks, NULL, fn, arg, err);
}

tpx_status tpx_local_run_opts(int nranks, const tpx_local_options *opts,
                              tpx_local_fn fn, void *arg, tpx_error *err) {
  lspec sp = {.fn = fn, .arg = arg};
  tpx_status st = read_options(opts, &sp, err);
  if (st != TPX_OK)
    return st;
  if (!fn)
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
