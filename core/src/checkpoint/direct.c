/* direct.c — the shard writer's fast path: a stored tensor's box copied
 * from the source file into a writer entry with no conversion, each byte
 * copied once or twice by the kernel, never by a user-space loop:
 * - a piece that is one contiguous range of the source (a dim-0 slice, a
 *   whole tensor), or whose rows are long (>= 64 KiB), by copy_file_range,
 *   inside the kernel as `cp` does (the writer puts such pieces at their
 *   source's offset modulo the page: tpx__ckpt_writer_create_from);
 * - short rows close together (a dim-1 slice of a few ranks' width) read by
 *   pread, up to 512 KiB of the source at a time, into one small buffer
 *   and written from it with pwritev;
 * - short rows far apart (a narrow column of a wide tensor) written with
 *   pwritev straight from the reader's mapping, up to IOV_MAX rows a call,
 *   after populating the range's page tables (MADV_POPULATE_READ).
 * A file truncated underneath gives an I/O error naming it (EFAULT from the
 * mapping, a short pread), never SIGBUS. */
#define _GNU_SOURCE /* copy_file_range */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

int64_t tpx__ckpt_direct_source_offset(const tpx_checkpoint_reader *rd,
                                       int64_t tensor, const tpx_slice *slice,
                                       tpx_dtype dtype) {
  if (rd == NULL || tensor < 0 || (size_t)tensor >= rd->load.n)
    return -1;
  const tpx__st_tensor *t = &rd->load.t[tensor];
  tpx__box_runs g;
  if (t->dtype != dtype ||
      tpx__box_runs_init(t->shape, t->ndim, slice, t->name, &g, NULL) !=
          TPX_OK ||
      g.num_runs != 1)
    return -1;
  return rd->load.files[t->file].data_start + t->begin +
         tpx__box_run_start(&g, 0) * (int64_t)tpx_dtype_size(dtype);
}

/* A run at least this long is copied inside the kernel on its own. */
#define KERNEL_RUN (64 << 10)
/* Bytes read per pread of the bounce path. */
#define BOUNCE (512 << 10)

/* How a box's runs are copied (see the top of the file). */
typedef enum copy_way { BY_KERNEL, BY_BOUNCE, BY_MAPPING } copy_way;

/* One piece being copied: the source, the destination, the runs. */
typedef struct piece {
  const tpx_checkpoint_reader *rd;
  const tpx__st_tensor *t;
  const tpx__wfile *wf;
  const tpx__box_runs *g;
  int64_t src; /* absolute offset of element 0 of the tensor */
  int64_t dst; /* absolute offset of the entry */
  size_t esz, run_bytes;
  const char *what;
} piece;

static int64_t run_at(const piece *p, int64_t r) {
  return tpx__box_run_start(p->g, r) * (int64_t)p->esz;
}

static tpx_status io_error(const piece *p, const char *doing, tpx_error *err) {
  return tpx_error_set(err, TPX_IO, "%s: %s: %s: %s", p->wf->final_path,
                       p->what, doing, strerror(errno));
}

/* Each run by copy_file_range; *unsupported 1 (nothing copied) when the
 * file systems cannot. */
static tpx_status copy_by_kernel(const piece *p, int *unsupported,
                                 tpx_error *err) {
  *unsupported = 0;
  int in = p->rd->fds[p->t->file];
  for (int64_t r = 0; r < p->g->num_runs; r++) {
    int c = copy_range(in, p->src + run_at(p, r), p->wf->fd,
                       p->dst + r * (int64_t)p->run_bytes, p->run_bytes);
    if (c == 0 && r == 0) {
      *unsupported = 1;
      return TPX_OK;
    }
    if (c <= 0)
      return io_error(p, "copying", err);
  }
  return TPX_OK;
}

/* Consecutive runs read by pread into a small reused buffer, up to
 * BOUNCE bytes of the source at a time, and written from there: the
 * kernel copies out of the page cache through its own mapping, where the
 * reader's mapping of a large file costs a TLB miss per page (slow and
 * uneven on a virtual machine: bench/README.md "Checkpoints"). */
