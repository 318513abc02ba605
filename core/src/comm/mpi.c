/* mpi.c — the `mpi` backend: one rank per process, Open MPI collectives.
 *
 * Every tpx world duplicates the caller's MPI communicator (errors return
 * instead of aborting), sub-groups come from MPI_Comm_split keyed by the
 * group's first rank. f16 / bf16 reductions are widened to f32 in a
 * temporary, reduced, divided (avg) and rounded once, so results match the
 * local backend bit for bit. Counts beyond INT_MAX are refused (MPI counts
 * are int). Built as a stub returning TPX_UNSUPPORTED without MPI.
 *
 * Failure: every collective is the non-blocking MPI call plus a wait that
 * polls it against the comm's timeout (tpx_comm_set_timeout). Past it, the
 * waiting rank asks the group who is there (a point-to-point message to
 * and from every member, for a grace of up to 2 s: the members that wait
 * too answer, a hung or absent one does not) and returns TPX_TIMEOUT
 * naming the collective, the mesh dim and the rank(s) that did not arrive.
 * The comm is then broken: the pending request cannot be cancelled (MPI
 * forbids it for collectives), so its buffers stay owned by MPI (a
 * temporary of ours is leaked on purpose) and every later call fails at
 * once. The program should end the job (tpx-train calls MPI_Abort).
 *
 * Start-up is under the same timeout where MPI allows it: the world's
 * MPI_Comm_dup is MPI_Comm_idup polled against it, and a split first
 * meets the group in a timed barrier (MPI has no non-blocking split; a
 * rank that stops between that barrier and MPI_Comm_split still hangs the
 * others there). MPI_Init_thread, when tpx calls it, is not: a call stuck
 * in it cannot be returned from, so a program that needs a deadline there
 * initialises MPI itself under a watchdog (tpx-train does). */
#include "tpx_config.h"

#include <stdlib.h>

#include "comm/comm_impl.h"

#if TPX_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "device/elem.h"

typedef struct mctx {
  MPI_Comm comm;
  int is_world;   /* counts towards finalizing MPI if tpx initialised it */
  tpx_comm *self; /* the handle (timeout and mesh dim for messages) */
  int rank, size;
  int *world_rank; /* [size] rank of each member in the tpx world */
  int64_t seq;     /* collectives started on this comm */
  int broken;      /* a collective failed or timed out: refuse the rest */
  char why[TPX_ERROR_MESSAGE_SIZE];
} mctx;

/* The point-to-point tag of the timeout's roll call (tpx's own duplicate
 * communicator carries no other point-to-point traffic). */
#define ROLL_TAG 0x7478

/* Process-wide because MPI itself is: MPI_Init and MPI_Finalize happen once
 * per process, so whether tpx initialised MPI, and how many tpx worlds still
 * use it, cannot live in any one communicator. The last world destroyed
 * finalizes MPI only if tpx initialised it. Not locked: like MPI_Init and
 * MPI_Finalize themselves, create and destroy mpi worlds from one thread. */
static int mpi_inited_by_tpx; /* tpx called MPI_Init_thread */
static int mpi_world_count;   /* live tpx mpi worlds */

static tpx_status mpi_fail(tpx_error *err, const char *what, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return tpx_error_set(err, TPX_COMM, "mpi %s failed: %s", what, msg);
}
#define MPI_TRY(what, call)                                                    \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != MPI_SUCCESS)                                                    \
      return mpi_fail(err, what, rc_);                                         \
  } while (0)

static MPI_Datatype mpi_type(tpx_dtype t) {
  switch (t) {
  case TPX_DTYPE_F64: return MPI_DOUBLE;
  case TPX_DTYPE_F32: return MPI_FLOAT;
  case TPX_DTYPE_I64: return MPI_INT64_T;
  case TPX_DTYPE_I32: return MPI_INT32_T;
  case TPX_DTYPE_I16: return MPI_INT16_T;
  case TPX_DTYPE_I8: return MPI_INT8_T;
  case TPX_DTYPE_U64: return MPI_UINT64_T;
  case TPX_DTYPE_U32: return MPI_UINT32_T;
  case TPX_DTYPE_U16: return MPI_UINT16_T;
  /* Pure data movement for the rest: same bytes. */
  case TPX_DTYPE_F16:
  case TPX_DTYPE_BF16: return MPI_UINT16_T;
  default: return MPI_UINT8_T;
  }
}

