/* dump.h — the --dump-params / --dump-grads writer (dump.c). */
#ifndef TPX_TRAIN_DUMP_H
#define TPX_TRAIN_DUMP_H
#include "glue.h"
#include "outfile.h"

/* Rank 0 opens `path` (a temporary, renamed into place by tr_dump_close:
 * outfile.h) and writes the header of a file holding every non-tied
 * parameter in f32, once (steps 0, named as the parameters) or for each
 * of `steps` steps k (named PARAM@k); the other ranks get an unopened
 * *out and TPX_OK. tr_dump_close follows either way. */
tpx_status tr_dump_open(const char *path, const tpx_model *model, int64_t steps,
                        tr_rank *r, tr_file *out, tpx_error *err);
/* Append every non-tied parameter (grads 0) or its gradient (grads 1),
 * gathered, to f (rank 0; unopened elsewhere). Collective: every rank joins
 * each gather even after an error (s, returned unless a new one comes). A
 * write error (rank 0 alone) goes to *ws, not to the returned status, so
 * it never takes rank 0 out of collectives the other ranks still run. */
tpx_status tr_dump_append(tr_file *f, const tpx_model *model, tr_rank *r,
                          int grads, tpx_status s, tpx_status *ws,
                          tpx_error *err);
/* s TPX_OK: publish f under its final name (a failure becomes the
 * status); else drop the temporary, leaving the final name as it was, and
 * return s. Nothing on ranks other than 0. */
tpx_status tr_dump_close(tr_file *f, tpx_status s, tpx_error *err);
/* --dump-params: the gathered parameters after the last step. */
tpx_status tr_dump_params(const char *path, const tpx_model *model, tr_rank *r,
                          tpx_error *err);
#endif
