/* example.c — a complete, small tpx model-family plugin: the template to
 * copy for a new family. It serves "ExampleForCausalLM", a Llama-shaped
 * decoder (embed_tokens, layers.N.{self_attn.{q,k,v,o}_proj,
 * mlp.{gate,up,down}_proj, input_layernorm, post_attention_layernorm}, norm,
 * lm_head), with
 *   - register_parallel_strategy: ABI negotiation and what it serves;
 *   - get_plan: the TP plan as one table of entries, with the
 *     sequence-parallel overrides as a second table. It does not check head
 *     counts: tpx validates num_attention_heads / num_key_value_heads
 *     against tp itself, for every plan source, before a plan is chosen;
 *   - tpx_plugin_get_skeleton: every parameter of the checkpoint, so
 *     `tpx plan` works from a bare config.json.
 * Every host call returns a status; the first one that is not
 * TPX_PLUGIN_OK is returned as it is (CHK), never combined with others.
 * Everything comes in through the host table; nothing is global and
 * mutable, so the host may call it from several threads at once.
 * See docs/PLUGIN_ABI.md in the tpx sources for every rule. */
#include <stdio.h>
#include <string.h>

/* Declares the entry points with default visibility (-fvisibility=hidden
 * and -Wmissing-prototypes then need nothing else). */
#define TPX_PLUGIN_DECLARE_ENTRY_POINTS
#include <tpx/plugin.h>

/* Return the status of `call` unless it is TPX_PLUGIN_OK. */
#define CHK(call)                                                              \
  do {                                                                         \
    int st_ = (call);                                                          \
    if (st_ != TPX_PLUGIN_OK)                                                  \
      return st_;                                                              \
  } while (0)

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Bare class names and qualified names, both matched as strings. */
static const char *const architectures[] = {
    "ExampleForCausalLM", "example_models.modeling_example.ExampleForCausalLM",
    NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  /* This plugin implements ABI 1.0 and nothing newer. */
  const uint32_t mine = TPX_PLUGIN_ABI_VERSION(1, 0);
  if (mine < host->abi_min || mine > host->abi_max)
    return TPX_PLUGIN_ABI_UNSUPPORTED;
  info->abi_version = mine;
  info->name = "example";
  info->version = "0.1.0";
  info->description = "template plugin: a Llama-shaped decoder";
  info->architectures = architectures;
  info->plan_names = NULL;
  return TPX_PLUGIN_OK;
}

/* One plan entry: a module pattern, a style, and what differs from the
 * style's torch defaults. Fields left out of a row are the defaults (NULL
 * layouts; `keep_dtensor` 0 means use_local_output is the style's). */
typedef struct rule {
  const char *module;
  const char *style;
  const char *in, *out; /* one layout each, or NULL */
  int keep_dtensor;     /* 1: use_local_output = 0 (a DTensor output) */
} rule;

/* The plan with sequence parallelism off. Vocab-parallel embedding; q/k/v
 * and gate/up colwise, o and down rowwise; the head keeps vocab-sharded
 * logits for a vocab-parallel loss. */
static const rule plan[] = {
    {.module = "model.embed_tokens",
     .style = "vocab_parallel_embedding",
     .in = "replicate"},
    {.module = "model.layers.*.self_attn.q_proj", .style = "colwise"},
    {.module = "model.layers.*.self_attn.k_proj", .style = "colwise"},
    {.module = "model.layers.*.self_attn.v_proj", .style = "colwise"},
    {.module = "model.layers.*.self_attn.o_proj", .style = "rowwise"},
    {.module = "model.layers.*.mlp.gate_proj", .style = "colwise"},
    {.module = "model.layers.*.mlp.up_proj", .style = "colwise"},
    {.module = "model.layers.*.mlp.down_proj", .style = "rowwise"},
    {.module = "lm_head",
     .style = "colwise",
     .out = "shard(-1)",
     .keep_dtensor = 1},
};

/* With sequence parallelism: these replace the entries of the same module
 * (the host keeps the first position) and add the norms. Activations
 * between blocks are sequence-sharded (shard(1)). */
static const rule plan_sp[] = {
    {.module = "model.embed_tokens",
     .style = "vocab_parallel_embedding",
     .in = "replicate",
     .out = "shard(1)",
     .keep_dtensor = 1},
    {.module = "model.layers.*.self_attn.o_proj",
     .style = "rowwise",
     .out = "shard(1)",
     .keep_dtensor = 1},
    {.module = "model.layers.*.mlp.down_proj",
     .style = "rowwise",
     .out = "shard(1)",
     .keep_dtensor = 1},
    {.module = "lm_head",
     .style = "colwise",
     .in = "shard(1)",
     .out = "shard(-1)",
     .keep_dtensor = 1},
    {.module = "model.norm", .style = "sequence_parallel"},
    {.module = "model.layers.*.input_layernorm", .style = "sequence_parallel"},
    {.module = "model.layers.*.post_attention_layernorm",
     .style = "sequence_parallel"},
};

