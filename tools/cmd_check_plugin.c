/* cmd_check_plugin.c — `tpx check-plugin` (filled by a later issue). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int tpx_cmd_check_plugin(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: tpx check-plugin [options]\n\n(not implemented yet)\n");
      return 0;
    }
  }
  fprintf(stderr, "tpx check-plugin: not implemented yet\n");
  return 2;
}