static MPI_Op mpi_op(tpx_reduce_op op) {
  return op == TPX_REDUCE_MAX   ? MPI_MAX
         : op == TPX_REDUCE_MIN ? MPI_MIN
                                : MPI_SUM;
}

static int is16(tpx_dtype t) {
  return t == TPX_DTYPE_F16 || t == TPX_DTYPE_BF16;
}

static tpx_status check_count(const char *what, size_t count, tpx_error *err) {
  if (count > (size_t)INT_MAX)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "mpi %s: count %zu exceeds INT_MAX (MPI counts are "
                         "int); split the buffer",
                         what, count);
  return TPX_OK;
}

static void widen(float *dst, const void *src, size_t n, tpx_dtype t) {
  const uint16_t *s = src;
  for (size_t i = 0; i < n; i++)
    dst[i] =
        t == TPX_DTYPE_F16 ? tpx__f16_to_f32(s[i]) : tpx__bf16_to_f32(s[i]);
}
static void narrow(void *dst, const float *src, size_t n, tpx_dtype t) {
  uint16_t *d = dst;
  for (size_t i = 0; i < n; i++)
    d[i] =
        t == TPX_DTYPE_F16 ? tpx__f32_to_f16(src[i]) : tpx__f32_to_bf16(src[i]);
}

static void mpi_destroy(void *ctx) {
  mctx *c = ctx;
  if (!c)
    return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin)
    MPI_Comm_free(&c->comm);
  if (c->is_world && --mpi_world_count == 0 && mpi_inited_by_tpx && !fin) {
    MPI_Finalize();
    mpi_inited_by_tpx = 0;
  }
  free(c->world_rank);
  free(c);
}

static const tpx_comm_iface mpi_iface;

/* `world`: the tpx world this comm is split from (NULL: comm is one). */
static tpx_status wrap(MPI_Comm comm, const mctx *world, tpx_comm **out,
                       tpx_error *err) {
  int rank = 0, size = 0, is_world = world == NULL;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  mctx *c = calloc(1, sizeof *c);
  int *wr = calloc((size_t)size, sizeof *wr);
  tpx_comm *h = c && wr ? tpx__comm_new(&mpi_iface, c, rank, size) : NULL;
  if (!h) {
    free(c);
    free(wr);
    MPI_Comm_free(&comm);
    return tpx_error_set(err, TPX_NO_MEMORY, "mpi communicator");
  }
  /* Members as world ranks, for messages. */
  for (int i = 0; i < size; i++) wr[i] = i;
  if (world) {
    MPI_Group g, wg;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(world->comm, &wg);
    MPI_Group_translate_ranks(g, size, wr, wg, wr);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
  }
  *c = (mctx){.comm = comm,
              .is_world = is_world,
              .self = h,
              .rank = rank,
              .size = size,
              .world_rank = wr};
  if (is_world)
    mpi_world_count++;
  *out = h;
  return TPX_OK;
}

/* ---- waiting with a timeout -------------------------------------------- */

static tpx_status broken_error(const mctx *c, const char *what,
                               tpx_error *err) {
  char where[64];
  return tpx_error_set(err, TPX_COMM,
                       "mpi %s over %s: the communicator is unusable after "
                       "an earlier failure: %s",
                       what, tpx__comm_where(c->self, where, sizeof where),
                       c->why);
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
}

/* Past the timeout: which members are not in this collective? Each member
 * that waits sends its collective count to every other and listens for
 * theirs, for up to `grace` seconds. Fills here[j] (1: member j answered
 * from the same collective). */
