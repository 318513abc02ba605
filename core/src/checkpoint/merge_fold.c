/* merge_fold.c — the part of a merge that writes a tensor back as the
 * stored tensors it was read from (its rank files' "fold" list): the
 * per-expert tensors of a fused expert parameter (each a box of it,
 * transposed or not), and a stored tensor bigger than its parameters (a
 * fold item whose box reaches past the tensor: transformers' Split), which
 * several merged tensors fill part by part. Lists the merged checkpoint's
 * tensors (each stored tensor once), checks that the parts of each shared
 * tensor tile it, and writes each tensor's share. Not the pieces of the
 * rank files (merge_pieces.c) or the order of writing (merge.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/rankfile_impl.h"

void tpx__merge_copy_box(void *full, const tpx_checkpoint_entry *e,
                         const tpx_slice *box, void *part, int to_full) {
  size_t esz = tpx_dtype_size(e->dtype);
  int nd = e->ndim;
  if (tpx_slice_numel(box) == 0)
    return;
  if (nd == 0) {
    memcpy(to_full ? full : part, to_full ? part : full, esz);
    return;
  }
  size_t run = (size_t)box->length[nd - 1] * esz;
  int64_t idx[TPX_MAX_TENSOR_DIMS] = {0};
  char *in = part;
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++)
      off = off * e->shape[d] + box->offset[d] + (d < nd - 1 ? idx[d] : 0);
    char *at = (char *)full + (size_t)off * esz;
    memcpy(to_full ? at : in, to_full ? in : at, run);
    in += run;
    int d = nd - 2;
    while (d >= 0 && ++idx[d] == box->length[d]) idx[d--] = 0;
    if (d < 0)
      break;
  }
}

/* Where fold item `src` of tensor `e` meets it (*in_entry, e's dims) and
 * where that lies in the stored tensor (*in_stored, its own dims). The
 * parser checked that the item's box meets the tensor. */
static void fold_part(const tpx_checkpoint_entry *e,
                      const tpx_shard_fold_source *src, tpx_slice *in_entry,
                      tpx_slice *in_stored) {
  int nd = src->ndim, drop = e->ndim - nd, tr = src->transpose && nd >= 2;
  memset(in_entry, 0, sizeof *in_entry);
  memset(in_stored, 0, sizeof *in_stored);
  in_entry->ndim = e->ndim;
  in_stored->ndim = nd;
  for (int d = 0; d < e->ndim; d++) {
    int sd = d - drop; /* the stored tensor's dim */
    if (tr && sd >= nd - 2)
      sd = sd == nd - 2 ? nd - 1 : nd - 2;
    int64_t o = src->offsets[d], len = d < drop ? 1 : src->shape[sd];
    int64_t a = o > 0 ? o : 0, end = o + len;
    int64_t b = end < e->shape[d] ? end : e->shape[d];
    in_entry->offset[d] = a;
    in_entry->length[d] = b > a ? b - a : 0;
    if (d >= drop) {
      in_stored->offset[sd] = a - o;
      in_stored->length[sd] = in_entry->length[d];
    }
  }
}

/* One fold item of the merge: entry index and item index, by name. */
typedef struct fold_ref {
  const char *name;
  size_t entry, item;
} fold_ref;

static int by_name(const void *a, const void *b) {
  const fold_ref *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  if (x->entry != y->entry)
    return x->entry < y->entry ? -1 : 1;
  return (x->item > y->item) - (x->item < y->item);
}

/* The items r[0..n) name one stored tensor: the same shape, dtype and
 * transposition, and their parts tile it. */
static tpx_status check_shared(const tpx__merge_set *s, const fold_ref *r,
                               size_t n, tpx_error *err) {
  const tpx_shard_meta *m0 = &s->files[0].meta;
  const tpx_shard_fold_source *f0 = &m0->tensors[r[0].entry].fold[r[0].item];
  const char *e0 = s->entries[r[0].entry].name;
  int64_t covered = 0, numel = 1;
  for (int d = 0; d < f0->ndim; d++) {
    if (f0->shape[d] && numel > INT64_MAX / f0->shape[d])
      return tpx_error_set(err, TPX_VALIDATION,
                           "%s: stored tensor '%s': its shape is too big",
                           s->files[0].path, f0->name);
    numel *= f0->shape[d];
  }
  for (size_t i = 0; i < n; i++) {
    const tpx_shard_fold_source *f = &m0->tensors[r[i].entry].fold[r[i].item];
    const tpx_checkpoint_entry *e = &s->entries[r[i].entry];
    if (f->ndim != f0->ndim || f->transpose != f0->transpose ||
        memcmp(f->shape, f0->shape, sizeof f->shape) != 0 ||
        e->dtype != s->entries[r[0].entry].dtype)
      return tpx_error_set(err, TPX_VALIDATION,
                           "%s: stored tensor '%s' is a part of '%s' and of "
                           "'%s' with another shape, dtype or transposition",
                           s->files[0].path, f->name, e0, e->name);
    tpx_slice pe, ps, qe, qs;
    fold_part(e, f, &pe, &ps);
    covered += tpx_slice_numel(&ps);
    for (size_t j = i + 1; j < n; j++) {
      const tpx_checkpoint_entry *g = &s->entries[r[j].entry];
      fold_part(g, &m0->tensors[r[j].entry].fold[r[j].item], &qe, &qs);
      int meet = 1;
      for (int d = 0; d < ps.ndim && meet; d++)
        meet = ps.offset[d] < qs.offset[d] + qs.length[d] &&
               qs.offset[d] < ps.offset[d] + ps.length[d];
      if (meet && tpx_slice_numel(&ps) && tpx_slice_numel(&qs))
        return tpx_error_set(err, TPX_VALIDATION,
                             "%s: stored tensor '%s': the parts of '%s' and "
                             "'%s' overlap",
                             s->files[0].path, f->name, e->name, g->name);
    }
  }
  if (covered != numel)
    return tpx_error_set(err, TPX_VALIDATION,
                         "%s: stored tensor '%s': the parts of the %zu "
                         "tensors cut from it ('%s', ...) cover %lld of its "
                         "%lld elements",
                         s->files[0].path, f0->name, n, e0, (long long)covered,
                         (long long)numel);
  return TPX_OK;
}

