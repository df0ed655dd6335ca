// A fixed pool of worker threads that split a loop into one contiguous chunk per thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace specd {

// Workers spin briefly between jobs (decode issues hundreds of small jobs per token), then sleep.
// parallel_for's chunk boundaries depend only on the loop size and the thread count, never on
// timing; parallel_chunks lets the threads claim chunks as they go, for loops whose results do not
// depend on which thread runs which chunk.
class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread) for each thread's share of [0, n); the caller runs share 0.
  // `grain` rounds chunk boundaries to multiples of itself (except the end).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                    int64_t grain = 1);

  // Calls fn(begin, end, thread) on the chunks [c * chunk, (c + 1) * chunk) of [0, n), each
  // claimed by whichever thread is free first: a thread slowed down by the machine takes fewer
  // chunks instead of holding the others up. Which thread runs a chunk depends on timing.
  void parallel_chunks(int64_t n, int64_t chunk,
                       const std::function<void(int64_t, int64_t, int)>& fn);

  // Number of hardware threads, at least 1.
  static int hardware_threads();
  // The process-wide pool of `n_threads` threads, created on first use and shared by every
  // backend that asks for the same count, so that a draft and a target model on the CPU do not
  // oversubscribe the cores. parallel_for must not be called from two threads at once.
  static std::shared_ptr<ThreadPool> shared(int n_threads);

 private:
  void worker_loop(int thread);
  void run_share(int thread);
  // Runs fn over [0, n) on every thread: static shares, or chunks of `grain` claimed in turn.
  void run_job(int64_t n, int64_t grain, bool claimed,
               const std::function<void(int64_t, int64_t, int)>& fn);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // The current job (valid while pending_ > 0).
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;     // parallel_chunks: the chunk size
  bool job_claimed_ = false;  // chunks claimed through next_chunk_ (parallel_chunks)
  std::atomic<int64_t> next_chunk_{0};
};

}  // namespace specd