static void roll_call(mctx *c, double grace, int *here) {
  int n = c->size;
  /* got[n] is what this rank sends. */
  int64_t *got = calloc((size_t)n + 1, sizeof *got);
  MPI_Request *rr = calloc((size_t)n, sizeof *rr);
  MPI_Request *sr = calloc((size_t)n, sizeof *sr);
  for (int j = 0; j < n; j++) here[j] = j == c->rank;
  if (!got || !rr || !sr) {
    free(got);
    free(rr);
    free(sr);
    return;
  }
  got[n] = c->seq;
  for (int j = 0; j < n; j++) {
    rr[j] = sr[j] = MPI_REQUEST_NULL;
    if (j == c->rank)
      continue;
    MPI_Irecv(&got[j], 1, MPI_INT64_T, j, ROLL_TAG, c->comm, &rr[j]);
    MPI_Isend(&got[n], 1, MPI_INT64_T, j, ROLL_TAG, c->comm, &sr[j]);
  }
  double end = MPI_Wtime() + grace;
  int pending = n - 1;
  while (pending > 0 && MPI_Wtime() < end) {
    for (int j = 0; j < n; j++) {
      int done = 0;
      if (rr[j] == MPI_REQUEST_NULL)
        continue;
      MPI_Test(&rr[j], &done, MPI_STATUS_IGNORE);
      if (done) { /* MPI_Test set rr[j] to MPI_REQUEST_NULL */
        here[j] = got[j] == got[n];
        pending--;
      }
    }
    if (pending > 0)
      pause_us(1000);
  }
  int unfinished = 0;
  for (int j = 0; j < n; j++) {
    int done = 1;
    if (rr[j] != MPI_REQUEST_NULL) {
      MPI_Cancel(&rr[j]);
      MPI_Request_free(&rr[j]);
      unfinished = 1;
    }
    if (sr[j] != MPI_REQUEST_NULL)
      MPI_Test(&sr[j], &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Request_free(&sr[j]);
      unfinished = 1;
    }
  }
  /* A request still in flight may touch got: leave it to the process. */
  if (!unfinished)
    free(got);
  free(rr);
  free(sr);
}

/* Poll `req` until it completes (1), fails (-1, *rc = the MPI error) or
 * `limit` seconds pass (0: the request is still pending). */
static int poll_request(MPI_Request *req, double limit, int *rc) {
  double t0 = MPI_Wtime();
  for (long polls = 0;; polls++) {
    int done = 0;
    *rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (*rc != MPI_SUCCESS)
      return -1;
    if (done)
      return 1;
    if (polls < 2000)
      continue; /* a short collective: spin */
    if (MPI_Wtime() - t0 > limit)
      return 0;
    pause_us(polls < 20000 ? 20 : 200);
  }
}

/* Wait for the collective `req` (`what`) against the comm's timeout. On
 * a timeout the comm is broken and the request abandoned. */
static tpx_status mpi_wait(mctx *c, MPI_Request *req, const char *what,
                           tpx_error *err) {
  double limit = c->self->timeout_s;
  int rc = MPI_SUCCESS, got = poll_request(req, limit, &rc);
  if (got < 0) {
    c->broken = 1;
    snprintf(c->why, sizeof c->why, "mpi %s failed", what);
    return mpi_fail(err, what, rc);
  }
  if (got > 0)
    return TPX_OK;
  int n = c->size, *here = calloc((size_t)n, sizeof *here);
  char who[160] = "", where[64];
  size_t k = 0;
  int missing = 0;
  if (here) {
    roll_call(c, limit < 2.0 ? limit : 2.0, here);
    for (int j = 0; j < n && k + 16 < sizeof who; j++)
      if (!here[j])
        k += (size_t)snprintf(who + k, sizeof who - k, "%s%d",
                              missing++ ? ", " : "", c->world_rank[j]);
    free(here);
  }
  c->broken = 1;
  snprintf(c->why, sizeof c->why,
           "%s %s did not arrive at %s over %s within %g s (the collective "
           "timeout: TPX_COMM_TIMEOUT or tpx_comm_set_timeout)",
           missing == 1 ? "rank" : "ranks", missing ? who : "(unknown)", what,
           tpx__comm_where(c->self, where, sizeof where), limit);
  return tpx_error_set(err, TPX_TIMEOUT, "mpi %s over %s: %s", what, where,
                       c->why);
}

