// The CPU decode roofline measured beside the decode step: decode steps alternate with streaming
// reads of the same weight bytes, so both see the same memory bus (shared machines drift).
#pragma once

#include <functional>

#include "model/weights.h"

namespace specd {

struct PairedRoofline {
  double step_seconds = 0;  // median decode step
  double bandwidth = 0;     // bytes/s: the weights' bytes / their median streaming time
  double fraction = 0;      // median over pairs of (time to stream the step's bytes / step time)
};

// Runs `pairs` rounds of { step(); stream the weight matrices once with `threads` threads }.
// `token_bytes` is what one step must read (the weights plus its K/V entries); the streaming time
// is scaled from the matrices' bytes to it. Host weights only.
PairedRoofline measure_paired_roofline(const ModelWeights& weights, bool tied_embeddings,
                                       int threads, double token_bytes,
                                       const std::function<void()>& step, int pairs = 15);

}  // namespace specd
