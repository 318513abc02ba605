/* test_placement.c — placement constructors, equality, normalisation and the
 * text form (parse / format round trips, parse errors quoting the text). */
#include <stdio.h>

#include "base_test.h"
#include "tpx/placement.h"

START_TEST(test_constructors) {
  tpx_placement r = tpx_placement_replicate();
  ck_assert_int_eq(r.kind, TPX_REPLICATE);
  tpx_placement s = tpx_placement_shard(-1);
  ck_assert_int_eq(s.kind, TPX_SHARD);
  ck_assert_int_eq(s.dim, -1);
  tpx_placement p = tpx_placement_partial(TPX_REDUCE_MAX);
  ck_assert_int_eq(p.kind, TPX_PARTIAL);
  ck_assert_int_eq(p.op, TPX_REDUCE_MAX);
  tpx_placement ss = tpx_placement_strided_shard(0, 4);
  ck_assert_int_eq(ss.kind, TPX_STRIDED_SHARD);
  ck_assert_int_eq(ss.dim, 0);
  ck_assert_int_eq(ss.split_factor, 4);
  /* Zero-initialised is Replicate. */
  tpx_placement z = {0};
  ck_assert(tpx_placement_equal(z, r));
}
END_TEST

START_TEST(test_equal) {
  const tpx_placement S = tpx_placement_shard(1);
  ck_assert(tpx_placement_equal(S, tpx_placement_shard(1)));
  /* Literal dims: Shard(-1) != Shard(2), as torch compares them. */
  ck_assert(
      !tpx_placement_equal(tpx_placement_shard(-1), tpx_placement_shard(2)));
  ck_assert(!tpx_placement_equal(S, tpx_placement_replicate()));
  ck_assert(!tpx_placement_equal(S, tpx_placement_strided_shard(1, 1)));
  ck_assert(!tpx_placement_equal(tpx_placement_strided_shard(0, 2),
                                 tpx_placement_strided_shard(0, 4)));
  ck_assert(tpx_placement_equal(tpx_placement_strided_shard(0, 4),
                                tpx_placement_strided_shard(0, 4)));
  ck_assert(!tpx_placement_equal(tpx_placement_partial(TPX_REDUCE_SUM),
                                 tpx_placement_partial(TPX_REDUCE_AVG)));
  ck_assert(tpx_placement_equal(tpx_placement_partial(TPX_REDUCE_MIN),
                                tpx_placement_partial(TPX_REDUCE_MIN)));
  /* Spare fields do not matter for Replicate. */
  tpx_placement r = tpx_placement_replicate();
  r.dim = 5;
  ck_assert(tpx_placement_equal(r, tpx_placement_replicate()));
}
END_TEST

START_TEST(test_normalize) {
  static const struct {
    int32_t dim;
    int ndim;
    int32_t want; /* -100: error */
  } cases[] = {
      {-1, 3, 2},   {-3, 3, 0},    {0, 3, 0},     {2, 3, 2},
      {3, 3, -100}, {-4, 3, -100}, {0, 0, -100},  {-1, 1, 0},
      {7, 8, 7},    {-8, 8, 0},    {0, -1, -100},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int strided = 0; strided < 2; strided++) {
      tpx_placement p = strided ? tpx_placement_strided_shard(cases[i].dim, 2)
                                : tpx_placement_shard(cases[i].dim);
      tpx_placement out = tpx_placement_replicate();
      tpx_error err = {0};
      tpx_status st = tpx_placement_normalize(p, cases[i].ndim, &out, &err);
      if (cases[i].want == -100) {
        ck_assert_int_eq(st, TPX_OUT_OF_RANGE);
        char want[32];
        snprintf(want, sizeof want, "dim %d", (int)cases[i].dim);
        ck_assert_msg(strstr(err.message, want), "%s", err.message);
      } else {
        ck_assert_int_eq(st, TPX_OK);
        ck_assert_int_eq(out.kind, p.kind);
        ck_assert_int_eq(out.dim, cases[i].want);
        ck_assert_int_eq(out.split_factor, p.split_factor);
      }
    }
  }
  /* Other kinds pass through untouched whatever ndim is. */
  tpx_placement out;
  tpx_placement p = tpx_placement_partial(TPX_REDUCE_AVG);
  ck_assert_int_eq(tpx_placement_normalize(p, 0, &out, NULL), TPX_OK);
  ck_assert(tpx_placement_equal(out, p));
  ck_assert_int_eq(
      tpx_placement_normalize(tpx_placement_replicate(), 2, &out, NULL),
      TPX_OK);
  ck_assert_int_eq(out.kind, TPX_REPLICATE);
  CHECK_FAILS(tpx_placement_normalize(p, 2, NULL, &e_), TPX_INVALID_ARGUMENT,
              "out");
}
END_TEST

