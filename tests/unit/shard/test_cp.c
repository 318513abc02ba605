/* test_cp.c — the context-parallel mesh (dp_replicate, dp_shard, cp, tp):
 * rank numbering, the flattened dp_shard_cp / dp_cp / dp groups, the Joined
 * placement, and FSDP over dp_shard_cp, every slice and per-rank byte
 * checked against torch.chunk arithmetic written out by hand here
 * (core/src/base/layout.c, core/src/shard/fsdp.c, docs/SEMANTICS.md
 * "Context parallelism"). */
#include <stddef.h>

#include "shard_fixture.h"
#include "tpx/memory.h"

/* torch.chunk by hand: n over w pieces, piece i. */
static void hand_chunk(int64_t n, int64_t w, int64_t i, int64_t *off,
                       int64_t *len) {
  int64_t c = (n + w - 1) / w, o = i * c;
  if (o > n)
    o = n;
  *off = o;
  *len = n - o < c ? n - o : c;
}

/* Mesh (dp_replicate, dp_shard, cp, tp) with the three flattened views
 * (cp > 1 here, so the cp dim is always there). */
static tpx_mesh *cp_mesh(int64_t dpr, int64_t dps, int64_t cp, int64_t tp) {
  tpx_mesh *mesh = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_mesh_create_fsdp2(dpr, dps, cp, tp, &mesh, &e) == TPX_OK,
                "%s", e.message);
  ck_assert_int_eq(tpx_mesh_ndim(mesh), 4);
  ck_assert_str_eq(tpx_mesh_dim_name(mesh, 2), "cp");
  return mesh;
}

/* At cp 1 the mesh keeps its three dims and the views span what is left. */
START_TEST(fsdp2_mesh_at_cp1) {
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create_fsdp2(2, 3, 1, 2, &mesh, NULL), TPX_OK);
  ck_assert_int_eq(tpx_mesh_ndim(mesh), 3);
  ck_assert_int_eq(tpx_mesh_dim_index(mesh, "cp"), -1);
  int64_t n = 0;
  ck_assert_int_eq(tpx_mesh_size_of(mesh, "dp_shard_cp", &n, NULL), TPX_OK);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(tpx_mesh_size_of(mesh, "dp_cp", &n, NULL), TPX_OK);
  ck_assert_int_eq(n, 6);
  tpx_mesh_destroy(mesh);
  tpx_error e = {0};
  ck_assert_int_eq(tpx_mesh_create_fsdp2(1, 1, 0, 1, &mesh, &e),
                   TPX_OUT_OF_RANGE);
  ck_assert_ptr_null(mesh);
}
END_TEST

