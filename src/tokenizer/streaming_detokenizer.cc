// StreamingDetokenizer: the decoder stages run incrementally, so each push returns exactly the
// text that no later token can change.
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace specd {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : impl_(tokenizer.impl_),
      skip_special_tokens_(skip_special_tokens),
      stream_(impl_->decoder.start()) {}

StreamingDetokenizer::~StreamingDetokenizer() = default;
StreamingDetokenizer::StreamingDetokenizer(StreamingDetokenizer&&) noexcept = default;
StreamingDetokenizer& StreamingDetokenizer::operator=(StreamingDetokenizer&&) noexcept = default;

std::string StreamingDetokenizer::push(int32_t id) {
  std::string out;
  const std::string* text = impl_->decode_text(id);
  if (text == nullptr || impl_->skip_in_decode(id, *text, skip_special_tokens_)) return out;
  stream_->push_token(*text, out);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out;
  stream_->finish(out);
  stream_ = impl_->decoder.start();
  return out;
}

}  // namespace specd
