/* test_moe_dispatch.c — the MoE token dispatch and combine over ep
 * (tpx/runtime_moe.h) on local threads at ep 1, 2 and 4, both dispatchers,
 * tokens spread unevenly over the ranks (one rank with none), on host
 * memory and in the sim memory space (the calls never read a buffer on the
 * host). A toy expert, y = row · (e + 1) for global expert e, makes every
 * result known here: each rank's expert rows (the tokens routed to its
 * experts, by expert then token), the combined output, and the backward
 * (combine's dy and dweights, dispatch's dx) against sums taken here in
 * double; every run bit for bit equal to the ep-1 all-gather run; ep as
 * one dim of a dp 2 x ep 2 mesh (two groups side by side), on host memory
 * and in the sim space too. With TPX_TEST_DEVICE=cuda (tools/gpu-check.sh's
 * cuda-suites) the sim runs are CUDA device-memory runs instead. Bad
 * options and an expert index out of range are refused, naming them.
 * Built with MOE_MPI: the cases of the world's size on the mpi backend
 * (a singleton, and mpirun -np 4). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/local_test.h"
#include "tpx/tpx.h"

enum { E = 8, K = 3, H = 5, N = 11 };

/* The global tokens and their routing (distinct experts per token). */
typedef struct world_data {
  float x[N * H], w[N * K], dout[N * H];
  int32_t ex[N * K];
} world_data;

static void make_data(world_data *g) {
  unsigned s = 2024u;
#define RND()                                                                  \
  (s = s * 1103515245u + 12345u, (float)((s >> 8) % 2001) / 1000.0f - 1.0f)
  for (int i = 0; i < N * H; i++) g->x[i] = RND();
  for (int i = 0; i < N * H; i++) g->dout[i] = RND();
  for (int t = 0; t < N; t++)
    for (int j = 0; j < K; j++) {
      int32_t e;
      int dup;
      do {
        s = s * 1103515245u + 12345u;
        e = (int32_t)((s >> 8) % E);
        dup = 0;
        for (int i = 0; i < j; i++) dup |= g->ex[t * K + i] == e;
      } while (dup);
      g->ex[t * K + j] = e;
      g->w[t * K + j] = 0.5f * RND() + 0.6f;
    }
#undef RND
}

typedef struct ep_case {
  int P;
  tpx_moe_dispatcher kind;
  int64_t counts[4];
} ep_case;

static const ep_case ep_cases[] = {
    {1, TPX_MOE_ALL_GATHER, {N}},
    {1, TPX_MOE_ALL_TO_ALL, {N}},
    {2, TPX_MOE_ALL_GATHER, {4, 7}},
    {2, TPX_MOE_ALL_TO_ALL, {4, 7}},
    {2, TPX_MOE_ALL_GATHER, {N, 0}},
    {2, TPX_MOE_ALL_TO_ALL, {0, N}},
    {4, TPX_MOE_ALL_GATHER, {3, 0, 6, 2}},
    {4, TPX_MOE_ALL_TO_ALL, {3, 0, 6, 2}},
    {4, TPX_MOE_ALL_TO_ALL, {0, 0, 0, N}},
};

typedef struct run_arg {
  const ep_case *c;
  const world_data *g;
  int sim;
  int with_comm; /* ep 1 through the world rather than NULL */
  float out[N * H], dx[N * H], dweights[N * K];
} run_arg;

/* A buffer of the world's memory space holding src (or zeros). */
static void *dev(int sim, const void *src, size_t bytes) {
  if (sim)
    return tpx__test_dev_alloc(src, bytes);
  void *p = calloc(1, bytes ? bytes : 1);
  if (src && bytes)
    memcpy(p, src, bytes);
  return p;
}
static const void *host(int sim, const void *p) {
  return sim ? tpx__test_dev_host(p) : p;
}
static void dev_free(int sim, void *p) {
  if (sim)
    tpx__test_dev_free(p);
  else
    free(p);
}

/* Rank r's expert rows: for each local expert, the tokens routed to it in
 * global order. */
