/* fuzz_writer.c — libFuzzer target: the consolidated checkpoint writer
 * (core/src/checkpoint/writer.c, publish.c). The input decodes into 1-4
 * entries (dtype, 0-3 dims of 0-6), a max_shard_size, and for each entry
 * the dim-0 cuts it is written in (non-overlapping pieces, in any order,
 * some dropped, some with a bad box or an unknown name, some given as f32
 * to a bf16/f16 entry); the writer is finished or abandoned. A finished
 * write must read back (the reader validates every header) with each
 * entry's shape and, for every entry written whole in its own dtype, its
 * bytes; an abandoned or failed write must leave no file at all. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_E 4
#define MAX_ELEMS (6 * 6 * 6)

static const tpx_dtype dtypes[] = {TPX_DTYPE_F32, TPX_DTYPE_BF16, TPX_DTYPE_F16,
                                   TPX_DTYPE_I32};

static int num_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL)
    n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
  if (d)
    closedir(d);
  return n;
}

/* Entry i's bytes: a pattern of its index and position. */
static void pattern(unsigned char *buf, size_t n, int i) {
  for (size_t k = 0; k < n; k++)
    buf[k] = (unsigned char)(k * 31u + (unsigned)i * 7u + 1u);
}

/* Entry e's bytes read back equal the pattern. */
static void check_entry(const tpx_checkpoint_reader *rd,
                        const tpx_checkpoint_entry *e, int i) {
  int64_t t = tpx_checkpoint_find(rd, e->name);
  tpx_checkpoint_tensor info;
  if (t < 0 ||
      tpx_checkpoint_tensor_info(rd, (size_t)t, &info, NULL) != TPX_OK ||
      info.ndim != e->ndim || info.dtype != e->dtype ||
      memcmp(info.shape, e->shape, (size_t)e->ndim * sizeof e->shape[0]))
    abort();
  static unsigned char want[MAX_ELEMS * 4], got[MAX_ELEMS * 4];
  size_t nb = (size_t)info.nbytes;
  tpx_slice all;
  memset(&all, 0, sizeof all);
  all.ndim = e->ndim;
  memcpy(all.length, e->shape, sizeof all.length);
  pattern(want, nb, i);
  if (tpx_checkpoint_read_slice(rd, t, &all, e->dtype, got, sizeof got, NULL) !=
          TPX_OK ||
      memcmp(want, got, nb) != 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tpx_fuzz_bytes in = {data, size};
  const char *dir = tpx_fuzz_subdir("writer");
  if (dir == NULL)
    return 0;
  tpx_checkpoint_entry e[MAX_E];
  char names[MAX_E][8];
  int n = 1 + (int)(tpx_fuzz_byte(&in) % MAX_E);
  for (int i = 0; i < n; i++) {
    memset(&e[i], 0, sizeof e[i]);
    snprintf(names[i], sizeof names[i], "e%d", (int)(tpx_fuzz_byte(&in) % 6));
    e[i].name = names[i]; /* duplicates possible: create must refuse */
    e[i].dtype = dtypes[tpx_fuzz_byte(&in) % 4];
    e[i].ndim = (int)(tpx_fuzz_byte(&in) % 4);
    for (int d = 0; d < e[i].ndim; d++) e[i].shape[d] = tpx_fuzz_byte(&in) % 7;
  }
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  unsigned ms = tpx_fuzz_byte(&in);
  o.max_shard_size = ms % 3 == 0 ? 0 : (int64_t)(ms * 8);
  tpx_checkpoint_writer *w = NULL;
  if (tpx_checkpoint_writer_create(dir, e, (size_t)n, &o, &w, NULL) != TPX_OK) {
    if (num_files(dir) != 0)
      abort(); /* a refused create leaves nothing */
    return 0;
  }
  int whole[MAX_E] = {0};
  static unsigned char buf[MAX_ELEMS * 4];
  static float f32[MAX_ELEMS];
  for (int i = 0; i < n; i++) {
    size_t esz = tpx_dtype_size(e[i].dtype);
    int64_t rows = e[i].ndim ? e[i].shape[0] : 1, row = 1;
    for (int d = 1; d < e[i].ndim; d++) row *= e[i].shape[d];
    pattern(buf, (size_t)(rows * row) * esz, i);
    unsigned how = tpx_fuzz_byte(&in);
    int ok = 1;
    for (int64_t r0 = 0; r0 < rows;) { /* dim-0 cuts of 1..3 rows */
      int64_t nr = 1 + tpx_fuzz_byte(&in) % 3;
      nr = nr > rows - r0 ? rows - r0 : nr;
      tpx_slice s;
      memset(&s, 0, sizeof s);
      s.ndim = e[i].ndim;
      memcpy(s.length, e[i].shape, sizeof s.length);
      if (e[i].ndim) {
        s.offset[0] = r0;
        s.length[0] = nr;
      }
      const void *src = buf + (size_t)(r0 * row) * esz;
      tpx_dtype sdt = e[i].dtype;
      if (how % 5 == 1 && e[i].dtype != TPX_DTYPE_I32) { /* as f32 */
        for (int64_t k = 0; k < nr * row; k++) f32[k] = (float)k;
        src = f32;
        sdt = TPX_DTYPE_F32;
        ok = 0;
      } else if (how % 5 == 2 && e[i].ndim) { /* a box past the end */
        s.length[0] = nr + 1;
        ok = 0;
      } else if (how % 5 == 3) { /* a piece left out */
        ok = 0;
        r0 += nr;
        continue;
      }
      (void)tpx_checkpoint_write_slice(w, e[i].name, &s, sdt, src, NULL);
      r0 += nr;
    }
    (void)tpx_checkpoint_write_slice(w, "not-an-entry", NULL, e[i].dtype, buf,
                                     NULL);
    whole[i] = ok;
  }
  int finish = tpx_fuzz_byte(&in) % 4 != 0;
  if (finish && tpx_checkpoint_writer_finish(w, NULL, NULL) == TPX_OK) {
    tpx_checkpoint_writer_destroy(w);
    tpx_checkpoint_reader *rd = NULL;
    if (tpx_checkpoint_reader_create(dir, NULL, &rd, NULL) != TPX_OK)
      abort(); /* a published checkpoint must validate */
    for (int i = 0; i < n; i++)
      if (whole[i])
        check_entry(rd, &e[i], i);
    tpx_checkpoint_reader_destroy(rd);
    return 0;
  }
  tpx_checkpoint_writer_destroy(w);
  if (num_files(dir) != 0)
    abort(); /* nothing under any name after an abandoned write */
  return 0;
}
