/* merge.c — tpx_shard_merge: the tpx-shard/1 rank files of a directory
 * back into one Hugging Face checkpoint: model.safetensors, or
 * model-0000k-of-0000n.safetensors + model.safetensors.index.json with
 * max_shard_size. Each distinct piece is written once (replicas skipped),
 * one whole tensor at a time (straight from the rank files' mappings where
 * it can be: merge_direct.c); fused expert parameters are cut back into
 * their per-expert source tensors, and tensors cut from one stored tensor
 * written back into it (merge_fold.c). Files appear under their final names
 * only when complete (checkpoint writer: temporary + fsync + rename). The
 * rank files, their pieces and coverage: merge_pieces.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/rankfile_impl.h"
#include "checkpoint/writer_impl.h"

/* Reads piece `pc` of entry e into its place in the whole tensor
 * b->whole (nb bytes). */
static tpx_status place_piece(const tpx__merge_set *s,
                              const tpx__merge_piece *pc,
                              const tpx_checkpoint_entry *e, size_t nb,
                              tpx__merge_bufs *b, tpx_error *err) {
  size_t pb = (size_t)tpx_slice_nbytes(&pc->box, e->dtype);
  tpx_slice local = pc->box;
  memset(local.offset, 0, sizeof local.offset);
  /* A piece covering whole rows (a dim-0 piece) is contiguous in the
   * tensor: read straight into its place, saving a copy. */
  int rows = 1;
  size_t at = 0;
  for (int d = 1; d < e->ndim; d++) rows &= pc->box.length[d] == e->shape[d];
  if (rows && e->ndim > 0 && e->shape[0] > 0)
    at = (size_t)pc->box.offset[0] * (nb / (size_t)e->shape[0]);
  if (!rows && tpx__merge_reserve(&b->piece, &b->piece_cap, pb) != 0)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory for '%s'", e->name);
  tpx_status st = tpx_checkpoint_read_slice(
      s->files[pc->file].rd, (int64_t)pc->tensor, &local, e->dtype,
      rows ? (char *)b->whole + at : b->piece, rows ? nb - at : pb, err);
  if (st == TPX_OK && !rows)
    tpx__merge_copy_box(b->whole, e, &pc->box, b->piece, 1);
  return st;
}

static void piece_done(tpx_shard_progress *prog, int64_t nb,
                       const tpx_shard_merge_options *o) {
  prog->items++;
  prog->bytes += nb;
  if (o->progress)
    o->progress(prog, o->progress_user);
}

/* One tensor at a time, written in file order: straight from the rank
 * files' mappings where it can be (merge_direct.c: every piece's rows
 * gathered by pwritev), else its pieces placed in a whole-tensor buffer
 * and written with one sequential write. Writing each piece in place
 * instead (one write per row of a dim-1 piece) measured 2.9x slower than
 * cp in bench/ckpt (scattered small writes). */
