// Streaming implementations of the tokenizer.json decoders.
#include "tokenizer/decoders.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace specd::tok {

void PieceSink::write(std::string_view text) {
  if (text.empty()) return;
  out_->push_back({std::string(text), pending_begin_, false});
  pending_begin_ = false;
  last_is_current_ = true;
}

void PieceSink::close() {
  if (last_is_current_ && !out_->empty()) {
    out_->back().end = true;
  } else {
    out_->push_back({std::string(), pending_begin_, true});
  }
  pending_begin_ = false;
  last_is_current_ = false;
}

namespace {

// Replace: per token, the matches of a pattern become `content`. A literal pattern streams,
// holding back only a tail that could still start a match; a regex waits for the whole token.
class ReplaceStage : public DecodeStage {
 public:
  ReplaceStage(std::shared_ptr<const Pattern> pattern, std::shared_ptr<const std::string> content)
      : pattern_holder_(std::move(pattern)),
        content_holder_(std::move(content)),
        pattern_(*pattern_holder_),
        content_(*content_holder_) {}
  void begin_token(PieceSink& out) override {
    pending_.clear();
    out.open();
  }
  void text(std::string_view text, PieceSink& out) override {
    pending_.append(text);
    if (!pattern_.is_literal()) return;
    matches_.clear();
    pattern_.find_all(pending_, matches_);
    size_t length = pattern_.literal_text().size();
    size_t safe = pending_.size() >= length - 1 ? pending_.size() - (length - 1) : 0;
    if (!matches_.empty()) safe = std::max(safe, matches_.back().second);
    safe = floor_char_boundary(pending_, safe);
    emit(safe, out);
  }
  void end_token(PieceSink& out) override {
    matches_.clear();
    pattern_.find_all(pending_, matches_);
    emit(pending_.size(), out);
    out.close();
  }
  void finish(PieceSink&) override {}

 private:
  // Writes the replaced text of pending_[0, upto) (matches_ are those of pending_).
  void emit(size_t upto, PieceSink& out) {
    std::string result;
    size_t last = 0;
    for (auto [begin, end] : matches_) {
      if (end > upto) break;
      result.append(pending_, last, begin - last);
      result.append(content_);
      last = end;
    }
    result.append(pending_, last, upto - last);
    pending_.erase(0, upto);
    out.write(result);
  }

  std::shared_ptr<const Pattern> pattern_holder_;
  std::shared_ptr<const std::string> content_holder_;
  const Pattern& pattern_;
  const std::string& content_;
  std::string pending_;
  std::vector<std::pair<size_t, size_t>> matches_;
};

// ByteFallback: runs of "<0xXX>" tokens become their bytes when those form valid UTF-8, and
// one U+FFFD per byte otherwise; a run is decided when it ends, so it is held until then.
class ByteFallbackStage : public DecodeStage {
 public:
  void begin_token(PieceSink&) override {
    token_.clear();
    passing_ = false;
  }
  void text(std::string_view text, PieceSink& out) override {
    if (passing_) {
      out.write(text);
      return;
    }
    token_.append(text);
    if (!could_be_byte_token(token_)) {
      flush_run(out);
      out.open();
      out.write(token_);
      passing_ = true;
    }
  }
  void end_token(PieceSink& out) override {
    if (passing_) {
      out.close();
      return;
    }
    int byte = parse_byte_token(token_);
    if (byte >= 0) {
      run_.push_back(static_cast<char>(byte));
      return;
    }
    flush_run(out);
    out.open();
    out.write(token_);
    out.close();
  }
  void finish(PieceSink& out) override { flush_run(out); }

 private:
  static bool could_be_byte_token(std::string_view t) {
    constexpr std::string_view kPrefix = "<0x";
    if (t.size() > 6) return false;
    if (t.substr(0, std::min<size_t>(3, t.size())) !=
        kPrefix.substr(0, std::min<size_t>(3, t.size())))
      return false;
    return t.size() < 6 || t[5] == '>';
  }
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // tokenizers: six bytes "<0x", two more parsed by u8::from_str_radix(_, 16), then ">".
  static int parse_byte_token(std::string_view t) {
    if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
    if (t[3] == '+') return hex_digit(t[4]);
    int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
  void flush_run(PieceSink& out) {
    if (run_.empty()) return;
    if (is_valid_utf8(run_)) {
      out.open();
      out.write(run_);
      out.close();
    } else {
      for (size_t i = 0; i < run_.size(); ++i) {
        out.open();
        out.write(kReplacementUtf8);
        out.close();
      }
    }
    run_.clear();
  }

  std::string token_;
  std::string run_;
  bool passing_ = false;
};

// Fuse: all tokens become one.
class FuseStage : public DecodeStage {
 public:
  void begin_token(PieceSink& out) override {
    if (!opened_) out.open();
    opened_ = true;
  }
  void text(std::string_view text, PieceSink& out) override { out.write(text); }
  void end_token(PieceSink&) override {}
  void finish(PieceSink& out) override {
    if (opened_) out.close();
  }

