/* pipe_garbage.c — get_plan writes junk onto every pipe it can find among
 * its file descriptors above stderr (in an isolated call: the result pipe),
 * then returns a correct plan. */
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "pipe_garbage");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  for (int fd = 3; fd < 256; fd++) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
        write(fd, "\x01garbage}{", 10) != 10) {
      /* not writable: the read end */
    }
  }
  return fixture_add(h, ctx, "lm_head", "colwise");
}
