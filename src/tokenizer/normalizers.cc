// Implementations of the tokenizer.json normalizers.
#include "tokenizer/normalizers.h"

#include <vector>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specd::tok {
namespace {

// True if `text` has a byte >= `limit`.
bool has_byte_at_least(std::string_view text, unsigned char limit) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= limit) return true;
  }
  return false;
}

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = normalize_unicode(text, form_); }
  // ASCII is invariant; for NFC so is everything below U+0300 (lead bytes below 0xCC).
  bool may_change(std::string_view text) const override {
    return has_byte_at_least(text, form_ == NormalForm::kNfc ? 0xCC : 0x80);
  }

 private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  bool may_change(std::string_view text) const override {
    for (char c : text) {
      if ((c >= 'A' && c <= 'Z') || static_cast<unsigned char>(c) >= 0x80) return true;
    }
    return false;
  }
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    append_lowercase(out, text);
    text = std::move(out);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!is_whitespace(next_code_point(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t prev = end;
        if (!is_whitespace(prev_code_point(text, prev))) break;
        end = prev;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccents : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      size_t start = pos;
      if (!is_mark(next_code_point(text, pos))) out.append(text, start, pos - start);
    }
    text = std::move(out);
  }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    matches.clear();
    pattern_.find_all(text, matches);
    if (matches.empty()) return;
    std::string out;
    out.reserve(text.size() + matches.size() * content_.size());
    size_t last = 0;
    for (auto [begin, end] : matches) {
      out.append(text, last, begin - last);
      out.append(content_);
      last = end;
    }
    out.append(text, last, std::string::npos);
    text = std::move(out);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class ByteLevelNormalizer : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size() * 2);
    append_byte_level(out, text);
    text = std::move(out);
  }
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }
  // Steps that leave the text alone pass it on unchanged, so one check per step suffices.
  bool may_change(std::string_view text) const override {
    for (const auto& step : steps_) {
      if (step->may_change(text)) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

bool bool_field(const Json& json, const char* key, bool fallback) {
  if (!json.contains(key) || json[key].is_null()) return fallback;
  SPECD_CHECK(json[key].is_boolean(), "normalizer field '{}' must be a boolean", key);
  return json[key].get<bool>();
}

std::string string_field(const Json& json, const char* key, const char* type) {
  SPECD_CHECK(json.contains(key) && json[key].is_string(), "{} normalizer needs a string '{}'",
              type, key);
  return json[key].get<std::string>();
}

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& json) {
  if (json.is_null()) return nullptr;
  SPECD_CHECK(json.is_object() && json.contains("type") && json["type"].is_string(),
              "normalizer must be an object with a \"type\", got {}", json.dump().substr(0, 200));
  std::string type = json["type"].get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "Strip") {
    return std::make_unique<Strip>(bool_field(json, "strip_left", true),
                                   bool_field(json, "strip_right", true));
  }
  if (type == "Prepend") return std::make_unique<Prepend>(string_field(json, "prepend", "Prepend"));
  if (type == "Replace") {
    SPECD_CHECK(json.contains("pattern"), "Replace normalizer needs a 'pattern'");
    return std::make_unique<Replace>(Pattern::from_json(json["pattern"], "Replace normalizer"),
                                     string_field(json, "content", "Replace"));
  }
  if (type == "Sequence") {
    SPECD_CHECK(json.contains("normalizers") && json["normalizers"].is_array(),
                "Sequence normalizer needs a 'normalizers' array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const Json& step : json["normalizers"]) {
      if (auto normalizer = make_normalizer(step)) steps.push_back(std::move(normalizer));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  fail(
      "unsupported normalizer type '{}' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
      "StripAccents, Prepend, Replace, ByteLevel, Sequence)",
      type);
}

}  // namespace specd::tok
