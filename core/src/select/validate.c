/* select/validate.c — config-level TP validation (docs/SEMANTICS.md "Plan
 * selection": validate_tp_mesh and its Nemotron-NAS variant), the
 * head-sharding rule and the local head counts after TP.
 *
 * Reads only the model's config and architecture names, never its modules.
 * Not plan selection and not application. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tpx/validate.h"

#include <jansson.h>

#include "model/config.h"
#include "model/family_view.h"
#include "select/select_internal.h"

static const char *primary_arch(const tpx_model *model) {
  if (tpx_model_num_architectures(model) == 0)
    return NULL;
  return tpx_model_architecture(model, 0);
}

/* Where the class keeps its head counts: text_config for a VLM whose
 * plugin declares text_config_heads (a flat config falls back to the top
 * level). */
static int in_text_config(const tpx__family *f) {
  return f && f->text_config_heads;
}

/* Integer config value, or `missing` when absent/null/not an integer. */
static int64_t cfg_int(const tpx_model *model, const char *path,
                       int64_t missing) {
  int64_t v = 0;
  if (tpx_model_config_int(model, path, &v, NULL) != TPX_OK)
    return missing;
  return v;
}

/* Head-related config value into *v: text_config first for VLMs, else top
 * level; 0 when neither holds an integer. */
static int head_lookup(const tpx_model *model, const tpx__family *f,
                       const char *key, int64_t *v) {
  char path[96];
  if (in_text_config(f)) {
    snprintf(path, sizeof path, "text_config.%s", key);
    if (tpx_model_config_int(model, path, v, NULL) == TPX_OK)
      return 1;
  }
  return tpx_model_config_int(model, key, v, NULL) == TPX_OK;
}

static int64_t head_cfg(const tpx_model *model, const tpx__family *f,
                        const char *key, int64_t missing) {
  int64_t v = 0;
  return head_lookup(model, f, key, &v) ? v : missing;
}

/* Upstream reads head counts from the instantiated config object, not from
 * config.json: an absent count takes the config class's default, and the
 * classes' __init__ turn num_key_value_heads=None into num_attention_heads.
 * Only defaults checked against transformers are listed; an absent
 * num_attention_heads of another class counts as 0 (passes). */
typedef struct head_defaults {
  const char *model_type;
  int64_t heads;   /* num_attention_heads default, 0 = not listed */
  int64_t kv;      /* num_key_value_heads default, 0 = not listed */
  int kv_is_heads; /* default None: becomes num_attention_heads */
} head_defaults;

static const head_defaults k_head_defaults[] = {
    {"gemma3_text", 8, 4, 0}, /* Gemma3TextConfig (text_config of VLMs) */
    {"llama", 32, 0, 1},
    {"phi", 32, 0, 1},
    {"phi3", 32, 0, 1},
};

static const head_defaults *class_defaults(const tpx_model *model,
                                           const tpx__family *f) {
  const char *mt = NULL;
  char path[64];
  snprintf(path, sizeof path, "%smodel_type",
           in_text_config(f) ? "text_config." : "");
  if (tpx_model_config_string(model, path, &mt, NULL) != TPX_OK &&
      tpx_model_config_string(model, "model_type", &mt, NULL) != TPX_OK)
    return NULL;
  for (size_t i = 0; i < sizeof k_head_defaults / sizeof k_head_defaults[0];
       i++)
    if (strcmp(mt, k_head_defaults[i].model_type) == 0)
      return &k_head_defaults[i];
  return NULL;
}

/* 1 if the head key is present in the section read, with JSON null. */
static int head_is_null(const tpx_model *model, const tpx__family *f,
                        const char *key) {
  char path[96];
  snprintf(path, sizeof path, "%s%s", in_text_config(f) ? "text_config." : "",
           key);
  json_t *root = tpx__model_config(model);
  json_t *v = root ? tpx__config_lookup(root, path) : NULL;
  return v != NULL && json_is_null(v);
}

/* The head counts upstream's config object holds (see head_defaults).
 * validate_tp_mesh takes num_key_value_heads as num_attention_heads where
 * the config has none (GPT-NeoX, GPT-J, CodeGen, Diffusers configs: no such
 * attribute) or where it is 0 or None; an absent count of a class listed
 * above takes that class's default. */
