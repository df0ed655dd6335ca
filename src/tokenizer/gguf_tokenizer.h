// Tokenizers from GGUF metadata (tokenizer.ggml.*), expressed as the equivalent Hugging Face
// tokenizer.json so that they run through the same pipeline.
#pragma once

#include <string>

#include "io/gguf.h"
#include "io/json_file.h"
#include "tokenizer/tokenizer.h"

namespace specd {

// The tokenizer.json of a GGUF tokenizer of model "gpt2" (byte-level BPE): vocabulary from
// tokenizer.ggml.tokens, merges, CONTROL tokens as special added tokens and USER_DEFINED ones
// as plain added tokens, the pre-tokenizer named by tokenizer.ggml.pre (default/gpt-2,
// smollm/starcoder/refact, llama-bpe/llama3, qwen2), and BOS added when
// tokenizer.ggml.add_bos_token is true. Throws specd::Error naming `what` for other models,
// unknown pre-tokenizers or malformed metadata.
Json gguf_tokenizer_json(const GgufHeader& header, const std::string& what);
// tokenizer_config.json equivalent: bos_token, eos_token, chat_template.
Json gguf_tokenizer_config(const GgufHeader& header, const std::string& what);

// The tokenizer of a GGUF file: model "gpt2" through gguf_tokenizer_json(), model "llama"
// (SentencePiece-style) through tok::gguf_spm_tokenizer().
Tokenizer load_gguf_tokenizer(const std::string& path);

}  // namespace specd