static tpx_status write_all(const tpx__merge_set *s, tpx_checkpoint_writer *w,
                            const tpx_shard_merge_options *o,
                            tpx__merge_bufs *b, tpx_shard_progress *prog,
                            tpx_error *err) {
  const tpx__merge_piece *p = s->pieces;
  *prog = (tpx_shard_progress){0, s->distinct, 0, s->total_bytes, 0};
  if (o->progress)
    o->progress(prog, o->progress_user);
  for (size_t k = 0; k < s->num_pieces;) {
    size_t ent = p[k].entry, k1 = k + 1;
    if (ent == (size_t)-1) {
      k++;
      continue;
    }
    while (k1 < s->num_pieces &&
           (p[k1].entry == ent || p[k1].entry == (size_t)-1))
      k1++;
    const tpx_checkpoint_entry *e = &s->entries[ent];
    int done = 0;
    tpx_status st = TPX_OK;
    if (s->files[0].meta.tensors[ent].num_fold == 0)
      st = tpx__merge_write_direct(s, k, k1, e, w, &done, err);
    for (; st == TPX_OK && done && k < k1; k++)
      if (p[k].entry != (size_t)-1)
        piece_done(prog, tpx_slice_nbytes(&p[k].box, e->dtype), o);
    if (st != TPX_OK || done) {
      if (st != TPX_OK)
        return st;
      continue;
    }
    tpx_slice whole;
    memset(&whole, 0, sizeof whole);
    whole.ndim = e->ndim;
    memcpy(whole.length, e->shape, sizeof whole.length);
    size_t nb = (size_t)tpx_slice_nbytes(&whole, e->dtype);
    if (tpx__merge_reserve(&b->whole, &b->whole_cap, nb) != 0)
      return tpx_error_set(err, TPX_NO_MEMORY, "out of memory for '%s'",
                           e->name);
    for (; k < k1; k++) {
      if (p[k].entry == (size_t)-1)
        continue;
      st = place_piece(s, &p[k], e, nb, b, err);
      if (st != TPX_OK)
        return st;
      piece_done(prog, tpx_slice_nbytes(&p[k].box, e->dtype), o);
    }
    const tpx_shard_tensor *mt = &s->files[0].meta.tensors[ent];
    if (mt->num_fold == 0)
      st = tpx_checkpoint_write_slice(w, e->name, &whole, e->dtype, b->whole,
                                      err);
    else
      st = tpx__merge_write_folded(w, mt, e, b->whole, b, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

/* The model's config.json, when the rank files carry it ("tpx.config"),
 * beside the merged checkpoint: temporary + fsync + rename, as the
 * tensors. */
static tpx_status write_config(const tpx__merge_set *s, const char *dir,
                               tpx_error *err) {
  const char *text = tpx_checkpoint_metadata(s->files[0].rd, "tpx.config");
  return text ? tpx__ckpt_publish_text(dir, "config.json", text, 0, err)
              : TPX_OK;
}

/* Removes the older checkpoint's files the merge did not replace, and
 * says so. */
static void note_removed(const tpx__out_dir *d, const tpx_checkpoint_writer *w,
                         const tpx_shard_merge_options *o) {
  char names[256];
  size_t n = tpx__out_dir_remove_older(d, w, names, sizeof names);
  if (n == 0 || o->note == NULL)
    return;
  char msg[400];
  snprintf(msg, sizeof msg,
           "%s: removed %zu file%s of the older checkpoint (%s%s)", d->path, n,
           n > 1 ? "s" : "", names, n > 3 ? ", ..." : "");
  o->note(msg, o->note_user);
}

/* Rank files of a tpx before the data digest carry "fnv1a64:…" of the
 * source's names and headers only: they merge (among themselves), and the
 * caller hears what that digest cannot tell. */
static void note_old_digest(const tpx__merge_set *s,
                            const tpx_shard_merge_options *o) {
  const char *v = tpx_checkpoint_metadata(s->files[0].rd, "tpx.source");
  if (v == NULL || strncmp(v, "fnv1a64:", 8) != 0 || o->note == NULL)
    return;
  char msg[600];
  snprintf(msg, sizeof msg,
           "%s: the rank files' \"tpx.source\" is an older tpx's digest of "
           "the source's names and headers only: rank files of two "
           "checkpoints of one model are not told apart (shard again from "
           "the source for a digest of its data)",
           s->dir);
  o->note(msg, o->note_user);
}

tpx_status tpx_shard_merge(const char *in_dir, const char *out_dir,
                           const tpx_shard_merge_options *opts,
                           tpx_error *err) {
  tpx_shard_merge_options o = TPX_SHARD_MERGE_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof o)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_shard_merge: options struct_size %zu is too "
                           "small",
                           opts->struct_size);
    o = *opts;
  }
  if (in_dir == NULL || out_dir == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_shard_merge: NULL directory");
  tpx__merge_set s;
  tpx__out_dir d = {out_dir, TPX__OUT_MERGED, 0, -1};
  tpx_checkpoint_entry *wentries = NULL;
  size_t nw = 0;
  tpx_checkpoint_writer *w = NULL;
  tpx__merge_bufs b = {NULL, NULL, NULL, 0, 0, 0};
  tpx_status st = tpx__merge_set_open(in_dir, &s, err);
  if (st == TPX_OK)
    note_old_digest(&s, &o);
  if (st == TPX_OK)
    st = tpx__out_dir_open(out_dir, TPX__OUT_MERGED, 0, o.replace, 0, &d, err);
  tpx_checkpoint_writer_options wo = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  wo.max_shard_size = o.max_shard_size;
  if (st == TPX_OK)
    st = tpx__merge_out_entries(&s, &wentries, &nw, err);
  if (st == TPX_OK)
    st = tpx_checkpoint_writer_create(out_dir, wentries, nw, &wo, &w, err);
  tpx_shard_progress prog = {0, 0, 0, 0, 0};
  if (st == TPX_OK)
    st = write_all(&s, w, &o, &b, &prog, err);
  if (st == TPX_OK)
    st = tpx_checkpoint_writer_finish(w, NULL, err);
  if (st == TPX_OK && o.progress) {
    prog.files = (int64_t)tpx_checkpoint_writer_num_files(w);
    o.progress(&prog, o.progress_user);
  }
  if (st == TPX_OK)
    st = write_config(&s, out_dir, err);
  if (st == TPX_OK && o.replace)
    note_removed(&d, w, &o);
  tpx_checkpoint_writer_destroy(w);
  tpx__out_dir_close(&d);
  free(b.piece);
  free(b.flip);
  free(b.whole);
  free(wentries);
  tpx__merge_set_free(&s);
  return st;
}
