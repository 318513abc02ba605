/* style.c — parallel-style kinds, torch's constructor defaults, validation
 * and canonical form (docs/SEMANTICS.md "Parallel styles",
 * docs/PLAN_FORMAT.md).
 *
 * Not the JSON reader/writer (plan_json.c) nor the HF string translation
 * (hf_style.c). The canonical form (style_internal.h) zeroes every field a
 * kind does not use, so two equal styles are byte-equal: plans intern their
 * styles by hash and memcmp. */
#include <string.h>

#include "plan/style_internal.h"
#include "tpx/plan.h"

static const char *const style_names[TPX_STYLE_COUNT] = {
#define TPX__STYLE_NAME(name, str, family) str,
    TPX_STYLE_LIST(TPX__STYLE_NAME)
#undef TPX__STYLE_NAME
};

const char *tpx_style_kind_name(tpx_style_kind kind) {
  if ((int)kind < 0 || kind >= TPX_STYLE_COUNT)
    return NULL;
  return style_names[kind];
}

tpx_status tpx_style_kind_parse(const char *text, tpx_style_kind *out,
                                tpx_error *err) {
  if (!text || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_style_kind_parse: NULL argument");
  for (int i = 0; i < TPX_STYLE_COUNT; i++) {
    if (strcmp(text, style_names[i]) == 0) {
      *out = (tpx_style_kind)i;
      return TPX_OK;
    }
  }
  return tpx_error_set(err, TPX_NOT_FOUND,
                       "unknown style '%s' (known: colwise, rowwise, "
                       "sequence_parallel, prepare_module_input, "
                       "prepare_module_output, rotary_embed_parallel, "
                       "qk_norm_sequence_parallel, vocab_parallel_embedding, "
                       "sequence_parallel_allgather_activation, "
                       "gemma4_vocab_parallel_embedding, "
                       "gemma4_rowwise_parallel, "
                       "replicated_with_grad_allreduce)",
                       text);
}

static const tpx_style_family style_families[TPX_STYLE_COUNT] = {
#define TPX__STYLE_FAMILY(name, str, family) TPX_STYLE_FAMILY_##family,
    TPX_STYLE_LIST(TPX__STYLE_FAMILY)
#undef TPX__STYLE_FAMILY
};

tpx_style_traits tpx_style_kind_traits(tpx_style_kind kind) {
  tpx_style_traits t;
  memset(&t, 0, sizeof t);
  if ((int)kind < 0 || kind >= TPX_STYLE_COUNT)
    return t;
  t.family = style_families[kind];
  t.shards_params = t.family == TPX_STYLE_FAMILY_COLWISE ||
                    t.family == TPX_STYLE_FAMILY_ROWWISE;
  t.sums_grad_over_tp = t.family == TPX_STYLE_FAMILY_REPLICATED;
  t.distributes_params = t.shards_params ||
                         t.family == TPX_STYLE_FAMILY_SEQUENCE ||
                         t.sums_grad_over_tp;
  return t;
}

tpx_style_family tpx__style_family_of(tpx_style_kind kind) {
  return tpx_style_kind_traits(kind).family;
}

tpx_layout_list tpx__layout_one(tpx_placement p) {
  tpx_layout_list l;
  memset(&l, 0, sizeof l);
  l.count = 1;
  l.items[0] = p;
  return l;
}

static tpx_layout_list no_layouts(void) {
  tpx_layout_list l;
  memset(&l, 0, sizeof l);
  l.count = -1;
  return l;
}

tpx_style tpx_style_default(tpx_style_kind kind) {
  tpx_style s;
  memset(&s, 0, sizeof s);
  s.kind = kind;
  s.input_layouts = no_layouts();
  s.output_layouts = no_layouts();
  s.desired_input_layouts = no_layouts();
  s.desired_output_layouts = no_layouts();
  switch (tpx__style_family_of(kind)) {
  case TPX_STYLE_FAMILY_COLWISE:
    s.input_layouts = tpx__layout_one(tpx_placement_replicate());
    s.output_layouts = tpx__layout_one(tpx_placement_shard(-1));
    s.use_local_output = 1;
    break;
  case TPX_STYLE_FAMILY_ROWWISE:
    s.input_layouts = tpx__layout_one(tpx_placement_shard(-1));
    s.output_layouts = tpx__layout_one(tpx_placement_replicate());
    s.use_local_output = 1;
    break;
  case TPX_STYLE_FAMILY_SEQUENCE:
    s.sequence_dim = 1;
    s.use_local_output = 0;
    break;
  case TPX_STYLE_FAMILY_PREPARE_INPUT: s.use_local_output = 0; break;
  case TPX_STYLE_FAMILY_PREPARE_OUTPUT:
    /* Both layout lists are required by torch; left "not given" here so a
     * caller who forgets them gets a validation error. */
    s.use_local_output = 1;
    break;
  case TPX_STYLE_FAMILY_REPLICATED:
    s.use_local_output = 1; /* activations pass as plain tensors */
    break;
  default: break;
  }
  return s;
}

static tpx_placement canon_placement(tpx_placement p) {
  tpx_placement c;
  memset(&c, 0, sizeof c);
  c.kind = p.kind;
  if (p.kind == TPX_SHARD)
    c.dim = p.dim;
  if (p.kind == TPX_PARTIAL)
    c.op = p.op;
  if (p.kind == TPX_STRIDED_SHARD) {
    c.dim = p.dim;
    c.split_factor = p.split_factor;
  }
  return c;
}

static tpx_layout_list canon_list(const tpx_layout_list *l) {
  tpx_layout_list c;
  memset(&c, 0, sizeof c);
  c.count = l->count < 0 ? -1 : l->count;
  for (int32_t i = 0; i < c.count && i < TPX_STYLE_MAX_LAYOUTS; i++) {
    c.is_none[i] = l->is_none[i] ? 1 : 0;
    if (!c.is_none[i])
      c.items[i] = canon_placement(l->items[i]);
  }
  return c;
}

static tpx_kwarg_layout_list canon_kwargs(const tpx_kwarg_layout_list *l) {
  tpx_kwarg_layout_list c;
  memset(&c, 0, sizeof c);
  c.count = l->count < 0 ? 0 : l->count;
  for (int32_t i = 0; i < c.count && i < TPX_STYLE_MAX_KWARGS; i++) {
    size_t n = strnlen(l->items[i].name, TPX_STYLE_KWARG_NAME_SIZE - 1);
    memcpy(c.items[i].name, l->items[i].name, n);
    c.items[i].is_none = l->items[i].is_none ? 1 : 0;
    if (!c.items[i].is_none)
      c.items[i].layout = canon_placement(l->items[i].layout);
  }
  return c;
}

void tpx__style_canonical(const tpx_style *in, tpx_style *out) {
  tpx_style c;
  memset(&c, 0, sizeof c);
  c.kind = in->kind;
  c.input_layouts.count = -1;
  c.output_layouts.count = -1;
  c.desired_input_layouts.count = -1;
  c.desired_output_layouts.count = -1;
  c.use_local_output = in->use_local_output ? 1 : 0;
  switch (tpx__style_family_of(in->kind)) {
  case TPX_STYLE_FAMILY_COLWISE:
  case TPX_STYLE_FAMILY_ROWWISE: {
    /* "not given" means torch's default (x or Default()). */
    tpx_style d = tpx_style_default(in->kind);
    c.input_layouts = canon_list(
        in->input_layouts.count < 0 ? &d.input_layouts : &in->input_layouts);
    c.output_layouts = canon_list(
        in->output_layouts.count < 0 ? &d.output_layouts : &in->output_layouts);
    break;
  }
  case TPX_STYLE_FAMILY_SEQUENCE: c.sequence_dim = in->sequence_dim; break;
  case TPX_STYLE_FAMILY_PREPARE_INPUT:
    c.input_layouts = canon_list(&in->input_layouts);
    c.desired_input_layouts = canon_list(&in->desired_input_layouts);
    c.input_kwarg_layouts = canon_kwargs(&in->input_kwarg_layouts);
    c.desired_input_kwarg_layouts =
        canon_kwargs(&in->desired_input_kwarg_layouts);
    break;
  case TPX_STYLE_FAMILY_PREPARE_OUTPUT:
    c.output_layouts = canon_list(&in->output_layouts);
    c.desired_output_layouts = canon_list(&in->desired_output_layouts);
    break;
  default: break;
  }
  *out = c;
}

int tpx_style_equal(const tpx_style *a, const tpx_style *b) {
  if (!a || !b)
    return a == b;
  tpx_style ca, cb;
  tpx__style_canonical(a, &ca);
  tpx__style_canonical(b, &cb);
  return memcmp(&ca, &cb, sizeof ca) == 0;
}

static tpx_status check_placement(tpx_placement p, const char *field, int32_t i,
                                  tpx_error *err) {
  switch (p.kind) {
  case TPX_REPLICATE:
  case TPX_SHARD: return TPX_OK;
  case TPX_PARTIAL:
    if ((int)p.op < 0 || p.op > TPX_REDUCE_MIN)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s[%d]: invalid partial reduce op %d", field,
                           (int)i, (int)p.op);
    return TPX_OK;
  case TPX_STRIDED_SHARD:
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s[%d]: strided_shard is an FSDP placement, not a "
                         "TP style layout (use replicate, shard(d) or partial)",
                         field, (int)i);
  default:
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s[%d]: invalid placement kind %d", field, (int)i,
                         (int)p.kind);
  }
}

