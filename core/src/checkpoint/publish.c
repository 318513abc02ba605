/* publish.c — finishing a checkpoint write: fsync this writer's data, mark
 * it done, and (the last writer) rename the temporaries to their final
 * names and write the index. See writer.c for the protocol. Also the
 * sealing of one writer's file whose publication the caller does with a
 * set of others (tpx__ckpt_writer_seal, publish_set.c). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/writer_impl.h"

static char *marker_path(const tpx_checkpoint_writer *w, int64_t rank) {
  size_t n = strlen(w->dir) + strlen(w->files[0].name) + 64;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/.%s.tpx-done-%lld", w->dir, w->files[0].name,
             (long long)rank);
  return p;
}

static void fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

/* Writes all of buf; 0, or -1 with errno (EIO for a write that makes no
 * progress without saying why: never a stale errno). */
static int write_full(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t r = write(fd, buf, len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        errno = EIO;
      return -1;
    }
    buf += r;
    len -= (size_t)r;
  }
  return 0;
}

tpx_status tpx__ckpt_publish_text(const char *dir, const char *name,
                                  const char *text, int newline,
                                  tpx_error *err) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *final = malloc(n), *tmp = NULL;
  if (final == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory writing %s", name);
  snprintf(final, n, "%s/%s", dir, name);
  int fd = tpx__ckpt_create_unique(dir, name, &tmp);
  int bad = fd < 0 || write_full(fd, text, strlen(text)) != 0 ||
            (newline && write_full(fd, "\n", 1) != 0) || fsync(fd) != 0;
  int e = errno;
  if (fd >= 0 && close(fd) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  if (!bad && rename(tmp, final) != 0) {
    bad = 1;
    e = errno;
  }
  if (bad && tmp)
    unlink(tmp);
  tpx_status st = bad ? tpx_error_set(err, TPX_IO, "%s: cannot write: %s",
                                      final, strerror(e))
                      : TPX_OK;
  free(final);
  free(tmp);
  return st;
}

static tpx_status write_index(tpx_checkpoint_writer *w, tpx_error *err) {
  json_t *root = json_object(), *map = json_object(), *meta = json_object();
  int64_t total = 0;
  int bad = !root || !map || !meta;
  for (size_t i = 0; i < w->num_entries && !bad; i++) {
    total += w->entries[i].nbytes;
    bad |= json_object_set_new(map, w->entries[i].e.name,
                               json_string(w->files[w->entries[i].file].name));
  }
  if (!bad)
    bad |= json_object_set_new(meta, "total_size", json_integer(total));
  if (!bad) {
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "weight_map", map);
  } else {
    json_decref(map);
    json_decref(meta);
  }
  char *text = bad ? NULL : json_dumps(root, JSON_INDENT(2));
  json_decref(root);
  if (text == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory writing the index");
  tpx_status st = tpx__ckpt_publish_text(w->dir, "model.safetensors.index.json",
                                         text, 1, err);
  free(text);
  return st;
}

/* Every temporary holds its file's full size. */
static tpx_status check_sizes(const tpx_checkpoint_writer *w, tpx_error *err) {
  for (size_t f = 0; f < w->num_files; f++) {
    const tpx__wfile *wf = &w->files[f];
    struct stat sb;
    if (lstat(wf->tmp_path, &sb) == 0 && (int64_t)sb.st_size != wf->size)
      return tpx_error_set(err, TPX_IO,
                           "%s: %s holds %lld bytes, %lld expected: a writer "
                           "did not write its pieces",
                           wf->final_path, wf->tmp_path, (long long)sb.st_size,
                           (long long)wf->size);
  }
  return TPX_OK;
}

/* Every writer is done: temporaries to final names, then the index. */
static tpx_status publish(tpx_checkpoint_writer *w, tpx_error *err) {
  tpx_status cst = check_sizes(w, err);
  if (cst != TPX_OK)
    return cst;
  for (size_t f = 0; f < w->num_files; f++) {
    tpx__wfile *wf = &w->files[f];
    if (rename(wf->tmp_path, wf->final_path) != 0) {
      int e = errno;
      struct stat sb;
      /* Another writer saw all markers too and got here first. */
      if (e == ENOENT && lstat(wf->final_path, &sb) == 0 && S_ISREG(sb.st_mode))
        continue;
      return tpx_error_set(err, TPX_IO, "%s: cannot rename %s into place: %s",
                           wf->final_path, wf->tmp_path, strerror(e));
    }
  }
  fsync_dir(w->dir); /* the data files' names before the index names them */
  if (!w->sharded)
    return TPX_OK;
  tpx_status st = write_index(w, err);
  fsync_dir(w->dir);
  return st;
}

/* fsync and close every temporary of this writer. */
static tpx_status flush_files(tpx_checkpoint_writer *w, tpx_error *err) {
  for (size_t f = 0; f < w->num_files; f++) {
    tpx__wfile *wf = &w->files[f];
    if (wf->fd < 0)
      continue;
    int bad = fsync(wf->fd) != 0;
    int e = errno;
    if (close(wf->fd) != 0 && !bad) {
      bad = 1;
      e = errno;
    }
    wf->fd = -1;
    if (bad)
      return tpx_error_set(err, TPX_IO, "%s: cannot flush %s: %s",
                           wf->final_path, wf->tmp_path, strerror(e));
  }
  return TPX_OK;
}

/* The first `find` in file 0's header replaced by `put` (as long), in the
 * buffer and in the file. */
static tpx_status patch_header(tpx_checkpoint_writer *w, const char *find,
                               const char *put, tpx_error *err) {
  tpx__wfile *wf = &w->files[0];
  size_t n = strlen(find), at = 0;
  while (at + n <= wf->header_len && memcmp(wf->header + at, find, n) != 0)
    at++;
  if (strlen(put) != n || at + n > wf->header_len)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: the header holds no '%s' to replace",
                         wf->final_path, find);
  memcpy(wf->header + at, put, n);
  struct iovec iov = {.iov_base = wf->header + at, .iov_len = n};
  return tpx__ckpt_pwritev_all(wf->fd, &iov, 1, (int64_t)at, pwritev,
                               wf->final_path, "header", err);
}

