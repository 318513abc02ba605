/* tpx/checkpoint_shard.h — the tpx-shard/1 format: a checkpoint cut into
 * one safetensors file per rank (rank-0000r-of-0000W.safetensors), each
 * holding that rank's local piece of every stored tensor under its global
 * name, with metadata saying where each piece sits; writing such files from
 * a checkpoint and a sharding, reading their metadata, and merging them
 * back into one Hugging Face checkpoint. What `tpx shard` and `tpx merge`
 * run; the format is described in docs/CHECKPOINT.md.
 *
 * Not the per-rank reader or the consolidated writer themselves
 * (tpx/checkpoint.h): this is built on them. */
#ifndef TPX_CHECKPOINT_SHARD_H
#define TPX_CHECKPOINT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/checkpoint.h"
#include "tpx/error.h"
#include "tpx/mesh.h"
#include "tpx/placement.h"
#include "tpx/sharding.h"

TPX_BEGIN_DECLS

/* The "format" value of a rank file's "__metadata__". */
#define TPX_SHARD_FORMAT "tpx-shard/1"
/* ... of a rank file that an older reader of tpx-shard/1 would misread:
 * one whose metadata carries the MoE mesh (ep > 1), a transposed "fold"
 * source or a "fold" source bigger than its parameter (a stored tensor cut
 * into several parameters). tpx writes tpx-shard/1 otherwise, and reads
 * both (docs/CHECKPOINT.md "Format versions"). */
#define TPX_SHARD_FORMAT_1_1 "tpx-shard/1.1"

/* One source checkpoint tensor of a fused parameter ("fold"): its name,
 * its own shape, and its offsets in the fused tensor (the fused tensor's
 * ndim; its box there is its shape with leading length-1 dims added, the
 * last two swapped first when `transpose`). */
typedef struct tpx_shard_fold_source {
  char *name;
  int ndim;
  /* 1: the tensor holds its box transposed ("transpose": true). In what
   * was padding after ndim (64-bit targets), so the struct keeps its size
   * and offsets. */
  int transpose;
  int64_t shape[TPX_MAX_TENSOR_DIMS];
  int64_t offsets[TPX_MAX_TENSOR_DIMS];
} tpx_shard_fold_source;

/* One tensor of a rank file: where its local piece sits in the global
 * tensor, the placements that put it there (one per mesh dim;
 * num_placements 0 when the entry has none); for a fused expert parameter,
 * the per-expert tensors it was read from (num_fold > 0), which a merge
 * writes back instead of it. */
typedef struct tpx_shard_tensor {
  char *name;
  int ndim;
  /* 1 when the placements are over the MoE mesh ("mesh": "moe": an expert
   * parameter at ep > 1, tpx_shard_meta.ep), 0 over the main mesh. Added
   * in what was padding after ndim (64-bit targets), so the struct keeps
   * its size and offsets: a caller built before it reads the tensors array
   * at the same stride. */
  int on_moe;
  int64_t global_shape[TPX_MAX_TENSOR_DIMS];
  int64_t offsets[TPX_MAX_TENSOR_DIMS];
  int num_placements;
  tpx_placement placements[TPX_MESH_MAX_DIMS];
  tpx_shard_fold_source *fold;
  size_t num_fold;
} tpx_shard_tensor;

/* The parsed tpx-shard/1 metadata of one rank file. The caller allocates
 * it and has no struct_size to say which fields it knows: a field is added
 * only where its layout keeps every size and offset (see ep). */
typedef struct tpx_shard_meta {
  int mesh_ndim;
  char mesh_names[TPX_MESH_MAX_DIMS][TPX_MESH_NAME_MAX];
  /* Expert parallelism: "tpx.mesh" "moe" {"dims": ["ep_shard", "ep"],
   * "sizes": [world / ep, ep]}, the MoE mesh over the same ranks
   * (tpx_mesh_create_moe); 1 when absent. Added in what was padding
   * after mesh_names (64-bit targets: 4 + 8 x 32 bytes, then mesh_sizes
   * at 8-byte alignment), so the struct keeps its size: the parse and the
   * free write nothing past a struct of a caller built before it. */
  int ep;
  int64_t mesh_sizes[TPX_MESH_MAX_DIMS];
  int64_t rank, world_size;
  tpx_shard_tensor *tensors;
  size_t num_tensors;
} tpx_shard_meta;

/* Parse the "tpx.mesh" (JSON text of `mesh_len` bytes) and "tpx.tensors"
 * (`tensors_len` bytes) metadata values and the "tpx.rank" text (any may be
 * NULL: an error). Byte buffers, so a fuzzer can drive it. TPX_PARSE with a
 * message naming the key or entry at fault. Free with
 * tpx_shard_meta_free (also after an error; a zeroed struct is fine). */
