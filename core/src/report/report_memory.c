/* report_memory.c — training memory in the reports (see
 * report/report_memory.h): per_rank `memory` objects in tpx-report/1, the
 * --rank slice fields of each parameter, and the text section. The figures
 * come from tpx_memory_ranks (core/src/shard/memory.c); the formulas are in
 * docs/MEMORY.md. */
#include <stdlib.h>
#include <string.h>

#include "report/report_memory.h"

static int fill(const tpx_sharding *sh, const tpx_memory_options *mo,
                tpx__mem_window *w, int64_t r) {
  if (w->n && r >= w->first && r < w->first + (int64_t)w->n)
    return 1;
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  size_t cap = sizeof w->m / sizeof w->m[0];
  size_t n = world - r < (int64_t)cap ? (size_t)(world - r) : cap;
  w->n = 0;
  if (tpx_memory_ranks(sh, mo, r, n, w->m, NULL) != TPX_OK)
    return 0;
  w->first = r;
  w->n = n;
  return 1;
}

int tpx__report_memory_offload(const tpx_memory_options *mo) {
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  if (mo)
    memcpy(&o, mo, mo->struct_size < sizeof o ? mo->struct_size : sizeof o);
  return o.offload != 0;
}

void tpx__report_memory_write(tpx__sbuf *b, const tpx_memory *m,
                              const char *sep, const char *comma, int offload) {
  tpx__sbuf_printf(b,
                   "%s\"memory\"%s{\"params\"%s%lld%s\"grads\"%s%lld%s"
                   "\"optimizer\"%s%lld%s\"gather_peak\"%s%lld%s"
                   "\"activations\"%s%lld%s\"peak\"%s%lld%s"
                   "\"optimizer_torch\"%s%lld",
                   comma, sep, sep, (long long)m->params, comma, sep,
                   (long long)m->grads, comma, sep, (long long)m->optimizer,
                   comma, sep, (long long)m->gather_peak, comma, sep,
                   (long long)m->activations, comma, sep, (long long)m->peak,
                   comma, sep, (long long)m->optimizer_torch);
  /* Only with offload, so that reports without it stay as they were. */
  if (offload)
    tpx__sbuf_printf(b, "%s\"device\"%s%lld%s\"host\"%s%lld", comma, sep,
                     (long long)m->device, comma, sep, (long long)m->host);
  /* Only at ep > 1 with --seq: part of activations. */
  if (m->moe_dispatch)
    tpx__sbuf_printf(b, "%s\"moe_dispatch\"%s%lld", comma, sep,
                     (long long)m->moe_dispatch);
  tpx__sbuf_printf(b, "}");
}

int tpx__report_memory_json(const tpx_sharding *sh,
                            const tpx_memory_options *mo, tpx__mem_window *w,
                            int64_t r, const char *sep, const char *comma,
                            tpx__sbuf *b) {
  if (!fill(sh, mo, w, r))
    return 0;
  tpx__report_memory_write(b, &w->m[r - w->first], sep, comma,
                           tpx__report_memory_offload(mo));
  return 1;
}

tpx_status tpx__report_memory_check(const tpx_sharding *sh,
                                    const tpx_memory_options *mo,
                                    tpx_error *err) {
  tpx_memory m;
  if (tpx_mesh_world_size(tpx_sharding_mesh(sh)) < 1)
    return TPX_OK;
  return tpx_memory_rank(sh, mo, 0, &m, err);
}

