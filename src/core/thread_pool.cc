// Spin-then-sleep thread pool: static, timing-independent loop partitioning, or claimed chunks.
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

void ThreadPool::run_share(int thread) {
  if (job_claimed_) {
    for (;;) {
      const int64_t begin = next_chunk_.fetch_add(job_grain_, std::memory_order_relaxed);
      if (begin >= job_n_) return;
      (*job_)(begin, std::min(job_n_, begin + job_grain_), thread);
    }
  }
  int64_t per = (job_n_ + n_threads_ - 1) / n_threads_;
  per = (per + job_grain_ - 1) / job_grain_ * job_grain_;
  int64_t begin = std::min<int64_t>(job_n_, per * thread);
  int64_t end = std::min<int64_t>(job_n_, begin + per);
  if (begin < end) (*job_)(begin, end, thread);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                              int64_t grain) {
  run_job(n, grain, false, fn);
}

void ThreadPool::parallel_chunks(int64_t n, int64_t chunk,
                                 const std::function<void(int64_t, int64_t, int)>& fn) {
  run_job(n, chunk, true, fn);
}

void ThreadPool::run_job(int64_t n, int64_t grain, bool claimed,
                         const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = std::max<int64_t>(1, grain);
  job_claimed_ = claimed;
  next_chunk_.store(0, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_share(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
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
    run_share(thread);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace specd
