// The CPU thread pool that runs the parallel loops of generated kernels (nnc_parallel_for).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "nnc/support/KernelAbi.h"

namespace nnc {

/// A fixed pool of N-1 worker threads; the thread that calls parallelFor() is the N-th.
/// Several threads may call parallelFor() at once (each call is its own job). A worker that
/// runs out of work polls for a new job for a short while (kSpin) before it sleeps on a
/// condition variable, so the back-to-back parallel loops of one run (microseconds apart)
/// cost no futex wake-up; an idle pool sleeps and takes no CPU from other work.
class ThreadPool {
public:
  /// `threads` >= 1 (1: no workers, every loop runs on the caller).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int threads() const { return threads_; }

  /// Runs body over [0, n) in chunks, the caller taking part, and returns when every chunk is
  /// done. Chunks shrink as the loop drains (guided: half the remaining share of each thread,
  /// at least 1/16 of a thread's share), so threads finish together with few chunk takes. A
  /// call made from inside a chunk runs serially.
  void parallelFor(ParallelBodyFn body, void *ctx, int64_t n);

  /// The process-wide pool with this many threads (0: all cores), created on first use.
  static ThreadPool *shared(int threads);
  /// The number of hardware threads (at least 1).
  static int hardwareThreads();

  /// The pool nnc_parallel_for uses on this thread (null: run loops serially).
  static ThreadPool *current();
  /// Sets the current pool for its lifetime (e.g. around Executable::run).
  class Scope {
  public:
    explicit Scope(ThreadPool *pool);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    ThreadPool *saved_;
  };

private:
  struct Job {
    ParallelBodyFn body;
    void *ctx;
    int64_t n, minChunk;
    int64_t next = 0; // the first iteration not taken yet; guarded by mutex_
    std::atomic<int64_t> done{0}; // iterations finished
  };
  /// How long a worker polls for work, and a caller for its last chunks, before sleeping.
  static constexpr std::chrono::microseconds kSpin{50};
  void workerLoop();
  /// Takes the next chunk [begin, end) of `job` (mutex_ held); removes the job from the
  /// queue when it was the last one.
  std::pair<int64_t, int64_t> takeChunk(Job *job);
  static void runChunk(const Job &job, std::pair<int64_t, int64_t> chunk);

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable workCv_; // workers: a job was queued, or stop
  std::condition_variable doneCv_; // callers: a chunk finished
  std::deque<Job *> jobs_;
  std::atomic<size_t> queued_{0}; // jobs_.size(), readable without the lock
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
};

} // namespace nnc

/// The entry point generated parallel loops call (passed to code generation as
/// CodegenOptions::parallelFor): runs on ThreadPool::current(), serially when there is none.
extern "C" void nnc_parallel_for(nnc::ParallelBodyFn body, void *ctx, int64_t n);
