// Stop-string matching over streamed text.
#include "server/text_stream.h"

#include <algorithm>

namespace specd::server {

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : detokenizer_(tokenizer, true), stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string TextStream::push(int32_t token) {
  if (stopped_) return {};
  held_ += detokenizer_.push(token);
  return release();
}

std::string TextStream::finish() {
  if (stopped_) return {};
  held_ += detokenizer_.flush();
  std::string out = release();
  if (!stopped_) out += held_;
  held_.clear();
  return out;
}

std::string TextStream::release() {
  // The earliest stop string occurrence ends the text there.
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) cut = std::min(cut, held_.find(stop));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Keep the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    const size_t longest = std::min(stop.size() - 1, held_.size());
    for (size_t len = longest; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace specd::server
