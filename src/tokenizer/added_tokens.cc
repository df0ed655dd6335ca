// Added-token registration and matching (tokenizers' AddedVocabulary::find_matches).
#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specd::tok {

uint32_t TokenTrie::child(uint32_t node, uint8_t byte) const {
  const auto& children = nodes_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), byte,
                             [](const auto& entry, uint8_t b) { return entry.first < b; });
  return it != children.end() && it->first == byte ? it->second : 0;
}

void TokenTrie::insert(std::string_view pattern, int32_t value) {
  if (pattern.empty()) return;
  auto first = static_cast<uint8_t>(pattern[0]);
  if (!first_byte_[first]) {
    first_byte_[first] = true;
    single_first_byte_ = ++first_byte_count_ == 1 ? first : -1;
  }
  uint32_t node = 0;
  for (char c : pattern) {
    auto byte = static_cast<uint8_t>(c);
    uint32_t next = child(node, byte);
    if (next == 0) {
      next = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& children = nodes_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), byte,
                                 [](const auto& entry, uint8_t b) { return entry.first < b; });
      children.insert(it, {byte, next});
    }
    node = next;
  }
  if (nodes_[node].value < 0) nodes_[node].value = value;
}

size_t TokenTrie::next_candidate(std::string_view text, size_t pos) const {
  if (pos >= text.size()) return text.size();
  if (single_first_byte_ >= 0) {
    const void* hit = std::memchr(text.data() + pos, single_first_byte_, text.size() - pos);
    return hit == nullptr ? text.size() : static_cast<const char*>(hit) - text.data();
  }
  while (pos < text.size() && !first_byte_[static_cast<uint8_t>(text[pos])]) ++pos;
  return pos;
}

int32_t TokenTrie::longest_at(std::string_view text, size_t pos, size_t& end) const {
  int32_t best = -1;
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node == 0) break;
    if (nodes_[node].value >= 0) {
      best = nodes_[node].value;
      end = i + 1;
    }
  }
  return best;
}

namespace {

bool bool_field(const Json& json, const char* key, bool fallback) {
  if (!json.contains(key) || json[key].is_null()) return fallback;
  SPECD_CHECK(json[key].is_boolean(), "added_tokens: field '{}' must be a boolean", key);
  return json[key].get<bool>();
}

bool same_flags(const AddedToken& a, const AddedToken& b) {
  return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip &&
         a.rstrip == b.rstrip && a.normalized == b.normalized && a.special == b.special;
}

}  // namespace

void AddedVocabulary::build(const Json& added_tokens, const BpeModel& model,
                            const Normalizer* normalizer) {
  if (added_tokens.is_null()) return;
  SPECD_CHECK(added_tokens.is_array(), "tokenizer.json: added_tokens must be an array");
  std::map<int32_t, AddedToken> by_id;  // tokenizers' added_tokens_map_r
  int64_t next_id = static_cast<int64_t>(model.size());
  for (const Json& entry : added_tokens) {
    SPECD_CHECK(entry.is_object() && entry.contains("content") && entry["content"].is_string(),
                "added_tokens: each entry needs a string 'content', got {}", entry.dump());
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    if (token.content.empty()) continue;
    SPECD_CHECK(is_valid_utf8(token.content), "added_tokens: content is not valid UTF-8");
    token.single_word = bool_field(entry, "single_word", false);
    token.lstrip = bool_field(entry, "lstrip", false);
    token.rstrip = bool_field(entry, "rstrip", false);
    token.special = bool_field(entry, "special", false);
    token.normalized = bool_field(entry, "normalized", !token.special);

    std::optional<int32_t> existing = content_to_id_.find(token.content);
    if (existing && by_id.count(*existing) && same_flags(by_id[*existing], token)) continue;
    if (!existing) existing = model.token_to_id(token.content);
    int32_t id = existing ? *existing : static_cast<int32_t>(next_id++);
    token.id = id;
    token.decode_text = token.content;
    if (token.normalized && normalizer != nullptr) normalizer->normalize(token.decode_text);
    content_to_id_.insert(token.content, id);
    if (token.special) special_contents_.insert(token.content, 1);
    by_id[id] = std::move(token);
  }

  int32_t limit = 0;
  for (const auto& [id, token] : by_id) limit = std::max(limit, id + 1);
  id_to_index_.assign(static_cast<size_t>(limit), -1);
  for (auto& [id, token] : by_id) {
    id_to_index_[static_cast<size_t>(id)] = static_cast<int32_t>(tokens_.size());
    if (token.normalized) {
      normalized_trie_.insert(token.decode_text, id);
    } else {
      raw_trie_.insert(token.content, id);
    }
    tokens_.push_back(std::move(token));
  }
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  if (id < 0 || id >= id_limit()) return nullptr;
  int32_t index = id_to_index_[static_cast<size_t>(id)];
  return index < 0 ? nullptr : &tokens_[static_cast<size_t>(index)];
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  return content_to_id_.find(content);
}

bool AddedVocabulary::is_special_content(std::string_view content) const {
  return special_contents_.size() > 0 && special_contents_.find(content).has_value();
}

void AddedVocabulary::split(std::string_view text, bool normalized,
                            std::vector<Segment>& out) const {
  const TokenTrie& trie = normalized ? normalized_trie_ : raw_trie_;
  if (text.empty()) return;
  if (trie.empty()) {
    out.push_back({-1, 0, text.size()});
    return;
  }
  size_t start_offset = 0;  // end of the previous match
  size_t pos = 0;           // where the leftmost-longest search resumes
  while (pos < text.size()) {
    pos = trie.next_candidate(text, pos);
    if (pos >= text.size()) break;
    size_t stop = 0;
    int32_t id = trie.longest_at(text, pos, stop);
    if (id < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    pos = stop;  // the search resumes after this match even when it is discarded below
    const AddedToken& token = *by_id(id);
    if (token.single_word) {
      bool word_before = false, word_after = false;
      if (start > 0) {
        size_t p = start;
        word_before = is_regex_word_char(prev_code_point(text, p));
      }
      if (stop < text.size()) {
        size_t p = stop;
        word_after = is_regex_word_char(next_code_point(text, p));
      }
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t p = new_start;
        if (!is_whitespace(prev_code_point(text, p))) break;
        new_start = p;
      }
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t p = stop;
        if (!is_whitespace(next_code_point(text, p))) break;
        stop = p;
      }
    }
    if (start_offset < start) out.push_back({-1, start_offset, start});
    out.push_back({id, start, stop});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({-1, start_offset, text.size()});
}

}  // namespace specd::tok
