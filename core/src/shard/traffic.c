/* traffic.c — bytes one rank sends per training step (tpx_traffic_rank):
 * the TP collectives of every styled module's transitions on activations of
 * batch x seq / cp tokens, FSDP's all-gathers, gradient reduce-scatter and
 * HSDP all-reduce (expert units over ep_shard), the cp all-gathers of K
 * and V, and the MoE token exchange over ep (ep_cost.c), all as ring
 * collectives. Formulas: docs/MEMORY.md. Not a
 * timing model (no bandwidths, no overlap). */
#include <stdlib.h>
#include <string.h>

#include "shard/activations.h"
#include "shard/shard_internal.h"

/* Bytes a rank sends for one collective named like transitions.c names
 * them, moving a tensor of `x` bytes (global size) over `w` ranks. */
static int64_t coll_bytes(const char *name, int64_t x, int64_t w) {
  if (w <= 1 || !name)
    return 0;
  /* names may carry local steps first ("mask + all-reduce") */
  if (strstr(name, "all-reduce"))
    return tpx__sat_mul(x, 2 * (w - 1)) / w;
  if (strstr(name, "all-gather") || strstr(name, "reduce-scatter") ||
      strstr(name, "all-to-all"))
    return tpx__sat_mul(x, w - 1) / w;
  return 0; /* none, chunk, partition: local */
}

/* Marks the modules whose output is logits, not hidden states: those
 * owning a 2-D non-embedding weight whose rows are the vocabulary. */
static void mark_logit_modules(const tpx_model *model, int64_t vocab,
                               int64_t hidden, uint8_t *mark) {
  if (vocab == hidden)
    return;
  size_t np = tpx_model_num_params(model);
  for (size_t p = 0; p < np; p++) {
    tpx_param_info pi;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK)
      continue;
    if (pi.ndim == 2 && pi.shape[0] == vocab &&
        tpx_model_module_kind(model, pi.module) != TPX_MODULE_EMBEDDING)
      mark[pi.module] = 1;
  }
}

static tpx_status tp_bytes(const tpx_sharding *sh, const tpx_memory_options *o,
                           int64_t *out, tpx_error *err) {
  *out = 0;
  if (!sh->tp_applied || o->seq <= 0)
    return TPX_OK;
  tpx__act_dims d;
  tpx_status st = tpx__act_dims_read(sh, o, &d, err);
  if (st != TPX_OK)
    return st;
  int64_t hidden = tpx__sat_mul(tpx__sat_mul(d.tokens, d.hidden), d.elem);
  int64_t logits = tpx__sat_mul(tpx__sat_mul(d.tokens, d.vocab), d.elem);
  uint8_t *logit = calloc(sh->num_modules ? sh->num_modules : 1, 1);
  if (!logit)
    return tpx__shard_oom(err, "traffic");
  mark_logit_modules(sh->model, d.vocab, d.hidden, logit);
  int64_t sum = 0;
  for (size_t m = 0; m < sh->num_modules; m++) {
    if (sh->module_entry[m] < 0)
      continue;
    const tpx_transition *tr = NULL;
    size_t nt = 0;
    if (tpx_sharding_module_transitions(sh, (int64_t)m, &tr, &nt, NULL) !=
            TPX_OK ||
        nt == 0)
      continue;
    for (size_t i = 0; i < nt; i++) {
      int64_t x =
          tr[i].side == TPX_TRANSITION_OUTPUT && logit[m] ? logits : hidden;
      sum = tpx__sat_add(sum, coll_bytes(tr[i].forward, x, sh->tp));
      sum = tpx__sat_add(sum, coll_bytes(tr[i].backward, x, sh->tp));
    }
  }
  free(logit);
  *out = sum;
  return TPX_OK;
}

/* Context parallelism: every layer all-gathers K and V over cp in forward
 * (a rank sends its piece to cp - 1 peers) and reduce-scatters their
 * gradients in backward (the same bytes): 4 (cp - 1) pieces per layer, a
 * piece being the rank's tokens x its kv heads x head_dim. */
static tpx_status cp_bytes(const tpx_sharding *sh, const tpx_memory_options *o,
                           int64_t *out, tpx_error *err) {
  *out = 0;
  if (sh->cp <= 1 || o->seq <= 0)
    return TPX_OK;
  tpx__act_dims d;
  tpx_status st = tpx__act_dims_read(sh, o, &d, err);
  if (st != TPX_OK)
    return st;
  int64_t piece = tpx__sat_mul(
      tpx__sat_mul(d.tokens, tpx__sat_mul(d.kv_heads, d.head_dim)), d.elem);
  *out = tpx__sat_mul(tpx__sat_mul(piece, 4 * (sh->cp - 1)), d.layers);
  return TPX_OK;
}

