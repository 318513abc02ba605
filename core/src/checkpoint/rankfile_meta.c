/* rankfile_meta.c — the tpx-shard/1 metadata of a rank file, both ways:
 * parsing the "tpx.mesh", "tpx.rank" and "tpx.tensors" values (byte
 * buffers, so a fuzzer can drive it), building them for a rank of a
 * sharding, and the rank file names. Format: docs/CHECKPOINT.md. Not the
 * writing of rank files (rankfile_write.c) or merging them (merge*.c). */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/rankfile_impl.h"

void tpx_shard_meta_free(tpx_shard_meta *m) {
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->num_tensors; i++) {
    free(m->tensors[i].name);
    for (size_t k = 0; k < m->tensors[i].num_fold; k++)
      free(m->tensors[i].fold[k].name);
    free(m->tensors[i].fold);
  }
  free(m->tensors);
  memset(m, 0, sizeof *m);
}

static int int_list(json_t *a, int64_t *out, int *n, int max) {
  if (!json_is_array(a) || json_array_size(a) > (size_t)max)
    return -1;
  *n = (int)json_array_size(a);
  for (int i = 0; i < *n; i++) {
    json_t *v = json_array_get(a, (size_t)i);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return -1;
    out[i] = (int64_t)json_integer_value(v);
  }
  return 0;
}

/* A "fold" item's "offsets": one integer per dim, negative ones too (a
 * stored tensor bigger than the parameter starts before it). */
static int offset_list(json_t *a, int64_t *out, int *n, int max) {
  if (!json_is_array(a) || json_array_size(a) > (size_t)max)
    return -1;
  *n = (int)json_array_size(a);
  for (int i = 0; i < *n; i++) {
    json_t *v = json_array_get(a, (size_t)i);
    if (!json_is_integer(v) || json_integer_value(v) <= -INT64_MAX)
      return -1;
    out[i] = (int64_t)json_integer_value(v);
  }
  return 0;
}

/* The optional "placements" list of entry `e`: one text form per mesh dim
 * (tpx_placement_parse). */
static int parse_placements(json_t *pl, tpx_shard_tensor *e, int mesh_ndim,
                            tpx_error *err) {
  if (pl == NULL)
    return 0;
  int ok = json_is_array(pl) && json_array_size(pl) == (size_t)mesh_ndim;
  for (int d = 0; ok && d < mesh_ndim; d++) {
    const char *text = json_string_value(json_array_get(pl, (size_t)d));
    ok = text != NULL &&
         tpx_placement_parse(text, &e->placements[d], NULL) == TPX_OK;
  }
  if (!ok) {
    tpx_error_set(err, TPX_PARSE,
                  "\"tpx.tensors\" entry '%s': \"placements\" must list one "
                  "placement per mesh dim (%d)",
                  e->name, mesh_ndim);
    return -1;
  }
  e->num_placements = mesh_ndim;
  return 0;
}

/* The optional "fold" list of tensor entry `e` (global shape known): each
 * source's box must lie inside the fused tensor, or, for a stored tensor
 * bigger than it (negative offsets, or an end past the tensor's), meet
 * it. */
