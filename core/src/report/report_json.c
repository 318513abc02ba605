/* report_json.c — tpx-report/1 JSON (docs/REPORT_FORMAT.md) from a sharding
 * and what selection knew. Fields beyond the spec's (per-rank peak bytes,
 * fsdp units, module transitions, head counts, diagnostic subject/fix) are
 * additions; the spec's fields keep their meaning. */
#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model/expert_fold.h"
#include "report/report_buffers.h"
#include "report/report_memory.h"
#include "report/report_util.h"
#include "report/rank_groups.h"
#include "tpx/fsdp.h"
#include "tpx/validate.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s) {
  unsigned c = s[0];
  size_t n;
  unsigned min;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, min = 0x10000;
  else
    return 0;
  unsigned cp = c & (0x7Fu >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

/* A JSON string for any C string: jansson rejects invalid UTF-8 (a file
 * name or FQN in a legacy encoding) by returning NULL, which would silently
 * drop the field; such bytes become U+FFFD instead. NULL stays JSON null. */
static json_t *jstr(const char *s) {
  if (!s)
    return json_null();
  json_t *j = json_string(s);
  if (j)
    return j;
  size_t n = strlen(s);
  char *buf = malloc(3 * n + 1);
  if (!buf)
    return NULL;
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t k = utf8_seq(p);
    if (k) {
      memcpy(buf + o, p, k);
      o += k;
      p += k;
    } else {
      memcpy(buf + o, "\xEF\xBF\xBD", 3);
      o += 3;
      p++;
    }
  }
  buf[o] = '\0';
  j = json_string(buf);
  free(buf);
  return j;
}

static json_t *jstr_or_null(const char *s) { return jstr(s); }

static json_t *placement_json(tpx_placement p) {
  char buf[64];
  tpx_placement_format(p, buf, sizeof buf);
  return jstr(buf);
}

static json_t *model_json(const tpx_model *model) {
  json_t *o = json_object();
  const char *arch = tpx_model_num_architectures(model)
                         ? tpx_model_architecture(model, 0)
                         : NULL;
  tpx_dtype d = tpx__report_model_dtype(model);
  json_object_set_new(o, "architecture", jstr_or_null(arch));
  json_object_set_new(o, "source", jstr_or_null(tpx_model_source(model)));
  json_object_set_new(o, "dtype",
                      d ? jstr(tpx_dtype_short_name(d)) : json_null());
  json_object_set_new(o, "total_params",
                      json_integer(tpx_model_total_params(model)));
  json_object_set_new(o, "total_bytes",
                      json_integer(tpx_model_total_bytes(model)));
  /* Added field: how per-expert checkpoint tensors map onto fused 3-D
   * experts, when the model has any. */
  const char *fold = tpx__expert_fold_note(model);
  if (fold)
    json_object_set_new(o, "fused_experts", jstr(fold));
  /* Added field: parameters stored as several tensors, transposed, when
   * the model has any (tpx_model_add_param_source). */
  const char *tsrc = tpx__fold_sources_note(model);
  if (tsrc)
    json_object_set_new(o, "stored_transposed", jstr(tsrc));
  /* Added field: checkpoint tensors cut into several parameters
   * (tpx_model_add_split_source), when the model has any. */
  char split_buf[1200];
  const char *split = tpx__fold_split_note(model, split_buf, sizeof split_buf);
  if (split)
    json_object_set_new(o, "stored_split", jstr(split));
  /* Added field: other namings of the tensors (tpx_model_name_alias), as
   * {"alias", "canonical"} rules, when the model has any. */
  if (tpx_model_num_name_aliases(model)) {
    json_t *a = json_array();
    for (size_t i = 0; i < tpx_model_num_name_aliases(model); i++) {
      const char *from = NULL, *to = NULL;
      tpx_model_name_alias(model, i, &from, &to, NULL);
      json_t *r = json_object();
      json_object_set_new(r, "alias", jstr(from));
      json_object_set_new(r, "canonical", jstr(to));
      json_array_append_new(a, r);
    }
    json_object_set_new(o, "name_aliases", a);
  }
  /* Added field: the checkpoint conversion applied (docs/CONVERSION.md). */
  const char *conv = tpx_model_conversion_note(model);
  if (conv)
    json_object_set_new(o, "conversion", jstr(conv));
  return o;
}

