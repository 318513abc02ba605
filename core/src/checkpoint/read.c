/* read.c — fetching a box's bytes from a checkpoint file
 * (tpx__ckpt_read_elems). The reads built on it are tpx_checkpoint_read_slice
 * (read_slice.c) and the per-parameter reads (read_params.c); dequant.c
 * reads an FP8 weight's scale through it.
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

/* v[i] *= the scale of the stored tensor's element at + i, for i < m
 * (tpx__ckpt_dequant, filled by dequant.c). */
static void dequant_run(const tpx__ckpt_dequant *dq, int64_t at, float *v,
                        size_t m) {
  if (dq->form == 2) { /* one scale */
    for (size_t i = 0; i < m; i++) v[i] = v[i] * dq->scale[0];
    return;
  }
  int64_t col = at % dq->cols, rest = at / dq->cols;
  int64_t row = rest % dq->rows, lead = rest / dq->rows;
  for (size_t i = 0; i < m; i++) {
    int64_t k = lead + dq->off_lead;
    if (dq->form == 1)
      k = (k * dq->brows + (row + dq->off_row) / dq->block) * dq->bcols +
          (col + dq->off_col) / dq->block;
    v[i] = v[i] * dq->scale[k]; /* one f32 product, as upstream's */
    if (++col == dq->cols) {
      col = 0;
      if (++row == dq->rows) {
        row = 0;
        lead++;
      }
    }
  }
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
          dequant_run(dq, at + k, wide, m);
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
