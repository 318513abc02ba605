/* tpx/dtype.h — tensor element types.
 *
 * Parses and formats both spellings found in the wild: the safetensors header
 * form ("F32", "BF16", "F8_E4M3") and the Hugging Face config form
 * ("float32", "bfloat16", also "torch.bfloat16"). */
#ifndef TPX_DTYPE_H
#define TPX_DTYPE_H

#include <stddef.h>

#include "tpx/error.h"

TPX_BEGIN_DECLS

/* X(enum suffix, element size in bytes, safetensors name, HF/torch name) */
#define TPX_DTYPE_LIST(X)                                                      \
  X(F64, 8, "F64", "float64")                                                  \
  X(F32, 4, "F32", "float32")                                                  \
  X(F16, 2, "F16", "float16")                                                  \
  X(BF16, 2, "BF16", "bfloat16")                                               \
  X(F8_E4M3, 1, "F8_E4M3", "float8_e4m3fn")                                    \
  X(F8_E5M2, 1, "F8_E5M2", "float8_e5m2")                                      \
  X(F8_E8M0, 1, "F8_E8M0", "float8_e8m0fnu")                                   \
  X(I64, 8, "I64", "int64")                                                    \
  X(I32, 4, "I32", "int32")                                                    \
  X(I16, 2, "I16", "int16")                                                    \
  X(I8, 1, "I8", "int8")                                                       \
  X(U64, 8, "U64", "uint64")                                                   \
  X(U32, 4, "U32", "uint32")                                                   \
  X(U16, 2, "U16", "uint16")                                                   \
  X(U8, 1, "U8", "uint8")                                                      \
  X(BOOL, 1, "BOOL", "bool")

typedef enum tpx_dtype {
  TPX_DTYPE_INVALID = 0,
#define TPX__DTYPE_ENUM(name, size, st, hf) TPX_DTYPE_##name,
  TPX_DTYPE_LIST(TPX__DTYPE_ENUM)
#undef TPX__DTYPE_ENUM
      TPX_DTYPE_COUNT
} tpx_dtype;

/* Bytes per element; 0 for TPX_DTYPE_INVALID or out-of-range values. */
TPX_API size_t tpx_dtype_size(tpx_dtype dtype);

/* Parse any spelling: safetensors ("BF16"), HF ("bfloat16") or short
 * ("bf16"). Case-sensitive as the files write them; a
 * "torch." prefix is accepted; "float" / "half" alias float32 / float16).
 * Fills *out, or returns TPX_PARSE naming the text. */
TPX_API tpx_status tpx_dtype_parse(const char *text, tpx_dtype *out,
                                   tpx_error *err);

/* "BF16"; a static string; "INVALID" for unknown values. */
TPX_API const char *tpx_dtype_safetensors_name(tpx_dtype dtype);
/* "bfloat16"; a static string; "invalid" for unknown values. */
TPX_API const char *tpx_dtype_hf_name(tpx_dtype dtype);
/* Short form used in reports: "bf16", "f32", "f8_e4m3", "i64", "bool". A
 * static string. */
TPX_API const char *tpx_dtype_short_name(tpx_dtype dtype);

/* True for floating types (f64..f8). */
TPX_API int tpx_dtype_is_float(tpx_dtype dtype);

TPX_END_DECLS

#endif /* TPX_DTYPE_H */
