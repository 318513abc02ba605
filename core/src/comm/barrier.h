/* comm/barrier.h — a reusable barrier for the threads of a local group.
 *
 * Threads often outnumber cores (4 ranks on 2 cores in CI), so a waiter
 * spins only briefly, then yields, then sleeps on a futex; pure spinning
 * would steal the core from the rank everyone waits for. Not a
 * communicator: local.c uses it. */
#ifndef TPX_COMM_BARRIER_H
#define TPX_COMM_BARRIER_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct tpx__barrier {
  _Alignas(64) atomic_uint arrived; /* ranks in the current generation */
  _Alignas(64) atomic_uint gen;     /* bumped by the last arriver */
  unsigned n;
} tpx__barrier;

void tpx__barrier_init(tpx__barrier *b, unsigned n);
/* Blocks until all n threads called it; reusable right away. The last
 * arriver's release pairs with everyone's acquire, so memory written before
 * the barrier is visible after it. */
void tpx__barrier_wait(tpx__barrier *b);

#endif /* TPX_COMM_BARRIER_H */