static const struct {
  const char *text;
  tpx_placement_kind kind;
  int32_t dim, sf;
  tpx_reduce_op op;
  const char *canonical;
} k_parse[] = {
    {"replicate", TPX_REPLICATE, 0, 1, TPX_REDUCE_SUM, "replicate"},
    {"  Replicate \n", TPX_REPLICATE, 0, 1, TPX_REDUCE_SUM, "replicate"},
    {"shard(0)", TPX_SHARD, 0, 1, TPX_REDUCE_SUM, "shard(0)"},
    {"shard(-1)", TPX_SHARD, -1, 1, TPX_REDUCE_SUM, "shard(-1)"},
    {"SHARD( 2 )", TPX_SHARD, 2, 1, TPX_REDUCE_SUM, "shard(2)"},
    {"shard (+3)", TPX_SHARD, 3, 1, TPX_REDUCE_SUM, "shard(3)"},
    {"partial", TPX_PARTIAL, 0, 1, TPX_REDUCE_SUM, "partial"},
    {"partial(sum)", TPX_PARTIAL, 0, 1, TPX_REDUCE_SUM, "partial"},
    {"partial(avg)", TPX_PARTIAL, 0, 1, TPX_REDUCE_AVG, "partial(avg)"},
    {"Partial( MAX )", TPX_PARTIAL, 0, 1, TPX_REDUCE_MAX, "partial(max)"},
    {"partial(min)", TPX_PARTIAL, 0, 1, TPX_REDUCE_MIN, "partial(min)"},
    {"strided_shard(0,4)", TPX_STRIDED_SHARD, 0, 4, TPX_REDUCE_SUM,
     "strided_shard(0,4)"},
    {" strided_shard( -1 , 8 ) ", TPX_STRIDED_SHARD, -1, 8, TPX_REDUCE_SUM,
     "strided_shard(-1,8)"},
    {"shard(2147483647)", TPX_SHARD, INT32_MAX, 1, TPX_REDUCE_SUM,
     "shard(2147483647)"},
};

START_TEST(test_parse_and_format) {
  for (size_t i = 0; i < sizeof k_parse / sizeof k_parse[0]; i++) {
    tpx_placement p;
    tpx_error err = {0};
    ck_assert_msg(tpx_placement_parse(k_parse[i].text, &p, &err) == TPX_OK,
                  "\"%s\": %s", k_parse[i].text, err.message);
    ck_assert_int_eq(p.kind, k_parse[i].kind);
    if (p.kind == TPX_SHARD || p.kind == TPX_STRIDED_SHARD)
      ck_assert_int_eq(p.dim, k_parse[i].dim);
    if (p.kind == TPX_STRIDED_SHARD)
      ck_assert_int_eq(p.split_factor, k_parse[i].sf);
    if (p.kind == TPX_PARTIAL)
      ck_assert_int_eq(p.op, k_parse[i].op);
    char buf[64];
    int n = tpx_placement_format(p, buf, sizeof buf);
    ck_assert_str_eq(buf, k_parse[i].canonical);
    ck_assert_int_eq(n, (int)strlen(k_parse[i].canonical));
    /* The canonical form parses back to an equal placement. */
    tpx_placement q;
    ck_assert_int_eq(tpx_placement_parse(buf, &q, NULL), TPX_OK);
    ck_assert(tpx_placement_equal(p, q));
  }
}
END_TEST

START_TEST(test_format_truncation) {
  char buf[6];
  tpx_placement p = tpx_placement_strided_shard(10, 16);
  int n = tpx_placement_format(p, buf, sizeof buf);
  ck_assert_int_eq(n, (int)strlen("strided_shard(10,16)"));
  ck_assert_str_eq(buf, "strid");
  /* size 0 / NULL buffer: only the needed length. */
  ck_assert_int_eq(tpx_placement_format(p, NULL, 0), n);
  ck_assert_int_eq(tpx_placement_format(p, buf, 0), n);
  /* Garbage kinds format as such rather than crashing. */
  tpx_placement g = {(tpx_placement_kind)42, 0, TPX_REDUCE_SUM, 1};
  char big[32];
  tpx_placement_format(g, big, sizeof big);
  ck_assert_str_eq(big, "invalid(42)");
}
END_TEST

START_TEST(test_parse_bad) {
  static const char *bad[] = {
      "",
      "   ",
      "shard",
      "shard()",
      "shard(x)",
      "shard(1",
      "shard(1,2)",
      "shard(1) extra",
      "shard(99999999999)",
      "shard(1.5)",
      "replicated",
      "replicate()",
      "partial(prod)",
      "partial()",
      "partial(sum",
      "partialsum",
      "strided_shard(0)",
      "strided_shard(0,0)",
      "strided_shard(0,-2)",
      "strided_shard(0,4",
      "Shard(dim=0)",
      "S(0)",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tpx_placement p = tpx_placement_shard(7);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
    CHECK_FAILS(tpx_placement_parse(bad[i], &p, &e_), TPX_PARSE, quoted);
    /* Untouched on failure. */
    ck_assert(tpx_placement_equal(p, tpx_placement_shard(7)));
  }
  tpx_placement p;
  CHECK_FAILS(tpx_placement_parse(NULL, &p, &e_), TPX_INVALID_ARGUMENT, "text");
  CHECK_FAILS(tpx_placement_parse("replicate", NULL, &e_), TPX_INVALID_ARGUMENT,
              "out");
  ck_assert_int_eq(tpx_placement_parse("bogus", &p, NULL), TPX_PARSE);
}
END_TEST

START_TEST(test_reduce_op_names) {
  ck_assert_str_eq(tpx_reduce_op_name(TPX_REDUCE_SUM), "sum");
  ck_assert_str_eq(tpx_reduce_op_name(TPX_REDUCE_AVG), "avg");
  ck_assert_str_eq(tpx_reduce_op_name(TPX_REDUCE_MAX), "max");
  ck_assert_str_eq(tpx_reduce_op_name(TPX_REDUCE_MIN), "min");
  ck_assert_str_eq(tpx_reduce_op_name((tpx_reduce_op)17), "unknown");
}
END_TEST

static Suite *placement_suite(void) {
  Suite *s = suite_create("placement");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_constructors);
  tcase_add_test(tc, test_equal);
  tcase_add_test(tc, test_normalize);
  tcase_add_test(tc, test_parse_and_format);
  tcase_add_test(tc, test_format_truncation);
  tcase_add_test(tc, test_parse_bad);
  tcase_add_test(tc, test_reduce_op_names);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(placement_suite()); }
