/*===- thread_pool.h - A fork-join pool for kernel grids ----------------===*
 *
 * Runs fn(ctx, i) for i in [0, n) on the pool's workers and the calling
 * thread, returning when all are done. One grid at a time per pool; the
 * pool belongs to one runtime object (no global state).
 *
 *===--------------------------------------------------------------------===*/

#ifndef TQ_RUNTIME_THREAD_POOL_H
#define TQ_RUNTIME_THREAD_POOL_H

#include "tq/tq_runtime.h"

typedef void (*tq_grid_fn)(void *ctx, uint64_t index);

typedef struct tq_thread_pool tq_thread_pool;

tq_status tq_thread_pool_create(uint32_t num_threads,
                                const tq_allocator_v0 *allocator,
                                tq_thread_pool **out_pool);
void tq_thread_pool_destroy(tq_thread_pool *pool);
void tq_thread_pool_run(tq_thread_pool *pool, uint64_t n, tq_grid_fn fn,
                        void *ctx);

#endif /* TQ_RUNTIME_THREAD_POOL_H */
