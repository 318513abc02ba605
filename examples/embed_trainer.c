/* embed_trainer.c — a small trainer that embeds libtpx from end to end, the
 * program docs/EMBED.md walks through and quotes (tests/docs/
 * embed_snippets.py checks that every block the page quotes is here,
 * verbatim). Not tpx-train: one layer type of its own (an MLP block,
 * x + down(relu(up(x))), then a final elementwise scale), f32 on CPU, no
 * BLAS, written against the public headers only.
 *
 * It trains the same model on fixed data for a few steps twice, at world 1
 * and on tp 2 x dp_shard 2 (four local threads), and checks that the losses
 * agree; the sharded run then saves its parameters as a safetensors
 * checkpoint (every rank writing its own pieces), reads them back into a
 * fresh runtime and checks they are the same bits. Usage:
 * tpx-embed-trainer DIR (DIR receives the checkpoint; created if absent).
 * Exit 0 when every check holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tpx/checkpoint.h>
#include <tpx/registry.h>
#include <tpx/runtime.h>
#include <tpx/select.h>
#include <tpx/tpx.h>

enum { HID = 8, INTER = 16, LAYERS = 2, BATCH = 4, SEQ = 3, STEPS = 4 };

/* What every rank of one run shares (read-only while the ranks run, but
 * for loss[], which rank 0 writes). */
typedef struct run {
  const tpx_model *model;
  const tpx_sharding *sh;
  const char *ckpt; /* directory to save into, or NULL */
  double loss[STEPS];
} run;

/* One rank's state. The step's scratch buffers are freed at its end. */
typedef struct rank_ctx {
  const run *job;
  run *out; /* rank 0 writes out->loss */
  tpx_mesh_comm *mc;
  tpx_runtime *rt;
  int64_t rank, dp, dp_index;
  void *scratch[256];
  int nscratch;
} rank_ctx;

/* An activation [b, s, f] on this rank; F is its logical (tp-wide) last
 * dim, which a transition needs to know the layouts. */
typedef struct act {
  float *d;
  int64_t b, s, f, F;
} act;

static float *scratch(rank_ctx *c, int64_t n) {
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (p && c->nscratch < 256)
    c->scratch[c->nscratch++] = p;
  return p;
}

static void scratch_free(rank_ctx *c) {
  while (c->nscratch > 0) free(c->scratch[--c->nscratch]);
}

/* ---- the model, the plan, the mesh, the sharding ------------------------- */

static tpx_status build_model(tpx_model **out, tpx_error *err) {
  tpx_model *m = NULL;
  tpx_status st = tpx_model_create(&m, err);
  for (int l = 0; l < LAYERS && st == TPX_OK; l++) {
    char up[64], down[64];
    snprintf(up, sizeof up, "model.layers.%d.mlp.up_proj", l);
    snprintf(down, sizeof down, "model.layers.%d.mlp.down_proj", l);
    const int64_t wu[2] = {INTER, HID}, wd[2] = {HID, INTER};
    st = tpx_model_add_module(m, up, TPX_MODULE_LINEAR, NULL, err);
    if (st == TPX_OK)
      st =
          tpx_model_add_param(m, up, "weight", wu, 2, TPX_DTYPE_F32, NULL, err);
    if (st == TPX_OK)
      st = tpx_model_add_module(m, down, TPX_MODULE_LINEAR, NULL, err);
    if (st == TPX_OK)
      st = tpx_model_add_param(m, down, "weight", wd, 2, TPX_DTYPE_F32, NULL,
                               err);
  }
  const int64_t g[1] = {HID};
  if (st == TPX_OK)
    st = tpx_model_add_param(m, "model.norm", "weight", g, 1, TPX_DTYPE_F32,
                             NULL, err);
  if (st != TPX_OK)
    tpx_model_destroy(m);
  *out = st == TPX_OK ? m : NULL;
  return st;
}

