/* test_memory.c — training memory per rank and traffic per step
 * (core/src/shard/memory.c, activations.c, traffic.c) on the hand-built
 * tiny llama of shard_fixture.h, every figure computed by hand below
 * (docs/MEMORY.md has the formulas).
 *
 * The tiny llama: H=64, I=128, V=256, 2 layers, bf16, untied.
 *   per layer: q,k,v,o 4*64*64 = 16384; gate,up 2*128*64 = 16384;
 *              down 64*128 = 8192; 2 norms 128       -> 41088 elements
 *   root: embed 16384 + lm_head 16384 + norm 64      -> 32832
 *   total 2*41088 + 32832 = 115008 elements. */
#include <stddef.h>
#include <string.h>

#include "shard_fixture.h"

static tpx_memory mem_of(const tpx_sharding *sh, const tpx_memory_options *o,
                         int64_t rank) {
  tpx_memory m;
  tpx_error e = {0};
  ck_assert_msg(tpx_memory_rank(sh, o, rank, &m, &e) == TPX_OK, "%s",
                e.message);
  ck_assert_int_eq(m.peak, m.params + m.grads + m.optimizer + m.gather_peak +
                               m.activations);
  return m;
}

typedef struct {
  tpx_optimizer opt;
  int64_t optimizer, master;
} opt_case;