static tpx_status check_rows(const run_arg *a, int r, const float *rows,
                             int64_t m, const int64_t *off, tpx_error *err) {
  int64_t El = E / a->c->P, row = 0;
  for (int64_t el = 0; el < El; el++) {
    int32_t ge = (int32_t)(r * El + el);
    if (off[el] != row)
      return tpx_error_set(err, TPX_INTERNAL, "offsets[%lld] = %lld, want %lld",
                           (long long)el, (long long)off[el], (long long)row);
    for (int t = 0; t < N; t++)
      for (int j = 0; j < K; j++)
        if (a->g->ex[t * K + j] == ge) {
          if (row >= m ||
              memcmp(rows + row * H, a->g->x + t * H, sizeof(float) * H))
            return tpx_error_set(err, TPX_INTERNAL,
                                 "rank %d row %lld is not token %d", r,
                                 (long long)row, t);
          row++;
        }
  }
  if (row != m || off[El] != m)
    return tpx_error_set(err, TPX_INTERNAL, "rank %d: m %lld, want %lld", r,
                         (long long)m, (long long)row);
  return TPX_OK;
}

static tpx_status run_body(tpx_comm *world, void *arg, tpx_error *err) {
  run_arg *a = arg;
  int r = tpx_comm_rank(world), sim = a->sim;
  int64_t lo = 0, n = a->c->counts[r], El = E / a->c->P;
  for (int i = 0; i < r; i++) lo += a->c->counts[i];
  tpx_moe_dispatch_options o = TPX_MOE_DISPATCH_OPTIONS_INIT;
  o.ep =
      a->c->P > 1 || sim || a->with_comm ? world : NULL; /* NULL: host memory */
  o.experts = E;
  o.top_k = K;
  o.hidden = H;
  o.kind = a->c->kind;
  size_t nh = sizeof(float) * (size_t)(n * H), nk = (size_t)(n * K);
  float *x = dev(sim, a->g->x + lo * H, nh);
  int32_t *ex = dev(sim, a->g->ex + lo * K, nk * sizeof(int32_t));
  float *w = dev(sim, a->g->w + lo * K, nk * sizeof(float));
  float *dout = dev(sim, a->g->dout + lo * H, nh);
  float *out = dev(sim, NULL, nh), *dx = dev(sim, NULL, nh);
  float *dwt = dev(sim, NULL, nk * sizeof(float));
  float *y = NULL, *dy = NULL, *dxr = NULL;
  tpx_moe_dispatch *d = NULL;
  tpx_status st = tpx_moe_dispatch_create(&o, x, ex, w, n, &d, err);
  int64_t m = 0;
  const int64_t *off = NULL;
  const float *rows = st ? NULL : tpx_moe_dispatch_rows(d, &m, &off);
  if (st == TPX_OK)
    st = check_rows(a, r, host(sim, rows), m, off, err);
  size_t mh = sizeof(float) * (size_t)(m * H);
  float *yh = calloc(1, mh + 1), *dxrh = calloc(1, mh + 1);
  /* the toy expert: y = row · (e + 1); its backward dx = dy · (e + 1) */
  for (int64_t el = 0; st == TPX_OK && el < El; el++)
    for (int64_t i = off[el] * H; i < off[el + 1] * H; i++)
      yh[i] = ((const float *)host(sim, rows))[i] * (float)(r * El + el + 1);
  y = dev(sim, yh, mh);
  dy = dev(sim, NULL, mh);
  if (st == TPX_OK)
    st = tpx_moe_combine(d, y, out, err);
  if (st == TPX_OK)
    st = tpx_moe_combine_backward(d, dout, y, dy, dwt, err);
  for (int64_t el = 0; st == TPX_OK && el < El; el++)
    for (int64_t i = off[el] * H; i < off[el + 1] * H; i++)
      dxrh[i] = ((const float *)host(sim, dy))[i] * (float)(r * El + el + 1);
  dxr = dev(sim, dxrh, mh);
  if (st == TPX_OK)
    st = tpx_moe_dispatch_backward(d, dxr, dx, err);
  if (st == TPX_OK && tpx_moe_dispatch_bytes(d) < mh)
    st = tpx_error_set(err, TPX_INTERNAL, "bytes %zu < the rows' %zu",
                       tpx_moe_dispatch_bytes(d), mh);
  if (st == TPX_OK) {
    memcpy(a->out + lo * H, host(sim, out), nh);
    memcpy(a->dx + lo * H, host(sim, dx), nh);
    memcpy(a->dweights + lo * K, host(sim, dwt), nk * sizeof(float));
  }
  tpx_moe_dispatch_destroy(d);
  float *bufs[] = {x, (float *)ex, w, dout, out, dx, dwt, y, dy, dxr};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    dev_free(sim, bufs[i]);
  free(yh);
  free(dxrh);
  return st;
}

