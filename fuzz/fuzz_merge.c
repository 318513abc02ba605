/* fuzz_merge.c — libFuzzer target: tpx_shard_merge's pieces and coverage
 * (core/src/checkpoint/merge_pieces.c, merge.c). The input decodes into a
 * mesh (1-3 dims of 1-3), one tensor (1-2 dims of 1-9) with a placement
 * per mesh dim, and for every rank the box the layout function gives it,
 * then perturbs some: a shifted offset, a longer or shorter piece, another
 * placement, a wrong world size or run id, a missing rank. Each rank file
 * holds, at every element of its piece, that element's index in the whole
 * tensor. Whatever the merge accepts must therefore read back as 0, 1, 2,
 * ... exactly: an accepted overlap, hole or misplaced piece is a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_WORLD 27

typedef struct setup {
  int mesh_ndim, ndim;
  int64_t mesh_sizes[3], shape[2], world;
  tpx_placement pl[3];
} setup;

static tpx_placement pick_placement(unsigned b, int ndim) {
  switch (b % 4) {
  case 0: return tpx_placement_replicate();
  case 1: return tpx_placement_shard(0);
  case 2: return tpx_placement_shard(ndim - 1);
  default: return tpx_placement_strided_shard(0, 2);
  }
}

static void int_list(char *buf, size_t size, const int64_t *v, int n) {
  size_t u = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < n && u < size; i++)
    u += (size_t)snprintf(buf + u, size - u, "%s%lld", i ? "," : "",
                          (long long)v[i]);
  if (u < size)
    snprintf(buf + u, size - u, "]");
}

/* Writes rank r's file: box `box` of the tensor, with `pl` as its
 * placements, tpx.world_size `ws` and run id `run`. */
static void write_rank(const char *dir, const setup *s, int64_t r,
                       const tpx_slice *box, const tpx_placement *pl,
                       int64_t ws, const char *run) {
  char mesh[256], tensors[1024], off[64], gs[64], pls[256] = "[";
  const char *names[3] = {"\"a\"", "\"b\"", "\"c\""};
  char sizes[64];
  int_list(sizes, sizeof sizes, s->mesh_sizes, s->mesh_ndim);
  snprintf(mesh, sizeof mesh, "{\"dims\":[%s%s%s%s%s],\"sizes\":%s}", names[0],
           s->mesh_ndim > 1 ? "," : "", s->mesh_ndim > 1 ? names[1] : "",
           s->mesh_ndim > 2 ? "," : "", s->mesh_ndim > 2 ? names[2] : "",
           sizes);
  for (int d = 0; d < s->mesh_ndim; d++) {
    char t[64];
    tpx_placement_format(pl[d], t, sizeof t);
    size_t u = strlen(pls);
    snprintf(pls + u, sizeof pls - u, "%s\"%s\"", d ? "," : "", t);
  }
  strncat(pls, "]", sizeof pls - strlen(pls) - 1);
  int_list(off, sizeof off, box->offset, s->ndim);
  int_list(gs, sizeof gs, s->shape, s->ndim);
  snprintf(tensors, sizeof tensors,
           "{\"t\":{\"global_shape\":%s,\"offsets\":%s,\"placements\":%s}}", gs,
           off, pls);
  char rank[32], world[32], fname[64];
  snprintf(rank, sizeof rank, "%lld", (long long)r);
  snprintf(world, sizeof world, "%lld", (long long)ws);
  tpx_shard_file_name(r, s->world, fname, sizeof fname);
  const char *keys[] = {"format",         "tpx.mesh",    "tpx.rank",
                        "tpx.world_size", "tpx.tensors", "tpx.run_id"};
  const char *vals[] = {TPX_SHARD_FORMAT, mesh, rank, world, tensors, run};
  tpx_checkpoint_entry e = {"t", TPX_DTYPE_I32, s->ndim, {0}};
  memcpy(e.shape, box->length, sizeof e.shape);
  tpx_checkpoint_writer_options wo = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  wo.file_name = fname;
  wo.num_metadata = 6;
  wo.metadata_keys = keys;
  wo.metadata_values = vals;
  tpx_checkpoint_writer *w = NULL;
  if (tpx_checkpoint_writer_create(dir, &e, 1, &wo, &w, NULL) != TPX_OK)
    return;
  int64_t n = tpx_slice_numel(box);
  int32_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; v && i < n; i++) { /* global index of local i */
    int64_t row = s->ndim == 2 ? i / box->length[1] : 0;
    int64_t col = s->ndim == 2 ? i % box->length[1] : i;
    int64_t g0 = box->offset[0] + (s->ndim == 2 ? row : col);
    int64_t g1 = s->ndim == 2 ? box->offset[1] + col : 0;
    int inside = g0 < s->shape[0] && (s->ndim == 1 || g1 < s->shape[1]);
    v[i] = inside ? (int32_t)(s->ndim == 2 ? g0 * s->shape[1] + g1 : g0) : -1;
  }
  tpx_slice local = *box;
  memset(local.offset, 0, sizeof local.offset);
  if (v && tpx_checkpoint_write_slice(w, "t", &local, TPX_DTYPE_I32, v, NULL) ==
               TPX_OK)
    (void)tpx_checkpoint_writer_finish(w, NULL, NULL);
  free(v);
  tpx_checkpoint_writer_destroy(w);
}

