/* ckpt_cli.h — shared by `tpx shard` and `tpx merge`: the tpx-shard/1
 * metadata (build and parse; the parser takes a byte buffer so a fuzzer can
 * drive it), a terminal progress line, and size parsing. Format:
 * docs/CHECKPOINT.md. */
#ifndef TPX_TOOLS_CKPT_CLI_H
#define TPX_TOOLS_CKPT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/tpx.h"

#define TPX_SHARD_FORMAT "tpx-shard/1"

/* One source checkpoint tensor of a fused parameter ("fold"): its name,
 * its own shape, and its offsets in the fused tensor (the fused tensor's
 * ndim; its box there is its shape with leading length-1 dims added). */
typedef struct tpx_cli_fold_source {
  char *name;
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS];
  int64_t offsets[TPX_MAX_TENSOR_DIMS];
} tpx_cli_fold_source;

/* One tensor of a rank file: where its local piece sits in the global
 * tensor, and the placements (text forms) that put it there; for a fused
 * expert parameter, the per-expert tensors it was read from (num_fold > 0),
 * which `tpx merge` writes back instead of it. */
typedef struct tpx_cli_shard_tensor {
  char *name;
  int ndim;
  int64_t global_shape[TPX_MAX_TENSOR_DIMS];
  int64_t offsets[TPX_MAX_TENSOR_DIMS];
  tpx_cli_fold_source *fold;
  size_t num_fold;
} tpx_cli_shard_tensor;

typedef struct tpx_cli_shard_meta {
  int mesh_ndim;
  char mesh_names[TPX_MESH_MAX_DIMS][TPX_MESH_NAME_MAX];
  int64_t mesh_sizes[TPX_MESH_MAX_DIMS];
  int64_t rank, world_size;
  tpx_cli_shard_tensor *tensors;
  size_t num_tensors;
} tpx_cli_shard_meta;

/* Parse the "tpx.mesh" (JSON text of `mesh_len` bytes) and "tpx.tensors"
 * (`tensors_len` bytes) metadata values and the "tpx.rank" text. 0 ok, else
 * -1 with a message in errbuf. Free with tpx_cli_shard_meta_free. */
int tpx_cli_shard_meta_parse(const char *mesh, size_t mesh_len,
                             const char *tensors, size_t tensors_len,
                             const char *rank, tpx_cli_shard_meta *out,
                             char *errbuf, size_t errlen);
void tpx_cli_shard_meta_free(tpx_cli_shard_meta *m);

/* "5GB" (10^9), "500MiB" (2^20), "123" bytes; 0 ok, -1 bad. */
int tpx_cli_parse_bytes(const char *text, int64_t *out);

/* Progress on stderr when it is a terminal; quiet otherwise. */
typedef struct tpx_cli_progress {
  int tty;
  const char *what;
  double start, last;
  int64_t total_bytes, total_items;
} tpx_cli_progress;

void tpx_cli_progress_start(tpx_cli_progress *p, const char *what,
                            int64_t total_items, int64_t total_bytes);
void tpx_cli_progress_update(tpx_cli_progress *p, int64_t items,
                             int64_t bytes, int final);

#endif