static tpx_status build_plan(tpx_plan **out, tpx_error *err) {
  tpx_status st = tpx_plan_create(out, err);
  tpx_style col = tpx_style_default(TPX_STYLE_COLWISE);
  tpx_style row = tpx_style_default(TPX_STYLE_ROWWISE);
  if (st == TPX_OK)
    st = tpx_plan_set(*out, "model.layers.*.mlp.up_proj", &col, 0, err);
  if (st == TPX_OK)
    st = tpx_plan_set(*out, "model.layers.*.mlp.down_proj", &row, 0, err);
  return st;
}

static tpx_status build_sharding(const tpx_model *model, const tpx_plan *plan,
                                 int64_t dp, int64_t tp, tpx_mesh **mesh,
                                 tpx_sharding **sh, tpx_error *err) {
  tpx_registry *reg = NULL;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_select_options so = TPX_SELECT_OPTIONS_INIT;
  so.tp_size = tp;
  so.custom = plan; /* a custom plan wins over every other source */
  tpx_status st = tpx_registry_create(&reg, err);
  if (st == TPX_OK)
    st = tpx_diag_list_create(&diags, err);
  if (st == TPX_OK)
    st = tpx_select_plan(reg, model, &so, &sel, diags, err);
  if (st == TPX_OK) /* (dp_replicate, dp_shard, cp, tp), as upstream's */
    st = tpx_mesh_create_fsdp2(1, dp, 1, tp, mesh, err);
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.selection = sel; /* handed over whole: plan, units, fp32 params */
  opts.param_dtype = TPX_DTYPE_INVALID; /* compute in f32 (no bf16 cast) */
  if (st == TPX_OK)
    st = tpx_sharding_create(model, NULL, *mesh, &opts, sh, err);
  if (st == TPX_OK && !tpx_sharding_ok(*sh))
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "the sharding has error diagnostics (tpx plan shows "
                       "them)");
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_registry_destroy(reg);
  return st;
}

/* ---- parameters through the runtime -------------------------------------- */

/* The TP-local tensor of parameter `name` while its unit is unsharded
 * (NULL otherwise), its gradient, and its local shape. */
static float *weight(rank_ctx *c, const char *name, float **grad, int64_t *rows,
                     int64_t *cols) {
  tpx_runtime_param_info pi;
  int64_t p = tpx_model_find_param(c->job->model, name);
  *rows = *cols = 0;
  if (tpx_runtime_param(c->rt, p, &pi, NULL) != TPX_OK || !pi.unsharded)
    return NULL;
  if (grad)
    *grad = pi.unsharded_grad;
  *rows = pi.local_shape[0];
  *cols = pi.ndim > 1 ? pi.local_shape[1] : 1;
  return pi.unsharded;
}

/* Every rank loads the same full tensors; the runtime keeps its shard. */
static tpx_status load_weights(rank_ctx *c, tpx_error *err) {
  const tpx_model *model = c->job->model;
  tpx_status st = TPX_OK;
  for (size_t p = 0; p < tpx_model_num_params(model) && st == TPX_OK; p++) {
    tpx_param_info info;
    st = tpx_model_param(model, (int64_t)p, &info, err);
    int64_t n = info.ndim > 1 ? info.shape[0] * info.shape[1] : info.shape[0];
    float *full = scratch(c, n);
    for (int64_t i = 0; full && i < n; i++)
      full[i] =
          info.ndim == 1 ? 1.0f : (float)(0.3 * sin(0.7 * (double)i + 1.3 * p));
    if (st == TPX_OK)
      st = tpx_runtime_load_param(c->rt, (int64_t)p, full, TPX_DTYPE_F32, err);
  }
  scratch_free(c);
  return st;
}

/* ---- a TP transition ----------------------------------------------------- */

/* Input or output `side` of styled module `module`, forward or backward,
 * on x: resolved once (layouts, local shapes, copy or not); when it
 * communicates, run into a new buffer that replaces x. */
