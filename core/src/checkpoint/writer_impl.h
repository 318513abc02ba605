/* checkpoint/writer_impl.h — the inside of tpx_checkpoint_writer, shared by
 * writer.c (layout, temporaries, slice writes), publish.c (finish: fsync,
 * markers, renames, index) and write_rank.c (a rank's pieces). */
#ifndef TPX_CHECKPOINT_WRITER_IMPL_H
#define TPX_CHECKPOINT_WRITER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "model/strmap.h"
#include "tpx/checkpoint.h"

typedef struct tpx__wentry {
  tpx_checkpoint_entry e; /* name malloc'd */
  int file;
  int64_t offset; /* absolute, in its file */
  int64_t nbytes;
  int64_t source; /* where the kernel copies it from, or -1 (create_from) */
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

/* tpx_checkpoint_writer_create, told where each entry's bytes will be
 * copied from by the kernel (copy_file_range): sources[i] is entry i's
 * absolute offset in its source file, or -1 (NULL: none). Each file's
 * header is then padded (spaces, up to a page) so that most of those bytes
 * land at their source's offset modulo the page size: ext4 copies a page
 * onto a page then, where a shifted copy straddles two destination pages
 * per source page and runs ~1.6x slower (bench/README.md "Checkpoints"). */
tpx_status tpx__ckpt_writer_create_from(const char *dir,
                                        const tpx_checkpoint_entry *entries,
                                        const int64_t *sources,
                                        size_t num_entries,
                                        const tpx_checkpoint_writer_options *o,
                                        tpx_checkpoint_writer **out,
                                        tpx_error *err);

/* Creates a new file ".NAME.tpx-tmp.PID.N" in `dir` with
 * O_CREAT|O_EXCL|O_NOFOLLOW (another N on a clash): its fd, and its path
 * in *path_out (malloc'd); -1 with errno. */
int tpx__ckpt_create_unique(const char *dir, const char *name, char **path_out);

/* Starts the writeback of a written range of at least 1 MiB without
 * waiting (sync_file_range), so that the fsync finds most of it on disk;
 * best effort (an error surfaces at the fsync). */
void tpx__ckpt_start_writeback(int fd, int64_t off, int64_t len);

/* pwritev of all of iov[0..n) at `off`, again after EINTR and short
 * writes (iov is consumed); `fn` is pwritev (tests pass another). Errors
 * name `file` and `what`. */
typedef ssize_t (*tpx__pwritev_fn)(int fd, const struct iovec *iov, int n,
                                   off_t off);
tpx_status tpx__ckpt_pwritev_all(int fd, struct iovec *iov, int n, int64_t off,
                                 tpx__pwritev_fn fn, const char *file,
                                 const char *what, tpx_error *err);

/* Maps the page tables of the mapped range [p, p + len) in one call
 * (MADV_POPULATE_READ) where a copy out of it would fault once per 64
 * KiB; best effort. */
void tpx__ckpt_populate(const void *p, size_t len);

/* direct.c: stored tensor `tensor`'s box `slice` written as writer entry
 * `name` (the whole entry) straight from the reader's mapping: *done 1.
 * *done 0 and nothing written when that cannot be (the reader does not map
 * its files, or the dtypes differ): the caller copies through a buffer. */
/* Where tpx__ckpt_copy_direct would copy stored tensor `tensor`'s box
 * `slice` from inside the kernel (one contiguous run of a mapped file,
 * no conversion to `dtype`): its absolute offset in the source file, or
 * -1 when it would not. */
int64_t tpx__ckpt_direct_source_offset(const tpx_checkpoint_reader *rd,
                                       int64_t tensor, const tpx_slice *slice,
                                       tpx_dtype dtype);

tpx_status tpx__ckpt_copy_direct(const tpx_checkpoint_reader *rd,
                                 int64_t tensor, const tpx_slice *slice,
                                 tpx_checkpoint_writer *w, const char *name,
                                 int *done, tpx_error *err);

/* publish.c: `text` (+ a newline when `newline`) as dir/name, complete or
 * not at all (a unique temporary, fsync, rename). Errors name the file. */
tpx_status tpx__ckpt_publish_text(const char *dir, const char *name,
                                  const char *text, int newline,
                                  tpx_error *err);

/* publish.c: the data of a single writer of one file made durable under
 * its temporary name (fsync, close, size check), not published: the
 * temporary's and the final path (malloc'd, the caller's) into *tmp_out and
 * *final_out; the writer is finished (destroy leaves the temporary). With
 * `find` (may be NULL), its first occurrence in the header is first
 * replaced by `put`, of the same length (a value known only once the data
 * is written). After an error the writer still owns (and destroy removes)
 * its temporary. */
tpx_status tpx__ckpt_writer_seal(tpx_checkpoint_writer *w, const char *find,
                                 const char *put, char **tmp_out,
                                 char **final_out, tpx_error *err);

/* publish_set.c: files published together, after every one is complete
 * (tpx_shard_write's rank files): a run that fails before leaves no final
 * name of its own, and whatever stood under those names (an older set)
 * whole. Slot i holds the sealed temporary of file i. */
typedef struct tpx__ckpt_set {
  char **tmp, **final; /* [n], NULL: not (yet) sealed */
  size_t n;
} tpx__ckpt_set;

/* n empty slots. TPX_NO_MEMORY. */
tpx_status tpx__ckpt_set_init(tpx__ckpt_set *s, size_t n, tpx_error *err);
/* Seals w (tpx__ckpt_writer_seal, `find` and `put` included) into slot i;
 * threads may fill distinct slots at once. */
tpx_status tpx__ckpt_set_add(tpx__ckpt_set *s, size_t i,
                             tpx_checkpoint_writer *w, const char *find,
                             const char *put, tpx_error *err);
/* Renames every slot's temporary to its final name (all slots must be
 * filled), then fsyncs the directory `dir_fd` (`dir` in errors). */
tpx_status tpx__ckpt_set_publish(tpx__ckpt_set *s, int dir_fd, const char *dir,
                                 tpx_error *err);
/* Removes the temporaries not published, frees the slots. */
void tpx__ckpt_set_free(tpx__ckpt_set *s);

#endif /* TPX_CHECKPOINT_WRITER_IMPL_H */