/* 1 when some parameter has a Joined placement (FSDP over a flattened
 * view, cp > 1): a reader of tpx-report/1 that computes slices from the
 * placements would not know it, so such reports say tpx-report/1.1
 * (docs/REPORT_FORMAT.md). */
static int uses_joined(const tpx_sharding *sh) {
  if (tpx_sharding_moe_mesh(sh))
    return 1; /* the format says 1.2, which includes 1.1 */
  const tpx_model *model = tpx_sharding_model(sh);
  int nd = tpx_mesh_ndim(tpx_sharding_mesh(sh));
  for (size_t p = 0; p < tpx_model_num_params(model); p++) {
    tpx_param_sharding ps;
    if (tpx_sharding_param(sh, (int64_t)p, &ps, NULL) != TPX_OK)
      continue;
    for (int d = 0; d < nd; d++)
      if (ps.placements[d].kind == TPX_JOINED)
        return 1;
  }
  return 0;
}

static json_t *mesh_json(const tpx_mesh *mesh) {
  json_t *o = json_object(), *dims = json_array(), *sizes = json_array();
  for (int i = 0; i < tpx_mesh_ndim(mesh); i++) {
    json_array_append_new(dims, jstr(tpx_mesh_dim_name(mesh, i)));
    json_array_append_new(sizes, json_integer(tpx_mesh_dim_size(mesh, i)));
  }
  json_object_set_new(o, "dims", dims);
  json_object_set_new(o, "sizes", sizes);
  return o;
}

static json_t *selection_json(const tpx_report_options *o) {
  json_t *s = json_object(), *trace = json_array();
  const char *src = o->plan_source ? o->plan_source : "custom";
  json_object_set_new(s, "source", jstr(src));
  if (o->plugin_name)
    json_object_set_new(s, "plugin", jstr(o->plugin_name));
  if (o->plugin_path)
    json_object_set_new(s, "path", jstr(o->plugin_path));
  if (o->function)
    json_object_set_new(s, "function", jstr(o->function));
  json_object_set_new(s, "sequence_parallel",
                      json_boolean(o->sequence_parallel != 0));
  for (size_t i = 0; i < o->num_trace; i++)
    if (o->trace && o->trace[i])
      json_array_append_new(trace, jstr(o->trace[i]));
  json_object_set_new(s, "trace", trace);
  json_object_set_new(s, "upstream", jstr(TPX_UPSTREAM_VERSION));
  if (o->num_strategy) {
    json_t *st = json_object();
    for (size_t i = 0; o->strategy && i < o->num_strategy; i++) {
      const char *kv = o->strategy[i], *eq = kv ? strchr(kv, '=') : NULL;
      if (!eq)
        continue;
      char key[64];
      size_t n = (size_t)(eq - kv) < sizeof key - 1 ? (size_t)(eq - kv)
                                                    : sizeof key - 1;
      memcpy(key, kv, n);
      key[n] = '\0';
      json_object_set_new(st, key, jstr(eq + 1));
    }
    json_object_set_new(s, "strategy", st);
  }
  return s;
}

static json_t *diag_json(const tpx_diag *d) {
  json_t *o = json_object();
  json_object_set_new(o, "level", jstr(tpx_diag_level_name(d->level)));
  json_object_set_new(o, "code", jstr(d->code ? d->code : ""));
  json_object_set_new(o, "message", jstr(d->message ? d->message : ""));
  if (d->subject && *d->subject)
    json_object_set_new(o, "subject", jstr(d->subject));
  if (d->fix && *d->fix)
    json_object_set_new(o, "fix", jstr(d->fix));
  return o;
}

