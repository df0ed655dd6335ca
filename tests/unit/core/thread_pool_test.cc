// The thread pool covers every index exactly once, with timing-independent or claimed chunks.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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
    std::vector<int64_t> begins(3, -1);
    pool.parallel_for(
        100, [&](int64_t begin, int64_t, int thread) { begins[thread] = begin; }, 8);
    EXPECT_EQ(begins[0], 0);
    EXPECT_EQ(begins[1], 40);
    EXPECT_EQ(begins[2], 80);
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
