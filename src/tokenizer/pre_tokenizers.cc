// Implementations of the tokenizer.json pre-tokenizers.
#include "tokenizer/pre_tokenizers.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specd::tok {
namespace {

// GPT-2's pre-tokenization regex, used by ByteLevel with use_regex (Oniguruma dialect).
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Rust regex crate's `\w+|[^\w\s]+`, the Whitespace pre-tokenizer.
constexpr std::string_view kWhitespaceRegex =
    R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}\p{White_Space}]+)";

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, bool map_bytes)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex), map_bytes_(map_bytes) {
    if (use_regex_) regex_ = Pattern::oniguruma(kGpt2Regex);
  }
  void pre_tokenize(PieceList& list) const override {
    if (add_prefix_space_) {
      std::string prefixed;
      for (Piece& piece : list.pieces) {
        std::string_view text = list.text(piece);
        if (text.empty() || text[0] == ' ') continue;
        prefixed.assign(1, ' ');
        prefixed.append(text);
        list.set_text(piece, prefixed);
      }
    }
    if (use_regex_) {
      split_pieces(list, SplitBehavior::kIsolated,
                   [&](std::string_view text, std::vector<MatchSpan>& spans) {
                     regex_.find_spans(text, spans);
                   });
    }
    if (map_bytes_) {
      std::string mapped;
      for (Piece& piece : list.pieces) {
        mapped.clear();
        append_byte_level(mapped, list.text(piece));
        list.set_text(piece, mapped);
      }
    }
  }

 private:
  bool add_prefix_space_, use_regex_, map_bytes_;
  Pattern regex_;
};

