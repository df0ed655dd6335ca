// Measures the host memory read bandwidth that bounds decode speed on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace specd {

// Reads words [0, n) of `data` once with the pool: each thread reads its share as 4 interleaved
// streams with software prefetch 1 KiB ahead (one stream per thread reaches about half of the
// machine's bandwidth on Zen 3). Returns a checksum so the reads cannot be optimised away.
uint64_t streaming_read(ThreadPool& pool, const uint64_t* data, size_t n);

// Streams a buffer of `bytes` (much larger than the caches) `repeats` times with the shared
// pool of `threads` threads and returns the median read rate in bytes per second.
double measure_read_bandwidth(int threads, size_t bytes = size_t{1} << 30, int repeats = 7);

}  // namespace specd
