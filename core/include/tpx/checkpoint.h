/* tpx/checkpoint.h — per-rank reads of Hugging Face safetensors checkpoints,
 * and consolidated checkpoint writes from sharded state (no gather).
 *
 * Reader: open a model.safetensors, a model.safetensors.index.json (its
 * shards are read from the same directory) or a directory holding either.
 * Every header is validated when the reader is created, before any tensor
 * byte is trusted: 8-byte length and JSON inside the file, data_offsets
 * inside the data section, no two tensors of a file sharing bytes, byte
 * counts = shape x dtype size, names unique over all files, the index's
 * weight_map consistent with the headers and naming only existing files.
 * Reads then fetch only the byte ranges of the requested box: a dim-0 slice
 * is one range, a dim-1 slice one range per row (contiguous ranges are
 * coalesced), on several threads, converting the dtype on the way.
 *
 * Which box a rank holds comes only from tpx_sharding_local_slice (the
 * layout function); the reader never re-derives shard arithmetic.
 *
 * Writer: every process writes its own pieces straight into their final
 * place in a consolidated checkpoint (one model.safetensors, or
 * model-0000k-of-0000n.safetensors shards + model.safetensors.index.json).
 * The file layout is a pure function of the tensor list and options, so all
 * processes compute identical offsets without talking to each other. Files
 * are written under hidden temporary names and renamed to their final names
 * only when complete (data fsync'd, by the last process to finish).
 *
 * Not a safetensors parser of its own: headers are parsed by the model area
 * (the parser behind tpx_model_add_safetensors). Thread-safety: one reader
 * may serve concurrent reads from several threads; a writer may be written
 * to from several threads (pieces must not overlap). */
#ifndef TPX_CHECKPOINT_H
#define TPX_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/layout.h"
#include "tpx/model.h"
#include "tpx/sharding.h"

TPX_BEGIN_DECLS

/* ======================================================================
 * Reader
 * ====================================================================== */

typedef struct tpx_checkpoint_reader tpx_checkpoint_reader;

typedef struct tpx_checkpoint_reader_options {
  size_t struct_size;
  /* Threads per tpx_checkpoint_read_rank call, and rank files
   * tpx_shard_write writes at once (no more than the online CPUs); 0 = 4. */
  int num_threads;
  /* I/O method: 0 = default (mmap, measured the faster: see
   * core/src/checkpoint/read.c), 1 = pread (no SIGBUS if a file is
   * truncated by someone else while being read), 2 = mmap + memcpy. */
  int io_method;
} tpx_checkpoint_reader_options;

#define TPX_CHECKPOINT_READER_OPTIONS_INIT                                     \
  { sizeof(tpx_checkpoint_reader_options), 0, 0 }

enum {
  TPX_CHECKPOINT_IO_DEFAULT = 0,
  TPX_CHECKPOINT_IO_PREAD = 1,
  TPX_CHECKPOINT_IO_MMAP = 2
};

/* Open and validate `path` (file, index json, or directory). Errors name the
 * file and tensor at fault (TPX_PARSE for a bad header, TPX_NOT_FOUND for a
 * missing file, TPX_IO). `opts` may be NULL. */
TPX_API tpx_status tpx_checkpoint_reader_create(
    const char *path, const tpx_checkpoint_reader_options *opts,
    tpx_checkpoint_reader **out, tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_checkpoint_reader_destroy(tpx_checkpoint_reader *rd);

/* Borrowed view of one stored tensor. */
typedef struct tpx_checkpoint_tensor {
  const char *name;
  tpx_dtype dtype;
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS];
  const char *file;    /* path of the file holding it */
  int64_t data_offset; /* absolute byte offset of its data in that file */
  int64_t nbytes;
} tpx_checkpoint_tensor;

/* Tensors in the order the files list them (files in index order). */
TPX_API size_t tpx_checkpoint_num_tensors(const tpx_checkpoint_reader *rd);
TPX_API tpx_status tpx_checkpoint_tensor_info(const tpx_checkpoint_reader *rd,
                                              size_t i,
                                              tpx_checkpoint_tensor *out,
                                              tpx_error *err);
