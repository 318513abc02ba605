/* direct.c — the shard writer's fast path: a stored tensor's box copied
 * from the reader's mapping of the source straight into a writer entry with
 * pwritev, up to IOV_MAX runs (the rows of a dim-1 slice) per system call.
 * The kernel copies each byte once, from the mapped page cache into the
 * destination's, as `cp` does; the buffered path (read_slice into a user
 * buffer, then write_slice) copied it twice and faulted the buffer in. The
 * source range is populated first (MADV_POPULATE_READ: one call where
 * pwritev's own faults would take one per 64 KiB). Used where no dtype
 * conversion is needed and the reader maps its files; a file truncated
 * underneath gives EFAULT here (an error naming it), not SIGBUS. A piece
 * that is one contiguous range of the source (a dim-0 slice, a whole
 * tensor) is copied by copy_file_range instead, inside the kernel. */
#define _GNU_SOURCE /* copy_file_range */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/writer_impl.h"

/* Runs per pwritev call (IOV_MAX is 1024 on Linux). */
#ifdef IOV_MAX
#define BATCH (IOV_MAX < 1024 ? IOV_MAX : 1024)
#else
#define BATCH 16
#endif

/* A contiguous range copied inside the kernel (copy_file_range, as `cp`
 * does): no page tables to populate and tear down. 1 done; 0 when the
 * file systems cannot (nothing copied: the caller writes from the
 * mapping); -1 with errno (EIO for a source that ends early). */
static int copy_range(int in, int64_t src, int out, int64_t dst, size_t len) {
  size_t done = 0;
  while (done < len) {
    off_t a = (off_t)(src + (int64_t)done), b = (off_t)(dst + (int64_t)done);
    ssize_t r = copy_file_range(in, &a, out, &b, len - done, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && done == 0 &&
        (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
         errno == EOPNOTSUPP || errno == EBADF))
      return 0;
    if (r <= 0) {
      if (r == 0)
        errno = EIO;
      return -1;
    }
    done += (size_t)r;
  }
  return 1;
}

tpx_status tpx__ckpt_copy_direct(const tpx_checkpoint_reader *rd,
                                 int64_t tensor, const tpx_slice *slice,
                                 tpx_checkpoint_writer *w, const char *name,
                                 int *done, tpx_error *err) {
  *done = 0;
  int64_t idx;
  if (rd == NULL || w == NULL || tensor < 0 || (size_t)tensor >= rd->load.n ||
      w->finished || !tpx__strmap_find(&w->names, name, strlen(name), &idx))
    return TPX_OK; /* the buffered path reports what is wrong */
  const tpx__st_tensor *t = &rd->load.t[tensor];
  const tpx__wentry *e = &w->entries[idx];
  if (rd->maps == NULL || rd->maps[t->file] == NULL || t->dtype != e->e.dtype)
    return TPX_OK;
  tpx__box_runs g;
  tpx_status st =
      tpx__box_runs_init(t->shape, t->ndim, slice, t->name, &g, err);
  size_t esz = tpx_dtype_size(t->dtype);
  if (st != TPX_OK || g.numel * (int64_t)esz != e->nbytes)
    return st; /* a size mismatch: the buffered path names it */
  *done = 1;
  if (g.numel == 0)
    return TPX_OK;
  const tpx__wfile *wf = &w->files[e->file];
  const unsigned char *base =
      rd->maps[t->file] + rd->load.files[t->file].data_start + t->begin;
  size_t run_bytes = (size_t)g.run_elems * esz;
  int64_t first = tpx__box_run_start(&g, 0) * (int64_t)esz;
  int64_t last = tpx__box_run_start(&g, g.num_runs - 1) * (int64_t)esz;
  char what[300];
  snprintf(what, sizeof what, "tensor '%s' (temporary %s)", name, wf->tmp_path);
  int copied = 0;
  if (g.num_runs == 1) {
    const tpx__st_file *f = &rd->load.files[t->file];
    copied = copy_range(rd->fds[t->file], f->data_start + t->begin + first,
                        wf->fd, e->offset, run_bytes);
    if (copied < 0)
      st = tpx_error_set(err, TPX_IO, "%s: %s: copying %zu bytes from %s: %s",
                         wf->final_path, what, run_bytes, f->path,
                         strerror(errno));
  }
  if (!copied)
    tpx__ckpt_populate(base + first, (size_t)(last - first) + run_bytes);
  struct iovec iov[BATCH];
  int64_t at = e->offset;
  for (int64_t r = 0; !copied && r < g.num_runs && st == TPX_OK;) {
    int n = 0;
    for (; n < BATCH && r < g.num_runs; n++, r++) {
      iov[n].iov_base =
          (void *)(base + tpx__box_run_start(&g, r) * (int64_t)esz);
      iov[n].iov_len = run_bytes;
    }
    st = tpx__ckpt_pwritev_all(wf->fd, iov, n, at, pwritev, wf->final_path,
                               what, err);
    at += (int64_t)run_bytes * n;
  }
  if (st == TPX_OK) {
    atomic_fetch_add(&w->bytes, (long long)e->nbytes);
    tpx__ckpt_start_writeback(wf->fd, e->offset, e->nbytes);
  }
  return st;
}
