// Decode steps alternated with streaming reads of the same weights (see decode_roofline.h).
#include "cli/decode_roofline.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/memory_bandwidth.h"
#include "core/thread_pool.h"
#include "core/timer.h"

namespace specd {

namespace {

// The 8-byte words inside each matrix a decode step reads: the LM head (the embedding table
// when tied; otherwise the table is read one row per step and left out) and every layer's
// projections. Norms and biases are a few KiB and left out.
std::vector<std::span<const uint64_t>> matrix_words(const ModelWeights& w, bool tied) {
  std::vector<const Tensor*> matrices = {tied ? &w.embed : &w.lm_head};
  for (const LayerWeights& l : w.layers) {
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      matrices.push_back(t);
    }
  }
  std::vector<std::span<const uint64_t>> words;
  for (const Tensor* t : matrices) {
    if (t->data == nullptr) continue;
    const auto begin = (reinterpret_cast<uintptr_t>(t->data) + 7) / 8 * 8;
    const auto end = (reinterpret_cast<uintptr_t>(t->data) + t->bytes()) / 8 * 8;
    if (end > begin)
      words.emplace_back(reinterpret_cast<const uint64_t*>(begin), (end - begin) / 8);
  }
  return words;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

PairedRoofline measure_paired_roofline(const ModelWeights& weights, bool tied_embeddings,
                                       int threads, double token_bytes,
                                       const std::function<void()>& step, int pairs) {
  const std::vector<std::span<const uint64_t>> words = matrix_words(weights, tied_embeddings);
  double matrix_bytes = 0;
  for (const auto& w : words) matrix_bytes += static_cast<double>(w.size_bytes());
  ThreadPool& pool = *ThreadPool::shared(threads);
  std::vector<double> steps, streams, fractions;
  volatile uint64_t sink = 0;
  for (int i = 0; i < std::max(1, pairs); ++i) {
    double t0 = now_seconds();
    step();
    double t1 = now_seconds();
    for (const auto& w : words) sink = sink + streaming_read(pool, w.data(), w.size());
    double t2 = now_seconds();
    steps.push_back(t1 - t0);
    streams.push_back(t2 - t1);
    fractions.push_back((t2 - t1) * token_bytes / matrix_bytes / (t1 - t0));
  }
  PairedRoofline r;
  r.step_seconds = median(steps);
  r.bandwidth = matrix_bytes / median(streams);
  r.fraction = median(fractions);
  return r;
}

}  // namespace specd
