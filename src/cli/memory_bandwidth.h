// Measures the host memory read bandwidth that bounds decode speed on the CPU.
#pragma once

#include <cstddef>

namespace specd::cli {

// Streams a buffer of `bytes` (much larger than the caches) `repeats` times with `threads`
// threads and returns the best read rate in bytes per second.
double measure_read_bandwidth(int threads, size_t bytes = size_t{1} << 30, int repeats = 5);

}  // namespace specd::cli
