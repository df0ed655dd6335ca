// SAX handler over nlohmann's DOM builder that diverts the two large model arrays.
#include "tokenizer/json_reader.h"

#include "core/error.h"

namespace specd::tok {
namespace {

using DomBuilder = nlohmann::detail::json_sax_dom_parser<Json>;

class TokenizerSax {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit TokenizerSax(TokenizerJson& result) : result_(result), dom_(result.doc, true) {}

  bool null() { return mode_ == Mode::kTree ? dom_.null() : bad_value("null"); }
  bool boolean(bool v) { return mode_ == Mode::kTree ? dom_.boolean(v) : bad_value("a boolean"); }
  bool number_integer(number_integer_t v) {
    if (mode_ == Mode::kVocab) return vocab_value(v);
    return mode_ == Mode::kTree ? dom_.number_integer(v) : bad_value("a number");
  }
  bool number_unsigned(number_unsigned_t v) {
    if (mode_ == Mode::kVocab) return vocab_value(static_cast<int64_t>(v));
    return mode_ == Mode::kTree ? dom_.number_unsigned(v) : bad_value("a number");
  }
  bool number_float(number_float_t v, const string_t& s) {
    return mode_ == Mode::kTree ? dom_.number_float(v, s) : bad_value("a number");
  }
  bool binary(binary_t& v) { return mode_ == Mode::kTree ? dom_.binary(v) : bad_value("binary"); }
  bool string(string_t& v) {
    switch (mode_) {
      case Mode::kTree:
        return dom_.string(v);
      case Mode::kMerges:
        split_merge_line(v, result_.bpe.merges.size(), result_.bpe.merges);
        return true;
      case Mode::kMergePair:
        pair_.push_back(std::move(v));
        return true;
      case Mode::kVocab:
        return bad_value("a string");
    }
    return true;
  }
  bool key(string_t& k) {
    if (mode_ == Mode::kVocab) {
      pending_key_ = std::move(k);
      return true;
    }
    if (mode_ != Mode::kTree) return bad_value("an object");
    if (depth_ <= 2) keys_[depth_] = k;
    return dom_.key(k);
  }
  bool start_object(std::size_t n) {
    if (mode_ != Mode::kTree) return bad_value("an object");
    if (at_model_field("vocab")) {
      mode_ = Mode::kVocab;
      result_.vocab_captured = true;
      ++depth_;
      return dom_.start_object(0);
    }
    ++depth_;
    if (depth_ <= 2) keys_[depth_].clear();
    return dom_.start_object(n);
  }
  bool end_object() {
    --depth_;
    if (mode_ == Mode::kVocab) mode_ = Mode::kTree;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kTree) return bad_value("an array");
    if (at_model_field("merges")) {
      mode_ = Mode::kMerges;
      result_.merges_captured = true;
      ++depth_;
      return dom_.start_array(0);
    }
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() {
    if (mode_ == Mode::kMergePair) {
      SPECD_CHECK(pair_.size() == 2, "model.merges[{}]: a merge pair must hold two strings",
                  result_.bpe.merges.size());
      result_.bpe.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) mode_ = Mode::kTree;
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& ex) {
    return dom_.parse_error(position, last_token, ex);
  }

 private:
  enum class Mode { kTree, kVocab, kMerges, kMergePair };

  // True when the value about to start is root["model"][field].
  bool at_model_field(const char* field) const {
    return depth_ == 2 && keys_[1] == "model" && keys_[2] == field;
  }
  bool vocab_value(int64_t id) {
    result_.bpe.vocab.emplace_back(std::move(pending_key_), id);
    return true;
  }
  bool bad_value(const char* what) {
    fail("model.{}: unexpected {}", mode_ == Mode::kVocab ? "vocab" : "merges", what);
  }

  TokenizerJson& result_;
  DomBuilder dom_;
  Mode mode_ = Mode::kTree;
  int depth_ = 0;
  std::string keys_[3];
  std::string pending_key_;
  std::vector<std::string> pair_;
};

}  // namespace

bool split_merge_line(const std::string& line, size_t index,
                      std::vector<std::pair<std::string, std::string>>& out) {
  if (line.starts_with("#version")) return false;
  size_t space = line.find(' ');
  SPECD_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
              "model.merges[{}]: '{}' is not two tokens separated by one space", index, line);
  out.emplace_back(line.substr(0, space), line.substr(space + 1));
  return true;
}

void read_merges(const Json& merges, std::vector<std::pair<std::string, std::string>>& out) {
  SPECD_CHECK(merges.is_array(), "model.merges must be an array");
  out.reserve(out.size() + merges.size());
  for (const Json& merge : merges) {
    if (merge.is_string()) {
      split_merge_line(merge.get<std::string>(), out.size(), out);
    } else {
      SPECD_CHECK(
          merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
          "model.merges[{}]: expected \"a b\" or [\"a\", \"b\"], got {}", out.size(), merge.dump());
      out.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
  }
}

TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& what) {
  TokenizerJson result;
  TokenizerSax sax(result);
  try {
    Json::sax_parse(text, &sax);
  } catch (const Json::exception& e) {
    fail("{}: invalid JSON: {}", what, e.what());
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  return result;
}

TokenizerJson tokenizer_json_from_tree(Json doc) {
  TokenizerJson result;
  result.doc = std::move(doc);
  if (!result.doc.is_object() || !result.doc.contains("model")) return result;
  Json& model = result.doc["model"];
  if (model.is_object() && model.contains("vocab") && model["vocab"].is_object()) {
    auto& vocab = result.bpe.vocab;
    vocab.reserve(model["vocab"].size());
    for (auto& [token, id] : model["vocab"].items()) {
      SPECD_CHECK(id.is_number_integer(), "model.vocab['{}'] must be an integer id", token);
      vocab.emplace_back(token, id.get<int64_t>());
    }
    model["vocab"] = Json::object();
    result.vocab_captured = true;
  }
  if (model.is_object() && model.contains("merges") && model["merges"].is_array()) {
    read_merges(model["merges"], result.bpe.merges);
    model["merges"] = Json::array();
    result.merges_captured = true;
  }
  return result;
}

}  // namespace specd::tok
