// SVG charts of a `specd bench` run: decode speed of each mode against plain decoding and the
// roofline, and the acceptance rate by draft position of each speculative mode.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace specd::cli {

// A self-contained SVG document drawn from `result`, the JSON that `specd bench --json` prints
// (device, model, decode_roofline_tok_s, and per mode decode_tok_s, speedup, acceptance_length,
// draft_fraction, identical_to_plain, acceptance_rate_by_position). Missing or non-finite numbers
// count as 0.
std::string bench_plot_svg(const nlohmann::ordered_json& result);

}  // namespace specd::cli
