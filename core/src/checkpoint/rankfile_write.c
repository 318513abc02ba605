/* rankfile_write.c — tpx_shard_write: a Hugging Face checkpoint cut into one
 * tpx-shard/1 file per rank, rank-0000r-of-0000W.safetensors, each holding
 * that rank's local piece of every stored tensor under its global name
 * (fused MoE expert parameters stored per expert: the fused parameter's
 * piece, with the per-expert names in its "fold" metadata, so that a merge
 * writes the original tensors back). The pieces are read with the per-rank
 * reader (only the slice's bytes) and written with the checkpoint writer
 * into temporaries, fsync'd, and renamed to their final names together
 * once every file of the run is complete (publish_set.c). Not the
 * metadata's text (rankfile_meta.c) nor the source digest (source_digest.c). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/rankfile_impl.h"
#include "checkpoint/writer_impl.h"
#include "model/fp8_view.h"
#include "model/model_view.h"

/* 1 when stored tensor `name` is one of the model's buffers (under its
 * module name or the checkpoint's, tpx_model_canonical_name). */
static int is_buffer(const tpx_model *model, const char *name) {
  char canon[1024];
  size_t nb = tpx_model_num_buffers(model);
  if (nb == 0 || tpx_model_canonical_name(model, name, canon, sizeof canon) < 0)
    return 0;
  for (size_t b = 0; b < nb; b++) {
    const char *fqn = NULL;
    if (tpx_model_buffer(model, b, &fqn, NULL, NULL, NULL, NULL) == TPX_OK &&
        strcmp(fqn, canon) == 0)
      return 1;
  }
  return 0;
}

/* Marks the stored tensors that are sources of a fused parameter and
 * appends those parameters to out[nt...] (*k of them). */
static tpx_status list_fused(const tpx_sharding *sh,
                             const tpx_checkpoint_reader *rd, char *is_source,
                             tpx__shard_out *out, size_t *k, tpx_error *err) {
  const tpx_model *model = tpx_sharding_model(sh);
  size_t nt = tpx_checkpoint_num_tensors(rd), np = tpx_model_num_params(model);
  for (size_t p = 0; p < np; p++) {
    if (tpx_checkpoint_param_tensor(rd, model, (int64_t)p) >= 0)
      continue;
    tpx_param_info info;
    int64_t ns = tpx_checkpoint_param_num_sources(rd, model, (int64_t)p);
    tpx_status st = tpx_model_param(model, (int64_t)p, &info, err);
    if (st != TPX_OK)
      return st;
    /* FP8 sources (tpx_model_quantized) are cut as stored: the piece
     * takes their F8 dtype, all of them or none */
    tpx_dtype dt = info.dtype;
    for (int64_t s = 0; s < ns; s++) {
      tpx_checkpoint_source src;
      st = tpx_checkpoint_param_source(rd, model, (int64_t)p, s, &src, err);
      if (st != TPX_OK)
        return st;
      is_source[src.tensor] = 1;
      const tpx__st_tensor *t = &rd->load.t[src.tensor];
      int f8 = tpx__ckpt_fp8_ok(model, t, TPX__FP8_CHECK);
      if (s == 0 && f8)
        dt = t->dtype;
      else if (f8 != (dt != info.dtype) || (f8 && t->dtype != dt))
        return tpx_error_set(err, TPX_UNSUPPORTED,
                             "parameter '%s' is read from stored tensors of "
                             "different dtypes ('%s' is %s): FP8 sources are "
                             "cut as stored only when all of them are FP8",
                             info.fqn, t->name,
                             tpx_dtype_safetensors_name(t->dtype));
    }
    tpx__shard_out *o = &out[nt + *k];
    *o = (tpx__shard_out){info.fqn, dt, info.ndim, {0}, -1, (int64_t)p, {0}};
    memcpy(o->shape, info.shape, sizeof o->shape);
    ++*k;
  }
  return TPX_OK;
}

