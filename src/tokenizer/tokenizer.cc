// Tokenizer loading (tokenizer.json + tokenizer_config.json) and the encode/decode pipeline.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace specd {
namespace tok {
namespace {

const Json& field_or_null(const Json& object, const char* key) {
  static const Json null_json;
  return object.is_object() && object.contains(key) ? object[key] : null_json;
}

// tokenizer_config.json names tokens as plain strings or as serialized AddedToken objects.
std::optional<std::string> config_token(const Json& config, const char* key) {
  const Json& value = field_or_null(config, key);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

std::string config_chat_template(const Json& config) {
  const Json& value = field_or_null(config, "chat_template");
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    for (const Json& entry : value) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  return "";
}

BpeOptions bpe_options(const Json& model) {
  BpeOptions options;
  auto optional_string = [&](const char* key) -> std::optional<std::string> {
    const Json& value = field_or_null(model, key);
    if (value.is_null()) return std::nullopt;
    SPECD_CHECK(value.is_string(), "model.{} must be a string or null", key);
    return value.get<std::string>();
  };
  auto flag = [&](const char* key) {
    const Json& value = field_or_null(model, key);
    if (value.is_null()) return false;
    SPECD_CHECK(value.is_boolean(), "model.{} must be a boolean", key);
    return value.get<bool>();
  };
  options.unk_token = optional_string("unk_token");
  options.continuing_subword_prefix = optional_string("continuing_subword_prefix").value_or("");
  options.end_of_word_suffix = optional_string("end_of_word_suffix").value_or("");
  options.fuse_unk = flag("fuse_unk");
  options.byte_fallback = flag("byte_fallback");
  options.ignore_merges = flag("ignore_merges");
  return options;
}

void check_model_type(const Json& model, const TokenizerJson& parsed) {
  SPECD_CHECK(model.is_object(), "tokenizer.json has no \"model\" object");
  std::string type = model.value("type", parsed.merges_captured ? "BPE" : "");
  if (type == "BPE") return;
  if (type == "WordPiece" || type == "Unigram" || type == "WordLevel") {
    fail(
        "model type '{}' is not supported yet: specd implements BPE tokenizers (GPT-2/Llama-3/"
        "Qwen byte-level BPE and Llama-2/Mistral/Gemma byte-fallback BPE)",
        type);
  }
  fail("unknown model type '{}' (expected BPE)", type);
}

}  // namespace

std::shared_ptr<const TokenizerImpl> build_tokenizer(TokenizerJson parsed, Json config,
                                                     std::string chat_template_file) {
  const Json& doc = parsed.doc;
  SPECD_CHECK(doc.is_object(), "tokenizer.json must hold a JSON object");
  const Json& version = field_or_null(doc, "version");
  SPECD_CHECK(version.is_null() || (version.is_string() && version.get<std::string>() == "1.0"),
              "unknown tokenizer.json version {}", version.dump());
  const Json& model_json = field_or_null(doc, "model");
  check_model_type(model_json, parsed);
  SPECD_CHECK(parsed.vocab_captured, "model.vocab is missing or not an object");
  SPECD_CHECK(parsed.merges_captured, "model.merges is missing or not an array");

  auto impl = std::make_shared<TokenizerImpl>();
  parsed.bpe.options = bpe_options(model_json);
  impl->model = std::make_unique<BpeModel>(std::move(parsed.bpe));
  impl->normalizer = make_normalizer(field_or_null(doc, "normalizer"));
  PreTokenizerBuild pre = make_pre_tokenizer(field_or_null(doc, "pre_tokenizer"), true);
  impl->pre_tokenizer = std::move(pre.pre_tokenizer);
  impl->byte_level_input = pre.byte_level_deferred;
  impl->added.build(field_or_null(doc, "added_tokens"), *impl->model, impl->normalizer.get());
  impl->decoder = Decoder::from_json(field_or_null(doc, "decoder"));
  impl->vocab_size = std::max(impl->model->id_limit(), impl->added.id_limit());

  if (!config.is_object()) config = Json::object();
  auto lookup = [&](const char* key) -> std::optional<int32_t> {
    auto token = config_token(config, key);
    if (!token) return std::nullopt;
    if (auto id = impl->added.token_to_id(*token)) return id;
    return impl->model->token_to_id(*token);
  };
  impl->bos_id = lookup("bos_token");
  impl->eos_id = lookup("eos_token");

  // transformers (>= 5) rebuilds the post-processor from add_bos_token / add_eos_token when
  // tokenizer_config.json sets either of them or tokenizer.json has no post-processor.
  const Json& post = field_or_null(doc, "post_processor");
  bool explicit_flags = config.contains("add_bos_token") || config.contains("add_eos_token");
  if (explicit_flags || post.is_null()) {
    auto flag = [&](const char* key) {
      const Json& value = field_or_null(config, key);
      return value.is_boolean() && value.get<bool>();
    };
    impl->post_processor =
        PostProcessor::bos_eos(flag("add_bos_token") ? impl->bos_id : std::nullopt,
                               flag("add_eos_token") ? impl->eos_id : std::nullopt);
  } else {
    impl->post_processor = PostProcessor::from_json(post);
  }

  impl->chat_template =
      chat_template_file.empty() ? config_chat_template(config) : std::move(chat_template_file);
  impl->config = std::move(config);
  return impl;
}

const std::string* TokenizerImpl::decode_text(int32_t id) const {
  if (const AddedToken* token = added.by_id(id)) return &token->decode_text;
  return model->id_to_token(id);
}

bool TokenizerImpl::skip_in_decode(int32_t id, const std::string& text, bool skip_special) const {
  (void)id;
  return skip_special && added.is_special_content(text);
}

void TokenizerImpl::encode_segment(std::string_view text, bool at_start,
                                   std::vector<int32_t>& ids) const {
  std::string normalized;
  if (normalizer && normalizer->may_change(text)) {
    normalized.assign(text);
    normalizer->normalize(normalized);
    text = normalized;
  }
  if (text.empty()) return;
  auto pre_tokenize_and_encode = [&](std::string_view piece_text, bool starts) {
    if (!pre_tokenizer) {
      model->tokenize(piece_text, false, ids);
      return;
    }
    PieceList list;
    list.reset(piece_text, starts);
    pre_tokenizer->pre_tokenize(list);
    for (const Piece& piece : list.pieces) model->tokenize(list.text(piece), byte_level_input, ids);
  };
  if (!added.has_normalized_tokens()) {
    pre_tokenize_and_encode(text, at_start);
    return;
  }
  std::vector<AddedVocabulary::Segment> segments;
  added.split(text, true, segments);
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      pre_tokenize_and_encode(text.substr(segment.begin, segment.end - segment.begin),
                              at_start && segment.begin == 0);
    }
  }
}

}  // namespace tok