START_TEST(rank_numbering_and_groups) {
  const int64_t D = 2, S = 3, C = 2, T = 2;
  tpx_mesh *mesh = cp_mesh(D, S, C, T);
  ck_assert_int_eq(tpx_mesh_world_size(mesh), D * S * C * T);
  int dims[TPX_MESH_MAX_DIMS], nd = 0;
  ck_assert_int_eq(tpx_mesh_view_dims(mesh, "dp_shard_cp", dims, &nd, NULL),
                   TPX_OK);
  ck_assert_int_eq(nd, 2);
  ck_assert_int_eq(dims[0], 1);
  ck_assert_int_eq(dims[1], 2);
  ck_assert_int_eq(tpx_mesh_view_dims(mesh, "tp", dims, &nd, NULL), TPX_OK);
  ck_assert_int_eq(nd, 1);
  ck_assert_int_eq(dims[0], 3);
  ck_assert_int_eq(tpx_mesh_view_dims(mesh, "nope", dims, &nd, NULL),
                   TPX_NOT_FOUND);
  for (int64_t d = 0; d < D; d++)
    for (int64_t s = 0; s < S; s++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t t = 0; t < T; t++) {
          /* init_device_mesh: row-major, tp fastest. */
          int64_t r = ((d * S + s) * C + c) * T + t, co[4], g[24], idx;
          ck_assert_int_eq(tpx_mesh_coords(mesh, r, co, NULL), TPX_OK);
          ck_assert(co[0] == d && co[1] == s && co[2] == c && co[3] == t);
          ck_assert_int_eq(
              tpx_mesh_group_ranks(mesh, "dp_shard_cp", r, g, &idx, NULL),
              TPX_OK);
          ck_assert_int_eq(idx, s * C + c);
          for (int64_t k = 0; k < S * C; k++)
            ck_assert_int_eq(g[k], ((d * S + k / C) * C + k % C) * T + t);
          ck_assert_int_eq(
              tpx_mesh_group_ranks(mesh, "dp_cp", r, g, &idx, NULL), TPX_OK);
          ck_assert_int_eq(idx, (d * S + s) * C + c);
          for (int64_t k = 0; k < D * S * C; k++)
            ck_assert_int_eq(g[k], k * T + t);
          ck_assert_int_eq(tpx_mesh_group_ranks(mesh, "dp", r, g, &idx, NULL),
                           TPX_OK);
          ck_assert_int_eq(idx, d * S + s);
          for (int64_t k = 0; k < D * S; k++)
            ck_assert_int_eq(g[k], (k * C + c) * T + t);
          ck_assert_int_eq(tpx_mesh_group_ranks(mesh, "cp", r, g, &idx, NULL),
                           TPX_OK);
          ck_assert_int_eq(idx, c);
          for (int64_t k = 0; k < C; k++)
            ck_assert_int_eq(g[k], ((d * S + s) * C + k) * T + t);
        }
  tpx_mesh_destroy(mesh);
}
END_TEST

/* Shard(0) + Joined over (dp_shard 2, cp 2) is one chunk into 4 pieces; 10
 * rows give 3,3,3,1 (a chunk over dp_shard then cp would give 3,2,3,2). */
START_TEST(joined_is_one_flat_chunk) {
  tpx_mesh *mesh = cp_mesh(1, 2, 2, 1);
  tpx_placement pl[4] = {tpx_placement_replicate(), tpx_placement_shard(0),
                         tpx_placement_joined(), tpx_placement_replicate()};
  int64_t shape[2] = {10, 3};
  for (int64_t r = 0; r < 4; r++) {
    tpx_slice s;
    ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, pl, r, &s, NULL),
                     TPX_OK);
    int64_t off, len;
    hand_chunk(10, 4, r, &off, &len);
    ck_assert_int_eq(s.offset[0], off);
    ck_assert_int_eq(s.length[0], len);
    ck_assert_int_eq(s.length[1], 3);
  }
  /* Joined after Replicate splits nothing; Joined first is an error. */
  pl[1] = tpx_placement_replicate();
  tpx_slice s;
  ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, pl, 3, &s, NULL),
                   TPX_OK);
  ck_assert_int_eq(s.length[0], 10);
  tpx_placement bad[4] = {tpx_placement_joined(), tpx_placement_shard(0),
                          tpx_placement_replicate(), tpx_placement_replicate()};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_layout_local_slice(shape, 2, mesh, bad, 0, &s, &e),
                   TPX_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(e.message, "joined"));
  /* Text form round trip. */
  char buf[32];
  tpx_placement p;
  tpx_placement_format(tpx_placement_joined(), buf, sizeof buf);
  ck_assert_str_eq(buf, "joined");
  ck_assert_int_eq(tpx_placement_parse(" Joined ", &p, NULL), TPX_OK);
  ck_assert(tpx_placement_equal(p, tpx_placement_joined()));
  tpx_mesh_destroy(mesh);
}
END_TEST

/* The tensor dim TP splits for a fixture parameter (Llama plan): colwise
 * and the embedding dim 0, rowwise dim 1, norms none. */
static int hand_tp_dim(const char *fqn) {
  if (strstr(fqn, "o_proj") || strstr(fqn, "down_proj"))
    return 1;
  if (strstr(fqn, "norm"))
    return -1;
  return 0;
}

typedef struct {
  int64_t dpr, dps, cp, tp, vocab;
} cp_case;

