/* model/st_header.h — the safetensors header parser of safetensors.c, shared
 * with the checkpoint area (core/src/checkpoint), which reads tensor data
 * at the offsets it validated. One parser: tpx_model_add_safetensors and
 * the checkpoint reader both go through tpx__st_load_path.
 *
 * What a load guarantees once it returns TPX_OK: every file's 8-byte length
 * and JSON header lie inside the file; every tensor's data_offsets lie inside
 * its file's data section and span exactly shape x dtype size bytes; no two
 * tensors of a file share bytes; names are valid FQNs, unique over all files;
 * an index's weight_map names only existing files, in its own directory, and
 * agrees with their headers; every file is a regular file (opened through
 * base/file.h, never blocking); at most TPX__ST_MAX_TENSORS tensors in all.
 * Headers are parsed entry by entry (model/st_members.h). Not a data
 * reader. */
#ifndef TPX_MODEL_ST_HEADER_H
#define TPX_MODEL_ST_HEADER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model_impl.h"
#include "model/strmap.h"

/* The most dot-separated components a tensor name may have. Real names
 * have about ten ("model.language_model.layers.0.mlp.experts.gate_up_proj");
 * every component becomes a module whose name repeats its parents', so a
 * deep name costs memory quadratic in its depth (50 000 components: GBs).
 * A deeper name is refused. */
#define TPX__ST_MAX_NAME_DEPTH 256

/* The most tensors one load reads (a file, or all the files of an index
 * together); a header that would pass it is refused before it is parsed,
 * naming the file and this limit. Real checkpoints hold up to a few
 * hundred thousand; the import costs about 0.3 KB and a few microseconds
 * per tensor, so the limit bounds a load to about a gigabyte. */
#define TPX__ST_MAX_TENSORS 2000000

typedef struct tpx__st_tensor {
  const char *name; /* in the load arena */
  size_t name_len;
  int file; /* index into tpx__st_load.files */
  int ndim;
  int64_t shape[TPX_MAX_TENSOR_DIMS];
  tpx_dtype dtype;
  int64_t begin, end; /* data_offsets, relative to the data section */
  unsigned char skip; /* conversion_load.c: converted or a buffer, not a
                         parameter of its own */
} tpx__st_tensor;

typedef struct tpx__st_file {
  const char *path;   /* in the arena */
  int64_t data_start; /* 8 + header length: where data_offsets count from */
  int64_t size;       /* file size when the header was read */
  json_t *metadata;   /* the "__metadata__" object (a reference), or NULL */
} tpx__st_file;

typedef struct tpx__st_load {
  tpx__st_tensor *t; /* in file order, each file in header order */
  size_t n, cap;
  tpx__st_file *files;
  size_t num_files;
  tpx__arena arena;
  tpx__strmap names; /* tensor name -> index in t */
} tpx__st_load;

/* Zero-initialise, then tpx__strmap_init(&l->names). */
void tpx__st_load_init(tpx__st_load *l);
void tpx__st_load_free(tpx__st_load *l);

/* Load `path`: one safetensors file, an index json (by its ".json" suffix),
 * or a directory holding model.safetensors.index.json or model.safetensors.
 * Errors (TPX_PARSE, TPX_NOT_FOUND, TPX_IO) name the file and tensor. */
tpx_status tpx__st_load_path(tpx__st_load *l, const char *path, tpx_error *err);

/* Parse one file's header from memory: `header` holds the JSON of `len`
 * bytes (the bytes after the 8-byte length), and the file is `file_size`
 * bytes long in total. Appends the file and its tensors to the load with
 * every check above. `path` names the file in errors. For fuzzing and for
 * callers holding the bytes already. */
tpx_status tpx__st_parse_header(tpx__st_load *l, const char *path,
                                const char *header, size_t len,
                                uint64_t file_size, tpx_error *err);

#endif /* TPX_MODEL_ST_HEADER_H */
