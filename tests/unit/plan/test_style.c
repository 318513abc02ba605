/* test_style.c — parallel-style kinds, torch's constructor defaults for every
 * style, arity validation and equality (core/src/plan/style.c). */
#include <check.h>

#include "plan_test.h"
#include "tpx/plan.h"

typedef struct default_case {
  tpx_style_kind kind;
  const char *name;
  int family;      /* 0 col/row, 1 sequence, 2 prepare input, 3 prepare output,
                     4 replicated */
  const char *in;  /* single input layout (family 0) */
  const char *out; /* single output layout (family 0) */
  int local;
} default_case;

static const default_case defaults[] = {
    {TPX_STYLE_COLWISE, "colwise", 0, "replicate", "shard(-1)", 1},
    {TPX_STYLE_ROWWISE, "rowwise", 0, "shard(-1)", "replicate", 1},
    {TPX_STYLE_VOCAB_PARALLEL_EMBEDDING, "vocab_parallel_embedding", 0,
     "shard(-1)", "replicate", 1},
    {TPX_STYLE_GEMMA4_VOCAB_PARALLEL_EMBEDDING,
     "gemma4_vocab_parallel_embedding", 0, "shard(-1)", "replicate", 1},
    {TPX_STYLE_GEMMA4_ROWWISE_PARALLEL, "gemma4_rowwise_parallel", 0,
     "shard(-1)", "replicate", 1},
    {TPX_STYLE_SEQUENCE_PARALLEL, "sequence_parallel", 1, NULL, NULL, 0},
    {TPX_STYLE_ROTARY_EMBED_PARALLEL, "rotary_embed_parallel", 1, NULL, NULL,
     0},
    {TPX_STYLE_QK_NORM_SEQUENCE_PARALLEL, "qk_norm_sequence_parallel", 1, NULL,
     NULL, 0},
    {TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION,
     "sequence_parallel_allgather_activation", 1, NULL, NULL, 0},
    {TPX_STYLE_PREPARE_MODULE_INPUT, "prepare_module_input", 2, NULL, NULL, 0},
    {TPX_STYLE_PREPARE_MODULE_OUTPUT, "prepare_module_output", 3, NULL, NULL,
     1},
    {TPX_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE, "replicated_with_grad_allreduce",
     4, NULL, NULL, 1},
};
#define NDEFAULTS (sizeof defaults / sizeof defaults[0])

static void assert_layout(const tpx_layout_list *l, const char *want) {
  ck_assert_int_eq(l->count, 1);
  ck_assert_int_eq(l->is_none[0], 0);
  char buf[64];
  tpx_placement_format(l->items[0], buf, sizeof buf);
  ck_assert_str_eq(buf, want);
}

START_TEST(test_default_every_style) {
  ck_assert_int_eq(NDEFAULTS, TPX_STYLE_COUNT);
  const default_case *c = &defaults[_i];
  tpx_style s = tpx_style_default(c->kind);
  ck_assert_int_eq(s.kind, c->kind);
  ck_assert_str_eq(tpx_style_kind_name(c->kind), c->name);
  ck_assert_int_eq(s.use_local_output, c->local);
  switch (c->family) {
  case 0:
    assert_layout(&s.input_layouts, c->in);
    assert_layout(&s.output_layouts, c->out);
    break;
  case 1: ck_assert_int_eq(s.sequence_dim, 1); break;
  case 2:
    ck_assert_int_eq(s.input_layouts.count, -1);
    ck_assert_int_eq(s.desired_input_layouts.count, -1);
    ck_assert_int_eq(s.input_kwarg_layouts.count, 0);
    ck_assert_int_eq(s.desired_input_kwarg_layouts.count, 0);
    break;
  case 3:
    ck_assert_int_eq(s.output_layouts.count, -1);
    ck_assert_int_eq(s.desired_output_layouts.count, -1);
    break;
  case 4:
    ck_assert_int_eq(s.input_layouts.count, -1);
    ck_assert_int_eq(s.output_layouts.count, -1);
    break;
  }
  /* The traits column agrees with the family the table says. */
  static const tpx_style_family fam[] = {
      TPX_STYLE_FAMILY_COLWISE, TPX_STYLE_FAMILY_SEQUENCE,
      TPX_STYLE_FAMILY_PREPARE_INPUT, TPX_STYLE_FAMILY_PREPARE_OUTPUT,
      TPX_STYLE_FAMILY_REPLICATED};
  tpx_style_traits t = tpx_style_kind_traits(c->kind);
  if (c->family == 0)
    ck_assert(t.family == TPX_STYLE_FAMILY_COLWISE ||
              t.family == TPX_STYLE_FAMILY_ROWWISE);
  else
    ck_assert_int_eq(t.family, fam[c->family]);
  ck_assert_int_eq(t.shards_params, c->family == 0);
  ck_assert_int_eq(t.sums_grad_over_tp, c->family == 4);
  tpx_error e = {0};
  /* Every default is valid except prepare_module_output, whose two layout
   * lists are required by torch. */
  tpx_status st = tpx_style_validate(&s, &e);
  if (c->family == 3) {
    ck_assert_int_eq(st, TPX_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(e.message, "output_layouts: required"));
  } else {
    ck_assert_int_eq(st, TPX_OK);
  }
  tpx_style_kind back;
  CHECK_OK(tpx_style_kind_parse(c->name, &back, &e_));
  ck_assert_int_eq(back, c->kind);
}
END_TEST

