/* error.c — status names/messages and the first-error-wins error struct. */
#include "tpx/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tpx_status_name(tpx_status status) {
  switch (status) {
#define TPX__STATUS_NAME(name, str)                                            \
  case TPX_##name: return "TPX_" #name;
    TPX_STATUS_LIST(TPX__STATUS_NAME)
#undef TPX__STATUS_NAME
  default: return "TPX_UNKNOWN";
  }
}

const char *tpx_status_str(tpx_status status) {
  switch (status) {
#define TPX__STATUS_STR(name, str)                                             \
  case TPX_##name: return str;
    TPX_STATUS_LIST(TPX__STATUS_STR)
#undef TPX__STATUS_STR
  default: return "unknown status";
  }
}

void tpx_error_clear(tpx_error *err) {
  if (err == NULL)
    return;
  err->status = TPX_OK;
  err->message[0] = '\0';
}

tpx_status tpx_error_set(tpx_error *err, tpx_status status, const char *fmt,
                         ...) {
  if (err == NULL || err->status != TPX_OK || status == TPX_OK)
    return status;
  err->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return status;
}