tpx_status tpx__ckpt_writer_seal(tpx_checkpoint_writer *w, const char *find,
                                 const char *put, char **tmp_out,
                                 char **final_out, tpx_error *err) {
  *tmp_out = *final_out = NULL;
  if (w == NULL || w->finished || w->num_writers != 1 || w->num_files != 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx__ckpt_writer_seal: one unfinished writer of one "
                         "file needed");
  tpx_status st = find ? patch_header(w, find, put, err) : TPX_OK;
  if (st == TPX_OK)
    st = flush_files(w, err);
  if (st == TPX_OK)
    st = check_sizes(w, err);
  if (st != TPX_OK)
    return st;     /* destroy removes the temporary */
  w->finished = 1; /* the temporary now belongs to the caller */
  *tmp_out = w->files[0].tmp_path;
  *final_out = w->files[0].final_path;
  w->files[0].tmp_path = w->files[0].final_path = NULL;
  return TPX_OK;
}

tpx_status tpx_checkpoint_writer_finish(tpx_checkpoint_writer *w,
                                        int *all_done_out, tpx_error *err) {
  if (all_done_out)
    *all_done_out = 0;
  if (w == NULL || w->finished)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_checkpoint_writer_finish: no writer, or "
                         "finished already");
  tpx_status fst = flush_files(w, err);
  if (fst != TPX_OK)
    return fst;
  if (w->num_writers > 1) {
    char *mine = marker_path(w, w->writer_rank);
    int fd = mine
                 ? open(mine, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644)
                 : -1;
    int e = errno;
    if (fd >= 0) {
      fsync(fd);
      close(fd);
    }
    free(mine);
    if (fd < 0)
      return tpx_error_set(err, TPX_IO,
                           "%s: cannot create the completion marker: %s",
                           w->dir, strerror(e));
    w->finished = 1; /* the temporaries now belong to the last writer */
    for (int64_t r = 0; r < w->num_writers; r++) {
      char *m = marker_path(w, r);
      int there = m && access(m, F_OK) == 0;
      free(m);
      if (!there)
        return TPX_OK; /* a later writer publishes */
    }
  }
  w->finished = 1;
  tpx_status st = publish(w, err);
  if (st != TPX_OK && w->num_writers == 1)
    for (size_t f = 0; f < w->num_files; f++)
      unlink(w->files[f].tmp_path); /* those not renamed yet */
  for (int64_t r = 0; r < w->num_writers && w->num_writers > 1; r++) {
    char *m = marker_path(w, r);
    if (m)
      unlink(m);
    free(m);
  }
  if (st == TPX_OK && all_done_out)
    *all_done_out = 1;
  return st;
}
