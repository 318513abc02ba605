/* runtime/rt_queue.c — the runtime's comm thread: a FIFO of data-parallel
 * jobs run in submission order, so every rank issues its dp collectives in
 * the same order while its compute thread goes on. Without a thread the
 * jobs run inline at submit. Not a scheduler: one thread, no priorities. */
#include <string.h>

#include "runtime/rt_internal.h"

static void run_job(tpx__rt_job *job) {
  tpx_error e;
  memset(&e, 0, sizeof e);
  job->st = job->fn(job->arg, &e);
  job->err = e;
}

static void *thread_main(void *arg) {
  tpx__rt_queue *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
    if (!q->head)
      break; /* stop with an empty queue */
    tpx__rt_job *job = q->head;
    q->head = job->next;
    if (!q->head)
      q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    run_job(job);
    pthread_mutex_lock(&q->mu);
    job->done = 1;
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

tpx_status tpx__rt_queue_start(tpx__rt_queue *q, int threaded, tpx_error *err) {
  memset(q, 0, sizeof *q);
  if (!threaded)
    return TPX_OK;
  if (pthread_mutex_init(&q->mu, NULL) != 0)
    return tpx_error_set(err, TPX_INTERNAL,
                         "tpx_runtime_create: cannot make the comm thread's "
                         "mutex");
  if (pthread_cond_init(&q->cv, NULL) != 0) {
    pthread_mutex_destroy(&q->mu);
    return tpx_error_set(err, TPX_INTERNAL,
                         "tpx_runtime_create: cannot make the comm thread's "
                         "condition variable");
  }
  if (pthread_create(&q->thread, NULL, thread_main, q) != 0) {
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    return tpx_error_set(err, TPX_INTERNAL,
                         "tpx_runtime_create: cannot start the comm thread");
  }
  q->threaded = 1;
  return TPX_OK;
}

void tpx__rt_queue_stop(tpx__rt_queue *q) {
  if (!q->threaded)
    return;
  pthread_mutex_lock(&q->mu);
  q->stop = 1;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  q->threaded = 0;
}

void tpx__rt_queue_submit(tpx__rt_queue *q, tpx__rt_job *job) {
  job->done = 0;
  job->next = NULL;
  job->st = TPX_OK;
  if (!q->threaded) {
    run_job(job);
    job->done = 1;
    return;
  }
  pthread_mutex_lock(&q->mu);
  if (q->tail)
    q->tail->next = job;
  else
    q->head = job;
  q->tail = job;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

tpx_status tpx__rt_queue_wait(tpx__rt_queue *q, tpx__rt_job *job,
                              tpx_error *err) {
  if (q->threaded) {
    pthread_mutex_lock(&q->mu);
    while (!job->done) pthread_cond_wait(&q->cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
  }
  if (job->st != TPX_OK)
    return tpx_error_set(err, job->st, "%s", job->err.message);
  return TPX_OK;
}

tpx_status tpx__rt_queue_run(tpx__rt_queue *q,
                             tpx_status (*fn)(void *, tpx_error *), void *arg,
                             tpx_error *err) {
  tpx__rt_job job;
  memset(&job, 0, sizeof job);
  job.fn = fn;
  job.arg = arg;
  tpx__rt_queue_submit(q, &job);
  return tpx__rt_queue_wait(q, &job, err);
}
