/* transitions.c — the input/output layout transitions of a styled module and
 * the collective each implies, forward and backward
 * (docs/SEMANTICS.md "Transitions").
 *
 * Computed per (plan entry, module class), not per module: every module an
 * entry styles gets the same transitions. Not the parameter placements
 * (apply.c). */
#include <stdio.h>
#include <string.h>

#include "shard/shard_internal.h"
#include "tpx/plan.h"

static int is_shard(tpx_placement p) {
  return p.kind == TPX_SHARD || p.kind == TPX_STRIDED_SHARD;
}

/* Which side a redistribution sits on changes the backward of an
 * all-gather: before a colwise matmul the grad arrives Partial
 * (reduce-scatter); after an output gather it arrives Replicate (chunk). */
typedef enum { SIDE_IN, SIDE_OUT } side_t;

static void collective(tpx_placement from, tpx_placement to, side_t side,
                       char *fwd, char *bwd, size_t n) {
  if (tpx_placement_equal(from, to)) {
    snprintf(fwd, n, "none");
    snprintf(bwd, n, "none");
  } else if (is_shard(from) && to.kind == TPX_REPLICATE) {
    snprintf(fwd, n, "all-gather(dim=%d)", (int)from.dim);
    if (side == SIDE_IN)
      snprintf(bwd, n, "reduce-scatter(dim=%d)", (int)from.dim);
    else
      snprintf(bwd, n, "chunk(dim=%d)", (int)from.dim);
  } else if (from.kind == TPX_PARTIAL && to.kind == TPX_REPLICATE) {
    snprintf(fwd, n, "all-reduce");
    snprintf(bwd, n, "none");
  } else if (from.kind == TPX_PARTIAL && is_shard(to)) {
    snprintf(fwd, n, "reduce-scatter(dim=%d)", (int)to.dim);
    snprintf(bwd, n, "all-gather(dim=%d)", (int)to.dim);
  } else if (from.kind == TPX_REPLICATE && is_shard(to)) {
    snprintf(fwd, n, "chunk(dim=%d)", (int)to.dim);
    snprintf(bwd, n, "all-gather(dim=%d)", (int)to.dim);
  } else if (is_shard(from) && is_shard(to)) {
    snprintf(fwd, n, "all-to-all(dim=%d->%d)", (int)from.dim, (int)to.dim);
    snprintf(bwd, n, "all-to-all(dim=%d->%d)", (int)to.dim, (int)from.dim);
  } else if (from.kind == TPX_REPLICATE && to.kind == TPX_PARTIAL) {
    snprintf(fwd, n, "partition");
    snprintf(bwd, n, "none");
  } else {
    snprintf(fwd, n, "redistribute");
    snprintf(bwd, n, "redistribute");
  }
}

static tpx__transition_rec *push(tpx__transition_set *set,
                                 tpx_transition_side side, int index,
                                 tpx_placement from, tpx_placement to) {
  if (set->count >= sizeof set->recs / sizeof set->recs[0])
    return NULL;
  tpx__transition_rec *r = &set->recs[set->count++];
  memset(r, 0, sizeof *r);
  r->view.side = side;
  r->view.index = index;
  r->view.from = from;
  r->view.to = to;
  collective(from, to, side == TPX_TRANSITION_INPUT ? SIDE_IN : SIDE_OUT,
             r->fwd, r->bwd, sizeof r->fwd);
  return r;
}

static tpx_placement first_or(const tpx_layout_list *l, tpx_placement dflt) {
  if (l->count >= 1 && !l->is_none[0])
    return l->items[0];
  return dflt;
}

