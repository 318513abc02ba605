/* comm/clock.c — the mesh comm's clock: how long the calling thread spent
 * in the public TP, CP, runtime and MoE dispatch calls that communicate
 * over a mesh comm (tpx_mesh_comm_time), counted once per outermost call.
 * Not a profiler: the collectives themselves (tpx_comm_*) are not clocked,
 * and neither is the runtime's comm thread. */
#include <time.h>

#include "comm/comm_impl.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tpx__comm_clock *tpx__comm_clock_of(const tpx_comm *comm) {
  return comm ? comm->clock : NULL;
}

void tpx__comm_bind_clock(tpx_comm *comm, tpx__comm_clock *c) {
  if (comm)
    comm->clock = c;
}

double tpx__clock_enter(tpx__comm_clock *c) {
  if (!c)
    return 0.0;
  return c->depth++ == 0 ? now_s() : 0.0;
}

void tpx__clock_leave(tpx__comm_clock *c, tpx__clock_kind kind, double t0) {
  if (!c || --c->depth > 0)
    return;
  c->depth = 0;
  c->seconds[kind] += now_s() - t0;
  c->calls[kind]++;
}
