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
 * buffers until all are done. Each collective also keeps this rank's
 * clock (local_impl.h), by which the launcher tells a hung rank.
 *
 * Not here: tpx_local_run, the launcher (local_run.c), argument checks and
 * defaults (comm.c), the reduction kernels (device/elem_reduce.c). */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/barrier.h"
#include "comm/local_dev.h"
#include "comm/local_impl.h"
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

/* ---- groups ------------------------------------------------------------- */

lgroup *tpx__lgroup_new(luniverse *u, int size) {
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

void tpx__lgroup_free(lgroup *g) {
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
    tpx__lgroup_free(g);
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
    g = tpx__lgroup_new(w->u, gsize);
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
  *out = tpx__comm_new(&tpx__local_iface, c, index, gsize);
  if (!*out) {
    local_destroy(c);
    return tpx_error_set(err, TPX_NO_MEMORY, "local split");
  }
  (*out)->ms = c->ms;
  c->self = *out;
  return TPX_OK;
}

/* ---- the abort ---------------------------------------------------------- */

void tpx__lworld_abort(luniverse *u, tpx_status st, const char *fmt, ...) {
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

/* This rank's error for `coll` once the world is aborted. */
static tpx_status aborted_error(lctx *c, int coll, tpx_error *err) {
  char where[64];
  tpx__comm_where(c->self, where, sizeof where);
  return tpx_error_set(err, c->u->why_status, "local %s over %s: %s",
                       coll_name(coll), where, c->u->why);
}

static void local_abort(void *ctx, const char *why) {
  lctx *c = ctx;
  tpx__lworld_abort(c->u, TPX_COMM, "rank %d failed: %s",
                    c->g->world_rank[c->rank], why);
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
  int64_t t0 = now_ns(); /* local_impl.h */
  double limit = c->self->timeout_s;
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
        tpx__lworld_abort(u, TPX_COMM,
                          "rank %d returned from its function without joining "
                          "%s over %s",
                          wr, coll_name(coll), where);
      } else if ((double)(now_ns() - t0) * 1e-9 > limit) {
        name_missing(c, seq);
        tpx__lworld_abort(u, TPX_TIMEOUT,
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
  lclock_enter(c->clock);
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
  lclock_leave(c->clock, c->self->timeout_s);
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

const tpx_comm_iface tpx__local_iface = {
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