static void do_colwise(const tpx_style *s, tpx_module_kind kind,
                       tpx__transition_set *set) {
  tpx_placement rep = tpx_placement_replicate();
  tpx_placement in = first_or(&s->input_layouts, rep);
  tpx__transition_rec *r = push(set, TPX_TRANSITION_INPUT, 0, in, rep);
  /* A replicated activation entering a colwise matmul gets a Partial grad,
   * all-reduced back to Replicate in backward (Megatron's "f"). Embedding ids
   * have no grad. */
  if (r && kind == TPX_MODULE_EMBEDDING)
    snprintf(r->bwd, sizeof r->bwd, "none");
  else if (r && tpx_placement_equal(in, rep))
    snprintf(r->bwd, sizeof r->bwd, "all-reduce");
  push(set, TPX_TRANSITION_OUTPUT, 0, tpx_placement_shard(-1),
       first_or(&s->output_layouts, tpx_placement_shard(-1)));
}

static void do_rowwise(const tpx_style *s, tpx_module_kind kind,
                       tpx__transition_set *set) {
  tpx_placement rep = tpx_placement_replicate();
  if (kind == TPX_MODULE_EMBEDDING) {
    tpx__transition_rec *r = push(set, TPX_TRANSITION_INPUT, 0,
                                  first_or(&s->input_layouts, rep), rep);
    if (r)
      snprintf(r->bwd, sizeof r->bwd, "none"); /* ids have no grad */
    /* Vocab-parallel lookup: MaskPartial output, masked rows zeroed, then
     * reduced. */
    tpx_placement to = first_or(&s->output_layouts, rep);
    r = push(set, TPX_TRANSITION_OUTPUT, 0,
             tpx_placement_partial(TPX_REDUCE_SUM), to);
    if (r) { /* "mask + all-reduce": masked rows are zeroed first */
      static const char prefix[] = "mask + ";
      size_t n = strlen(r->fwd);
      if (n + sizeof prefix > sizeof r->fwd)
        n = sizeof r->fwd - sizeof prefix;
      memmove(r->fwd + sizeof prefix - 1, r->fwd, n);
      memcpy(r->fwd, prefix, sizeof prefix - 1);
      r->fwd[n + sizeof prefix - 1] = '\0';
    }
    return;
  }
  push(set, TPX_TRANSITION_INPUT, 0,
       first_or(&s->input_layouts, tpx_placement_shard(-1)),
       tpx_placement_shard(-1));
  push(set, TPX_TRANSITION_OUTPUT, 0, tpx_placement_partial(TPX_REDUCE_SUM),
       first_or(&s->output_layouts, rep));
}

static void do_sequence(const tpx_style *s, tpx__transition_set *set) {
  tpx_placement seq = tpx_placement_shard(s->sequence_dim);
  tpx_placement rep = tpx_placement_replicate();
  switch (s->kind) {
  case TPX_STYLE_ROTARY_EMBED_PARALLEL:
    /* hidden states wrapped as sequence-sharded (run_check), position ids
     * wrapped as Replicate; the outputs (cos, sin) are computed from the
     * replicated position ids alone (the hidden states only give dtype and
     * device), so both are Replicate over the whole sequence, returned as
     * they are (to_local with use_local_output): no collective. */
    push(set, TPX_TRANSITION_INPUT, 0, seq, seq);
    push(set, TPX_TRANSITION_INPUT, 1, rep, rep);
    push(set, TPX_TRANSITION_OUTPUT, 0, rep, rep);
    push(set, TPX_TRANSITION_OUTPUT, 1, rep, rep);
    break;
  case TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION: {
    push(set, TPX_TRANSITION_INPUT, 0, seq, seq);
    tpx__transition_rec *r = push(set, TPX_TRANSITION_OUTPUT, 0, seq, rep);
    /* The gathered DTensor feeds colwise matmuls whose input grad is
     * Partial: the dual of the gather is a reduce-scatter. */
    if (r)
      snprintf(r->bwd, sizeof r->bwd, "reduce-scatter(dim=%d)",
               (int)s->sequence_dim);
    break;
  }
  default: /* sequence_parallel, qk_norm_sequence_parallel */
    push(set, TPX_TRANSITION_INPUT, 0, seq, seq);
    push(set, TPX_TRANSITION_OUTPUT, 0, seq, seq);
    break;
  }
}