static int add_rules(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                     const rule *rules, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const rule *r = &rules[i];
    const char *ins[1] = {r->in}, *outs[1] = {r->out};
    tpx_plugin_entry e;
    memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.module = r->module;
    e.style = r->style;
    e.input_layouts = r->in ? ins : NULL;
    e.n_input_layouts = r->in ? 1 : 0;
    e.output_layouts = r->out ? outs : NULL;
    e.n_output_layouts = r->out ? 1 : 0;
    e.use_local_output = r->keep_dtensor ? 0 : TPX_PLUGIN_DEFAULT;
    e.sequence_dim = TPX_PLUGIN_DEFAULT;
    e.optional = 0;
    /* The host copies every string: nothing here must outlive the call. */
    CHK(h->plan_add(ctx, &e));
  }
  return TPX_PLUGIN_OK;
}

int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  /* Refuse only what this plan function itself cannot serve: here, named
   * plans (it has none). Head counts are tpx's to check. */
  if (req->plan_name != NULL) {
    h->set_error(ctx, "example: this plugin has no named plans");
    return TPX_PLUGIN_REFUSED;
  }
  CHK(add_rules(h, ctx, plan, N_OF(plan)));
  if (req->sequence_parallel)
    CHK(add_rules(h, ctx, plan_sp, N_OF(plan_sp)));
  return h->plan_set_function(ctx, req->sequence_parallel ? "example_plan_sp"
                                                          : "example_plan");
}

/* ---- the skeleton ---- */

typedef struct dims {
  int64_t hidden, inter, layers, vocab, heads, kv, head_dim;
} dims;

/* A module and its 1- or 2-D weight (dim1 < 0: 1-D). */
static int module(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                  const char *fqn, const char *kind, int64_t dim0,
                  int64_t dim1) {
  const int64_t shape[2] = {dim0, dim1}; /* Linear: [out, in], as torch */
  CHK(h->skeleton_add_module(ctx, fqn, kind));
  return h->skeleton_add_param(ctx, fqn, "weight", shape, dim1 < 0 ? 1 : 2,
                               NULL);
}

/* One decoder layer as a table: suffix, kind and weight shape. */
static int layer(const tpx_plugin_host *h, tpx_plugin_ctx *ctx, const dims *d,
                 int64_t i) {
  const int64_t q = d->heads * d->head_dim, kv = d->kv * d->head_dim;
  const struct {
    const char *suffix, *kind;
    int64_t dim0, dim1;
  } rows[] = {
      {"self_attn.q_proj", "linear", q, d->hidden},
      {"self_attn.k_proj", "linear", kv, d->hidden},
      {"self_attn.v_proj", "linear", kv, d->hidden},
      {"self_attn.o_proj", "linear", d->hidden, q},
      {"mlp.gate_proj", "linear", d->inter, d->hidden},
      {"mlp.up_proj", "linear", d->inter, d->hidden},
      {"mlp.down_proj", "linear", d->hidden, d->inter},
      {"input_layernorm", "norm", d->hidden, -1},
      {"post_attention_layernorm", "norm", d->hidden, -1},
  };
  char fqn[256];
  for (size_t k = 0; k < N_OF(rows); k++) {
    snprintf(fqn, sizeof fqn, "model.layers.%lld.%s", (long long)i,
             rows[k].suffix);
    CHK(module(h, ctx, fqn, rows[k].kind, rows[k].dim0, rows[k].dim1));
  }
  return TPX_PLUGIN_OK;
}

int tpx_plugin_get_skeleton(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  dims d;
  int tied = 0;
  (void)architecture;
  if (h->config_get_int(ctx, "hidden_size", &d.hidden) ||
      h->config_get_int(ctx, "intermediate_size", &d.inter) ||
      h->config_get_int(ctx, "num_hidden_layers", &d.layers) ||
      h->config_get_int(ctx, "vocab_size", &d.vocab) ||
      h->config_get_int(ctx, "num_attention_heads", &d.heads)) {
    h->set_error(ctx, "config.json lacks hidden_size, intermediate_size, "
                      "num_hidden_layers, vocab_size or num_attention_heads");
    return TPX_PLUGIN_REFUSED;
  }
  if (h->config_get_int(ctx, "num_key_value_heads", &d.kv))
    d.kv = d.heads;
  if (d.heads <= 0 || d.layers < 0) {
    h->set_error(ctx, "implausible head or layer count");
    return TPX_PLUGIN_REFUSED;
  }
  if (h->config_get_int(ctx, "head_dim", &d.head_dim))
    d.head_dim = d.hidden / d.heads;
  if (h->config_get_bool(ctx, "tie_word_embeddings", &tied))
    tied = 0;

  CHK(module(h, ctx, "model.embed_tokens", "embedding", d.vocab, d.hidden));
  for (int64_t i = 0; i < d.layers; i++) CHK(layer(h, ctx, &d, i));
  CHK(module(h, ctx, "model.norm", "norm", d.hidden, -1));
  if (!tied)
    return module(h, ctx, "lm_head", "linear", d.vocab, d.hidden);
  /* Tied: the head's weight is the embedding's tensor, counted once. */
  CHK(h->skeleton_add_module(ctx, "lm_head", "linear"));
  return h->skeleton_tie(ctx, "lm_head.weight", "model.embed_tokens.weight");
}
