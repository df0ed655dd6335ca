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
// timing; parallel_chunks uses chunks of a given size. Either way the threads claim chunks as they
// go, the caller included: a worker that is slow to start (asleep, or sharing a core with the
// caller) leaves its chunk to a thread that is running instead of holding the loop up. Which
// thread runs a chunk therefore depends on timing; `thread` in fn(begin, end, thread) names the
// thread running it (for per-thread scratch), not the chunk.
class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread) on up to size() shares of [0, n), equal but for the last.
  // `grain` rounds chunk boundaries to multiples of itself (except the end).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                    int64_t grain = 1);

  // Calls fn(begin, end, thread) on the chunks [c * chunk, (c + 1) * chunk) of [0, n): a thread
  // slowed down by the machine takes fewer chunks instead of holding the others up.
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
  // Claims chunks of the current job and runs them until none is left or it ran max_chunks.
  void run_chunks(int thread, int64_t max_chunks);
  // Runs fn over the chunks [c * chunk, (c + 1) * chunk) of [0, n) on every thread.
  void run_job(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t, int)>& fn);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  // The current job (fixed while a chunk of it is claimable or running).
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 1;
  // Claims of the current job: job number (20 bits) | chunk count | next chunk (22 bits each).
  // A thread claims a chunk by incrementing the word; one holding a stale word fails its swap.
  std::atomic<uint64_t> claims_{0};
  std::atomic<int64_t> done_{0};     // chunks of the current job finished
  std::atomic<bool> helped_{false};  // a worker claimed a chunk of the current job
};

}  // namespace specd