/* use_local_output matters for an input gathered to Replicate: with it the
 * module computes on a plain tensor, so the gradient comes back as a plain
 * (Replicate) tensor and the gather's dual is a local chunk; without it the
 * DTensor reaches TP-sharded children whose input grads are Partial
 * (reduce-scatter). */
static void do_prepare(const tpx_layout_list *have, const tpx_layout_list *want,
                       tpx_transition_side side, int use_local_output,
                       tpx__transition_set *set) {
  for (int32_t i = 0; i < have->count && i < TPX_STYLE_MAX_LAYOUTS; i++) {
    int none = have->is_none[i];
    tpx_placement from = have->items[i];
    tpx_placement to = from;
    if (!none && i < want->count && !want->is_none[i])
      to = want->items[i];
    tpx__transition_rec *r = push(set, side, (int)i, from, to);
    if (r && !none && side == TPX_TRANSITION_INPUT && use_local_output &&
        is_shard(from) && to.kind == TPX_REPLICATE)
      snprintf(r->bwd, sizeof r->bwd, "chunk(dim=%d)", (int)from.dim);
    if (r && none) {
      r->view.from_is_none = 1;
      snprintf(r->fwd, sizeof r->fwd, "none");
      snprintf(r->bwd, sizeof r->bwd, "none");
    }
  }
}

int tpx__transition_kwarg(const tpx_style *style, const char *name,
                          tpx__transition_rec *out) {
  const tpx_kwarg_layout_list *have = &style->input_kwarg_layouts;
  const tpx_kwarg_layout_list *want = &style->desired_input_kwarg_layouts;
  if (style->kind != TPX_STYLE_PREPARE_MODULE_INPUT || !name)
    return 0;
  int32_t k = 0;
  while (k < have->count && strcmp(have->items[k].name, name) != 0) k++;
  if (k >= have->count)
    return 0;
  /* One kwarg as a one-item positional list: the same rules. */
  tpx_layout_list h = {1, {have->items[k].layout}, {have->items[k].is_none}};
  tpx_layout_list w = {0, {tpx_placement_replicate()}, {1}};
  for (int32_t j = 0; j < want->count; j++)
    if (strcmp(want->items[j].name, name) == 0) {
      w.count = 1;
      w.items[0] = want->items[j].layout;
      w.is_none[0] = want->items[j].is_none;
    }
  tpx__transition_set set;
  memset(&set, 0, sizeof set);
  do_prepare(&h, &w, TPX_TRANSITION_INPUT, style->use_local_output, &set);
  *out = set.recs[0];
  out->view.index = -1;
  out->view.forward = out->fwd;
  out->view.backward = out->bwd;
  return 1;
}

void tpx__transitions_compute(const tpx_style *style, tpx_module_kind kind,
                              tpx__transition_set *out) {
  memset(out, 0, sizeof *out);
  switch (tpx_style_kind_traits(style->kind).family) {
  case TPX_STYLE_FAMILY_COLWISE: do_colwise(style, kind, out); break;
  case TPX_STYLE_FAMILY_ROWWISE: do_rowwise(style, kind, out); break;
  case TPX_STYLE_FAMILY_SEQUENCE: do_sequence(style, out); break;
  case TPX_STYLE_FAMILY_PREPARE_INPUT:
    do_prepare(&style->input_layouts, &style->desired_input_layouts,
               TPX_TRANSITION_INPUT, style->use_local_output, out);
    break;
  case TPX_STYLE_FAMILY_PREPARE_OUTPUT:
    do_prepare(&style->output_layouts, &style->desired_output_layouts,
               TPX_TRANSITION_OUTPUT, style->use_local_output, out);
    break;
  default: break;
  }
  for (size_t i = 0; i < out->count; i++) {
    out->views[i] = out->recs[i].view;
    out->views[i].forward = out->recs[i].fwd;
    out->views[i].backward = out->recs[i].bwd;
  }
}