/* The fold items of rank 0 sorted by name, each stored tensor's items
 * checked; first[k] (k: the item's place in entry order) is 1 for the
 * first item naming its tensor. */
static tpx_status sort_items(const tpx__merge_set *s, unsigned char *first,
                             const size_t *base, size_t total, tpx_error *err) {
  const tpx_shard_meta *m0 = &s->files[0].meta;
  fold_ref *r = malloc((total ? total : 1) * sizeof *r);
  if (r == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < s->num_entries; i++)
    for (size_t k = 0; k < m0->tensors[i].num_fold; k++)
      r[n++] = (fold_ref){m0->tensors[i].fold[k].name, i, k};
  qsort(r, n, sizeof *r, by_name);
  tpx_status st = TPX_OK;
  for (size_t i = 0; i < n && st == TPX_OK;) {
    size_t j = i + 1;
    while (j < n && strcmp(r[j].name, r[i].name) == 0) j++;
    first[base[r[i].entry] + r[i].item] = 1;
    tpx_slice pe, ps;
    const tpx_shard_fold_source *f = &m0->tensors[r[i].entry].fold[r[i].item];
    fold_part(&s->entries[r[i].entry], f, &pe, &ps);
    int whole = 1; /* one item covering its stored tensor: nothing shared */
    for (int d = 0; d < f->ndim; d++)
      whole &= ps.offset[d] == 0 && ps.length[d] == f->shape[d];
    if (j - i > 1 || !whole)
      st = check_shared(s, r + i, j - i, err);
    i = j;
  }
  free(r);
  return st;
}

tpx_status tpx__merge_out_entries(const tpx__merge_set *s,
                                  tpx_checkpoint_entry **out, size_t *n_out,
                                  tpx_error *err) {
  const tpx_shard_meta *m0 = &s->files[0].meta;
  size_t total = 0, n = 0;
  size_t *base = malloc((s->num_entries + 1) * sizeof *base);
  if (base == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < s->num_entries; i++) {
    base[i] = total;
    total += m0->tensors[i].num_fold;
  }
  unsigned char *first = calloc(total + 1, 1);
  tpx_checkpoint_entry *o = calloc(s->num_entries + total + 1, sizeof *o);
  tpx_status st =
      first && o ? TPX_OK : tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (st == TPX_OK)
    st = sort_items(s, first, base, total, err);
  for (size_t i = 0; i < s->num_entries && st == TPX_OK; i++) {
    const tpx_shard_tensor *t = &m0->tensors[i];
    if (t->num_fold == 0)
      o[n++] = s->entries[i];
    for (size_t k = 0; k < t->num_fold; k++) {
      if (!first[base[i] + k])
        continue; /* a stored tensor cut into several: listed once */
      o[n].name = t->fold[k].name;
      o[n].dtype = s->entries[i].dtype;
      o[n].ndim = t->fold[k].ndim;
      memcpy(o[n].shape, t->fold[k].shape, sizeof o[n].shape);
      n++;
    }
  }
  free(base);
  free(first);
  if (st != TPX_OK) {
    free(o);
    return st;
  }
  *out = o;
  *n_out = n;
  return TPX_OK;
}

int tpx__merge_reserve(void **buf, size_t *cap, size_t n) {
  if (n <= *cap)
    return 0;
  void *nb = realloc(*buf, n);
  if (nb == NULL)
    return -1;
  *buf = nb;
  *cap = n;
  return 0;
}

tpx_status tpx__merge_write_folded(tpx_checkpoint_writer *w,
                                   const tpx_shard_tensor *st,
                                   const tpx_checkpoint_entry *e,
                                   const void *full, tpx__merge_bufs *b,
                                   tpx_error *err) {
  size_t esz = tpx_dtype_size(e->dtype);
  for (size_t k = 0; k < st->num_fold; k++) {
    const tpx_shard_fold_source *src = &st->fold[k];
    int nd = src->ndim, tr = src->transpose && nd >= 2;
    tpx_slice in_entry, in_stored;
    fold_part(e, src, &in_entry, &in_stored);
    size_t nb = (size_t)tpx_slice_nbytes(&in_entry, e->dtype);
    if (tpx__merge_reserve(&b->piece, &b->piece_cap, nb ? nb : 1) != 0 ||
        (tr && tpx__merge_reserve(&b->flip, &b->flip_cap, nb ? nb : 1) != 0))
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory for '%s'",
                           src->name);
    tpx__merge_copy_box((void *)full, e, &in_entry, b->piece, 0);
    void *out = b->piece;
    if (tr) { /* each [a, b] matrix of the box back to the stored [b, a] */
      int64_t rb = in_stored.length[nd - 1], cb = in_stored.length[nd - 2];
      size_t mat = (size_t)(rb * cb) * esz;
      for (size_t at = 0; mat && at < nb; at += mat)
        tpx__ckpt_transpose((char *)b->flip + at, rb, (char *)b->piece + at, cb,
                            rb, cb, esz);
      out = b->flip;
    }
    tpx_status s = tpx_checkpoint_write_slice(w, src->name, &in_stored,
                                              e->dtype, out, err);
    if (s != TPX_OK)
      return s;
  }
  return TPX_OK;
}