TPX_API tpx_status tpx_shard_meta_parse(const char *mesh, size_t mesh_len,
                                        const char *tensors, size_t tensors_len,
                                        const char *rank, tpx_shard_meta *out,
                                        tpx_error *err);
TPX_API void tpx_shard_meta_free(tpx_shard_meta *m);

/* "rank-%05lld-of-%05lld.safetensors" into buf; 1 when `name` is such a
 * name (nothing before or after). */
TPX_API void tpx_shard_file_name(int64_t rank, int64_t world_size, char *buf,
                                 size_t size);
TPX_API int tpx_shard_is_file_name(const char *name);

/* Progress of a shard or merge run: tensors and bytes done so far of the
 * run's totals, and the safetensors files completed (under their final
 * names). The callback is called once with nothing done (the totals
 * known), then after every tensor and every completed file. */
typedef struct tpx_shard_progress {
  int64_t items, total_items;
  int64_t bytes, total_bytes;
  int64_t files;
} tpx_shard_progress;
typedef void (*tpx_shard_progress_fn)(const tpx_shard_progress *p, void *user);

/* A line worth telling the user that is not an error ("removed the older
 * checkpoint's files ..."). */
typedef void (*tpx_shard_note_fn)(const char *message, void *user);

typedef struct tpx_shard_write_options {
  size_t struct_size;
  /* The rank to write; -1: every rank of the sharding's mesh. */
  int64_t rank;
  /* Optional. */
  tpx_shard_progress_fn progress;
  void *progress_user;
  /* "tpx.run_id" of the files: NULL = a new random id. Runs that each
   * write some ranks (rank >= 0) of one set pass the same id, or the
   * merge refuses the mix. Printable ASCII, at most 64 characters. */
  const char *run_id;
  /* The model's config.json text, kept in each file ("tpx.config") so a
   * merge can write it back; NULL = none. */
  const char *config_json;
  /* 1: rank files of another mesh size in `dir` are removed once the new
   * files are complete; 0: their presence is an error. */
  int replace;
  tpx_shard_note_fn note;
  void *note_user;
} tpx_shard_write_options;

#define TPX_SHARD_WRITE_OPTIONS_INIT                                           \
  { sizeof(tpx_shard_write_options), -1, NULL, NULL, NULL, NULL, 0, NULL, NULL }

/* Write the rank file(s) of checkpoint `rd` cut by sharding `sh` (whose
 * model the checkpoint matches: tpx_checkpoint_check_model) into directory
 * `dir` (created when missing; its parent must exist). Each file appears
 * under its final name only when complete (the checkpoint writer). Errors
 * name the file, tensor or directory at fault. `opts` may be NULL. */
TPX_API tpx_status tpx_shard_write(const tpx_checkpoint_reader *rd,
                                   const tpx_sharding *sh, const char *dir,
                                   const tpx_shard_write_options *opts,
                                   tpx_error *err);

typedef struct tpx_shard_merge_options {
  size_t struct_size;
  /* As tpx_checkpoint_writer_options.max_shard_size (0: one file). */
  int64_t max_shard_size;
  /* Optional. */
  tpx_shard_progress_fn progress;
  void *progress_user;
  /* 1: an older checkpoint in `out_dir` (model*.safetensors, the index)
   * is replaced: its files the merge did not write are removed once the
   * new ones are complete; 0: its presence is an error. */
  int replace;
  tpx_shard_note_fn note;
  void *note_user;
} tpx_shard_merge_options;

#define TPX_SHARD_MERGE_OPTIONS_INIT                                           \
  { sizeof(tpx_shard_merge_options), 0, NULL, NULL, 0, NULL, NULL }

/* Merge the rank files in `in_dir` into one Hugging Face checkpoint in
 * `out_dir` (created when missing): model.safetensors, or
 * model-0000k-of-0000n.safetensors + model.safetensors.index.json with
 * max_shard_size. Every rank of one mesh must be there, every element of
 * every tensor covered; each distinct piece is written once (replicas are
 * skipped); fused expert parameters are written back as their per-expert
 * source tensors. Nothing appears under a final name unless complete.
 * `opts` may be NULL. */
TPX_API tpx_status tpx_shard_merge(const char *in_dir, const char *out_dir,
                                   const tpx_shard_merge_options *opts,
                                   tpx_error *err);

TPX_END_DECLS

#endif /* TPX_CHECKPOINT_SHARD_H */
