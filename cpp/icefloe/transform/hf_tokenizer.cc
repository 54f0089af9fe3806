#include "icefloe/transform/hf_tokenizer.h"

#include <algorithm>
#include <limits>
#include <map>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform {

using hf::Json;
using hf::JsonObject;
using hf::Refuse;

namespace {

// Invalid naming the first of `fields` that `o` (an object at `path`) lacks
// or has null: those the library needs written out (it defaults none).
arrow::Status Need(const Json& o, const std::string& path,
                   std::initializer_list<const char*> fields) {
  for (const char* field : fields) {
    const auto it = o.find(field);
    if (it == o.end() || it->is_null()) {
      return Refuse(path + "." + field, "missing (the tokenizers library needs it)");
    }
  }
  return arrow::Status::OK();
}

// The decoder section is not run (encode only) but is read as the library
// reads it: null, or an object naming a decoder it knows.
arrow::Status CheckDecoder(const Json* j, const std::string& path) {
  if (j == nullptr) return arrow::Status::OK();
  if (!j->is_object()) return Refuse(path, "must be an object or null, got ", j->type_name());
  const auto type = j->find("type");
  if (type == j->end() || !type->is_string()) return Refuse(path + ".type", "must be a string");
  const auto name = type->get<std::string>();
  if (name == "Sequence") {
    const auto list = j->find("decoders");
    if (list == j->end() || !list->is_array()) return Refuse(path + ".decoders", "must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string at = path + ".decoders[" + std::to_string(i) + "]";
      if ((*list)[i].is_null()) return Refuse(at, "must be an object");
      ARROW_RETURN_NOT_OK(CheckDecoder(&(*list)[i], at));
    }
    return arrow::Status::OK();
  }
  for (const char* known : {"BPEDecoder", "ByteLevel", "WordPiece", "Metaspace", "CTC", "Replace",
                            "Fuse", "Strip", "ByteFallback"}) {
    if (name == known) return arrow::Status::OK();
  }
  return Refuse(path, name, " is not a decoder the tokenizers library knows");
}

}  // namespace