/* The rank file's tensors: every stored tensor that is a parameter, then
 * every fused expert parameter stored per expert (its per-expert tensors
 * are not written on their own). `out` holds num_tensors + num_params. */
static tpx_status list_tensors(const tpx_sharding *sh,
                               const tpx_checkpoint_reader *rd, int64_t rank,
                               tpx__shard_out *out, size_t *count,
                               tpx_error *err) {
  const tpx_model *model = tpx_sharding_model(sh);
  size_t nt = tpx_checkpoint_num_tensors(rd), k = 0, n = 0;
  char *is_source = calloc(nt ? nt : 1, 1);
  if (is_source == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx_status st = TPX_OK;
  /* An FP8 weight the model knows (tpx_model_quantized) is cut as stored
   * (F8), as a parameter of its own or a source of a fused one; any other
   * F8 tensor with a scale would need dequantizing: refused
   * (docs/CHECKPOINT.md "FP8 checkpoints"). */
  for (size_t i = 0; i < nt && st == TPX_OK; i++)
    if (!tpx__ckpt_fp8_ok(model, &rd->load.t[i], TPX__FP8_CHECK))
      st = tpx__fp8_refuse_read(&rd->load, &rd->load.t[i], rd->load.t[i].name,
                                err);
  if (st == TPX_OK)
    st = list_fused(sh, rd, is_source, out, &k, err);
  for (size_t i = 0; i < nt && st == TPX_OK; i++) {
    tpx_checkpoint_tensor t;
    tpx_checkpoint_tensor_info(rd, i, &t, NULL);
    if (is_source[i])
      continue;
    int64_t p = tpx__mv_find_param_aliased(model, t.name);
    if (p < 0 &&
        (tpx__fp8_is_companion(model, t.name) || is_buffer(model, t.name))) {
      /* a buffer, or an FP8 weight's scales (upstream keeps them whole on
       * every rank too): whole on every rank, never sharded */
      out[n] =
          (tpx__shard_out){t.name, t.dtype, t.ndim, {0}, (int64_t)i, -1, {0}};
      memcpy(out[n].shape, t.shape, sizeof out[n].shape);
      out[n].slice.ndim = t.ndim;
      memcpy(out[n].slice.length, t.shape, sizeof t.shape[0] * (size_t)t.ndim);
      n++;
      continue;
    }
    if (p < 0) {
      st = tpx_error_set(err, TPX_VALIDATION,
                         "%s: tensor '%s' is not a parameter of the model",
                         t.file, t.name);
      break;
    }
    out[n] = (tpx__shard_out){t.name, t.dtype, t.ndim, {0}, (int64_t)i, p, {0}};
    memcpy(out[n].shape, t.shape, sizeof out[n].shape);
    n++;
  }
  free(is_source);
  if (st != TPX_OK)
    return st;
  memmove(out + n, out + nt, k * sizeof *out);
  n += k;
  for (size_t i = 0; i < n && st == TPX_OK; i++)
    if (out[i].param >= 0)
      st = tpx_sharding_local_slice(sh, out[i].param, rank, &out[i].slice, err);
  *count = n;
  return st;
}

/* What every rank file of the run carries besides its own metadata. The
 * source digest is computed while the files are written: they are written
 * with SOURCE_PENDING in its place, replaced when each is sealed. */
typedef struct run_ids {
  char run_id[72];
  char source[40];
} run_ids;

#define SOURCE_PENDING "xxh64:----------------"
#define SOURCE_KEY "\"tpx.source\":\""
_Static_assert(sizeof SOURCE_PENDING - 1 == TPX__SOURCE_DIGEST_LEN,
               "the stand-in is replaced in place: same length");

/* What the writing threads share (write_ranks): the ranks left, the
 * progress, the first failure; all under `lock`. */
typedef struct pool {
  const tpx_checkpoint_reader *rd;
  const tpx_sharding *sh;
  const tpx__out_dir *d;
  const tpx_shard_write_options *o;
  const run_ids *ids;
  tpx__source_digest *digest; /* the value SOURCE_PENDING stands for */
  tpx__ckpt_set *set;         /* slot r - first: rank r's sealed file */
  int64_t first;
  int pending; /* written files each thread keeps open (see PENDING) */
  pthread_mutex_t lock;
  int64_t next, last;
  tpx_shard_progress prog;
  tpx_status st;
  tpx_error err;
} pool;

/* Progress: `items` more pieces of `bytes` bytes, `files` more files; the
 * caller's callback sees one count at a time. */
static void progress(pool *p, int64_t items, int64_t bytes, int64_t files) {
  pthread_mutex_lock(&p->lock);
  p->prog.items += items;
  p->prog.bytes += bytes;
  p->prog.files += files;
  if (p->o->progress)
    p->o->progress(&p->prog, p->o->progress_user);
  pthread_mutex_unlock(&p->lock);
}

/* Reads each tensor's piece and writes it into the rank file: a stored
 * tensor of the file's dtype straight from the source's mapping
 * (direct.c), the others through a buffer. */
static tpx_status copy_pieces(const tpx_sharding *sh,
                              const tpx_checkpoint_reader *rd, int64_t rank,
                              const tpx__shard_out *ts, size_t n,
                              tpx_checkpoint_writer *w, pool *pl,
                              tpx_error *err) {
  void *buf = NULL;
  tpx_status st = TPX_OK;
  for (size_t i = 0; i < n && st == TPX_OK; i++) {
    const tpx__shard_out *t = &ts[i];
    size_t nb = (size_t)tpx_slice_nbytes(&t->slice, t->dtype);
    int done = 0;
    if (t->tensor >= 0)
      st = tpx__ckpt_copy_direct(rd, t->tensor, &t->slice, w, t->name, &done,
                                 err);
    if (st == TPX_OK && done)
      progress(pl, 1, (int64_t)nb, 0);
    if (st != TPX_OK || done)
      continue;
    void *nbuf = realloc(buf, nb ? nb : 1);
    if (nbuf == NULL) {
      st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory for tensor '%s'",
                         t->name);
      break;
    }
    buf = nbuf;
    tpx_slice local = t->slice;
    memset(local.offset, 0, sizeof local.offset);
    st = t->tensor >= 0 ? tpx_checkpoint_read_slice(rd, t->tensor, &t->slice,
                                                    t->dtype, buf, nb, err)
                        : tpx_checkpoint_read_param(rd, sh, t->param, rank,
                                                    t->dtype, buf, nb, err);
    if (st == TPX_OK)
      st = tpx_checkpoint_write_slice(w, t->name, &local, t->dtype, buf, err);
    if (st == TPX_OK)
      progress(pl, 1, (int64_t)nb, 0);
  }
  free(buf);
  return st;
}

