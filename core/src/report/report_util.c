/* report_util.c — helpers shared by the JSON and text reports (see
 * report/report_util.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "model/model_view.h"
#include "report/report_util.h"

tpx_dtype tpx__report_model_dtype(const tpx_model *model) {
  tpx_dtype declared;
  if (tpx__model_config_dtype(model, 0, &declared))
    return declared;
  int64_t per[TPX_DTYPE_COUNT];
  memset(per, 0, sizeof per);
  size_t n = tpx_model_num_params(model);
  for (size_t p = 0; p < n; p++) {
    tpx_param_info pi;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK)
      continue;
    if ((int)pi.dtype <= 0 || pi.dtype >= TPX_DTYPE_COUNT)
      continue;
    int64_t e = 1;
    for (int d = 0; d < pi.ndim; d++) e *= pi.shape[d];
    per[pi.dtype] += e;
  }
  tpx_dtype best = TPX_DTYPE_INVALID;
  for (int d = 1; d < TPX_DTYPE_COUNT; d++)
    if (per[d] > (best ? per[best] : 0))
      best = (tpx_dtype)d;
  return best;
}

int tpx_report_ok(const tpx_sharding *sh, const tpx_report_options *opts) {
  if (opts && opts->selection_diags &&
      tpx_diag_count_at_least(opts->selection_diags, TPX_DIAG_ERROR) > 0)
    return 0;
  return sh ? tpx_sharding_ok(sh) : 0;
}

const char *tpx_format_bytes(int64_t bytes, char *buf, size_t size) {
  double b = (double)bytes;
  if (!buf || size == 0)
    return buf;
  if (bytes >= ((int64_t)1 << 30))
    snprintf(buf, size, "%.2f GiB", b / (double)((int64_t)1 << 30));
  else if (bytes >= ((int64_t)1 << 20))
    snprintf(buf, size, "%.1f MiB", b / (double)((int64_t)1 << 20));
  else if (bytes >= 1024)
    snprintf(buf, size, "%.1f KiB", b / 1024.0);
  else
    snprintf(buf, size, "%lld B", (long long)bytes);
  return buf;
}

void tpx__sbuf_printf(tpx__sbuf *b, const char *fmt, ...) {
  if (b->failed)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? room : 0,
                      fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = 1;
      return;
    }
    if (b->data && (size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    if (TPX_GROW(b->data, b->cap, b->len + (size_t)n + 1, 4096)) {
      b->failed = 1;
      return;
    }
  }
}

void tpx__sbuf_pad(tpx__sbuf *b, size_t col) {
  /* pad the current line to `col` characters */
  size_t start = b->len;
  while (start > 0 && b->data[start - 1] != '\n') start--;
  size_t have = b->len - start;
  if (have < col)
    tpx__sbuf_printf(b, "%*s", (int)(col - have), "");
  else
    tpx__sbuf_printf(b, " ");
}

void tpx__sbuf_free(tpx__sbuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

tpx_status tpx__report_opts(const tpx_report_options *in,
                            tpx_report_options *out, const char *fn,
                            tpx_error *err) {
  const tpx_report_options def = TPX_REPORT_OPTIONS_INIT;
  const size_t min = offsetof(tpx_report_options, indent) + sizeof(int);
  *out = def;
  if (!in)
    return TPX_OK;
  if (in->struct_size < min)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: options struct_size %zu too small "
                         "(use TPX_REPORT_OPTIONS_INIT)",
                         fn, in->struct_size);
  memcpy(out, in,
         in->struct_size < sizeof *out ? in->struct_size : sizeof *out);
  out->struct_size = sizeof *out;
  /* The selection handed over whole fills what the caller left unset. */
  const tpx_selection *sel = out->selection;
  if (sel) {
    if (!out->plan_source)
      out->plan_source = tpx_plan_source_name(tpx_selection_source(sel));
    if (!out->plugin_name)
      out->plugin_name = tpx_selection_plugin_name(sel);
    if (!out->plugin_path)
      out->plugin_path = tpx_selection_plugin_path(sel);
    if (!out->function)
      out->function = tpx_selection_function(sel);
    if (!out->num_trace) {
      out->num_trace = tpx_selection_trace_size(sel);
      out->trace = tpx_selection_trace_lines(sel);
    }
    if (!out->num_strategy) {
      out->num_strategy = tpx_selection_num_strategy(sel);
      out->strategy = tpx_selection_strategy_lines(sel);
    }
  }
  return TPX_OK;
}

const char *tpx__report_strategy(const tpx_report_options *o, const char *key) {
  size_t n = strlen(key);
  for (size_t i = 0; o->strategy && i < o->num_strategy; i++) {
    const char *s = o->strategy[i];
    if (s && strncmp(s, key, n) == 0 && s[n] == '=')
      return s + n + 1;
  }
  return NULL;
}

int tpx__report_heads_split(const tpx_head_counts *hc, int64_t tp) {
  return tp >= 1 && hc->heads >= 0 && hc->heads % tp == 0 &&
         (hc->kv_heads <= 0 || hc->kv_heads % tp == 0);
}

void tpx__report_moe_coords(const tpx_sharding *sh, int64_t rank,
                            const char *sep, const char *comma, tpx__sbuf *b) {
  const tpx_mesh *moe = tpx_sharding_moe_mesh(sh);
  int64_t c[TPX_MESH_MAX_DIMS];
  if (!moe || tpx_mesh_coords(moe, rank, c, NULL) != TPX_OK)
    return;
  for (int d = 0; d < tpx_mesh_ndim(moe); d++)
    tpx__sbuf_printf(b, "%s\"%s\"%s%lld", comma, tpx_mesh_dim_name(moe, d), sep,
                     (long long)c[d]);
}
