// JSON parsing with specd::Error messages.
#include "io/json_file.h"

#include "core/error.h"
#include "io/mapped_file.h"

namespace specd {

Json parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    fail("{}: invalid JSON: {}", what, e.what());
  }
}

Json read_json_file(const std::string& path) { return parse_json(read_text_file(path), path); }

}  // namespace specd