arrow::Result<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& bytes,
                                                              const std::string& location) {
  const std::string what = "tokenizer model '" + location + "'";
  if (bytes.starts_with("\xEF\xBB\xBF")) {
    return arrow::Status::Invalid(what, " starts with a UTF-8 byte-order mark (the tokenizers ",
                                  "library refuses it; a tokenizer.json has none)");
  }
  if (auto at = hf::NestedDeeperThan(bytes, hf::kMaxJsonDepth)) {
    return arrow::Status::Invalid(what, " is nested deeper than ", hf::kMaxJsonDepth,
                                  " levels (at byte ", *at, "), more than the tokenizers ",
                                  "library reads");
  }
  Json j;
  try {  // nlohmann reports where the JSON breaks only through its exception
    j = Json::parse(bytes);
  } catch (const Json::parse_error& e) {
    return arrow::Status::Invalid(what, " is not valid JSON (byte ", e.byte, "): ", e.what());
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    return arrow::Status::Invalid(what, " is JSON but not a Hugging Face tokenizer.json (no ",
                                  "\"model\" object)");
  }
  std::unique_ptr<HfTokenizer> t(new HfTokenizer(location));
  auto status = [&]() -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(JsonObject top, JsonObject::Of(j, "tokenizer.json"));
    // The sections encoding does not run are still refused where the
    // library refuses them.
    top.Ignore("version");  // null and absent differ here: the library refuses null
    if (j.contains("version") && j["version"] != "1.0") {
      return Refuse("version", j["version"].dump(),
                    " is not \"1.0\", the only tokenizer.json version");
    }
    if (j.contains("added_tokens") && j["added_tokens"].is_null()) {
      return Refuse("added_tokens", "must be a list, got null");
    }
    // max_tokens truncates (see the header); the section is not read.
    if (const Json* truncation = top.Find("truncation")) {
      if (!truncation->is_object()) {
        return Refuse("truncation", "must be an object or null, got ", truncation->type_name());
      }
      ARROW_RETURN_NOT_OK(Need(*truncation, "truncation", {"max_length", "strategy", "stride"}));
    }
    // pad_to's pad id; the rest of the section is checked, not read.
    if (const Json* padding = top.Find("padding")) {
      ARROW_ASSIGN_OR_RAISE(JsonObject p, JsonObject::Of(*padding, "padding"));
      ARROW_RETURN_NOT_OK(Need(*padding, "padding",
                               {"strategy", "direction", "pad_id", "pad_type_id", "pad_token"}));
      ARROW_ASSIGN_OR_RAISE(int64_t id, p.Int("pad_id", 0, std::numeric_limits<int32_t>::max()));
      t->pad_id_ = static_cast<int32_t>(id);
    }
    ARROW_RETURN_NOT_OK(CheckDecoder(top.Find("decoder"), "decoder"));  // encode only
    ARROW_ASSIGN_OR_RAISE(t->model_, hf::ModelFromJson(*top.Find("model"), "model"));
    t->ids_ = t->model_->vocab_size();
    ARROW_ASSIGN_OR_RAISE(t->normalizer_,
                          hf::NormalizerFromJson(top.Find("normalizer"), "normalizer"));
    ARROW_ASSIGN_OR_RAISE(t->pre_tokenizer_,
                          hf::PreTokenizerFromJson(top.Find("pre_tokenizer"), "pre_tokenizer"));
    if (auto at = t->pre_tokenizer_ ? t->pre_tokenizer_->AtStartPath() : std::nullopt;
        at && t->normalizer_) {
      // Where the text begins is the library's original offset 0, which a
      // normalizer may move (a stripped or replaced first character).
      return Refuse(*at, "prepend_scheme \"first\" with a normalizer is not supported");
    }
    ARROW_ASSIGN_OR_RAISE(t->byte_level_words_,
                          hf::ByteLevelWords::FromJson(top.Find("pre_tokenizer"), "pre_tokenizer"));
    t->bert_words_ = dynamic_cast<const hf::BertPreTokenizer*>(t->pre_tokenizer_.get());
    if (const Json* added = top.Find("added_tokens"))
      ARROW_RETURN_NOT_OK(t->ReadAddedTokens(*added));
    bool framed = false;
    ARROW_RETURN_NOT_OK(
        t->ReadPostProcessor(top.Find("post_processor"), "post_processor", &framed));
    if (t->pad_id_) ARROW_RETURN_NOT_OK(t->CheckId(*t->pad_id_, "padding.pad_id"));
    for (const auto& [key, value] : j.items()) {
      if (key != "version" && key != "truncation" && key != "padding" && key != "decoder" &&
          key != "model" && key != "normalizer" && key != "pre_tokenizer" &&
          key != "added_tokens" && key != "post_processor") {
        return Refuse(key, "section not supported");
      }
    }
    return arrow::Status::OK();
  }();
  if (!status.ok()) return arrow::Status::Invalid(what, ": ", status.message());
  return t;
}

