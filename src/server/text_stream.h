// Generated tokens to text for a response: complete UTF-8 only, cut exactly at stop strings.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specd::server {

// Feeds tokens through a streaming detokenizer and holds back any tail that could still become
// a stop string, so released text never contains (part of) a stop string and never an
// incomplete UTF-8 sequence. A stop string may span any number of tokens.
class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops);

  // Adds a token; returns the text that became final. After a stop string is found, stopped()
  // is true and further tokens are ignored.
  std::string push(int32_t token);
  // The rest of the text at the end of generation (stop strings still apply).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::string release();

  StreamingDetokenizer detokenizer_;
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace specd::server
