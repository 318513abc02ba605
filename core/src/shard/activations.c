/* activations.c — the sizes the activation term of the training-memory
 * estimate needs (act_formula.c holds the formula): hidden size, heads and
 * MLP width per rank after TP, the local vocabulary, the language layers
 * and their norms (from the module tree), tokens per rank (batch x seq /
 * cp), sequence parallelism, the attention implementation and the
 * activation dtype. docs/MEMORY.md "Activations".
 *
 * Reads the config, the module tree and the sharding; not a profiler. */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "shard/activations.h"
#include "shard/shard_internal.h"
#include "tpx/mesh.h"
#include "tpx/validate.h"

/* key, then text_config.key (VLMs). */
static int cfg_int(const tpx_model *m, const char *key, int64_t *out) {
  char buf[128];
  if (tpx_model_config_int(m, key, out, NULL) == TPX_OK)
    return 1;
  snprintf(buf, sizeof buf, "text_config.%s", key);
  return tpx_model_config_int(m, buf, out, NULL) == TPX_OK;
}

static tpx_status missing(const tpx_model *m, const char *key, tpx_error *err) {
  const char *src = tpx_model_source(m);
  return tpx_error_set(err, TPX_NOT_FOUND,
                       "activation estimate: the config%s%s has no positive "
                       "'%s' (give the model's config.json, or a seq of 0 to "
                       "leave activations out)",
                       src ? " " : "", src ? src : "", key);
}

static tpx_status need(const tpx_model *m, const char *key, int64_t *out,
                       tpx_error *err) {
  if (cfg_int(m, key, out) && *out > 0)
    return TPX_OK;
  return missing(m, key, err);
}

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Language layers, and the module index of the first (-1 if unknown). */
static int64_t count_layers(const tpx_model *m, int64_t *first) {
  size_t nl = 0;
  int64_t layers = 0;
  if (tpx_model_layer_groups(m, NULL, NULL, 0, &nl, NULL) != TPX_OK || !nl)
    return 0;
  int64_t *all = malloc(nl * sizeof *all);
  tpx_layer_group *gs = malloc(nl * sizeof *gs);
  if (all && gs && tpx_model_layer_groups(m, all, gs, nl, &nl, NULL) == TPX_OK)
    for (size_t i = 0; i < nl; i++)
      if (gs[i] != TPX_LAYERS_VISION && layers++ == 0)
        *first = all[i];
  free(all);
  free(gs);
  return layers;
}

/* The norms of the first language layer, from the module tree: those over
 * the hidden size (2, or 4 with post-norms), and whether q and k are normed
 * per head (a norm over head_dim). A layer with no hidden-sized norm found
 * (a tree from headers alone) counts as the usual 2. */
static void scan_norms(const tpx_model *m, int64_t layer, tpx__act_dims *d) {
  d->norms = 0;
  d->qk_norm = 0;
  const char *lf = layer >= 0 ? tpx_model_module_fqn(m, layer) : NULL;
  size_t n = lf ? strlen(lf) : 0, np = tpx_model_num_params(m);
  for (size_t i = 0; lf && i < np; i++) {
    tpx_param_info pi;
    if (tpx_model_param(m, (int64_t)i, &pi, NULL) != TPX_OK || pi.ndim != 1 ||
        strcmp(pi.name, "weight") != 0 ||
        tpx_model_module_kind(m, pi.module) != TPX_MODULE_NORM ||
        strncmp(pi.fqn, lf, n) != 0 || pi.fqn[n] != '.')
      continue;
    if (pi.shape[0] == d->hidden)
      d->norms++;
    else if (pi.shape[0] == d->head_dim)
      d->qk_norm = 1;
  }
  if (d->norms == 0)
    d->norms = 2;
}

static int sequence_parallel(const tpx_sharding *sh) {
  if (!sh->tp_applied)
    return 0;
  for (size_t e = 0; e < sh->num_entries; e++) {
    tpx_style_kind k = sh->entry_styles[e].kind;
    if (k == TPX_STYLE_SEQUENCE_PARALLEL ||
        k == TPX_STYLE_QK_NORM_SEQUENCE_PARALLEL ||
        k == TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION)
      return 1;
  }
  return 0;
}

/* The output projection's weight: lm_head.weight, else the first embedding
 * weight (tied or sole vocabulary matrix); -1 if none. */
static int64_t output_weight(const tpx_model *m) {
  int64_t p = tpx_model_find_param(m, "lm_head.weight");
  if (p >= 0)
    return p;
  size_t np = tpx_model_num_params(m);
  for (size_t i = 0; i < np; i++) {
    tpx_param_info pi;
    if (tpx_model_param(m, (int64_t)i, &pi, NULL) != TPX_OK)
      continue;
    if (pi.ndim == 2 &&
        tpx_model_module_kind(m, pi.module) == TPX_MODULE_EMBEDDING)
      return (int64_t)i;
  }
  return -1;
}

tpx_memory_options tpx__memory_options(const tpx_memory_options *opts) {
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  if (opts) {
    size_t n = opts->struct_size < sizeof o ? opts->struct_size : sizeof o;
    memcpy(&o, opts, n);
    o.struct_size = sizeof o;
  }
  return o;
}

static int before_ep(const tpx_memory_options *opts) {
  return opts &&
         opts->struct_size < offsetof(tpx_memory_options, loss_in_place) +
                                 sizeof opts->loss_in_place;
}