static tpx_status transition(rank_ctx *c, const char *module,
                             tpx_transition_side side, int backward, act *x,
                             tpx_error *err) {
  int64_t m = tpx_model_find_module(c->job->model, module);
  int64_t shape[3] = {x->b, x->s, x->F}; /* logical: features tp-wide */
  tpx_tp_resolved rs = TPX_TP_RESOLVED_INIT;
  tpx_status st =
      tpx_tp_transition_resolve(c->job->sh, m, side, 0, NULL, backward, NULL,
                                c->rank, shape, 3, &rs, err);
  if (st != TPX_OK || !rs.present || rs.is_copy)
    return st; /* nothing moves: x stays as it is */
  act y = {scratch(c, rs.out_local[0] * rs.out_local[1] * rs.out_local[2]),
           rs.out_local[0], rs.out_local[1], rs.out_local[2], x->F};
  tpx_tensor in = tpx_tensor_make(x->d, TPX_DTYPE_F32, 3, rs.in_local);
  tpx_tensor out = tpx_tensor_make(y.d, TPX_DTYPE_F32, 3, rs.out_local);
  st = tpx_tp_transition_run_resolved(c->job->sh, c->mc, &rs, &in, &out, err);
  *x = y;
  return st;
}

/* ---- the layer: x + down(relu(up(x))) ------------------------------------ */

/* y[n, out] = x[n, in] W[out, in]^T */
static void matmul_wt(const float *x, const float *w, float *y, int64_t n,
                      int64_t in, int64_t out) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t o = 0; o < out; o++) {
      float s = 0;
      for (int64_t k = 0; k < in; k++) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
}

/* dx[n, in] = dy[n, out] W[out, in]; dW[out, in] += dy^T x */
static void matmul_wt_bwd(const float *x, const float *w, const float *dy,
                          float *dx, float *dw, int64_t n, int64_t in,
                          int64_t out) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < in; k++) {
      float s = 0;
      for (int64_t o = 0; o < out; o++) s += dy[i * out + o] * w[o * in + k];
      dx[i * in + k] = s;
    }
  for (int64_t o = 0; o < out; o++)
    for (int64_t k = 0; k < in; k++)
      for (int64_t i = 0; i < n; i++)
        dw[o * in + k] += dy[i * out + o] * x[i * in + k];
}

/* What a layer's forward keeps for its backward. */
typedef struct saved {
  act a;  /* up_proj's input, after its input transition */
  act u;  /* up_proj's output (before relu) */
  act r2; /* down_proj's input, after its input transition */
} saved;

static tpx_status layer_forward(rank_ctx *c, int l, act *x, saved *sv,
                                tpx_error *err) {
  char blk[64], up[96], down[96], wn[128];
  snprintf(blk, sizeof blk, "model.layers.%d", l);
  snprintf(up, sizeof up, "%s.mlp.up_proj", blk);
  snprintf(down, sizeof down, "%s.mlp.down_proj", blk);
  int64_t n = x->b * x->s, ri, ci, ro, co;
  tpx_status st = tpx_runtime_pre_forward(c->rt, blk, err); /* unshard */
  act a = *x;
  if (st == TPX_OK)
    st = transition(c, up, TPX_TRANSITION_INPUT, 0, &a, err);
  snprintf(wn, sizeof wn, "%s.weight", up);
  const float *wu = weight(c, wn, NULL, &ri, &ci); /* [inter/tp, hid] */
  act u = {scratch(c, n * ri), a.b, a.s, ri, INTER};
  if (st == TPX_OK) {
    matmul_wt(a.d, wu, u.d, n, ci, ri);
    st = transition(c, up, TPX_TRANSITION_OUTPUT, 0, &u, err);
  }
  act r = {scratch(c, n * u.f), u.b, u.s, u.f, INTER};
  for (int64_t i = 0; st == TPX_OK && i < n * u.f; i++)
    r.d[i] = u.d[i] > 0 ? u.d[i] : 0;
  if (st == TPX_OK)
    st = transition(c, down, TPX_TRANSITION_INPUT, 0, &r, err);
  snprintf(wn, sizeof wn, "%s.weight", down);
  const float *wd = weight(c, wn, NULL, &ro, &co); /* [hid, inter/tp] */
  act y = {scratch(c, n * ro), x->b, x->s, ro, HID};
  if (st == TPX_OK) {
    matmul_wt(r.d, wd, y.d, n, co, ro); /* partial sums over tp */
    st = transition(c, down, TPX_TRANSITION_OUTPUT, 0, &y, err);
  }
  act h = {scratch(c, n * HID), x->b, x->s, HID, HID};
  for (int64_t i = 0; st == TPX_OK && i < n * HID; i++)
    h.d[i] = x->d[i] + y.d[i];
  if (st == TPX_OK)
    st = tpx_runtime_post_forward(c->rt, blk, err); /* reshard */
  *sv = (saved){a, u, r};
  *x = h;
  return st;
}

