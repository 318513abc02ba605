/* tpx/error.h — status codes and the caller-owned error struct.
 *
 * Every fallible tpx call returns a tpx_status and takes a `tpx_error *`
 * (may be NULL) as its last argument. The first error recorded wins: later
 * failures never overwrite the message of the one that caused them. The
 * message names the object at fault (file, plan key, parameter, plugin path)
 * and, where it helps, the fix. */
#ifndef TPX_ERROR_H
#define TPX_ERROR_H

#include <stddef.h>

/* TPX_API marks what libtpx exports: it is built with hidden symbol
 * visibility, and the exported set is checked against core/tpx.symbols by
 * a test. TPX_BEGIN_DECLS / TPX_END_DECLS are the C++ guards. They live
 * here, in the header every public header includes, so the root of
 * the public headers is one file (tpx/export.h includes this one). */
#if defined(_WIN32)
#define TPX_API __declspec(dllexport)
#elif defined(__GNUC__)
#define TPX_API __attribute__((visibility("default")))
#else
#define TPX_API
#endif

#ifdef __cplusplus
#define TPX_BEGIN_DECLS extern "C" {
#define TPX_END_DECLS }
#else
#define TPX_BEGIN_DECLS
#define TPX_END_DECLS
#endif

TPX_BEGIN_DECLS

/* One list generates the enum, tpx_status_name() and tpx_status_str(). */
#define TPX_STATUS_LIST(X)                                                     \
  X(OK, "success")                                                             \
  X(INVALID_ARGUMENT, "invalid argument")                                      \
  X(OUT_OF_RANGE, "value out of range")                                        \
  X(NOT_FOUND, "not found")                                                    \
  X(ALREADY_EXISTS, "already exists")                                          \
  X(PARSE, "parse error")                                                      \
  X(IO, "input/output error")                                                  \
  X(NO_MEMORY, "out of memory")                                                \
  X(UNSUPPORTED, "not supported")                                              \
  X(PLUGIN, "plugin error")                                                    \
  X(ABI_MISMATCH, "plugin ABI version mismatch")                               \
  X(VALIDATION, "validation failed")                                           \
  X(COMM, "communication error")                                               \
  X(NO_DEVICE, "no device available")                                          \
  X(TIMEOUT, "timed out")                                                      \
  X(INTERNAL, "internal error")

typedef enum tpx_status {
#define TPX__STATUS_ENUM(name, str) TPX_##name,
  TPX_STATUS_LIST(TPX__STATUS_ENUM)
#undef TPX__STATUS_ENUM
      TPX_STATUS_COUNT
} tpx_status;

#define TPX_ERROR_MESSAGE_SIZE 512

/* Caller-owned; zero-initialise (or tpx_error_clear) before the first call. */
typedef struct tpx_error {
  tpx_status status;                    /* TPX_OK while no error was recorded */
  char message[TPX_ERROR_MESSAGE_SIZE]; /* NUL-terminated, may be truncated */
} tpx_error;

/* "TPX_INVALID_ARGUMENT"; a static string, never NULL ("TPX_UNKNOWN" for
 * values outside the enum). */
TPX_API const char *tpx_status_name(tpx_status status);
/* "invalid argument"; a static string, never NULL. */
TPX_API const char *tpx_status_str(tpx_status status);

/* Reset to TPX_OK with an empty message. NULL is a no-op. */
TPX_API void tpx_error_clear(tpx_error *err);

/* Record an error unless one is already recorded (the first error wins).
 * Returns `status`, so callers can write `return tpx_error_set(...)`.
 * `err` may be NULL; printf-style formatting. */
TPX_API tpx_status tpx_error_set(tpx_error *err, tpx_status status,
                                 const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

TPX_END_DECLS

#endif /* TPX_ERROR_H */
