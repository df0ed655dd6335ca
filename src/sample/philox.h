// Counter-based random numbers (Philox4x32-10): the same (seed, position, purpose) gives the same
// draw in plain and speculative decoding, on every backend.
#pragma once

#include <array>
#include <cstdint>

namespace specd {

// What a random draw is for; part of the counter so that uses never share numbers.
enum class RandomPurpose : uint32_t { kSample = 1, kAccept = 2, kResample = 3, kDraft = 4 };

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                          std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

// A uniform double in [0, 1) with 53 random bits, keyed by (seed, position, purpose, index).
inline double random_uniform(uint64_t seed, int64_t position, RandomPurpose purpose,
                             uint32_t index = 0) {
  auto out = philox4x32({static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32),
                         static_cast<uint32_t>(purpose), index},
                        {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  uint64_t bits = (static_cast<uint64_t>(out[0]) << 21) ^ (out[1] >> 11);
  return static_cast<double>(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace specd
