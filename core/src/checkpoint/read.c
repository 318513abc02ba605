/* read.c — fetching a box's bytes from a checkpoint file, and the
 * multi-threaded per-rank read of every parameter.
 *
 * Only the box's runs are read (see tpx__box_runs: one range for a dim-0
 * slice, one per row for a dim-1 slice; contiguous rows are one range).
 * Same dtype: straight into the caller's buffer. Other dtypes: through a
 * bounded bounce buffer, converted piece by piece.
 *
 * pread vs mmap (bench/ckpt/run.sh: 1.1 GB bf16 Llama-shaped checkpoint
 * in two shards, warm page cache, every rank's slices at tp=8, 4 threads
 * on 2 shared cores): mmap + memcpy 2750 MB/s, pread 907 MB/s, `cat >
 * /dev/null` 1723 MB/s; at tp=4 x dp_shard=2: mmap 1846, pread 952. mmap
 * is the default: the copy out of the mapped page cache is a user-space
 * memcpy, which for large copies uses non-temporal stores into the
 * destination, while pread's kernel copy_to_user write-allocates every
 * destination line (the destination is ~1 GB, far beyond the caches), and
 * the strided rows of dim-1 slices cost no system call each. The cost:
 * a file truncated by someone else while it is being read raises SIGBUS
 * (sizes are checked at open); io_method pread avoids that for files that
 * may change underneath (network filesystems, files being rewritten). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"

/* Bounce buffer for converted reads, and the size of one work item of a
 * multi-threaded read. */
#define BOUNCE_BYTES ((size_t)1 << 20)
#define ITEM_BYTES ((int64_t)8 << 20)

/* Reads `len` bytes at absolute offset `off` of file `file` into buf. */
static tpx_status fetch(const tpx_checkpoint_reader *rd,
                        const tpx__st_tensor *t, int64_t off, size_t len,
                        void *buf, tpx_error *err) {
  const tpx__st_file *f = &rd->load.files[t->file];
  tpx_checkpoint_reader *mut = (tpx_checkpoint_reader *)rd; /* counters */
  atomic_fetch_add(&mut->bytes_read, (long long)len);
  atomic_fetch_add(&mut->read_calls, 1);
  if (rd->maps) {
    memcpy(buf, rd->maps[t->file] + off, len);
    return TPX_OK;
  }
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(rd->fds[t->file], (char *)buf + got, len - got,
                      (off_t)(off + (int64_t)got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return tpx_error_set(err, TPX_IO,
                           "%s: tensor '%s': reading %zu bytes at offset "
                           "%lld: %s",
                           f->path, t->name, len, (long long)off,
                           r < 0 ? strerror(errno)
                                 : "unexpected end of file (truncated "
                                   "after it was opened?)");
    got += (size_t)r;
  }
  return TPX_OK;
}

tpx_status tpx__ckpt_read_elems(const tpx_checkpoint_reader *rd,
                                const tpx__st_tensor *t,
                                const tpx__box_runs *g, int64_t e0, int64_t e1,
                                tpx_dtype dtype, void *dst, tpx_error *err) {
  const tpx__st_file *f = &rd->load.files[t->file];
  int64_t base = f->data_start + t->begin;
  size_t ssz = tpx_dtype_size(t->dtype), dsz = tpx_dtype_size(dtype);
  int same = t->dtype == dtype;
  char *bounce = NULL;
  size_t bounce_elems = BOUNCE_BYTES / ssz;
  if (!same) {
    bounce = malloc(BOUNCE_BYTES);
    if (bounce == NULL)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory reading '%s'",
                           t->name);
  }
  tpx_status st = TPX_OK;
  char *out = dst;
  int64_t e = e0;
  while (e < e1 && st == TPX_OK) {
    int64_t r = e / g->run_elems, within = e % g->run_elems;
    int64_t n = g->run_elems - within;
    if (n > e1 - e)
      n = e1 - e;
    int64_t off = base + (tpx__box_run_start(g, r) + within) * (int64_t)ssz;
    if (same) {
      st = fetch(rd, t, off, (size_t)n * ssz, out, err);
    } else {
      for (int64_t k = 0; k < n && st == TPX_OK;) {
        size_t m = (size_t)(n - k) < bounce_elems ? (size_t)(n - k)
                                                   : bounce_elems;
        st = fetch(rd, t, off + k * (int64_t)ssz, m * ssz, bounce, err);
        if (st == TPX_OK)
          st = tpx_checkpoint_convert(out + (size_t)k * dsz, dtype, bounce,
                                      t->dtype, m, err);
        k += (int64_t)m;
      }
    }
    out += (size_t)n * dsz;
    e += n;
  }
  free(bounce);
  return st;
}

/* ---- every parameter of a rank, on several threads ---- */

typedef struct work_item {
  const tpx__st_tensor *t;
  int64_t param; /* for the geometry */
  int64_t e0, e1;
  tpx_dtype dtype;
  char *dst; /* where element e0 goes */
} work_item;

typedef struct work {
  const tpx_checkpoint_reader *rd;
  tpx__box_runs *geo; /* [num_params] */
  work_item *items;
  size_t num_items;
  atomic_size_t next;
  atomic_int failed;
  pthread_mutex_t lock;
  tpx_error err; /* the first failure */
  tpx_status status;
} work;

