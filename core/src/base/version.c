/* version.c — the library's version string. */
#include "tpx/version.h"
#include "tpx_config.h"

const char *tpx_version(void) { return TPX_VERSION; }