static void mpi_abort_comm(void *ctx, const char *why) {
  mctx *c = ctx;
  if (!c->broken) {
    c->broken = 1;
    snprintf(c->why, sizeof c->why, "rank %d failed: %s",
             c->world_rank[c->rank], why);
  }
}

/* Start of every collective: refuse on a broken comm, count it. */
#define MPI_BEGIN(what)                                                        \
  do {                                                                         \
    if (c->broken)                                                             \
      return broken_error(c, what, err);                                       \
    c->seq++;                                                                  \
  } while (0)

/* Start `call` (a non-blocking collective filling `req`) and wait. */
#define MPI_RUN(what, call)                                                    \
  do {                                                                         \
    MPI_Request req = MPI_REQUEST_NULL;                                        \
    int rc_ = (call);                                                          \
    if (rc_ != MPI_SUCCESS)                                                    \
      return mpi_fail(err, what, rc_);                                         \
    tpx_status st_ = mpi_wait(c, &req, what, err);                             \
    if (st_ != TPX_OK)                                                         \
      return st_;                                                              \
  } while (0)

static tpx_status mpi_all_gather(void *ctx, const void *send, void *recv,
                                 size_t count, tpx_dtype dtype,
                                 tpx_error *err) {
  mctx *c = ctx;
  tpx_status st = check_count("all_gather", count, err);
  if (st != TPX_OK)
    return st;
  MPI_BEGIN("all_gather");
  size_t bytes = count * tpx_dtype_size(dtype);
  const void *s = send == (unsigned char *)recv + (size_t)c->rank * bytes
                      ? MPI_IN_PLACE
                      : send;
  MPI_RUN("all_gather",
          MPI_Iallgather(s, (int)count, mpi_type(dtype), recv, (int)count,
                         mpi_type(dtype), c->comm, &req));
  return TPX_OK;
}

static tpx_status mpi_all_reduce(void *ctx, const void *send, void *recv,
                                 size_t count, tpx_dtype dtype,
                                 tpx_reduce_op op, tpx_error *err) {
  mctx *c = ctx;
  tpx_status st = check_count("all_reduce", count, err);
  if (st != TPX_OK)
    return st;
  MPI_BEGIN("all_reduce");
  if (is16(dtype)) {
    float *tmp = malloc((count ? count : 1) * sizeof(float));
    if (!tmp)
      return tpx_error_set(err, TPX_NO_MEMORY, "mpi all_reduce: %zu floats",
                           count);
    widen(tmp, send, count, dtype);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, tmp, (int)count, MPI_FLOAT,
                            mpi_op(op), c->comm, &req);
    if (rc != MPI_SUCCESS) {
      free(tmp);
      return mpi_fail(err, "all_reduce", rc);
    }
    float *keep = tmp;
    st = mpi_wait(c, &req, "all_reduce", err);
    if (st == TPX_OK) {
      if (op == TPX_REDUCE_AVG)
        tpx__divide(tmp, count, TPX_DTYPE_F32, c->size);
      narrow(recv, tmp, count, dtype);
    }
    if (st == TPX_OK || !c->broken)
      free(keep);
    return st;
  }
  MPI_RUN("all_reduce",
          MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                         mpi_type(dtype), mpi_op(op), c->comm, &req));
  if (op == TPX_REDUCE_AVG)
    tpx__divide(recv, count, dtype, c->size);
  return TPX_OK;
}

