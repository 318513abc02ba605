/* tpx/export.h — the TPX_API export macro and the C++ guard helpers.
 *
 * libtpx is built with hidden symbol visibility; only declarations marked
 * TPX_API are exported. The exported set is checked against core/tpx.symbols
 * by a test. */
#ifndef TPX_EXPORT_H
#define TPX_EXPORT_H

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

#endif /* TPX_EXPORT_H */
