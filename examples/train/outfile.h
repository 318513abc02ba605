/* outfile.h — tpx-train's output that either reaches its reader whole or
 * fails loudly (outfile.c): files written beside their final name and
 * renamed into place, and standard output checked before exit 0. */
#ifndef TPX_TRAIN_OUTFILE_H
#define TPX_TRAIN_OUTFILE_H
#include <stdio.h>
#include <tpx/tpx.h>

/* A file being written: `f` writes a temporary beside the final name,
 * which tr_file_commit renames into place, so a full disk or a killed run
 * never leaves a partial file at that name (the checkpoint writer's
 * temporary + fsync + rename). A path that exists and is not a regular
 * file (a device such as /dev/null, a FIFO) cannot be replaced: it is
 * written directly (tmp NULL). */
typedef struct tr_file {
  FILE *f;      /* NULL: not open */
  char *path;   /* the name the user gave */
  char *target; /* the file renamed over: path, or the file its link names */
  char *tmp;    /* the temporary, NULL when writing path directly */
} tr_file;

/* Open `path` for writing as above; an error names the path and the
 * reason. *o is zeroed first (tr_file_discard after a failure is safe). */
tpx_status tr_file_open(tr_file *o, const char *path, tpx_error *err);
/* Flush, fsync and close the file, rename it to its final name and fsync
 * the directory; on any failure the temporary is removed and the final
 * name left as it was. No-op when o is not open. */
tpx_status tr_file_commit(tr_file *o, tpx_error *err);
/* Close the file and remove the temporary (the final name untouched). */
void tr_file_discard(tr_file *o);

/* fflush(stdout), keeping in *first_errno (when still 0) the reason of
 * the first flush that fails: a later flush finds the buffer dropped and
 * says nothing. 0, or -1 when it failed. */
int tr_stdout_flush(int *first_errno);
/* At the end of the run: whether everything printed on stdout reached it;
 * TPX_IO with "cannot write output: REASON" (the first failure's) when
 * not (a full disk, a closed descriptor). */
tpx_status tr_stdout_check(int *first_errno, tpx_error *err);
#endif
