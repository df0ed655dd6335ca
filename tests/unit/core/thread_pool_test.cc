// The thread pool covers every index exactly once, in chunks whose boundaries do not depend on
// timing.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace specd {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n;
    }
  }
}

TEST(ThreadPool, ChunksAreDeterministicAndRespectGrain) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 50; ++rep) {
    std::mutex mutex;
    std::vector<std::pair<int64_t, int64_t>> chunks;
    std::atomic<int> bad_threads{0};
    pool.parallel_for(
        100,
        [&](int64_t begin, int64_t end, int thread) {
          if (thread < 0 || thread >= 3) bad_threads++;
          std::lock_guard<std::mutex> lock(mutex);
          chunks.emplace_back(begin, end);
        },
        8);
    std::sort(chunks.begin(), chunks.end());
    const std::vector<std::pair<int64_t, int64_t>> want = {{0, 40}, {40, 80}, {80, 100}};
    EXPECT_EQ(chunks, want);  // whichever thread ran which
    EXPECT_EQ(bad_threads.load(), 0);
  }
}

TEST(ThreadPool, ClaimedChunksCoverEveryIndexOnceOnChunkBoundaries) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1000, 12345}) {
      for (int64_t chunk : {1, 8, 100, 20000}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> bad_chunks{0};
        std::atomic<int> bad_threads{0};
        pool.parallel_chunks(n, chunk, [&](int64_t begin, int64_t end, int thread) {
          if (begin % chunk != 0 || (end != n && end - begin != chunk) || end > n) bad_chunks++;
          if (thread < 0 || thread >= threads) bad_threads++;
          for (int64_t i = begin; i < end; ++i) hits[i]++;
        });
        EXPECT_EQ(bad_chunks.load(), 0) << threads << " " << n << " " << chunk;
        EXPECT_EQ(bad_threads.load(), 0);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n;
      }
    }
  }
}

TEST(ThreadPool, ClaimedAndStaticJobsInterleave) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 200; ++rep) {
    pool.parallel_chunks(100, 7, [&](int64_t begin, int64_t end, int) { total += end - begin; });
    pool.parallel_for(100, [&](int64_t begin, int64_t end, int) { total += end - begin; });
  }
  EXPECT_EQ(total.load(), 200 * 200);
}

}  // namespace
}  // namespace specd