static int parse_fold(json_t *fold, tpx_shard_tensor *e, tpx_error *err) {
  if (fold == NULL)
    return 0;
  size_t n = json_array_size(fold);
  if (!json_is_array(fold) || n == 0 || n > (1u << 24) ||
      (e->fold = calloc(n, sizeof *e->fold)) == NULL) {
    tpx_error_set(err, TPX_PARSE,
                  "\"tpx.tensors\" entry '%s': \"fold\" must be a non-empty "
                  "list",
                  e->name);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_array_get(fold, i);
    tpx_shard_fold_source *src = &e->fold[i];
    const char *name = json_string_value(json_object_get(s, "name"));
    int no = 0, ok = name != NULL &&
                     offset_list(json_object_get(s, "offsets"), src->offsets,
                                 &no, TPX_MAX_TENSOR_DIMS) == 0 &&
                     int_list(json_object_get(s, "shape"), src->shape,
                              &src->ndim, TPX_MAX_TENSOR_DIMS) == 0 &&
                     no == e->ndim && src->ndim <= e->ndim;
    json_t *tr = json_object_get(s, "transpose");
    src->transpose = json_is_true(tr);
    ok = ok && (tr == NULL || json_is_boolean(tr)) &&
         (!src->transpose || src->ndim >= 2);
    int drop = e->ndim - src->ndim;
    for (int d = 0; ok && d < e->ndim; d++) {
      int sd = d - drop;
      if (src->transpose && sd >= src->ndim - 2)
        sd = sd == src->ndim - 2 ? src->ndim - 1 : src->ndim - 2;
      int64_t len = d < drop ? 1 : src->shape[sd], o = src->offsets[d];
      /* inside, or meeting the tensor (o + len cannot overflow then) */
      ok = (o >= 0 && o <= e->global_shape[d] &&
            len <= e->global_shape[d] - o) ||
           (len > 0 && o < e->global_shape[d] && o > -len &&
            (o <= 0 || len <= INT64_MAX - o));
    }
    if (ok)
      ok = (src->name = strdup(name)) != NULL;
    e->num_fold = i + 1;
    if (!ok) {
      tpx_error_set(err, TPX_PARSE,
                    "\"tpx.tensors\" entry '%s': \"fold\" item %zu needs a "
                    "\"name\", \"offsets\" (one per dim) and a \"shape\" whose "
                    "box lies inside the tensor or meets it (\"transpose\", "
                    "if given, a boolean, with 2 dims or more)",
                    e->name, i);
      return -1;
    }
  }
  return 0;
}

/* The optional "moe" of "tpx.mesh": {"dims": ["ep_shard", "ep"], "sizes":
 * [world / ep, ep]} into out->ep (1 when absent). */
static int parse_moe(json_t *moe, tpx_shard_meta *out, tpx_error *err) {
  out->ep = 1;
  if (moe == NULL)
    return 0;
  json_t *names = json_object_get(moe, "dims");
  int64_t sizes[TPX_MESH_MAX_DIMS];
  int n = 0;
  const char *d0 = json_string_value(json_array_get(names, 0));
  const char *d1 = json_string_value(json_array_get(names, 1));
  if (!json_is_array(names) || json_array_size(names) != 2 || !d0 || !d1 ||
      strcmp(d0, "ep_shard") != 0 || strcmp(d1, "ep") != 0 ||
      int_list(json_object_get(moe, "sizes"), sizes, &n, 2) != 0 || n != 2 ||
      sizes[0] < 1 || sizes[1] < 1 || sizes[0] * sizes[1] != out->world_size) {
    tpx_error_set(err, TPX_PARSE,
                  "\"tpx.mesh\" \"moe\" needs \"dims\" [\"ep_shard\", "
                  "\"ep\"] and \"sizes\" whose product is the world size "
                  "(%lld)",
                  (long long)out->world_size);
    return -1;
  }
  out->ep = (int)sizes[1]; /* <= the world size, itself <= 2^20 */
  return 0;
}