static tpx_status mpi_reduce_scatter(void *ctx, const void *send, void *recv,
                                     size_t count, tpx_dtype dtype,
                                     tpx_reduce_op op, tpx_error *err) {
  mctx *c = ctx;
  tpx_status st = check_count("reduce_scatter", count, err);
  if (st != TPX_OK)
    return st;
  MPI_BEGIN("reduce_scatter");
  int size = c->size;
  size_t total = count * (size_t)size, es = tpx_dtype_size(dtype);
  MPI_Request req = MPI_REQUEST_NULL;
  if (is16(dtype)) {
    float *tmp = malloc((total + count + 1) * sizeof(float));
    if (!tmp)
      return tpx__comm_fail_before(
          c->self, "reduce_scatter",
          tpx_error_set(err, TPX_NO_MEMORY, "mpi reduce_scatter: %zu floats",
                        total + count),
          err);
    widen(tmp, send, total, dtype);
    float *out = tmp + total;
    int rc = MPI_Ireduce_scatter_block(tmp, out, (int)count, MPI_FLOAT,
                                       mpi_op(op), c->comm, &req);
    if (rc != MPI_SUCCESS) {
      free(tmp);
      return mpi_fail(err, "reduce_scatter", rc);
    }
    st = mpi_wait(c, &req, "reduce_scatter", err);
    if (st == TPX_OK) {
      if (op == TPX_REDUCE_AVG)
        tpx__divide(out, count, TPX_DTYPE_F32, size);
      narrow(recv, out, count, dtype);
    }
    if (st == TPX_OK || !c->broken)
      free(tmp);
    return st;
  }
  /* recv inside send (in place): MPI forbids the overlap, go through a
   * temporary. */
  const unsigned char *s = send;
  unsigned char *r = recv;
  int overlap = r < s + total * es && s < r + count * es;
  void *dst = recv;
  if (overlap && count > 0) {
    dst = malloc(count * es);
    if (!dst)
      return tpx__comm_fail_before(
          c->self, "reduce_scatter",
          tpx_error_set(err, TPX_NO_MEMORY, "mpi reduce_scatter"), err);
  }
  int rc = MPI_Ireduce_scatter_block(send, dst, (int)count, mpi_type(dtype),
                                     mpi_op(op), c->comm, &req);
  if (rc != MPI_SUCCESS) {
    if (dst != recv)
      free(dst);
    return mpi_fail(err, "reduce_scatter", rc);
  }
  st = mpi_wait(c, &req, "reduce_scatter", err);
  if (dst != recv) {
    if (st == TPX_OK)
      memcpy(recv, dst, count * es);
    if (st == TPX_OK || !c->broken)
      free(dst);
  }
  if (st != TPX_OK)
    return st;
  if (op == TPX_REDUCE_AVG)
    tpx__divide(recv, count, dtype, size);
  return TPX_OK;
}

static tpx_status mpi_broadcast(void *ctx, const void *send, void *recv,
                                size_t count, tpx_dtype dtype, int root,
                                tpx_error *err) {
  mctx *c = ctx;
  tpx_status st = check_count("broadcast", count, err);
  if (st != TPX_OK)
    return st;
  MPI_BEGIN("broadcast");
  if (c->rank == root && send != recv && count > 0)
    memcpy(recv, send, count * tpx_dtype_size(dtype));
  MPI_RUN("broadcast",
          MPI_Ibcast(recv, (int)count, mpi_type(dtype), root, c->comm, &req));
  return TPX_OK;
}

static tpx_status mpi_all_to_all(void *ctx, const void *send, void *recv,
                                 size_t count, tpx_dtype dtype,
                                 tpx_error *err) {
  mctx *c = ctx;
  tpx_status st = check_count("all_to_all", count, err);
  if (st != TPX_OK)
    return st;
  MPI_BEGIN("all_to_all");
  MPI_RUN("all_to_all",
          MPI_Ialltoall(send, (int)count, mpi_type(dtype), recv, (int)count,
                        mpi_type(dtype), c->comm, &req));
  return TPX_OK;
}

