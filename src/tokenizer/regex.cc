// PCRE2 wrapper: compilation with JIT, per-thread match data, Oniguruma iteration rules.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <cstring>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace specd::tok {

class CompiledRegex {
 public:
  explicit CompiledRegex(const std::string& pattern) : source_(pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      fail("cannot compile regex /{}/ at offset {}: {}", pattern, offset,
           reinterpret_cast<const char*>(message));
    }
    // Falls back to the interpreter when JIT is unavailable.
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  ~CompiledRegex() { pcre2_code_free(code_); }
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  // Finds the first match at or after `start`; returns false if there is none.
  bool match(std::string_view text, size_t start, size_t& begin, size_t& end) const {
    ThreadState& state = thread_state();
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), start, 0, state.match_data,
                                    state.context)
                  : pcre2_match(code_, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                state.match_data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail("regex /{}/ failed on a {}-byte input: {}", source_, text.size(),
           reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
    begin = ovector[0];
    end = ovector[1];
    return true;
  }

 private:
  // Match data, match context and JIT stack are per thread so a Pattern can be shared.
  struct ThreadState {
    pcre2_match_data* match_data;
    pcre2_match_context* context;
    pcre2_jit_stack* jit_stack;
    ThreadState() {
      match_data = pcre2_match_data_create(16, nullptr);
      context = pcre2_match_context_create(nullptr);
      jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
      pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
    ~ThreadState() {
      pcre2_jit_stack_free(jit_stack);
      pcre2_match_context_free(context);
      pcre2_match_data_free(match_data);
    }
  };
  static ThreadState& thread_state() {
    thread_local ThreadState state;
    return state;
  }

  std::string source_;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

namespace {

constexpr std::string_view kOnigWord = "\\p{L}\\p{M}\\p{N}\\p{Pc}";

}  // namespace

std::string translate_oniguruma(std::string_view regex) {
  std::string out;
  out.reserve(regex.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    char c = regex[i];
    if (c == '\\' && i + 1 < regex.size()) {
      char e = regex[++i];
      switch (e) {
        case 's':
          out.append("\\p{White_Space}");
          break;
        case 'S':
          out.append("\\P{White_Space}");
          break;
        case 'w':
          out.append(in_class ? std::string(kOnigWord) : "[" + std::string(kOnigWord) + "]");
          break;
        case 'W':
          // Outside a class the complement is exact; inside one PCRE2's \W is the closest.
          out.append(in_class ? "\\W" : "[^" + std::string(kOnigWord) + "]");
          break;
        case 'h':
          out.append(in_class ? "0-9a-fA-F" : "[0-9a-fA-F]");
          break;
        case 'H':
          out.append(in_class ? "\\x00-/:-@G-`g-\\x{10FFFF}" : "[^0-9a-fA-F]");
          break;
        default:
          out.push_back('\\');
          out.push_back(e);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < regex.size() && regex[i + 1] == '^') out.push_back(regex[++i]);
      if (i + 1 < regex.size() && regex[i + 1] == ']') out.push_back(regex[++i]);
      continue;
    }
    if (in_class && c == '[' && i + 1 < regex.size() && regex[i + 1] == ':') {
      size_t close = regex.find(":]", i + 2);
      if (close != std::string_view::npos) {  // POSIX class such as [:alpha:]
        out.append(regex.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

Pattern Pattern::literal(std::string text) {
  Pattern p;
  if (text.empty()) {
    p.regex_ = std::make_shared<const CompiledRegex>("");  // empty match at every position
  } else {
    p.literal_ = std::move(text);
  }
  return p;
}

Pattern Pattern::oniguruma(std::string_view regex) { return pcre2(translate_oniguruma(regex)); }

Pattern Pattern::pcre2(std::string_view regex) {
  Pattern p;
  p.regex_ = std::make_shared<const CompiledRegex>(std::string(regex));
  return p;
}

Pattern Pattern::from_json(const Json& json, std::string_view what) {
  SPECD_CHECK(json.is_object() && json.size() == 1,
              "{}: a pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}", what,
              json.dump());
  if (json.contains("String") && json["String"].is_string()) {
    return literal(json["String"].get<std::string>());
  }
  if (json.contains("Regex") && json["Regex"].is_string()) {
    return oniguruma(json["Regex"].get<std::string>());
  }
  fail("{}: a pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}", what,
       json.dump());
}

void Pattern::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (regex_ == nullptr) {
    for (size_t pos = text.find(literal_); pos != std::string_view::npos;
         pos = text.find(literal_, pos + literal_.size())) {
      out.emplace_back(pos, pos + literal_.size());
    }
    return;
  }
  size_t search_from = 0;
  bool have_previous = false;
  size_t previous_end = 0;
  while (search_from <= text.size()) {
    size_t begin, end;
    if (!regex_->match(text, search_from, begin, end)) break;
    if (begin == end && have_previous && previous_end == end) {
      // Oniguruma's iterator refuses an empty match right after the previous match.
      if (search_from >= text.size()) break;
      search_from += utf8_sequence_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    out.emplace_back(begin, end);
    search_from = end;
    have_previous = true;
    previous_end = end;
  }
}

void Pattern::find_spans(std::string_view text, std::vector<MatchSpan>& out, bool invert) const {
  if (text.empty()) {
    out.push_back({0, 0, invert});
    return;
  }
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  matches.clear();
  find_all(text, matches);
  size_t previous = 0;
  for (auto [begin, end] : matches) {
    if (previous != begin) out.push_back({previous, begin, invert});
    out.push_back({begin, end, !invert});
    previous = end;
  }
  if (previous != text.size()) out.push_back({previous, text.size(), invert});
}

bool is_regex_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  static const CompiledRegex word("^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]");
  std::string utf8;
  append_utf8(utf8, c);
  size_t begin, end;
  return word.match(utf8, 0, begin, end);
}

}  // namespace specd::tok