/* Index of tensor `name`, or -1. */
TPX_API int64_t tpx_checkpoint_find(const tpx_checkpoint_reader *rd,
                                    const char *name);
/* Number of files and the path of file i (borrowed; NULL out of range). */
TPX_API size_t tpx_checkpoint_num_files(const tpx_checkpoint_reader *rd);
TPX_API const char *tpx_checkpoint_file(const tpx_checkpoint_reader *rd,
                                        size_t i);
/* A string value of the "__metadata__" object of the first file (or of
 * file `file` with tpx_checkpoint_file_metadata); NULL when absent.
 * Borrowed, valid while the reader lives. */
TPX_API const char *tpx_checkpoint_metadata(const tpx_checkpoint_reader *rd,
                                            const char *key);
TPX_API const char *
tpx_checkpoint_file_metadata(const tpx_checkpoint_reader *rd, size_t file,
                             const char *key);

/* The stored tensor that parameter `param` of `model` reads from: its own
 * FQN, or, for a tied parameter the file does not store, the tied target's.
 * -1 when neither is stored (a fused expert parameter stored per expert
 * too: see tpx_checkpoint_param_source). */
TPX_API int64_t tpx_checkpoint_param_tensor(const tpx_checkpoint_reader *rd,
                                            const tpx_model *model,
                                            int64_t param);

/* Where a parameter's data comes from: a stored tensor and its region
 * (`box`, in the parameter's coordinates). The tensor's shape is the box's
 * lengths, less leading length-1 dims the tensor lacks. For a stored
 * tensor cut into several parameters (tpx_model_add_split_source) the box
 * reaches past the parameter (offsets negative, or an end past its shape):
 * the parameter is what the box covers of it. */
typedef struct tpx_checkpoint_source {
  int64_t tensor; /* stored tensor index */
  tpx_slice box;
} tpx_checkpoint_source;

/* Number of stored tensors parameter `param` is read from: 1 for a
 * parameter stored under its FQN or its tie target's (the box is the whole
 * parameter); for fused 3-D expert parameters of MoE models
 * (…mlp.experts.gate_up_proj [E, 2I, H], …mlp.experts.down_proj [E, H, I])
 * stored per expert as Hugging Face checkpoints do
 * (…mlp.experts.{e}.gate_proj|up_proj|down_proj.weight, or Mixtral's
 * …block_sparse_moe.experts.{e}.w1|w3|w2.weight), 2E resp. E (gate_up
 * source 2e is expert e's gate rows [0, I), 2e+1 its up rows [I, 2I));
 * 1 for Mixtral's router …block_sparse_moe.gate.weight read as
 * …mlp.gate.weight; for a parameter with sources the model declares
 * (tpx_model_add_param_source), their count. 0 when the checkpoint holds
 * none of these. */
TPX_API int64_t tpx_checkpoint_param_num_sources(
    const tpx_checkpoint_reader *rd, const tpx_model *model, int64_t param);
/* Source k of parameter `param` (0 <= k < the count above); TPX_NOT_FOUND
 * naming the tensor when a per-expert tensor is missing. A parameter with
 * stored sources the model declares (tpx_model_add_param_source) has
 * those; a source may hold its box transposed: see below. */
TPX_API tpx_status tpx_checkpoint_param_source(const tpx_checkpoint_reader *rd,
                                               const tpx_model *model,
                                               int64_t param, int64_t k,
                                               tpx_checkpoint_source *out,
                                               tpx_error *err);
/* 1 when source k of parameter `param` stores its box transposed (the
 * tensor's last two dims are the box's last two swapped), 0 when as it
 * is, -1 when there is no such source. */
TPX_API int
tpx_checkpoint_param_source_transposed(const tpx_checkpoint_reader *rd,
                                       const tpx_model *model, int64_t param,
                                       int64_t k);

/* Every parameter of `model` is stored (itself, through its tie target, or
 * as per-expert source tensors: tpx_checkpoint_param_source) with the
 * model's shape and dtype. TPX_VALIDATION naming the file, the
 * tensor and both shapes/dtypes; TPX_NOT_FOUND naming a missing tensor.
 * Tensors the model lacks are allowed. */
