// Spin-then-sleep thread pool whose threads claim the chunks of each loop as they go.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <map>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECD_CPU_RELAX() _mm_pause()
#else
#define SPECD_CPU_RELAX() std::this_thread::yield()
#endif

namespace specd {

namespace {
// Waiting threads first spin (the next job usually follows within microseconds), then yield the
// core (so that an oversubscribed machine still makes progress), then sleep.
constexpr int kSpinIterations = 4000;
constexpr double kYieldSeconds = 0.002;
constexpr double kHelpWaitSeconds = 20e-6;
// The claim word: job number | chunk count | next chunk.
constexpr int kChunkBits = 22;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
constexpr uint64_t kJobMask = (uint64_t{1} << (64 - 2 * kChunkBits)) - 1;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

std::shared_ptr<ThreadPool> ThreadPool::shared(int n_threads) {
  static std::mutex registry_mutex;
  static std::map<int, std::weak_ptr<ThreadPool>> registry;
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::shared_ptr<ThreadPool> pool = registry[n_threads].lock();
  if (!pool) {
    pool = std::make_shared<ThreadPool>(n_threads);
    registry[n_threads] = pool;
  }
  return pool;
}

int ThreadPool::hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::run_chunks(int thread, int64_t max_chunks) {
  uint64_t word = claims_.load(std::memory_order_acquire);
  for (int64_t ran = 0; ran < max_chunks; ++ran) {
    const uint64_t next = word & kChunkMask, count = (word >> kChunkBits) & kChunkMask;
    if (next >= count) return;
    // A successful swap proves the word (and so the job it belongs to) is current.
    if (!claims_.compare_exchange_weak(word, word + 1, std::memory_order_acquire)) {
      --ran;
      continue;
    }
    if (thread != 0) helped_.store(true, std::memory_order_relaxed);
    const int64_t begin = static_cast<int64_t>(next) * job_chunk_;
    (*job_)(begin, std::min(job_n_, begin + job_chunk_), thread);
    done_.fetch_add(1, std::memory_order_release);
    word = claims_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                              int64_t grain) {
  grain = std::max<int64_t>(1, grain);
  int64_t per = (n + n_threads_ - 1) / n_threads_;
  per = (per + grain - 1) / grain * grain;
  run_job(n, per, fn);
}

void ThreadPool::parallel_chunks(int64_t n, int64_t chunk,
                                 const std::function<void(int64_t, int64_t, int)>& fn) {
  run_job(n, std::max<int64_t>(1, chunk), fn);
}

void ThreadPool::run_job(int64_t n, int64_t chunk,
                         const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= chunk) {
    fn(0, n, 0);
    return;
  }
  // More chunks than the claim word holds: fewer, larger ones (a loop of over 4M chunks).
  chunk = std::max<int64_t>(chunk, (n + kChunkMask - 1) / kChunkMask);
  const uint64_t count = static_cast<uint64_t>((n + chunk - 1) / chunk);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  done_.store(0, std::memory_order_relaxed);
  helped_.store(false, std::memory_order_relaxed);
  const uint64_t job = (generation_.load(std::memory_order_relaxed) + 1) & kJobMask;
  claims_.store((job << (2 * kChunkBits)) | (count << kChunkBits), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  const double published = seconds_now();
  run_chunks(0, 1);
  // Workers usually claim their chunks within microseconds. One that has claimed nothing after
  // kHelpWaitSeconds (asleep, descheduled, or sharing this core) leaves them to this thread.
  while (!helped_.load(std::memory_order_relaxed) &&
         (claims_.load(std::memory_order_relaxed) & kChunkMask) < count &&
         seconds_now() - published < kHelpWaitSeconds) {
    SPECD_CPU_RELAX();
  }
  run_chunks(0, INT64_MAX);
  for (int spins = 0; done_.load(std::memory_order_acquire) != static_cast<int64_t>(count);
       ++spins) {
    if (spins < kSpinIterations) {
      SPECD_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
      SPECD_CPU_RELAX();
      ++spins;
    }
    const double yield_until = seconds_now() + kYieldSeconds;
    while (generation_.load(std::memory_order_acquire) == seen && seconds_now() < yield_until) {
      std::this_thread::yield();
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    run_chunks(thread, INT64_MAX);
  }
}

}  // namespace specd
