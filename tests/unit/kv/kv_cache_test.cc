// KV cache sizing and the length bookkeeping that rollback relies on.
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace specd {
namespace {

TEST(KvCache, SizesAndViews) {
  auto backend = make_backend(Device{}, 1);
  KvCache kv(*backend, KvCacheShape{3, 2, 16, 4, 10, DType::kBF16});
  EXPECT_EQ(kv.bytes(), 3u * 2 * 4 * 10 * 2 * 16 * 2);
  KvLayerView view = kv.layer(2);
  EXPECT_EQ(view.slot_stride, 10 * 2 * 16);
  EXPECT_EQ(view.n_slots, 4);
  EXPECT_NE(view.k, kv.layer(1).k);
  EXPECT_THROW(kv.layer(3), std::out_of_range);
}

TEST(KvCache, TruncateIsRollback) {
  auto backend = make_backend(Device{}, 1);
  KvCache kv(*backend, KvCacheShape{1, 1, 8, 2, 16, DType::kF32});
  kv.set_length(1, 12);
  EXPECT_EQ(kv.length(1), 12);
  EXPECT_EQ(kv.length(0), 0);
  kv.truncate(1, 9);
  EXPECT_EQ(kv.length(1), 9);
  EXPECT_THROW(kv.truncate(1, 10), Error);  // cannot grow by truncating
  EXPECT_THROW(kv.set_length(1, 17), Error);  // past capacity
  EXPECT_THROW(kv.set_length(2, 1), Error);   // no such slot
  EXPECT_THROW(KvCache(*backend, KvCacheShape{1, 1, 8, 1, 0, DType::kF32}), Error);
}

}  // namespace
}  // namespace specd