static tpx_status check_list(const tpx_layout_list *l, const char *field,
                             int allow_none_items, tpx_error *err) {
  if (l->count < -1 || l->count > TPX_STYLE_MAX_LAYOUTS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: %d layouts (at most %d)", field, (int)l->count,
                         TPX_STYLE_MAX_LAYOUTS);
  for (int32_t i = 0; i < l->count; i++) {
    if (l->is_none[i]) {
      if (!allow_none_items)
        return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                             "%s[%d]: null layout not allowed for this style",
                             field, (int)i);
      continue;
    }
    tpx_status st = check_placement(l->items[i], field, i, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

static tpx_status check_single(const tpx_layout_list *l, const char *field,
                               const char *kind, tpx_error *err) {
  if (l->count == -1)
    return TPX_OK; /* default */
  if (l->count != 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: %s takes exactly one layout, got %d", field, kind,
                         (int)l->count);
  return check_list(l, field, 0, err);
}

static tpx_status check_kwargs(const tpx_kwarg_layout_list *l,
                               const char *field, tpx_error *err) {
  if (l->count < 0 || l->count > TPX_STYLE_MAX_KWARGS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: %d entries (at most %d)", field, (int)l->count,
                         TPX_STYLE_MAX_KWARGS);
  for (int32_t i = 0; i < l->count; i++) {
    const tpx_kwarg_layout *k = &l->items[i];
    size_t n = strnlen(k->name, TPX_STYLE_KWARG_NAME_SIZE);
    if (n == 0 || n >= TPX_STYLE_KWARG_NAME_SIZE)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: kwarg name %d is empty or longer than %d",
                           field, (int)i, TPX_STYLE_KWARG_NAME_SIZE - 1);
    for (int32_t j = 0; j < i; j++)
      if (strcmp(l->items[j].name, k->name) == 0)
        return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                             "%s: duplicate kwarg '%s'", field, k->name);
    if (!k->is_none) {
      tpx_status st = check_placement(k->layout, field, i, err);
      if (st != TPX_OK)
        return st;
    }
  }
  return TPX_OK;
}

