// Multi-threaded streaming reads over a large buffer: the roofline's bandwidth.
#include "core/memory_bandwidth.h"

#include <algorithm>
#include <vector>

#include "core/timer.h"

namespace specd {

uint64_t streaming_read(ThreadPool& pool, const uint64_t* p, size_t n) {
  std::vector<uint64_t> sums(pool.size(), 0);
  pool.parallel_for(
      static_cast<int64_t>(n),
      [&](int64_t begin, int64_t end, int thread) {
        constexpr int64_t kAhead = 1024 / 8;
        const int64_t sub = (end - begin) / 4 / 8 * 8;
        const uint64_t* s[4] = {p + begin, p + begin + sub, p + begin + 2 * sub,
                                p + begin + 3 * sub};
        uint64_t acc[4] = {0, 0, 0, 0};
        for (int64_t i = 0; i < sub; i += 8) {
          for (int j = 0; j < 4; ++j) {
            __builtin_prefetch(s[j] + i + kAhead);
            acc[j] += (s[j][i] + s[j][i + 1]) + (s[j][i + 2] + s[j][i + 3]) +
                      (s[j][i + 4] + s[j][i + 5]) + (s[j][i + 6] + s[j][i + 7]);
          }
        }
        for (int64_t i = begin + 4 * sub; i < end; ++i) acc[0] += p[i];  // the remainder
        sums[thread] += acc[0] + acc[1] + acc[2] + acc[3];
      },
      4096);
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  return total;
}

double measure_read_bandwidth(int threads, size_t bytes, int repeats) {
  const size_t words = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buffer(words);
  for (size_t i = 0; i < words; ++i) buffer[i] = i * 0x9E3779B97F4A7C15ull;
  ThreadPool& pool = *ThreadPool::shared(threads);
  std::vector<double> rates;
  volatile uint64_t sink = 0;
  for (int r = 0; r < repeats; ++r) {
    double start = now_seconds();
    sink = sink + streaming_read(pool, buffer.data(), words);
    rates.push_back(static_cast<double>(words * sizeof(uint64_t)) / (now_seconds() - start));
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace specd
