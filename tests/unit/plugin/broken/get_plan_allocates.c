/* get_plan_allocates.c — get_plan allocates (and touches) as many MiB as
 * TPX_TEST_ALLOCATE_MB says before planning, answering
 * TPX_PLUGIN_NO_MEMORY when malloc fails: a stand-in for a plugin that
 * allocates without bound, for the isolated child's memory limit. With
 * TPX_TEST_ALLOCATE_CRASH=1 it writes through the NULL malloc returned
 * instead (a plugin that ignores allocation failures). Without the
 * variables it is a correct plugin. */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "get_plan_allocates");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  const char *v = getenv("TPX_TEST_ALLOCATE_MB");
  size_t mb = v ? (size_t)strtoul(v, NULL, 10) : 0;
  void **blocks = calloc(mb + 1, sizeof *blocks);
  int rc = TPX_PLUGIN_OK;
  for (size_t i = 0; blocks && i < mb && rc == TPX_PLUGIN_OK; i++) {
    blocks[i] = malloc(1 << 20);
    if (!blocks[i] && getenv("TPX_TEST_ALLOCATE_CRASH"))
      *(volatile char *)blocks[i] = 1;
    if (!blocks[i])
      rc = TPX_PLUGIN_NO_MEMORY;
    else
      memset(blocks[i], 1, 1 << 20);
  }
  for (size_t i = 0; blocks && i < mb; i++) free(blocks[i]);
  free(blocks);
  return rc == TPX_PLUGIN_OK ? fixture_add(h, ctx, "lm_head", "colwise") : rc;
}
