/* example.c — a complete, small tpx model-family plugin: the template to
 * copy for a new family. It serves "ExampleForCausalLM", a Llama-shaped
 * decoder (embed_tokens, layers.N.{self_attn.{q,k,v,o}_proj,
 * mlp.{gate,up,down}_proj, input_layernorm, post_attention_layernorm}, norm,
 * lm_head), with
 *   - register_parallel_strategy: ABI negotiation and what it serves;
 *   - get_plan: the TP plan, with sequence-parallel overrides, refusing head
 *     counts that tp does not divide;
 *   - tpx_plugin_get_skeleton: every parameter of the checkpoint, so
 *     `tpx plan` works from a bare config.json.
 * Everything comes in through the host table; nothing is global and
 * mutable, so the host may call it from several threads at once.
 * See docs/PLUGIN_ABI.md in the tpx sources for every rule. */
#include <stdio.h>
#include <string.h>

/* Declares the entry points with default visibility (-fvisibility=hidden
 * and -Wmissing-prototypes then need nothing else). */
#define TPX_PLUGIN_DECLARE_ENTRY_POINTS
#include <tpx/plugin.h>

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

/* One plan entry; NULL layouts keep the style's torch defaults. */
static int add(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
               const char *module, const char *style, const char *in,
               const char *out, int use_local_output) {
  const char *ins[1] = {in}, *outs[1] = {out};
  tpx_plugin_entry e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.module = module;
  e.style = style;
  e.input_layouts = in ? ins : NULL;
  e.n_input_layouts = in ? 1 : 0;
  e.output_layouts = out ? outs : NULL;
  e.n_output_layouts = out ? 1 : 0;
  e.use_local_output = use_local_output;
  e.sequence_dim = TPX_PLUGIN_DEFAULT;
  e.optional = 0;
  return h->plan_add(ctx, &e);
}

int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  const int D = TPX_PLUGIN_DEFAULT;
  /* No head-count check here: tpx runs validate_tp_mesh itself (on
   * num_attention_heads / num_key_value_heads) before any plan is chosen and
   * reports heads-not-divisible. Refuse only what your plan function itself
   * cannot serve. */
  const int sp = req->sequence_parallel;
  int rc = 0;
  /* Embedding: vocab-parallel; with sp its output is sequence-sharded. */
  rc |= add(h, ctx, "model.embed_tokens", "vocab_parallel_embedding",
            "replicate", sp ? "shard(1)" : NULL, sp ? 0 : D);
  rc |= add(h, ctx, "model.layers.*.self_attn.q_proj", "colwise", NULL, NULL, D);
  rc |= add(h, ctx, "model.layers.*.self_attn.k_proj", "colwise", NULL, NULL, D);
  rc |= add(h, ctx, "model.layers.*.self_attn.v_proj", "colwise", NULL, NULL, D);
  rc |= add(h, ctx, "model.layers.*.self_attn.o_proj", "rowwise", NULL,
            sp ? "shard(1)" : NULL, sp ? 0 : D);
  rc |= add(h, ctx, "model.layers.*.mlp.gate_proj", "colwise", NULL, NULL, D);
  rc |= add(h, ctx, "model.layers.*.mlp.up_proj", "colwise", NULL, NULL, D);
  rc |= add(h, ctx, "model.layers.*.mlp.down_proj", "rowwise", NULL,
            sp ? "shard(1)" : NULL, sp ? 0 : D);
  /* The head keeps vocab-sharded logits for a vocab-parallel loss. */
  rc |= add(h, ctx, "lm_head", "colwise", sp ? "shard(1)" : NULL, "shard(-1)",
            0);
  if (sp) {
    rc |= add(h, ctx, "model.norm", "sequence_parallel", NULL, NULL, D);
    rc |= add(h, ctx, "model.layers.*.input_layernorm",
              "sequence_parallel", NULL, NULL, D);
    rc |= add(h, ctx, "model.layers.*.post_attention_layernorm",
              "sequence_parallel", NULL, NULL, D);
  }
  h->plan_set_function(ctx, sp ? "example_plan_sp" : "example_plan");
  if (rc != TPX_PLUGIN_OK) {
    h->set_error(ctx, "the host refused a plan entry (see the log)");
    return TPX_PLUGIN_ERROR;
  }
  return TPX_PLUGIN_OK;
}

