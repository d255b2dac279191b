// The thread pool and the nnc_parallel_for entry point that generated code calls.
#include "ThreadPool.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>

#include "nnc/ir/CpuTarget.h"
#include "nnc/support/Error.h"

namespace nnc {

namespace {
thread_local ThreadPool *tlsCurrentPool = nullptr;
/// >0 while this thread runs a chunk of a parallel loop: nested loops then run serially.
thread_local int tlsParallelDepth = 0;

/// Polls `ready` until it holds or `budget` has passed; true when it holds.
template <typename Pred> bool spinFor(std::chrono::microseconds budget, Pred ready) {
  auto deadline = std::chrono::steady_clock::now() + budget;
  for (int i = 0;; ++i) {
    if (ready())
      return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline)
      return ready();
  }
}

struct DepthGuard {
  DepthGuard() { ++tlsParallelDepth; }
  ~DepthGuard() { --tlsParallelDepth; }
};
} // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  for (int i = 1; i < threads_; ++i)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    stopping_ = true;
  }
  workCv_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

int ThreadPool::hardwareThreads() {
  return CpuTarget::hostCores();
}

ThreadPool *ThreadPool::shared(int threads) {
  if (threads <= 0)
    threads = hardwareThreads();
  static std::mutex m;
  // Keyed by process too: a forked child (the conformance runner forks per test) inherits the
  // parent's pools without their worker threads, so it builds its own. The parent's pools are
  // deliberately leaked in the child.
  static std::map<std::pair<pid_t, int>, ThreadPool *> pools;
  std::lock_guard<std::mutex> lock(m);
  ThreadPool *&p = pools[{getpid(), threads}];
  if (!p)
    p = new ThreadPool(threads); // lives until exit: generated code may run at any time
  return p;
}

ThreadPool *ThreadPool::current() { return tlsCurrentPool; }

ThreadPool::Scope::Scope(ThreadPool *pool) : saved_(tlsCurrentPool) { tlsCurrentPool = pool; }
ThreadPool::Scope::~Scope() { tlsCurrentPool = saved_; }

void ThreadPool::runChunk(const Job &job, std::pair<int64_t, int64_t> chunk) {
  DepthGuard depth;
  job.body(job.ctx, chunk.first, chunk.second);
}

std::pair<int64_t, int64_t> ThreadPool::takeChunk(Job *job) {
  int64_t remaining = job->n - job->next;
  int64_t size = std::min(remaining, std::max(job->minChunk, (remaining + 2 * threads_ - 1) /
                                                                 (2 * threads_)));
  std::pair<int64_t, int64_t> c{job->next, job->next + size};
  job->next += size;
  if (job->next == job->n) {
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
    queued_.store(jobs_.size(), std::memory_order_release);
  }
  return c;
}

void ThreadPool::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (!stop_ && jobs_.empty()) {
      lock.unlock();
      spinFor(kSpin, [&] {
        return queued_.load(std::memory_order_acquire) > 0 ||
               stopping_.load(std::memory_order_relaxed);
      });
      lock.lock();
    }
    workCv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_ && jobs_.empty())
      return;
    Job *job = jobs_.front();
    std::pair<int64_t, int64_t> c = takeChunk(job);
    int64_t n = job->n;
    lock.unlock();
    runChunk(*job, c);
    lock.lock();
    // After this increment the caller may return and destroy the job: do not touch it again.
    int64_t count = c.second - c.first;
    if (job->done.fetch_add(count, std::memory_order_acq_rel) + count == n)
      doneCv_.notify_all();
  }
}

void ThreadPool::parallelFor(ParallelBodyFn body, void *ctx, int64_t n) {
  if (n <= 0)
    return;
  if (threads_ == 1 || n == 1 || tlsParallelDepth > 0) {
    DepthGuard depth;
    body(ctx, 0, n);
    return;
  }
  Job job;
  job.body = body;
  job.ctx = ctx;
  job.n = n;
  job.minChunk = std::max<int64_t>(1, n / (int64_t(16) * threads_));
  std::unique_lock<std::mutex> lock(mutex_);
  jobs_.push_back(&job);
  queued_.store(jobs_.size(), std::memory_order_release);
  if (threads_ > 2)
    workCv_.notify_all();
  else
    workCv_.notify_one();
  while (job.next < job.n) {
    std::pair<int64_t, int64_t> c = takeChunk(&job);
    lock.unlock();
    runChunk(job, c);
    lock.lock();
    job.done.fetch_add(c.second - c.first, std::memory_order_acq_rel);
  }
  lock.unlock();
  auto done = [&] { return job.done.load(std::memory_order_acquire) == job.n; };
  if (spinFor(kSpin, done))
    return;
  lock.lock();
  doneCv_.wait(lock, done);
}

} // namespace nnc

extern "C" void nnc_parallel_for(nnc::ParallelBodyFn body, void *ctx, int64_t n) {
  nnc::ThreadPool *pool = nnc::ThreadPool::current();
  if (!pool) {
    if (n > 0)
      body(ctx, 0, n);
    return;
  }
  pool->parallelFor(body, ctx, n);
}