static tpx_status layer_backward(rank_ctx *c, int l, const saved *sv, act *dh,
                                 tpx_error *err) {
  char blk[64], up[96], down[96], wn[128];
  snprintf(blk, sizeof blk, "model.layers.%d", l);
  snprintf(up, sizeof up, "%s.mlp.up_proj", blk);
  snprintf(down, sizeof down, "%s.mlp.down_proj", blk);
  int64_t n = dh->b * dh->s, ri, ci, ro, co;
  float *gu, *gd;
  tpx_status st = tpx_runtime_pre_backward(c->rt, blk, err);
  act dy = *dh;
  if (st == TPX_OK)
    st = transition(c, down, TPX_TRANSITION_OUTPUT, 1, &dy, err);
  snprintf(wn, sizeof wn, "%s.weight", down);
  const float *wd = weight(c, wn, &gd, &ro, &co);
  act dr = {scratch(c, n * co), dh->b, dh->s, co, INTER};
  if (st == TPX_OK) {
    matmul_wt_bwd(sv->r2.d, wd, dy.d, dr.d, gd, n, co, ro);
    st = transition(c, down, TPX_TRANSITION_INPUT, 1, &dr, err);
  }
  for (int64_t i = 0; st == TPX_OK && i < n * dr.f; i++)
    dr.d[i] = sv->u.d[i] > 0 ? dr.d[i] : 0; /* relu' */
  if (st == TPX_OK)
    st = transition(c, up, TPX_TRANSITION_OUTPUT, 1, &dr, err);
  snprintf(wn, sizeof wn, "%s.weight", up);
  const float *wu = weight(c, wn, &gu, &ri, &ci);
  act da = {scratch(c, n * ci), dh->b, dh->s, ci, HID};
  if (st == TPX_OK) {
    matmul_wt_bwd(sv->a.d, wu, dr.d, da.d, gu, n, ci, ri); /* partial */
    st = transition(c, up, TPX_TRANSITION_INPUT, 1, &da, err);
  }
  act dx = {scratch(c, n * HID), dh->b, dh->s, HID, HID};
  for (int64_t i = 0; st == TPX_OK && i < n * HID; i++)
    dx.d[i] = dh->d[i] + da.d[i];
  if (st == TPX_OK) /* reduce-scatter the gradients, reshard */
    st = tpx_runtime_post_backward(c->rt, blk, err);
  *dh = dx;
  return st;
}

/* ---- a step -------------------------------------------------------------- */

/* This rank's rows of the fixed batch: inputs and targets [b, SEQ, HID]. */
static void batch(rank_ctx *c, act *x, float *target) {
  int64_t b = BATCH / c->dp, n = b * SEQ * HID, first = c->dp_index * n;
  *x = (act){scratch(c, n), b, SEQ, HID, HID};
  for (int64_t i = 0; i < n; i++) {
    x->d[i] = (float)sin(0.37 * (double)(first + i));
    target[i] = (float)cos(0.23 * (double)(first + i));
  }
}

