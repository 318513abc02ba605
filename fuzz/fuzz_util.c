/* fuzz_util.c — see fuzz_util.h. */
#include "fuzz_util.h"

#include <dirent.h>
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

const char *tpx_fuzz_dir(void) { return scratch_dir(); }

const char *tpx_fuzz_subdir(const char *name) {
  static char paths[4][256];
  static char names[4][64];
  const char *dir = scratch_dir();
  if (dir == NULL)
    return NULL;
  int slot = 0;
  while (slot < 4 && names[slot][0] && strcmp(names[slot], name) != 0) slot++;
  if (slot == 4)
    return NULL;
  snprintf(names[slot], sizeof names[slot], "%s", name);
  snprintf(paths[slot], sizeof paths[slot], "%s/%s", dir, name);
  if (mkdir(paths[slot], 0700) != 0 && access(paths[slot], W_OK) != 0)
    return NULL;
  DIR *d = opendir(paths[slot]);
  struct dirent *de;
  char file[600];
  while (d && (de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    snprintf(file, sizeof file, "%s/%s", paths[slot], de->d_name);
    unlink(file);
  }
  if (d)
    closedir(d);
  return paths[slot];
}

unsigned tpx_fuzz_byte(tpx_fuzz_bytes *b) {
  if (b->n == 0)
    return 0;
  b->n--;
  return *b->p++;
}

static void write_shard(const char *file, const char *name) {
  char hdr[160];
  int n = snprintf(hdr, sizeof hdr,
                   "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],"
                   "\"data_offsets\":[0,8]}}",
                   name);
  uint8_t buf[192] = {0};
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(buf + 8, hdr, (size_t)n);
  (void)tpx_fuzz_write_file(file, buf, 8 + (size_t)n + 8);
}

const char *tpx_fuzz_write_index(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    write_shard("model-00001-of-00002.safetensors", "a.weight");
    write_shard("model-00002-of-00002.safetensors", "b.weight");
    ready = 1;
  }
  return tpx_fuzz_write_file("model.safetensors.index.json", data, size);
}