TPX_API tpx_status tpx_checkpoint_check_model(const tpx_checkpoint_reader *rd,
                                              const tpx_model *model,
                                              tpx_error *err);

/* Do `model` (from a config) and the safetensors at `weights` (a file, an
 * index or a directory, read as tpx_model_add_safetensors reads it, expert
 * tensors folded) describe the same model? *differ_out (may be NULL) gets
 * the number of tensors both name whose shapes differ; when there are any,
 * TPX_VALIDATION naming the first tensor, both shapes and the count.
 * Tensors only one side names and dtype differences are not checked. The
 * status of the failed load when the weights cannot be read. */
TPX_API tpx_status tpx_checkpoint_check_shapes(const tpx_model *model,
                                               const char *weights,
                                               size_t *differ_out,
                                               tpx_error *err);

/* Read the box `slice` (global offsets/lengths, slice->ndim equal to the
 * tensor's) of tensor `tensor` into `dst`, a dense row-major buffer of the
 * box's shape in `dtype` (dst_bytes >= numel x size). Conversions: any of
 * f64/f32/f16/bf16/f8_e4m3/f8_e5m2 to f64/f32/f16/bf16; same dtype for any
 * other type (copied). An F8 weight with a `<name>_scale_inv` beside it is
 * dequantized into f64/f32/f16/bf16 as NeMo Automodel 0.7.0 loads it (each
 * element times the scale of its global block, docs/CHECKPOINT.md "FP8
 * checkpoints"). Runs on the calling thread. */
TPX_API tpx_status tpx_checkpoint_read_slice(const tpx_checkpoint_reader *rd,
                                             int64_t tensor,
                                             const tpx_slice *slice,
                                             tpx_dtype dtype, void *dst,
                                             size_t dst_bytes, tpx_error *err);

/* Rank `rank`'s slice (tpx_sharding_local_slice) of parameter `param` of
 * the sharding's model, into `dst` as above. */
TPX_API tpx_status tpx_checkpoint_read_param(const tpx_checkpoint_reader *rd,
                                             const tpx_sharding *sh,
                                             int64_t param, int64_t rank,
                                             tpx_dtype dtype, void *dst,
                                             size_t dst_bytes, tpx_error *err);

/* Where tpx_checkpoint_read_rank puts one parameter. data == NULL skips it
 * (e.g. a tied alias whose storage is its target's). */
typedef struct tpx_checkpoint_dest {
  void *data;
  size_t bytes; /* capacity of data */
  tpx_dtype dtype;
} tpx_checkpoint_dest;

/* Every parameter's slice for `rank`: dests[i] for model parameter i
 * (tpx_model_num_params entries). Several threads; checks the model against
 * the checkpoint first (tpx_checkpoint_check_model). On error the buffers
 * hold partial data. */
TPX_API tpx_status tpx_checkpoint_read_rank(const tpx_checkpoint_reader *rd,
                                            const tpx_sharding *sh,
                                            int64_t rank,
                                            const tpx_checkpoint_dest *dests,
                                            tpx_error *err);

/* Bytes of tensor data this reader fetched from files so far (all threads;
 * ranges as requested, headers excluded), and the number of read calls
 * (pread calls, or mapped ranges copied). */
TPX_API int64_t tpx_checkpoint_bytes_read(const tpx_checkpoint_reader *rd);
TPX_API int64_t tpx_checkpoint_read_calls(const tpx_checkpoint_reader *rd);

/* Convert `count` elements from `src` (dtype `from`) to `dst` (dtype `to`),
 * with the conversions tpx_checkpoint_read_slice supports (round to nearest
 * even). TPX_UNSUPPORTED naming both dtypes otherwise. */
TPX_API tpx_status tpx_checkpoint_convert(void *dst, tpx_dtype to,
                                          const void *src, tpx_dtype from,
                                          size_t count, tpx_error *err);

/* ======================================================================
 * Writer
 * ====================================================================== */

/* One tensor of the checkpoint to write (global shape). */
typedef struct tpx_checkpoint_entry {
  const char *name;
  tpx_dtype dtype;
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS];
} tpx_checkpoint_entry;