static const cp_case cp_cases[] = {
    {1, 1, 2, 1, 256}, /* cp2 */
    {1, 2, 2, 1, 250}, /* dp_shard2 x cp2, uneven vocab */
    {1, 3, 2, 1, 256}, /* 6 pieces: 64 rows give 11 x 5 + 9 */
    {2, 2, 2, 2, 250}, /* dp_replicate2 x dp_shard2 x cp2 x tp2 */
    {1, 1, 4, 2, 254},
};

/* Every parameter's slice on every rank, and every rank's bytes, equal
 * TP first, then one torch.chunk of dim 0 over dp_shard*cp at index
 * dp_shard_idx*cp + cp_idx. */
START_TEST(fsdp_over_dp_shard_cp) {
  const cp_case *k = &cp_cases[_i];
  fx_opts fo = {k->vocab, 0, 0, 0, NULL};
  tpx_model *m = fx_model(&fo);
  tpx_plan *plan = fx_llama_plan();
  tpx_mesh *mesh = cp_mesh(k->dpr, k->dps, k->cp, k->tp);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.dp_shard_dim = "dp_shard_cp";
  tpx_sharding *sh = fx_shard(m, plan, mesh, &so);
  int64_t size = 0;
  ck_assert_str_eq(tpx_sharding_fsdp_mesh_name(sh, &size), "dp_shard_cp");
  ck_assert_int_eq(size, k->dps * k->cp);
  ck_assert_int_eq(tpx_sharding_cp_size(sh), k->cp);
  int64_t world = tpx_mesh_world_size(mesh), flat = k->dps * k->cp;
  for (int64_t r = 0; r < world; r++) {
    int64_t co[4], bytes = 0;
    ck_assert_int_eq(tpx_mesh_coords(mesh, r, co, NULL), TPX_OK);
    for (size_t p = 0; p < tpx_model_num_params(m); p++) {
      tpx_param_info pi;
      ck_assert_int_eq(tpx_model_param(m, (int64_t)p, &pi, NULL), TPX_OK);
      int64_t off[2] = {0, 0},
              len[2] = {pi.shape[0], pi.ndim > 1 ? pi.shape[1] : 1};
      int td = k->tp > 1 ? hand_tp_dim(pi.fqn) : -1;
      if (td >= 0)
        hand_chunk(pi.shape[td], k->tp, co[3], &off[td], &len[td]);
      int64_t o, l;
      hand_chunk(len[0], flat, co[1] * k->cp + co[2], &o, &l);
      off[0] += o;
      len[0] = l;
      tpx_slice s;
      ck_assert_int_eq(tpx_sharding_local_slice(sh, (int64_t)p, r, &s, NULL),
                       TPX_OK);
      for (int d = 0; d < pi.ndim; d++)
        ck_assert_msg(s.offset[d] == off[d] && s.length[d] == len[d],
                      "case %d rank %lld %s dim %d: [%lld,+%lld) want "
                      "[%lld,+%lld)",
                      _i, (long long)r, pi.fqn, d, (long long)s.offset[d],
                      (long long)s.length[d], (long long)off[d],
                      (long long)len[d]);
      bytes += len[0] * len[1] * 2; /* bf16 */
    }
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(sh, r), bytes);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
}
END_TEST

/* The placements say it: Shard(0) (StridedShard(0, tp) under a colwise TP
 * split) on dp_shard, Joined on cp; a view over non-adjacent dims is
 * refused, and FSDP over plain dp_shard leaves cp replicated. */