static int linear(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                  const char *fqn, int64_t out, int64_t in) {
  const int64_t shape[2] = {out, in}; /* [out, in], as torch stores it */
  int rc = h->skeleton_add_module(ctx, fqn, "linear");
  return rc | h->skeleton_add_param(ctx, fqn, "weight", shape, 2, NULL);
}

static int norm(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                const char *fqn, int64_t hidden) {
  int rc = h->skeleton_add_module(ctx, fqn, "norm");
  return rc | h->skeleton_add_param(ctx, fqn, "weight", &hidden, 1, NULL);
}

int tpx_plugin_get_skeleton(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  (void)architecture;
  int64_t hidden, inter, layers, vocab, heads, kv, head_dim;
  if (h->config_get_int(ctx, "hidden_size", &hidden) ||
      h->config_get_int(ctx, "intermediate_size", &inter) ||
      h->config_get_int(ctx, "num_hidden_layers", &layers) ||
      h->config_get_int(ctx, "vocab_size", &vocab) ||
      h->config_get_int(ctx, "num_attention_heads", &heads)) {
    h->set_error(ctx, "config.json lacks hidden_size, intermediate_size, "
                      "num_hidden_layers, vocab_size or num_attention_heads");
    return TPX_PLUGIN_REFUSED;
  }
  if (h->config_get_int(ctx, "num_key_value_heads", &kv))
    kv = heads;
  if (heads <= 0 || layers < 0) {
    h->set_error(ctx, "implausible head or layer count");
    return TPX_PLUGIN_REFUSED;
  }
  if (h->config_get_int(ctx, "head_dim", &head_dim))
    head_dim = hidden / heads;
  int tied = 0;
  if (h->config_get_bool(ctx, "tie_word_embeddings", &tied))
    tied = 0;

  int rc = h->skeleton_add_module(ctx, "model.embed_tokens", "embedding");
  const int64_t emb[2] = {vocab, hidden};
  rc |= h->skeleton_add_param(ctx, "model.embed_tokens", "weight", emb, 2,
                              NULL);
  char p[160], f[200];
  for (int64_t i = 0; i < layers && rc == TPX_PLUGIN_OK; i++) {
    snprintf(p, sizeof p, "model.layers.%lld", (long long)i);
    snprintf(f, sizeof f, "%s.self_attn.q_proj", p);
    rc |= linear(h, ctx, f, heads * head_dim, hidden);
    snprintf(f, sizeof f, "%s.self_attn.k_proj", p);
    rc |= linear(h, ctx, f, kv * head_dim, hidden);
    snprintf(f, sizeof f, "%s.self_attn.v_proj", p);
    rc |= linear(h, ctx, f, kv * head_dim, hidden);
    snprintf(f, sizeof f, "%s.self_attn.o_proj", p);
    rc |= linear(h, ctx, f, hidden, heads * head_dim);
    snprintf(f, sizeof f, "%s.mlp.gate_proj", p);
    rc |= linear(h, ctx, f, inter, hidden);
    snprintf(f, sizeof f, "%s.mlp.up_proj", p);
    rc |= linear(h, ctx, f, inter, hidden);
    snprintf(f, sizeof f, "%s.mlp.down_proj", p);
    rc |= linear(h, ctx, f, hidden, inter);
    snprintf(f, sizeof f, "%s.input_layernorm", p);
    rc |= norm(h, ctx, f, hidden);
    snprintf(f, sizeof f, "%s.post_attention_layernorm", p);
    rc |= norm(h, ctx, f, hidden);
  }
  rc |= norm(h, ctx, "model.norm", hidden);
  rc |= h->skeleton_add_module(ctx, "lm_head", "linear");
  if (tied)
    rc |= h->skeleton_tie(ctx, "lm_head.weight", "model.embed_tokens.weight");
  else
    rc |= h->skeleton_add_param(ctx, "lm_head", "weight", emb, 2, NULL);
  if (rc != TPX_PLUGIN_OK) {
    h->set_error(ctx, "the host refused a skeleton entry (see the log)");
    return TPX_PLUGIN_ERROR;
  }
  return TPX_PLUGIN_OK;
}