/* One rank, FSDP over a dp_shard of 1: nothing is split or padded. */
START_TEST(state_unsharded) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 1, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  static const opt_case cases[] = {
      {TPX_OPTIMIZER_ADAMW, 115008 * 12, 115008 * 4}, /* 2 states + master */
      {TPX_OPTIMIZER_SGD, 115008 * 8, 115008 * 4},    /* 1 state + master */
      {TPX_OPTIMIZER_NONE, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
    o.optimizer = cases[i].opt;
    tpx_memory x = mem_of(sh, &o, 0);
    ck_assert_int_eq(x.params, 115008 * 2); /* bf16 */
    ck_assert_int_eq(x.grads, 115008 * 4);  /* f32 reduce dtype */
    ck_assert_int_eq(x.optimizer, cases[i].optimizer);
    ck_assert_int_eq(x.master, cases[i].master);
    /* Untied embeddings are units of their own (NeMo Automodel 0.7.0):
     * root (model.norm, 64 * 2) + lm_head, which never reshards
     * (16384 * 2) + a layer with its prefetched neighbour (2 * 41088 * 2) */
    ck_assert_int_eq(x.gather_peak, 128 + 32768 + 164352);
    ck_assert_int_eq(x.activations, 0);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* dp_shard 3: every rank is padded to ceil(dim0 / 3) rows, so all ranks
 * hold the same padded state although the last one holds fewer rows. */
START_TEST(state_padded) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 3, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  /* per layer: q,k,v,o 4*22*64 = 5632; gate,up 2*43*64 = 5504;
   * down 22*128 = 2816; norms 2*22 = 44 -> 13996;
   * root: embed 86*64 + lm_head 86*64 + norm 22 = 11030 */
  const int64_t n = 2 * 13996 + 11030; /* 39022 */
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  for (int64_t r = 0; r < 3; r++) {
    tpx_memory x = mem_of(sh, &o, r);
    ck_assert_int_eq(x.params, n * 2);
    ck_assert_int_eq(x.grads, n * 4);
    ck_assert_int_eq(x.optimizer, n * 12);
    ck_assert_int_eq(x.master, n * 4);
  }
  /* the unpadded bytes of the last rank are smaller */
  ck_assert_int_lt(tpx_sharding_rank_param_bytes(sh, 2), n * 2);
  /* the batch form agrees with the single-rank form */
  tpx_memory all[3];
  ck_assert_int_eq(tpx_memory_ranks(sh, NULL, 0, 3, all, NULL), TPX_OK);
  ck_assert_int_eq(all[2].params, n * 2);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* TP 2 then FSDP 2 (even): padded = unpadded = a quarter of everything
 * except the five norms, replicated over tp: 28672 + 5*32 elements. */
START_TEST(state_tp_fsdp) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  const int64_t n = (115008 - 320) / 4 + 5 * 32;
  for (int64_t r = 0; r < 4; r++) {
    tpx_memory x = mem_of(sh, NULL, r);
    ck_assert_int_eq(x.params, n * 2);
    ck_assert_int_eq(x.params, tpx_sharding_rank_param_bytes(sh, r));
    ck_assert_int_eq(x.grads, n * 4);
    ck_assert_int_eq(x.gather_peak, tpx_sharding_rank_peak_bytes(sh, r) -
                                        tpx_sharding_rank_param_bytes(sh, r));
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* A parameter kept in fp32 has no master copy; FSDP off keeps grads in
 * f32 (next to the f32 master), with no gather. */
START_TEST(state_fp32_and_no_fsdp) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 1, 1);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  const char *pat[1] = {"model.norm.weight"};
  so.num_fp32_params = 1;
  so.fp32_params = pat;
  tpx_sharding *sh = fx_shard(m, NULL, mesh, &so);
  tpx_memory x = mem_of(sh, NULL, 0);
  ck_assert_int_eq(x.params, 114944 * 2 + 64 * 4);
  ck_assert_int_eq(x.grads, 115008 * 4);
  ck_assert_int_eq(x.master, 114944 * 4);
  ck_assert_int_eq(x.optimizer, 115008 * 8 + 114944 * 4);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);

  mesh = fx_mesh(1, 2, 1);
  tpx_sharding_options nf = TPX_SHARDING_OPTIONS_INIT;
  nf.fsdp = 0;
  sh = fx_shard(m, NULL, mesh, &nf);
  for (int64_t r = 0; r < 2; r++) {
    x = mem_of(sh, NULL, r);
    ck_assert_int_eq(x.params, 115008 * 2); /* replicated */
    ck_assert_int_eq(x.grads, 115008 * 4);  /* no FSDP: f32 */
    ck_assert_int_eq(x.gather_peak, 0);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* torch's optimizer state follows the unpadded local shard (docs/MEMORY.md
 * "Optimizer state"): on dp_shard 3 rank 2 holds q,k,v,o 20 rows, gate/up
 * 42, down 20, norms 20, embed/lm_head 84 of 86:
 *   per layer 4*20*64 + 2*42*64 + 20*128 + 2*20 = 13096
 *   root 2*84*64 + 20 = 10772; all 2*13096 + 10772 = 36964
 * ranks 0 and 1 hold full chunks: 39022 (the padded figure).
 * AdamW: 2 f32 states + the f32 master of the bf16 parameters = 12 bytes
 * an element, plus a 4-byte step for each of the 21 parameters. */
START_TEST(state_torch_uneven) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 3, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  for (int64_t r = 0; r < 3; r++) {
    int64_t n = r < 2 ? 39022 : 36964;
    tpx_memory x = mem_of(sh, &o, r);
    ck_assert_int_eq(x.optimizer, 39022 * 12); /* tpx: padded, as allocated */
    ck_assert_int_eq(x.optimizer_torch, n * 12 + 21 * 4);
  }
  o.optimizer = TPX_OPTIMIZER_SGD; /* momentum + master, no step */
  ck_assert_int_eq(mem_of(sh, &o, 2).optimizer_torch, 36964 * 8);
  o.optimizer = TPX_OPTIMIZER_NONE;
  ck_assert_int_eq(mem_of(sh, &o, 2).optimizer_torch, 0);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  /* dp_shard 128: rank 127's shard of every 64-row parameter is empty;
   * it holds 1 row of gate and up (2 layers) and 2 of embed and lm_head,
   * and a step for every parameter all the same */
  mesh = fx_mesh(1, 128, 1);
  sh = fx_shard(m, NULL, mesh, NULL);
  o.optimizer = TPX_OPTIMIZER_ADAMW;
  ck_assert_int_eq(mem_of(sh, &o, 127).optimizer_torch,
                   (4 * 64 + 4 * 64) * 12 + 21 * 4);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

typedef struct {
  int64_t tp;
  int sp;
  int ckpt;
  int64_t want;
  int in_place; /* loss_in_place */
} act_case;

/* batch 2 x seq 16 = 32 tokens, bf16 (e = 2), head_dim 64/8 = 8, V = 256
 * from lm_head.weight (the fixture config has no vocab_size), flash
 * attention, two hidden-sized norms per layer, no q/k norms.
 * A norm into linears, per token: f32 input 4*64 + f32 rsqrt 4 + normalized
 * 2*64 (sequence-sharded under SP), plus its output 2*64 (full):
 *       32*388 + 32*128 = 16512
 * tp 1: attention 32*(2*8*(2*8 + 2*8) + 4*8) = 32*544 = 17408
 *       MLP 32*4*128*2 = 32768
 *       layer = 2*16512 + 17408 + 32768 = 83200
 *       head  = 16512 + 32*(4*256 + 16) + RoPE 2*16*8*2 + loss 4
 *             = 16512 + 33280 + 512 + 4 = 50308
 *       all: 2*83200 + 50308 = 216708
 *       checkpointed: the kept inputs 2*(32*64*2) = 8192, and the larger
 *       of the head with torch's loss buffers 50308 + 2*32*4*256 = 115844
 *       and a layer with its MLP's backward 83200 + 32*(2*128 + 64)*2
 *       = 103680: 124036; with an in-place loss 8192 + 103680 = 111872
 * tp 2 (heads 4, kv 4, I 64, V 128):
 *       layer = 33024 + 32*(2*8*16 + 16) + 32*4*64*2 = 33024 + 8704 + 16384
 *             = 58112
 *       head  = 16512 + 32*(4*128 + 16) + 516 = 33924; all: 150148
 *       checkpointed: 8192 + max(33924 + 32768, 58112 + 32*(2*64 + 64)*2)
 *       = 8192 + 70400 = 78592
 * tp 2 + SP (a norm's own bytes on 16 tokens: 16*388 + 32*128 = 10304):
 *       layer = 2*10304 + 8704 + 16384 = 45696
 *       head  = 10304 + 16896 + 516 = 27716; all: 119108
 *       checkpointed: 2*(16*64*2) + max(27716 + 32768, 45696 + 12288)
 *       = 64580; in-place loss 4096 + 57984 = 62080 */
static const act_case act_cases[] = {
    {1, 0, 0, 216708, 0}, {1, 0, 1, 124036, 0}, {2, 0, 0, 150148, 0},
    {2, 0, 1, 78592, 0},  {2, 1, 0, 119108, 0}, {2, 1, 1, 64580, 0},
    {1, 0, 1, 111872, 1}, {2, 1, 1, 62080, 1},
};

START_TEST(activations_table) {
  const act_case *c = &act_cases[_i];
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  if (c->sp)
    fx_set(p, "model.norm", TPX_STYLE_SEQUENCE_PARALLEL, 0);
  tpx_mesh *mesh = fx_mesh(1, 1, c->tp);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  o.batch = 2;
  o.seq = 16;
  o.activation_checkpointing = c->ckpt;
  o.loss_in_place = c->in_place;
  tpx_memory x = mem_of(sh, &o, 0);
  ck_assert_msg(x.activations == c->want,
                "tp %lld sp %d ckpt %d in-place %d: %lld", (long long)c->tp,
                c->sp, c->ckpt, c->in_place, (long long)x.activations);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(bad_input) {
  static const char cfg[] =
      "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64,"
      " \"num_attention_heads\": 8}";
  fx_opts fo = {0, 0, 0, 0, cfg};
  tpx_model *m = fx_model(&fo);
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_memory x[2];
  tpx_error e = {0};
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, x, &e), TPX_OK); /* no seq */
  o.seq = 8; /* activations need intermediate_size */
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, x, &e), TPX_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(e.message, "intermediate_size"));
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_memory_rank(sh, NULL, 2, x, &e), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_memory_rank(sh, NULL, -1, x, NULL), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_memory_ranks(sh, NULL, 1, 2, x, NULL), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_memory_ranks(sh, NULL, 0, 2, x, NULL), TPX_OK);
  ck_assert_int_eq(tpx_memory_rank(NULL, NULL, 0, x, NULL),
                   TPX_INVALID_ARGUMENT);
  o.seq = 0;
  o.batch = 0;
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, x, NULL), TPX_OUT_OF_RANGE);
  o.batch = 1;
  o.optimizer = (tpx_optimizer)7;
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, x, NULL), TPX_INVALID_ARGUMENT);
  o.struct_size = 4;
  ck_assert_int_eq(tpx_memory_rank(sh, &o, 0, x, NULL), TPX_INVALID_ARGUMENT);
  tpx_optimizer opt;
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_optimizer_parse("adamw", &opt, NULL), TPX_OK);
  ck_assert_int_eq(opt, TPX_OPTIMIZER_ADAMW);
  ck_assert_int_eq(tpx_optimizer_parse("sgd", &opt, NULL), TPX_OK);
  ck_assert_int_eq(opt, TPX_OPTIMIZER_SGD);
  ck_assert_int_eq(tpx_optimizer_parse("adam", &opt, &e), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "'adam'"));
  ck_assert_str_eq(tpx_optimizer_name(TPX_OPTIMIZER_NONE), "none");
  ck_assert_ptr_null(tpx_optimizer_name((tpx_optimizer)9));
  tpx_traffic t;
  ck_assert_int_eq(tpx_traffic_rank(sh, NULL, 5, &t, NULL), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_traffic_rank(sh, NULL, 0, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* FSDP traffic on dp_shard 2: units model.embed_tokens and layer0
 * (resharded: gathered twice), layer1 and lm_head (kept: once), root
 * (model.norm, once); a rank sends half of each gather (embedding and
 * lm_head 16384*2 bytes, layer 41088*2, root 64*2), and its whole padded
 * grad shard once in the reduce-scatter (57504 elements * 4). HSDP adds an
 * all-reduce of the grad shard over dp_replicate 2 (2 * 1/2). */
START_TEST(traffic_fsdp) {
  tpx_model *m = fx_llama();
  const int64_t ag = 2 * 16384 + 82176 + 41088 + 16384 + 64, rs = 57504 * 4;
  tpx_mesh *mesh = fx_mesh(1, 2, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_traffic t;
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  o.seq = 16;
  ck_assert_int_eq(tpx_traffic_rank(sh, &o, 1, &t, NULL), TPX_OK);
  ck_assert_int_eq(t.tp, 0);
  ck_assert_int_eq(t.fsdp, ag + rs);
  ck_assert_int_eq(t.total, ag + rs);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  mesh = fx_mesh(2, 2, 1);
  sh = fx_shard(m, NULL, mesh, NULL);
  ck_assert_int_eq(tpx_traffic_rank(sh, &o, 3, &t, NULL), TPX_OK);
  ck_assert_int_eq(t.fsdp, ag + rs + rs);
  /* the range form gives every rank's figures at once, rank by rank equal
   * to tpx_traffic_rank; out-of-mesh ranges are refused */
  {
    tpx_traffic all[4], one;
    ck_assert_int_eq(tpx_traffic_ranks(sh, &o, 0, 4, all, NULL), TPX_OK);
    for (int r = 0; r < 4; r++) {
      ck_assert_int_eq(tpx_traffic_rank(sh, &o, r, &one, NULL), TPX_OK);
      ck_assert_int_eq(all[r].tp, one.tp);
      ck_assert_int_eq(all[r].fsdp, one.fsdp);
      ck_assert_int_eq(all[r].total, one.total);
    }
    ck_assert_int_eq(tpx_traffic_ranks(sh, &o, 2, 2, all, NULL), TPX_OK);
    ck_assert_int_eq(all[1].fsdp, ag + rs + rs);
    ck_assert_int_eq(tpx_traffic_ranks(sh, &o, 3, 2, all, NULL),
                     TPX_OUT_OF_RANGE);
    ck_assert_int_eq(tpx_traffic_ranks(sh, &o, -1, 1, all, NULL),
                     TPX_OUT_OF_RANGE);
    ck_assert_int_eq(tpx_traffic_ranks(sh, &o, 0, 1, NULL, NULL),
                     TPX_INVALID_ARGUMENT);
    ck_assert_int_eq(tpx_traffic_ranks(sh, &o, 4, 0, NULL, NULL), TPX_OK);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* TP 2, batch 2 x seq 16, bf16: every collective moves 32*64*2 = 4096
 * bytes, an all-reduce over 2 ranks sends 4096. The llama plan's
 * collectives: embedding output mask + all-reduce (fwd); per layer q, k, v,
 * gate, up input grads all-reduced (bwd), o and down outputs all-reduced (fwd);
 * lm_head input grad all-reduced (bwd): 1 + 2*7 + 1 = 16. */
START_TEST(traffic_tp) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.fsdp = 0;
  tpx_sharding *sh = fx_shard(m, p, mesh, &so);
  tpx_traffic t;
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT;
  o.batch = 2;
  o.seq = 16;
  ck_assert_int_eq(tpx_traffic_rank(sh, &o, 0, &t, NULL), TPX_OK);
  ck_assert_int_eq(t.tp, 16 * 4096);
  ck_assert_int_eq(t.fsdp, 0);
  o.seq = 0; /* no tokens, no TP traffic */
  ck_assert_int_eq(tpx_traffic_rank(sh, &o, 0, &t, NULL), TPX_OK);
  ck_assert_int_eq(t.tp, 0);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* A caller built before tpx_memory.moe_dispatch and tpx_traffic.ep were
 * appended passes options ending before loss_in_place (appended with them)
 * and arrays of the older, shorter structs: they are filled at that stride,
 * nothing written past them, each element equal to the new call's. */
START_TEST(older_caller_layout) {
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 4, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_memory_options o = TPX_MEMORY_OPTIONS_INIT, old;
  o.seq = 16;
  old = o;
  old.struct_size = offsetof(tpx_memory_options, loss_in_place);
  const size_t ms = offsetof(tpx_memory, moe_dispatch);
  const size_t ts = offsetof(tpx_traffic, ep);
  unsigned char buf[4 * sizeof(tpx_memory) + 64];
  memset(buf, 0xA5, sizeof buf);
  ck_assert_int_eq(tpx_memory_ranks(sh, &old, 0, 4, (tpx_memory *)buf, NULL),
                   TPX_OK);
  for (size_t i = 4 * ms; i < sizeof buf; i++) ck_assert_uint_eq(buf[i], 0xA5);
  for (int r = 0; r < 4; r++) {
    tpx_memory now, then;
    ck_assert_int_eq(tpx_memory_rank(sh, &o, r, &now, NULL), TPX_OK);
    memcpy(&then, buf + (size_t)r * ms, ms);
    ck_assert_int_eq(memcmp(&then, &now, ms), 0);
  }
  memset(buf, 0xA5, sizeof buf);
  ck_assert_int_eq(tpx_traffic_ranks(sh, &old, 0, 4, (tpx_traffic *)buf, NULL),
                   TPX_OK);
  for (size_t i = 4 * ts; i < sizeof buf; i++) ck_assert_uint_eq(buf[i], 0xA5);
  for (int r = 0; r < 4; r++) {
    tpx_traffic now, then;
    ck_assert_int_eq(tpx_traffic_rank(sh, &o, r, &now, NULL), TPX_OK);
    memcpy(&then, buf + (size_t)r * ts, ts);
    ck_assert_int_eq(memcmp(&then, &now, ts), 0);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("memory");
  TCase *tc = tcase_create("memory");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, state_unsharded);
  tcase_add_test(tc, state_padded);
  tcase_add_test(tc, state_tp_fsdp);
  tcase_add_test(tc, state_fp32_and_no_fsdp);
  tcase_add_test(tc, state_torch_uneven);
  tcase_add_loop_test(tc, activations_table, 0,
                      (int)(sizeof act_cases / sizeof act_cases[0]));
  tcase_add_test(tc, bad_input);
  tcase_add_test(tc, traffic_fsdp);
  tcase_add_test(tc, traffic_tp);
  tcase_add_test(tc, older_caller_layout);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