// Ids as the library gives them: each token in file order takes its
// content's id in the model or among the tokens before it, else the next
// new id. A file whose ids differ (the library would warn and renumber) is
// refused rather than encoded with ids its model was not trained with.
arrow::Status HfTokenizer::ReadAddedTokens(const Json& j) {
  if (!j.is_array()) return Refuse("added_tokens", "must be a list, got ", j.type_name());
  std::vector<hf::AddedToken> tokens;
  std::map<std::string, size_t> seen;
  const int64_t vocab = model_->vocab_size();
  int64_t max_new = -1;  // the largest id of a token not in the model
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    ARROW_ASSIGN_OR_RAISE(JsonObject o, JsonObject::Of(j[i], path));
    // The library needs every flag written out (it defaults none of them).
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized", "special"}) {
      if (!j[i].contains(flag) || j[i][flag].is_null()) {
        return Refuse(o.PathOf(flag), "missing (true or false is needed)");
      }
    }
    hf::AddedToken t;
    ARROW_ASSIGN_OR_RAISE(int64_t id, o.Int("id", 0, std::numeric_limits<int32_t>::max()));
    ARROW_ASSIGN_OR_RAISE(t.content, o.String("content"));
    ARROW_ASSIGN_OR_RAISE(t.single_word, o.Bool("single_word", false));
    ARROW_ASSIGN_OR_RAISE(t.lstrip, o.Bool("lstrip", false));
    ARROW_ASSIGN_OR_RAISE(t.rstrip, o.Bool("rstrip", false));
    ARROW_ASSIGN_OR_RAISE(t.special, o.Bool("special", false));
    ARROW_ASSIGN_OR_RAISE(t.normalized, o.Bool("normalized", !t.special));
    ARROW_RETURN_NOT_OK(o.Done());
    if (t.content.empty()) continue;  // the library skips it
    if (!unicode::IsValid(t.content)) return Refuse(path + ".content", "is not valid UTF-8");
    if (auto [it, fresh] = seen.emplace(t.content, i); !fresh) {
      return Refuse(path + ".content", "'", t.content, "' is also added_tokens[", it->second, "]");
    }
    int64_t want;
    if (auto in_model = model_->TokenToId(t.content)) {
      want = *in_model;
    } else {
      want = max_new < 0 ? vocab : std::max<int64_t>(max_new + 1, vocab);
      max_new = want;
    }
    if (id != want) {
      return Refuse(path + ".id", "'", t.content, "' has id ", id,
                    " but the tokenizers library gives it ", want);
    }
    t.id = static_cast<int32_t>(id);
    if (t.normalized && normalizer_) {
      std::string normalized;
      ARROW_RETURN_NOT_OK(normalizer_->Normalize(t.content, &normalized));
      if (normalized.empty()) continue;  // matches nothing
      t.content = std::move(normalized);
    }
    tokens.push_back(std::move(t));
  }
  added_ = hf::AddedVocabulary(std::move(tokens));
  ids_ = std::max<int64_t>(vocab, max_new + 1);
  return arrow::Status::OK();
}

arrow::Status HfTokenizer::CheckId(int64_t id, const std::string& path) const {
  if (id < 0 || id >= ids_) {
    return Refuse(path, "id ", id, " is not a token of the vocabulary (", ids_, " ids)");
  }
  return arrow::Status::OK();
}

