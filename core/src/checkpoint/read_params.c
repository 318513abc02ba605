/* read_params.c — reading a model's parameters from a checkpoint: the
 * model check (every parameter stored with its shape and dtype, or folded
 * from several stored tensors: fold.c), one rank's slice of one parameter,
 * and the multi-threaded read of every parameter of a rank.
 * Not here: the byte reads (read.c), the reader object (reader.c). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "checkpoint/ckpt_internal.h"
#include "model/fp8_view.h"

/* The size of one work item of a multi-threaded read. */
#define ITEM_BYTES ((int64_t)8 << 20)

static const char *shape_text(char *buf, size_t size, const int64_t *shape,
                              int ndim) {
  return tpx__format_shape(buf, size, shape, ndim);
}

/* Parameter `param` is stored with the model's shape and dtype, or as
 * an FP8 weight the model knows (tpx_model_quantized: stored F8 beside
 * its scale) with its shape, as `into` allows (ckpt_internal.h: as
 * stored, or dequantized into floats). */
static tpx_status check_param(const tpx_checkpoint_reader *rd,
                              const tpx_model *model, int64_t param, int into,
                              tpx_error *err) {
  tpx_param_info p;
  tpx_status st = tpx_model_param(model, param, &p, err);
  if (st != TPX_OK)
    return st;
  int64_t ti = tpx_checkpoint_param_tensor(rd, model, param);
  if (ti < 0) /* per-expert tensors of a fused parameter, or missing */
    return tpx__ckpt_check_sources(rd, model, param, into, err);
  const tpx__st_tensor *t = &rd->load.t[ti];
  int fp8 = t->dtype != p.dtype && tpx__ckpt_fp8_ok(model, t, into);
  if (t->dtype != p.dtype && !fp8 &&
      (st = tpx__fp8_refuse_read(&rd->load, t, p.fqn, err)) != TPX_OK)
    return st;
  if ((t->dtype != p.dtype && !fp8) || t->ndim != p.ndim ||
      (p.ndim &&
       memcmp(t->shape, p.shape, (size_t)p.ndim * sizeof *t->shape))) {
    char a[200], b[200];
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' is %s %s, but the model's parameter "
                         "'%s' is %s %s",
                         rd->load.files[t->file].path, t->name,
                         shape_text(a, sizeof a, t->shape, t->ndim),
                         tpx_dtype_safetensors_name(t->dtype), p.fqn,
                         shape_text(b, sizeof b, p.shape, p.ndim),
                         tpx_dtype_safetensors_name(p.dtype));
  }
  return TPX_OK;
}

static tpx_status check_model(const tpx_checkpoint_reader *rd,
                              const tpx_model *model, int into,
                              tpx_error *err) {
  size_t n = tpx_model_num_params(model);
  for (size_t i = 0; i < n; i++) {
    tpx_status st = check_param(rd, model, (int64_t)i, into, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

tpx_status tpx_checkpoint_check_model(const tpx_checkpoint_reader *rd,
                                      const tpx_model *model, tpx_error *err) {
  if (rd == NULL || model == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_check_model: NULL argument");
  return check_model(rd, model, TPX__FP8_CHECK, err);
}

tpx_status tpx_checkpoint_read_param(const tpx_checkpoint_reader *rd,
                                     const tpx_sharding *sh, int64_t param,
                                     int64_t rank, tpx_dtype dtype, void *dst,
                                     size_t dst_bytes, tpx_error *err) {
  if (rd == NULL || sh == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_read_param: NULL argument");
  const tpx_model *model = tpx_sharding_model(sh);
  tpx_status st = check_param(rd, model, param, (int)dtype, err);
  if (st != TPX_OK)
    return st;
  tpx_slice slice;
  st = tpx_sharding_local_slice(sh, param, rank, &slice, err);
  if (st != TPX_OK)
    return st;
  int64_t ti = tpx_checkpoint_param_tensor(rd, model, param);
  if (ti < 0)
    return tpx__ckpt_read_folded(rd, model, param, &slice, dtype, dst,
                                 dst_bytes, err);
  return tpx_checkpoint_read_slice(rd, ti, &slice, dtype, dst, dst_bytes, err);
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
  tpx__box_runs *geo;    /* [num_params] */
  tpx__ckpt_dequant *dq; /* [num_params]: FP8 weights read into floats */
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
    tpx_status st =
        tpx__ckpt_read_elems(w->rd, it->t, &w->geo[it->param], it->e0, it->e1,
                             it->dtype, it->dst, &w->dq[it->param], &e);
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
                             const tpx_checkpoint_dest *dests, tpx_error *err) {
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
      st = tpx__box_runs_init(t->shape, t->ndim, &slice, info.fqn, &w->geo[p],
                              err);
    if (st == TPX_OK)
      st = tpx__ckpt_dequant_init(rd, t, dests[p].dtype, &w->dq[p], err);
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
      if (TPX_GROW(w->items, cap, w->num_items + 1, 64) != 0)
        return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      w->items[w->num_items++] =
          (work_item){t,
                      (int64_t)p,
                      e,
                      e + per < g->numel ? e + per : g->numel,
                      dests[p].dtype,
                      (char *)dests[p].data + (size_t)e * dsz};
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
  tpx_status st = check_model(rd, model, TPX__FP8_FLOAT, err);
  if (st != TPX_OK)
    return st;
  size_t np = tpx_model_num_params(model);
  work w;
  memset(&w, 0, sizeof w);
  w.rd = rd;
  atomic_init(&w.next, 0);
  atomic_init(&w.failed, 0);
  w.geo = calloc(np ? np : 1, sizeof *w.geo);
  w.dq = calloc(np ? np : 1, sizeof *w.dq);
  if (w.geo == NULL || w.dq == NULL) {
    free(w.geo);
    free(w.dq);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
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
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
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
      st = tpx__ckpt_read_folded(rd, model, (int64_t)p, &slice, dests[p].dtype,
                                 dests[p].data, dests[p].bytes, err);
  }
  for (size_t p = 0; p < np; p++) tpx__ckpt_dequant_free(&w.dq[p]);
  free(w.items);
  free(w.geo);
  free(w.dq);
  return st;
}
