/* report_buffers.c — the model's buffers in the text and JSON reports (see
 * report/report_buffers.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_buffers.h"

int64_t tpx__report_buffer_bytes(const tpx_model *model) {
  int64_t sum = 0;
  for (size_t i = 0; i < tpx_model_num_buffers(model); i++)
    sum += tpx_model_buffer_bytes(model, i);
  return sum;
}

static json_t *shape_json(const int64_t *shape, int ndim) {
  json_t *a = json_array();
  for (int d = 0; a && d < ndim; d++)
    json_array_append_new(a, json_integer(shape[d]));
  return a;
}

json_t *tpx__report_buffers_json(const tpx_model *model) {
  json_t *o = json_object(), *items = json_array();
  if (!o || !items) {
    json_decref(o);
    json_decref(items);
    return NULL;
  }
  for (size_t i = 0; i < tpx_model_num_buffers(model); i++) {
    const char *name = NULL;
    const int64_t *shape = NULL;
    int ndim = 0;
    tpx_dtype dt = TPX_DTYPE_INVALID;
    if (tpx_model_buffer(model, i, &name, &shape, &ndim, &dt, NULL) != TPX_OK)
      continue;
    json_t *it = json_object();
    json_object_set_new(it, "name", json_string(name));
    json_object_set_new(it, "shape", shape_json(shape, ndim));
    json_object_set_new(it, "dtype", json_string(tpx_dtype_short_name(dt)));
    json_object_set_new(it, "bytes",
                        json_integer(tpx_model_buffer_bytes(model, i)));
    json_array_append_new(items, it);
  }
  json_object_set_new(o, "placement", json_string("replicate"));
  json_object_set_new(o, "total_bytes",
                      json_integer(tpx__report_buffer_bytes(model)));
  json_object_set_new(o, "items", items);
  return o;
}

/* `name` with every all-digit atom written as '*' (malloc'd, or NULL). */
static char *templ(const char *name) {
  size_t n = strlen(name);
  char *t = malloc(n + 1), *w = t;
  if (!t)
    return NULL;
  for (const char *p = name; *p;) {
    const char *e = strchr(p, '.');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    size_t k = 0;
    while (k < len && isdigit((unsigned char)p[k])) k++;
    if (len > 0 && k == len)
      *w++ = '*';
    else {
      memcpy(w, p, len);
      w += len;
    }
    p += len;
    if (*p == '.')
      *w++ = *p++;
  }
  *w = '\0';
  return t;
}

/* 1 when buffers i and j print as one row: same template, shape, dtype. */
static int same_row(const tpx_model *m, size_t i, const char *ti, size_t j) {
  const int64_t *si = NULL, *sj = NULL;
  int ni = 0, nj = 0;
  tpx_dtype di = TPX_DTYPE_INVALID, dj = TPX_DTYPE_INVALID;
  const char *name = NULL;
  tpx_model_buffer(m, i, NULL, &si, &ni, &di, NULL);
  tpx_model_buffer(m, j, &name, &sj, &nj, &dj, NULL);
  if (ni != nj || di != dj ||
      (ni && memcmp(si, sj, (size_t)ni * sizeof *si) != 0))
    return 0;
  char *tj = templ(name);
  int same = tj && strcmp(ti, tj) == 0;
  free(tj);
  return same;
}

static void print_row(tpx__sbuf *b, const tpx_model *m, size_t i, const char *t,
                      size_t count) {
  const int64_t *shape = NULL;
  int ndim = 0;
  tpx_dtype dt = TPX_DTYPE_INVALID;
  char x[32];
  tpx_model_buffer(m, i, NULL, &shape, &ndim, &dt, NULL);
  tpx__sbuf_printf(b, "  %s", t);
  tpx__sbuf_pad(b, 56);
  tpx__sbuf_printf(b, " [");
  for (int d = 0; d < ndim; d++)
    tpx__sbuf_printf(b, "%s%lld", d ? ", " : "", (long long)shape[d]);
  tpx__sbuf_printf(b, "] %s, %s", tpx_dtype_short_name(dt),
                   tpx_format_bytes(tpx_model_buffer_bytes(m, i), x, sizeof x));
  if (count > 1)
    tpx__sbuf_printf(b, " each, x%zu", count);
  tpx__sbuf_printf(b, "\n");
}

void tpx__report_buffers_text(tpx__sbuf *b, const tpx_model *model) {
  size_t n = tpx_model_num_buffers(model);
  if (n == 0)
    return;
  char x[32];
  tpx__sbuf_printf(b, "\nBuffers (saved tensors the module tree keeps as "
                      "buffers: replicated on every rank, never sharded, not "
                      "in the per-rank parameter bytes):\n");
  uint8_t *done = calloc(n, 1);
  if (!done) {
    b->failed = 1;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (done[i])
      continue;
    const char *name = NULL;
    tpx_model_buffer(model, i, &name, NULL, NULL, NULL, NULL);
    char *t = templ(name);
    if (!t) {
      b->failed = 1;
      break;
    }
    size_t count = 0;
    for (size_t j = i; j < n; j++)
      if (!done[j] && same_row(model, i, t, j)) {
        done[j] = 1;
        count++;
      }
    print_row(b, model, i, count > 1 ? t : name, count);
    free(t);
  }
  free(done);
  tpx__sbuf_printf(
      b, "  %zu buffer%s, %s on every rank\n", n, n == 1 ? "" : "s",
      tpx_format_bytes(tpx__report_buffer_bytes(model), x, sizeof x));
}
