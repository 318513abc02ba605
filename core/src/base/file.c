/* file.c — opening and reading a file a user named, refusing anything but
 * a regular file without blocking (base/file.h). Not a path or directory
 * helper. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *tpx__file_kind_name(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a file";
}

tpx_status tpx__file_open(const char *path, int *fd, struct stat *sb,
                          tpx_error *err) {
  *fd = -1;
  /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer,
   * and a device's open may wait too; a regular file ignores the flag. */
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f < 0)
    return tpx_error_set(err, errno == ENOENT ? TPX_NOT_FOUND : TPX_IO,
                         "%s: cannot open: %s", path, strerror(errno));
  if (fstat(f, sb) != 0) {
    int e = errno;
    close(f);
    return tpx_error_set(err, TPX_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(sb->st_mode)) {
    close(f);
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: not a regular file (%s); tpx reads only "
                         "regular files",
                         path, tpx__file_kind_name(sb->st_mode));
  }
  int flags = fcntl(f, F_GETFL);
  if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(f);
    return tpx_error_set(err, TPX_IO, "%s: cannot open: %s", path, strerror(e));
  }
  *fd = f;
  return TPX_OK;
}

tpx_status tpx__file_read(const char *path, size_t max_bytes, char **out,
                          size_t *len, tpx_error *err) {
  *out = NULL;
  *len = 0;
  int fd;
  struct stat sb;
  tpx_status st = tpx__file_open(path, &fd, &sb, err);
  if (st != TPX_OK)
    return st;
  if ((uint64_t)sb.st_size > max_bytes) {
    close(fd);
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: file of %lld bytes exceeds the %zu-byte limit",
                         path, (long long)sb.st_size, max_bytes);
  }
  size_t size = (size_t)sb.st_size;
  char *buf = malloc(size + 1);
  if (buf == NULL) {
    close(fd);
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: out of memory", path);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  if (got != size) {
    free(buf);
    return tpx_error_set(err, TPX_IO, "%s: read error", path);
  }
  buf[size] = '\0';
  *out = buf;
  *len = size;
  return TPX_OK;
}
