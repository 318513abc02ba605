/* plugin/call_result.c — the helpers of one call's data (tpx__call,
 * plugin_view.h): the string lists results come back in, the release of
 * what a call still holds, and the entry point each op calls. Shared by
 * the call itself (call.c), the host table that fills a ctx (host.c) and
 * the isolation protocol that carries results back from a child
 * (isolate.c), so none of them reaches into another for these. */
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "plugin/plugin_internal.h"

int tpx__strvec_push(tpx__strvec *v, const char *s, int value) {
  if (v->count == v->cap) {
    /* Two parallel arrays: grow both, then publish the one capacity. */
    size_t cap = v->cap, cap_ints = v->cap;
    if (TPX_GROW(v->items, cap, v->count + 1, 8) != 0 ||
        TPX_GROW(v->ints, cap_ints, v->count + 1, 8) != 0)
      return -1;
    v->cap = cap;
  }
  char *copy = strdup(s);
  if (!copy)
    return -1;
  v->items[v->count] = copy;
  v->ints[v->count] = value;
  v->count++;
  return 0;
}

void tpx__strvec_free(tpx__strvec *v) {
  for (size_t i = 0; i < v->count; i++) free(v->items[i]);
  free(v->items);
  free(v->ints);
  memset(v, 0, sizeof *v);
}

void tpx__call_release(tpx__call *c) {
  tpx_plan_destroy(c->plan);
  c->plan = NULL;
  free(c->function);
  c->function = NULL;
  tpx_model_destroy(c->skeleton);
  c->skeleton = NULL;
  tpx__strvec_free(&c->strings);
}

const char *tpx__plugin_op_symbol(tpx__plugin_op op) {
  switch (op) {
  case TPX__OP_GET_PLAN: return "get_plan";
  case TPX__OP_SKELETON: return TPX_PLUGIN_SKELETON_SYMBOL;
  case TPX__OP_VALIDATE: return TPX_PLUGIN_VALIDATE_SYMBOL;
  case TPX__OP_FSDP_UNITS: return TPX_PLUGIN_FSDP_UNITS_SYMBOL;
  case TPX__OP_FP32: return TPX_PLUGIN_FP32_PARAMS_SYMBOL;
  case TPX__OP_STRATEGY: return TPX_PLUGIN_STRATEGY_SYMBOL;
  }
  return "?";
}