START_TEST(placements_and_refusals) {
  tpx_model *m = fx_llama();
  tpx_plan *plan = fx_llama_plan();
  tpx_mesh *mesh = cp_mesh(1, 2, 2, 2);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.dp_shard_dim = "dp_shard_cp";
  tpx_sharding *sh = fx_shard(m, plan, mesh, &so);
  char b[64];
  const char *q = "model.layers.0.self_attn.q_proj.weight";
  const char *o = "model.layers.0.self_attn.o_proj.weight";
  ck_assert_str_eq(fx_pl(sh, q, 1, b, sizeof b), "strided_shard(0,2)");
  ck_assert_str_eq(fx_pl(sh, q, 2, b, sizeof b), "joined");
  ck_assert_str_eq(fx_pl(sh, q, 3, b, sizeof b), "shard(0)");
  ck_assert_str_eq(fx_pl(sh, o, 1, b, sizeof b), "shard(0)");
  ck_assert_str_eq(fx_pl(sh, o, 2, b, sizeof b), "joined");
  ck_assert_str_eq(fx_pl(sh, o, 3, b, sizeof b), "shard(1)");
  tpx_sharding_destroy(sh);

  so.dp_shard_dim = "dp_shard";
  sh = fx_shard(m, plan, mesh, &so);
  ck_assert_str_eq(fx_pl(sh, o, 2, b, sizeof b), "replicate");
  ck_assert_str_eq(tpx_sharding_fsdp_mesh_name(sh, NULL), "dp_shard");
  tpx_sharding_destroy(sh);

  const char *bad[2] = {"dp_replicate", "cp"};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_mesh_flatten(mesh, "dpr_cp", bad, 2, &e), TPX_OK);
  so.dp_shard_dim = "dpr_cp";
  sh = NULL;
  ck_assert_int_eq(tpx_sharding_create(m, plan, mesh, &so, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "not consecutive"));
  so.dp_shard_dim = "dp_shard_cp";
  so.fsdp = 0;
  sh = fx_shard(m, plan, mesh, &so);
  ck_assert_ptr_null(tpx_sharding_fsdp_mesh_name(sh, NULL));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
}
END_TEST

/* Gradients, optimizer state and gather peaks follow dp_shard_cp: rank
 * (s, c) of dp_shard 2 x cp 2 holds what rank 2s + c of dp_shard 4 holds
 * (one chunk into 4 pieces either way). */
START_TEST(memory_follows_dp_shard_cp) {
  fx_opts fo = {250, 0, 0, 0, NULL};
  tpx_model *m = fx_model(&fo);
  tpx_plan *plan = fx_llama_plan();
  tpx_mesh *cpm = cp_mesh(1, 2, 2, 2), *flat = NULL;
  ck_assert_int_eq(tpx_mesh_create_fsdp2(1, 4, 1, 2, &flat, NULL), TPX_OK);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.dp_shard_dim = "dp_shard_cp";
  tpx_sharding *a = fx_shard(m, plan, cpm, &so);
  tpx_sharding *b = fx_shard(m, plan, flat, NULL);
  tpx_memory ma[8], mb[8];
  ck_assert_int_eq(tpx_memory_ranks(a, NULL, 0, 8, ma, NULL), TPX_OK);
  ck_assert_int_eq(tpx_memory_ranks(b, NULL, 0, 8, mb, NULL), TPX_OK);
  for (int r = 0; r < 8; r++) {
    /* the same rank number: (s, c, t) of the cp mesh is (2s + c, t) */
    ck_assert_int_eq(ma[r].params, mb[r].params);
    ck_assert_int_eq(ma[r].grads, mb[r].grads);
    ck_assert_int_eq(ma[r].optimizer, mb[r].optimizer);
    ck_assert_int_eq(ma[r].gather_peak, mb[r].gather_peak);
    ck_assert_int_eq(ma[r].device, ma[r].peak);
    ck_assert_int_eq(ma[r].host, 0);
  }
  tpx_sharding_destroy(a);
  tpx_sharding_destroy(b);
  tpx_mesh_destroy(cpm);
  tpx_mesh_destroy(flat);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
}
END_TEST

/* CPU offload: the sharded state on the host, the gathered units and the
 * activations on the device; the cp traffic term by hand: K and V of
 * tokens/cp x kv heads x head_dim, all-gathered and reduce-scattered over
 * cp in each of the 2 layers. */
