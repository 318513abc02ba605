/* st_read.c — read whole tensors' data from an HF checkpoint directory
 * (model.safetensors, or model.safetensors.index.json and its shards) into
 * f32 buffers (f32, bf16 and f16 on disk). The trainer reads full tensors
 * and hands them to the runtime, which keeps this rank's slice. Not a
 * general safetensors library: no writing, no mmap. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

#define MAX_FILES 64

struct tr_st {
  int nfiles;
  char *path[MAX_FILES];
  json_t *header[MAX_FILES];
  long data_start[MAX_FILES];
  json_t *weight_map; /* name -> file name, or NULL for a single file */
};

static tpx_status open_file(tr_st *st, const char *path, tpx_error *err) {
  if (st->nfiles >= MAX_FILES)
    return tpx_error_set(err, TPX_UNSUPPORTED, "%s: more than %d shards", path, MAX_FILES);
  FILE *f = fopen(path, "rb");
  if (!f) return tpx_error_set(err, TPX_IO, "%s: cannot open", path);
  unsigned char b[8];
  uint64_t n = 0;
  if (fread(b, 1, 8, f) != 8) { fclose(f); return tpx_error_set(err, TPX_PARSE, "%s: short file", path); }
  for (int i = 7; i >= 0; i--) n = (n << 8) | b[i];
  if (n > 100u * 1024 * 1024) { fclose(f); return tpx_error_set(err, TPX_PARSE, "%s: header too large", path); }
  char *h = malloc(n + 1);
  if (!h || fread(h, 1, n, f) != n) {
    free(h); fclose(f);
    return tpx_error_set(err, TPX_PARSE, "%s: truncated header", path);
  }
  fclose(f);
  json_error_t je;
  json_t *j = json_loadb(h, n, 0, &je);
  free(h);
  if (!json_is_object(j)) {
    json_decref(j);
    return tpx_error_set(err, TPX_PARSE, "%s: bad header JSON: %s", path, je.text);
  }
  st->path[st->nfiles] = strdup(path);
  st->header[st->nfiles] = j;
  st->data_start[st->nfiles] = (long)(8 + n);
  st->nfiles++;
  return TPX_OK;
}

void tr_st_close(tr_st *st) {
  if (!st) return;
  for (int i = 0; i < st->nfiles; i++) { free(st->path[i]); json_decref(st->header[i]); }
  json_decref(st->weight_map);
  free(st);
}

tpx_status tr_st_open(const char *dir, tr_st **out, tpx_error *err) {
  *out = NULL;
  tr_st *st = calloc(1, sizeof *st);
  if (!st) return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  char p[4096];
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  json_t *idx = json_load_file(p, 0, NULL);
  tpx_status s = TPX_OK;
  if (idx) {
    json_t *wm = json_object_get(idx, "weight_map");
    if (!json_is_object(wm)) {
      json_decref(idx); tr_st_close(st);
      return tpx_error_set(err, TPX_PARSE, "%s: no weight_map", p);
    }
    st->weight_map = json_incref(wm);
    json_decref(idx);
    const char *k; json_t *v;
    json_object_foreach(st->weight_map, k, v) {
      const char *fn = json_string_value(v);
      int seen = 0;
      char fp[4096];
      snprintf(fp, sizeof fp, "%s/%s", dir, fn ? fn : "");
      for (int i = 0; i < st->nfiles; i++) seen |= !strcmp(st->path[i], fp);
      if (!seen && (s = open_file(st, fp, err))) break;
    }
  } else {
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    s = open_file(st, p, err);
  }
  if (s) { tr_st_close(st); return s; }
  *out = st;
  return TPX_OK;
}

static json_t *find(tr_st *st, const char *name, int *file) {
  for (int i = 0; i < st->nfiles; i++) {
    json_t *t = json_object_get(st->header[i], name);
    if (t) { *file = i; return t; }
  }
  return NULL;
}

int tr_st_has(tr_st *st, const char *name) {
  int f;
  return find(st, name, &f) != NULL;
}

static float half_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
  if (e == 0) {
    if (!m) u = s;
    else { e = 113; while (!(m & 1024)) { m <<= 1; e--; } u = s | (e << 23) | ((m & 1023) << 13); }
  } else if (e == 31) u = s | 0x7f800000u | (m << 13);
  else u = s | ((e + 112) << 23) | (m << 13);
  float f; memcpy(&f, &u, 4); return f;
}

tpx_status tr_st_read(tr_st *st, const char *name, float *dst, int64_t numel, tpx_error *err) {
  int fi = 0;
  json_t *t = find(st, name, &fi);
  if (!t) return tpx_error_set(err, TPX_NOT_FOUND, "checkpoint: tensor '%s' is missing", name);
  const char *dt = json_string_value(json_object_get(t, "dtype"));
  json_t *shape = json_object_get(t, "shape"), *offs = json_object_get(t, "data_offsets");
  int64_t n = 1;
  for (size_t i = 0; i < json_array_size(shape); i++) n *= json_integer_value(json_array_get(shape, i));
  int es = dt && !strcmp(dt, "F32") ? 4 : dt && (!strcmp(dt, "BF16") || !strcmp(dt, "F16")) ? 2 : 0;
  if (!es) return tpx_error_set(err, TPX_UNSUPPORTED, "%s: tensor '%s' has dtype %s (F32/BF16/F16 only)", st->path[fi], name, dt ? dt : "?");
  if (n != numel) return tpx_error_set(err, TPX_VALIDATION, "%s: tensor '%s' has %lld elements, the config implies %lld", st->path[fi], name, (long long)n, (long long)numel);
  int64_t b0 = json_integer_value(json_array_get(offs, 0)), b1 = json_integer_value(json_array_get(offs, 1));
  if (b1 - b0 != n * es) return tpx_error_set(err, TPX_PARSE, "%s: tensor '%s': data_offsets do not match its shape", st->path[fi], name);
  FILE *f = fopen(st->path[fi], "rb");
  if (!f) return tpx_error_set(err, TPX_IO, "%s: cannot open", st->path[fi]);
  void *raw = es == 4 ? (void *)dst : malloc((size_t)(n * es) + 1);
  size_t got = 0;
  if (raw && fseek(f, st->data_start[fi] + (long)b0, SEEK_SET) == 0) got = fread(raw, (size_t)es, (size_t)n, f);
  fclose(f);
  if (!raw || got != (size_t)n) {
    if (raw != dst) free(raw);
    return tpx_error_set(err, TPX_IO, "%s: tensor '%s': short read", st->path[fi], name);
  }
  if (es == 2) {
    const uint16_t *h = raw;
    int bf = !strcmp(dt, "BF16");
    for (int64_t i = 0; i < n; i++) {
      if (bf) { uint32_t u = (uint32_t)h[i] << 16; memcpy(&dst[i], &u, 4); }
      else dst[i] = half_to_f32(h[i]);
    }
    free(raw);
  }
  return TPX_OK;
}
