/* checkpoint/rankfile_impl.h — shared by the files of the tpx-shard/1 format:
 * rankfile_meta.c (the metadata, both ways), rankfile_write.c (rank files from
 * a checkpoint), merge_pieces.c (rank files -> pieces and their coverage) and
 * merge.c (pieces -> one checkpoint). Not public. */
#ifndef TPX_CHECKPOINT_RANKFILE_IMPL_H
#define TPX_CHECKPOINT_RANKFILE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/checkpoint.h"
#include "tpx/checkpoint_shard.h"

/* One tensor of a rank file being written: a stored tensor cut to the
 * rank's slice, or a fused expert parameter (tensor -1) read from its
 * per-expert tensors. */
typedef struct tpx__shard_out {
  const char *name;
  tpx_dtype dtype;
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS]; /* global */
  int64_t tensor, param;
  tpx_slice slice;
} tpx__shard_out;

/* The "tpx.mesh" and "tpx.tensors" metadata values of a rank file holding
 * `ts[n]` (malloc'd JSON text), and its "format" (TPX_SHARD_FORMAT_1_1
 * where they use what an older reader would misread, else
 * TPX_SHARD_FORMAT). TPX_NO_MEMORY when they cannot be built. */
tpx_status tpx__rankfile_meta_build(const tpx_sharding *sh,
                                    const tpx_checkpoint_reader *rd,
                                    const tpx__shard_out *ts, size_t n,
                                    char **mesh_out, char **tensors_out,
                                    const char **format_out, tpx_error *err);

/* source_digest.c: "xxh64:<16 hex>", the digest of every byte of the
 * source's files (names, headers, tensor data), the same for every run on
 * the same files; computed by threads of its own while the caller goes
 * on. start: the job (TPX_NO_MEMORY). finish: waits for the value, into
 * out (23 bytes and more); any thread may call it, any number of times;
 * errors name the file that cannot be read. stop: no more chunks (finish
 * then fails). destroy: stops, joins and frees (NULL: nothing). */
#define TPX__SOURCE_DIGEST_LEN 22
typedef struct tpx__source_digest tpx__source_digest;
tpx_status tpx__source_digest_start(const tpx_checkpoint_reader *rd,
                                    tpx__source_digest **out, tpx_error *err);
tpx_status tpx__source_digest_finish(tpx__source_digest *j, char *out,
                                     size_t size, tpx_error *err);
void tpx__source_digest_stop(tpx__source_digest *j);
void tpx__source_digest_destroy(tpx__source_digest *j);
/* rankfile_ids.c: a new random run id (32 hex) into out; 1 when `id` is an
 * acceptable run id (1..64 printable ASCII, no space). */
void tpx__shard_new_run_id(char *out, size_t size);
int tpx__shard_run_id_ok(const char *id);

/* One rank file being merged. */
typedef struct tpx__merge_file {
  char *path;
  tpx_checkpoint_reader *rd;
  tpx_shard_meta meta;
} tpx__merge_file;

/* One local piece: tensor `tensor` of rank file `file`. */
typedef struct tpx__merge_piece {
  size_t file, tensor; /* tensor: index in the reader and the meta */
  size_t entry;        /* index in the merged entries; -1: a replica */
  tpx_slice box;       /* in the global tensor */
} tpx__merge_piece;

/* The rank files of a merge, their merged entries and pieces. */
typedef struct tpx__merge_set {
  const char *dir;
  tpx__merge_file *files;
  size_t num_files;
  tpx_mesh *mesh;                /* of the rank files */
  tpx_mesh *moe_mesh;            /* at ep > 1 ("tpx.mesh" "moe"), else NULL */
  tpx_checkpoint_entry *entries; /* names borrowed from files[0].meta */
  size_t num_entries;
  tpx__merge_piece *pieces; /* sorted by entry and box */
  size_t num_pieces;
  int64_t distinct, total_bytes; /* distinct pieces and their bytes */
} tpx__merge_set;

/* Lists and opens the rank files of `dir`, checks they form one complete
 * mesh, collects the entries and pieces, and checks every tensor is covered
 * exactly (replicas marked). Free with tpx__merge_set_free, also after an
 * error. */
