// Unicode character classes (with Rust's `char` semantics, as Hugging Face tokenizers uses them)
// and normalization forms through utf8proc.
#pragma once

#include <string>
#include <string_view>

namespace specd::tok {

// White_Space property (Rust char::is_whitespace, regex `\s`).
bool is_whitespace(char32_t c);
// General category N* (Rust char::is_numeric).
bool is_numeric(char32_t c);
// ASCII punctuation or general category P* (tokenizers' Punctuation pre-tokenizer).
bool is_punctuation(char32_t c);
// General category M* (combining marks, removed by StripAccents).
bool is_mark(char32_t c);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Returns `text` (valid UTF-8) in the given normal form.
std::string normalize_unicode(std::string_view text, NormalForm form);

// Appends the full lowercase mapping of `text` character by character (Rust
// char::to_lowercase: no context-dependent rules such as final sigma).
void append_lowercase(std::string& out, std::string_view text);

}  // namespace specd::tok
