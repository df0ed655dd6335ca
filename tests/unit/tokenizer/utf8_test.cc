// UTF-8 repair (maximal-subpart U+FFFD rule, as Python's errors="replace") and the byte map.
#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"

namespace specd::tok {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextIsUnchanged) {
  for (const std::string& s : std::vector<std::string>{"", "abc", "naïve", "中文", "😀👍🏽",
                                                       std::string("a\0b", 3)}) {
    EXPECT_TRUE(is_valid_utf8(s)) << s;
    EXPECT_EQ(to_valid_utf8(s), s);
  }
}

// Expected values are those of Python: bytes.decode("utf-8", errors="replace").
TEST(Utf8, MaximalSubpartsBecomeOneReplacementEach) {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"\xff", kFffd},
      {"a\x80z", "a" + kFffd + "z"},
      {"\xc0\xaf", kFffd + kFffd},                          // overlong lead C0
      {"\xe0\x80\xaf", kFffd + kFffd + kFffd},              // E0 needs A0..BF next
      {"\xed\xa0\x80", kFffd + kFffd + kFffd},              // surrogate
      {"\xf4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // above U+10FFFF
      {"\xe4\xb8", kFffd},                                  // truncated at the end
      {"\xe4\xb8\xe4\xb8\xad", kFffd + "中"},               // truncated, then valid
      {"\xf0\x9f\x98", kFffd},                              // truncated emoji
      {"\xf0\x9f\x98"
       "a",
       kFffd + "a"},
      {"\xc2\xc2\xa9", kFffd + "\xc2\xa9"},
      {"\xf8\x88\x80\x80\x80", kFffd + kFffd + kFffd + kFffd + kFffd},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(is_valid_utf8(c.in));
    EXPECT_EQ(to_valid_utf8(c.in), c.out) << testing::PrintToString(c.in);
  }
}

TEST(Utf8, StreamingKeepsIncompleteTail) {
  std::string out;
  EXPECT_EQ(append_utf8_lossy(out, "ab\xe2\x82", /*final=*/false), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_utf8_lossy(out, "\xe2\x82\xac", false), 3u);
  EXPECT_EQ(out, "€");
  out.clear();
  // An invalid continuation ends the sequence even before the end of the input.
  EXPECT_EQ(append_utf8_lossy(out,
                              "\xe2\x82"
                              "x\xe2",
                              false),
            3u);
  EXPECT_EQ(out, kFffd + "x");
}

TEST(ByteLevel, Gpt2Alphabet) {
  EXPECT_EQ(byte_to_char(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_to_char('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_to_char('A'), U'A');
  EXPECT_EQ(byte_to_char(0xAD), U'\u0143');  // soft hyphen is not printable
  EXPECT_EQ(byte_to_char(0xFF), U'\u00FF');
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(char_to_byte(byte_to_char(static_cast<uint8_t>(b))), b);
  }
  std::string mapped;
  append_byte_level(mapped, "a b\xe4\xb8\xad");
  std::string back;
  ASSERT_TRUE(byte_level_to_bytes(mapped, back));
  EXPECT_EQ(back, "a b\xe4\xb8\xad");
  EXPECT_FALSE(byte_level_to_bytes("中", back));
}

}  // namespace
}  // namespace specd::tok
