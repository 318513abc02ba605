/* glue_impl.h — the part of a rank's glue both implementations share (the
 * TP side: sharding, mesh comm, rank). Each glue's struct tr_rank starts
 * with a tr_tp, so glue_tp.c can serve both. */
#ifndef TPX_TRAIN_GLUE_IMPL_H
#define TPX_TRAIN_GLUE_IMPL_H
#include "glue.h"

typedef struct tr_tp {
  const tpx_model *model;
  const tpx_sharding *sh;
  tpx_mesh_comm *mc; /* times its own calls (tpx_mesh_comm_time) */
  int64_t rank;
  int64_t embed, m_embed;
  /* context parallelism: the cp group (the mesh comm's cp dim; NULL at
   * cp 1), this rank's place in it and how the sequence is cut */
  tpx_comm *cp;
  tr_cp cpi;
  tpx_comm *dp_cp; /* the loss's average: the mesh comm's dp_cp view */
} tr_tp;

/* The rank's runtime; NULL in tpx-train-ref (glue_local.c). */
tpx_runtime *tr_rank_runtime(const tr_rank *r);

/* Fill the shared part (creates the mesh comm). */
tpx_status tr_tp_init(tr_tp *tp, const tr_rank_setup *su, tpx_error *err);
void tr_tp_fini(tr_tp *tp);
#endif
