// Server metrics in the Prometheus text exposition format (hand-written, no client library).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/batch_engine.h"
#include "engine/generation.h"

namespace specd::server {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, plus +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void record_request(const std::string& endpoint, int status);
  void record_time_to_first_token(double seconds);
  void record_generation(const GenerationStats& stats);
  // The whole text for GET /metrics; `engine` gives queue depth, active sequences and KV use.
  std::string render(const BatchEngineSnapshot& engine) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, decode_tokens_ = 0, rounds_ = 0;
  uint64_t drafted_ = 0, accepted_ = 0;
  double decode_seconds_ = 0;
  Histogram ttft_, per_token_;
};

}  // namespace specd::server
