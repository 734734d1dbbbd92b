/*===- thread_pool.c - A fork-join pool for kernel grids ----------------===*/

#include "thread_pool.h"

#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

/* How long a worker that finished a grid polls for the next before it
 * sleeps, and how long the caller polls for the workers to finish before
 * it sleeps: a sleeping thread's wake-up took 7-60 us (34 on average) on
 * this project's 2-core VM, as much as 5% of a 16K-token decode. Workers
 * of a pool with more threads than online CPUs do not poll: idle ones
 * would take the CPUs from those still in the grid. */
enum { WORKER_POLL_NS = 100000, CALLER_POLL_NS = 500000 };
/* Polls past this long yield the CPU between reads, so that threads
 * outnumbering the cores still get to run the grid. */
enum { PAUSE_POLL_NS = 10000 };

struct tq_thread_pool {
  tq_allocator_v0 allocator;
  uint32_t num_workers;
  pthread_t *workers;
  pthread_mutex_t mutex;
  pthread_cond_t wake;
  pthread_cond_t done;
  /* The current grid; generation changes when a new one is posted
   * (written under the mutex; polled without it). */
  atomic_uint_fast64_t generation;
  tq_grid_fn fn;
  void *ctx;
  uint64_t n;
  atomic_uint_fast64_t next;
  /* Workers that have taken up the current grid, and those still inside
   * it. A grid ends only when every worker has taken it up and left: a
   * worker waking late must not carry this grid's fn and ctx into the
   * next one (whose `next` counter it would then share). */
  uint32_t arrived;
  uint32_t active;
  /* How long an idle worker polls (WORKER_POLL_NS, or 0). */
  uint64_t worker_poll_ns;
  /* Workers yet to finish the current grid (polled by the caller). */
  atomic_uint_fast32_t unfinished;
  atomic_bool stopping;
};

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* Polls until done(pool, arg) or `ns` pass; whether done. */
static bool poll_for(const tq_thread_pool *pool, uint64_t arg, uint64_t ns,
                     bool (*done)(const tq_thread_pool *, uint64_t)) {
  if (ns == 0)
    return done(pool, arg);
  const uint64_t start = now_ns();
  bool yield = false;
  for (unsigned i = 1;; ++i) {
    if (done(pool, arg))
      return true;
    if (yield)
      sched_yield();
    else
      cpu_relax();
    if (i % 64 == 0) {
      const uint64_t waited = now_ns() - start;
      if (waited > ns)
        return false;
      yield = waited > PAUSE_POLL_NS;
    }
  }
}

static bool grid_posted(const tq_thread_pool *pool, uint64_t seen) {
  return atomic_load_explicit(&pool->generation, memory_order_acquire) !=
             seen ||
         atomic_load_explicit(&pool->stopping, memory_order_relaxed);
}

static bool workers_finished(const tq_thread_pool *pool, uint64_t unused) {
  (void)unused;
  return atomic_load_explicit(&pool->unfinished, memory_order_acquire) == 0;
}

/* Claims and runs grid indices until none are left. */
static void drain(tq_thread_pool *pool, tq_grid_fn fn, void *ctx,
                  uint64_t n) {
  for (;;) {
    uint64_t i = atomic_fetch_add(&pool->next, 1);
    if (i >= n)
      return;
    fn(ctx, i);
  }
}

static void *worker_main(void *arg) {
  tq_thread_pool *pool = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->mutex);
  for (;;) {
    if (!grid_posted(pool, seen)) {
      pthread_mutex_unlock(&pool->mutex);
      poll_for(pool, seen, pool->worker_poll_ns, grid_posted);
      pthread_mutex_lock(&pool->mutex);
    }
    while (!pool->stopping && pool->generation == seen)
      pthread_cond_wait(&pool->wake, &pool->mutex);
    if (pool->stopping)
      break;
    seen = pool->generation;
    tq_grid_fn fn = pool->fn;
    void *ctx = pool->ctx;
    uint64_t n = pool->n;
    pool->arrived++;
    pool->active++;
    pthread_mutex_unlock(&pool->mutex);
    drain(pool, fn, ctx, n);
    pthread_mutex_lock(&pool->mutex);
    if (--pool->active == 0 && pool->arrived == pool->num_workers)
      pthread_cond_broadcast(&pool->done);
    atomic_fetch_sub_explicit(&pool->unfinished, 1, memory_order_release);
  }
  pthread_mutex_unlock(&pool->mutex);
  return NULL;
}