arrow::Status HfTokenizer::ReadPostProcessor(const Json* j, const std::string& path, bool* framed) {
  if (j == nullptr) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(JsonObject o, JsonObject::Of(*j, path));
  ARROW_ASSIGN_OR_RAISE(std::string type, hf::TypeOf(&o));
  if (type == "ByteLevel") {  // offsets only: the ids are the model's
    ARROW_RETURN_NOT_OK(Need(*j, path, {"add_prefix_space", "trim_offsets"}));
    for (const char* field : {"add_prefix_space", "trim_offsets", "use_regex"}) {
      ARROW_RETURN_NOT_OK(o.Bool(field, true).status());
    }
    return o.Done();
  }
  if (type == "Sequence") {
    const Json* list = o.Find("processors");
    if (list == nullptr || !list->is_array())
      return Refuse(o.PathOf("processors"), "must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string at = o.PathOf("processors") + "[" + std::to_string(i) + "]";
      if ((*list)[i].is_null()) return Refuse(at, "must be an object");
      ARROW_RETURN_NOT_OK(ReadPostProcessor(&(*list)[i], at, framed));
    }
    return o.Done();
  }
  // One processor that adds special tokens: a second would frame the first's.
  if (*framed) return Refuse(path, "a second processor adding special tokens is not supported");
  *framed = true;
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    if (type == "RobertaProcessing") {  // offsets only: the ids are BERT's
      for (const char* field : {"trim_offsets", "add_prefix_space"}) {
        ARROW_RETURN_NOT_OK(o.Bool(field, true).status());
      }
    }
    for (const char* field : {"cls", "sep"}) {
      const Json* pair = o.Find(field);
      if (pair == nullptr || !pair->is_array() || pair->size() != 2 || !(*pair)[0].is_string() ||
          !(*pair)[1].is_number_unsigned() ||
          (*pair)[1].get<uint64_t>() > std::numeric_limits<int32_t>::max()) {
        return Refuse(o.PathOf(field), "must be [token, id]");
      }
      const auto id = (*pair)[1].get<int32_t>();
      ARROW_RETURN_NOT_OK(CheckId(id, o.PathOf(field)));
      (field[0] == 'c' ? prefix_ : suffix_).push_back(id);
    }
    return o.Done();
  }
  if (type != "TemplateProcessing") return Refuse(path, type, " is not supported");
  ARROW_RETURN_NOT_OK(Need(*j, path, {"single", "pair", "special_tokens"}));
  // One text per row: the pair template never applies, but is checked as
  // the library reads it.
  const Json* pair = o.Find("pair");
  if (pair == nullptr || !pair->is_array()) return Refuse(o.PathOf("pair"), "must be a list");
  for (size_t i = 0; i < pair->size(); ++i) {
    const Json& piece = (*pair)[i];
    const auto value = piece.is_object() && piece.size() == 1 ? piece.begin() : piece.end();
    if (value == piece.end() || (value.key() != "SpecialToken" && value.key() != "Sequence") ||
        !value->is_object() || !value->contains("id") || !(*value)["id"].is_string() ||
        !value->contains("type_id") || !(*value)["type_id"].is_number_unsigned()) {
      return Refuse(o.PathOf("pair") + "[" + std::to_string(i) + "]",
                    "must be {\"SpecialToken\": ...} or {\"Sequence\": ...} with an id and a "
                    "type_id");
    }
  }
  const Json* specials = o.Find("special_tokens");
  if (specials != nullptr && !specials->is_object()) {
    return Refuse(o.PathOf("special_tokens"), "must be an object");
  }
  const Json* single = o.Find("single");
  if (single == nullptr || !single->is_array()) return Refuse(o.PathOf("single"), "must be a list");
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string at = o.PathOf("single") + "[" + std::to_string(i) + "]";
    const Json& piece = (*single)[i];
    if (!piece.is_object() || piece.size() != 1) {
      return Refuse(at, "must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    const std::string kind = piece.begin().key();
    const Json& value = piece.begin().value();
    if (!value.is_object() || !value.contains("id") || !value["id"].is_string()) {
      return Refuse(at, "must name an \"id\"");
    }
    const std::string name = value["id"].get<std::string>();
    const auto type_id = value.find("type_id");
    if (type_id == value.end() || !type_id->is_number_unsigned() ||
        type_id->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      return Refuse(at + "." + kind + ".type_id", "must be a type id (0, 1, ...)");
    }
    if (kind == "Sequence") {
      if (name != "A") return Refuse(at, "sequence ", name, " in the single template");
      if (seen_a) return Refuse(at, "sequence A twice");
      seen_a = true;
      continue;
    }
    if (kind != "SpecialToken") return Refuse(at, kind, " is not supported");
    const std::string special_path = o.PathOf("special_tokens") + "[\"" + name + "\"]";
    if (specials == nullptr || !specials->contains(name)) {
      return Refuse(at, "special token '", name, "' is not in post_processor.special_tokens");
    }
    const Json& special = specials->find(name).value();
    if (!special.is_object()) {
      return Refuse(special_path, "must be an object, got ", special.type_name());
    }
    if (const auto id = special.find("id"); id == special.end() || !id->is_string()) {
      return Refuse(special_path + ".id", "must be a string");
    }
    const auto ids = special.find("ids");
    if (ids == special.end() || !ids->is_array()) {
      return Refuse(special_path, "'ids' must be a list");
    }
    const auto tokens = special.find("tokens");
    if (tokens == special.end() || !tokens->is_array() ||
        !std::all_of(tokens->begin(), tokens->end(), [](const Json& x) { return x.is_string(); })) {
      return Refuse(special_path + ".tokens", "must be a list of strings");
    }
    for (const Json& id : *ids) {
      if (!id.is_number_unsigned() || id.get<uint64_t>() > std::numeric_limits<int32_t>::max()) {
        return Refuse(special_path, "'ids' must be token ids, got ", id.dump());
      }
      ARROW_RETURN_NOT_OK(CheckId(id.get<int32_t>(), special_path));
      (seen_a ? suffix_ : prefix_).push_back(id.get<int32_t>());
    }
  }
  if (!seen_a) return Refuse(o.PathOf("single"), "has no sequence A");
  return o.Done();
}

