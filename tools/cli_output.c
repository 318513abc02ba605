/* cli_output.c — whether what a `tpx` command printed reached standard
 * output. A report that went nowhere (a full disk, /dev/full, a closed
 * descriptor) must not exit 0: scripts take 0 as "done, and the output is
 * there" (docs/tpx.1 EXIT STATUS). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_output_failed(const char *cmd, int write_errno) {
  errno = 0;
  int flushed = fflush(stdout) == 0;
  int e = !flushed && errno ? errno : write_errno;
  if (flushed && !ferror(stdout))
    return 0;
  /* a write that failed before this flush left its reason nowhere, unless
   * the caller saw it */
  fprintf(stderr, "%s: cannot write output to standard output: %s\n", cmd,
          e ? strerror(e) : "a write failed");
  clearerr(stdout); /* said once: a later check reports only new failures */
  return 1;
}
