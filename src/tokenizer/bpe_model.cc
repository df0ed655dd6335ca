// BPE encoding with tokenizers' exact merge order, plus a sharded cache of merged words.
#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace specd::tok {

namespace {

// A two-way set-associative per-thread cache from short words to their ids: one 64-byte slot
// per entry, no locks. Slots carry the owning model's id, so models share a thread's cache.
struct alignas(64) CacheSlot {
  uint64_t hash;
  uint32_t owner;  // 0 = empty
  uint8_t length;
  uint8_t count;
  char word[18];
  int32_t ids[8];
};
static_assert(sizeof(CacheSlot) == 64);
constexpr size_t kCacheSlots = size_t(1) << 16;  // 4 MiB per thread, allocated on first use

CacheSlot* thread_cache() {
  thread_local std::unique_ptr<CacheSlot[]> slots(new CacheSlot[kCacheSlots]());
  return slots.get();
}

// Longer words (runs of indentation, long identifiers) are rarer but costly to merge; they go
// to a small per-thread map keyed by owner id and word, emptied when it fills up.
constexpr size_t kMaxLongWordBytes = 256;
constexpr size_t kMaxLongWords = 8192;

std::unordered_map<std::string, std::vector<int32_t>>& long_word_cache() {
  thread_local std::unordered_map<std::string, std::vector<int32_t>> cache;
  return cache;
}

std::atomic<uint32_t> next_model_id{1};

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581

}  // namespace

BpeModel::BpeModel(BpeData data) : options_(std::move(data.options)) {
  constexpr int64_t kMaxId = int64_t(1) << 28;
  int64_t max_id = -1;
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(data.vocab.size());
  for (auto& [token, id] : data.vocab) {
    SPECD_CHECK(id >= 0 && id < kMaxId, "model.vocab: token '{}' has invalid id {}", token, id);
    max_id = std::max(max_id, id);
    entries.emplace_back(std::move(token), static_cast<int32_t>(id));
  }
  data.vocab.clear();
  vocab_.insert_many(std::move(entries));
  id_to_entry_.assign(static_cast<size_t>(max_id + 1), -1);
  for (size_t i = 0; i < vocab_.size(); ++i) {
    id_to_entry_[static_cast<size_t>(vocab_.value(i))] = static_cast<int32_t>(i);
  }

  if (!data.merge_ids.empty()) {
    merges_.reserve(data.merge_ids.size());
    auto known = [&](int32_t id) { return id >= 0 && id <= max_id && id_to_entry_[id] >= 0; };
    for (size_t rank = 0; rank < data.merge_ids.size(); ++rank) {
      const auto& [left, right, merged] = data.merge_ids[rank];
      SPECD_CHECK(known(left) && known(right) && known(merged),
                  "merge {} ({} {} -> {}) names an id outside the vocabulary", rank, left, right,
                  merged);
      merges_.insert(left, right, {static_cast<uint32_t>(rank), merged});
    }
    data.merge_ids.clear();
  }
  const size_t prefix_len = options_.continuing_subword_prefix.size();
  merges_.reserve(merges_.size() + data.merges.size());
  // Merges are resolved in blocks so the table lookups can overlap their cache misses.
  constexpr size_t kBlock = 32;
  std::string merged[kBlock];
  std::string_view keys[3 * kBlock];
  int32_t ids[3 * kBlock];
  for (size_t base = 0; base < data.merges.size(); base += kBlock) {
    const size_t n = std::min(kBlock, data.merges.size() - base);
    for (size_t i = 0; i < n; ++i) {
      const auto& [left, right] = data.merges[base + i];
      SPECD_CHECK(right.size() >= prefix_len, "model.merges[{}]: '{}' is shorter than the prefix",
                  base + i, right);
      merged[i].assign(left);
      merged[i].append(right, prefix_len, std::string::npos);
      keys[3 * i] = left;
      keys[3 * i + 1] = right;
      keys[3 * i + 2] = merged[i];
    }
    vocab_.find_many(keys, 3 * n, ids);
    for (size_t i = 0; i < n; ++i) {
      if (ids[3 * i] >= 0 && ids[3 * i + 1] >= 0) merges_.prefetch(ids[3 * i], ids[3 * i + 1]);
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t rank = base + i;
      const auto& [left, right] = data.merges[rank];
      SPECD_CHECK(ids[3 * i] >= 0 && ids[3 * i + 1] >= 0,
                  "model.merges[{}] '{} {}': '{}' is not in the vocabulary", rank, left, right,
                  ids[3 * i] >= 0 ? right : left);
      SPECD_CHECK(ids[3 * i + 2] >= 0,
                  "model.merges[{}] '{} {}': merged token '{}' is not in the vocabulary", rank,
                  left, right, merged[i]);
      merges_.insert(ids[3 * i], ids[3 * i + 1], {static_cast<uint32_t>(rank), ids[3 * i + 2]});
    }
  }
  data.merges.clear();

  if (options_.unk_token) unk_id_ = vocab_.find(*options_.unk_token);
  bool all_bytes = true;
  for (int b = 0; b < 256; ++b) {
    auto id = vocab_.find(byte_to_utf8(static_cast<uint8_t>(b)));
    byte_level_ids_[b] = id.value_or(-1);
    all_bytes &= id.has_value();
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_fallback_ids_[b] = vocab_.find(name).value_or(-1);
  }
  byte_level_fast_ = all_bytes && options_.continuing_subword_prefix.empty() &&
                     options_.end_of_word_suffix.empty();
  cache_owner_ = next_model_id.fetch_add(1);

  // Sentencepiece-style vocabularies (often without a pre-tokenizer: the whole text is one
  // word) rarely put "▁" right after another character. Collect the characters that do occur
  // before a "▁" inside some token; before any other "▁" no merge can ever join the text on its
  // left with it, so cutting long words there gives the same ids, much faster.
  split_at_metaspace_ = !options_.ignore_merges && options_.continuing_subword_prefix.empty() &&
                        options_.end_of_word_suffix.empty() && vocab_.find(kMetaspace).has_value();
  for (size_t i = 0; split_at_metaspace_ && i < vocab_.size(); ++i) {
    const std::string& token = vocab_.key(i);
    for (size_t at = token.find(kMetaspace, 1); at != std::string::npos;
         at = token.find(kMetaspace, at + 1)) {
      size_t p = at;
      char32_t before = prev_code_point(token, p);
      if (std::find(joins_metaspace_.begin(), joins_metaspace_.end(), before) ==
          joins_metaspace_.end()) {
        joins_metaspace_.push_back(before);
      }
    }
    if (joins_metaspace_.size() > 64) split_at_metaspace_ = false;  // not sentencepiece-like
  }
  // Without an unknown token and a full set of byte tokens, characters outside the vocabulary
  // are dropped, and the symbols around them become neighbours that may merge.
  bool all_fallback = options_.byte_fallback;
  for (int32_t id : byte_fallback_ids_) all_fallback &= id >= 0;
  may_drop_chars_ = !options_.unk_token.has_value() && !all_fallback;
}

