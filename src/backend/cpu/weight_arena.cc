// WeightArena: bump allocation of aligned weight copies in large blocks.
#include "backend/cpu/weight_arena.h"

#include <algorithm>
#include <cstring>

namespace specd {

void* WeightArena::copy(const void* src, size_t bytes) {
  const size_t padded = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (blocks_.empty() || block_used_ + padded > blocks_.back().bytes()) {
    // Untouched pages of a block cost no memory, so the tail of a full block is left unused.
    blocks_.push_back(backend_.alloc(std::max(kBlockBytes, padded)));
    block_used_ = 0;
  }
  auto* dst = static_cast<char*>(blocks_.back().data()) + block_used_;
  if (bytes != 0) std::memcpy(dst, src, bytes);
  block_used_ += padded;
  return dst;
}

}  // namespace specd
