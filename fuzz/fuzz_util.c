/* fuzz_util.c — see fuzz_util.h. */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *tpx_fuzz_cstr(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (s == NULL)
    return NULL;
  if (size > 0)
    memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

static const char *scratch_dir(void) {
  static char dir[64];
  if (dir[0] == '\0') {
    snprintf(dir, sizeof dir, "/tmp/tpx-fuzz-%ld", (long)getpid());
    if (mkdir(dir, 0700) != 0 && access(dir, W_OK) != 0) {
      dir[0] = '\0';
      return NULL;
    }
  }
  return dir;
}

const char *tpx_fuzz_write_file(const char *name, const uint8_t *data,
                                size_t size) {
  static char path[256];
  const char *dir = scratch_dir();
  if (dir == NULL)
    return NULL;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL)
    return NULL;
  size_t n = size > 0 ? fwrite(data, 1, size, f) : 0;
  int bad = (n != size) | fclose(f);
  return bad ? NULL : path;
}