/* Writes rank `rank`'s file up to its finish: *w_out is the unfinished
 * writer (its data written, writeback started), finished by the caller. */
static tpx_status shard_rank(pool *pl, int64_t rank,
                             tpx_checkpoint_writer **w_out, tpx_error *err) {
  const tpx_sharding *sh = pl->sh;
  const tpx_checkpoint_reader *rd = pl->rd;
  const tpx_shard_write_options *o = pl->o;
  const run_ids *ids = pl->ids;
  const char *dir = pl->d->path;
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  size_t cap = tpx_checkpoint_num_tensors(rd) +
               tpx_model_num_params(tpx_sharding_model(sh)),
         n = 0;
  tpx__shard_out *ts = calloc(cap ? cap : 1, sizeof *ts);
  tpx_checkpoint_entry *entries = calloc(cap ? cap : 1, sizeof *entries);
  int64_t *sources = calloc(cap ? cap : 1, sizeof *sources);
  char *mesh_json = NULL, *tensors_json = NULL;
  const char *format = TPX_SHARD_FORMAT;
  tpx_checkpoint_writer *w = NULL;
  tpx_status st = !entries || !ts || !sources
                      ? tpx_error_set(err, TPX_NO_MEMORY, "out of memory")
                      : TPX_OK;
  if (st == TPX_OK)
    st = list_tensors(sh, rd, rank, ts, &n, err);
  for (size_t i = 0; i < n && st == TPX_OK; i++) {
    entries[i].name = ts[i].name;
    entries[i].dtype = ts[i].dtype;
    entries[i].ndim = ts[i].ndim;
    memcpy(entries[i].shape, ts[i].slice.length, sizeof entries[i].shape);
    sources[i] = ts[i].tensor >= 0
                     ? tpx__ckpt_direct_source_offset(rd, ts[i].tensor,
                                                      &ts[i].slice, ts[i].dtype)
                     : -1;
  }
  if (st == TPX_OK)
    st = tpx__rankfile_meta_build(sh, rd, ts, n, &mesh_json, &tensors_json,
                                  &format, err);
  if (st == TPX_OK) {
    char fname[96], rank_text[32], world_text[32];
    tpx_shard_file_name(rank, world, fname, sizeof fname);
    snprintf(rank_text, sizeof rank_text, "%lld", (long long)rank);
    snprintf(world_text, sizeof world_text, "%lld", (long long)world);
    const char *keys[] = {"format",         "tpx.mesh",    "tpx.rank",
                          "tpx.world_size", "tpx.tensors", "tpx.run_id",
                          "tpx.source",     "tpx.config"};
    const char *vals[] = {format,      mesh_json,     rank_text,
                          world_text,  tensors_json,  ids->run_id,
                          ids->source, o->config_json};
    tpx_checkpoint_writer_options wo = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
    wo.file_name = fname;
    wo.num_metadata = o->config_json ? 8 : 7;
    wo.metadata_keys = keys;
    wo.metadata_values = vals;
    st = tpx__ckpt_writer_create_from(dir, entries, sources, n, &wo, &w, err);
  }
  if (st == TPX_OK)
    st = copy_pieces(sh, rd, rank, ts, n, w, pl, err);
  if (st == TPX_OK)
    *w_out = w;
  else
    tpx_checkpoint_writer_destroy(w);
  free(mesh_json);
  free(tensors_json);
  free(entries);
  free(sources);
  free(ts);
  return st;
}