static void effective_heads(const tpx_model *model, const tpx__family *f,
                            int64_t *heads, int64_t *kv) {
  const head_defaults *d = class_defaults(model, f);
  *heads = head_cfg(model, f, "num_attention_heads", d ? d->heads : 0);
  int have_kv = head_lookup(model, f, "num_key_value_heads", kv);
  if (!have_kv)
    *kv = d && !d->kv_is_heads && !head_is_null(model, f, "num_key_value_heads")
              ? d->kv
              : 0;
  if (*kv == 0)
    *kv = *heads;
}

/* gcd of |a| and |b|, in unsigned arithmetic: -INT64_MIN is not an int64_t
 * (a config may hold any integer). */
static uint64_t gcd64(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0 - (uint64_t)a : (uint64_t)a;
  uint64_t y = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
  while (y) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x;
}

/* Divisors are listed up to this size: no mesh has more ranks on one dim
 * (tpx_sharding_create caps the world at 2^24), and walking every candidate
 * up to a huge head count (a config may say 999999999989) would hang. */
#define DIVISOR_LIMIT ((uint64_t)1 << 24)

/* "1, 2, 4, 8": the divisors of g up to DIVISOR_LIMIT, into buf; "any"
 * for 0 (every size divides 0). */
static void divisors_text(uint64_t g, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  if (g == 0) {
    snprintf(buf, size, "any");
    return;
  }
  uint64_t top = g < DIVISOR_LIMIT ? g : DIVISOR_LIMIT;
  for (uint64_t d = 1; d <= top && n < size; d++) {
    if (g % d)
      continue;
    int w = snprintf(buf + n, size - n, "%s%llu", n ? ", " : "",
                     (unsigned long long)d);
    if (w < 0)
      break;
    n += (size_t)w;
  }
  if (g > DIVISOR_LIMIT && n < size)
    snprintf(buf + n, size - n, " (none larger than %llu listed)",
             (unsigned long long)DIVISOR_LIMIT);
}

/* A config whose layers are described one by one in block_configs (the
 * class's plugin declares block_configs=<class>:<model_type>, e.g.
 * Nemotron-NAS). */
static int has_block_configs(const tpx_model *model, const tpx__family *f) {
  const char *mt = NULL;
  if (!f || !f->block_configs)
    return 0;
  if (tpx_model_config_string(model, "model_type", &mt, NULL) != TPX_OK)
    return 0;
  return mt && strcmp(mt, f->block_configs) == 0;
}