Tokenizer::Tokenizer(std::shared_ptr<const tok::TokenizerImpl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::load(const std::string& model_dir) {
  if (is_gguf_file(model_dir)) return load_gguf_tokenizer(model_dir);
  const std::string path = model_dir + "/tokenizer.json";
  SPECD_CHECK(file_exists(path),
              "{}: no tokenizer.json (specd reads Hugging Face tokenizer.json files; "
              "sentencepiece tokenizer.model files are not supported)",
              model_dir);
  Json config = Json::object();
  const std::string config_path = model_dir + "/tokenizer_config.json";
  if (file_exists(config_path)) config = read_json_file(config_path);
  std::string chat_template;
  const std::string template_path = model_dir + "/chat_template.jinja";
  if (file_exists(template_path)) chat_template = read_text_file(template_path);

  MappedFile file(path);
  std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  tok::TokenizerJson parsed = tok::parse_tokenizer_json(text, path);
  try {
    return Tokenizer(
        tok::build_tokenizer(std::move(parsed), std::move(config), std::move(chat_template)));
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

Tokenizer Tokenizer::from_json_text(std::string_view tokenizer_json, Json config,
                                    const Json& overrides) {
  tok::TokenizerJson parsed = tok::parse_tokenizer_json(tokenizer_json, "tokenizer.json");
  if (overrides.is_object()) {
    bool model_replaced = false;
    for (const auto& [key, value] : overrides.items()) {
      parsed.doc[key] = value;
      model_replaced |= key == "model";
    }
    if (model_replaced) parsed = tok::tokenizer_json_from_tree(std::move(parsed.doc));
  }
  return Tokenizer(tok::build_tokenizer(std::move(parsed), std::move(config), ""));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const tok::TokenizerImpl& impl = *impl_;
  std::string repaired;
  if (!tok::is_valid_utf8(text)) {
    repaired = tok::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (impl.added.has_raw_tokens()) {
    std::vector<tok::AddedVocabulary::Segment> segments;
    impl.added.split(text, false, segments);
    for (const auto& segment : segments) {
      if (segment.id >= 0) {
        ids.push_back(segment.id);
      } else {
        impl.encode_segment(text.substr(segment.begin, segment.end - segment.begin),
                            segment.begin == 0, ids);
      }
    }
  } else {
    impl.encode_segment(text, true, ids);
  }
  if (add_special_tokens) impl.post_processor.apply(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const tok::TokenizerImpl& impl = *impl_;
  std::unique_ptr<tok::DecodeStream> stream = impl.decoder.start();
  std::string out;
  for (int32_t id : ids) {
    const std::string* text = impl.decode_text(id);
    if (text == nullptr || impl.skip_in_decode(id, *text, skip_special_tokens)) continue;
    stream->push_token(*text, out);
  }
  stream->finish(out);
  return out;
}

int Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::token_text(int32_t id) const {
  if (const tok::AddedToken* token = impl_->added.by_id(id)) return token->content;
  const std::string* text = impl_->model->id_to_token(id);
  SPECD_CHECK(text != nullptr, "token id {} is not in the vocabulary (size {})", id,
              impl_->vocab_size);
  return *text;
}

bool Tokenizer::is_special(int32_t id) const {
  const tok::AddedToken* token = impl_->added.by_id(id);
  return token != nullptr && token->special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const Json& Tokenizer::config() const { return impl_->config; }

}  // namespace specd
