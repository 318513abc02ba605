// cxx_headers.cpp — every public header and the plugin ABI header compile
// as C++ (extern "C" guards, no C-only constructs) and link against libtpx.
#include <tpx/plugin.h>
#include <tpx/tpx.h>

extern "C" TPX_PLUGIN_EXPORT int register_parallel_strategy(
    const tpx_plugin_host *host, tpx_plugin_info *info);

int main() {
  tpx_error err = {};
  tpx_mesh *mesh = nullptr;
  const char *names[] = {"tp"};
  const int64_t sizes[] = {2};
  if (tpx_mesh_create(names, sizes, 1, &mesh, &err) != TPX_OK)
    return 1;
  tpx_mesh_destroy(mesh);
  return TPX_PLUGIN_ABI_VERSION_MAJOR(TPX_PLUGIN_ABI_CURRENT) == 1 ? 0 : 1;
}
