// JSON form of generation statistics.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/generation.h"

namespace specd::cli {

nlohmann::ordered_json stats_json(const GenerationStats& stats);

}  // namespace specd::cli