static int64_t fsdp_bytes(const tpx_sharding *sh, int64_t rank) {
  const int64_t *rs = &sh->rank_state[(size_t)rank * TPX__STATE_TERMS];
  /* expert gradients (ep > 1) are not reduced over the dp dims: their
   * unit reduce-scatters them over ep_shard; without one (ep = world) each
   * EP rank owns its experts' gradients whole */
  int64_t moe = rs[TPX__STATE_MOE_GRAD_BYTES];
  int64_t grads = rs[TPX__STATE_GRAD_BYTES] - moe;
  int64_t dps = sh->dps_dim >= 0 ? sh->dps : 1;
  int64_t dpr = sh->dpr_dim >= 0 ? sh->dpr : 1;
  if (sh->num_units == 0) /* plain data parallel: all-reduce the grads */
    return coll_bytes("all-reduce", grads, dps * dpr);
  int64_t sum = 0;
  for (size_t u = 0; u < sh->num_units; u++) {
    const tpx__fsdp_unit_rec *x = &sh->units[u];
    int root = u + 1 == sh->num_units;
    int64_t times = (!root && x->reshard) ? 2 : 1;
    sum = tpx__sat_add(
        sum, tpx__sat_mul(times, coll_bytes("all-gather", x->gathered[rank],
                                            x->on_moe ? sh->ep_shard : dps)));
  }
  /* reduce-scatter input = dps padded shards; a rank sends all but its own */
  sum = tpx__sat_add(sum, tpx__sat_mul(grads, dps - 1));
  if (sh->ep_fsdp)
    sum = tpx__sat_add(sum, tpx__sat_mul(moe, sh->ep_shard - 1));
  return tpx__sat_add(sum, coll_bytes("all-reduce", grads, dpr));
}

tpx_status tpx_traffic_ranks(const tpx_sharding *sh,
                             const tpx_memory_options *opts, int64_t first,
                             size_t count, tpx_traffic *out, tpx_error *err) {
  if (!sh || (!out && count))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_traffic_ranks: NULL sharding or out");
  if (opts && opts->struct_size < offsetof(tpx_memory_options, optimizer) +
                                      sizeof(opts->optimizer))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_traffic_ranks: options struct_size %zu too small "
                         "(use TPX_MEMORY_OPTIONS_INIT)",
                         opts->struct_size);
  if (first < 0 || (uint64_t)count > (uint64_t)sh->world ||
      first > sh->world - (int64_t)count)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_traffic_ranks: ranks %lld..%lld are outside the "
                         "mesh of %lld ranks",
                         (long long)first,
                         (long long)(first + (int64_t)count) - 1,
                         (long long)sh->world);
  if (!sh->rank_state)
    return tpx_error_set(err, TPX_INTERNAL,
                         "tpx_traffic_ranks: the sharding has no state bytes");
  tpx_memory_options o = tpx__memory_options(opts);
  if (o.batch < 1 || o.seq < 0)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_traffic_ranks: batch %lld must be >= 1 and seq "
                         "%lld >= 0",
                         (long long)o.batch, (long long)o.seq);
  /* TP traffic is the same on every rank: computed once */
  int64_t tp = 0, cp = 0, ep = 0, unused = 0;
  tpx_status st = count ? tp_bytes(sh, &o, &tp, err) : TPX_OK;
  if (st == TPX_OK && count)
    st = cp_bytes(sh, &o, &cp, err);
  if (st == TPX_OK && count)
    st = tpx__ep_costs(sh, &o, &unused, &unused, &ep, err);
  if (st != TPX_OK)
    return st;
  size_t stride = tpx__traffic_out_size(opts);
  for (size_t i = 0; i < count; i++) {
    tpx_traffic t;
    t.tp = tp;
    t.cp = cp;
    t.ep = ep;
    t.fsdp = fsdp_bytes(sh, first + (int64_t)i);
    t.total = tpx__sat_add(tpx__sat_add(tpx__sat_add(tp, t.fsdp), cp), ep);
    memcpy((char *)out + i * stride, &t, stride);
  }
  return TPX_OK;
}

tpx_status tpx_traffic_rank(const tpx_sharding *sh,
                            const tpx_memory_options *opts, int64_t rank,
                            tpx_traffic *out, tpx_error *err) {
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_traffic_rank: NULL sharding or out");
  if (rank < 0 || rank >= sh->world)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_traffic_rank: rank %lld is outside the mesh of "
                         "%lld ranks",
                         (long long)rank, (long long)sh->world);
  return tpx_traffic_ranks(sh, opts, rank, 1, out, err);
}
