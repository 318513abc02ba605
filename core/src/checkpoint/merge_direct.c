/* merge_direct.c — the merge's fast path: one merged tensor written straight
 * from the rank files' mappings. Each piece's rows land in the tensor as
 * runs (tpx__box_runs over the whole tensor's shape); all pieces' runs,
 * sorted by where they land, tile the tensor, so the tensor is written in
 * file order by pwritev, up to 1024 runs per call, with no copy through a
 * user buffer (the buffered path in merge.c read each piece, placed it in a
 * whole-tensor buffer and wrote that: two more copies). Used for a tensor
 * written as itself (not cut into per-expert tensors) whose pieces are
 * mapped and stored dense in the tensor's dtype; anything else, or runs
 * that do not tile the tensor exactly, goes the buffered way. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/rankfile_impl.h"
#include "checkpoint/writer_impl.h"

#define BATCH 1024

/* One run of a piece: `len` bytes at `src` land at byte `dst` of the
 * tensor. */
typedef struct span {
  int64_t dst;
  const unsigned char *src;
  size_t len;
} span;

static int by_dst(const void *a, const void *b) {
  int64_t x = ((const span *)a)->dst, y = ((const span *)b)->dst;
  return (x > y) - (x < y);
}

/* The stored bytes of piece `pc` when they can be copied as they are:
 * mapped, dense, of dtype `dt` and the box's shape. NULL otherwise. */
static const unsigned char *piece_bytes(const tpx__merge_set *s,
                                        const tpx__merge_piece *pc,
                                        tpx_dtype dt, size_t *len) {
  const tpx_checkpoint_reader *rd = s->files[pc->file].rd;
  if (rd->maps == NULL || pc->tensor >= rd->load.n)
    return NULL;
  const tpx__st_tensor *t = &rd->load.t[pc->tensor];
  if (rd->maps[t->file] == NULL || t->dtype != dt || t->ndim != pc->box.ndim ||
      memcmp(t->shape, pc->box.length, (size_t)t->ndim * sizeof *t->shape) != 0)
    return NULL;
  *len = (size_t)(t->end - t->begin);
  return rd->maps[t->file] + rd->load.files[t->file].data_start + t->begin;
}

/* Every run of pieces [k0, k1) of entry e into *out (malloc'd, sorted by
 * dst); 0 when some piece cannot be copied as it is or the runs do not
 * tile the tensor's `nbytes` exactly, -1 out of memory. */
static int collect(const tpx__merge_set *s, size_t k0, size_t k1,
                   const tpx_checkpoint_entry *e, int64_t nbytes, span **out,
                   size_t *n_out) {
  size_t esz = tpx_dtype_size(e->dtype), n = 0, cap = 0;
  span *sp = NULL;
  int ok = 1;
  for (size_t k = k0; k < k1 && ok; k++) {
    const tpx__merge_piece *pc = &s->pieces[k];
    tpx__box_runs g;
    size_t len = 0;
    if (pc->entry == (size_t)-1)
      continue;
    const unsigned char *src = piece_bytes(s, pc, e->dtype, &len);
    ok = src != NULL &&
         tpx__box_runs_init(e->shape, e->ndim, &pc->box, e->name, &g, NULL) ==
             TPX_OK &&
         (int64_t)len == g.numel * (int64_t)esz;
    if (!ok || g.numel == 0)
      continue;
    if (n + (size_t)g.num_runs > cap) {
      size_t nc = (n + (size_t)g.num_runs) * 2;
      span *ns = realloc(sp, nc * sizeof *sp);
      if (ns == NULL) {
        free(sp);
        return -1;
      }
      sp = ns;
      cap = nc;
    }
    size_t run = (size_t)g.run_elems * esz;
    for (int64_t r = 0; r < g.num_runs; r++)
      sp[n++] = (span){tpx__box_run_start(&g, r) * (int64_t)esz,
                       src + (size_t)r * run, run};
  }
  if (ok && n > 0)
    qsort(sp, n, sizeof *sp, by_dst);
  int64_t at = 0;
  for (size_t i = 0; i < n && ok; i++) {
    ok = sp[i].dst == at;
    at += (int64_t)sp[i].len;
  }
  if (!ok || at != nbytes) {
    free(sp);
    return 0;
  }
  *out = sp;
  *n_out = n;
  return 1;
}

tpx_status tpx__merge_write_direct(const tpx__merge_set *s, size_t k0,
                                   size_t k1, const tpx_checkpoint_entry *e,
                                   tpx_checkpoint_writer *w, int *done,
                                   tpx_error *err) {
  int64_t idx;
  *done = 0;
  if (w->finished ||
      !tpx__strmap_find(&w->names, e->name, strlen(e->name), &idx))
    return TPX_OK;
  const tpx__wentry *we = &w->entries[idx];
  span *sp = NULL;
  size_t n = 0;
  if (we->e.dtype != e->dtype || we->nbytes == 0)
    return TPX_OK;
  int c = collect(s, k0, k1, e, we->nbytes, &sp, &n);
  if (c < 0)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory for '%s'", e->name);
  if (c == 0)
    return TPX_OK;
  for (size_t k = k0; k < k1; k++) {
    size_t len = 0;
    const unsigned char *src =
        s->pieces[k].entry == (size_t)-1
            ? NULL
            : piece_bytes(s, &s->pieces[k], e->dtype, &len);
    if (src)
      tpx__ckpt_populate(src, len);
  }
  const tpx__wfile *wf = &w->files[we->file];
  char what[300];
  snprintf(what, sizeof what, "tensor '%s' (temporary %s)", e->name,
           wf->tmp_path);
  struct iovec iov[BATCH];
  tpx_status st = TPX_OK;
  for (size_t i = 0; i < n && st == TPX_OK;) {
    int m = 0;
    int64_t at = we->offset + sp[i].dst;
    for (; m < BATCH && i < n; m++, i++) {
      iov[m].iov_base = (void *)(uintptr_t)sp[i].src;
      iov[m].iov_len = sp[i].len;
    }
    st = tpx__ckpt_pwritev_all(wf->fd, iov, m, at, pwritev, wf->final_path,
                               what, err);
  }
  free(sp);
  if (st == TPX_OK) {
    atomic_fetch_add(&w->bytes, (long long)we->nbytes);
    tpx__ckpt_start_writeback(wf->fd, we->offset, we->nbytes);
    *done = 1;
  }
  return st;
}
