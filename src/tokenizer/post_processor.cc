// Template expansion for single sequences.
#include "tokenizer/post_processor.h"

#include "core/error.h"

namespace specd::tok {

PostProcessor::Template PostProcessor::simple(std::vector<int32_t> before,
                                              std::vector<int32_t> after) {
  Template t;
  if (!before.empty()) {
    t.parts.push_back(std::move(before));
    t.is_sequence.push_back(false);
  }
  t.parts.emplace_back();
  t.is_sequence.push_back(true);
  if (!after.empty()) {
    t.parts.push_back(std::move(after));
    t.is_sequence.push_back(false);
  }
  return t;
}

PostProcessor::Template PostProcessor::parse_template(const Json& json) {
  SPECD_CHECK(json.contains("single") && json["single"].is_array(),
              "TemplateProcessing needs a 'single' template");
  const Json& specials = json.contains("special_tokens") ? json["special_tokens"] : Json::object();
  Template t;
  for (const Json& item : json["single"]) {
    if (item.contains("Sequence")) {
      const Json& seq = item["Sequence"];
      // Only sequence A exists for a single input; tokenizers rejects B here too.
      SPECD_CHECK(seq.value("id", "A") == "A",
                  "TemplateProcessing: the single template may only use sequence A");
      t.parts.emplace_back();
      t.is_sequence.push_back(true);
    } else if (item.contains("SpecialToken")) {
      std::string name = item["SpecialToken"].at("id").get<std::string>();
      SPECD_CHECK(specials.contains(name),
                  "TemplateProcessing: special token '{}' is missing from special_tokens", name);
      const Json& entry = specials[name];
      SPECD_CHECK(entry.contains("ids") && entry["ids"].is_array(),
                  "TemplateProcessing: special token '{}' needs 'ids'", name);
      t.parts.push_back(entry["ids"].get<std::vector<int32_t>>());
      t.is_sequence.push_back(false);
    } else {
      fail("TemplateProcessing: unknown template item {}", item.dump());
    }
  }
  return t;
}

PostProcessor PostProcessor::from_json(const Json& json) {
  PostProcessor result;
  if (json.is_null()) return result;
  SPECD_CHECK(json.is_object() && json.contains("type") && json["type"].is_string(),
              "post_processor must be an object with a \"type\"");
  std::string type = json["type"].get<std::string>();
  if (type == "TemplateProcessing") {
    result.templates_.push_back(parse_template(json));
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto id_of = [&](const char* key) -> int32_t {
      SPECD_CHECK(json.contains(key) && json[key].is_array() && json[key].size() == 2,
                  "{} needs '{}': [token, id]", type, key);
      return json[key][1].get<int32_t>();
    };
    result.templates_.push_back(simple({id_of("cls")}, {id_of("sep")}));
  } else if (type == "ByteLevel") {
    // Only trims offsets; ids are unchanged.
  } else if (type == "Sequence") {
    SPECD_CHECK(json.contains("processors") && json["processors"].is_array(),
                "Sequence post-processor needs a 'processors' array");
    for (const Json& step : json["processors"]) {
      PostProcessor inner = from_json(step);
      for (auto& t : inner.templates_) result.templates_.push_back(std::move(t));
    }
  } else {
    fail(
        "unsupported post-processor type '{}' (supported: TemplateProcessing, BertProcessing, "
        "RobertaProcessing, ByteLevel, Sequence)",
        type);
  }
  return result;
}

PostProcessor PostProcessor::bos_eos(std::optional<int32_t> bos, std::optional<int32_t> eos) {
  PostProcessor result;
  std::vector<int32_t> before, after;
  if (bos) before.push_back(*bos);
  if (eos) after.push_back(*eos);
  result.templates_.push_back(simple(std::move(before), std::move(after)));
  return result;
}

bool PostProcessor::adds_tokens() const {
  for (const Template& t : templates_) {
    for (size_t i = 0; i < t.parts.size(); ++i) {
      if (!t.is_sequence[i] && !t.parts[i].empty()) return true;
    }
  }
  return false;
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  for (const Template& t : templates_) {
    std::vector<int32_t> result;
    result.reserve(ids.size() + 8);
    for (size_t i = 0; i < t.parts.size(); ++i) {
      const auto& part = t.is_sequence[i] ? ids : t.parts[i];
      result.insert(result.end(), part.begin(), part.end());
    }
    ids = std::move(result);
  }
}

}  // namespace specd::tok