static tpx_status step(rank_ctx *c, double *loss, tpx_error *err) {
  act x;
  int64_t n = BATCH / c->dp * SEQ * HID, r, k;
  float *t = scratch(c, n), *dg;
  saved sv[LAYERS];
  batch(c, &x, t);
  tpx_status st = tpx_runtime_zero_grads(c->rt, err);
  if (st == TPX_OK) /* gathers the root units: here model.norm */
    st = tpx_runtime_forward_begin(c->rt, err);
  for (int l = 0; l < LAYERS && st == TPX_OK; l++)
    st = layer_forward(c, l, &x, &sv[l], err);
  if (st == TPX_OK)
    st = tpx_runtime_backward_begin(c->rt, err);
  if (st != TPX_OK)
    return st;
  /* y = x * g, loss = mean((y - t)^2) / 2 over this rank's rows */
  const float *g = weight(c, "model.norm.weight", &dg, &r, &k);
  act dh = {scratch(c, n), x.b, x.s, HID, HID};
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = (double)x.d[i] * g[i % HID] - t[i];
    sum += e * e / 2;
    dh.d[i] = (float)(e / (double)n) * g[i % HID];
    dg[i % HID] += (float)(e / (double)n * x.d[i]);
  }
  *loss = sum / (double)n;
  for (int l = LAYERS - 1; l >= 0 && st == TPX_OK; l--)
    st = layer_backward(c, l, &sv[l], &dh, err);
  if (st == TPX_OK) /* reduces the root units' gradients, waits */
    st = tpx_runtime_backward_end(c->rt, err);
  double norm;
  tpx_adamw_options ao = TPX_ADAMW_OPTIONS_INIT;
  ao.lr = 1e-2;
  if (st == TPX_OK)
    st = tpx_runtime_clip_grad_norm(c->rt, 1.0, 2.0, &norm, err);
  if (st == TPX_OK)
    st = tpx_runtime_adamw_step(c->rt, &ao, err);
  return st;
}

/* ---- checkpoints --------------------------------------------------------- */

/* Every rank writes the pieces it holds (replicated pieces once), into one
 * Hugging Face safetensors checkpoint that any reader can open. */
static tpx_status save(rank_ctx *c, const char *dir, tpx_error *err) {
  const tpx_model *model = c->job->model;
  size_t np = tpx_model_num_params(model), ne = 0;
  tpx_checkpoint_entry *entries = NULL;
  tpx_checkpoint_writer *w = NULL;
  tpx_checkpoint_dest *src = calloc(np, sizeof *src);
  tpx_checkpoint_writer_options wo = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  wo.num_writers = tpx_comm_size(tpx_mesh_comm_world(c->mc));
  wo.writer_rank = c->rank;
  tpx_status st = src ? tpx_checkpoint_model_entries(model, &entries, &ne, err)
                      : tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (size_t p = 0; p < np && st == TPX_OK; p++) {
    tpx_runtime_param_info pi; /* the f32 master: this rank's local slice */
    st = tpx_runtime_param(c->rt, (int64_t)p, &pi, err);
    src[p] = (tpx_checkpoint_dest){
        pi.master, sizeof(float) * (size_t)pi.sharded_numel, TPX_DTYPE_F32};
  }
  if (st == TPX_OK)
    st = tpx_checkpoint_writer_create(dir, entries, ne, &wo, &w, err);
  if (st == TPX_OK)
    st = tpx_checkpoint_write_rank(w, c->job->sh, c->rank, src, err);
  if (st == TPX_OK) /* the last writer to finish publishes the files */
    st = tpx_checkpoint_writer_finish(w, NULL, err);
  tpx_checkpoint_writer_destroy(w);
  free(entries);
  free(src);
  return st;
}

/* A fresh runtime reads its shards back; every parameter must match. */
static tpx_status reload(rank_ctx *c, const char *dir, tpx_error *err) {
  tpx_runtime *back = NULL;
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  tpx_status st = tpx_comm_barrier(tpx_mesh_comm_world(c->mc), err);
  if (st == TPX_OK)
    st = tpx_runtime_create(c->job->sh, c->mc, &ro, &back, err);
  if (st == TPX_OK)
    st = tpx_runtime_load_safetensors(back, dir, err);
  for (size_t p = 0; p < tpx_model_num_params(c->job->model); p++) {
    float *a = scratch(c, INTER * HID), *b = scratch(c, INTER * HID);
    if (st == TPX_OK)
      st = tpx_runtime_gather_param(c->rt, (int64_t)p, a, TPX_DTYPE_F32, err);
    if (st == TPX_OK)
      st = tpx_runtime_gather_param(back, (int64_t)p, b, TPX_DTYPE_F32, err);
    if (st == TPX_OK && memcmp(a, b, sizeof(float) * INTER * HID) != 0)
      st = tpx_error_set(err, TPX_INTERNAL,
                         "parameter %zu differs after "
                         "the checkpoint round trip",
                         p);
  }
  tpx_runtime_destroy(back);
  scratch_free(c);
  return st;
}

