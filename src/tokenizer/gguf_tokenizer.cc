// GGUF tokenizer metadata -> tokenizer.json (see gguf_tokenizer.h).
#include "tokenizer/gguf_tokenizer.h"

#include "core/error.h"
#include "tokenizer/gguf_spm.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer_impl.h"

namespace specd {

namespace {

// GGUF token types (llama.cpp's llama_token_type).
constexpr int64_t kControl = 3;
constexpr int64_t kUserDefined = 4;

// Hugging Face's split patterns of the pre-tokenizers llama.cpp names.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

Json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

Json split(const char* pattern) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

Json pre_tokenizer(const std::string& pre, const std::string& what) {
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return byte_level(true);
  if (pre == "smollm" || pre == "starcoder" || pre == "refact") {
    return {{"type", "Sequence"},
            {"pretokenizers",
             Json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  }
  if (pre == "llama-bpe" || pre == "llama3") {
    return {{"type", "Sequence"},
            {"pretokenizers", Json::array({split(kLlama3Pattern), byte_level(false)})}};
  }
  if (pre == "qwen2") {
    return {{"type", "Sequence"},
            {"pretokenizers", Json::array({split(kQwen2Pattern), byte_level(false)})}};
  }
  fail(
      "{}: GGUF pre-tokenizer '{}' is not supported (supported: default, gpt-2, smollm, "
      "starcoder, refact, llama-bpe, qwen2)",
      what, pre);
}

const std::vector<std::string>& tokens_of(const GgufHeader& h, const std::string& what) {
  const GgufValue* tokens = h.find("tokenizer.ggml.tokens");
  SPECD_CHECK(tokens != nullptr, "{}: no tokenizer.ggml.tokens", what);
  return tokens->as_strings("tokenizer.ggml.tokens");
}

// The token string of metadata `key` (an id), or "" if absent.
std::string token_of(const GgufHeader& h, const char* key, const std::string& what) {
  const GgufValue* v = h.find(key);
  if (v == nullptr) return "";
  const auto& tokens = tokens_of(h, what);
  int64_t id = v->as_int(key);
  SPECD_CHECK(id >= 0 && static_cast<size_t>(id) < tokens.size(),
              "{}: {} {} is outside the vocabulary", what, key, id);
  return tokens[static_cast<size_t>(id)];
}

}  // namespace

Json gguf_tokenizer_json(const GgufHeader& h, const std::string& what) {
  const GgufValue* model = h.find("tokenizer.ggml.model");
  SPECD_CHECK(model != nullptr, "{}: no tokenizer.ggml.model (the file has no tokenizer)", what);
  const std::string& type = model->as_string("tokenizer.ggml.model");
  SPECD_CHECK(type == "gpt2",
              "{}: GGUF tokenizer model '{}' is not supported yet (supported: gpt2, llama)", what,
              type);
  const auto& tokens = tokens_of(h, what);
  std::vector<int64_t> types(tokens.size(), 1);
  if (const GgufValue* t = h.find("tokenizer.ggml.token_type")) {
    types = t->as_ints("tokenizer.ggml.token_type");
    SPECD_CHECK(types.size() == tokens.size(), "{}: {} token types for {} tokens", what,
                types.size(), tokens.size());
  }
  Json vocab = Json::object();
  Json added = Json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab[tokens[id]] = id;
    if (types[id] == kControl || types[id] == kUserDefined) {
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", types[id] == kControl}});
    }
  }
  Json merges = Json::array();
  if (const GgufValue* m = h.find("tokenizer.ggml.merges")) {
    for (const std::string& merge : m->as_strings("tokenizer.ggml.merges")) merges.push_back(merge);
  }
  std::string pre = "default";
  if (const GgufValue* p = h.find("tokenizer.ggml.pre")) pre = p->as_string("tokenizer.ggml.pre");
  Json json = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", added},
               {"normalizer", nullptr},
               {"pre_tokenizer", pre_tokenizer(pre, what)},
               {"post_processor", nullptr},
               {"decoder",
                {{"type", "ByteLevel"},
                 {"add_prefix_space", true},
                 {"trim_offsets", true},
                 {"use_regex", true}}},
               {"model",
                {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", pre == "llama-bpe" || pre == "llama3"},
                 {"vocab", vocab},
                 {"merges", merges}}}};
  const GgufValue* add_bos = h.find("tokenizer.ggml.add_bos_token");
  if (add_bos != nullptr && add_bos->as_bool("tokenizer.ggml.add_bos_token")) {
    const std::string bos = token_of(h, "tokenizer.ggml.bos_token_id", what);
    SPECD_CHECK(!bos.empty(), "{}: add_bos_token is set but there is no bos_token_id", what);
    const int64_t bos_id = h.find("tokenizer.ggml.bos_token_id")->as_int("bos");
    json["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", Json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"pair", Json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
        {"special_tokens",
         {{bos, {{"id", bos}, {"ids", Json::array({bos_id})}, {"tokens", Json::array({bos})}}}}}};
  }
  return json;
}

Json gguf_tokenizer_config(const GgufHeader& h, const std::string& what) {
  Json config = Json::object();
  const std::string bos = token_of(h, "tokenizer.ggml.bos_token_id", what);
  const std::string eos = token_of(h, "tokenizer.ggml.eos_token_id", what);
  if (!bos.empty()) config["bos_token"] = bos;
  if (!eos.empty()) config["eos_token"] = eos;
  if (const GgufValue* t = h.find("tokenizer.chat_template")) {
    config["chat_template"] = t->as_string("tokenizer.chat_template");
  }
  return config;
}

Tokenizer load_gguf_tokenizer(const std::string& path) {
  GgufFile file(path);
  const GgufValue* model = file.header().find("tokenizer.ggml.model");
  if (model != nullptr && model->type == GgufType::kString && model->str == "llama") {
    Json config;
    tok::TokenizerJson parsed = tok::gguf_spm_tokenizer(file.header(), path, config);
    try {
      return Tokenizer(tok::build_tokenizer(std::move(parsed), std::move(config), ""));
    } catch (const Error& e) {
      fail("{}: tokenizer from GGUF metadata: {}", path, e.what());
    }
  }
  Json json = gguf_tokenizer_json(file.header(), path);
  try {
    return Tokenizer::from_json_text(json.dump(), gguf_tokenizer_config(file.header(), path));
  } catch (const Error& e) {
    fail("{}: tokenizer from GGUF metadata: {}", path, e.what());
  }
}

}  // namespace specd
