/* show.c — `tpx plan --show PATTERN` (stub, filled in next). */
#include "plan_extra.h"

size_t plan_show(FILE *out, const tpx_sharding *sh, const char *pattern,
                 int color) {
  (void)out; (void)sh; (void)pattern; (void)color;
  return 0;
}
