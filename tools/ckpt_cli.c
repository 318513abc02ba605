/* ckpt_cli.c — tpx-shard/1 metadata parsing, progress and size parsing for
 * `tpx shard` and `tpx merge` (see ckpt_cli.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_cli.h"

void tpx_cli_shard_meta_free(tpx_cli_shard_meta *m) {
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

/* The optional "fold" list of tensor entry `e` (global shape known): each
 * source's box must lie inside the fused tensor. */
static int parse_fold(json_t *fold, tpx_cli_shard_tensor *e, char *errbuf,
                      size_t errlen) {
  if (fold == NULL)
    return 0;
  size_t n = json_array_size(fold);
  if (!json_is_array(fold) || n == 0 || n > (1u << 24) ||
      (e->fold = calloc(n, sizeof *e->fold)) == NULL) {
    snprintf(errbuf, errlen,
             "\"tpx.tensors\" entry '%s': \"fold\" must be a non-empty "
             "list",
             e->name);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_array_get(fold, i);
    tpx_cli_fold_source *src = &e->fold[i];
    const char *name = json_string_value(json_object_get(s, "name"));
    int no = 0, ok = name != NULL &&
                     int_list(json_object_get(s, "offsets"), src->offsets,
                              &no, TPX_MAX_TENSOR_DIMS) == 0 &&
                     int_list(json_object_get(s, "shape"), src->shape,
                              &src->ndim, TPX_MAX_TENSOR_DIMS) == 0 &&
                     no == e->ndim && src->ndim <= e->ndim;
    int drop = e->ndim - src->ndim;
    for (int d = 0; ok && d < e->ndim; d++) {
      int64_t len = d < drop ? 1 : src->shape[d - drop];
      ok = src->offsets[d] <= e->global_shape[d] &&
           len <= e->global_shape[d] - src->offsets[d];
    }
    if (ok)
      ok = (src->name = strdup(name)) != NULL;
    e->num_fold = i + 1;
    if (!ok) {
      snprintf(errbuf, errlen,
               "\"tpx.tensors\" entry '%s': \"fold\" item %zu needs a "
               "\"name\", \"offsets\" (one per dim) and a \"shape\" whose "
               "box lies inside the tensor",
               e->name, i);
      return -1;
    }
  }
  return 0;
}

int tpx_cli_shard_meta_parse(const char *mesh, size_t mesh_len,
                             const char *tensors, size_t tensors_len,
                             const char *rank, tpx_cli_shard_meta *out,
                             char *errbuf, size_t errlen) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *m = mesh ? json_loadb(mesh, mesh_len, JSON_REJECT_DUPLICATES, &je)
                   : NULL;
  json_t *t = tensors ? json_loadb(tensors, tensors_len,
                                   JSON_REJECT_DUPLICATES, &je)
                      : NULL;
  int rc = -1;
  if (!json_is_object(m) || !json_is_object(t)) {
    snprintf(errbuf, errlen,
             "\"tpx.mesh\" and \"tpx.tensors\" must be JSON objects");
    goto out;
  }
  json_t *names = json_object_get(m, "dims");
  int nsizes = 0;
  if (!json_is_array(names) ||
      int_list(json_object_get(m, "sizes"), out->mesh_sizes, &nsizes,
               TPX_MESH_MAX_DIMS) != 0 ||
      json_array_size(names) != (size_t)nsizes || nsizes < 1) {
    snprintf(errbuf, errlen,
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
      snprintf(errbuf, errlen, "\"tpx.mesh\" dim %d: bad name or size", i);
      goto out;
    }
    snprintf(out->mesh_names[i], TPX_MESH_NAME_MAX, "%s", s);
    out->world_size *= out->mesh_sizes[i];
    if (out->world_size > (1 << 20)) {
      snprintf(errbuf, errlen, "\"tpx.mesh\" is too large");
      goto out;
    }
  }
  char *end = NULL;
  errno = 0;
  long long r = rank ? strtoll(rank, &end, 10) : -1;
  if (!rank || !*rank || *end || errno || r < 0 || r >= out->world_size) {
    snprintf(errbuf, errlen, "\"tpx.rank\" '%s' is not a rank of the mesh",
             rank ? rank : "(missing)");
    goto out;
  }
  out->rank = r;
  size_t n = json_object_size(t), k = 0;
  out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
  if (out->tensors == NULL) {
    snprintf(errbuf, errlen, "out of memory");
    goto out;
  }
  const char *key;
  json_t *v;
  json_object_foreach(t, key, v) {
    tpx_cli_shard_tensor *e = &out->tensors[k];
    int ns = 0, no = 0;
    if (!json_is_object(v) ||
        int_list(json_object_get(v, "global_shape"), e->global_shape, &ns,
                 TPX_MAX_TENSOR_DIMS) != 0 ||
        int_list(json_object_get(v, "offsets"), e->offsets, &no,
                 TPX_MAX_TENSOR_DIMS) != 0 ||
        ns != no) {
      snprintf(errbuf, errlen,
               "\"tpx.tensors\" entry '%s' needs \"global_shape\" and "
               "\"offsets\" lists of equal length of non-negative integers",
               key);
      goto out;
    }
    e->ndim = ns;
    e->name = strdup(key);
    if (e->name == NULL) {
      snprintf(errbuf, errlen, "out of memory");
      goto out;
    }
    out->num_tensors = ++k;
    if (parse_fold(json_object_get(v, "fold"), e, errbuf, errlen) != 0)
      goto out;
  }
  rc = 0;
out:
  json_decref(m);
  json_decref(t);
  if (rc != 0)
    tpx_cli_shard_meta_free(out);
  return rc;
}

int tpx_cli_parse_bytes(const char *text, int64_t *out) {
  static const struct {
    const char *suffix;
    int64_t mul;
  } units[] = {{"KiB", 1LL << 10}, {"MiB", 1LL << 20}, {"GiB", 1LL << 30},
               {"TiB", 1LL << 40}, {"KB", 1000LL},     {"MB", 1000000LL},
               {"GB", 1000000000LL}, {"TB", 1000000000000LL}, {"B", 1},
               {"", 1}};
  if (text == NULL || *text < '0' || *text > '9')
    return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || v < 1)
    return -1;
  for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
    if (strcmp(end, units[i].suffix) == 0) {
      if (v > INT64_MAX / units[i].mul)
        return -1;
      *out = (int64_t)v * units[i].mul;
      return 0;
    }
  }
  return -1;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tpx_cli_progress_start(tpx_cli_progress *p, const char *what,
                            int64_t total_items, int64_t total_bytes) {
  p->tty = isatty(STDERR_FILENO);
  p->what = what;
  p->start = p->last = now();
  p->total_items = total_items;
  p->total_bytes = total_bytes;
}

void tpx_cli_progress_update(tpx_cli_progress *p, int64_t items,
                             int64_t bytes, int final) {
  if (!p->tty)
    return;
  double t = now();
  if (!final && t - p->last < 0.1)
    return;
  p->last = t;
  double dt = t - p->start > 1e-6 ? t - p->start : 1e-6;
  fprintf(stderr, "\r%s: %lld/%lld tensors, %.1f/%.1f MB, %.1f MB/s   %s",
          p->what, (long long)items, (long long)p->total_items,
          (double)bytes / 1e6, (double)p->total_bytes / 1e6,
          (double)bytes / 1e6 / dt, final ? "\n" : "");
  fflush(stderr);
}