size_t tpx__memory_out_size(const tpx_memory_options *opts) {
  return before_ep(opts) ? offsetof(tpx_memory, moe_dispatch)
                         : sizeof(tpx_memory);
}

size_t tpx__traffic_out_size(const tpx_memory_options *opts) {
  return before_ep(opts) ? offsetof(tpx_traffic, ep) : sizeof(tpx_traffic);
}

void tpx__act_dims_set_cp(tpx__act_dims *d, int64_t cp) {
  d->cp = cp > 1 ? cp : 1;
  d->cp_tokens = tpx__sat_mul(d->batch, d->seq);
  d->tokens = tpx__sat_mul(d->batch, ceil_div(d->seq, d->cp));
}

tpx_status tpx__act_dims_read(const tpx_sharding *sh,
                              const tpx_memory_options *opts, tpx__act_dims *d,
                              tpx_error *err) {
  const tpx_model *m = sh->model;
  memset(d, 0, sizeof *d);
  int64_t t = sh->tp_applied ? sh->tp : 1;
  d->batch = opts->batch;
  d->seq = opts->seq;
  /* cp from the mesh's "cp" dimension when it has one */
  int cpd = sh->mesh ? tpx_mesh_dim_index(sh->mesh, "cp") : -1;
  tpx__act_dims_set_cp(d, cpd >= 0 ? tpx_mesh_dim_size(sh->mesh, cpd) : 1);
  tpx_status st = need(m, "hidden_size", &d->hidden, err);
  if (st != TPX_OK)
    return st;
  tpx_head_counts hc = TPX_HEAD_COUNTS_INIT;
  st = tpx_head_counts_after_tp(m, sh->plan, t, &hc, err);
  if (st != TPX_OK)
    return st;
  if (hc.heads <= 0)
    return missing(m, "num_attention_heads", err);
  if (hc.head_dim <= 0)
    return missing(m, "head_dim", err);
  int64_t kv = hc.kv_heads > 0 ? hc.kv_heads : hc.heads;
  /* Heads and MLP width are split together by every shipped plan; the
   * head rewrite is what tells that attention is head-sharded. */
  int64_t split = hc.rewritten ? t : 1;
  d->heads = ceil_div(hc.heads, split);
  d->kv_heads = ceil_div(kv, split);
  d->head_dim = hc.head_dim;
  int64_t topk = 0, inter = 0, moe = 0, shared = 0;
  if (cfg_int(m, "num_experts_per_tok", &topk) && topk > 0) {
    if (!cfg_int(m, "moe_intermediate_size", &moe) || moe <= 0) {
      st = need(m, "intermediate_size", &moe, err);
      if (st != TPX_OK)
        return st;
    }
    if (!cfg_int(m, "shared_expert_intermediate_size", &shared) || shared < 0)
      shared = 0;
    inter = tpx__sat_add(tpx__sat_mul(topk, moe), shared);
  } else {
    st = need(m, "intermediate_size", &inter, err);
    if (st != TPX_OK)
      return st;
  }
  d->inter = ceil_div(inter, split);
  int64_t ow = output_weight(m);
  tpx_param_info pi;
  if (!cfg_int(m, "vocab_size", &d->vocab) || d->vocab <= 0) {
    if (ow < 0 || tpx_model_param(m, ow, &pi, NULL) != TPX_OK)
      return need(m, "vocab_size", &d->vocab, err);
    d->vocab = pi.shape[0];
  }
  d->vocab_local = d->vocab;
  if (ow >= 0 && sh->tp_dim >= 0 && sh->tp_applied) {
    tpx_placement p =
        sh->placements[(size_t)ow * (size_t)sh->ndim + (size_t)sh->tp_dim];
    if (tpx_model_param(m, ow, &pi, NULL) == TPX_OK && p.kind == TPX_SHARD &&
        (p.dim == 0 || p.dim == -pi.ndim))
      d->vocab_local = ceil_div(d->vocab, t);
  }
  int64_t first = -1, layers = count_layers(m, &first);
  if (layers == 0) {
    st = need(m, "num_hidden_layers", &layers, err);
    if (st != TPX_OK)
      return st;
  }
  scan_norms(m, first, d);
  d->layers = layers;
  d->sp_div = sequence_parallel(sh) ? t : 1;
  if ((unsigned)opts->attention > TPX_ATTENTION_EAGER)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "activation estimate: attention %d is not a "
                         "tpx_attention (flash, sdpa or eager)",
                         (int)opts->attention);
  d->attention = opts->attention;
  d->loss_in_place = opts->loss_in_place != 0;
  d->elem = (int64_t)tpx_dtype_size(tpx_memory_activation_dtype(sh, opts));
  return TPX_OK;
}

tpx_dtype tpx_memory_activation_dtype(const tpx_sharding *sh,
                                      const tpx_memory_options *opts) {
  tpx_memory_options o = tpx__memory_options(opts);
  tpx_dtype e = o.activation_dtype;
  tpx_param_info pi;
  if (!e && sh && sh->num_units > 0)
    e = sh->opts.param_dtype;
  if (!e && sh && sh->num_params > 0 &&
      tpx_model_param(sh->model, 0, &pi, NULL) == TPX_OK &&
      tpx_dtype_is_float(pi.dtype))
    e = pi.dtype;
  return e ? e : TPX_DTYPE_BF16;
}
