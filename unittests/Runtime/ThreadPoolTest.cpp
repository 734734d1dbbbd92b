//===- ThreadPoolTest.cpp - The runtime's fork-join pool ------------------===//
//
// Many short grids back to back, each with its context on the stack of a
// function that has returned before the next grid starts: every item of
// every grid must run exactly once, on its own grid's context. A worker
// that woke late and ran an old grid's function with the new grid's item
// counter would leave items of the new grid unrun (and, under ASan, read a
// dead stack frame).
//
//===----------------------------------------------------------------------===//

extern "C" {
#include "thread_pool.h"
}

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace {

struct Grid {
  std::atomic<int> hits[16];
  uint64_t n;
};

void countItem(void *ctx, uint64_t index) {
  Grid *grid = static_cast<Grid *>(ctx);
  if (index < grid->n)
    grid->hits[index].fetch_add(1);
  else
    grid->hits[15].fetch_add(100); // an index outside the grid
}

void *allocate(void *, size_t bytes, size_t) { return std::malloc(bytes); }
void release(void *, void *p) { std::free(p); }

/// One grid on this frame's stack; false when an item did not run exactly
/// once.
[[gnu::noinline]] bool runGrid(tq_thread_pool *pool, uint64_t n) {
  Grid grid;
  grid.n = n;
  for (auto &h : grid.hits)
    h.store(0);
  tq_thread_pool_run(pool, n, countItem, &grid);
  bool ok = grid.hits[15].load() == 0; // n <= 8: slot 15 stays unused
  for (uint64_t i = 0; i < n; ++i)
    ok = ok && grid.hits[i].load() == 1;
  return ok;
}

TEST(ThreadPool, ManyShortGridsRunEachItemOnce) {
  tq_allocator_v0 allocator = {TQ_ALLOCATOR_VERSION_0, sizeof(allocator),
                               nullptr, allocate, release};
  for (uint32_t threads : {2u, 4u, 8u}) {
    tq_thread_pool *pool = nullptr;
    ASSERT_EQ(tq_thread_pool_create(threads, &allocator, &pool), TQ_STATUS_OK);
    unsigned failures = 0;
    for (unsigned round = 0; round < 4000; ++round)
      failures += !runGrid(pool, 2 + round % 7);
    tq_thread_pool_destroy(pool);
    EXPECT_EQ(failures, 0u) << threads << " threads";
  }
}

// Workers poll for the next grid a while before they sleep, and the caller
// polls for the workers to finish before it sleeps (thread_pool.c). Grids
// spaced past the workers' polling, and items that outlast the caller's,
// take the sleeping paths: each item must still run exactly once.
TEST(ThreadPool, GridsAfterIdleGapsAndLongItemsRunEachItemOnce) {
  tq_allocator_v0 allocator = {TQ_ALLOCATOR_VERSION_0, sizeof(allocator),
                               nullptr, allocate, release};
  tq_thread_pool *pool = nullptr;
  ASSERT_EQ(tq_thread_pool_create(3, &allocator, &pool), TQ_STATUS_OK);
  unsigned failures = 0;
  for (unsigned round = 0; round < 40; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    failures += !runGrid(pool, 2 + round % 7);
  }
  Grid grid;
  grid.n = 6;
  for (auto &h : grid.hits)
    h.store(0);
  auto slowItem = [](void *ctx, uint64_t index) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    countItem(ctx, index);
  };
  tq_thread_pool_run(pool, grid.n, slowItem, &grid);
  for (uint64_t i = 0; i < grid.n; ++i)
    failures += grid.hits[i].load() != 1;
  tq_thread_pool_destroy(pool);
  EXPECT_EQ(failures, 0u);
}

} // namespace