static int same(const tpx_memory *a, const tpx_memory *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

void tpx__report_memory_text(tpx__sbuf *b, const tpx_sharding *sh,
                             const tpx_memory_options *mo) {
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  if (mo)
    memcpy(&o, mo, mo->struct_size < sizeof o ? mo->struct_size : sizeof o);
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  tpx__sbuf_printf(
      b, "\nTraining memory per rank (optimizer %s",
      tpx_optimizer_name(o.optimizer) ? tpx_optimizer_name(o.optimizer) : "?");
  if (o.seq > 0)
    tpx__sbuf_printf(b, "; activations for batch %lld x seq %lld%s",
                     (long long)o.batch, (long long)o.seq,
                     o.activation_checkpointing
                         ? ", activation checkpointing"
                         : ", no activation checkpointing");
  if (o.seq > 0 && tpx_attention_name(o.attention))
    tpx__sbuf_printf(b, ", %s attention, %s", tpx_attention_name(o.attention),
                     tpx_dtype_short_name(tpx_memory_activation_dtype(sh, &o)));
  if (o.seq > 0 && o.loss_in_place)
    tpx__sbuf_printf(b, ", in-place loss");
  if (o.seq <= 0)
    tpx__sbuf_printf(b, "; activations not counted: give --seq T");
  if (o.offload)
    tpx__sbuf_printf(b, "; CPU offload: params, grads and optimizer on the "
                        "host");
  tpx__sbuf_printf(b, "; formulas in docs/MEMORY.md):\n");
  tpx__sbuf_printf(b, "  %-14s %11s %11s %11s %11s %11s %11s", "ranks",
                   "params", "grads", "optimizer", "gather", "activations",
                   "peak");
  tpx__sbuf_printf(b, o.offload ? " %11s %11s\n" : "\n", "device", "host");
  tpx__mem_window *w = malloc(sizeof *w);
  uint8_t *done = calloc(world > 0 ? (size_t)world : 1, 1);
  if (!w || !done) {
    free(w);
    free(done);
    b->failed = 1;
    return;
  }
  w->n = 0;
  char torch_line[1024] = "";
  size_t tl = 0;
  /* Activations are the same on every rank: computed once, and the scans
   * below compare the other terms only (no config reads per window). */
  tpx_memory first;
  int64_t act = 0;
  if (world > 0 && tpx_memory_rank(sh, &o, 0, &first, NULL) == TPX_OK)
    act = first.activations;
  o.seq = 0;
  /* Ranks differ only by their tp and dp_shard coordinates; group equal
   * rows, at most 16 groups. */
  size_t groups = 0;
  int64_t r = 0;
  for (; r < world && groups < 16; r++) {
    if (done[r])
      continue;
    if (!fill(sh, &o, w, r)) {
      tpx__sbuf_printf(b, "  (not available)\n");
      break;
    }
    tpx_memory ref = w->m[r - w->first];
    tpx_memory show = ref;
    show.activations = act;
    /* saturating, as every byte count (signed overflow is UB) */
    show.peak = act > INT64_MAX - ref.peak ? INT64_MAX : ref.peak + act;
    int64_t cnt = 0, lo = r, hi = r, contiguous = 1;
    tpx__mem_window *scan = malloc(sizeof *scan);
    if (!scan) {
      b->failed = 1;
      break;
    }
    scan->n = 0;
    for (int64_t q = r; q < world; q++) {
      if (done[q] || !fill(sh, &o, scan, q) ||
          !same(&scan->m[q - scan->first], &ref))
        continue;
      done[q] = 1;
      if (q != hi + 1 && q != r)
        contiguous = 0;
      hi = q;
      cnt++;
    }
    free(scan);
    char label[48], c[6][32];
    if (cnt == 1)
      snprintf(label, sizeof label, "%lld", (long long)lo);
    else if (contiguous)
      snprintf(label, sizeof label, "%lld-%lld", (long long)lo, (long long)hi);
    else
      snprintf(label, sizeof label, "%lld,.. (%lld)", (long long)lo,
               (long long)cnt);
    tpx__sbuf_printf(b, "  %-14s %11s %11s %11s %11s %11s %11s", label,
                     tpx_format_bytes(show.params, c[0], sizeof c[0]),
                     tpx_format_bytes(show.grads, c[1], sizeof c[1]),
                     tpx_format_bytes(show.optimizer, c[2], sizeof c[2]),
                     tpx_format_bytes(show.gather_peak, c[3], sizeof c[3]),
                     tpx_format_bytes(show.activations, c[4], sizeof c[4]),
                     tpx_format_bytes(show.peak, c[5], sizeof c[5]));
    if (tl < sizeof torch_line)
      tl += (size_t)snprintf(
          torch_line + tl, sizeof torch_line - tl, "%s %s: %s",
          groups ? "," : "", label,
          tpx_format_bytes(show.optimizer_torch, c[0], sizeof c[0]));
    if (o.offload) {
      int64_t dev = act > INT64_MAX - ref.device ? INT64_MAX : ref.device + act;
      tpx__sbuf_printf(b, " %11s %11s",
                       tpx_format_bytes(dev, c[0], sizeof c[0]),
                       tpx_format_bytes(ref.host, c[1], sizeof c[1]));
    }
    tpx__sbuf_printf(b, "\n");
    groups++;
  }
  if (groups && o.optimizer != TPX_OPTIMIZER_NONE)
    tpx__sbuf_printf(b, "  optimizer as torch holds it (unpadded shard%s):%s\n",
                     o.optimizer == TPX_OPTIMIZER_ADAMW ? ", step tensors" : "",
                     torch_line);
  while (r < world && done[r]) r++;
  if (r < world && groups >= 16)
    tpx__sbuf_printf(b, "  ... (more ranks in the JSON report)\n");
  if (groups && act > 0 && first.moe_dispatch > 0) {
    char d[32];
    tpx__sbuf_printf(b,
                     "  activations include one MoE layer's token-dispatch "
                     "buffers over ep: %s (docs/MEMORY.md \"Expert "
                     "parallelism\")\n",
                     tpx_format_bytes(first.moe_dispatch, d, sizeof d));
  }
  free(done);
  free(w);
}

int tpx__report_training_peak(const tpx_sharding *sh,
                              const tpx_memory_options *mo, int64_t *peak,
                              int64_t *rank) {
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  if (!mo)
    return 0;
  memcpy(&o, mo, mo->struct_size < sizeof o ? mo->struct_size : sizeof o);
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(sh));
  tpx_memory first;
  if (o.seq <= 0 || world < 1 ||
      tpx_memory_rank(sh, &o, 0, &first, NULL) != TPX_OK)
    return 0;
  /* Activations are the same on every rank (as in the table): the other
   * terms per rank, the activations added once. */
  int64_t act = first.activations;
  o.seq = 0;
  tpx__mem_window *w = malloc(sizeof *w);
  if (!w)
    return 0;
  w->n = 0;
  int64_t best = -1, at = 0;
  for (int64_t r = 0; r < world; r++) {
    if (!fill(sh, &o, w, r)) {
      free(w);
      return 0;
    }
    int64_t d = w->m[r - w->first].device;
    if (d > best) {
      best = d;
      at = r;
    }
  }
  free(w);
  *peak = act > INT64_MAX - best ? INT64_MAX : best + act;
  *rank = at;
  return 1;
}

