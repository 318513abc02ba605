/* write_io.c — the one loop that writes a vector of pieces completely:
 * pwritev again after EINTR and after a short write (the pieces already
 * written dropped), an error naming the file on failure or no progress.
 * Its own file so the tests can compile it with a pwritev that misbehaves
 * on purpose (tests/unit/checkpoint/test_shard_io.c). Also the page-table
 * population of a mapped source range before such a write. */
#define _GNU_SOURCE /* MADV_POPULATE_READ */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint/writer_impl.h"

tpx_status tpx__ckpt_pwritev_all(int fd, struct iovec *iov, int n, int64_t off,
                                 tpx__pwritev_fn fn, const char *file,
                                 const char *what, tpx_error *err) {
  int64_t done = 0;
  while (n > 0 && iov->iov_len == 0) { /* nothing to write there */
    iov++;
    n--;
  }
  while (n > 0) {
    ssize_t r = fn(fd, iov, n, (off_t)(off + done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return tpx_error_set(err, TPX_IO, "%s: %s: writing at offset %lld: %s",
                           file, what, (long long)(off + done),
                           r < 0 ? strerror(errno) : "no progress");
    done += r;
    /* drop what was written: whole vectors, then part of the next */
    while (n > 0 && (size_t)r >= iov->iov_len) {
      r -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + r;
      iov->iov_len -= (size_t)r;
    }
  }
  return TPX_OK;
}

void tpx__ckpt_populate(const void *p, size_t len) {
#ifdef MADV_POPULATE_READ
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)p / page * page;
  uintptr_t b = ((uintptr_t)p + len + page - 1) / page * page;
  (void)madvise((void *)a, b - a, MADV_POPULATE_READ);
#else
  (void)p;
  (void)len;
#endif
}