/* Tensors of one rank file: a fused expert parameter replaces its
 * sources. */
static int64_t tensors_per_rank(const tpx_checkpoint_reader *rd,
                                const tpx_model *model) {
  int64_t n = (int64_t)tpx_checkpoint_num_tensors(rd);
  for (size_t i = 0; i < tpx_model_num_params(model); i++)
    if (tpx_checkpoint_param_tensor(rd, model, (int64_t)i) < 0)
      n += 1 - tpx_checkpoint_param_num_sources(rd, model, (int64_t)i);
  return n;
}

/* The run's ids: the caller's run id or a new one, the source digest's
 * stand-in. */
static void make_ids(const tpx_shard_write_options *o, run_ids *ids) {
  if (o->run_id)
    snprintf(ids->run_id, sizeof ids->run_id, "%s", o->run_id);
  else
    tpx__shard_new_run_id(ids->run_id, sizeof ids->run_id);
  snprintf(ids->source, sizeof ids->source, "%s", SOURCE_PENDING);
}

/* Rank files whose data is written but not yet fsync'd: sealing each
 * right after its writes would leave the disk idle while the next file is
 * read and cut, and the CPU idle during each fsync. The writer starts the
 * writeback of every large piece as it goes (sync_file_range), and up to
 * PENDING files (over all threads) stay open before the oldest is sealed
 * (fsync, under its temporary name: publish_set.c), by which time most of
 * its data is on disk. */
#define PENDING 4