 private:
  bool opened_ = false;
};

// Strip: removes up to `start` leading and `stop` trailing `content` characters per token;
// trailing candidates are held until the token ends.
class StripStage : public DecodeStage {
 public:
  StripStage(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void begin_token(PieceSink& out) override {
    out.open();
    leading_budget_ = start_;
    held_.clear();
    held_count_ = 0;
  }
  void text(std::string_view text, PieceSink& out) override {
    std::string result;
    for (size_t pos = 0; pos < text.size();) {
      size_t begin = pos;
      char32_t c = next_code_point(text, pos);
      std::string_view ch = text.substr(begin, pos - begin);
      if (leading_budget_ > 0) {
        if (c == content_) {
          --leading_budget_;
          continue;
        }
        leading_budget_ = 0;
      }
      leading_budget_ = 0;
      if (stop_ > 0 && c == content_) {
        held_.append(ch);
        if (++held_count_ > stop_) {
          size_t first = utf8_sequence_length(static_cast<unsigned char>(held_[0]));
          result.append(held_, 0, first);
          held_.erase(0, first);
          --held_count_;
        }
      } else {
        result.append(held_);
        held_.clear();
        held_count_ = 0;
        result.append(ch);
      }
    }
    out.write(result);
  }
  void end_token(PieceSink& out) override {
    held_.clear();
    held_count_ = 0;
    out.close();
  }
  void finish(PieceSink&) override {}

 private:
  char32_t content_;
  size_t start_, stop_;
  size_t leading_budget_ = 0;
  std::string held_;
  size_t held_count_ = 0;
};

// Metaspace: the replacement character becomes a space, and is dropped from the first token
// unless the prepend scheme is "never".
class MetaspaceStage : public DecodeStage {
 public:
  MetaspaceStage(char32_t replacement, bool strip_first)
      : replacement_(replacement), strip_first_(strip_first) {}
  void begin_token(PieceSink& out) override {
    first_ = index_++ == 0;
    out.open();
  }
  void text(std::string_view text, PieceSink& out) override {
    std::string result;
    for (size_t pos = 0; pos < text.size();) {
      size_t begin = pos;
      if (next_code_point(text, pos) == replacement_) {
        if (!(first_ && strip_first_)) result.push_back(' ');
      } else {
        result.append(text, begin, pos - begin);
      }
    }
    out.write(result);
  }
  void end_token(PieceSink& out) override { out.close(); }
  void finish(PieceSink&) override {}

 private:
  char32_t replacement_;
  bool strip_first_;
  size_t index_ = 0;
  bool first_ = false;
};

// ByteLevel: each token's characters map back to bytes (a token with a character outside the
// alphabet contributes its own UTF-8 bytes), all bytes form one token, and invalid UTF-8
// becomes U+FFFD by the maximal-subpart rule. Incomplete trailing sequences are held.
class ByteLevelStage : public DecodeStage {
 public:
  void begin_token(PieceSink&) override { token_.clear(); }
  void text(std::string_view text, PieceSink&) override { token_.append(text); }
  void end_token(PieceSink& out) override {
    size_t before = bytes_.size();
    if (!byte_level_to_bytes(token_, bytes_)) {
      bytes_.resize(before);
      bytes_.append(token_);
    }
    token_.clear();
    release(out, false);
  }
  void finish(PieceSink& out) override {
    release(out, true);
    if (opened_) out.close();
  }

 private:
  void release(PieceSink& out, bool final) {
    if (!opened_) out.open();
    opened_ = true;
    std::string text;
    size_t consumed = append_utf8_lossy(text, bytes_, final);
    bytes_.erase(0, consumed);
    out.write(text);
  }

  std::string token_;
  std::string bytes_;
  bool opened_ = false;
};

// No decoder: tokens joined by single spaces into one token.
class JoinStage : public DecodeStage {
 public:
  void begin_token(PieceSink& out) override {
    if (count_++ == 0) {
      out.open();
    } else {
      out.write(" ");
    }
  }
  void text(std::string_view text, PieceSink& out) override { out.write(text); }
  void end_token(PieceSink&) override {}
  void finish(PieceSink& out) override {
    if (count_ > 0) out.close();
  }

