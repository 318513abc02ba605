/* barrier.c — spin, yield, then futex-sleep barrier (see comm/barrier.h). */
#include "comm/barrier.h"

#include <limits.h>
#include <sched.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TPX_HAVE_FUTEX 1
#else
#define TPX_HAVE_FUTEX 0
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

void tpx__barrier_init(tpx__barrier *b, unsigned n) {
  atomic_init(&b->arrived, 0);
  atomic_init(&b->gen, 0);
  b->n = n;
}

#if TPX_HAVE_FUTEX
static void futex_wait(atomic_uint *addr, unsigned val) {
  syscall(SYS_futex, (void *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake_all(atomic_uint *addr) {
  syscall(SYS_futex, (void *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL,
          0);
}
#endif

void tpx__barrier_wait(tpx__barrier *b) {
  if (b->n <= 1) {
    atomic_thread_fence(memory_order_seq_cst);
    return;
  }
  unsigned g = atomic_load_explicit(&b->gen, memory_order_acquire);
  if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) ==
      b->n - 1) {
    /* Reset before releasing: nobody re-enters until gen moves. */
    atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->gen, 1, memory_order_release);
#if TPX_HAVE_FUTEX
    futex_wake_all(&b->gen);
#endif
    return;
  }
  for (int i = 0; i < 200; i++) {
    if (atomic_load_explicit(&b->gen, memory_order_acquire) != g)
      return;
    CPU_RELAX();
  }
  for (int i = 0; i < 20; i++) {
    if (atomic_load_explicit(&b->gen, memory_order_acquire) != g)
      return;
    sched_yield();
  }
  while (atomic_load_explicit(&b->gen, memory_order_acquire) == g) {
#if TPX_HAVE_FUTEX
    futex_wait(&b->gen, g);
#else
    sched_yield();
#endif
  }
}
