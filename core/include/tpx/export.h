/* tpx/export.h — the TPX_API export macro and the C++ guard helpers, for
 * code that includes this header by name. They are defined in tpx/error.h,
 * the root of the public headers, which every public header includes. */
#ifndef TPX_EXPORT_H
#define TPX_EXPORT_H

#include "tpx/error.h"

#endif /* TPX_EXPORT_H */