tpx_status tpx_shard_meta_parse(const char *mesh, size_t mesh_len,
                                const char *tensors, size_t tensors_len,
                                const char *rank, tpx_shard_meta *out,
                                tpx_error *err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *m =
      mesh ? json_loadb(mesh, mesh_len, JSON_REJECT_DUPLICATES, &je) : NULL;
  json_t *t =
      tensors ? json_loadb(tensors, tensors_len, JSON_REJECT_DUPLICATES, &je)
              : NULL;
  tpx_status rc = TPX_PARSE;
  if (!json_is_object(m) || !json_is_object(t)) {
    rc = tpx_error_set(err, TPX_PARSE,
                       "\"tpx.mesh\" and \"tpx.tensors\" must be JSON objects");
    goto out;
  }
  json_t *names = json_object_get(m, "dims");
  int nsizes = 0;
  if (!json_is_array(names) ||
      int_list(json_object_get(m, "sizes"), out->mesh_sizes, &nsizes,
               TPX_MESH_MAX_DIMS) != 0 ||
      json_array_size(names) != (size_t)nsizes || nsizes < 1) {
    rc = tpx_error_set(
        err, TPX_PARSE,
        "\"tpx.mesh\" needs \"dims\" (names) and \"sizes\" of equal "
        "length, 1..%d",
        TPX_MESH_MAX_DIMS);
    goto out;
  }
  out->mesh_ndim = nsizes;
  out->world_size = 1;
  for (int i = 0; i < nsizes; i++) {
    const char *s = json_string_value(json_array_get(names, (size_t)i));
    if (s == NULL || strlen(s) >= TPX_MESH_NAME_MAX || out->mesh_sizes[i] < 1 ||
        out->mesh_sizes[i] > (1 << 20)) {
      rc = tpx_error_set(err, TPX_PARSE,
                         "\"tpx.mesh\" dim %d: bad name or size", i);
      goto out;
    }
    snprintf(out->mesh_names[i], TPX_MESH_NAME_MAX, "%s", s);
    out->world_size *= out->mesh_sizes[i];
    if (out->world_size > (1 << 20)) {
      rc = tpx_error_set(err, TPX_PARSE, "\"tpx.mesh\" is too large");
      goto out;
    }
  }
  if (parse_moe(json_object_get(m, "moe"), out, err) != 0)
    goto out;
  char *end = NULL;
  errno = 0;
  long long r = rank ? strtoll(rank, &end, 10) : -1;
  if (!rank || !*rank || *end || errno || r < 0 || r >= out->world_size) {
    rc = tpx_error_set(err, TPX_PARSE,
                       "\"tpx.rank\" '%s' is not a rank of the mesh",
                       rank ? rank : "(missing)");
    goto out;
  }
  out->rank = r;
  size_t n = json_object_size(t), k = 0;
  out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
  if (out->tensors == NULL) {
    rc = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    goto out;
  }
  const char *key;
  json_t *v;
  json_object_foreach(t, key, v) {
    tpx_shard_tensor *e = &out->tensors[k];
    int ns = 0, no = 0;
    if (!json_is_object(v) ||
        int_list(json_object_get(v, "global_shape"), e->global_shape, &ns,
                 TPX_MAX_TENSOR_DIMS) != 0 ||
        int_list(json_object_get(v, "offsets"), e->offsets, &no,
                 TPX_MAX_TENSOR_DIMS) != 0 ||
        ns != no) {
      rc = tpx_error_set(
          err, TPX_PARSE,
          "\"tpx.tensors\" entry '%s' needs \"global_shape\" and "
          "\"offsets\" lists of equal length of non-negative integers",
          key);
      goto out;
    }
    e->ndim = ns;
    e->name = strdup(key);
    if (e->name == NULL) {
      rc = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      goto out;
    }
    out->num_tensors = ++k;
    json_t *on = json_object_get(v, "mesh");
    if (on && (!json_is_string(on) ||
               strcmp(json_string_value(on), "moe") != 0 || out->ep <= 1)) {
      rc = tpx_error_set(err, TPX_PARSE,
                         "\"tpx.tensors\" entry '%s': \"mesh\" must be "
                         "\"moe\", and only with a \"tpx.mesh\" \"moe\"",
                         key);
      goto out;
    }
    e->on_moe = on != NULL;
    if (parse_placements(json_object_get(v, "placements"), e,
                         e->on_moe ? 2 : out->mesh_ndim, err) != 0 ||
        parse_fold(json_object_get(v, "fold"), e, err) != 0) {
      rc = TPX_PARSE;
      goto out;
    }
  }
  rc = TPX_OK;
out:
  json_decref(m);
  json_decref(t);
  if (rc != TPX_OK)
    tpx_shard_meta_free(out);
  return rc;
}

void tpx_shard_file_name(int64_t rank, int64_t world_size, char *buf,
                         size_t size) {
  snprintf(buf, size, "rank-%05lld-of-%05lld.safetensors", (long long)rank,
           (long long)world_size);
}