tpx_status tpx__merge_set_open(const char *dir, tpx__merge_set *out,
                               tpx_error *err);
void tpx__merge_set_free(tpx__merge_set *s);

/* merge_direct.c: entry `e` written whole by `w` from pieces [k0, k1) of
 * `s` (replicas skipped) straight from the rank files' mappings: *done 1.
 * *done 0 and nothing written when that cannot be (a piece not mapped or
 * not dense in e's dtype, runs that do not tile e, e not an entry of w):
 * the caller places the pieces in a buffer. */
tpx_status tpx__merge_write_direct(const tpx__merge_set *s, size_t k0,
                                   size_t k1, const tpx_checkpoint_entry *e,
                                   tpx_checkpoint_writer *w, int *done,
                                   tpx_error *err);

/* Reusable buffers of one merge (flip: a transposed source's bytes). */
typedef struct tpx__merge_bufs {
  void *whole, *piece, *flip;
  size_t whole_cap, piece_cap, flip_cap;
} tpx__merge_bufs;
/* merge_fold.c: makes *buf (holding *cap bytes) hold at least n, by
 * reallocating it to exactly n bytes (not doubling: a whole tensor can be
 * large); 0, or -1 out of memory with *buf and *cap untouched. */
int tpx__merge_reserve(void **buf, size_t *cap, size_t n);

/* merge_fold.c: copies the dense piece `part` (the box `box` of tensor e)
 * into its place in the dense whole tensor `full` (to_full), or cuts it
 * out of `full` (!to_full). */
void tpx__merge_copy_box(void *full, const tpx_checkpoint_entry *e,
                         const tpx_slice *box, void *part, int to_full);
/* merge_fold.c: the tensors of the merged checkpoint (*out malloc'd, names
 * borrowed): each entry, or for one read from stored tensors (rank 0's
 * "fold") those, each stored tensor once though several entries were cut
 * from it, in the entry's dtype. TPX_VALIDATION when the parts of a stored
 * tensor cut into several do not tile it. */
tpx_status tpx__merge_out_entries(const tpx__merge_set *s,
                                  tpx_checkpoint_entry **out, size_t *n_out,
                                  tpx_error *err);
/* merge_fold.c: writes the whole tensor `full` of entry e (rank 0's
 * metadata st, num_fold > 0) as its share of each of its stored tensors. */
tpx_status tpx__merge_write_folded(tpx_checkpoint_writer *w,
                                   const tpx_shard_tensor *st,
                                   const tpx_checkpoint_entry *e,
                                   const void *full, tpx__merge_bufs *b,
                                   tpx_error *err);

/* out_dir.c: the output directory of a shard or merge run. */
enum { TPX__OUT_RANKS, TPX__OUT_MERGED };
typedef struct tpx__out_dir {
  const char *path;
  int kind;      /* TPX__OUT_RANKS or TPX__OUT_MERGED */
  int64_t world; /* TPX__OUT_RANKS: the run's world size */
  int fd;        /* the directory, locked */
} tpx__out_dir;

/* Creates `path` when missing and locks it, exclusively or (`shared`)
 * beside other shared holders (TPX_ALREADY_EXISTS when another run holds
 * it otherwise); under an exclusive lock removes the temporaries a crashed
 * run of this kind left; refuses (TPX_ALREADY_EXISTS, naming them) the
 * files of an older checkpoint unless `replace`. Close with
 * tpx__out_dir_close, also after an error. */
tpx_status tpx__out_dir_open(const char *path, int kind, int64_t world,
                             int replace, int shared, tpx__out_dir *d,
                             tpx_error *err);
/* Removes the older checkpoint's files, except those `keep` wrote (may be
 * NULL); their count, the first few names into buf. */
size_t tpx__out_dir_remove_older(const tpx__out_dir *d,
                                 const tpx_checkpoint_writer *keep, char *buf,
                                 size_t size);
void tpx__out_dir_close(tpx__out_dir *d);

#endif /* TPX_CHECKPOINT_RANKFILE_IMPL_H */
