/* memory.c — training memory per rank (tpx/memory.h): parameters,
 * gradients and optimizer state from the FSDP2-padded per-rank state that
 * bytes.c tabulates, the FSDP all-gather peak from the per-rank peak, and
 * the activation estimate of activations.c, summed. Formulas:
 * docs/MEMORY.md. Not the per-step traffic (traffic.c). */
#include <string.h>

#include "shard/activations.h"
#include "shard/shard_internal.h"

static const char *const opt_names[] = {"adamw", "sgd", "none"};

const char *tpx_optimizer_name(tpx_optimizer opt) {
  return (unsigned)opt < 3 ? opt_names[opt] : NULL;
}

tpx_status tpx_optimizer_parse(const char *text, tpx_optimizer *out,
                               tpx_error *err) {
  if (!text || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_optimizer_parse: NULL text or out");
  for (int i = 0; i < 3; i++)
    if (strcmp(text, opt_names[i]) == 0) {
      *out = (tpx_optimizer)i;
      return TPX_OK;
    }
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "unknown optimizer '%s' (expected adamw, sgd or none)",
                       text);
}

/* f32 states per element */
static int64_t opt_states(tpx_optimizer o) {
  return o == TPX_OPTIMIZER_ADAMW ? 2 : o == TPX_OPTIMIZER_SGD ? 1 : 0;
}

/* torch's optimizer on the unpadded shard, AdamW's step tensors (f32
 * scalars, one per parameter) included. */
static int64_t torch_optimizer(tpx_optimizer o, const int64_t *rs) {
  int64_t states = opt_states(o);
  if (!states)
    return 0;
  int64_t v = tpx__sat_add(
      tpx__sat_mul(4 * states, rs[TPX__STATE_FLOAT_NUMEL_UNPADDED]),
      tpx__sat_mul(4, rs[TPX__STATE_LOWP_NUMEL_UNPADDED]));
  if (o == TPX_OPTIMIZER_ADAMW)
    v = tpx__sat_add(v, tpx__sat_mul(4, rs[TPX__STATE_FLOAT_TENSORS]));
  return v;
}

tpx_status tpx_memory_ranks(const tpx_sharding *sh,
                            const tpx_memory_options *opts, int64_t first,
                            size_t count, tpx_memory *out, tpx_error *err) {
  if (!sh || (!out && count))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_memory_ranks: NULL sharding or out");
  if (opts && opts->struct_size < offsetof(tpx_memory_options, optimizer) +
                                      sizeof(opts->optimizer))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_memory_ranks: options struct_size %zu too small "
                         "(use TPX_MEMORY_OPTIONS_INIT)",
                         opts->struct_size);
  tpx_memory_options o = tpx__memory_options(opts);
  if (first < 0 || (uint64_t)count > (uint64_t)sh->world ||
      first > sh->world - (int64_t)count)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_memory_ranks: ranks %lld..%lld are outside the "
                         "mesh of %lld ranks",
                         (long long)first,
                         (long long)(first + (int64_t)count) - 1,
                         (long long)sh->world);
  if ((unsigned)o.optimizer > TPX_OPTIMIZER_NONE)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_memory_ranks: optimizer %d is not a "
                         "tpx_optimizer",
                         (int)o.optimizer);
  if (o.batch < 1 || o.seq < 0)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_memory_ranks: batch %lld must be >= 1 and seq "
                         "%lld >= 0",
                         (long long)o.batch, (long long)o.seq);
  if (!sh->rank_state)
    return tpx_error_set(err, TPX_INTERNAL,
                         "tpx_memory_ranks: the sharding has no state bytes");
  int64_t act = 0;
  if (o.seq > 0) {
    tpx__act_dims d;
    tpx_status st = tpx__act_dims_read(sh, &o, &d, err);
    if (st != TPX_OK)
      return st;
    act = tpx__act_bytes(&d, o.activation_checkpointing);
  }
  int64_t dispatch = 0, saved = 0, unused = 0;
  tpx_status est = tpx__ep_costs(sh, &o, &dispatch, &saved, &unused, err);
  if (est != TPX_OK)
    return est;
  act = tpx__sat_add(act, tpx__sat_add(dispatch, saved));
  int64_t states = opt_states(o.optimizer);
  size_t stride = tpx__memory_out_size(opts);
  for (size_t i = 0; i < count; i++) {
    int64_t r = first + (int64_t)i;
    const int64_t *rs = &sh->rank_state[(size_t)r * TPX__STATE_TERMS];
    tpx_memory whole, *m = &whole;
    m->params = rs[TPX__STATE_PARAM_BYTES];
    m->grads = rs[TPX__STATE_GRAD_BYTES];
    m->master = states ? tpx__sat_mul(4, rs[TPX__STATE_LOWP_NUMEL]) : 0;
    m->optimizer = tpx__sat_add(
        tpx__sat_mul(4 * states, rs[TPX__STATE_FLOAT_NUMEL]), m->master);
    m->optimizer_torch = torch_optimizer(o.optimizer, rs);
    m->gather_peak = sh->num_units ? sh->rank_peak[r] - sh->rank_bytes[r] : 0;
    m->activations = act;
    m->moe_dispatch = dispatch;
    m->peak =
        tpx__sat_add(tpx__sat_add(tpx__sat_add(m->params, m->grads),
                                  tpx__sat_add(m->optimizer, m->gather_peak)),
                     act);
    /* CPUOffloadPolicy: the sharded state stays on the host; the device
     * holds what is gathered for compute and the activations. */
    if (o.offload) {
      m->host = tpx__sat_add(tpx__sat_add(m->params, m->grads), m->optimizer);
      m->device = tpx__sat_add(m->gather_peak, act);
    } else {
      m->host = 0;
      m->device = m->peak;
    }
    memcpy((char *)out + i * stride, m, stride);
  }
  return TPX_OK;
}

tpx_status tpx_memory_rank(const tpx_sharding *sh,
                           const tpx_memory_options *opts, int64_t rank,
                           tpx_memory *out, tpx_error *err) {
  return tpx_memory_ranks(sh, opts, rank, 1, out, err);
}