static void add_diags(json_t *arr, const tpx_diag_list *list) {
  if (!list)
    return;
  size_t n = tpx_diag_count(list);
  for (size_t i = 0; i < n; i++) {
    tpx_diag d;
    if (tpx_diag_get(list, i, &d, NULL) == TPX_OK)
      json_array_append_new(arr, diag_json(&d));
  }
}

static json_t *params_json(const tpx_sharding *sh, int64_t slices_rank) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_mesh *moe = tpx_sharding_moe_mesh(sh);
  json_t *arr = json_array();
  size_t n = tpx_model_num_params(model);
  int fsdp = tpx_sharding_num_fsdp_units(sh) > 0;
  for (size_t p = 0; p < n; p++) {
    tpx_param_info pi;
    tpx_param_sharding ps;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK ||
        tpx_sharding_param(sh, (int64_t)p, &ps, NULL) != TPX_OK)
      continue;
    json_t *o = json_object(), *shape = json_array(), *pl = json_object();
    json_object_set_new(o, "name", jstr(pi.fqn));
    for (int d = 0; d < pi.ndim; d++)
      json_array_append_new(shape, json_integer(pi.shape[d]));
    json_object_set_new(o, "shape", shape);
    json_object_set_new(o, "dtype", jstr(tpx_dtype_short_name(pi.dtype)));
    json_object_set_new(o, "module",
                        jstr(tpx_model_module_fqn(model, pi.module)));
    json_object_set_new(o, "plan_key", jstr_or_null(ps.plan_key));
    /* its placements are over the dims of the mesh it lives on */
    const tpx_mesh *mesh = tpx_sharding_param_mesh(sh, (int64_t)p);
    int nd = tpx_mesh_ndim(mesh);
    if (moe)
      json_object_set_new(o, "mesh", jstr(mesh == moe ? "moe" : "main"));
    for (int d = 0; d < nd; d++)
      json_object_set_new(pl, tpx_mesh_dim_name(mesh, d),
                          placement_json(ps.placements[d]));
    json_object_set_new(o, "placements", pl);
    tpx_fsdp_unit u;
    json_object_set_new(o, "fsdp_unit",
                        fsdp && ps.fsdp_unit >= 0 &&
                                tpx_sharding_fsdp_unit(sh, (size_t)ps.fsdp_unit,
                                                       &u, NULL) == TPX_OK
                            ? jstr(u.fqn)
                            : json_null());
    if (pi.tied_to >= 0) {
      tpx_param_info ti;
      if (tpx_model_param(model, pi.tied_to, &ti, NULL) == TPX_OK)
        json_object_set_new(o, "tied_to", jstr(ti.fqn));
    }
    /* The dtype FSDP all-gathers and computes it in (after the mixed
     * precision clearing rules); null without FSDP. */
    json_object_set_new(o, "fsdp_param_dtype",
                        fsdp && ps.param_dtype
                            ? jstr(tpx_dtype_short_name(ps.param_dtype))
                            : json_null());
    if (tpx_sharding_param_keeps_fp32(sh, (int64_t)p))
      json_object_set_new(o, "keep_fp32", json_true());
    if (slices_rank >= 0)
      tpx__report_slice_json(o, sh, (int64_t)p, slices_rank);
    json_array_append_new(arr, o);
  }
  return arr;
}

/* per_rank is written as text, not as a jansson tree: at a million ranks
 * the tree took ~1 KB per rank (1.9 GB for --dp-shard 1048576), the text
 * ~100 bytes. The root carries a placeholder string that is replaced by this
 * array after json_dumps. `indent` 0 = compact. */
#define PER_RANK_PLACEHOLDER "\001tpx per_rank\001"