tpx_status tpx_style_validate(const tpx_style *s, tpx_error *err) {
  if (!s)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_style_validate: NULL style");
  const char *kind = tpx_style_kind_name(s->kind);
  tpx_status st = TPX_OK;
  switch (tpx__style_family_of(s->kind)) {
  case TPX_STYLE_FAMILY_COLWISE:
  case TPX_STYLE_FAMILY_ROWWISE:
    st = check_single(&s->input_layouts, "input_layouts", kind, err);
    if (st == TPX_OK)
      st = check_single(&s->output_layouts, "output_layouts", kind, err);
    return st;
  case TPX_STYLE_FAMILY_SEQUENCE:
  case TPX_STYLE_FAMILY_REPLICATED: return TPX_OK;
  case TPX_STYLE_FAMILY_PREPARE_INPUT:
    st = check_list(&s->input_layouts, "input_layouts", 1, err);
    if (st == TPX_OK)
      st = check_list(&s->desired_input_layouts, "desired_input_layouts", 1,
                      err);
    if (st != TPX_OK)
      return st;
    /* torch asserts: given input layouts need desired ones of equal length.
     * Desired without input is accepted (torch's hook is then a no-op). */
    if (s->input_layouts.count >= 0) {
      if (s->desired_input_layouts.count < 0)
        return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                             "desired_input_layouts: required when "
                             "input_layouts is given (%d layouts)",
                             (int)s->input_layouts.count);
      if (s->desired_input_layouts.count != s->input_layouts.count)
        return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                             "desired_input_layouts: %d layouts but "
                             "input_layouts has %d (lengths must match)",
                             (int)s->desired_input_layouts.count,
                             (int)s->input_layouts.count);
    }
    st = check_kwargs(&s->input_kwarg_layouts, "input_kwarg_layouts", err);
    if (st == TPX_OK)
      st = check_kwargs(&s->desired_input_kwarg_layouts,
                        "desired_input_kwarg_layouts", err);
    if (st != TPX_OK)
      return st;
    if (s->input_kwarg_layouts.count != s->desired_input_kwarg_layouts.count)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "desired_input_kwarg_layouts: %d entries but "
                           "input_kwarg_layouts has %d (lengths must match)",
                           (int)s->desired_input_kwarg_layouts.count,
                           (int)s->input_kwarg_layouts.count);
    return TPX_OK;
  case TPX_STYLE_FAMILY_PREPARE_OUTPUT:
    if (s->output_layouts.count < 0)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "output_layouts: required for "
                           "prepare_module_output");
    if (s->desired_output_layouts.count < 0)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "desired_output_layouts: required for "
                           "prepare_module_output");
    st = check_list(&s->output_layouts, "output_layouts", 1, err);
    if (st == TPX_OK)
      st = check_list(&s->desired_output_layouts, "desired_output_layouts", 1,
                      err);
    if (st != TPX_OK)
      return st;
    if (s->output_layouts.count != s->desired_output_layouts.count)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "desired_output_layouts: %d layouts but "
                           "output_layouts has %d (lengths must match)",
                           (int)s->desired_output_layouts.count,
                           (int)s->output_layouts.count);
    return TPX_OK;
  default:
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "invalid style kind %d",
                         (int)s->kind);
  }
}
