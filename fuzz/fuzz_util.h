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

#endif /* TPX_FUZZ_UTIL_H */