void tpx__report_slice_json(json_t *o, const tpx_sharding *sh, int64_t p,
                            int64_t rank) {
  const tpx_model *model = tpx_sharding_model(sh);
  tpx_param_info pi;
  tpx_slice sl;
  if (tpx_model_param(model, p, &pi, NULL) != TPX_OK ||
      tpx_sharding_local_slice(sh, p, rank, &sl, NULL) != TPX_OK)
    return;
  json_t *shape = json_array(), *off = json_array();
  for (int d = 0; d < sl.ndim; d++) {
    json_array_append_new(shape, json_integer(sl.length[d]));
    json_array_append_new(off, json_integer(sl.offset[d]));
  }
  tpx_dtype held =
      tpx_sharding_param_keeps_fp32(sh, p) && tpx_dtype_is_float(pi.dtype)
          ? TPX_DTYPE_F32
          : pi.dtype;
  json_object_set_new(o, "local_shape", shape);
  json_object_set_new(o, "global_offset", off);
  json_object_set_new(o, "local_bytes",
                      json_integer(tpx_slice_nbytes(&sl, held)));
}

json_t *tpx__report_memory_options_json(const tpx_sharding *sh,
                                        const tpx_memory_options *mo) {
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  if (mo)
    memcpy(&o, mo, mo->struct_size < sizeof o ? mo->struct_size : sizeof o);
  const char *name = tpx_optimizer_name(o.optimizer);
  json_t *j = json_object();
  json_object_set_new(j, "optimizer", name ? json_string(name) : json_null());
  json_object_set_new(j, "batch", json_integer(o.batch));
  json_object_set_new(j, "seq", json_integer(o.seq));
  json_object_set_new(j, "activation_checkpointing",
                      json_boolean(o.activation_checkpointing));
  const char *attn = tpx_attention_name(o.attention);
  json_object_set_new(j, "attention", attn ? json_string(attn) : json_null());
  const char *dt = tpx_dtype_short_name(tpx_memory_activation_dtype(sh, &o));
  json_object_set_new(j, "activation_dtype",
                      dt ? json_string(dt) : json_null());
  if (o.offload)
    json_object_set_new(j, "offload", json_true());
  if (o.loss_in_place)
    json_object_set_new(j, "loss_in_place", json_true());
  return j;
}