static tpx_status copy_by_bounce(const piece *p, tpx_error *err) {
  unsigned char *buf = malloc(BOUNCE);
  if (buf == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: out of memory", p->what);
  int in = p->rd->fds[p->t->file];
  tpx_status st = TPX_OK;
  struct iovec iov[BATCH];
  int64_t at = p->dst;
  for (int64_t r = 0; r < p->g->num_runs && st == TPX_OK;) {
    int64_t base = run_at(p, r);
    int n = 0;
    while (n < BATCH && r < p->g->num_runs &&
           run_at(p, r) + (int64_t)p->run_bytes - base <= BOUNCE) {
      iov[n].iov_base = buf + (run_at(p, r) - base);
      iov[n].iov_len = p->run_bytes;
      n++;
      r++;
    }
    size_t span = (size_t)(run_at(p, r - 1) - base) + p->run_bytes;
    for (size_t got = 0; got < span && st == TPX_OK;) {
      ssize_t k = pread(in, buf + got, span - got,
                        (off_t)(p->src + base + (int64_t)got));
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0) {
        if (k == 0)
          errno = EIO; /* the file ends early: truncated underneath */
        st = io_error(p, "reading", err);
      }
      got += k > 0 ? (size_t)k : 0;
    }
    if (st == TPX_OK)
      st = tpx__ckpt_pwritev_all(p->wf->fd, iov, n, at, pwritev,
                                 p->wf->final_path, p->what, err);
    at += (int64_t)p->run_bytes * n;
  }
  free(buf);
  return st;
}

/* pwritev straight from the reader's mapping, BATCH runs per call. */
static tpx_status copy_by_mapping(const piece *p, tpx_error *err) {
  const unsigned char *base = p->rd->maps[p->t->file] + p->src;
  int64_t first = run_at(p, 0), last = run_at(p, p->g->num_runs - 1);
  tpx__ckpt_populate(base + first, (size_t)(last - first) + p->run_bytes);
  struct iovec iov[BATCH];
  int64_t at = p->dst;
  tpx_status st = TPX_OK;
  for (int64_t r = 0; r < p->g->num_runs && st == TPX_OK;) {
    int n = 0;
    for (; n < BATCH && r < p->g->num_runs; n++, r++) {
      iov[n].iov_base = (void *)(base + run_at(p, r));
      iov[n].iov_len = p->run_bytes;
    }
    st = tpx__ckpt_pwritev_all(p->wf->fd, iov, n, at, pwritev,
                               p->wf->final_path, p->what, err);
    at += (int64_t)p->run_bytes * n;
  }
  return st;
}

/* Long runs by the kernel; short runs close together through the bounce
 * buffer; short runs far apart (more than 4x the piece's bytes between
 * its first and last: a narrow column of a wide tensor) from the
 * mapping. */
static copy_way choose_way(const piece *p) {
  if (p->g->num_runs == 1 || p->run_bytes >= KERNEL_RUN)
    return BY_KERNEL;
  int64_t span =
      run_at(p, p->g->num_runs - 1) - run_at(p, 0) + (int64_t)p->run_bytes;
  int64_t bytes = p->g->num_runs * (int64_t)p->run_bytes;
  return span <= 4 * bytes ? BY_BOUNCE : BY_MAPPING;
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
  int mapped = rd->maps != NULL && rd->maps[t->file] != NULL;
  if (!mapped || t->dtype != e->e.dtype)
    return TPX_OK; /* io_method pread: the buffered path */
  tpx__box_runs g;
  tpx_status st =
      tpx__box_runs_init(t->shape, t->ndim, slice, t->name, &g, err);
  size_t esz = tpx_dtype_size(t->dtype);
  if (st != TPX_OK || g.numel * (int64_t)esz != e->nbytes)
    return st; /* a size mismatch: the buffered path names it */
  const tpx__wfile *wf = &w->files[e->file];
  char what[1200]; /* names the source: a shrunk one fails any way */
  snprintf(what, sizeof what, "tensor '%.200s' from %.400s (temporary %.400s)",
           name, rd->load.files[t->file].path, wf->tmp_path);
  piece p = {rd,
             t,
             wf,
             &g,
             rd->load.files[t->file].data_start + t->begin,
             e->offset,
             esz,
             (size_t)g.run_elems * esz,
             what};
  copy_way way = g.numel == 0 ? BY_KERNEL : choose_way(&p);
  int unsupported = 0;
  if (g.numel > 0 && way == BY_KERNEL)
    st = copy_by_kernel(&p, &unsupported, err);
  if (st == TPX_OK && unsupported) /* no copy_file_range here */
    way = p.run_bytes <= BOUNCE ? BY_BOUNCE : BY_MAPPING;
  *done = 1;
  if (st == TPX_OK && g.numel > 0 && way == BY_BOUNCE)
    st = copy_by_bounce(&p, err);
  if (st == TPX_OK && g.numel > 0 && way == BY_MAPPING)
    st = copy_by_mapping(&p, err);
  if (st == TPX_OK) {
    atomic_fetch_add(&w->bytes, (long long)e->nbytes);
    tpx__ckpt_start_writeback(wf->fd, e->offset, e->nbytes);
  }
  return st;
}