static tpx_status nas_validate(const tpx_model *model, int64_t tp,
                               tpx_diag_list *diags, tpx_error *err) {
  int64_t heads = cfg_int(model, "num_attention_heads", 0);
  int64_t layers = cfg_int(model, "num_hidden_layers", 0);
  char valid[256], path[128];
  tpx_status st;
  if (heads % tp != 0) {
    divisors_text(gcd64(heads, 0), valid, sizeof valid);
    st = tpx_diag_add(
        diags, TPX_DIAG_ERROR, "heads-not-divisible", "num_attention_heads",
        "choose a tp size that divides the head count",
        "num_attention_heads in config does not match the TP size "
        "(Nemotron-NAS: num_attention_heads=%lld, tp=%lld); tp sizes that "
        "would work: %s",
        (long long)heads, (long long)tp, valid);
    return st == TPX_OK ? TPX_OK : tpx_error_set(err, st, "out of memory");
  }
  /* Count block_configs by probing items (the model API reads by path). */
  int64_t nblocks = 0;
  for (;;) {
    snprintf(path, sizeof path, "block_configs[%lld]", (long long)nblocks);
    int ok = 0;
    int64_t iv;
    /* An item exists when a typed read of it does not say NOT_FOUND (an
     * object item is a type mismatch). */
    tpx_error e;
    tpx_error_clear(&e);
    if (tpx_model_config_int(model, path, &iv, &e) == TPX_OK ||
        e.status == TPX_INVALID_ARGUMENT)
      ok = 1;
    if (!ok)
      break;
    nblocks++;
    if (nblocks > (int64_t)1 << 24)
      break;
  }
  if (nblocks < layers) {
    st = tpx_diag_add(diags, TPX_DIAG_ERROR, "nemotron-nas-invalid",
                      "block_configs", "fix the config's block_configs list",
                      "num_hidden_layers in config does not match the number "
                      "of block configs (num_hidden_layers=%lld, %lld block "
                      "configs)",
                      (long long)layers, (long long)nblocks);
    return st == TPX_OK ? TPX_OK : tpx_error_set(err, st, "out of memory");
  }
  for (int64_t i = 0; i < layers; i++) {
    int rwl = 0, noop = 0;
    int64_t group = 0;
    snprintf(path, sizeof path,
             "block_configs[%lld].attention.replace_with_linear", (long long)i);
    if (tpx_model_config_bool(model, path, &rwl, NULL) == TPX_OK && rwl) {
      st = tpx_diag_add(diags, TPX_DIAG_INFO, "nemotron-nas-linear-attention",
                        "block_configs", NULL,
                        "layer %lld: attention is replaced with a linear "
                        "layer; head divisibility is not checked",
                        (long long)i);
      if (st != TPX_OK)
        return tpx_error_set(err, st, "out of memory");
      continue;
    }
    snprintf(path, sizeof path,
             "block_configs[%lld].attention.n_heads_in_group", (long long)i);
    if (tpx_model_config_int(model, path, &group, NULL) == TPX_OK) {
      /* INT64_MIN / -1 overflows: no real config has it; treat as 0 */
      int64_t kv =
          group == 0 || (group == -1 && heads == INT64_MIN) ? 0 : heads / group;
      if (kv % tp != 0) {
        divisors_text(gcd64(kv, heads), valid, sizeof valid);
        st = tpx_diag_add(
            diags, TPX_DIAG_ERROR, "heads-not-divisible", "block_configs",
            "choose a tp size that divides every layer's KV-head count",
            "layer %lld: num_key_value_heads in config does not match the TP "
            "size (%lld = %lld heads / n_heads_in_group %lld, tp=%lld); tp "
            "sizes that would work for this layer: %s",
            (long long)i, (long long)kv, (long long)heads, (long long)group,
            (long long)tp, valid);
        if (st != TPX_OK)
          return tpx_error_set(err, st, "out of memory");
        return TPX_OK; /* torch's assert stops at the first failing layer */
      }
      continue;
    }
    snprintf(path, sizeof path, "block_configs[%lld].attention.no_op",
             (long long)i);
    if (tpx_model_config_bool(model, path, &noop, NULL) != TPX_OK || !noop) {
      st = tpx_diag_add(
          diags, TPX_DIAG_ERROR, "nemotron-nas-invalid", "block_configs",
          "set attention.n_heads_in_group, or no_op: true",
          "layer %lld: attention must define grouped heads, a linear "
          "replacement, or no_op (it has neither replace_with_linear, "
          "n_heads_in_group nor no_op == true)",
          (long long)i);
      if (st != TPX_OK)
        return tpx_error_set(err, st, "out of memory");
      return TPX_OK;
    }
  }
  return TPX_OK;
}

/* A head count the config gives as 0 or less (kv: less than 0; 0 reads as
 * num_attention_heads): upstream's "Invalid attention head counts" error,
 * whatever tp. An absent num_attention_heads is the class default upstream
 * and not this error. */
static tpx_status invalid_counts(const tpx_model *model, int64_t heads,
                                 int64_t kv, tpx_diag_list *diags,
                                 tpx_error *err) {
  const char *arch = primary_arch(model);
  const char *dot = arch ? strrchr(arch, '.') : NULL;
  tpx_status st = tpx_diag_add(
      diags, TPX_DIAG_ERROR, "heads-invalid",
      heads <= 0 ? "num_attention_heads" : "num_key_value_heads",
      "fix the config's head counts (both must be positive)",
      "Invalid attention head counts for %s. (num_attention_heads=%lld, "
      "num_key_value_heads=%lld)",
      dot    ? dot + 1
      : arch ? arch
             : "the model",
      (long long)heads, (long long)kv);
  return st == TPX_OK ? TPX_OK : tpx_error_set(err, st, "out of memory");
}