static int per_rank_text(const tpx_sharding *sh, const tpx_memory_options *mo,
                         int indent, tpx__sbuf *b) {
  tpx__mem_window *mw = malloc(sizeof *mw);
  if (!mw)
    return 0;
  mw->n = 0;
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  int nd = tpx_mesh_ndim(mesh);
  int64_t world = tpx_mesh_world_size(mesh);
  int64_t coords[TPX_MESH_MAX_DIMS];
  char *names[TPX_MESH_MAX_DIMS] = {NULL};
  int ok = 1;
  for (int d = 0; d < nd && ok; d++) { /* JSON-escaped dim names */
    json_t *j = jstr(tpx_mesh_dim_name(mesh, d));
    names[d] = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!names[d])
      ok = 0;
  }
  if (ok && world > TPX__PER_RANK_MAX) { /* grouped: see rank_groups.h */
    ok = tpx__rank_groups_json(sh, mo, names, indent, b) == 0;
    for (int d = 0; d < nd; d++) free(names[d]);
    free(mw);
    return ok && !b->failed;
  }
  const char *sep = indent > 0 ? ": " : ":";
  const char *comma = indent > 0 ? ", " : ",";
  tpx__sbuf_printf(b, "[");
  for (int64_t r = 0; r < world && ok && !b->failed; r++) {
    if (tpx_mesh_coords(mesh, r, coords, NULL) != TPX_OK)
      continue;
    if (r)
      tpx__sbuf_printf(b, ",");
    if (indent > 0)
      tpx__sbuf_printf(b, "\n%*s", 2 * indent, "");
    tpx__sbuf_printf(b, "{\"rank\"%s%lld%s\"coords\"%s{", sep, (long long)r,
                     comma, sep);
    for (int d = 0; d < nd; d++)
      tpx__sbuf_printf(b, "%s%s%s%lld", d ? comma : "", names[d], sep,
                       (long long)coords[d]);
    tpx__report_moe_coords(sh, r, sep, comma, b);
    tpx__sbuf_printf(b, "}%s\"param_bytes\"%s%lld%s\"peak_bytes\"%s%lld", comma,
                     sep, (long long)tpx_sharding_rank_param_bytes(sh, r),
                     comma, sep,
                     (long long)tpx_sharding_rank_peak_bytes(sh, r));
    if (!tpx__report_memory_json(sh, mo, mw, r, sep, comma, b))
      ok = 0;
    tpx__sbuf_printf(b, "}");
  }
  free(mw);
  if (indent > 0 && world > 0)
    tpx__sbuf_printf(b, "\n%*s", indent, "");
  tpx__sbuf_printf(b, "]");
  for (int d = 0; d < nd; d++) free(names[d]);
  return ok && !b->failed;
}

/* text with the quoted placeholder replaced by `array`; NULL when out of
 * memory or the placeholder is missing. */
static char *splice_per_rank(const char *text, const tpx__sbuf *array) {
  const char *key = "\"per_rank\"";
  const char *ph = "\"\\u0001tpx per_rank\\u0001\"";
  const char *k = strstr(text, key);
  const char *at = k ? strstr(k, ph) : NULL;
  if (!at)
    return NULL;
  size_t pre = (size_t)(at - text), phl = strlen(ph);
  size_t post = strlen(at + phl);
  char *out = malloc(pre + array->len + post + 1);
  if (!out)
    return NULL;
  memcpy(out, text, pre);
  memcpy(out + pre, array->data, array->len);
  memcpy(out + pre + array->len, at + phl, post + 1);
  return out;
}

static json_t *dtype_or_null(tpx_dtype d) {
  return d ? jstr(tpx_dtype_short_name(d)) : json_null();
}