bool BpeModel::is_dropped(std::string_view ch) const {
  if (!may_drop_chars_ || vocab_.find(ch)) return false;
  if (!options_.byte_fallback) return true;
  for (char c : ch) {
    if (byte_fallback_ids_[static_cast<uint8_t>(c)] < 0) return true;
  }
  return false;
}

BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_entry_.size()) return nullptr;
  int32_t entry = id_to_entry_[static_cast<size_t>(id)];
  return entry < 0 ? nullptr : &vocab_.key(static_cast<size_t>(entry));
}

void BpeModel::tokenize(std::string_view word, bool byte_level_input,
                        std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (split_at_metaspace_ && !byte_level_input && word.size() > 64) {
    // Cut before each "▁" that no token can join to the character before it.
    size_t start = 0;
    for (size_t at = word.find(kMetaspace, 1); at != std::string_view::npos;
         at = word.find(kMetaspace, at + 1)) {
      size_t p = at;
      const char32_t before = prev_code_point(word, p);
      if (std::find(joins_metaspace_.begin(), joins_metaspace_.end(), before) !=
          joins_metaspace_.end()) {
        continue;  // some token spans this position
      }
      if (is_dropped(word.substr(p, at - p))) continue;  // its neighbours may merge
      tokenize_piece(word.substr(start, at - start), byte_level_input, out);
      start = at;
    }
    tokenize_piece(word.substr(start), byte_level_input, out);
    return;
  }
  tokenize_piece(word, byte_level_input, out);
}

