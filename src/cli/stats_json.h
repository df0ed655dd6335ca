// JSON form of generation statistics.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/generation.h"

namespace specd::cli {

nlohmann::ordered_json stats_json(const GenerationStats& stats);
// Accepted / drafted at draft positions 1, 2, ... while any draft reached them.
nlohmann::ordered_json acceptance_by_position(const GenerationStats& stats);

}  // namespace specd::cli
