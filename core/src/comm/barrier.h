/* comm/barrier.h — a reusable barrier for the threads of a local group,
 * with a timed wait and a cancel.
 *
 * Threads often outnumber cores (4 ranks on 2 cores in CI), so a waiter
 * spins only briefly, then yields, then sleeps on a futex; pure spinning
 * would steal the core from the rank everyone waits for. A waiter that
 * gives up (its collective timed out, or the world was aborted) cancels
 * the generation it waits in, atomically with the arrivals: either the
 * generation had already passed (everyone is in the collective: the waiter
 * goes on) or nobody will ever pass it (every waiter sees the cancel).
 * Not a communicator: local.c uses it. */
#ifndef TPX_COMM_BARRIER_H
#define TPX_COMM_BARRIER_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct tpx__barrier {
  /* generation << 32 | ranks arrived in it (bit 31: cancelled) */
  _Alignas(64) _Atomic uint64_t state;
  _Alignas(64) atomic_uint wake; /* futex word: bumped on release, cancel */
  unsigned n;
} tpx__barrier;

void tpx__barrier_init(tpx__barrier *b, unsigned n);
/* Blocks until all n threads called it; reusable right away. The last
 * arriver's release pairs with everyone's acquire, so memory written before
 * the barrier is visible after it. Returns 0, or -1 when the generation was
 * cancelled. */
int tpx__barrier_wait(tpx__barrier *b);

/* The parts of a timed wait. arrive: 1 when this call released the
 * generation, 0 when the caller must wait for generation *gen, -1 when the
 * barrier is cancelled. wait_gen: 1 once *gen passed, -1 when it was
 * cancelled, 0 when timeout_ms (>= 0) passed first. cancel: 1 when the
 * generation is cancelled now (nobody passes it), 0 when it had already
 * passed (the caller is through after all). */
int tpx__barrier_arrive(tpx__barrier *b, uint32_t *gen);
int tpx__barrier_wait_gen(tpx__barrier *b, uint32_t gen, int timeout_ms);
int tpx__barrier_cancel(tpx__barrier *b, uint32_t gen);

#endif /* TPX_COMM_BARRIER_H */
