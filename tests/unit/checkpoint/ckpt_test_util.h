/* ckpt_test_util.h — set-up shared by the checkpoint tests that read
 * parameters from stored tensors (test_checkpoint.c, test_split.c,
 * test_transposed.c): a hand-written safetensors file, a sharding of a
 * model under a plan on a dp_replicate 1 x dp_shard x tp mesh, elements
 * as bits in f32 or 16-bit buffers, and one rank's slice of a parameter
 * read into a fresh buffer. Every failure is a Check assertion (these run
 * inside a test); nothing here is a test of its own. */
#ifndef TPX_TESTS_CKPT_TEST_UTIL_H
#define TPX_TESTS_CKPT_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/tpx.h"

/* A safetensors file: 8-byte length, `header` verbatim, then `data_len`
 * bytes of `data`. */
void ckt_write_raw(const char *path, const char *header, const void *data,
                   size_t data_len);

/* The sharding of m under plan_json over dp_replicate 1 x dp x tp; the
 * mesh in *mesh (the caller destroys both). */
tpx_sharding *ckt_sharding(const tpx_model *m, const char *plan_json,
                           tpx_mesh **mesh, int64_t dp, int64_t tp);

/* Element i of a buffer of esz-byte elements (4: the 32 bits of v; 2: its
 * low 16 bits), written and read back. */
void ckt_put_bits(unsigned char *buf, size_t esz, int64_t i, uint32_t v);
uint32_t ckt_get_bits(const unsigned char *buf, size_t esz, int64_t i);

/* v as ckt_get_bits gives it back after ckt_put_bits (esz 2: low 16 bits). */
uint32_t ckt_bits(uint32_t v, size_t esz);

/* The global index (into idx[0 .. s->ndim)) of element k of slice s,
 * its elements in row-major order. */
void ckt_global_index(const tpx_slice *s, int64_t k, int64_t *idx);

/* Rank r's slice of parameter p (into *s, its element count into *n)
 * read by rd in dtype dt into a fresh buffer (at least one byte; the
 * caller frees it). */
unsigned char *ckt_read_slice(const tpx_checkpoint_reader *rd,
                              const tpx_sharding *sh, int64_t p, int64_t r,
                              tpx_dtype dt, tpx_slice *s, int64_t *n);

#endif
