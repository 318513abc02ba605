/* outfile.c — tpx-train's output that either reaches its reader whole or
 * fails loudly: the --dump-* files are written to a temporary beside their
 * final name, fsync'd and renamed into place (as the library's checkpoint
 * writer publishes its files, core/src/checkpoint/publish.c, which is not
 * public API), and standard output is checked before the run reports
 * success. Not a general file layer: only what the trainer writes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

static char *str_copy(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c)
    memcpy(c, s, n);
  return c;
}

/* What `path` names, for the rename: the regular file itself (or, through
 * a link, the regular file it points to; a new name is created as given),
 * or NULL with *direct 1 when it is something else (a device, a FIFO, a
 * dangling link), which is written in place. */
static char *rename_target(const char *path, int *direct) {
  struct stat lsb, sb;
  *direct = 0;
  if (lstat(path, &lsb) != 0)
    return str_copy(path); /* a new file (or a reason open will give) */
  if (S_ISREG(lsb.st_mode))
    return str_copy(path);
  if (S_ISLNK(lsb.st_mode) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
    return realpath(path, NULL);
  *direct = 1;
  return NULL;
}

/* Create a fresh temporary beside `target`: .NAME.tmp-PID-N in its
 * directory, mode 0666 less the umask (as fopen would create NAME). */
static int create_temp(const char *target, char **tmp) {
  const char *slash = strrchr(target, '/');
  int dirlen = slash ? (int)(slash - target + 1) : 0;
  const char *base = slash ? slash + 1 : target;
  size_t n = strlen(target) + 64;
  *tmp = malloc(n);
  if (!*tmp) {
    errno = ENOMEM;
    return -1;
  }
  for (unsigned k = 0; k < 1000; k++) {
    snprintf(*tmp, n, "%.*s.%s.tmp-%ld-%u", dirlen, target, base,
             (long)getpid(), k);
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1; /* errno EEXIST */
}

static void fsync_dir_of(const char *target) {
  const char *slash = strrchr(target, '/');
  char dir[PATH_MAX] = ".";
  if (slash && (size_t)(slash - target) < sizeof dir)
    snprintf(dir, sizeof dir, "%.*s",
             slash == target ? 1 : (int)(slash - target), target);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

static void file_free(tr_file *o) {
  free(o->path);
  free(o->target);
  free(o->tmp);
  memset(o, 0, sizeof *o);
}

tpx_status tr_file_open(tr_file *o, const char *path, tpx_error *err) {
  memset(o, 0, sizeof *o);
  int direct = 0, e = ENOMEM;
  if (!(o->path = str_copy(path)))
    goto fail;
  o->target = rename_target(path, &direct);
  if (direct) {
    if ((o->f = fopen(path, "wb")))
      return TPX_OK;
    e = errno;
    goto fail;
  }
  if (!o->target) {
    e = errno;
    goto fail;
  }
  int fd = create_temp(o->target, &o->tmp);
  if (fd >= 0 && (o->f = fdopen(fd, "wb")))
    return TPX_OK;
  e = errno;
  if (fd >= 0) { /* created, but fdopen failed */
    close(fd);
    unlink(o->tmp);
  }
fail:
  file_free(o);
  return tpx_error_set(err, TPX_IO, "%s: cannot write: %s", path, strerror(e));
}

tpx_status tr_file_commit(tr_file *o, tpx_error *err) {
  if (!o->f)
    return TPX_OK;
  errno = 0;
  int bad =
      fflush(o->f) != 0 || ferror(o->f) || (o->tmp && fsync(fileno(o->f)) != 0);
  int e = errno ? errno : EIO; /* ferror alone: a write failed earlier */
  if (fclose(o->f) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  o->f = NULL;
  if (!bad && o->tmp && rename(o->tmp, o->target) != 0) {
    bad = 1;
    e = errno;
  }
  if (bad && o->tmp)
    unlink(o->tmp);
  if (!bad && o->tmp)
    fsync_dir_of(o->target); /* the new name itself, as publish.c does */
  tpx_status s = bad ? tpx_error_set(err, TPX_IO, "%s: cannot write: %s",
                                     o->path, strerror(e))
                     : TPX_OK;
  file_free(o);
  return s;
}

void tr_file_discard(tr_file *o) {
  if (o->f)
    fclose(o->f);
  if (o->tmp)
    unlink(o->tmp);
  file_free(o);
}

int tr_stdout_flush(int *first_errno) {
  errno = 0;
  if (fflush(stdout) == 0)
    return 0;
  if (!*first_errno)
    *first_errno = errno ? errno : EIO;
  return -1;
}

tpx_status tr_stdout_check(int *first_errno, tpx_error *err) {
  if (tr_stdout_flush(first_errno) == 0 && !ferror(stdout))
    return TPX_OK;
  clearerr(stdout);
  return tpx_error_set(err, TPX_IO, "cannot write output: %s",
                       strerror(*first_errno ? *first_errno : EIO));
}
