// Prompt files for `specd bench`.
#include "cli/bench_prompts.h"

#include <fstream>
#include <random>

#include "core/error.h"
#include "io/json_file.h"

namespace specd::cli {

std::vector<std::vector<int32_t>> read_prompt_file(const std::string& path,
                                                   const Tokenizer* tokenizer, int limit) {
  std::ifstream in(path);
  SPECD_CHECK(in.good(), "cannot open {}", path);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  int number = 0;
  while (std::getline(in, line) && (limit <= 0 || static_cast<int>(prompts.size()) < limit)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = path + ":" + std::to_string(number);
    Json entry = parse_json(line, where);
    SPECD_CHECK(entry.is_object(), "{}: expected a JSON object", where);
    std::vector<int32_t> ids;
    if (entry.contains("prompt_ids")) {
      SPECD_CHECK(entry["prompt_ids"].is_array(), "{}: prompt_ids must be an array", where);
      for (const auto& id : entry["prompt_ids"]) {
        SPECD_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0,
                    "{}: prompt_ids must hold non-negative integers", where);
        ids.push_back(id.get<int32_t>());
      }
    } else if (entry.contains("prompt") && entry["prompt"].is_string()) {
      SPECD_CHECK(tokenizer != nullptr, "{}: a text prompt needs the model's tokenizer.json",
                  where);
      ids = tokenizer->encode(entry["prompt"].get<std::string>());
    } else {
      fail("{}: needs a \"prompt\" (text) or \"prompt_ids\" field", where);
    }
    SPECD_CHECK(!ids.empty(), "{}: empty prompt", where);
    prompts.push_back(std::move(ids));
  }
  SPECD_CHECK(!prompts.empty(), "{} holds no prompts", path);
  return prompts;
}

std::vector<std::vector<int32_t>> random_prompts(int count, int length, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<std::vector<int32_t>> prompts(count);
  for (auto& p : prompts) {
    p.resize(length);
    for (auto& t : p) t = pick(rng);
  }
  return prompts;
}

}  // namespace specd::cli