static tpx_status mpi_barrier(void *ctx, tpx_error *err) {
  mctx *c = ctx;
  MPI_BEGIN("barrier");
  MPI_RUN("barrier", MPI_Ibarrier(c->comm, &req));
  return TPX_OK;
}

/* MPI_Comm_split blocks with no timeout, so the group meets first in a
 * timed barrier ("split"): a rank that is not there is named within the
 * timeout, as for any collective, and the world is broken. */
static tpx_status mpi_split(tpx_comm *world, const int64_t *group, int gsize,
                            int index, tpx_comm **out, tpx_error *err) {
  mctx *c = world->ctx;
  MPI_Comm sub;
  (void)gsize;
  MPI_BEGIN("split");
  MPI_RUN("split", MPI_Ibarrier(c->comm, &req));
  MPI_TRY("MPI_Comm_split",
          MPI_Comm_split(c->comm, (int)group[0], index, &sub));
  return wrap(sub, c, out, err);
}

static const tpx_comm_iface mpi_iface = {
    .name = "mpi",
    .split = mpi_split,
    .destroy = mpi_destroy,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .all_reduce = mpi_all_reduce,
    .broadcast = mpi_broadcast,
    .all_to_all = mpi_all_to_all,
    .barrier = mpi_barrier,
    .abort = mpi_abort_comm,
    .has_avg = 1,
};

tpx_status tpx_comm_create_mpi(const void *mpi_comm, tpx_comm **out,
                               tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "create_mpi: out is NULL");
  *out = NULL;
  double timeout = 600;
  tpx_status st = tpx__comm_env_timeout(&timeout, err);
  if (st != TPX_OK)
    return st;
  int flag = 0;
  MPI_Finalized(&flag);
  if (flag)
    return tpx_error_set(err, TPX_COMM,
                         "create_mpi: MPI was already finalized");
  MPI_Initialized(&flag);
  if (!flag) {
    int provided = 0;
    MPI_TRY("MPI_Init_thread",
            MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
    mpi_inited_by_tpx = 1;
  }
  MPI_Comm base = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
  /* Where MPI writes the duplicate once every rank is there: left to MPI
   * (leaked) when the timeout passes first. */
  MPI_Comm *dup = malloc(sizeof *dup);
  if (!dup)
    return tpx_error_set(err, TPX_NO_MEMORY, "create_mpi");
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(base, dup, &req);
  int got = rc == MPI_SUCCESS ? poll_request(&req, timeout, &rc) : -1;
  if (got < 0) {
    free(dup);
    return mpi_fail(err, "MPI_Comm_idup", rc);
  }
  if (got == 0) {
    int rank = -1, size = 0;
    MPI_Comm_rank(base, &rank);
    MPI_Comm_size(base, &size);
    return tpx_error_set(err, TPX_TIMEOUT,
                         "mpi create_mpi: rank %d: start-up phase "
                         "MPI_Comm_dup (the world communicator) did not "
                         "complete within %g s: one of the %d ranks has not "
                         "reached it (stopped, hung or still starting; the "
                         "collective timeout: TPX_COMM_TIMEOUT); the request "
                         "is left to MPI: end the job",
                         rank, timeout, size);
  }
  MPI_Comm d = *dup;
  free(dup);
  return wrap(d, NULL, out, err);
}

int tpx__mpi_thread_multiple(void) {
  int init = 0, fin = 0, provided = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin)
    return 0;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

#else /* !TPX_HAVE_MPI */

int tpx__mpi_thread_multiple(void) { return 0; }

tpx_status tpx_comm_create_mpi(const void *mpi_comm, tpx_comm **out,
                               tpx_error *err) {
  (void)mpi_comm;
  if (out)
    *out = NULL;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "the mpi backend is not built: libtpx was configured "
                       "without Open MPI (install it and reconfigure with "
                       "-Dmpi=enabled)");
}

#endif
