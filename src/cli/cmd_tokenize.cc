// `specd tokenize` and `specd detokenize`: the model's tokenizer.json on text and ids (JSON out).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace specd::cli {

namespace {

struct TokenizeOptions {
  std::string model_dir;
  std::string text;
  std::string file;
  bool no_add_special = false;
};

struct DetokenizeOptions {
  std::string model_dir;
  std::string ids;
  bool skip_special = false;
};

void run_tokenize(const TokenizeOptions& o, bool have_text, bool have_file) {
  SPECD_CHECK(have_text != have_file, "tokenize needs exactly one of --text and --file");
  std::string input = have_file ? read_text_file(o.file) : o.text;
  Tokenizer tokenizer = Tokenizer::load(o.model_dir);
  std::vector<int32_t> ids = tokenizer.encode(input, !o.no_add_special);
  std::printf("%s\n", nlohmann::json(ids).dump().c_str());
}

// Accepts a JSON array of integers ("[1,2,3]"), or bare comma/space separated integers.
std::vector<int32_t> parse_ids(const std::string& text) {
  std::string json_text = text;
  size_t first = json_text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  if (json_text[first] != '[') json_text = "[" + json_text + "]";
  nlohmann::json parsed = nlohmann::json::parse(json_text, nullptr, false);
  SPECD_CHECK(!parsed.is_discarded() && parsed.is_array(),
              "--ids must be a JSON array of token ids such as \"[1,2,3]\", got '{}'", text);
  std::vector<int32_t> ids;
  for (const auto& value : parsed) {
    SPECD_CHECK(
        value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= INT32_MAX,
        "--ids: '{}' is not a token id (a non-negative integer)", value.dump());
    ids.push_back(value.get<int32_t>());
  }
  return ids;
}

void run_detokenize(const DetokenizeOptions& o) {
  std::vector<int32_t> ids = parse_ids(o.ids);
  Tokenizer tokenizer = Tokenizer::load(o.model_dir);
  for (int32_t id : ids) {
    SPECD_CHECK(id < tokenizer.vocab_size(), "--ids: token id {} is out of range (vocab size {})",
                id, tokenizer.vocab_size());
    tokenizer.token_text(id);  // throws for ids with no token
  }
  std::string text = tokenizer.decode(ids, o.skip_special);
  std::printf("%s\n", nlohmann::json(text).dump().c_str());
}

}  // namespace

void register_tokenize_commands(CLI::App& app) {
  auto tok = std::make_shared<TokenizeOptions>();
  CLI::App* encode = app.add_subcommand(
      "tokenize",
      "Encode text with the model's tokenizer.json and print the token ids as a JSON array.\n"
      "Special-token strings in the text (e.g. <|im_end|>) are matched as special tokens, as\n"
      "Hugging Face tokenizers does; invalid UTF-8 bytes are replaced by U+FFFD first.\n"
      "Needs only tokenizer.json (and tokenizer_config.json), no weights.");
  encode->add_option("-m,--model", tok->model_dir, "Directory holding tokenizer.json")
      ->required()
      ->check(existing_model_path());
  CLI::Option* text = encode->add_option("--text", tok->text, "Text to encode");
  CLI::Option* file = encode->add_option("--file", tok->file, "File whose bytes to encode")
                          ->check(CLI::ExistingFile);
  text->excludes(file);
  encode->add_flag("--no-add-special", tok->no_add_special,
                   "Do not add the post-processor's special tokens (e.g. BOS)");
  encode->callback([tok, text, file] { run_tokenize(*tok, text->count() > 0, file->count() > 0); });

  auto detok = std::make_shared<DetokenizeOptions>();
  CLI::App* decode = app.add_subcommand(
      "detokenize",
      "Decode token ids with the model's tokenizer.json and print the text as a JSON string.\n"
      "Needs only tokenizer.json (and tokenizer_config.json), no weights.");
  decode->add_option("-m,--model", detok->model_dir, "Directory holding tokenizer.json")
      ->required()
      ->check(existing_model_path());
  decode->add_option("--ids", detok->ids, "Token ids as a JSON array, e.g. \"[1,2,3]\"")
      ->required();
  decode->add_flag("--skip-special", detok->skip_special, "Leave special tokens out of the text");
  decode->callback([detok] { run_detokenize(*detok); });
}

}  // namespace specd::cli