int tpx_shard_is_file_name(const char *name) {
  long long r, w;
  int end = 0;
  return name != NULL &&
         sscanf(name, "rank-%5lld-of-%5lld.safetensors%n", &r, &w, &end) == 2 &&
         name[end] == '\0';
}

static json_t *int_array(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int d = 0; a && d < n; d++)
    if (json_array_append_new(a, json_integer(v[d])) != 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

/* The "fold" list of fused parameter `param`: its stored tensors in order,
 * each with its offsets in the parameter and its own shape. */
static json_t *fold_json(const tpx_checkpoint_reader *rd,
                         const tpx_model *model, int64_t param) {
  json_t *fold = json_array();
  int64_t n = tpx_checkpoint_param_num_sources(rd, model, param);
  for (int64_t k = 0; fold && k < n; k++) {
    tpx_checkpoint_source src;
    tpx_checkpoint_tensor t;
    json_t *e = NULL;
    int tr = 0;
    if (tpx__ckpt_param_source(rd, model, param, k, &src, &tr, NULL) ==
            TPX_OK &&
        tpx_checkpoint_tensor_info(rd, (size_t)src.tensor, &t, NULL) == TPX_OK)
      e = json_pack("{s:s, s:o*, s:o*}", "name", t.name, "offsets",
                    int_array(src.box.offset, src.box.ndim), "shape",
                    int_array(t.shape, t.ndim));
    /* Only a transposed source says so: files without it read as before. */
    if (e && tr && json_object_set_new(e, "transpose", json_true()) != 0) {
      json_decref(e);
      e = NULL;
    }
    if (e == NULL || json_array_append_new(fold, e) != 0) {
      json_decref(fold);
      fold = NULL;
    }
  }
  return fold;
}

/* The "tpx.tensors" entry of one tensor of the file; NULL out of memory. */
static json_t *tensor_json(const tpx_sharding *sh,
                           const tpx_checkpoint_reader *rd,
                           const tpx__shard_out *t) {
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  tpx_param_sharding ps;
  memset(&ps, 0, sizeof ps);
  if (t->param >= 0 && tpx_sharding_param(sh, t->param, &ps, NULL) != TPX_OK)
    return NULL;
  /* An expert parameter at ep > 1: its placements are over the MoE mesh
   * ("tpx.mesh" "moe"), and the entry says so ("mesh": "moe"). */
  const int on_moe =
      t->param >= 0 && tpx_sharding_moe_mesh(sh) &&
      tpx_sharding_param_mesh(sh, t->param) == tpx_sharding_moe_mesh(sh);
  if (on_moe)
    mesh = tpx_sharding_moe_mesh(sh);
  json_t *e = json_object(), *gs = json_array(), *off = json_array(),
         *pl = json_array();
  int bad = !e || !gs || !off || !pl;
  for (int d = 0; d < t->ndim && !bad; d++) {
    bad |= json_array_append_new(gs, json_integer(t->shape[d]));
    bad |= json_array_append_new(off, json_integer(t->slice.offset[d]));
  }
  for (int d = 0; d < tpx_mesh_ndim(mesh) && !bad; d++) {
    char buf[64];
    /* a buffer (param -1): replicated whole on every rank */
    tpx_placement_format(t->param >= 0 ? ps.placements[d]
                                       : tpx_placement_replicate(),
                         buf, sizeof buf);
    bad |= json_array_append_new(pl, json_string(buf));
  }
  json_t *fold = t->tensor < 0 && !bad
                     ? fold_json(rd, tpx_sharding_model(sh), t->param)
                     : NULL;
  bad |= t->tensor < 0 && fold == NULL;
  if (bad) {
    json_decref(e);
    json_decref(gs);
    json_decref(off);
    json_decref(pl);
    json_decref(fold);
    return NULL;
  }
  json_object_set_new(e, "global_shape", gs);
  json_object_set_new(e, "offsets", off);
  json_object_set_new(e, "placements", pl);
  if (on_moe)
    json_object_set_new(e, "mesh", json_string("moe"));
  if (fold)
    json_object_set_new(e, "fold", fold);
  return e;
}

static int64_t numel_of(const json_t *shape) {
  int64_t n = 1;
  for (size_t d = 0; d < json_array_size(shape); d++)
    n *= json_integer_value(json_array_get(shape, d));
  return n;
}

/* Whether a rank file with this metadata needs a reader newer than
 * tpx-shard/1's: the MoE mesh, a transposed fold source, or a fold source
 * with more elements than its parameter (a part of a stored tensor). */
static int needs_1_1(const json_t *m, const json_t *tj) {
  const char *name;
  const json_t *e;
  if (json_object_get(m, "moe"))
    return 1;
  json_object_foreach((json_t *)tj, name, e) {
    const json_t *fold = json_object_get(e, "fold");
    int64_t whole = numel_of(json_object_get(e, "global_shape"));
    for (size_t k = 0; k < json_array_size(fold); k++) {
      const json_t *src = json_array_get(fold, k);
      if (json_is_true(json_object_get(src, "transpose")) ||
          numel_of(json_object_get(src, "shape")) > whole)
        return 1;
    }
  }
  return 0;
}

tpx_status tpx__rankfile_meta_build(const tpx_sharding *sh,
                                    const tpx_checkpoint_reader *rd,
                                    const tpx__shard_out *ts, size_t n,
                                    char **mesh_out, char **tensors_out,
                                    const char **format_out, tpx_error *err) {
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  json_t *m = json_object(), *dims = json_array(), *sizes = json_array();
  json_t *tj = json_object();
  int bad = !m || !dims || !sizes || !tj;
  for (int d = 0; d < tpx_mesh_ndim(mesh) && !bad; d++) {
    bad |= json_array_append_new(dims, json_string(tpx_mesh_dim_name(mesh, d)));
    bad |=
        json_array_append_new(sizes, json_integer(tpx_mesh_dim_size(mesh, d)));
  }
  if (!bad) {
    bad |= json_object_set(m, "dims", dims);
    bad |= json_object_set(m, "sizes", sizes);
  }
  const tpx_mesh *moe = tpx_sharding_moe_mesh(sh);
  if (moe && !bad) { /* at ep > 1: {"dims": [ep_shard, ep], "sizes": ...} */
    json_t *mo = json_object(), *md = json_array(), *ms = json_array();
    bad |= !mo || !md || !ms;
    for (int d = 0; d < tpx_mesh_ndim(moe) && !bad; d++) {
      bad |= json_array_append_new(md, json_string(tpx_mesh_dim_name(moe, d)));
      bad |= json_array_append_new(ms, json_integer(tpx_mesh_dim_size(moe, d)));
    }
    if (!bad) {
      bad |= json_object_set_new(mo, "dims", md);
      bad |= json_object_set_new(mo, "sizes", ms);
      bad |= json_object_set_new(m, "moe", mo);
    } else {
      json_decref(mo);
      json_decref(md);
      json_decref(ms);
    }
  }
  for (size_t i = 0; i < n && !bad; i++) {
    json_t *e = tensor_json(sh, rd, &ts[i]);
    bad |= e == NULL || json_object_set_new(tj, ts[i].name, e);
  }
  *format_out =
      !bad && needs_1_1(m, tj) ? TPX_SHARD_FORMAT_1_1 : TPX_SHARD_FORMAT;
  *mesh_out = bad ? NULL : json_dumps(m, JSON_COMPACT);
  *tensors_out = bad ? NULL : json_dumps(tj, JSON_COMPACT);
  json_decref(dims);
  json_decref(sizes);
  json_decref(m);
  json_decref(tj);
  if (*mesh_out && *tensors_out)
    return TPX_OK;
  free(*mesh_out);
  free(*tensors_out);
  *mesh_out = *tensors_out = NULL;
  return tpx_error_set(err, TPX_NO_MEMORY,
                       "out of memory building the metadata");
}
