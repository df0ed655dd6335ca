// JSON files (config.json, generation_config.json, index files) with errors naming the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace specd {

using Json = nlohmann::json;

// Parses a JSON file; throws specd::Error naming the file on I/O, syntax or UTF-8 errors.
Json read_json_file(const std::string& path);
// Parses JSON text; `what` names the source in error messages.
Json parse_json(const std::string& text, const std::string& what);

}  // namespace specd