static void decode(tpx_fuzz_bytes *in, setup *s) {
  s->mesh_ndim = 1 + (int)(tpx_fuzz_byte(in) % 3);
  s->world = 1;
  for (int d = 0; d < s->mesh_ndim; d++) {
    s->mesh_sizes[d] = 1 + tpx_fuzz_byte(in) % 3;
    s->world *= s->mesh_sizes[d];
  }
  s->ndim = 1 + (int)(tpx_fuzz_byte(in) % 2);
  for (int d = 0; d < s->ndim; d++) s->shape[d] = 1 + tpx_fuzz_byte(in) % 9;
  for (int d = 0; d < s->mesh_ndim; d++)
    s->pl[d] = pick_placement(tpx_fuzz_byte(in), s->ndim);
}

/* The merged tensor must be 0, 1, 2, ... */
static void check_merged(const char *out, const setup *s) {
  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", out);
  tpx_checkpoint_reader *rd = NULL;
  if (tpx_checkpoint_reader_create(path, NULL, &rd, NULL) != TPX_OK)
    abort();
  tpx_checkpoint_tensor t;
  if (tpx_checkpoint_num_tensors(rd) != 1 ||
      tpx_checkpoint_tensor_info(rd, 0, &t, NULL) != TPX_OK ||
      t.ndim != s->ndim || memcmp(t.shape, s->shape, (size_t)s->ndim * 8))
    abort();
  tpx_slice all;
  memset(&all, 0, sizeof all);
  all.ndim = s->ndim;
  memcpy(all.length, s->shape, (size_t)s->ndim * 8);
  int64_t n = tpx_slice_numel(&all);
  int32_t v[81];
  if (tpx_checkpoint_read_slice(rd, 0, &all, TPX_DTYPE_I32, v, sizeof v,
                                NULL) != TPX_OK)
    abort();
  for (int64_t i = 0; i < n; i++)
    if (v[i] != (int32_t)i)
      abort(); /* the merge accepted pieces that do not tile the tensor */
  tpx_checkpoint_reader_destroy(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tpx_fuzz_bytes in = {data, size};
  setup s;
  decode(&in, &s);
  const char *ranks = tpx_fuzz_subdir("ranks");
  const char *out = tpx_fuzz_subdir("merged");
  tpx_mesh *mesh = NULL;
  const char *names[3] = {"a", "b", "c"};
  if (!ranks || !out ||
      tpx_mesh_create(names, s.mesh_sizes, s.mesh_ndim, &mesh, NULL) != TPX_OK)
    return 0;
  for (int64_t r = 0; r < s.world; r++) {
    tpx_slice box;
    if (tpx_layout_local_slice(s.shape, s.ndim, mesh, s.pl, r, &box, NULL) !=
        TPX_OK)
      break;
    tpx_placement pl[3] = {s.pl[0], s.pl[1], s.pl[2]};
    int64_t ws = s.world;
    const char *run = "run";
    unsigned b = tpx_fuzz_byte(&in), d = tpx_fuzz_byte(&in) % 2;
    int dim = (int)d < s.ndim ? (int)d : 0;
    switch (b % 16) { /* 0..7: honest */
    case 8: box.offset[dim] += 1; break;
    case 9:
      if (box.offset[dim] > 0)
        box.offset[dim] -= 1;
      break;
    case 10: box.length[dim] += 1; break;
    case 11:
      if (box.length[dim] > 0)
        box.length[dim] -= 1;
      break;
    case 12: pl[0] = pick_placement(tpx_fuzz_byte(&in), s.ndim); break;
    case 13: ws += 1; break;
    case 14: run = "other"; break;
    case 15: continue; /* this rank's file is missing */
    default: break;
    }
    write_rank(ranks, &s, r, &box, pl, ws, run);
  }
  tpx_mesh_destroy(mesh);
  tpx_shard_merge_options mo = TPX_SHARD_MERGE_OPTIONS_INIT;
  if (tpx_shard_merge(ranks, out, &mo, NULL) == TPX_OK)
    check_merged(out, &s);
  return 0;
}