arrow::Status HfTokenizer::Check(const TokenizeOptions& options) const {
  if (options.bos || options.eos) {
    return arrow::Status::Invalid("'bos' and 'eos' are for SentencePiece models; '", location(),
                                  "' is a tokenizer.json: its post-processor adds the special "
                                  "tokens ('special_tokens', default true)");
  }
  const auto specials = static_cast<int64_t>(prefix_.size() + suffix_.size());
  if (options.special_tokens && options.max_tokens && *options.max_tokens < specials) {
    return arrow::Status::Invalid("'max_tokens' ", *options.max_tokens, " is fewer than the ",
                                  specials, " special tokens '", location(), "' adds to every row");
  }
  return arrow::Status::OK();
}

void HfTokenizer::Framing(const TokenizeOptions& options, std::vector<int32_t>* prefix,
                          std::vector<int32_t>* suffix) const {
  if (!options.special_tokens) return;
  *prefix = prefix_;
  *suffix = suffix_;
}

arrow::Status HfTokenizer::EncodeNormalized(std::string_view text, bool at_start,
                                            std::vector<int32_t>* ids) const {
  if (text.empty()) return arrow::Status::OK();  // the library drops empty pieces
  if (byte_level_words_) {
    return byte_level_words_->ForEachRun(
        text, [&](std::span<const std::string_view> words) { model_->TokenizeWords(words, ids); });
  }
  if (bert_words_) {
    bert_words_->ForEach(text, [&](std::string_view w) { model_->Tokenize(w, ids); });
    return arrow::Status::OK();
  }
  std::vector<std::string> words;
  if (pre_tokenizer_) {
    ARROW_RETURN_NOT_OK(pre_tokenizer_->SplitAt(text, at_start, &words));
  } else if (!text.empty()) {
    words.emplace_back(text);
  }
  for (const std::string& w : words) model_->Tokenize(w, ids);
  return arrow::Status::OK();
}

arrow::Status HfTokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  if (!unicode::IsValid(text)) return arrow::Status::Invalid("the text is not valid UTF-8");
  // Reused per thread: no allocation per text once grown.
  thread_local std::vector<hf::AddedVocabulary::Piece> raw, pieces;
  thread_local std::string normalized;
  raw.clear();
  added_.Split(text, /*normalized=*/false, &raw);
  for (const auto& r : raw) {
    if (r.id >= 0) {
      ids->push_back(r.id);
      continue;
    }
    std::string_view piece = r.text;
    if (normalizer_) {
      normalized.clear();
      ARROW_RETURN_NOT_OK(normalizer_->Normalize(r.text, &normalized));
      piece = normalized;
    }
    pieces.clear();
    added_.Split(piece, /*normalized=*/true, &pieces);
    for (const auto& p : pieces) {
      if (p.id >= 0) {
        ids->push_back(p.id);
      } else {
        // At the text's start: nothing before it, in the text nor in the
        // piece (with no normalizer: see Load).
        const bool at_start = r.text.data() == text.data() && p.text.data() == piece.data();
        ARROW_RETURN_NOT_OK(EncodeNormalized(p.text, at_start, ids));
      }
    }
  }
  return arrow::Status::OK();
}

}  // namespace icefloe::transform