static json_t *fsdp_json(const tpx_sharding *sh) {
  size_t n = tpx_sharding_num_fsdp_units(sh);
  json_t *o = json_object(), *units = json_array();
  tpx_mp_policy mp = tpx_sharding_mp_policy(sh);
  json_t *m = json_object();
  json_object_set_new(o, "enabled", json_boolean(n > 0));
  /* The dim or flattened view FSDP shards over, where it is not plain
   * dp_shard (cp > 1: "dp_shard_cp"); absent otherwise, as before cp. */
  int64_t over = 1;
  const char *view = n ? tpx_sharding_fsdp_mesh_name(sh, &over) : NULL;
  if (view && strcmp(view, "dp_shard") != 0) {
    json_object_set_new(o, "mesh", jstr(view));
    json_object_set_new(o, "mesh_size", json_integer(over));
  }
  json_object_set_new(m, "param_dtype", dtype_or_null(mp.param_dtype));
  json_object_set_new(m, "reduce_dtype", dtype_or_null(mp.reduce_dtype));
  json_object_set_new(m, "output_dtype", dtype_or_null(mp.output_dtype));
  /* Patterns of parameters kept in fp32 (held and gathered in f32), with
   * the number of parameters each matched. */
  json_t *f32 = json_array();
  for (size_t i = 0; i < tpx_sharding_num_fp32_patterns(sh); i++) {
    size_t matched = 0;
    const char *pat = tpx_sharding_fp32_pattern(sh, i, &matched);
    json_t *x = json_object();
    json_object_set_new(x, "pattern", jstr(pat));
    json_object_set_new(x, "params", json_integer((json_int_t)matched));
    json_array_append_new(f32, x);
  }
  json_object_set_new(m, "fp32_params", f32);
  json_object_set_new(o, "mixed_precision", m);
  for (size_t i = 0; i < n; i++) {
    tpx_fsdp_unit u;
    if (tpx_sharding_fsdp_unit(sh, i, &u, NULL) != TPX_OK)
      continue;
    json_t *x = json_object(), *f = json_array(), *b = json_array();
    json_object_set_new(x, "module", jstr(u.fqn));
    json_object_set_new(x, "root", json_boolean(u.is_root));
    json_object_set_new(x, "reshard_after_forward",
                        json_boolean(u.reshard_after_forward));
    json_object_set_new(x, "params", json_integer((json_int_t)u.num_params));
    /* Added field, only for a routed-experts unit (ep > 1): it shards over
     * ep_shard on the MoE mesh. */
    if (strcmp(tpx_sharding_fsdp_unit_dim(sh, i), "ep_shard") == 0)
      json_object_set_new(x, "mesh_dim", jstr("ep_shard"));
    for (size_t j = 0; j < u.num_fwd_prefetch; j++) {
      tpx_fsdp_unit t;
      if (tpx_sharding_fsdp_unit(sh, (size_t)u.fwd_prefetch[j], &t, NULL) ==
          TPX_OK)
        json_array_append_new(f, jstr(t.fqn));
    }
    for (size_t j = 0; j < u.num_bwd_prefetch; j++) {
      tpx_fsdp_unit t;
      if (tpx_sharding_fsdp_unit(sh, (size_t)u.bwd_prefetch[j], &t, NULL) ==
          TPX_OK)
        json_array_append_new(b, jstr(t.fqn));
    }
    json_object_set_new(x, "forward_prefetch", f);
    json_object_set_new(x, "backward_prefetch", b);
    json_array_append_new(units, x);
  }
  json_object_set_new(o, "units", units);
  /* layer groups (docs/SEMANTICS.md "FSDP2"), for reference next to the
   * units */
  const tpx_model *model = tpx_sharding_model(sh);
  size_t nl = 0;
  json_t *groups = json_object();
  if (tpx_model_layer_groups(model, NULL, NULL, 0, &nl, NULL) == TPX_OK &&
      nl > 0) {
    int64_t *mods = malloc(nl * sizeof *mods);
    tpx_layer_group *gs = malloc(nl * sizeof *gs);
    if (mods && gs &&
        tpx_model_layer_groups(model, mods, gs, nl, &nl, NULL) == TPX_OK) {
      for (size_t i = 0; i < nl; i++) {
        const char *g = tpx_layer_group_name(gs[i]);
        json_t *arr = json_object_get(groups, g);
        if (!arr) {
          arr = json_array();
          json_object_set_new(groups, g, arr);
        }
        json_array_append_new(arr, jstr(tpx_model_module_fqn(model, mods[i])));
      }
    }
    free(mods);
    free(gs);
  }
  json_object_set_new(o, "layer_groups", groups);
  return o;
}

