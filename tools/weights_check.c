/* weights_check.c — `tpx plan --config C --weights W`: do C and W describe
 * the same model? The answer is the library's
 * (tpx_checkpoint_check_shapes); this keeps the CLI's int form of it. */
#include <stdio.h>

#include "cli.h"
#include "tpx/checkpoint.h"

int cli_weights_shape_conflict(const tpx_model *model, const char *weights,
                               char *msg, size_t size) {
  size_t differ = 0;
  tpx_error err;
  tpx_error_clear(&err);
  tpx_status st = tpx_checkpoint_check_shapes(model, weights, &differ, &err);
  if (differ > 0) {
    snprintf(msg, size, "%s", err.message);
    return 1;
  }
  return st == TPX_OK ? 0 : -1;
}
