/* read.c — fetching a box's bytes from a checkpoint file
 * (tpx_checkpoint_read_slice). The per-parameter reads built on it are in
 * read_params.c.
 *
 * Only the box's runs are read (see tpx__box_runs: one range for a dim-0
 * slice, one per row for a dim-1 slice; contiguous rows are one range).
 * Same dtype: straight into the caller's buffer. Other dtypes: through a
 * bounded bounce buffer, converted piece by piece; an FP8 weight with its
 * `_scale_inv` read into floats is dequantized on the way (dequant.c).
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"

/* Bounce buffer for converted reads. */
#define BOUNCE_BYTES ((size_t)1 << 20)

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
                                const tpx__st_tensor *t, const tpx__box_runs *g,
                                int64_t e0, int64_t e1, tpx_dtype dtype,
                                void *dst, const tpx__ckpt_dequant *dq,
                                tpx_error *err) {
  const tpx__st_file *f = &rd->load.files[t->file];
  int64_t base = f->data_start + t->begin;
  size_t ssz = tpx_dtype_size(t->dtype), dsz = tpx_dtype_size(dtype);
  int same = t->dtype == dtype;
  if (dq && dq->scale == NULL)
    dq = NULL;
  char *bounce = NULL;
  float *wide = NULL; /* dequantizing: the f32 elements, scaled in place */
  size_t bounce_elems = BOUNCE_BYTES / (dq ? sizeof(float) : ssz);
  if (!same) {
    bounce = malloc(BOUNCE_BYTES);
    wide = dq ? malloc(bounce_elems * sizeof *wide) : NULL;
    if (bounce == NULL || (dq && wide == NULL)) {
      free(bounce);
      free(wide);
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory reading '%s'",
                           t->name);
    }
  }
  tpx_status st = TPX_OK;
  char *out = dst;
  int64_t e = e0;
  while (e < e1 && st == TPX_OK) {
    int64_t r = e / g->run_elems, within = e % g->run_elems;
    int64_t n = g->run_elems - within;
    if (n > e1 - e)
      n = e1 - e;
    int64_t at = tpx__box_run_start(g, r) + within; /* the tensor's element */
    int64_t off = base + at * (int64_t)ssz;
    if (same) {
      st = fetch(rd, t, off, (size_t)n * ssz, out, err);
    } else {
      for (int64_t k = 0; k < n && st == TPX_OK;) {
        size_t m =
            (size_t)(n - k) < bounce_elems ? (size_t)(n - k) : bounce_elems;
        char *o = out + (size_t)k * dsz;
        st = fetch(rd, t, off + k * (int64_t)ssz, m * ssz, bounce, err);
        if (st == TPX_OK && dq) {
          /* upstream's order: widen to f32, one f32 product, then round */
          st = tpx_checkpoint_convert(wide, TPX_DTYPE_F32, bounce, t->dtype, m,
                                      err);
          tpx__ckpt_dequant_run(dq, at + k, wide, m);
          if (st == TPX_OK)
            st = tpx_checkpoint_convert(o, dtype, wide, TPX_DTYPE_F32, m, err);
        } else if (st == TPX_OK)
          st = tpx_checkpoint_convert(o, dtype, bounce, t->dtype, m, err);
        k += (int64_t)m;
      }
    }
    out += (size_t)n * dsz;
    e += n;
  }
  free(bounce);
  free(wide);
  return st;
}

tpx_status tpx_checkpoint_read_slice(const tpx_checkpoint_reader *rd,
                                     int64_t tensor, const tpx_slice *slice,
                                     tpx_dtype dtype, void *dst,
                                     size_t dst_bytes, tpx_error *err) {
  if (rd == NULL || tensor < 0 || (size_t)tensor >= rd->load.n)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_checkpoint_read_slice: tensor %lld is out of "
                         "range",
                         (long long)tensor);
  const tpx__st_tensor *t = &rd->load.t[tensor];
  if (!tpx__ckpt_can_convert(t->dtype, dtype))
    return tpx_error_set(
        err, TPX_UNSUPPORTED, "%s: tensor '%s': cannot read %s as %s",
        rd->load.files[t->file].path, t->name, tpx_dtype_short_name(t->dtype),
        tpx_dtype_short_name(dtype));
  tpx__box_runs g;
  tpx_status st =
      tpx__box_runs_init(t->shape, t->ndim, slice, t->name, &g, err);
  if (st != TPX_OK)
    return st;
  if ((uint64_t)g.numel * tpx_dtype_size(dtype) > dst_bytes)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tensor '%s': the slice needs %lld bytes of %s, the "
                         "buffer holds %zu",
                         t->name,
                         (long long)(g.numel * (int64_t)tpx_dtype_size(dtype)),
                         tpx_dtype_short_name(dtype), dst_bytes);
  if (g.numel > 0 && dst == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tensor '%s': NULL destination", t->name);
  tpx__ckpt_dequant dq;
  st = tpx__ckpt_dequant_init(rd, t, dtype, &dq, err);
  if (st == TPX_OK)
    st = tpx__ckpt_read_elems(rd, t, &g, 0, g.numel, dtype, dst, &dq, err);
  tpx__ckpt_dequant_free(&dq);
  return st;
}
