// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, Sequence; no decoder joins tokens with spaces. Each runs as a streaming stage, so
// streaming and whole-sequence decoding share one code path and give identical text.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_file.h"

namespace specd::tok {

// Text flowing between stages. A token is the pieces from one with `begin` set to one with
// `end` set (possibly the same piece); tokens matter to stages that act per token.
struct DecodePiece {
  std::string text;
  bool begin = false;
  bool end = false;
};

// Appends a stage's output pieces, merging the token boundaries into the text pieces.
class PieceSink {
 public:
  explicit PieceSink(std::vector<DecodePiece>& out) : out_(&out) {}
  void open() {
    pending_begin_ = true;
    last_is_current_ = false;
  }
  void write(std::string_view text);
  void close();
  // Called by the driver when it starts feeding a fresh output vector.
  void new_batch() { last_is_current_ = false; }

 private:
  std::vector<DecodePiece>* out_;
  bool pending_begin_ = false;
  bool last_is_current_ = false;
};

// One decoder step with per-stream state.
class DecodeStage {
 public:
  virtual ~DecodeStage() = default;
  virtual void begin_token(PieceSink& out) = 0;
  virtual void text(std::string_view text, PieceSink& out) = 0;
  virtual void end_token(PieceSink& out) = 0;
  // End of the stream: everything held back is released.
  virtual void finish(PieceSink& out) = 0;
};

// The decoding state of one sequence of tokens.
class DecodeStream {
 public:
  explicit DecodeStream(std::vector<std::unique_ptr<DecodeStage>> stages);
  // Feeds one token string; appends the text that became final to `out`.
  void push_token(std::string_view token, std::string& out);
  // Ends the stream; appends the remaining text to `out`.
  void finish(std::string& out);

 private:
  void run(size_t first_stage, std::string& out, bool finishing);
  std::vector<std::unique_ptr<DecodeStage>> stages_;
  std::vector<PieceSink> sinks_;
  std::vector<std::vector<DecodePiece>> buffers_;
};

class Decoder {
 public:
  // Builds from tokenizer.json's "decoder"; null joins tokens with single spaces, as
  // tokenizers does. Unsupported types (BPEDecoder, WordPiece, CTC) throw specd::Error.
  static Decoder from_json(const Json& json);
  std::unique_ptr<DecodeStream> start() const;

 private:
  void add(const Json& json);
  std::vector<std::function<std::unique_ptr<DecodeStage>()>> factories_;
};

}  // namespace specd::tok