class Split : public PreTokenizer {
 public:
  Split(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PieceList& list) const override {
    if (behavior_ == SplitBehavior::kIsolated) {
      // Fast path (the Llama-3/Qwen pre-tokenizer): matches and the gaps between them are the
      // pieces, whatever the inversion.
      thread_local std::vector<std::pair<size_t, size_t>> matches;
      std::vector<Piece> result;
      result.reserve(list.pieces.size() * 4);
      for (const Piece& piece : list.pieces) {
        std::string_view text = list.text(piece);
        matches.clear();
        pattern_.find_all(text, matches);
        size_t previous = 0;
        auto emit = [&](size_t begin, size_t end) {
          if (begin < end) {
            result.push_back({piece.begin + begin, piece.begin + end, piece.at_start && begin == 0,
                              piece.in_arena});
          }
        };
        for (auto [begin, end] : matches) {
          emit(previous, begin);
          emit(begin, end);
          previous = end;
        }
        emit(previous, text.size());
      }
      list.pieces = std::move(result);
      return;
    }
    split_pieces(list, behavior_, [&](std::string_view text, std::vector<MatchSpan>& spans) {
      pattern_.find_spans(text, spans, invert_);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { kAlways, kNever, kFirst };

class Metaspace : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : scheme_(scheme), split_(split), replacement_char_(replacement) {
    append_utf8(replacement_, replacement);
  }
  void pre_tokenize(PieceList& list) const override {
    std::string rewritten;
    for (Piece& piece : list.pieces) {
      std::string_view text = list.text(piece);
      rewritten.clear();
      bool prepend = (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && piece.at_start));
      // Spaces become the replacement before the "already starts with it" test.
      if (prepend && !text.empty() && text[0] != ' ' && !text.starts_with(replacement_)) {
        rewritten.append(replacement_);
      }
      for (char c : text) {
        if (c == ' ') {
          rewritten.append(replacement_);
        } else {
          rewritten.push_back(c);
        }
      }
      list.set_text(piece, rewritten);
    }
    if (split_) {
      split_pieces(list, SplitBehavior::kMergedWithNext,
                   [&](std::string_view text, std::vector<MatchSpan>& spans) {
                     char_predicate_spans(
                         text, [&](char32_t c) { return c == replacement_char_; }, spans);
                   });
    }
  }

 private:
  PrependScheme scheme_;
  bool split_;
  char32_t replacement_char_;
  std::string replacement_;
};

// Pre-tokenizers that split on a per-character predicate.
template <typename Predicate>
class CharSplit : public PreTokenizer {
 public:
  CharSplit(Predicate predicate, SplitBehavior behavior)
      : predicate_(std::move(predicate)), behavior_(behavior) {}
  void pre_tokenize(PieceList& list) const override {
    split_pieces(list, behavior_, [&](std::string_view text, std::vector<MatchSpan>& spans) {
      char_predicate_spans(text, predicate_, spans);
    });
  }

 private:
  Predicate predicate_;
  SplitBehavior behavior_;
};

template <typename Predicate>
std::unique_ptr<PreTokenizer> char_split(Predicate predicate, SplitBehavior behavior) {
  return std::make_unique<CharSplit<Predicate>>(std::move(predicate), behavior);
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(PieceList& list) const override {
    for (const auto& step : steps_) step->pre_tokenize(list);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

bool bool_field(const Json& json, const char* key, bool fallback) {
  if (!json.contains(key) || json[key].is_null()) return fallback;
  SPECD_CHECK(json[key].is_boolean(), "pre-tokenizer field '{}' must be a boolean", key);
  return json[key].get<bool>();
}

char32_t single_char_field(const Json& json, const char* key, const char* type) {
  SPECD_CHECK(json.contains(key) && json[key].is_string(), "{} pre-tokenizer needs a string '{}'",
              type, key);
  std::string text = json[key].get<std::string>();
  SPECD_CHECK(is_valid_utf8(text) && count_code_points(text) == 1,
              "{} pre-tokenizer: '{}' must be a single character", type, key);
  size_t pos = 0;
  return next_code_point(text, pos);
}

std::unique_ptr<PreTokenizer> make_metaspace(const Json& json) {
  char32_t replacement = single_char_field(json, "replacement", "Metaspace");
  PrependScheme scheme = PrependScheme::kAlways;
  if (json.contains("prepend_scheme") && !json["prepend_scheme"].is_null()) {
    std::string name = json["prepend_scheme"].get<std::string>();
    if (name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (name == "never") {
      scheme = PrependScheme::kNever;
    } else if (name == "always") {
      scheme = PrependScheme::kAlways;
    } else {
      fail("Metaspace pre-tokenizer: unknown prepend_scheme '{}'", name);
    }
  }
  if (!bool_field(json, "add_prefix_space", true)) {
    SPECD_CHECK(scheme == PrependScheme::kNever || !json.contains("prepend_scheme") ||
                    json["prepend_scheme"].is_null(),
                "Metaspace pre-tokenizer: add_prefix_space does not match prepend_scheme");
    scheme = PrependScheme::kNever;
  }
  return std::make_unique<Metaspace>(replacement, scheme, bool_field(json, "split", true));
}

PreTokenizerBuild build(const Json& json, bool defer_byte_level) {
  SPECD_CHECK(json.is_object() && json.contains("type") && json["type"].is_string(),
              "pre_tokenizer must be an object with a \"type\", got {}",
              json.dump().substr(0, 200));
  std::string type = json["type"].get<std::string>();
  PreTokenizerBuild result;
  if (type == "ByteLevel") {
    result.byte_level_deferred = defer_byte_level;
    result.pre_tokenizer =
        std::make_unique<ByteLevel>(bool_field(json, "add_prefix_space", true),
                                    bool_field(json, "use_regex", true), !defer_byte_level);
  } else if (type == "Split") {
    SPECD_CHECK(json.contains("pattern") && json.contains("behavior"),
                "Split pre-tokenizer needs 'pattern' and 'behavior'");
    result.pre_tokenizer =
        std::make_unique<Split>(Pattern::from_json(json["pattern"], "Split pre-tokenizer"),
                                parse_split_behavior(json["behavior"], "Split pre-tokenizer"),
                                bool_field(json, "invert", false));
  } else if (type == "Metaspace") {
    result.pre_tokenizer = make_metaspace(json);
  } else if (type == "Whitespace") {
    result.pre_tokenizer = std::make_unique<Split>(Pattern::pcre2(kWhitespaceRegex),
                                                   SplitBehavior::kRemoved, /*invert=*/true);
  } else if (type == "WhitespaceSplit") {
    result.pre_tokenizer = char_split(is_whitespace, SplitBehavior::kRemoved);
  } else if (type == "Punctuation") {
    SplitBehavior behavior = SplitBehavior::kIsolated;
    if (json.contains("behavior")) behavior = parse_split_behavior(json["behavior"], "Punctuation");
    result.pre_tokenizer = char_split(is_punctuation, behavior);
  } else if (type == "Digits") {
    bool individual = bool_field(json, "individual_digits", false);
    result.pre_tokenizer =
        char_split(is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  } else if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.push_back(char_split(is_whitespace, SplitBehavior::kRemoved));
    steps.push_back(char_split(is_punctuation, SplitBehavior::kIsolated));
    result.pre_tokenizer = std::make_unique<SequencePreTokenizer>(std::move(steps));
  } else if (type == "CharDelimiterSplit") {
    char32_t delimiter = single_char_field(json, "delimiter", "CharDelimiterSplit");
    result.pre_tokenizer =
        char_split([delimiter](char32_t c) { return c == delimiter; }, SplitBehavior::kRemoved);
  } else if (type == "Sequence") {
    SPECD_CHECK(json.contains("pretokenizers") && json["pretokenizers"].is_array(),
                "Sequence pre-tokenizer needs a 'pretokenizers' array");
    const Json& list = json["pretokenizers"];
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      bool last = i + 1 == list.size();
      PreTokenizerBuild step = build(list[i], defer_byte_level && last);
      result.byte_level_deferred = step.byte_level_deferred;
      if (step.pre_tokenizer) steps.push_back(std::move(step.pre_tokenizer));
    }
    result.pre_tokenizer = std::make_unique<SequencePreTokenizer>(std::move(steps));
  } else {
    fail(
        "unsupported pre-tokenizer type '{}' (supported: Split, ByteLevel, Metaspace, Digits, "
        "Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit, "
        "Sequence)",
        type);
  }
  return result;
}

}  // namespace

PreTokenizerBuild make_pre_tokenizer(const Json& json, bool allow_deferred_byte_level) {
  if (json.is_null()) return {};
  return build(json, allow_deferred_byte_level);
}

}  // namespace specd::tok
