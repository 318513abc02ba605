/* fuzz_util.h — shared bits of the libFuzzer targets: a NUL-terminated copy
 * of the input (parsers take C strings) and a scratch file for parsers that
 * read paths. Not part of libtpx. */
#ifndef TPX_FUZZ_UTIL_H
#define TPX_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* malloc'd copy of data[size] with a trailing NUL; NULL when out of memory. */
char *tpx_fuzz_cstr(const uint8_t *data, size_t size);

/* Writes data[size] to `name` inside a per-process scratch directory and
 * returns its path (static storage, valid until the next call); NULL on any
 * I/O failure. */
const char *tpx_fuzz_write_file(const char *name, const uint8_t *data,
                                size_t size);

/* Writes data[size] as model.safetensors.index.json in the scratch
 * directory, beside two valid shards (model-0000k-of-00002.safetensors,
 * one f32 tensor "a.weight" / "b.weight" of shape [2] each, written on the
 * first call) so that indexes naming them reach the cross-checks; its
 * path as tpx_fuzz_write_file returns it. */
const char *tpx_fuzz_write_index(const uint8_t *data, size_t size);

/* The per-process scratch directory (created on first use); NULL when it
 * cannot be. */
const char *tpx_fuzz_dir(void);
/* Creates (when missing) and empties the sub-directory `name` of the
 * scratch directory (plain files only, hidden ones too); its path (static
 * storage per name slot: at most 4 names), NULL on failure. */
const char *tpx_fuzz_subdir(const char *name);

/* The input read as a stream of small decisions: each call takes the next
 * byte (0 once the input is exhausted, so every input decodes). */
typedef struct tpx_fuzz_bytes {
  const uint8_t *p;
  size_t n;
} tpx_fuzz_bytes;
unsigned tpx_fuzz_byte(tpx_fuzz_bytes *b);

#endif /* TPX_FUZZ_UTIL_H */