/* The ep-1 all-gather run on host memory: every other run equals it. */
static run_arg *reference(const world_data *g) {
  static const ep_case one = {1, TPX_MOE_ALL_GATHER, {N}};
  run_arg *a = calloc(1, sizeof *a);
  a->c = &one;
  a->g = g;
  tpx_error e = {0};
  ck_assert_msg(tpx_local_run(1, run_body, a, &e) == TPX_OK, "%s", e.message);
  return a;
}

#define CLOSE(a, b)                                                            \
  ck_assert_msg(fabs((double)(a) - (b)) <= 1e-6 * (1 + fabs(b)),               \
                "%s: %.9g vs %.9g", #a, (double)(a), (double)(b))

START_TEST(test_ep) {
  world_data g;
  make_data(&g);
  run_arg *ref = reference(&g);
  /* the reference against sums in double */
  for (int t = 0; t < N; t++)
    for (int h = 0; h < H; h++) {
      double o = 0, dx = 0;
      for (int j = 0; j < K; j++) {
        int e = g.ex[t * K + j];
        float y = g.x[t * H + h] * (float)(e + 1);
        o += (double)g.w[t * K + j] * y;
        dx += (double)(g.w[t * K + j] * g.dout[t * H + h]) * (e + 1);
      }
      CLOSE(ref->out[t * H + h], o);
      CLOSE(ref->dx[t * H + h], dx);
    }
  for (int t = 0; t < N; t++)
    for (int j = 0; j < K; j++) {
      double dw = 0;
      int e = g.ex[t * K + j];
      for (int h = 0; h < H; h++)
        dw += (double)g.dout[t * H + h] * (g.x[t * H + h] * (float)(e + 1));
      CLOSE(ref->dweights[t * K + j], dw);
    }
  const ep_case *c = &ep_cases[_i];
  for (int sim = 0; sim < 2; sim++) {
    run_arg *a = calloc(1, sizeof *a);
    a->c = c;
    a->g = &g;
    a->sim = sim;
    tpx_error e = {0};
    ck_assert_msg(tpx__local_run_sim(c->P, sim, run_body, a, &e) == TPX_OK,
                  "ep %d %s%s%s: %s", c->P, tpx_moe_dispatcher_name(c->kind),
                  sim ? " in " : "", sim ? tpx__test_device_name() : "",
                  e.message);
    ck_assert_msg(!memcmp(a->out, ref->out, sizeof a->out), "out, case %d", _i);
    ck_assert_msg(!memcmp(a->dx, ref->dx, sizeof a->dx), "dx, case %d", _i);
    ck_assert_msg(!memcmp(a->dweights, ref->dweights, sizeof a->dweights),
                  "dweights, case %d", _i);
    free(a);
  }
  free(ref);
}
END_TEST

/* ---- ep as one dim of a mesh: world 4 = dp 2 x ep 2, two ep groups
 * side by side, each the ep-2 case on its own ---- */

typedef struct sub_arg {
  const tpx_mesh *mesh;
  run_arg runs[2]; /* by dp index */
} sub_arg;

static tpx_status sub_body(tpx_comm *world, void *arg, tpx_error *err) {
  sub_arg *a = arg;
  tpx_comm *ep = NULL;
  tpx_status st = tpx_comm_split_mesh_dim(world, a->mesh, "ep", &ep, err);
  if (st == TPX_OK)
    st = run_body(ep, &a->runs[tpx_comm_rank(world) / 2], err);
  tpx_comm_destroy(ep);
  return st;
}

/* _i = 1: the world (so the ep comms split from it) in the tests' device
 * memory, the sim space or CUDA (TPX_TEST_DEVICE=cuda, tools/gpu-check.sh) */
START_TEST(test_mesh_dim) {
  world_data g;
  make_data(&g);
  run_arg *ref = reference(&g);
  const char *names[2] = {"dp", "ep"};
  int64_t sizes[2] = {2, 2};
  sub_arg *a = calloc(1, sizeof *a);
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, &mesh, NULL), TPX_OK);
  a->mesh = mesh;
  for (int i = 0; i < 2; i++) {
    a->runs[i].c = &ep_cases[2 + i]; /* ep 2, 4 + 7 tokens, both kinds */
    a->runs[i].g = &g;
    a->runs[i].sim = _i;
  }
  tpx_error e = {0};
  ck_assert_msg(tpx__local_run_sim(4, _i, sub_body, a, &e) == TPX_OK,
                "dp 2 x ep 2%s%s: %s", _i ? " in " : "",
                _i ? tpx__test_device_name() : "", e.message);
  for (int i = 0; i < 2; i++) {
    ck_assert(!memcmp(a->runs[i].out, ref->out, sizeof ref->out));
    ck_assert(!memcmp(a->runs[i].dx, ref->dx, sizeof ref->dx));
    ck_assert(
        !memcmp(a->runs[i].dweights, ref->dweights, sizeof ref->dweights));
  }
  tpx_mesh_destroy(mesh);
  free(a);
  free(ref);
}
END_TEST

