/* dtype.c — element types: sizes and the three spellings (safetensors "BF16",
 * Hugging Face / torch "bfloat16", short "bf16") plus a few torch aliases.
 *
 * Not a conversion library: nothing here touches element data. */
#include "tpx/dtype.h"

#include <string.h>

typedef struct dtype_info {
  size_t size;
  const char *st; /* safetensors header form */
  const char *hf; /* HF config / torch attribute form */
} dtype_info;

/* Indexed by tpx_dtype; slot 0 is TPX_DTYPE_INVALID. The short names are
 * kept here rather than in the header list because only reports use them. */
static const dtype_info k_info[TPX_DTYPE_COUNT] = {
    [TPX_DTYPE_INVALID] = {0, "INVALID", "invalid"},
#define TPX__DTYPE_INFO(name, size, st, hf) [TPX_DTYPE_##name] = {size, st, hf},
    TPX_DTYPE_LIST(TPX__DTYPE_INFO)
#undef TPX__DTYPE_INFO
};

static const struct {
  tpx_dtype dtype;
  const char *name;
} k_short[] = {
    {TPX_DTYPE_F64, "f64"},         {TPX_DTYPE_F32, "f32"},
    {TPX_DTYPE_F16, "f16"},         {TPX_DTYPE_BF16, "bf16"},
    {TPX_DTYPE_F8_E4M3, "f8_e4m3"}, {TPX_DTYPE_F8_E5M2, "f8_e5m2"},
    {TPX_DTYPE_F8_E8M0, "f8_e8m0"}, {TPX_DTYPE_I64, "i64"},
    {TPX_DTYPE_I32, "i32"},         {TPX_DTYPE_I16, "i16"},
    {TPX_DTYPE_I8, "i8"},           {TPX_DTYPE_U64, "u64"},
    {TPX_DTYPE_U32, "u32"},         {TPX_DTYPE_U16, "u16"},
    {TPX_DTYPE_U8, "u8"},           {TPX_DTYPE_BOOL, "bool"},
};

/* torch attribute aliases (torch.float is float32, torch.half float16, ...)
 * that HF configs occasionally carry. */
static const struct {
  tpx_dtype dtype;
  const char *name;
} k_alias[] = {
    {TPX_DTYPE_F32, "float"},  {TPX_DTYPE_F16, "half"},
    {TPX_DTYPE_F64, "double"}, {TPX_DTYPE_I64, "long"},
    {TPX_DTYPE_I32, "int"},    {TPX_DTYPE_I16, "short"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int valid(tpx_dtype d) {
  return (int)d > (int)TPX_DTYPE_INVALID && (int)d < (int)TPX_DTYPE_COUNT;
}

size_t tpx_dtype_size(tpx_dtype dtype) {
  return valid(dtype) ? k_info[dtype].size : 0;
}

const char *tpx_dtype_safetensors_name(tpx_dtype dtype) {
  return valid(dtype) ? k_info[dtype].st : "INVALID";
}

const char *tpx_dtype_hf_name(tpx_dtype dtype) {
  return valid(dtype) ? k_info[dtype].hf : "invalid";
}

const char *tpx_dtype_short_name(tpx_dtype dtype) {
  for (size_t i = 0; i < COUNT(k_short); i++)
    if (k_short[i].dtype == dtype)
      return k_short[i].name;
  return "invalid";
}

int tpx_dtype_is_float(tpx_dtype dtype) {
  return dtype >= TPX_DTYPE_F64 && dtype <= TPX_DTYPE_F8_E8M0;
}

/* HF / torch names, with or without the "torch." prefix. */
static tpx_dtype lookup_hf(const char *s) {
  for (int d = 1; d < TPX_DTYPE_COUNT; d++)
    if (strcmp(s, k_info[d].hf) == 0)
      return (tpx_dtype)d;
  for (size_t i = 0; i < COUNT(k_alias); i++)
    if (strcmp(s, k_alias[i].name) == 0)
      return k_alias[i].dtype;
  return TPX_DTYPE_INVALID;
}

tpx_status tpx_dtype_parse(const char *text, tpx_dtype *out, tpx_error *err) {
  if (text == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_dtype_parse: %s is NULL",
                         text == NULL ? "text" : "out");
  tpx_dtype d = TPX_DTYPE_INVALID;
  for (int i = 1; i < TPX_DTYPE_COUNT && d == TPX_DTYPE_INVALID; i++)
    if (strcmp(text, k_info[i].st) == 0)
      d = (tpx_dtype)i;
  for (size_t i = 0; i < COUNT(k_short) && d == TPX_DTYPE_INVALID; i++)
    if (strcmp(text, k_short[i].name) == 0)
      d = k_short[i].dtype;
  if (d == TPX_DTYPE_INVALID)
    d = lookup_hf(strncmp(text, "torch.", 6) == 0 ? text + 6 : text);
  if (d == TPX_DTYPE_INVALID)
    return tpx_error_set(err, TPX_PARSE,
                         "unknown dtype \"%.200s\" (expected e.g. \"BF16\", "
                         "\"bfloat16\", \"torch.float32\" or \"bf16\")",
                         text);
  *out = d;
  return TPX_OK;
}
