/* test_dtype.c — dtype sizes, names and parsing of every spelling. */
#include <stdio.h>

#include "base_test.h"
#include "tpx/dtype.h"

static const struct {
  const char *text;
  tpx_dtype want;
} k_parse[] = {
    /* safetensors header form */
    {"F64", TPX_DTYPE_F64},
    {"F32", TPX_DTYPE_F32},
    {"F16", TPX_DTYPE_F16},
    {"BF16", TPX_DTYPE_BF16},
    {"F8_E4M3", TPX_DTYPE_F8_E4M3},
    {"F8_E5M2", TPX_DTYPE_F8_E5M2},
    {"F8_E8M0", TPX_DTYPE_F8_E8M0},
    {"I64", TPX_DTYPE_I64},
    {"I32", TPX_DTYPE_I32},
    {"I16", TPX_DTYPE_I16},
    {"I8", TPX_DTYPE_I8},
    {"U8", TPX_DTYPE_U8},
    {"U16", TPX_DTYPE_U16},
    {"U32", TPX_DTYPE_U32},
    {"U64", TPX_DTYPE_U64},
    {"BOOL", TPX_DTYPE_BOOL},
    /* HF config form */
    {"float32", TPX_DTYPE_F32},
    {"bfloat16", TPX_DTYPE_BF16},
    {"float16", TPX_DTYPE_F16},
    {"float64", TPX_DTYPE_F64},
    {"float8_e4m3fn", TPX_DTYPE_F8_E4M3},
    {"float8_e5m2", TPX_DTYPE_F8_E5M2},
    {"float8_e8m0fnu", TPX_DTYPE_F8_E8M0},
    {"int64", TPX_DTYPE_I64},
    {"uint8", TPX_DTYPE_U8},
    {"bool", TPX_DTYPE_BOOL},
    /* torch. prefix and torch aliases */
    {"torch.bfloat16", TPX_DTYPE_BF16},
    {"torch.float32", TPX_DTYPE_F32},
    {"torch.float", TPX_DTYPE_F32},
    {"torch.half", TPX_DTYPE_F16},
    {"torch.bool", TPX_DTYPE_BOOL},
    {"float", TPX_DTYPE_F32},
    {"half", TPX_DTYPE_F16},
    {"double", TPX_DTYPE_F64},
    {"long", TPX_DTYPE_I64},
    {"int", TPX_DTYPE_I32},
    /* short form */
    {"bf16", TPX_DTYPE_BF16},
    {"f32", TPX_DTYPE_F32},
    {"f16", TPX_DTYPE_F16},
    {"f8_e4m3", TPX_DTYPE_F8_E4M3},
    {"f8_e5m2", TPX_DTYPE_F8_E5M2},
    {"i64", TPX_DTYPE_I64},
    {"i8", TPX_DTYPE_I8},
    {"u32", TPX_DTYPE_U32},
};

START_TEST(test_parse_table) {
  for (size_t i = 0; i < sizeof k_parse / sizeof k_parse[0]; i++) {
    tpx_dtype d = TPX_DTYPE_INVALID;
    tpx_error err = {0};
    ck_assert_msg(tpx_dtype_parse(k_parse[i].text, &d, &err) == TPX_OK,
                  "\"%s\": %s", k_parse[i].text, err.message);
    ck_assert_msg(d == k_parse[i].want, "\"%s\" parsed as %s", k_parse[i].text,
                  tpx_dtype_safetensors_name(d));
  }
}
END_TEST