static void *worker(void *arg) {
  work *w = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&w->next, 1);
    if (i >= w->num_items || atomic_load(&w->failed))
      break;
    const work_item *it = &w->items[i];
    tpx_error e;
    tpx_error_clear(&e);
    tpx_status st = tpx__ckpt_read_elems(w->rd, it->t, &w->geo[it->param],
                                         it->e0, it->e1, it->dtype, it->dst,
                                         &e);
    if (st != TPX_OK) {
      pthread_mutex_lock(&w->lock);
      if (!atomic_load(&w->failed)) {
        w->err = e;
        w->status = st;
        atomic_store(&w->failed, 1);
      }
      pthread_mutex_unlock(&w->lock);
      break;
    }
  }
  return NULL;
}

/* Plans the items: each parameter's box cut into pieces of ~ITEM_BYTES. */
static tpx_status plan_items(work *w, const tpx_sharding *sh, int64_t rank,
                             const tpx_checkpoint_dest *dests,
                             tpx_error *err) {
  const tpx_checkpoint_reader *rd = w->rd;
  const tpx_model *model = tpx_sharding_model(sh);
  size_t np = tpx_model_num_params(model), cap = 0;
  for (size_t p = 0; p < np; p++) {
    if (dests[p].data == NULL)
      continue;
    int64_t ti = tpx_checkpoint_param_tensor(rd, model, (int64_t)p);
    if (ti < 0)
      continue; /* read from several tensors after the threads: fold.c */
    const tpx__st_tensor *t = &rd->load.t[ti];
    tpx_param_info info;
    tpx_slice slice;
    tpx_status st = tpx_model_param(model, (int64_t)p, &info, err);
    if (st == TPX_OK)
      st = tpx_sharding_local_slice(sh, (int64_t)p, rank, &slice, err);
    if (st == TPX_OK)
      st = tpx__box_runs_init(t->shape, t->ndim, &slice, info.fqn,
                              &w->geo[p], err);
    if (st != TPX_OK)
      return st;
    const tpx__box_runs *g = &w->geo[p];
    size_t dsz = tpx_dtype_size(dests[p].dtype);
    if (!tpx__ckpt_can_convert(t->dtype, dests[p].dtype))
      return tpx_error_set(err, TPX_UNSUPPORTED,
                           "parameter '%s': cannot read %s as %s", info.fqn,
                           tpx_dtype_short_name(t->dtype),
                           tpx_dtype_short_name(dests[p].dtype));
    if ((uint64_t)g->numel * dsz > dests[p].bytes)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "parameter '%s': rank %lld's slice needs %lld "
                           "bytes, the buffer holds %zu",
                           info.fqn, (long long)rank,
                           (long long)(g->numel * (int64_t)dsz),
                           dests[p].bytes);
    int64_t per = ITEM_BYTES / (int64_t)tpx_dtype_size(t->dtype);
    for (int64_t e = 0; e < g->numel; e += per) {
      if (w->num_items == cap) {
        cap = cap ? cap * 2 : 64;
        work_item *items = realloc(w->items, cap * sizeof *items);
        if (items == NULL)
          return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
        w->items = items;
      }
      w->items[w->num_items++] = (work_item){
          t, (int64_t)p, e, e + per < g->numel ? e + per : g->numel,
          dests[p].dtype, (char *)dests[p].data + (size_t)e * dsz};
    }
  }
  return TPX_OK;
}

tpx_status tpx_checkpoint_read_rank(const tpx_checkpoint_reader *rd,
                                    const tpx_sharding *sh, int64_t rank,
                                    const tpx_checkpoint_dest *dests,
                                    tpx_error *err) {
  if (rd == NULL || sh == NULL || dests == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_read_rank: NULL argument");
  const tpx_model *model = tpx_sharding_model(sh);
  if (rank < 0 || rank >= tpx_mesh_world_size(tpx_sharding_mesh(sh)))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_checkpoint_read_rank: rank %lld is outside the "
                         "mesh",
                         (long long)rank);
  tpx_status st = tpx_checkpoint_check_model(rd, model, err);
  if (st != TPX_OK)
    return st;
  size_t np = tpx_model_num_params(model);
  work w;
  memset(&w, 0, sizeof w);
  w.rd = rd;
  atomic_init(&w.next, 0);
  atomic_init(&w.failed, 0);
  w.geo = calloc(np ? np : 1, sizeof *w.geo);
  if (w.geo == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  st = plan_items(&w, sh, rank, dests, err);
  if (st == TPX_OK) {
    pthread_mutex_init(&w.lock, NULL);
    int nt = rd->num_threads;
    if ((size_t)nt > w.num_items)
      nt = (int)w.num_items;
    pthread_t tids[256];
    int started = 0;
    for (int i = 1; i < nt; i++)
      if (pthread_create(&tids[started], NULL, worker, &w) == 0)
        started++;
    worker(&w); /* the caller's thread works too */
    for (int i = 0; i < started; i++)
      pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&w.lock);
    if (atomic_load(&w.failed))
      st = tpx_error_set(err, w.status, "%s", w.err.message);
  }
  /* Fused expert parameters stored per expert, on this thread. */
  for (size_t p = 0; st == TPX_OK && p < np; p++) {
    if (dests[p].data == NULL ||
        tpx_checkpoint_param_tensor(rd, model, (int64_t)p) >= 0)
      continue;
    tpx_slice slice;
    st = tpx_sharding_local_slice(sh, (int64_t)p, rank, &slice, err);
    if (st == TPX_OK)
      st = tpx__ckpt_read_folded(rd, model, (int64_t)p, &slice,
                                 dests[p].dtype, dests[p].data,
                                 dests[p].bytes, err);
  }
  free(w.items);
  free(w.geo);
  return st;
}
