// Host memory for model weights: 64-byte aligned copies in blocks advised to use 2 MiB pages.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace specd {

// Weights read from a memory-mapped safetensors file sit in 4 KiB pages at whatever offset the
// file gives them (often not a multiple of 64 bytes, so vector loads straddle cache lines). The
// arena copies each weight to a 64-byte aligned place in blocks of 2 MiB pages. Blocks are never
// freed before the arena.
class WeightArena {
 public:
  // Blocks come from backend.alloc (the CPU backend's: 2 MiB aligned, advised to use huge pages).
  explicit WeightArena(Backend& backend) : backend_(backend) {}

  // A 64-byte aligned copy of the `bytes` bytes at src.
  void* copy(const void* src, size_t bytes);

 private:
  static constexpr size_t kBlockBytes = size_t{64} << 20;
  static constexpr size_t kAlign = 64;

  Backend& backend_;
  std::vector<DeviceBuffer> blocks_;
  size_t block_used_ = 0;  // bytes taken from the last block
};

}  // namespace specd
