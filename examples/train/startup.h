/* startup.h — tpx-train's watchdog for the MPI phases no timeout covers.
 *
 * MPI_Init and MPI_Finalize wait for every process of the job (as does
 * the MPI_Bcast of --dump-grads' check), with no timeout of their own, and a
 * call stuck in them cannot be returned from: a rank stopped during start-up
 * would hang the rest of the job there for good. So tpx-train runs each such
 * phase under this watchdog, a thread that, when the phase has not completed
 * within the collective timeout (TPX_COMM_TIMEOUT, else 600 s), prints
 *   tpx-train: rank R: start-up phase MPI_Init did not complete within N s
 *   (...)
 * and ends the process with _exit(3). The stuck call goes with the
 * process; mpirun then ends the rest of the job, the stopped rank
 * included. The phases tpx times itself (the world's MPI_Comm_dup, the
 * mesh dims' splits, every collective) return TPX_TIMEOUT instead, and
 * tpx-train ends the job with MPI_Abort (main.c); the watchdog stays
 * behind them as a backstop. This lives in the program, not in libtpx:
 * the library never exits.
 *
 * For tests: TPX_TRAIN_TEST_STOP=R:PHASE makes rank R (the launcher's rank
 * number) stop itself with SIGSTOP as it enters PHASE ("MPI_Init",
 * "world", "dump-grads", "MPI_Finalize"), as a hung rank would. */
#ifndef TR_STARTUP_H
#define TR_STARTUP_H

typedef struct tr_watchdog tr_watchdog;

/* A started watchdog (no phase armed); NULL when its thread could not
 * start (the run goes on without one). */
tr_watchdog *tr_watchdog_start(double timeout_s);
/* This rank enters `phase` (a static string, e.g. "start-up phase
 * MPI_Init"): past timeout + extra_s seconds the process ends. `test_name`
 * is the phase's name for TPX_TRAIN_TEST_STOP. NULL w: only the test
 * stop. */
void tr_watchdog_enter(tr_watchdog *w, const char *phase, const char *test_name,
                       double extra_s);
/* The phase completed. */
void tr_watchdog_leave(tr_watchdog *w);
/* The rank number for messages once MPI knows it (before: the
 * launcher's). */
void tr_watchdog_set_rank(tr_watchdog *w, int rank);
/* Stop the thread and free w (NULL: no-op). */
void tr_watchdog_stop(tr_watchdog *w);

#endif