 private:
  size_t count_ = 0;
};

char32_t single_char(const Json& json, const char* key, const char* type) {
  SPECD_CHECK(json.contains(key) && json[key].is_string(), "{} decoder needs a string '{}'", type,
              key);
  std::string text = json[key].get<std::string>();
  SPECD_CHECK(is_valid_utf8(text) && count_code_points(text) == 1,
              "{} decoder: '{}' must be a single character", type, key);
  size_t pos = 0;
  return next_code_point(text, pos);
}

}  // namespace

DecodeStream::DecodeStream(std::vector<std::unique_ptr<DecodeStage>> stages)
    : stages_(std::move(stages)), buffers_(stages_.size() + 1) {
  sinks_.reserve(stages_.size());
  for (size_t i = 0; i < stages_.size(); ++i) sinks_.emplace_back(buffers_[i + 1]);
}

void DecodeStream::run(size_t first_stage, std::string& out, bool finishing) {
  for (size_t i = first_stage; i < stages_.size(); ++i) {
    buffers_[i + 1].clear();
    sinks_[i].new_batch();
    DecodeStage& stage = *stages_[i];
    for (const DecodePiece& piece : buffers_[i]) {
      if (piece.begin) stage.begin_token(sinks_[i]);
      if (!piece.text.empty()) stage.text(piece.text, sinks_[i]);
      if (piece.end) stage.end_token(sinks_[i]);
    }
    if (finishing) stage.finish(sinks_[i]);
  }
  for (const DecodePiece& piece : buffers_.back()) out.append(piece.text);
}

void DecodeStream::push_token(std::string_view token, std::string& out) {
  buffers_[0].clear();
  buffers_[0].push_back({std::string(token), true, true});
  run(0, out, false);
}

void DecodeStream::finish(std::string& out) {
  buffers_[0].clear();
  run(0, out, true);
}

Decoder Decoder::from_json(const Json& json) {
  Decoder decoder;
  if (json.is_null()) {
    decoder.factories_.push_back([] { return std::make_unique<JoinStage>(); });
  } else {
    decoder.add(json);
  }
  return decoder;
}

void Decoder::add(const Json& json) {
  SPECD_CHECK(json.is_object() && json.contains("type") && json["type"].is_string(),
              "decoder must be an object with a \"type\", got {}", json.dump().substr(0, 200));
  std::string type = json["type"].get<std::string>();
  if (type == "ByteLevel") {
    factories_.push_back([] { return std::make_unique<ByteLevelStage>(); });
  } else if (type == "ByteFallback") {
    factories_.push_back([] { return std::make_unique<ByteFallbackStage>(); });
  } else if (type == "Fuse") {
    factories_.push_back([] { return std::make_unique<FuseStage>(); });
  } else if (type == "Strip") {
    char32_t content = single_char(json, "content", "Strip");
    size_t start = json.value("start", size_t{0}), stop = json.value("stop", size_t{0});
    factories_.push_back([=] { return std::make_unique<StripStage>(content, start, stop); });
  } else if (type == "Metaspace") {
    char32_t replacement = single_char(json, "replacement", "Metaspace");
    bool strip_first = true;
    if (json.contains("prepend_scheme") && json["prepend_scheme"].is_string()) {
      strip_first = json["prepend_scheme"].get<std::string>() != "never";
    }
    if (json.contains("add_prefix_space") && json["add_prefix_space"].is_boolean() &&
        !json["add_prefix_space"].get<bool>()) {
      strip_first = false;
    }
    factories_.push_back(
        [=] { return std::make_unique<MetaspaceStage>(replacement, strip_first); });
  } else if (type == "Replace") {
    SPECD_CHECK(json.contains("pattern") && json.contains("content") && json["content"].is_string(),
                "Replace decoder needs 'pattern' and a string 'content'");
    auto pattern =
        std::make_shared<const Pattern>(Pattern::from_json(json["pattern"], "Replace decoder"));
    auto content = std::make_shared<const std::string>(json["content"].get<std::string>());
    factories_.push_back(
        [pattern, content] { return std::make_unique<ReplaceStage>(pattern, content); });
  } else if (type == "Sequence") {
    SPECD_CHECK(json.contains("decoders") && json["decoders"].is_array(),
                "Sequence decoder needs a 'decoders' array");
    for (const Json& step : json["decoders"]) add(step);
  } else {
    fail(
        "unsupported decoder type '{}' (supported: ByteLevel, Metaspace, ByteFallback, Fuse, "
        "Strip, Replace, Sequence)",
        type);
  }
}

std::unique_ptr<DecodeStream> Decoder::start() const {
  std::vector<std::unique_ptr<DecodeStage>> stages;
  stages.reserve(factories_.size());
  for (const auto& factory : factories_) stages.push_back(factory());
  return std::make_unique<DecodeStream>(std::move(stages));
}

}  // namespace specd::tok