/* ---- one rank ------------------------------------------------------------ */

static tpx_status rank_main(tpx_comm *world, void *arg, tpx_error *err) {
  run *job = arg;
  rank_ctx c = {job, job, NULL, NULL, tpx_comm_rank(world), 1, 0, {0}, 0};
  const tpx_mesh *mesh = tpx_sharding_mesh(job->sh);
  int dpd = tpx_mesh_dim_index(mesh, "dp_shard");
  int64_t coords[TPX_MESH_MAX_DIMS];
  c.dp = tpx_mesh_dim_size(mesh, dpd);
  tpx_status st = tpx_mesh_coords(mesh, c.rank, coords, err);
  c.dp_index = coords[dpd];
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  if (st == TPX_OK) /* this rank's communicators, one per mesh dim */
    st = tpx_mesh_comm_create(world, mesh, &c.mc, err);
  if (st == TPX_OK) /* this rank's shards, gradients, optimizer state */
    st = tpx_runtime_create(job->sh, c.mc, &ro, &c.rt, err);
  if (st == TPX_OK)
    st = load_weights(&c, err);
  for (int s = 0; s < STEPS && st == TPX_OK; s++) {
    double loss = 0, mean = 0;
    st = step(&c, &loss, err);
    scratch_free(&c);
    if (st == TPX_OK) /* the data-parallel mean, for the report only */
      st = tpx_comm_all_reduce(tpx_mesh_comm_dim(c.mc, dpd), &loss, &mean, 1,
                               TPX_DTYPE_F64, TPX_REDUCE_SUM, err);
    if (c.rank == 0)
      c.out->loss[s] = mean / (double)c.dp;
  }
  if (st == TPX_OK && job->ckpt)
    st = save(&c, job->ckpt, err);
  if (st == TPX_OK && job->ckpt)
    st = reload(&c, job->ckpt, err);
  tpx_runtime_destroy(c.rt);
  tpx_mesh_comm_destroy(c.mc);
  return st;
}

static tpx_status train(const tpx_model *model, const tpx_plan *plan,
                        int64_t dp, int64_t tp, run *job, tpx_error *err) {
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = NULL;
  tpx_status st = build_sharding(model, plan, dp, tp, &mesh, &sh, err);
  job->model = model;
  job->sh = sh;
  if (st == TPX_OK)
    st = tpx_local_run((int)(dp * tp), rank_main, job, err);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  return st;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CHECKPOINT_DIR\n", argv[0]);
    return 2;
  }
  mkdir(argv[1], 0755); /* an existing one is fine */
  tpx_error err = {0};
  tpx_model *model = NULL;
  tpx_plan *plan = NULL;
  run one = {0}, four = {0};
  four.ckpt = argv[1];
  tpx_status st = build_model(&model, &err);
  if (st == TPX_OK)
    st = build_plan(&plan, &err);
  if (st == TPX_OK)
    st = train(model, plan, 1, 1, &one, &err);
  if (st == TPX_OK)
    st = train(model, plan, 2, 2, &four, &err);
  for (int s = 0; s < STEPS && st == TPX_OK; s++) {
    double d = fabs(one.loss[s] - four.loss[s]) / fabs(one.loss[s]);
    printf("step %d: loss %.6f at world 1, %.6f on dp_shard 2 x tp 2 "
           "(rel diff %.2g)\n",
           s, one.loss[s], four.loss[s], d);
    if (!(d < 1e-5) || (s > 0 && !(one.loss[s] < one.loss[0])))
      st = tpx_error_set(&err, TPX_INTERNAL,
                         "step %d: the runs disagree or "
                         "the loss does not fall",
                         s);
  }
  tpx_plan_destroy(plan);
  tpx_model_destroy(model);
  if (st != TPX_OK) {
    fprintf(stderr, "tpx-embed-trainer: %s\n", err.message);
    return 1;
  }
  printf("checkpoint round trip in %s: identical\n", argv[1]);
  return 0;
}