typedef struct tpx_checkpoint_writer_options {
  size_t struct_size;
  /* 0: one model.safetensors. Else model-0000k-of-0000n.safetensors files
   * of at most this many data bytes each (a larger tensor gets a file of
   * its own, as Hugging Face does) + model.safetensors.index.json. */
  int64_t max_shard_size;
  /* Processes writing this checkpoint together (each creates its own
   * writer with the same entries and options) and this one's index in
   * [0, num_writers). Writer 0 writes the headers and the index. */
  int64_t num_writers;
  int64_t writer_rank;
  /* "__metadata__" string pairs of every file (borrowed during create);
   * "format": "pt" when none is given. */
  size_t num_metadata;
  const char *const *metadata_keys;
  const char *const *metadata_values;
  /* File name for the single-file case; NULL = "model.safetensors". */
  const char *file_name;
} tpx_checkpoint_writer_options;

#define TPX_CHECKPOINT_WRITER_OPTIONS_INIT                                     \
  { sizeof(tpx_checkpoint_writer_options), 0, 1, 0, 0, NULL, NULL, NULL }

typedef struct tpx_checkpoint_writer tpx_checkpoint_writer;

/* Plan the files for `entries` (names unique, stored in name order) under
 * directory `dir` (must exist and be writable: TPX_IO naming it) and open
 * this writer's temporaries. `opts` may be NULL. */
TPX_API tpx_status tpx_checkpoint_writer_create(
    const char *dir, const tpx_checkpoint_entry *entries, size_t num_entries,
    const tpx_checkpoint_writer_options *opts, tpx_checkpoint_writer **out,
    tpx_error *err);
/* Without a successful finish: removes what this writer created and leaves
 * no file under a final name. NULL is a no-op. */
TPX_API void tpx_checkpoint_writer_destroy(tpx_checkpoint_writer *w);

/* The entries for a model's parameters: every parameter except tied
 * aliases (stored once, under the target's name), model dtypes. *out is
 * malloc'd (names borrowed from the model); free() it. */
TPX_API tpx_status tpx_checkpoint_model_entries(const tpx_model *model,
                                                tpx_checkpoint_entry **out,
                                                size_t *count, tpx_error *err);

/* Write the box `slice` of entry `name` from `src`, a dense row-major
 * buffer of the box in `dtype` (converted to the entry's dtype when they
 * differ). Boxes of one tensor written by different calls must not
 * overlap. Errors (ENOSPC, EFBIG, ...) name the file and tensor. */
TPX_API tpx_status tpx_checkpoint_write_slice(tpx_checkpoint_writer *w,
                                              const char *name,
                                              const tpx_slice *slice,
                                              tpx_dtype dtype, const void *src,
                                              tpx_error *err);

/* Rank `rank`'s pieces of every stored parameter, srcs[i] for model
 * parameter i (NULL data skips). A piece replicated over a mesh dim is
 * written only by the rank at index 0 of that dim; Partial is refused. */
TPX_API tpx_status tpx_checkpoint_write_rank(tpx_checkpoint_writer *w,
                                             const tpx_sharding *sh,
                                             int64_t rank,
                                             const tpx_checkpoint_dest *srcs,
                                             tpx_error *err);

/* This writer is done: its data is fsync'd and marked complete; the last
 * of the num_writers processes to finish renames every file to its final
 * name (and writes the index last). *all_done_out (may be NULL) is 1 when
 * this call published the checkpoint. */
TPX_API tpx_status tpx_checkpoint_writer_finish(tpx_checkpoint_writer *w,
                                                int *all_done_out,
                                                tpx_error *err);

/* Files the writer plans (final names, no directory), and which holds a
 * tensor. Borrowed. */
TPX_API size_t tpx_checkpoint_writer_num_files(const tpx_checkpoint_writer *w);
TPX_API const char *tpx_checkpoint_writer_file(const tpx_checkpoint_writer *w,
                                               size_t i);
/* Bytes of tensor data written by this writer so far. */
TPX_API int64_t tpx_checkpoint_bytes_written(const tpx_checkpoint_writer *w);

TPX_END_DECLS

#endif /* TPX_CHECKPOINT_H */