START_TEST(test_sizes) {
  static const struct {
    tpx_dtype d;
    size_t size;
  } sizes[] = {
      {TPX_DTYPE_F64, 8},     {TPX_DTYPE_F32, 4},     {TPX_DTYPE_F16, 2},
      {TPX_DTYPE_BF16, 2},    {TPX_DTYPE_F8_E4M3, 1}, {TPX_DTYPE_F8_E5M2, 1},
      {TPX_DTYPE_F8_E8M0, 1}, {TPX_DTYPE_I64, 8},     {TPX_DTYPE_I32, 4},
      {TPX_DTYPE_I16, 2},     {TPX_DTYPE_I8, 1},      {TPX_DTYPE_U64, 8},
      {TPX_DTYPE_U32, 4},     {TPX_DTYPE_U16, 2},     {TPX_DTYPE_U8, 1},
      {TPX_DTYPE_BOOL, 1},    {TPX_DTYPE_INVALID, 0}, {TPX_DTYPE_COUNT, 0},
      {(tpx_dtype)-3, 0},     {(tpx_dtype)1000, 0},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    ck_assert_uint_eq(tpx_dtype_size(sizes[i].d), sizes[i].size);
}
END_TEST

START_TEST(test_names_round_trip) {
  /* Every name of every dtype parses back to the same dtype, and the three
   * spellings are distinct where they should be. */
  for (int i = 1; i < TPX_DTYPE_COUNT; i++) {
    tpx_dtype d = (tpx_dtype)i, back;
    const char *names[3] = {tpx_dtype_safetensors_name(d), tpx_dtype_hf_name(d),
                            tpx_dtype_short_name(d)};
    for (int k = 0; k < 3; k++) {
      ck_assert_ptr_nonnull(names[k]);
      ck_assert_int_eq(tpx_dtype_parse(names[k], &back, NULL), TPX_OK);
      ck_assert_int_eq(back, d);
    }
    ck_assert_str_ne(names[0], "INVALID");
    ck_assert_str_ne(names[2], "invalid");
  }
  ck_assert_str_eq(tpx_dtype_safetensors_name(TPX_DTYPE_BF16), "BF16");
  ck_assert_str_eq(tpx_dtype_hf_name(TPX_DTYPE_BF16), "bfloat16");
  ck_assert_str_eq(tpx_dtype_short_name(TPX_DTYPE_BF16), "bf16");
  ck_assert_str_eq(tpx_dtype_short_name(TPX_DTYPE_F8_E4M3), "f8_e4m3");
  ck_assert_str_eq(tpx_dtype_hf_name(TPX_DTYPE_F8_E4M3), "float8_e4m3fn");
  ck_assert_str_eq(tpx_dtype_short_name(TPX_DTYPE_I64), "i64");
  ck_assert_str_eq(tpx_dtype_short_name(TPX_DTYPE_BOOL), "bool");
  ck_assert_str_eq(tpx_dtype_safetensors_name(TPX_DTYPE_INVALID), "INVALID");
  ck_assert_str_eq(tpx_dtype_hf_name((tpx_dtype)99), "invalid");
  ck_assert_str_eq(tpx_dtype_short_name((tpx_dtype)-1), "invalid");
}
END_TEST

START_TEST(test_is_float) {
  ck_assert(tpx_dtype_is_float(TPX_DTYPE_F64));
  ck_assert(tpx_dtype_is_float(TPX_DTYPE_BF16));
  ck_assert(tpx_dtype_is_float(TPX_DTYPE_F8_E4M3));
  ck_assert(tpx_dtype_is_float(TPX_DTYPE_F8_E8M0));
  ck_assert(!tpx_dtype_is_float(TPX_DTYPE_I64));
  ck_assert(!tpx_dtype_is_float(TPX_DTYPE_U8));
  ck_assert(!tpx_dtype_is_float(TPX_DTYPE_BOOL));
  ck_assert(!tpx_dtype_is_float(TPX_DTYPE_INVALID));
}
END_TEST

START_TEST(test_parse_bad) {
  /* Case-sensitive as the files write them; the message quotes the text. */
  static const char *bad[] = {
      "",          "bf",    "Bfloat16", "FLOAT32", "torch.",
      "torch.F32", "BF16 ", " bf16",    "float8",  "torch.torch.float32",
      "f32x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tpx_dtype d = TPX_DTYPE_F32;
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
    CHECK_FAILS(tpx_dtype_parse(bad[i], &d, &e_), TPX_PARSE, quoted);
    ck_assert_int_eq(d, TPX_DTYPE_F32); /* untouched on failure */
  }
  tpx_dtype d;
  CHECK_FAILS(tpx_dtype_parse(NULL, &d, &e_), TPX_INVALID_ARGUMENT, "text");
  CHECK_FAILS(tpx_dtype_parse("F32", NULL, &e_), TPX_INVALID_ARGUMENT, "out");
  ck_assert_int_eq(tpx_dtype_parse("nope", &d, NULL), TPX_PARSE);
}
END_TEST

static Suite *dtype_suite(void) {
  Suite *s = suite_create("dtype");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_parse_table);
  tcase_add_test(tc, test_sizes);
  tcase_add_test(tc, test_names_round_trip);
  tcase_add_test(tc, test_is_float);
  tcase_add_test(tc, test_parse_bad);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(dtype_suite()); }
