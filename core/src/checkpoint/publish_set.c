/* publish_set.c — the rank files of one `tpx shard` run published as a
 * set: each is written and fsync'd under its temporary name (sealed), and
 * only when every one is complete are they renamed to their final names,
 * one after another, and the directory fsync'd once. A run that fails or
 * is killed before that leaves no final name of its own: the set that
 * stood in the directory (an earlier run of the same mesh) stays whole and
 * mergeable. The renames are not one atomic step: a crash among them
 * leaves files of two runs, which tpx merge refuses (their run ids
 * differ). Not the writing (writer.c) nor one writer's publication
 * (publish.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/writer_impl.h"

tpx_status tpx__ckpt_set_init(tpx__ckpt_set *s, size_t n, tpx_error *err) {
  s->n = n;
  s->tmp = calloc(n ? n : 1, sizeof *s->tmp);
  s->final = calloc(n ? n : 1, sizeof *s->final);
  if (s->tmp == NULL || s->final == NULL) {
    tpx__ckpt_set_free(s);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  return TPX_OK;
}

tpx_status tpx__ckpt_set_add(tpx__ckpt_set *s, size_t i,
                             tpx_checkpoint_writer *w, const char *find,
                             const char *put, tpx_error *err) {
  if (i >= s->n || s->tmp[i] != NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx__ckpt_set_add: slot %zu is outside the set or "
                         "taken",
                         i);
  return tpx__ckpt_writer_seal(w, find, put, &s->tmp[i], &s->final[i], err);
}

tpx_status tpx__ckpt_set_publish(tpx__ckpt_set *s, int dir_fd, const char *dir,
                                 tpx_error *err) {
  for (size_t i = 0; i < s->n; i++)
    if (s->tmp[i] == NULL)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: file %zu of the set was not written", dir, i);
  for (size_t i = 0; i < s->n; i++) {
    if (rename(s->tmp[i], s->final[i]) != 0) {
      int e = errno;
      /* the rest are removed by set_free: a set of two runs, which a
       * merge refuses, rather than a file half renamed */
      return tpx_error_set(err, TPX_IO,
                           "%s: cannot rename %s into place: %s (%zu of the "
                           "%zu files of this run are in place; run it again)",
                           s->final[i], s->tmp[i], strerror(e), i, s->n);
    }
    free(s->tmp[i]);
    s->tmp[i] = NULL;
  }
  if (fsync(dir_fd) != 0)
    return tpx_error_set(err, TPX_IO, "%s: cannot flush the directory: %s", dir,
                         strerror(errno));
  return TPX_OK;
}

void tpx__ckpt_set_free(tpx__ckpt_set *s) {
  for (size_t i = 0; i < s->n; i++) {
    if (s->tmp && s->tmp[i]) {
      unlink(s->tmp[i]);
      free(s->tmp[i]);
    }
    if (s->final)
      free(s->final[i]);
  }
  free(s->tmp);
  free(s->final);
  memset(s, 0, sizeof *s);
}
