// SentencePiece-style GGUF tokenizers (tokenizer.ggml.model "llama": tokens, scores and token
// types, no merges) built the way transformers' GGUF conversion builds them.
#pragma once

#include <string>

#include "io/gguf.h"
#include "io/json_file.h"
#include "tokenizer/json_reader.h"

namespace specd::tok {

// The tokenizer.json equivalent (vocabulary and merges already in `bpe`, the rest in `doc`)
// and the tokenizer_config.json equivalent (`config`: bos/eos/unk/pad tokens, add_bos_token,
// add_eos_token, chat_template) of a GGUF file whose tokenizer.ggml.model is "llama":
//  - general.architecture gemma/gemma2/gemma3: GemmaTokenizer (spaces become "▁", no prefix
//    space, unk_token "<unk>", space-only tokens respelled with "▁", merges ordered by position);
//  - phi3: a "▁" prepended by the normalizer and no pre-tokenizer;
//  - anything else: LlamaTokenizer (Metaspace with prepend_scheme "first", merges by score).
// BPE with byte fallback and fuse_unk; CONTROL tokens special, USER_DEFINED tokens plain added
// tokens; BOS added unless tokenizer.ggml.add_bos_token is false. Throws specd::Error naming
// `what` on missing or inconsistent metadata.
TokenizerJson gguf_spm_tokenizer(const GgufHeader& header, const std::string& what, Json& config);

}  // namespace specd::tok