static json_t *modules_json(const tpx_sharding *sh) {
  const tpx_model *model = tpx_sharding_model(sh);
  const tpx_plan *plan = tpx_sharding_plan(sh);
  json_t *arr = json_array();
  size_t nm = tpx_model_num_modules(model);
  for (size_t m = 0; m < nm; m++) {
    int64_t e = tpx_sharding_module_entry(sh, (int64_t)m);
    if (e < 0)
      continue;
    tpx_plan_entry pe;
    if (tpx_plan_get(plan, (size_t)e, &pe, NULL) != TPX_OK)
      continue;
    const tpx_transition *tr = NULL;
    size_t nt = 0;
    tpx_sharding_module_transitions(sh, (int64_t)m, &tr, &nt, NULL);
    json_t *o = json_object(), *ts = json_array();
    json_object_set_new(o, "module",
                        jstr(tpx_model_module_fqn(model, (int64_t)m)));
    json_object_set_new(o, "plan_key", jstr(pe.module));
    json_object_set_new(
        o, "kind",
        jstr(tpx_module_kind_name(tpx_model_module_kind(model, (int64_t)m))));
    json_object_set_new(o, "style", jstr(tpx_style_kind_name(pe.style.kind)));
    for (size_t i = 0; i < nt; i++) {
      json_t *t = json_object();
      json_object_set_new(
          t, "side",
          jstr(tr[i].side == TPX_TRANSITION_INPUT ? "input" : "output"));
      json_object_set_new(t, "index", json_integer(tr[i].index));
      json_object_set_new(t, "from",
                          tr[i].from_is_none ? json_null()
                                             : placement_json(tr[i].from));
      json_object_set_new(
          t, "to", tr[i].from_is_none ? json_null() : placement_json(tr[i].to));
      json_object_set_new(t, "forward", jstr(tr[i].forward));
      json_object_set_new(t, "backward", jstr(tr[i].backward));
      json_array_append_new(ts, t);
    }
    json_object_set_new(o, "transitions", ts);
    json_array_append_new(arr, o);
  }
  return arr;
}

/* A count, or null when unknown (negative). */
static json_t *count_json(int64_t v) {
  return v >= 0 ? json_integer(v) : json_null();
}

static json_t *heads_json(const tpx_sharding *sh) {
  tpx_head_counts hc = TPX_HEAD_COUNTS_INIT;
  if (tpx_head_counts_after_tp(tpx_sharding_model(sh), tpx_sharding_plan(sh),
                               tpx_sharding_tp_size(sh), &hc, NULL) != TPX_OK)
    return json_null();
  json_t *o = json_object();
  json_object_set_new(o, "num_attention_heads", count_json(hc.heads));
  json_object_set_new(o, "num_key_value_heads", count_json(hc.kv_heads));
  json_object_set_new(o, "head_dim", count_json(hc.head_dim));
  json_object_set_new(o, "head_sharded", json_boolean(hc.rewritten));
  /* null where tp cannot split them (heads-not-divisible) */
  int split = tpx__report_heads_split(&hc, tpx_sharding_tp_size(sh));
  json_object_set_new(o, "local_attention_heads",
                      count_json(split ? hc.local_heads : -1));
  json_object_set_new(o, "local_key_value_heads",
                      count_json(split ? hc.local_kv_heads : -1));
  return o;
}