START_TEST(test_kind_names) {
  ck_assert_ptr_null(tpx_style_kind_name(TPX_STYLE_COUNT));
  ck_assert_ptr_null(tpx_style_kind_name((tpx_style_kind)-1));
  tpx_style_kind k;
  CHECK_FAILS(tpx_style_kind_parse("colwize", &k, &e_), TPX_NOT_FOUND,
              "unknown style 'colwize'");
  CHECK_FAILS(tpx_style_kind_parse("Colwise", &k, &e_), TPX_NOT_FOUND,
              "'Colwise'");
  CHECK_FAILS(tpx_style_kind_parse(NULL, &k, &e_), TPX_INVALID_ARGUMENT,
              "NULL");
}
END_TEST

static tpx_layout_list layouts(int n, const tpx_placement *p, const int *none) {
  tpx_layout_list l;
  memset(&l, 0, sizeof l);
  l.count = n;
  for (int i = 0; i < n && i < TPX_STYLE_MAX_LAYOUTS; i++) {
    l.items[i] = p[i];
    l.is_none[i] = none ? (uint8_t)none[i] : 0;
  }
  return l;
}

START_TEST(test_validate_colwise_arity) {
  tpx_placement two[2] = {tpx_placement_replicate(), tpx_placement_shard(0)};
  tpx_style s = tpx_style_default(TPX_STYLE_COLWISE);
  s.input_layouts = layouts(2, two, NULL);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "input_layouts: colwise takes exactly one layout, got 2");
  s = tpx_style_default(TPX_STYLE_ROWWISE);
  s.output_layouts = layouts(0, two, NULL);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "output_layouts: rowwise takes exactly one layout, got 0");
  int none[1] = {1};
  s = tpx_style_default(TPX_STYLE_ROWWISE);
  s.input_layouts = layouts(1, two, none);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "null layout not allowed");
  s = tpx_style_default(TPX_STYLE_COLWISE);
  s.input_layouts.items[0] = tpx_placement_strided_shard(0, 2);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "strided_shard");
  /* "not given" (-1) means the default, as torch's `x or Default()`. */
  s = tpx_style_default(TPX_STYLE_COLWISE);
  s.input_layouts.count = -1;
  CHECK_OK(tpx_style_validate(&s, &e_));
  tpx_style d = tpx_style_default(TPX_STYLE_COLWISE);
  ck_assert(tpx_style_equal(&s, &d));
  s.kind = (tpx_style_kind)99;
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "invalid style kind 99");
}
END_TEST

