// Invariant 4 (no allocation in the decode loop): after one warm-up call, no CPU op allocates.
// This binary replaces the global operator new to count allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "backend/cpu/cpu_backend.h"
#include "test_util.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

// The replacements pair malloc with free; GCC cannot see that through inlined callers.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::i32_vector;

TEST(NoAllocation, OpsAllocateNothingAfterWarmUp) {
  CpuBackend be(2);
  const int64_t m = 4, hidden = 256, heads = 4, n_kv = 2, dh = 64, capacity = 512;
  HostTensor table = HostTensor(DType::kBF16, 100, hidden).random(1);
  HostTensor ids = i32_vector({5, 7, 9, 11});
  HostTensor x(DType::kF32, m, hidden), h(DType::kF32, m, hidden);
  HostTensor norm_w = HostTensor(DType::kBF16, 1, hidden).random(2, 0.5f, 1.5f);
  HostTensor w = HostTensor(DType::kBF16, 512, hidden).random(3);
  HostTensor bias = HostTensor(DType::kBF16, 1, 512).random(4);
  HostTensor big(DType::kF32, m, 512), gate(DType::kF32, m, 256), up(DType::kF32, m, 256);
  HostTensor cos = HostTensor(DType::kF32, capacity, dh / 2).random(5);
  HostTensor sin = HostTensor(DType::kF32, capacity, dh / 2).random(6);
  HostTensor kc(DType::kBF16, capacity, n_kv * dh), vc(DType::kBF16, capacity, n_kv * dh);
  KvLayerView cache{kc.t().data, vc.t().data,          DType::kBF16, capacity,
                    1,           capacity * n_kv * dh, n_kv,         dh};
  HostTensor slots = i32_vector({0, 0, 0, 0}), index = i32_vector({300, 301, 302, 303});
  AttentionRows rows;
  rows.count = m;
  rows.slots = slots.t();
  rows.cache_index = index.t();
  rows.positions = index.t();
  HostTensor q(DType::kF32, m, heads * dh), k(DType::kF32, m, n_kv * dh);
  HostTensor prefill_x = HostTensor(DType::kF32, 80, hidden).random(7);
  HostTensor prefill_y(DType::kF32, 80, 512);

  auto step = [&] {
    be.embedding(ids.t(), table.t(), x.t());
    be.rms_norm(x.t(), norm_w.t(), 1e-6f, h.t());
    be.matmul(h.t(), w.t(), &bias.t(), big.t(), false);
    be.rope(q.t(), heads, rows.positions, RopeTable{cos.t(), sin.t()});
    be.store_kv(k.t(), k.t(), cache, rows);
    be.attention(q.t(), heads, cache, rows, 0.125f, q.t());
    be.silu_mul(gate.t(), up.t(), gate.t());
    be.matmul(h.t(), w.t(), nullptr, big.t(), true);
    be.matmul(prefill_x.t(), w.t(), nullptr, prefill_y.t(), false);  // GEMM path
  };
  g_allocations.store(0);
  step();  // warm-up: the attention and GEMM scratch buffers grow here
  EXPECT_GT(g_allocations.load(), 0) << "the allocation counter does not count";
  g_allocations.store(0);
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(g_allocations.load(), 0);
}

}  // namespace
}  // namespace specd