tpx_status tpx_report_json(const tpx_sharding *sh,
                           const tpx_report_options *opts, char **out,
                           tpx_error *err) {
  tpx_report_options def;
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_report_json: NULL sharding or out");
  *out = NULL;
  tpx_status ost = tpx__report_opts(opts, &def, "tpx_report_json", err);
  if (ost != TPX_OK)
    return ost;
  opts = &def;
  if (opts->slices_rank >= tpx_mesh_world_size(tpx_sharding_mesh(sh)))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_report_json: rank %lld is outside the mesh of "
                         "%lld ranks",
                         (long long)opts->slices_rank,
                         (long long)tpx_mesh_world_size(tpx_sharding_mesh(sh)));
  tpx_status mst = tpx__report_memory_check(sh, opts->memory, err);
  if (mst != TPX_OK)
    return mst;
  char *plan_text = NULL;
  tpx_status st = tpx_plan_to_json(tpx_sharding_plan(sh), 0, &plan_text, err);
  if (st != TPX_OK)
    return st;
  json_error_t jerr;
  json_t *plan = json_loads(plan_text, 0, &jerr);
  free(plan_text);
  if (!plan)
    return tpx_error_set(err, TPX_INTERNAL,
                         "tpx_report_json: the plan's JSON does not parse: %s",
                         jerr.text);
  json_t *root = json_object();
  json_t *diags = json_array();
  /* 1.2: parameters on the MoE mesh, their placements over ep_shard and
   * ep (docs/REPORT_FORMAT.md); 1.1: a Joined placement. */
  json_object_set_new(root, "format",
                      jstr(tpx_sharding_moe_mesh(sh) ? "tpx-report/1.2"
                           : uses_joined(sh)         ? "tpx-report/1.1"
                                                     : "tpx-report/1"));
  json_object_set_new(root, "model", model_json(tpx_sharding_model(sh)));
  json_object_set_new(root, "mesh", mesh_json(tpx_sharding_mesh(sh)));
  /* Added field, only at ep > 1: upstream's MoE mesh (ep_shard, ep) over
   * the same ranks. */
  if (tpx_sharding_moe_mesh(sh))
    json_object_set_new(root, "moe_mesh", mesh_json(tpx_sharding_moe_mesh(sh)));
  json_object_set_new(root, "selection", selection_json(opts));
  json_object_set_new(root, "plan", plan);
  json_object_set_new(root, "parameters", params_json(sh, opts->slices_rank));
  /* Added section, only when the model has buffers: replicated, unsharded. */
  if (tpx_model_num_buffers(tpx_sharding_model(sh)))
    json_object_set_new(root, "buffers",
                        tpx__report_buffers_json(tpx_sharding_model(sh)));
  if (opts->slices_rank >= 0)
    json_object_set_new(root, "slices_rank", json_integer(opts->slices_rank));
  json_object_set_new(root, "per_rank", json_string(PER_RANK_PLACEHOLDER));
  json_object_set_new(root, "memory_options",
                      tpx__report_memory_options_json(sh, opts->memory));
  add_diags(diags, opts->selection_diags);
  add_diags(diags, tpx_sharding_diagnostics(sh));
  json_object_set_new(root, "diagnostics", diags);
  json_object_set_new(root, "ok", json_boolean(tpx_report_ok(sh, opts)));
  json_object_set_new(root, "fsdp", fsdp_json(sh));
  json_object_set_new(root, "modules", modules_json(sh));
  json_object_set_new(root, "heads", heads_json(sh));
  size_t flags = JSON_PRESERVE_ORDER;
  int indent = opts->indent > 31 ? 31 : opts->indent;
  if (indent > 0)
    flags |= JSON_INDENT(indent);
  else
    flags |= JSON_COMPACT;
  char *body = json_dumps(root, flags);
  json_decref(root);
  tpx__sbuf arr = {NULL, 0, 0, 0};
  char *text = NULL;
  if (body && per_rank_text(sh, opts->memory, indent, &arr))
    text = splice_per_rank(body, &arr);
  free(body);
  tpx__sbuf_free(&arr);
  if (!text)
    return tpx_error_set(err, TPX_NO_MEMORY, "tpx_report_json: out of memory");
  *out = text;
  return TPX_OK;
}
