// Shared helpers for the tokenizer golden tests: locating fetched tokenizers and golden files.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "io/json_file.h"
#include "io/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace specd::test {

// ${SPECD_DATA_DIR:-$HOME/.cache/specd}/tokenizers/<name>, where
// tools/tokenizer/fetch_tokenizers.sh puts the pinned tokenizer files.
inline std::string fetched_tokenizer_dir(const std::string& name) {
  std::string root;
  if (const char* data = std::getenv("SPECD_DATA_DIR"); data != nullptr && *data != '\0') {
    root = data;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    root = std::string(home) + "/.cache/specd";
  }
  return root + "/tokenizers/" + name;
}

inline std::string golden_path(const std::string& name) {
  return std::string(SPECD_SOURCE_DIR) + "/tests/data/tokenizer/" + name + ".json";
}

// ${SPECD_DATA_DIR:-$HOME/.cache/specd}/gguf/<name>, where tools/gguf/fetch_models.sh puts
// the pinned GGUF models.
inline std::string fetched_gguf_path(const std::string& name) {
  std::string dir = fetched_tokenizer_dir("");
  return dir.substr(0, dir.size() - std::string("tokenizers/").size()) + "/gguf/" + name;
}

// Builds the tokenizer a golden file describes: a GGUF file of the source tree or a fetched
// one, a synthetic tokenizer.json stored inline, or a fetched tokenizer.json (plus overrides).
// Returns nullopt (with `missing` set) if it was not fetched.
inline std::optional<Tokenizer> golden_tokenizer(const Json& golden, std::string& missing) {
  if (golden.contains("gguf") && golden["gguf"].is_string()) {
    return Tokenizer::load(std::string(SPECD_SOURCE_DIR) + "/" + golden["gguf"].get<std::string>());
  }
  if (golden.contains("gguf_fetched") && golden["gguf_fetched"].is_string()) {
    const std::string path = fetched_gguf_path(golden["gguf_fetched"].get<std::string>());
    if (!file_exists(path)) {
      missing = path;
      return std::nullopt;
    }
    return Tokenizer::load(path);
  }
  if (golden.contains("tokenizer_json") && !golden["tokenizer_json"].is_null()) {
    return Tokenizer::from_json_text(golden["tokenizer_json"].dump(), Json::object());
  }
  std::string dir = fetched_tokenizer_dir(golden["base"].get<std::string>());
  if (!file_exists(dir + "/tokenizer.json")) {
    missing = dir;
    return std::nullopt;
  }
  const Json& overrides = golden["overrides"];
  bool plain = (overrides.is_null() || overrides.empty()) && golden["config"].is_null();
  if (plain) return Tokenizer::load(dir);
  Json config = golden["config"].is_null() ? read_json_file(dir + "/tokenizer_config.json")
                                           : golden["config"];
  return Tokenizer::from_json_text(read_text_file(dir + "/tokenizer.json"), config, overrides);
}

inline std::string hex_to_bytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace specd::test
