// A model directory loaded for tests: config, mapped weights, backend (SPECD_TEST_DEVICE),
// transformer and cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/tensor_store.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "test_device.h"

namespace specd::testing_support {

struct TestModel {
  ModelConfig config;
  TensorStore store;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;

  // One KV slot of `capacity` entries; forwards of up to `max_rows` rows.
  TestModel(const std::string& dir, int capacity, DType kv_dtype = DType::kBF16, int threads = 1,
            int max_rows = 64, WeightQuant quantize = WeightQuant::kNone) {
    config = load_model_config(dir);
    store = TensorStore::open_dir(dir);
    backend = make_backend(test_device(), threads);
    WeightQuantOptions quant;
    quant.mode = quantize;
    quant.threads = threads;
    model = std::make_unique<Transformer>(
        *backend, config, store, TransformerLimits{max_rows, kSmallBatch, capacity}, quant);
    kv = std::make_unique<KvCache>(*backend, KvCacheShape{config.n_layers, config.n_kv_heads,
                                                          config.head_dim, 1, capacity, kv_dtype});
  }

  // Bytes of K and V entries [0, length) of every layer (slot 0).
  std::vector<uint8_t> cache_bytes(int length) const {
    std::vector<uint8_t> out;
    for (int l = 0; l < kv->shape().n_layers; ++l) {
      KvLayerView view = kv->layer(l);
      size_t bytes =
          static_cast<size_t>(length) * view.n_kv_heads * view.head_dim * dtype_size(view.dtype);
      for (const void* base : {view.k, view.v}) {
        out.resize(out.size() + bytes);
        backend->copy_to_host(out.data() + out.size() - bytes, base, bytes);
      }
    }
    return out;
  }
};

}  // namespace specd::testing_support