/* ---- refusals ---- */

typedef struct bad_arg {
  int64_t experts, top_k, hidden;
  int kind;
  int bad_rank; /* this rank routes a token to expert E */
} bad_arg;

static tpx_status bad_body(tpx_comm *world, void *arg, tpx_error *err) {
  const bad_arg *b = arg;
  tpx_moe_dispatch_options o = TPX_MOE_DISPATCH_OPTIONS_INIT;
  o.ep = world;
  o.experts = b->experts;
  o.top_k = b->top_k;
  o.hidden = b->hidden;
  o.kind = (tpx_moe_dispatcher)b->kind;
  float x[4] = {0}, w[2] = {1, 1};
  int32_t ex[2] = {0, tpx_comm_rank(world) == b->bad_rank ? (int32_t)E : 1};
  tpx_moe_dispatch *d = NULL;
  tpx_status st = tpx_moe_dispatch_create(&o, x, ex, w, 1, &d, err);
  tpx_moe_dispatch_destroy(d);
  return st;
}

static void bad(int P, bad_arg b, const char *what) {
  tpx_error e = {0};
  ck_assert_int_ne(tpx_local_run(P, bad_body, &b, &e), TPX_OK);
  ck_assert_msg(strstr(e.message, what), "want '%s' in: %s", what, e.message);
}

