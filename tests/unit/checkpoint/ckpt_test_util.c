/* ckpt_test_util.c — the helpers of ckpt_test_util.h (compiled into each
 * checkpoint test that uses them). */
#include "ckpt_test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ckt_write_raw(const char *path, const char *header, const void *data,
                   size_t data_len) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  uint64_t n = strlen(header);
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
  ck_assert_int_eq(fwrite(len, 1, 8, f), 8);
  ck_assert_int_eq(fwrite(header, 1, n, f), n);
  if (data_len)
    ck_assert_int_eq(fwrite(data, 1, data_len, f), data_len);
  ck_assert_int_eq(fclose(f), 0);
}

tpx_sharding *ckt_sharding(const tpx_model *m, const char *plan_json,
                           tpx_mesh **mesh, int64_t dp, int64_t tp) {
  tpx_error e = {0};
  tpx_plan *plan = NULL;
  ck_assert_msg(tpx_plan_from_json(plan_json, strlen(plan_json), "test", &plan,
                                   &e) == TPX_OK,
                "%s", e.message);
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {1, dp, tp};
  ck_assert_msg(tpx_mesh_create(names, sizes, 3, mesh, &e) == TPX_OK, "%s",
                e.message);
  tpx_sharding *sh = NULL;
  ck_assert_msg(tpx_sharding_create(m, plan, *mesh, NULL, &sh, &e) == TPX_OK,
                "%s", e.message);
  tpx_plan_destroy(plan);
  return sh;
}

void ckt_put_bits(unsigned char *buf, size_t esz, int64_t i, uint32_t v) {
  if (esz == 2) {
    uint16_t h = (uint16_t)v;
    memcpy(buf + i * 2, &h, 2);
  } else {
    memcpy(buf + i * 4, &v, 4);
  }
}

uint32_t ckt_get_bits(const unsigned char *buf, size_t esz, int64_t i) {
  if (esz == 2) {
    uint16_t h;
    memcpy(&h, buf + i * 2, 2);
    return h;
  }
  uint32_t v;
  memcpy(&v, buf + i * 4, 4);
  return v;
}

uint32_t ckt_bits(uint32_t v, size_t esz) { return esz == 2 ? v & 0xffffu : v; }

void ckt_global_index(const tpx_slice *s, int64_t k, int64_t *idx) {
  for (int d = s->ndim - 1; d >= 0; d--) {
    idx[d] = s->offset[d] + k % s->length[d];
    k /= s->length[d];
  }
}

unsigned char *ckt_read_slice(const tpx_checkpoint_reader *rd,
                              const tpx_sharding *sh, int64_t p, int64_t r,
                              tpx_dtype dt, tpx_slice *s, int64_t *n) {
  tpx_error e = {0};
  size_t esz = tpx_dtype_size(dt);
  ck_assert_msg(tpx_sharding_local_slice(sh, p, r, s, &e) == TPX_OK, "%s",
                e.message);
  *n = tpx_slice_numel(s);
  unsigned char *buf = malloc((size_t)(*n ? *n : 1) * esz);
  ck_assert_ptr_nonnull(buf);
  ck_assert_msg(tpx_checkpoint_read_param(rd, sh, p, r, dt, buf,
                                          (size_t)*n * esz, &e) == TPX_OK,
                "%s", e.message);
  return buf;
}