/* A rank file written, not yet sealed. */
typedef struct pending_file {
  tpx_checkpoint_writer *w;
  int64_t rank;
} pending_file;

/* Seals a written rank file: its source digest in place (waiting for the
 * digest threads the first time), fsync'd under its temporary name. */
static tpx_status seal_one(pool *p, pending_file *f, tpx_error *err) {
  char digest[40], find[64], put[64];
  tpx_status st =
      tpx__source_digest_finish(p->digest, digest, sizeof digest, err);
  snprintf(find, sizeof find, "%s%s", SOURCE_KEY, SOURCE_PENDING);
  snprintf(put, sizeof put, "%s%s", SOURCE_KEY, digest);
  if (st == TPX_OK)
    st = tpx__ckpt_set_add(p->set, (size_t)(f->rank - p->first), f->w, find,
                           put, err);
  tpx_checkpoint_writer_destroy(f->w);
  f->w = NULL;
  if (st == TPX_OK)
    progress(p, 0, 0, 1);
  return st;
}

static int failed(pool *p) {
  pthread_mutex_lock(&p->lock);
  int f = p->st != TPX_OK;
  pthread_mutex_unlock(&p->lock);
  return f;
}

/* One writing thread: takes the next rank until none is left or a thread
 * failed; keeps its last p->pending files open (see PENDING). */
static void *write_worker(void *arg) {
  pool *p = arg;
  pending_file pending[PENDING] = {{NULL, 0}};
  tpx_error err = {0};
  tpx_status st = TPX_OK;
  int64_t k = 0;
  while (st == TPX_OK) {
    pthread_mutex_lock(&p->lock);
    int64_t r = p->st == TPX_OK && p->next <= p->last ? p->next++ : -1;
    pthread_mutex_unlock(&p->lock);
    if (r < 0)
      break;
    pending_file *slot = &pending[k++ % p->pending];
    if (slot->w) /* the oldest pending file */
      st = seal_one(p, slot, &err);
    slot->rank = r;
    if (st == TPX_OK)
      st = shard_rank(p, r, &slot->w, &err);
  }
  /* the rest, oldest first; after an error here or in another thread only
   * destroyed (their temporaries removed) */
  for (int64_t j = 0; j < p->pending; j++) {
    pending_file *slot = &pending[(k + j) % p->pending];
    if (slot->w && st == TPX_OK && !failed(p))
      st = seal_one(p, slot, &err);
    tpx_checkpoint_writer_destroy(slot->w);
    slot->w = NULL;
  }
  pthread_mutex_lock(&p->lock);
  if (st != TPX_OK && p->st == TPX_OK) {
    p->st = st;
    p->err = err;
  }
  pthread_mutex_unlock(&p->lock);
  if (st != TPX_OK) /* its result is of no more use */
    tpx__source_digest_stop(p->digest);
  return NULL;
}

/* Threads that write rank files at once: up to the reader's thread count,
 * the online CPUs (the kernel's copies are CPU work) and the ranks. One
 * where a piece is read out of the reader's mapping in user space (a fused
 * expert parameter): a file truncated underneath raises SIGBUS in the
 * thread that reads, which must be the caller's. */
static int writer_threads(const tpx_checkpoint_reader *rd,
                          const tpx_sharding *sh, int64_t ranks) {
  const tpx_model *model = tpx_sharding_model(sh);
  if (rd->maps != NULL)
    for (size_t i = 0; i < tpx_model_num_params(model); i++)
      if (tpx_checkpoint_param_tensor(rd, model, (int64_t)i) < 0)
        return 1;
  return (int)tpx__ckpt_threads(rd, (size_t)ranks);
}