tpx_status tpx__validate_tp_mesh(const tpx_model *model, const tpx__family *f,
                                 int64_t tp, tpx_diag_list *diags,
                                 tpx_error *err) {
  if (!model || !diags)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_validate_tp_mesh: NULL model or diagnostics");
  if (tp < 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_validate_tp_mesh: tp size %lld must be >= 1",
                         (long long)tp);
  if (tp == 1)
    return TPX_OK;
  if (has_block_configs(model, f))
    return nas_validate(model, tp, diags, err);

  int64_t heads, kv;
  effective_heads(model, f, &heads, &kv);
  int64_t given = 0;
  if ((head_lookup(model, f, "num_attention_heads", &given) && heads <= 0) ||
      kv < 0)
    return invalid_counts(model, heads, kv, diags, err);
  const char *bad = NULL;
  int64_t bad_n = 0;
  if (kv % tp != 0) {
    bad = "num_key_value_heads";
    bad_n = kv;
  } else if (heads % tp != 0) {
    bad = "num_attention_heads";
    bad_n = heads;
  }
  if (!bad)
    return TPX_OK;
  char valid[256], fix[320];
  divisors_text(gcd64(kv, heads), valid, sizeof valid);
  snprintf(fix, sizeof fix, "use a tp size from: %s", valid);
  tpx_status st = tpx_diag_add(
      diags, TPX_DIAG_ERROR, "heads-not-divisible", bad, fix,
      "%s (%lld) must be divisible by TP size (%lld) "
      "(num_attention_heads=%lld, num_key_value_heads=%lld); tp sizes that "
      "would work: %s",
      bad, (long long)bad_n, (long long)tp, (long long)heads, (long long)kv,
      valid);
  if (st != TPX_OK)
    return tpx_error_set(err, st, "out of memory");
  return TPX_OK;
}

tpx_status tpx_validate_tp_mesh(const tpx_model *model, int64_t tp,
                                tpx_diag_list *diags, tpx_error *err) {
  return tpx__validate_tp_mesh(model, model ? tpx__model_family(model) : NULL,
                               tp, diags, err);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

int tpx_plan_is_head_sharded(const tpx_plan *plan) {
  static const char *const keys[] = {"self_attn.q_proj", "self_attn.k_proj",
                                     "self_attn.v_proj", "self_attn.qkv_proj"};
  if (!plan)
    return 0;
  size_t n = tpx_plan_size(plan);
  for (size_t i = 0; i < n; i++) {
    tpx_plan_entry e;
    if (tpx_plan_get(plan, i, &e, NULL) != TPX_OK || !e.module)
      continue;
    int match = 0;
    for (size_t k = 0; k < 4; k++)
      if (ends_with(e.module, keys[k]))
        match = 1;
    if (!match || e.style.kind != TPX_STYLE_COLWISE)
      continue;
    const tpx_layout_list *out = &e.style.output_layouts;
    if (out->count < 0)
      return 1; /* not given (None) */
    for (int32_t j = 0; j < out->count && j < TPX_STYLE_MAX_LAYOUTS; j++)
      if (!out->is_none[j] && (out->items[j].kind == TPX_SHARD ||
                               out->items[j].kind == TPX_STRIDED_SHARD))
        return 1;
  }
  return 0;
}

tpx_status tpx_head_counts_after_tp(const tpx_model *model,
                                    const tpx_plan *plan, int64_t tp,
                                    tpx_head_counts *out, tpx_error *err) {
  if (!model || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_head_counts_after_tp: NULL argument");
  if (out->struct_size < sizeof(tpx_head_counts))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_head_counts_after_tp: struct_size %zu too small "
                         "(use TPX_HEAD_COUNTS_INIT)",
                         out->struct_size);
  if (tp < 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_head_counts_after_tp: tp size %lld must be >= 1",
                         (long long)tp);
  const tpx__family *f = tpx__model_family(model);
  out->heads = head_cfg(model, f, "num_attention_heads", -1);
  out->kv_heads = head_cfg(model, f, "num_key_value_heads", -1);
  out->head_dim = head_cfg(model, f, "head_dim", -1);
  if (out->head_dim < 0 && out->heads > 0) {
    int64_t hidden = head_cfg(model, f, "hidden_size", -1);
    if (hidden >= 0)
      out->head_dim = hidden / out->heads;
  }
  out->rewritten = tp > 1 && out->heads >= 0 && plan &&
                   tpx_plan_size(plan) > 0 && tpx_plan_is_head_sharded(plan);
  int64_t div = out->rewritten ? tp : 1;
  out->local_heads = out->heads >= 0 ? out->heads / div : -1;
  out->local_kv_heads = out->kv_heads >= 0 ? out->kv_heads / div : -1;
  if (out->local_kv_heads < 0 && out->local_heads >= 0 && out->rewritten)
    out->local_kv_heads = out->local_heads; /* torch's fallback */
  return TPX_OK;
}
