/* test_moe_clock.c — the MoE dispatch's time in tpx_mesh_comm_time
 * (tpx/comm.h, tpx/runtime_moe.h), on 2 local threads over a mesh ("ep")
 * of size 2: zero at first and after plain collectives, the router (local),
 * a dispatch at ep 1 and one over an ep comm of the caller's own; one
 * dispatch, combine, combine backward and dispatch backward over the mesh
 * comm's ep dim add 4 calls and time to moe_seconds (and to the totals); a
 * tpx_comm_time of the first version (ending at `calls`) is filled up to
 * there. The runtime's own ep comm: test_rt_ep.c. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/tpx.h"

enum { E = 4, K = 2, H = 3, N = 3 };

static tpx_comm_time now(tpx_mesh_comm *mc) {
  tpx_comm_time t = TPX_COMM_TIME_INIT;
  ck_assert_int_eq(tpx_mesh_comm_time(mc, &t, NULL), TPX_OK);
  ck_assert(t.seconds ==
            t.tp_seconds + t.cp_seconds + t.runtime_seconds + t.moe_seconds);
  return t;
}

/* One layer's dispatch and its three other calls over ep (NULL: ep 1). */
static tpx_status layer(tpx_comm *ep, tpx_error *err) {
  tpx_moe_dispatch_options o = TPX_MOE_DISPATCH_OPTIONS_INIT;
  o.ep = ep;
  o.experts = E;
  o.top_k = K;
  o.hidden = H;
  float x[N * H], w[N * K], out[N * H], dx[N * H], dw[N * K];
  int32_t ex[N * K];
  for (int i = 0; i < N * H; i++) x[i] = (float)i;
  for (int t = 0; t < N; t++)
    for (int j = 0; j < K; j++) {
      ex[t * K + j] = (int32_t)((t + j) % E);
      w[t * K + j] = 0.5f;
    }
  tpx_moe_dispatch *d = NULL;
  tpx_status st = tpx_moe_dispatch_create(&o, x, ex, w, N, &d, err);
  int64_t m = 0;
  const float *rows = st ? NULL : tpx_moe_dispatch_rows(d, &m, NULL);
  float *y = calloc((size_t)(m * H + 1), sizeof(float));
  float *dy = calloc((size_t)(m * H + 1), sizeof(float));
  if (st == TPX_OK && m)
    memcpy(y, rows, sizeof(float) * (size_t)(m * H));
  if (st == TPX_OK)
    st = tpx_moe_combine(d, y, out, err);
  if (st == TPX_OK)
    st = tpx_moe_combine_backward(d, out, y, dy, dw, err);
  if (st == TPX_OK)
    st = tpx_moe_dispatch_backward(d, dy, dx, err);
  tpx_moe_dispatch_destroy(d);
  free(y);
  free(dy);
  return st;
}

typedef struct cx {
  tpx_mesh *mesh;
} cx;

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  cx *x = arg;
  tpx_mesh_comm *mc = NULL;
  ck_assert_int_eq(tpx_mesh_comm_create(world, x->mesh, &mc, err), TPX_OK);
  tpx_comm *ep = tpx_mesh_comm_dim(mc, 0);
  tpx_comm_time t = now(mc);
  ck_assert(t.seconds == 0.0 && t.calls == 0 && t.moe_seconds == 0.0 &&
            t.moe_calls == 0);
  /* no dispatch: nothing */
  double v = 1.0;
  ck_assert_int_eq(
      tpx_comm_all_reduce(ep, &v, &v, 1, TPX_DTYPE_F64, TPX_REDUCE_SUM, err),
      TPX_OK);
  tpx_moe_router_options ro = TPX_MOE_ROUTER_OPTIONS_INIT;
  ro.experts = E;
  ro.top_k = K;
  float lg[E] = {1, 2, 3, 4}, wt[K], pr[E];
  int32_t ch[K];
  ck_assert_int_eq(tpx_moe_route(&ro, lg, NULL, 1, ch, wt, pr, err), TPX_OK);
  ck_assert_int_eq(layer(NULL, err), TPX_OK); /* ep 1: no collective */
  tpx_comm *own = NULL; /* a comm of the caller's own: no clock */
  ck_assert_int_eq(tpx_comm_split_mesh_dim(world, x->mesh, "ep", &own, err),
                   TPX_OK);
  ck_assert_int_eq(layer(own, err), TPX_OK);
  tpx_comm_destroy(own);
  t = now(mc);
  ck_assert(t.seconds == 0.0 && t.calls == 0 && t.moe_calls == 0 &&
            t.moe_seconds == 0.0);

  /* over mc's ep dim: the four collective calls */
  ck_assert_int_eq(layer(ep, err), TPX_OK);
  t = now(mc);
  ck_assert_int_eq(t.moe_calls, 4);
  ck_assert_int_eq(t.calls, 4);
  ck_assert(t.moe_seconds > 0.0 && t.tp_seconds == 0.0 && t.cp_seconds == 0.0 &&
            t.runtime_seconds == 0.0);

  /* the first version of the struct: filled up to `calls`, no further */
  tpx_comm_time old;
  memset(&old, 0, sizeof old);
  old.struct_size = offsetof(tpx_comm_time, calls) + sizeof(int64_t);
  old.moe_seconds = -1.0;
  old.moe_calls = -1;
  ck_assert_int_eq(tpx_mesh_comm_time(mc, &old, err), TPX_OK);
  ck_assert(old.seconds == t.seconds && old.calls == 4);
  ck_assert(old.moe_seconds == -1.0 && old.moe_calls == -1);
  old.struct_size -= 1;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_mesh_comm_time(mc, &old, &e), TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e.message, "TPX_COMM_TIME_INIT"), "%s", e.message);
  tpx_mesh_comm_destroy(mc);
  return TPX_OK;
}

START_TEST(moe_time) {
  const char *names[1] = {"ep"};
  int64_t sizes[1] = {2};
  cx x = {NULL};
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 1, &x.mesh, NULL), TPX_OK);
  tpx_error e = {0};
  tpx_status st = tpx_local_run(2, body, &x, &e);
  ck_assert_msg(st == TPX_OK, "%s", e.message);
  tpx_mesh_destroy(x.mesh);
}
END_TEST

int main(void) {
  Suite *s = suite_create("moe_clock");
  TCase *tc = tcase_create("clock");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, moe_time);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
