/* out_dir.c — the output directory of tpx_shard_write and tpx_shard_merge:
 * created when missing, locked against a second shard or merge into it
 * (flock on the directory itself: no lock file to leave behind, released
 * by the kernel when the process ends, however it ends; shared between
 * runs that each write some ranks of one set), checked for the
 * files of an older checkpoint a run would leave beside its own (refused
 * unless replacing, then removed after the new files are complete), and
 * cleared of the temporaries a crashed run left (safe under the lock).
 * Not the writing itself (writer.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/rankfile_impl.h"

/* A file of an older checkpoint for this kind of run: for a merge, a
 * consolidated checkpoint's files; for a shard, rank files of another
 * world size (the same world's are replaced, or are siblings written by
 * another --rank run). */
static int is_older(const tpx__out_dir *d, const char *name) {
  if (d->kind == TPX__OUT_RANKS) {
    long long r, w;
    return tpx_shard_is_file_name(name) &&
           sscanf(name, "rank-%lld-of-%lld", &r, &w) == 2 && w != d->world;
  }
  int end = 0;
  unsigned k, n;
  if (strcmp(name, "model.safetensors") == 0 ||
      strcmp(name, "model.safetensors.index.json") == 0)
    return 1;
  return sscanf(name, "model-%5u-of-%5u.safetensors%n", &k, &n, &end) == 2 &&
         name[end] == '\0';
}

/* A temporary a crashed run of this kind left: ".rank-….tpx-tmp…" or
 * ".model….tpx-tmp…". */
static int is_stale_temp(const tpx__out_dir *d, const char *name) {
  const char *prefix = d->kind == TPX__OUT_RANKS ? ".rank-" : ".model";
  return strncmp(name, prefix, strlen(prefix)) == 0 &&
         strstr(name, ".tpx-tmp") != NULL;
}

/* 1 when `keep` (may be NULL) wrote file `name`. */
static int written_by(const tpx_checkpoint_writer *keep, const char *name) {
  size_t n = keep ? tpx_checkpoint_writer_num_files(keep) : 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(name, tpx_checkpoint_writer_file(keep, i)) == 0)
      return 1;
  return n > 1 && strcmp(name, "model.safetensors.index.json") == 0;
}

/* The older checkpoint's files in the directory, except those `keep`
 * wrote: listed (remove = 0) or removed (remove = 1); their count, the
 * first few names comma-separated into buf. */
static size_t walk_older(const tpx__out_dir *d,
                         const tpx_checkpoint_writer *keep, int remove,
                         char *buf, size_t size) {
  DIR *dir = opendir(d->path);
  size_t n = 0, used = 0;
  struct dirent *de;
  if (size)
    buf[0] = '\0';
  while (dir && (de = readdir(dir)) != NULL) {
    if (!is_older(d, de->d_name) || written_by(keep, de->d_name) ||
        (remove && unlinkat(dirfd(dir), de->d_name, 0) != 0))
      continue;
    if (n < 3 && used < size)
      used += (size_t)snprintf(buf + used, size - used, "%s%s", n ? ", " : "",
                               de->d_name);
    n++;
  }
  if (dir)
    closedir(dir);
  return n;
}

static void remove_stale_temps(const tpx__out_dir *d) {
  DIR *dir = opendir(d->path);
  struct dirent *de;
  while (dir && (de = readdir(dir)) != NULL)
    if (is_stale_temp(d, de->d_name))
      unlinkat(dirfd(dir), de->d_name, 0);
  if (dir)
    closedir(dir);
}

tpx_status tpx__out_dir_open(const char *path, int kind, int64_t world,
                             int replace, int shared, tpx__out_dir *d,
                             tpx_error *err) {
  d->path = path;
  d->kind = kind;
  d->world = world;
  d->fd = -1;
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return tpx_error_set(err, TPX_IO, "%s: cannot create the directory: %s",
                         path, strerror(errno));
  d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d->fd < 0)
    return tpx_error_set(err, TPX_IO, "%s: cannot open the directory: %s", path,
                         strerror(errno));
  if (flock(d->fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0)
    return tpx_error_set(err,
                         errno == EWOULDBLOCK ? TPX_ALREADY_EXISTS : TPX_IO,
                         "%s: another tpx shard or tpx merge is writing into "
                         "this directory%s%s; wait for it or use another "
                         "output directory",
                         path, errno == EWOULDBLOCK ? "" : ": ",
                         errno == EWOULDBLOCK ? "" : strerror(errno));
  if (!shared) /* under a shared lock, a temporary may be a live run's */
    remove_stale_temps(d);
  char names[256];
  size_t n = walk_older(d, NULL, 0, names, sizeof names);
  if (n > 0 && !replace)
    return tpx_error_set(
        err, TPX_ALREADY_EXISTS,
        "%s already holds %s (%s%s): refused, nothing written; use an empty "
        "directory, or --force to replace it (those files are removed once "
        "the new ones are complete)",
        path,
        kind == TPX__OUT_RANKS ? "rank files of another mesh size"
                               : "a checkpoint",
        names, n > 3 ? ", ..." : "");
  return TPX_OK;
}

size_t tpx__out_dir_remove_older(const tpx__out_dir *d,
                                 const tpx_checkpoint_writer *keep, char *buf,
                                 size_t size) {
  size_t n = walk_older(d, keep, 1, buf, size);
  if (n > 0)
    fsync(d->fd);
  return n;
}

void tpx__out_dir_close(tpx__out_dir *d) {
  if (d->fd >= 0)
    close(d->fd); /* releases the lock */
  d->fd = -1;
}
