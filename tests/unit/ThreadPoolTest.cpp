// The thread pool behind nnc_parallel_for: coverage, nesting, concurrent callers.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ThreadPool.h"

using namespace nnc;

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(int64_t n) : hits(static_cast<size_t>(n)) {}
};

void countBody(void *ctx, int64_t begin, int64_t end) {
  auto *c = static_cast<Counts *>(ctx);
  for (int64_t i = begin; i < end; ++i)
    c->hits[i]++;
}

struct Nested {
  Counts *inner;
  std::atomic<int> outer{0};
};

void nestedBody(void *ctx, int64_t begin, int64_t end) {
  auto *n = static_cast<Nested *>(ctx);
  for (int64_t i = begin; i < end; ++i) {
    n->outer++;
    nnc_parallel_for(countBody, n->inner, 10); // from inside a chunk: serial
  }
}

} // namespace

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1001}) {
      Counts c(n);
      pool.parallelFor(countBody, &c, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(c.hits[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
    }
  }
}

TEST(ThreadPool, NestedLoopsRunSerially) {
  ThreadPool pool(4);
  ThreadPool::Scope scope(&pool);
  Counts inner(10);
  Nested n{&inner};
  nnc_parallel_for(nestedBody, &n, 16);
  EXPECT_EQ(n.outer.load(), 16);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(inner.hits[i].load(), 16);
}

TEST(ThreadPool, ConcurrentCallers) {
  ThreadPool *pool = ThreadPool::shared(3);
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      ThreadPool::Scope scope(pool);
      for (int rep = 0; rep < 200; ++rep) {
        Counts c(257);
        nnc_parallel_for(countBody, &c, 257);
        for (auto &h : c.hits)
          if (h.load() != 1)
            bad++;
      }
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(ThreadPool, NoPoolMeansSerial) {
  ASSERT_EQ(ThreadPool::current(), nullptr);
  Counts c(100);
  nnc_parallel_for(countBody, &c, 100);
  for (auto &h : c.hits)
    EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(ThreadPool::shared(2), ThreadPool::shared(2));
  EXPECT_GE(ThreadPool::hardwareThreads(), 1);
}
