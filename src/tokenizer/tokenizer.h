// Public tokenizer API: Hugging Face tokenizer.json (BPE) encoding and decoding, byte-exact
// with the `tokenizers` library, plus a UTF-8-safe streaming detokenizer for generation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_file.h"

namespace specd {

namespace tok {
struct TokenizerImpl;
class DecodeStream;
}  // namespace tok
class Tokenizer;
Tokenizer load_gguf_tokenizer(const std::string& path);

// An immutable tokenizer. Copies share the loaded tables; all const methods are thread-safe.
class Tokenizer {
 public:
  // Loads MODEL_DIR/tokenizer.json plus, when present, tokenizer_config.json and
  // chat_template.jinja; MODEL_DIR may also be a GGUF file (see gguf_tokenizer.h). Throws
  // specd::Error naming the file and the problem.
  static Tokenizer load(const std::string& model_dir);
  // Builds from tokenizer.json text and a tokenizer_config object. Each top-level key of
  // `overrides` replaces that key of tokenizer.json (used by tests to derive variants).
  static Tokenizer from_json_text(std::string_view tokenizer_json, Json config = Json::object(),
                                  const Json& overrides = Json());

  // Token ids of `text`. Added tokens (special or not) written in the text are matched as in
  // `tokenizers`. With `add_special_tokens`, the post-processor's tokens (e.g. BOS) are added.
  // Invalid UTF-8 is first repaired: each maximal invalid subpart becomes U+FFFD.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Text of `ids` (unknown ids are skipped, as `tokenizers` does). Invalid byte sequences
  // produced by byte-level or byte-fallback tokens decode to U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One past the largest id of the vocabulary and the added tokens.
  int vocab_size() const;
  std::optional<int32_t> token_id(std::string_view token) const;
  // Raw vocabulary string of `id` (added token content first); throws specd::Error for an id
  // that has no token.
  std::string token_text(int32_t id) const;
  bool is_special(int32_t id) const;
  // Ids of tokenizer_config.json's bos_token / eos_token, when given and known.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // chat_template.jinja, else tokenizer_config.json's "chat_template" (the string form, or the
  // entry named "default" of the list form); empty if none.
  const std::string& chat_template() const;
  // tokenizer_config.json (an empty object if there is none).
  const Json& config() const;

 private:
  friend class StreamingDetokenizer;
  friend Tokenizer load_gguf_tokenizer(const std::string& path);
  explicit Tokenizer(std::shared_ptr<const tok::TokenizerImpl> impl);
  std::shared_ptr<const tok::TokenizerImpl> impl_;
};

// Turns generated ids into text incrementally. push() returns only complete UTF-8 that no
// later token can change; the concatenation of all push() results and flush() equals
// tokenizer.decode(all ids, skip_special_tokens).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  ~StreamingDetokenizer();
  StreamingDetokenizer(StreamingDetokenizer&&) noexcept;
  StreamingDetokenizer& operator=(StreamingDetokenizer&&) noexcept;

  // Text that became final with this token (may be empty).
  std::string push(int32_t id);
  // Whatever remains at the end; the detokenizer then starts a new, empty stream.
  std::string flush();

 private:
  std::shared_ptr<const tok::TokenizerImpl> impl_;
  bool skip_special_tokens_;
  std::unique_ptr<tok::DecodeStream> stream_;
};

}  // namespace specd