START_TEST(offload_and_cp_traffic) {
  tpx_model *m = fx_llama();
  tpx_plan *plan = fx_llama_plan();
  tpx_mesh *mesh = cp_mesh(1, 1, 4, 2);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.dp_shard_dim = "dp_shard_cp";
  tpx_sharding *sh = fx_shard(m, plan, mesh, &so);
  tpx_memory_options mo = TPX_MEMORY_OPTIONS_INIT;
  mo.batch = 2;
  mo.seq = 64;
  mo.offload = 1;
  tpx_memory mem;
  tpx_error e = {0};
  ck_assert_msg(tpx_memory_rank(sh, &mo, 5, &mem, &e) == TPX_OK, "%s",
                e.message);
  ck_assert_int_gt(mem.host, 0);
  ck_assert_int_eq(mem.host, mem.params + mem.grads + mem.optimizer);
  ck_assert_int_eq(mem.device, mem.gather_peak + mem.activations);
  ck_assert_int_eq(mem.peak, mem.device + mem.host);
  tpx_traffic t;
  ck_assert_int_eq(tpx_traffic_rank(sh, &mo, 5, &t, &e), TPX_OK);
  /* 2 x 64 / 4 = 32 tokens a rank; 8 kv heads / tp 2 = 4 of head_dim 8;
   * bf16; 4 (cp - 1) pieces a layer; 2 layers */
  int64_t piece = 32 * 4 * 8 * 2;
  ck_assert_int_eq(t.cp, 4 * 3 * piece * 2);
  ck_assert_int_eq(t.total, t.tp + t.fsdp + t.cp);
  mo.seq = 0; /* no sequence: no cp traffic */
  ck_assert_int_eq(tpx_traffic_rank(sh, &mo, 5, &t, &e), TPX_OK);
  ck_assert_int_eq(t.cp, 0);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
}
END_TEST

/* The mesh diagnostics: pure replication noted, cp without FSDP and FSDP
 * not over cp warned. */
START_TEST(mesh_diagnostics) {
  tpx_model *m = fx_llama();
  tpx_plan *plan = fx_llama_plan();
  tpx_mesh *rep = NULL, *cpm = cp_mesh(1, 2, 2, 1);
  ck_assert_int_eq(tpx_mesh_create_fsdp2(2, 1, 1, 1, &rep, NULL), TPX_OK);
  tpx_sharding *sh = fx_shard(m, plan, rep, NULL);
  const tpx_diag_list *dl = tpx_sharding_diagnostics(sh);
  int found = 0;
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(dl, i, &d, NULL), TPX_OK);
    found |=
        !strcmp(d.code, "upstream-refuses-mesh") && d.level == TPX_DIAG_INFO;
  }
  ck_assert(found);
  ck_assert(tpx_sharding_ok(sh));
  tpx_sharding_destroy(sh);
  const char *codes[2] = {"cp-not-in-fsdp", "cp-without-fsdp"};
  for (int k = 0; k < 2; k++) {
    tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
    so.fsdp = k == 0;
    sh = fx_shard(m, plan, cpm, &so); /* dp_shard_dim "dp_shard" */
    dl = tpx_sharding_diagnostics(sh);
    found = 0;
    for (size_t i = 0; i < tpx_diag_count(dl); i++) {
      tpx_diag d;
      ck_assert_int_eq(tpx_diag_get(dl, i, &d, NULL), TPX_OK);
      found |= !strcmp(d.code, codes[k]) && d.level == TPX_DIAG_WARNING;
    }
    ck_assert_msg(found, "no %s", codes[k]);
    tpx_sharding_destroy(sh);
  }
  tpx_mesh_destroy(rep);
  tpx_mesh_destroy(cpm);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
}
END_TEST

static Suite *cp_suite(void) {
  Suite *s = suite_create("cp");
  TCase *tc = tcase_create("cp");
  tcase_add_test(tc, fsdp2_mesh_at_cp1);
  tcase_add_test(tc, rank_numbering_and_groups);
  tcase_add_test(tc, joined_is_one_flat_chunk);
  tcase_add_loop_test(tc, fsdp_over_dp_shard_cp, 0,
                      (int)(sizeof cp_cases / sizeof cp_cases[0]));
  tcase_add_test(tc, placements_and_refusals);
  tcase_add_test(tc, memory_follows_dp_shard_cp);
  tcase_add_test(tc, offload_and_cp_traffic);
  tcase_add_test(tc, mesh_diagnostics);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(cp_suite)
