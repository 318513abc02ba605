/* tpxp_heads.h — head-count refusal helpers, header only (no change to the
 * helper library's build). Used only where a refusal IS upstream: the
 * Gemma4 strategy, which rejects head counts tp does not divide before the
 * Default flow (docs/SEMANTICS.md "Plan selection"). Plan functions must
 * not use it: upstream's never look at tp, and validate_tp_mesh is the host's
 * diagnostic (heads-not-divisible, for every plan source). Includes only
 * tpxp_common.h. */
#ifndef TPXP_HEADS_H
#define TPXP_HEADS_H

#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

/* gcd of |a| and |b| in unsigned arithmetic (no overflow on INT64_MIN),
 * clamped to INT64_MAX. */
static inline int64_t tpxp_gcd(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0u - (uint64_t)a : (uint64_t)a;
  uint64_t y = b < 0 ? 0u - (uint64_t)b : (uint64_t)b;
  while (y != 0) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)x;
}

/* Write the tp sizes dividing both counts ("1, 2, 4") into buf. A count of
 * 0 (attribute absent upstream) divides by anything. */
static inline const char *tpxp_valid_tp_sizes(char *buf, size_t size,
                                              int64_t heads, int64_t kv) {
  int64_t g = tpxp_gcd(heads, kv), d;
  buf[0] = '\0';
  /* Bounded like the host's list: no tp beyond 2^24 ranks is listed. */
  for (d = 1; g > 0 && d <= g && d <= ((int64_t)1 << 24); d++)
    if (g % d == 0) {
      size_t len = strlen(buf);
      snprintf(buf + len, size > len ? size - len : 0, "%s%lld",
               len ? ", " : "", (long long)d);
    }
  if (buf[0] == '\0')
    snprintf(buf, size, "any");
  return buf;
}

/* TPX_PLUGIN_OK when tp <= 1 or tp divides both counts; else
 * TPX_PLUGIN_REFUSED with upstream's assertion text (num_key_value_heads is
 * checked first), the counts and the tp sizes that would work. */
static inline int tpxp_refuse_heads(const tpx_plugin_host *host,
                                    tpx_plugin_ctx *ctx, int64_t heads,
                                    int64_t kv, int64_t tp) {
  char valid[160];
  const char *what;
  int64_t n;
  if (tp <= 1)
    return TPX_PLUGIN_OK;
  if (kv % tp != 0) {
    what = "num_key_value_heads";
    n = kv;
  } else if (heads % tp != 0) {
    what = "num_attention_heads";
    n = heads;
  } else {
    return TPX_PLUGIN_OK;
  }
  return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                   "%s (%lld) must be divisible by TP size (%lld) "
                   "(num_attention_heads=%lld, num_key_value_heads=%lld); "
                   "valid tp sizes: %s",
                   what, (long long)n, (long long)tp, (long long)heads,
                   (long long)kv,
                   tpxp_valid_tp_sizes(valid, sizeof valid, heads, kv));
}

#endif /* TPXP_HEADS_H */
