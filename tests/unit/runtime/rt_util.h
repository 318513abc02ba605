/* rt_util.h — helpers of the TP runtime test cases (rt_*.c): failure
 * recording (first failure wins, ranks keep going), deterministic values,
 * boxes of full tensors, f32 / bf16 buffers, activation slices and pieces,
 * running a transition into a fresh buffer, comparisons, linear layers. */
#ifndef TPX_TEST_RT_UTIL_H
#define TPX_TEST_RT_UTIL_H

#include <stdint.h>

#include "rt_cases.h"

/* A rank's view while it runs a numeric case. */
typedef struct blk {
  const tpx_sharding *sh;
  tpx_mesh_comm *mc;
  int64_t me;
  tpx_error *err;
  int ok;
} blk;

/* Per world rank: a hash of every tensor the cases' library calls saw,
 * after each call (rt_run compares a host run with a sim run). */
#define RT_MAX_RANKS 16
extern uint64_t rtu_digest[RT_MAX_RANKS];

/* Around one library call: when mc's world is in sim memory, rtu_sim_begin
 * swaps each tensor's data for a fresh sim copy (so the call sees only
 * pointers that fault on a host access); rtu_sim_end copies every buffer
 * back, frees the copies and folds the bytes of all tensors into rank
 * me's rtu_digest (host memory: only the digest). */
typedef struct rtu_sim {
  int on, n;
  tpx_tensor *t[8];
  void *host[8];
} rtu_sim;
void rtu_sim_begin(rtu_sim *s, tpx_mesh_comm *mc, tpx_tensor *const *ts, int n);
void rtu_sim_end(rtu_sim *s, int64_t me);
#define RTU_SIM(s, mc, ...)                                                    \
  rtu_sim_begin((s), (mc), (tpx_tensor *const[]){__VA_ARGS__},                 \
                (int)(sizeof((tpx_tensor *const[]){__VA_ARGS__}) /             \
                      sizeof(tpx_tensor *)))

tpx_status rtu_failed(tpx_error *err, const char *fmt, ...);
void rtu_lib_failed(tpx_error *err, const char *what, const tpx_error *e);
double rtu_ival(int64_t i, int64_t salt);
double rtu_rval(int64_t i, int64_t salt);
int64_t rtu_numel(const int64_t *shape, int ndim);
void rtu_box_get(const double *full, const int64_t *shape, int ndim,
                 const tpx_slice *s, double *out);
tpx_dtype rtu_dt_of(const rt_arg *a);
uint16_t rtu_to_bf16(float f);
float rtu_from_bf16(uint16_t h);
void rtu_put(void *buf, tpx_dtype t, int64_t i, double v);
double rtu_get(const void *buf, tpx_dtype t, int64_t i);
tpx_tensor rtu_talloc(tpx_dtype t, int ndim, const int64_t *shape);
int64_t rtu_tp_coord(const tpx_sharding *sh, tpx_mesh_comm *mc);
tpx_status rtu_act_slice(const tpx_sharding *sh, int64_t me, tpx_placement pl,
                         const int64_t *shape, int ndim, tpx_slice *s,
                         tpx_error *e);
tpx_status rtu_piece_of(const tpx_sharding *sh, tpx_mesh_comm *mc,
                        tpx_placement pl, const double *full,
                        const int64_t *shape, int ndim, double *out,
                        int64_t *local_shape, tpx_error *e);
void rtu_xrun(blk *b, int64_t mod, tpx_transition_side side, int bwd,
              const tpx_placement *arrived, const int64_t *shape,
              const tpx_tensor *in, tpx_tensor *out);
int64_t rtu_find_module(const tpx_sharding *sh, const char *fqn);
void rtu_cmp(blk *b, const char *what, const float *got, const double *ref,
             int64_t n);
int64_t rtu_param_box(blk *b, const char *fqn, tpx_slice *s, int64_t *gshape);
void rtu_lin_fwd(const float *x, const double *W, int64_t rows, int64_t O,
                 int64_t In, float *y);
void rtu_lin_bwd(const float *dy, const float *x, const double *W, int64_t rows,
                 int64_t O, int64_t In, float *dx, float *dW);
void rtu_cmpd(tpx_error *err, const char *what, double got, double want,
              double tol);

#endif
