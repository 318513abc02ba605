/* dump.h — the --dump-params / --dump-grads writer (dump.c). */
#ifndef TPX_TRAIN_DUMP_H
#define TPX_TRAIN_DUMP_H
#include <stdio.h>

#include "glue.h"

/* Rank 0 creates `path` and writes the header of a file holding every
 * non-tied parameter in f32, once (steps 0, named as the parameters) or
 * for each of `steps` steps k (named PARAM@k); the other ranks get NULL
 * and TPX_OK. */
tpx_status tr_dump_open(const char *path, const tpx_model *model, int64_t steps,
                        tr_rank *r, FILE **out, tpx_error *err);
/* Append every non-tied parameter (grads 0) or its gradient (grads 1),
 * gathered, to f (rank 0; f NULL elsewhere). Collective: every rank joins
 * each gather even after an error (s, returned unless a new one comes). A
 * write error (rank 0 alone) goes to *ws, not to the returned status, so
 * it never takes rank 0 out of collectives the other ranks still run. */
tpx_status tr_dump_append(FILE *f, const char *path, const tpx_model *model,
                          tr_rank *r, int grads, tpx_status s, tpx_status *ws,
                          tpx_error *err);
/* Close f (NULL: nothing); a close error becomes the status unless s is. */
tpx_status tr_dump_close(FILE *f, const char *path, tpx_status s,
                         tpx_error *err);
/* --dump-params: the gathered parameters after the last step. */
tpx_status tr_dump_params(const char *path, const tpx_model *model, tr_rank *r,
                          tpx_error *err);
#endif
