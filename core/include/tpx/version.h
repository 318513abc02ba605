/* tpx/version.h — the library's version string (tpx/tpx.h includes it). */
#ifndef TPX_VERSION_H
#define TPX_VERSION_H

#include "tpx/error.h"

TPX_BEGIN_DECLS

/* "0.1.0"; static. */
TPX_API const char *tpx_version(void);

TPX_END_DECLS

#endif /* TPX_VERSION_H */
