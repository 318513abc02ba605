/* barrier.c — spin, yield, then futex-sleep barrier with a timed wait and a
 * cancel (see comm/barrier.h). */
#include "comm/barrier.h"

#include <limits.h>
#include <sched.h>
#include <time.h>

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

#define CANCELLED 0x80000000u

void tpx__barrier_init(tpx__barrier *b, unsigned n) {
  atomic_init(&b->state, 0);
  atomic_init(&b->wake, 0);
  b->n = n;
}

static void wake_all(tpx__barrier *b) {
  atomic_fetch_add_explicit(&b->wake, 1, memory_order_release);
#if TPX_HAVE_FUTEX
  syscall(SYS_futex, (void *)&b->wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL,
          0);
#endif
}

/* Sleep until b->wake moves from w or timeout_ms passes (< 0: no limit). */
static void sleep_on(tpx__barrier *b, unsigned w, int timeout_ms) {
#if TPX_HAVE_FUTEX
  struct timespec ts, *tp = NULL;
  if (timeout_ms >= 0) {
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
    tp = &ts;
  }
  syscall(SYS_futex, (void *)&b->wake, FUTEX_WAIT_PRIVATE, w, tp, NULL, 0);
#else
  (void)b;
  (void)w;
  (void)timeout_ms;
  sched_yield();
#endif
}

int tpx__barrier_arrive(tpx__barrier *b, uint32_t *gen) {
  uint64_t s = atomic_load_explicit(&b->state, memory_order_acquire);
  for (;;) {
    uint32_t g = (uint32_t)(s >> 32), a = (uint32_t)s;
    if (a & CANCELLED)
      return -1;
    int last = a + 1 >= b->n;
    uint64_t ns = last ? (uint64_t)(g + 1) << 32 : s + 1;
    if (atomic_compare_exchange_weak_explicit(
            &b->state, &s, ns, memory_order_acq_rel, memory_order_acquire)) {
      *gen = g;
      if (last && b->n > 1)
        wake_all(b);
      return last;
    }
  }
}

/* 1 passed, -1 cancelled, 0 neither yet. */
static int passed(tpx__barrier *b, uint32_t gen) {
  uint64_t s = atomic_load_explicit(&b->state, memory_order_acquire);
  if ((uint32_t)(s >> 32) != gen)
    return 1;
  return ((uint32_t)s & CANCELLED) ? -1 : 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int tpx__barrier_wait_gen(tpx__barrier *b, uint32_t gen, int timeout_ms) {
  int r;
  for (int i = 0; i < 200; i++) {
    if ((r = passed(b, gen)) != 0)
      return r;
    CPU_RELAX();
  }
  for (int i = 0; i < 20; i++) {
    if ((r = passed(b, gen)) != 0)
      return r;
    sched_yield();
  }
  double end = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
  for (;;) {
    unsigned w = atomic_load_explicit(&b->wake, memory_order_acquire);
    if ((r = passed(b, gen)) != 0)
      return r;
    int left = -1;
    if (timeout_ms >= 0) {
      double rem = end - now_ms();
      if (rem <= 0)
        return 0;
      left = (int)rem + 1;
    }
    sleep_on(b, w, left);
  }
}

int tpx__barrier_cancel(tpx__barrier *b, uint32_t gen) {
  uint64_t s = atomic_load_explicit(&b->state, memory_order_acquire);
  for (;;) {
    if ((uint32_t)(s >> 32) != gen)
      return 0;
    if ((uint32_t)s & CANCELLED)
      return 1;
    if (atomic_compare_exchange_weak_explicit(&b->state, &s, s | CANCELLED,
                                              memory_order_acq_rel,
                                              memory_order_acquire)) {
      wake_all(b);
      return 1;
    }
  }
}

int tpx__barrier_wait(tpx__barrier *b) {
  if (b->n <= 1) {
    atomic_thread_fence(memory_order_seq_cst);
    return 0;
  }
  uint32_t gen = 0;
  int r = tpx__barrier_arrive(b, &gen);
  if (r != 0)
    return r > 0 ? 0 : -1;
  r = tpx__barrier_wait_gen(b, gen, -1);
  return r > 0 ? 0 : -1;
}
