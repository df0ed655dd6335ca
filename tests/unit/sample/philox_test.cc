// Philox4x32-10 against the Random123 known-answer vectors, and uniform draws' properties.
#include "sample/philox.h"

#include <gtest/gtest.h>

#include <set>

namespace specd {
namespace {

TEST(Philox, KnownAnswers) {  // from Random123's kat_vectors
  auto zero = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(zero, (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  auto ones = philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff});
  EXPECT_EQ(ones, (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  auto pi = philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0});
  EXPECT_EQ(pi, (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformIsKeyedAndInRange) {
  std::set<double> seen;
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double u = random_uniform(42, i, RandomPurpose::kSample);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    seen.insert(u);
    sum += u;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_EQ(random_uniform(1, 5, RandomPurpose::kSample), random_uniform(1, 5, RandomPurpose::kSample));
  EXPECT_NE(random_uniform(1, 5, RandomPurpose::kSample), random_uniform(1, 5, RandomPurpose::kAccept));
  EXPECT_NE(random_uniform(1, 5, RandomPurpose::kSample), random_uniform(2, 5, RandomPurpose::kSample));
}

}  // namespace
}  // namespace specd
