// The GPT-2 byte-level alphabet: each byte maps to one printable code point (U+0021..U+0143).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace specd::tok {

// The code point standing for byte `b`.
char32_t byte_to_char(uint8_t b);
// The UTF-8 encoding (1 or 2 bytes) of byte_to_char(b).
std::string_view byte_to_utf8(uint8_t b);
// The byte that code point `c` stands for, or -1 if `c` is not in the alphabet.
int char_to_byte(char32_t c);

// Appends the byte-level form of raw bytes `bytes` (each byte becomes one character).
void append_byte_level(std::string& out, std::string_view bytes);

// Converts byte-level text back to raw bytes; returns false (leaving `out` partly written)
// when a character is outside the alphabet.
bool byte_level_to_bytes(std::string_view text, std::string& out);

}  // namespace specd::tok
