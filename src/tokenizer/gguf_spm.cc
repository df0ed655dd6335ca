// SentencePiece-style GGUF tokenizer metadata -> tokenizer.json equivalent (see gguf_spm.h).
#include "tokenizer/gguf_spm.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "tokenizer/hash_tables.h"
#include "tokenizer/spm_merges.h"
#include "tokenizer/utf8.h"

namespace specd::tok {

namespace {

// llama.cpp's llama_token_type values.
constexpr int64_t kControl = 3;
constexpr int64_t kUserDefined = 4;
constexpr int64_t kMaxTokenType = 6;  // BYTE

// Pre-tokenizer names for which transformers swaps in a byte-level regex split: meaningless for
// a SentencePiece vocabulary, so such files are refused rather than silently mis-tokenized.
constexpr const char* kByteLevelPres[] = {
    "llama3", "llama-v3",     "llama-bpe", "falcon3",   "falcon-h1", "pixtral", "midm-2.0",
    "lfm2",   "jina-v5-nano", "dbrx",      "smaug-bpe", "tekken",    "qwen2",   "deepseek-r1-qwen",
    "kormo",  "f2llmv2",      "megrez",    "qwen35",    "gpt-4o",    "llama4",  "kanana2",
    "talkie", "minimax-m2"};

enum class Flavor { kLlama, kGemma, kPhi3 };

Flavor flavor_of(const GgufHeader& h) {
  const GgufValue* arch = h.find("general.architecture");
  if (arch == nullptr || arch->type != GgufType::kString) return Flavor::kLlama;
  const std::string& name = arch->str;
  if (name == "gemma" || name == "gemma2" || name == "gemma3") return Flavor::kGemma;
  if (name == "phi3") return Flavor::kPhi3;
  return Flavor::kLlama;
}

// Python's str.isspace() (what str.strip() removes).
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Gemma files store tokens of only whitespace that hold a space with real spaces;
// GemmaTokenizer looks them up as "▁" runs, so transformers respells them ("▁" per character).
void respell_space_tokens(std::vector<std::string>& tokens) {
  for (std::string& token : tokens) {
    if (token.find(' ') == std::string::npos) continue;
    size_t chars = 0;
    bool blank = true;
    for (size_t pos = 0; pos < token.size() && blank; ++chars) {
      blank = is_python_space(next_code_point(token, pos));
    }
    if (!blank) continue;
    std::string spelled;
    for (size_t i = 0; i < chars; ++i) spelled += "\xE2\x96\x81";
    token = std::move(spelled);
  }
}

Json added_token(const std::string& content, bool special) {
  return {{"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},    {"normalized", false},  {"special", special}};
}

Json string_pattern(const char* s) { return {{"String", s}}; }

const char* const kMetaspace = "\xE2\x96\x81";

Json decoder(bool strip_prefix_space) {
  Json steps =
      Json::array({{{"type", "Replace"}, {"pattern", string_pattern(kMetaspace)}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}});
  if (strip_prefix_space) {
    steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  }
  return {{"type", "Sequence"}, {"decoders", steps}};
}

// The id of metadata `key` as a token string (transformers reads these from the file's
// tokens, before any respelling), or nullopt when the key is absent.
std::optional<std::string> special_token(const GgufHeader& h, const char* key,
                                         const std::vector<std::string>& tokens,
                                         const std::string& what) {
  const GgufValue* v = h.find(key);
  if (v == nullptr) return std::nullopt;
  const int64_t id = v->as_int(key);
  SPECD_CHECK(id >= 0 && static_cast<uint64_t>(id) < tokens.size(),
              "{}: {} {} is outside the vocabulary of {} tokens", what, key, id, tokens.size());
  return tokens[static_cast<size_t>(id)];
}

bool flag(const GgufHeader& h, const char* key, bool fallback) {
  const GgufValue* v = h.find(key);
  return v == nullptr ? fallback : v->as_bool(key);
}

}  // namespace

TokenizerJson gguf_spm_tokenizer(const GgufHeader& h, const std::string& what, Json& config) {
  const GgufValue* tokens_value = h.find("tokenizer.ggml.tokens");
  SPECD_CHECK(tokens_value != nullptr, "{}: no tokenizer.ggml.tokens", what);
  const std::vector<std::string>& file_tokens = tokens_value->as_strings("tokenizer.ggml.tokens");
  SPECD_CHECK(!file_tokens.empty(), "{}: tokenizer.ggml.tokens is empty", what);
  SPECD_CHECK(file_tokens.size() < (1u << 30), "{}: {} tokens is too many", what,
              file_tokens.size());
  const size_t n = file_tokens.size();
  for (size_t i = 0; i < n; ++i) {
    SPECD_CHECK(is_valid_utf8(file_tokens[i]), "{}: token {} is not valid UTF-8", what, i);
  }
  std::vector<int64_t> types(n, 1);
  if (const GgufValue* t = h.find("tokenizer.ggml.token_type")) {
    types = t->as_ints("tokenizer.ggml.token_type");
    SPECD_CHECK(types.size() == n, "{}: {} token types for {} tokens", what, types.size(), n);
    for (size_t i = 0; i < n; ++i) {
      SPECD_CHECK(types[i] >= 0 && types[i] <= kMaxTokenType,
                  "{}: token {} has token type {} (valid: 0 to {})", what, i, types[i],
                  kMaxTokenType);
    }
  }
  std::string pre = "default";
  if (const GgufValue* p = h.find("tokenizer.ggml.pre")) pre = p->as_string("tokenizer.ggml.pre");
  for (const char* name : kByteLevelPres) {
    SPECD_CHECK(pre != name,
                "{}: tokenizer.ggml.pre '{}' is a byte-level pre-tokenizer, which does not fit "
                "the SentencePiece-style tokenizer model 'llama'",
                what, pre);
  }
  SPECD_CHECK(h.find("tokenizer.ggml.merges") == nullptr,
              "{}: tokenizer model 'llama' with tokenizer.ggml.merges is not supported", what);

  const Flavor flavor = flavor_of(h);
  std::vector<std::string> tokens = file_tokens;
  std::vector<double> keys(n);
  if (flavor == Flavor::kGemma) {
    // Gemma's scores do not follow its merge order; transformers orders by position.
    respell_space_tokens(tokens);
    for (size_t i = 0; i < n; ++i) keys[i] = -static_cast<double>(i);
  } else {
    const GgufValue* s = h.find("tokenizer.ggml.scores");
    SPECD_CHECK(s != nullptr, "{}: no tokenizer.ggml.scores (needed to order the merges)", what);
    std::vector<float> scores = s->as_floats("tokenizer.ggml.scores");
    SPECD_CHECK(scores.size() == n, "{}: {} scores for {} tokens", what, scores.size(), n);
    for (size_t i = 0; i < n; ++i) {
      SPECD_CHECK(!std::isnan(scores[i]), "{}: the score of token {} is NaN", what, i);
      keys[i] = scores[i];
    }
  }

  TokenizerJson result;
  // The vocabulary as a Python dict {token: id}: a repeated token keeps its last id.
  const StringTable last = last_ids(tokens);
  for (const MergeIds& m : merges_from_scores(tokens, keys, last)) {
    result.bpe.merge_ids.push_back({m.left, m.right, m.merged});
  }
  result.bpe.vocab.reserve(last.size());
  for (size_t e = 0; e < last.size(); ++e)
    result.bpe.vocab.emplace_back(last.key(e), last.value(e));
  result.vocab_captured = true;
  result.merges_captured = true;

  // Added tokens in transformers' order: CONTROL (special), USER_DEFINED that are in the
  // vocabulary (plain), then the special tokens of the tokenizer class.
  Json added = Json::array();
  StringTable added_contents;
  for (size_t i = 0; i < n; ++i) {
    if (types[i] != kControl) continue;
    added.push_back(added_token(file_tokens[i], true));
    added_contents.insert(file_tokens[i], 1);
  }
  for (size_t i = 0; i < n; ++i) {
    if (types[i] != kUserDefined) continue;
    if (!last.find(file_tokens[i]) && !added_contents.find(file_tokens[i])) continue;
    added.push_back(added_token(file_tokens[i], false));
  }
  const std::optional<std::string> bos =
      special_token(h, "tokenizer.ggml.bos_token_id", file_tokens, what);
  const std::optional<std::string> eos =
      special_token(h, "tokenizer.ggml.eos_token_id", file_tokens, what);
  const std::optional<std::string> unk =
      special_token(h, "tokenizer.ggml.unknown_token_id", file_tokens, what);
  const std::optional<std::string> pad =
      special_token(h, "tokenizer.ggml.padding_token_id", file_tokens, what);
  for (const auto* token : {&bos, &eos, &unk, &pad}) {
    if (*token && !token->value().empty()) added.push_back(added_token(**token, true));
  }
  if (flavor == Flavor::kGemma) added.push_back(added_token("<mask>", true));

  Json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", flavor == Flavor::kGemma ? Json("<unk>") : Json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", Json::object()},
                {"merges", Json::array()}};
  Json normalizer = nullptr;
  Json pre_tokenizer = nullptr;
  if (flavor == Flavor::kGemma) {
    normalizer = {{"type", "Replace"}, {"pattern", string_pattern(" ")}, {"content", kMetaspace}};
    pre_tokenizer = {{"type", "Split"},
                     {"pattern", string_pattern(" ")},
                     {"behavior", "MergedWithPrevious"},
                     {"invert", false}};
  } else if (flavor == Flavor::kPhi3) {
    normalizer = {
        {"type", "Sequence"},
        {"normalizers",
         Json::array(
             {{{"type", "Prepend"}, {"prepend", kMetaspace}},
              {{"type", "Replace"}, {"pattern", string_pattern(" ")}, {"content", kMetaspace}}})}};
  } else {
    pre_tokenizer = {{"type", "Metaspace"},
                     {"replacement", kMetaspace},
                     {"prepend_scheme", "first"},
                     {"split", false}};
  }
  result.doc = {{"version", "1.0"},
                {"truncation", nullptr},
                {"padding", nullptr},
                {"added_tokens", added},
                {"normalizer", normalizer},
                {"pre_tokenizer", pre_tokenizer},
                {"post_processor", nullptr},
                {"decoder", decoder(flavor != Flavor::kGemma)},
                {"model", model}};

  config = Json::object();
  if (bos) config["bos_token"] = *bos;
  if (eos) config["eos_token"] = *eos;
  if (unk) config["unk_token"] = *unk;
  if (pad) config["pad_token"] = *pad;
  // llama.cpp and transformers add BOS to a SentencePiece vocabulary unless told otherwise.
  config["add_bos_token"] = flag(h, "tokenizer.ggml.add_bos_token", true);
  config["add_eos_token"] = flag(h, "tokenizer.ggml.add_eos_token", false);
  if (const GgufValue* t = h.find("tokenizer.chat_template")) {
    config["chat_template"] = t->as_string("tokenizer.chat_template");
  }
  return result;
}

}  // namespace specd::tok
