/* base/try.h — TPX__TRY: return the status of a call that failed. The
 * error struct is already filled by the call; nothing is released, so use
 * it where nothing is held yet. */
#ifndef TPX_BASE_TRY_H
#define TPX_BASE_TRY_H

#include "tpx/error.h"

#define TPX__TRY(x)                                                            \
  do {                                                                         \
    tpx_status st_ = (x);                                                      \
    if (st_ != TPX_OK)                                                         \
      return st_;                                                              \
  } while (0)

#endif /* TPX_BASE_TRY_H */
