// A multi-threaded streaming read (sum of 64-bit words) over a large buffer.
#include "cli/memory_bandwidth.h"


#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "core/timer.h"

namespace specd::cli {

double measure_read_bandwidth(int threads, size_t bytes, int repeats) {
  const size_t words = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buffer(words);
  for (size_t i = 0; i < words; ++i) buffer[i] = i * 0x9E3779B97F4A7C15ull;
  ThreadPool& pool = *ThreadPool::shared(threads);
  std::vector<uint64_t> sums(threads * 8, 0);
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    double start = now_seconds();
    pool.parallel_for(
        static_cast<int64_t>(words),
        [&](int64_t begin, int64_t end, int thread) {
          uint64_t a = 0, b = 0, c = 0, d = 0;
          const uint64_t* p = buffer.data();
          int64_t i = begin;
          for (; i + 4 <= end; i += 4) {
            a += p[i];
            b += p[i + 1];
            c += p[i + 2];
            d += p[i + 3];
          }
          for (; i < end; ++i) a += p[i];
          sums[thread * 8] += a + b + c + d;
        },
        4096);
    double seconds = now_seconds() - start;
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / seconds);
  }
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  return best;
}

}  // namespace specd::cli