void BpeModel::tokenize_piece(std::string_view word, bool byte_level_input,
                              std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1 && byte_level_input && byte_level_fast_) {
    out.push_back(byte_level_ids_[static_cast<uint8_t>(word[0])]);  // nothing to merge
    return;
  }
  if (word.size() > sizeof(CacheSlot::word)) {
    if (word.size() > kMaxLongWordBytes) {
      tokenize_uncached(word, byte_level_input, out);
      return;
    }
    thread_local std::string key;
    key.assign(reinterpret_cast<const char*>(&cache_owner_), sizeof(cache_owner_));
    key.append(word);
    auto& cache = long_word_cache();
    if (auto it = cache.find(key); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
    const size_t start = out.size();
    tokenize_uncached(word, byte_level_input, out);
    if (cache.size() >= kMaxLongWords) cache.clear();
    cache.emplace(
        key, std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
    return;
  }
  const uint64_t hash = hash_bytes(word);
  // Two-way sets with the most recently used entry first.
  CacheSlot* set = thread_cache() + 2 * (hash % (kCacheSlots / 2));
  auto matches = [&](const CacheSlot& slot) {
    return slot.owner == cache_owner_ && slot.hash == hash && slot.length == word.size() &&
           std::memcmp(slot.word, word.data(), word.size()) == 0;
  };
  if (matches(set[0])) {
    out.insert(out.end(), set[0].ids, set[0].ids + set[0].count);
    return;
  }
  if (matches(set[1])) {
    std::swap(set[0], set[1]);
    out.insert(out.end(), set[0].ids, set[0].ids + set[0].count);
    return;
  }
  const size_t start = out.size();
  tokenize_uncached(word, byte_level_input, out);
  const size_t count = out.size() - start;
  if (count <= std::size(set[0].ids)) {
    set[1] = set[0];
    CacheSlot& slot = set[0];
    slot.owner = cache_owner_;
    slot.hash = hash;
    slot.length = static_cast<uint8_t>(word.size());
    slot.count = static_cast<uint8_t>(count);
    std::memcpy(slot.word, word.data(), word.size());
    std::copy(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(), slot.ids);
  }
}

void BpeModel::tokenize_uncached(std::string_view word, bool byte_level_input,
                                 std::vector<int32_t>& out) const {
  thread_local std::string mapped;
  std::string_view text = word;
  if (byte_level_input && (options_.ignore_merges || !byte_level_fast_)) {
    mapped.clear();
    append_byte_level(mapped, word);
    text = mapped;
  }
  if (options_.ignore_merges) {
    if (auto id = vocab_.find(text)) {
      out.push_back(*id);
      return;
    }
  }
  if (byte_level_input && byte_level_fast_) {
    thread_local std::vector<int32_t> symbols;
    symbols.clear();
    for (char c : word) symbols.push_back(byte_level_ids_[static_cast<uint8_t>(c)]);
    merge(symbols);
    out.insert(out.end(), symbols.begin(), symbols.end());
    return;
  }
  merge_word(text, out);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<int32_t> symbols;
  thread_local std::string key;
  symbols.clear();
  bool pending_unk = false;
  auto unk_id = [&]() -> int32_t {
    SPECD_CHECK(unk_id_.has_value(), "unk_token '{}' is not in the vocabulary",
                *options_.unk_token);
    return *unk_id_;
  };
  for (size_t pos = 0; pos < word.size();) {
    size_t start = pos;
    pos += utf8_sequence_length(static_cast<unsigned char>(word[pos]));
    key.clear();
    if (start > 0) key.append(options_.continuing_subword_prefix);
    key.append(word.substr(start, pos - start));
    if (pos >= word.size()) key.append(options_.end_of_word_suffix);
    if (auto id = vocab_.find(key)) {
      if (pending_unk) {
        symbols.push_back(unk_id());
        pending_unk = false;
      }
      symbols.push_back(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : key) all &= byte_fallback_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        // tokenizers does not flush a pending unknown token here; neither do we.
        for (char c : key) symbols.push_back(byte_fallback_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (options_.unk_token) {
      if (pending_unk && !options_.fuse_unk) symbols.push_back(unk_id());
      if (!pending_unk || !options_.fuse_unk) unk_id();  // fails early if it is missing
      pending_unk = true;
    }
  }
  if (pending_unk) symbols.push_back(unk_id());
  merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::merge(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  struct Entry {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
    int32_t left;   // the pair when the entry was pushed: if it is still there, the entry is
    int32_t right;  // valid without another table lookup
  };
  // Min-heap on (rank, pos), the order of tokenizers' Merge.
  auto later = [](const Entry& a, const Entry& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  thread_local std::vector<Entry> heap;
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<uint8_t> removed;
  heap.clear();
  prev.resize(n);
  next.resize(n);
  removed.assign(n, 0);
  for (size_t i = 0; i + 1 < n; ++i) merges_.prefetch(symbols[i], symbols[i + 1]);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    if (i + 1 < n) {
      if (const PairTable::Value* m = merges_.find(symbols[i], symbols[i + 1])) {
        heap.push_back({m->rank, static_cast<uint32_t>(i), m->merged, symbols[i], symbols[i + 1]});
      }
    }
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Entry top = heap.back();
    heap.pop_back();
    const size_t pos = top.pos;
    if (removed[pos] || next[pos] < 0) continue;
    const size_t right = static_cast<size_t>(next[pos]);
    if (symbols[pos] != top.left || symbols[right] != top.right) {
      // tokenizers accepts an entry whose position now holds any pair merging to the same id.
      const PairTable::Value* current = merges_.find(symbols[pos], symbols[right]);
      if (current == nullptr || current->merged != top.merged) continue;  // stale entry
    }
    symbols[pos] = top.merged;
    removed[right] = 1;
    next[pos] = next[right];
    if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<int32_t>(pos);
    if (prev[pos] >= 0) {
      const size_t left = static_cast<size_t>(prev[pos]);
      if (const PairTable::Value* m = merges_.find(symbols[left], symbols[pos])) {
        heap.push_back(
            {m->rank, static_cast<uint32_t>(left), m->merged, symbols[left], symbols[pos]});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (next[pos] >= 0) {
      const int32_t next_symbol = symbols[static_cast<size_t>(next[pos])];
      if (const PairTable::Value* m = merges_.find(symbols[pos], next_symbol)) {
        heap.push_back({m->rank, static_cast<uint32_t>(pos), m->merged, symbols[pos], next_symbol});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!removed[i]) symbols[kept++] = symbols[i];
  }
  symbols.resize(kept);
}

}  // namespace specd::tok