tq_status tq_thread_pool_create(uint32_t num_threads,
                                const tq_allocator_v0 *allocator,
                                tq_thread_pool **out_pool) {
  tq_thread_pool *pool =
      allocator->allocate(allocator->user, sizeof(*pool), _Alignof(max_align_t));
  if (!pool)
    return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                   "thread pool: cannot allocate its state");
  *pool = (tq_thread_pool){0};
  pool->allocator = *allocator;
  pool->num_workers = num_threads > 1 ? num_threads - 1 : 0;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  pool->worker_poll_ns =
      cpus > 0 && num_threads <= (uint32_t)cpus ? WORKER_POLL_NS : 0;
  atomic_init(&pool->next, 0);
  atomic_init(&pool->generation, 0);
  atomic_init(&pool->unfinished, 0);
  atomic_init(&pool->stopping, false);
  pthread_mutex_init(&pool->mutex, NULL);
  pthread_cond_init(&pool->wake, NULL);
  pthread_cond_init(&pool->done, NULL);
  if (pool->num_workers) {
    pool->workers = allocator->allocate(
        allocator->user, sizeof(pthread_t) * pool->num_workers,
        _Alignof(pthread_t));
    if (!pool->workers) {
      pool->num_workers = 0; /* none started: nothing to join */
      tq_thread_pool_destroy(pool);
      return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                     "thread pool: cannot allocate %u worker handles",
                     num_threads - 1);
    }
    for (uint32_t i = 0; i < pool->num_workers; ++i) {
      int error = pthread_create(&pool->workers[i], NULL, worker_main, pool);
      if (error != 0) {
        pool->num_workers = i;
        tq_thread_pool_destroy(pool);
        return tq_fail(TQ_STATUS_OUT_OF_MEMORY,
                       "thread pool: cannot start worker %u of %u: %s", i + 1,
                       num_threads - 1, strerror(error));
      }
    }
  }
  *out_pool = pool;
  return TQ_STATUS_OK;
}

void tq_thread_pool_destroy(tq_thread_pool *pool) {
  if (!pool)
    return;
  pthread_mutex_lock(&pool->mutex);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->mutex);
  for (uint32_t i = 0; i < pool->num_workers; ++i)
    pthread_join(pool->workers[i], NULL);
  pthread_cond_destroy(&pool->wake);
  pthread_cond_destroy(&pool->done);
  pthread_mutex_destroy(&pool->mutex);
  tq_allocator_v0 allocator = pool->allocator;
  if (pool->workers)
    allocator.release(allocator.user, pool->workers);
  allocator.release(allocator.user, pool);
}

void tq_thread_pool_run(tq_thread_pool *pool, uint64_t n, tq_grid_fn fn,
                        void *ctx) {
  if (n == 0)
    return;
  if (pool->num_workers == 0 || n == 1) {
    for (uint64_t i = 0; i < n; ++i)
      fn(ctx, i);
    return;
  }
  pthread_mutex_lock(&pool->mutex);
  pool->fn = fn;
  pool->ctx = ctx;
  pool->n = n;
  atomic_store(&pool->next, 0);
  pool->arrived = 0;
  atomic_store_explicit(&pool->unfinished, pool->num_workers,
                        memory_order_relaxed);
  atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->mutex);
  drain(pool, fn, ctx, n);
  /* Wait until every worker has taken up this grid and finished it:
   * polled first (the workers are usually at their last items), then
   * asleep. */
  poll_for(pool, 0, CALLER_POLL_NS, workers_finished);
  pthread_mutex_lock(&pool->mutex);
  while (pool->active > 0 || pool->arrived < pool->num_workers)
    pthread_cond_wait(&pool->done, &pool->mutex);
  pthread_mutex_unlock(&pool->mutex);
}
