/* cmd_plan_cp.c — the context-parallel checks of `tpx plan` that need the
 * command line's memory options, not only the mesh: the sequence length
 * the load balancer can cut (docs/SEMANTICS.md "Context parallelism"). The
 * mesh's own cp diagnostics come from the sharding (core/src/shard). */
#include <stdio.h>

#include "plan_extra.h"
#include "plan_setup.h"

int plan_cp_diags(const struct tpx_cli_plan_args *pa, const plan_extra *x,
                  tpx_diag_list *diags) {
  int64_t cp = pa->cp > 1 ? pa->cp : 1;
  if (cp == 1 || !x->seq_given || x->mem.seq % (2 * cp) == 0)
    return 0;
  /* Causal load balancing cuts every sequence into 2 cp chunks (rank i
   * holds chunks i and 2 cp - 1 - i); upstream raises otherwise. */
  int64_t up = (x->mem.seq + 2 * cp - 1) / (2 * cp) * (2 * cp);
  char fix[160];
  snprintf(fix, sizeof fix,
           "pad the sequences to a multiple of 2 x cp (--seq %lld) or "
           "choose a cp with 2 x cp dividing --seq",
           (long long)up);
  tpx_status st = tpx_diag_add(
      diags, TPX_DIAG_ERROR, "cp-seq-indivisible", "seq", fix,
      "--seq %lld is not divisible by 2 x cp = %lld: the causal load "
      "balancer cuts every sequence into 2 x cp chunks, and upstream "
      "refuses this length",
      (long long)x->mem.seq, (long long)(2 * cp));
  return st == TPX_OK ? 0 : -1;
}