/* Writes ranks first..last into the locked directory. */
static tpx_status write_ranks(const tpx_checkpoint_reader *rd,
                              const tpx_sharding *sh, const tpx__out_dir *d,
                              const tpx_shard_write_options *o,
                              const run_ids *ids, tpx_error *err) {
  int64_t world = d->world;
  int64_t first = o->rank >= 0 ? o->rank : 0;
  int64_t last = o->rank >= 0 ? o->rank : world - 1;
  int64_t per_rank = tensors_per_rank(rd, tpx_sharding_model(sh));
  tpx__ckpt_set set;
  tpx__source_digest *digest = NULL;
  tpx_status st = tpx__ckpt_set_init(&set, (size_t)(last - first + 1), err);
  if (st == TPX_OK) /* read by threads of its own while the files are cut */
    st = tpx__source_digest_start(rd, &digest, err);
  if (st != TPX_OK) {
    tpx__ckpt_set_free(&set);
    return st;
  }
  pool p = {.rd = rd,
            .sh = sh,
            .d = d,
            .o = o,
            .ids = ids,
            .digest = digest,
            .set = &set,
            .first = first,
            .pending = PENDING,
            .lock = PTHREAD_MUTEX_INITIALIZER,
            .next = first,
            .last = last,
            .st = TPX_OK};
  for (int64_t r = first; r <= last; r++) {
    p.prog.total_bytes += tpx_sharding_rank_param_bytes(sh, r);
    p.prog.total_items += per_rank;
  }
  if (o->progress)
    o->progress(&p.prog, o->progress_user);
  int nt = writer_threads(rd, sh, last - first + 1);
  p.pending = PENDING / nt > 1 ? PENDING / nt : 1;
  pthread_t tids[64];
  int started = 0;
  for (int i = 1; i < nt && started < 64; i++)
    if (pthread_create(&tids[started], NULL, write_worker, &p) == 0)
      started++;
  write_worker(&p); /* the caller's thread writes too */
  for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
  pthread_mutex_destroy(&p.lock);
  tpx__source_digest_destroy(digest); /* after a failure, stopped early */
  /* every file complete: the set under its final names, the directory
   * fsync'd once; after a failure, no final name of this run */
  st = p.st != TPX_OK ? tpx_error_set(err, p.st, "%s", p.err.message)
                      : tpx__ckpt_set_publish(&set, d->fd, d->path, err);
  tpx__ckpt_set_free(&set);
  return st;
}

tpx_status tpx_shard_write(const tpx_checkpoint_reader *rd,
                           const tpx_sharding *sh, const char *dir,
                           const tpx_shard_write_options *opts,
                           tpx_error *err) {
  tpx_shard_write_options o = TPX_SHARD_WRITE_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof o)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_shard_write: options struct_size %zu is too "
                           "small",
                           opts->struct_size);
    o = *opts;
  }
  if (rd == NULL || sh == NULL || dir == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_shard_write: NULL argument");
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  if (o.rank < -1 || o.rank >= world)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "rank %lld is outside the mesh of %lld",
                         (long long)o.rank, (long long)world);
  if (o.run_id && !tpx__shard_run_id_ok(o.run_id))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "run id '%.80s' must be 1 to 64 printable ASCII "
                         "characters without spaces",
                         o.run_id);
  tpx__out_dir d;
  /* runs of one set that each write some ranks may share the directory */
  tpx_status st = tpx__out_dir_open(dir, TPX__OUT_RANKS, world, o.replace,
                                    o.rank >= 0, &d, err);
  run_ids ids;
  make_ids(&o, &ids);
  if (st == TPX_OK)
    st = write_ranks(rd, sh, &d, &o, &ids, err);
  char names[256];
  size_t removed =
      st == TPX_OK && o.replace
          ? tpx__out_dir_remove_older(&d, NULL, names, sizeof names)
          : 0;
  if (removed > 0 && o.note) {
    char msg[400];
    snprintf(msg, sizeof msg,
             "%s: removed %zu rank file%s of another mesh size (%s%s)", dir,
             removed, removed > 1 ? "s" : "", names,
             removed > 3 ? ", ..." : "");
    o.note(msg, o.note_user);
  }
  tpx__out_dir_close(&d);
  return st;
}