START_TEST(test_validate_prepare_input) {
  tpx_placement p[3] = {tpx_placement_shard(1), tpx_placement_replicate(),
                        tpx_placement_replicate()};
  int none[3] = {0, 1, 0};
  tpx_style s = tpx_style_default(TPX_STYLE_PREPARE_MODULE_INPUT);
  s.input_layouts = layouts(3, p, none);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "desired_input_layouts: required when input_layouts is given");
  s.desired_input_layouts = layouts(2, p, NULL);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "lengths must match");
  s.desired_input_layouts = layouts(3, p, none); /* None items allowed */
  CHECK_OK(tpx_style_validate(&s, &e_));
  /* desired without input: accepted, as torch (its hook is a no-op) */
  tpx_style t = tpx_style_default(TPX_STYLE_PREPARE_MODULE_INPUT);
  t.desired_input_layouts = layouts(1, p, NULL);
  CHECK_OK(tpx_style_validate(&t, &e_));
  /* kwargs: same length */
  strcpy(s.input_kwarg_layouts.items[0].name, "hidden_states");
  s.input_kwarg_layouts.items[0].layout = tpx_placement_shard(1);
  s.input_kwarg_layouts.count = 1;
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "desired_input_kwarg_layouts: 0 entries but input_kwarg_layouts "
              "has 1");
  strcpy(s.desired_input_kwarg_layouts.items[0].name, "hidden_states");
  s.desired_input_kwarg_layouts.items[0].layout = tpx_placement_replicate();
  s.desired_input_kwarg_layouts.count = 1;
  CHECK_OK(tpx_style_validate(&s, &e_));
  s.input_kwarg_layouts.items[0].name[0] = '\0';
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT, "empty");
  s.input_layouts.count = TPX_STYLE_MAX_LAYOUTS + 1;
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT, "at most 8");
}
END_TEST

START_TEST(test_validate_prepare_output) {
  tpx_placement p[2] = {tpx_placement_replicate(), tpx_placement_shard(1)};
  tpx_style s = tpx_style_default(TPX_STYLE_PREPARE_MODULE_OUTPUT);
  s.output_layouts = layouts(1, p, NULL);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "desired_output_layouts: required");
  s.desired_output_layouts = layouts(2, p, NULL);
  CHECK_FAILS(tpx_style_validate(&s, &e_), TPX_INVALID_ARGUMENT,
              "lengths must match");
  s.desired_output_layouts = layouts(1, p + 1, NULL);
  CHECK_OK(tpx_style_validate(&s, &e_));
}
END_TEST

START_TEST(test_equal_meaningful_fields) {
  tpx_style a = tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
  tpx_style b = a;
  /* Fields a sequence-parallel style does not use do not count. */
  b.input_layouts.count = 1;
  b.input_layouts.items[0] = tpx_placement_shard(3);
  ck_assert(tpx_style_equal(&a, &b));
  b.sequence_dim = 0;
  ck_assert(!tpx_style_equal(&a, &b));
  tpx_style c = tpx_style_default(TPX_STYLE_COLWISE);
  tpx_style d = tpx_style_default(TPX_STYLE_COLWISE);
  d.output_layouts.items[0] = tpx_placement_shard(2);
  ck_assert(!tpx_style_equal(&c, &d)); /* shard(-1) != shard(2), as torch */
  tpx_style r = tpx_style_default(TPX_STYLE_ROWWISE);
  tpx_style v = tpx_style_default(TPX_STYLE_VOCAB_PARALLEL_EMBEDDING);
  ck_assert(!tpx_style_equal(&r, &v)); /* same fields, different class */
  c.use_local_output = 7;              /* any true value */
  ck_assert(tpx_style_equal(&c, &(tpx_style){0}) == 0);
  tpx_style e = tpx_style_default(TPX_STYLE_COLWISE);
  ck_assert(tpx_style_equal(&c, &e));
  ck_assert(tpx_style_equal(NULL, NULL));
  ck_assert(!tpx_style_equal(&c, NULL));
}
END_TEST

static Suite *style_suite(void) {
  Suite *s = suite_create("style");
  TCase *tc = tcase_create("core");
  tcase_add_loop_test(tc, test_default_every_style, 0, (int)NDEFAULTS);
  tcase_add_test(tc, test_kind_names);
  tcase_add_test(tc, test_validate_colwise_arity);
  tcase_add_test(tc, test_validate_prepare_input);
  tcase_add_test(tc, test_validate_prepare_output);
  tcase_add_test(tc, test_equal_meaningful_fields);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(style_suite()); }
