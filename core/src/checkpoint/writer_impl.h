/* checkpoint/writer_impl.h — the inside of tpx_checkpoint_writer, shared by
 * writer.c (layout, temporaries, slice writes), publish.c (finish: fsync,
 * markers, renames, index) and write_rank.c (a rank's pieces). */
#ifndef TPX_CHECKPOINT_WRITER_IMPL_H
#define TPX_CHECKPOINT_WRITER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "model/strmap.h"
#include "tpx/checkpoint.h"

typedef struct tpx__wentry {
  tpx_checkpoint_entry e; /* name malloc'd */
  int file;
  int64_t offset; /* absolute, in its file */
  int64_t nbytes;
} tpx__wentry;

typedef struct tpx__wfile {
  char *name;       /* final file name */
  char *final_path; /* dir/name */
  char *tmp_path;   /* dir/.name.tpx-tmp[.PID.N] (writer.c) */
  int fd;
  char *header; /* 8-byte length + padded JSON */
  size_t header_len;
  int64_t size;
} tpx__wfile;

struct tpx_checkpoint_writer {
  char *dir;
  tpx__wentry *entries; /* sorted by name */
  size_t num_entries;
  tpx__strmap names; /* name -> index in entries */
  tpx__wfile *files;
  size_t num_files;
  int sharded; /* more than one file: an index is written */
  int64_t num_writers, writer_rank;
  int finished;
  atomic_llong bytes;
};

/* Creates a new file ".NAME.tpx-tmp.PID.N" in `dir` with
 * O_CREAT|O_EXCL|O_NOFOLLOW (another N on a clash): its fd, and its path
 * in *path_out (malloc'd); -1 with errno. */
int tpx__ckpt_create_unique(const char *dir, const char *name, char **path_out);

/* publish.c: `text` (+ a newline when `newline`) as dir/name, complete or
 * not at all (a unique temporary, fsync, rename). Errors name the file. */
tpx_status tpx__ckpt_publish_text(const char *dir, const char *name,
                                  const char *text, int newline,
                                  tpx_error *err);

#endif /* TPX_CHECKPOINT_WRITER_IMPL_H */