START_TEST(test_refused) {
  bad(2, (bad_arg){E, 2, 2, 0, 0}, "experts[0, 1] = 8 is not an expert");
  /* the peer of the bad rank (rank 0's message is the one returned) */
  bad(2, (bad_arg){E, 2, 2, 1, 1}, "rank 1 of the ep group refused its input");
  bad(2, (bad_arg){3, 2, 2, 0, -1},
      "experts 3 are not divisible by the ep "
      "group's size 2");
  bad(1, (bad_arg){E, 0, 2, 0, -1}, "top_k 0 is not in 1..experts (8)");
  bad(1, (bad_arg){E, 2, 0, 0, -1}, "hidden 0");
  bad(1, (bad_arg){0, 2, 2, 0, -1}, "experts 0");
  bad(1, (bad_arg){E, 2, 2, 5, -1}, "dispatcher 5");
  tpx_error e = {0};
  tpx_moe_dispatcher k;
  ck_assert_int_eq(tpx_moe_dispatcher_parse("all-to-all", &k, NULL), TPX_OK);
  ck_assert_int_eq(k, TPX_MOE_ALL_TO_ALL);
  ck_assert_str_eq(tpx_moe_dispatcher_name(TPX_MOE_ALL_GATHER), "all-gather");
  ck_assert_ptr_null(tpx_moe_dispatcher_name((tpx_moe_dispatcher)3));
  ck_assert_int_eq(tpx_moe_dispatcher_parse("ring", &k, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "'ring' is not one of all-gather, "
                                          "all-to-all"));
  ck_assert_int_eq(tpx_moe_combine(NULL, NULL, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_moe_dispatch_bytes(NULL), 0);
}
END_TEST

#ifdef MOE_MPI
/* ---- the mpi backend: the cases of the world's size, one rank a process,
 * each rank's tokens against the ep-1 run on threads ---- */
#include "../mpi_verdict.h"

static tpx_comm *mpi_world;

START_TEST(test_mpi) {
  world_data g;
  make_data(&g);
  run_arg *ref = reference(&g);
  int P = tpx_comm_size(mpi_world), r = tpx_comm_rank(mpi_world), ran = 0;
  for (size_t i = 0; i < sizeof ep_cases / sizeof *ep_cases; i++) {
    const ep_case *c = &ep_cases[i];
    if (c->P != P)
      continue;
    run_arg *a = calloc(1, sizeof *a);
    a->c = c;
    a->g = &g;
    a->with_comm = 1;
    char name[64];
    snprintf(name, sizeof name, "ep %d %s", P,
             tpx_moe_dispatcher_name(c->kind));
    mpi_run_agreed(mpi_world, run_body, a, name);
    int64_t lo = 0;
    for (int q = 0; q < r; q++) lo += c->counts[q];
    size_t nh = sizeof(float) * (size_t)(c->counts[r] * H);
    int32_t bad = memcmp(a->out + lo * H, ref->out + lo * H, nh) ||
                  memcmp(a->dx + lo * H, ref->dx + lo * H, nh) ||
                  memcmp(a->dweights + lo * K, ref->dweights + lo * K,
                         sizeof(float) * (size_t)(c->counts[r] * K));
    int32_t nbad = 0;
    ck_assert_int_eq(tpx_comm_all_reduce(mpi_world, &bad, &nbad, 1,
                                         TPX_DTYPE_I32, TPX_REDUCE_SUM, NULL),
                     TPX_OK);
    ck_assert_msg(nbad == 0, "%s: %d rank(s) differ from ep 1", name, nbad);
    free(a);
    ran++;
  }
  ck_assert_msg(ran > 0, "no case for world size %d", P);
  free(ref);
}
END_TEST

int main(void) {
  tpx_error e = {0};
  if (tpx_comm_create_mpi(NULL, &mpi_world, &e) != TPX_OK) {
    fprintf(stderr, "test_moe_dispatch_mpi: %s\n", e.message);
    return EXIT_FAILURE;
  }
  Suite *s = suite_create("runtime_moe_dispatch_mpi");
  TCase *tc = tcase_create("mpi");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_mpi);
  (void)test_ep; /* the thread cases: the plain build's */
  (void)test_refused;
  (void)test_mesh_dim;
  suite_add_tcase(s, tc);
  return mpi_run_suite(s, mpi_world);
}
#else
static Suite *suite(void) {
  Suite *s = suite_create("runtime_moe_dispatch");
  TCase *tc = tcase_create("dispatch");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_ep, 0,
                      (int)(sizeof ep_cases / sizeof *ep_cases));
  tcase_add_loop_test(tc, test_mesh_dim, 0, 2);
  tcase_add_test(tc, test_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
#endif
