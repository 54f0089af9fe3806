#include "icefloe/transform/hf_components.h"

#include <limits>

#include "icefloe/transform/bert.h"
#include "icefloe/transform/bpe.h"
#include "icefloe/transform/normalizers.h"
#include "icefloe/transform/pre_tokenizers.h"
#include "icefloe/transform/regex_split.h"
#include "icefloe/transform/unicode.h"
#include "icefloe/transform/unigram.h"
#include "icefloe/transform/wordpiece.h"

namespace icefloe::transform::hf {

namespace {

std::string Quoted(const std::string& token) {
  return Json(token).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// `NFC`, `NFD`, `NFKC`, `NFKD`.
class NormalFormNormalizer final : public Normalizer {
 public:
  explicit NormalFormNormalizer(unicode::NormalForm form) : form_(form) {}
  arrow::Status Normalize(std::string_view in, std::string* out) const override {
    unicode::AppendNormalForm(in, form_, out);
    return arrow::Status::OK();
  }

 private:
  const unicode::NormalForm form_;
};

// `Sequence`: each stage in turn.
class NormalizerSequence final : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> stages)
      : stages_(std::move(stages)) {}
  arrow::Status Normalize(std::string_view in, std::string* out) const override {
    std::string a(in), b;
    for (const auto& s : stages_) {
      b.clear();
      ARROW_RETURN_NOT_OK(s->Normalize(a, &b));
      a.swap(b);
    }
    out->append(a);
    return arrow::Status::OK();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> stages_;
};

// `Sequence`: each stage splits every word of the stage before. Only the
// first stage is told where the text begins (a later one asking is
// refused at load).
class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> stages)
      : stages_(std::move(stages)) {}
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override {
    return SplitAt(in, false, words);
  }
  arrow::Status SplitAt(std::string_view in, bool at_start,
                        std::vector<std::string>* words) const override {
    std::vector<std::string> current, next;
    if (stages_.empty()) {
      current.emplace_back(in);
    } else {
      ARROW_RETURN_NOT_OK(stages_[0]->SplitAt(in, at_start, &current));
    }
    for (size_t k = 1; k < stages_.size(); ++k) {
      next.clear();
      for (const std::string& w : current) ARROW_RETURN_NOT_OK(stages_[k]->Split(w, &next));
      current.swap(next);
    }
    for (std::string& w : current) words->push_back(std::move(w));
    return arrow::Status::OK();
  }
  std::optional<std::string> AtStartPath() const override {
    if (stages_.empty()) return std::nullopt;
    return stages_[0]->AtStartPath();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> stages_;
};

// The stages of a `Sequence` at `o`'s `field`, each read by `read`.
template <typename T, typename Read>
arrow::Result<std::vector<std::unique_ptr<T>>> Stages(JsonObject* o, const std::string& field,
                                                      Read read) {
  const Json* list = o->Find(field);
  if (list == nullptr || !list->is_array()) return Refuse(o->PathOf(field), "must be a list");
  std::vector<std::unique_ptr<T>> stages;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = o->PathOf(field) + "[" + std::to_string(i) + "]";
    if ((*list)[i].is_null()) return Refuse(at, "must be an object");
    ARROW_ASSIGN_OR_RAISE(auto stage, read(&(*list)[i], at));
    stages.push_back(std::move(stage));
  }
  return stages;
}

}  // namespace

arrow::Result<Vocab> ReadVocab(const Json& j, const std::string& path) {
  if (!j.is_object()) return Refuse(path, "must be an object of token: id, got ", j.type_name());
  const size_t n = j.size();
  if (n == 0) return Refuse(path, "is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Refuse(path, n, " tokens, more than int32 ids hold");
  }
  Vocab vocab;
  vocab.reserve(n);
  std::vector<const std::string*> by_id(n, nullptr);
  for (const auto& [token, id] : j.items()) {
    const std::string at = path + "[" + Quoted(token) + "]";
    if (!id.is_number_integer()) return Refuse(at, "must be an integer id, got ", id.dump());
    const bool negative = !id.is_number_unsigned() && id.get<int64_t>() < 0;
    if (negative || id.get<uint64_t>() >= n) {
      return Refuse(at, "id ", id.dump(), " is outside 0..", n - 1, " (the ids of a vocabulary of ",
                    n, " tokens)");
    }
    const auto k = id.get<size_t>();
    if (by_id[k] != nullptr) {
      return Refuse(at, "id ", k, " is also the id of ", Quoted(*by_id[k]),
                    " (each id must be given once)");
    }
    auto [it, inserted] = vocab.emplace(token, static_cast<int32_t>(k));
    by_id[k] = &it->first;
  }
  // n distinct ids in 0..n-1: no holes.
  return vocab;
}

arrow::Result<std::unique_ptr<Normalizer>> NormalizerFromJson(const Json* j,
                                                              const std::string& path) {
  if (j == nullptr || j->is_null()) return nullptr;
  ARROW_ASSIGN_OR_RAISE(JsonObject o, JsonObject::Of(*j, path));
  ARROW_ASSIGN_OR_RAISE(std::string type, TypeOf(&o));
  if (type == "BertNormalizer") {
    ARROW_RETURN_NOT_OK(o.Require({"clean_text", "handle_chinese_chars", "lowercase"}));
    ARROW_ASSIGN_OR_RAISE(bool clean_text, o.Bool("clean_text", true));
    ARROW_ASSIGN_OR_RAISE(bool chinese, o.Bool("handle_chinese_chars", true));
    ARROW_ASSIGN_OR_RAISE(std::optional<bool> strip_accents, o.OptionalBool("strip_accents"));
    ARROW_ASSIGN_OR_RAISE(bool lowercase, o.Bool("lowercase", true));
    ARROW_RETURN_NOT_OK(o.Done());
    return std::make_unique<BertNormalizer>(clean_text, chinese, strip_accents.value_or(lowercase),
                                            lowercase);
  }
  static const std::pair<const char*, unicode::NormalForm> kForms[] = {
      {"NFC", unicode::NormalForm::kNfc},
      {"NFD", unicode::NormalForm::kNfd},
      {"NFKC", unicode::NormalForm::kNfkc},
      {"NFKD", unicode::NormalForm::kNfkd}};
  for (const auto& [name, form] : kForms) {
    if (type == name) {
      ARROW_RETURN_NOT_OK(o.Done());
      return std::make_unique<NormalFormNormalizer>(form);
    }
  }
  if (type == "Sequence") {
    ARROW_ASSIGN_OR_RAISE(auto stages, Stages<Normalizer>(&o, "normalizers", NormalizerFromJson));
    ARROW_RETURN_NOT_OK(o.Done());
    return std::make_unique<NormalizerSequence>(std::move(stages));
  }
  if (type == "Lowercase" || type == "StripAccents") {
    ARROW_RETURN_NOT_OK(o.Done());
    if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
    return std::make_unique<StripAccentsNormalizer>();
  }
  if (type == "Strip") {
    ARROW_ASSIGN_OR_RAISE(auto n, StripNormalizer::FromJson(&o));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Replace") {
    ARROW_ASSIGN_OR_RAISE(auto n, ReplaceNormalizer::FromJson(&o));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Prepend") {
    ARROW_ASSIGN_OR_RAISE(auto n, PrependNormalizer::FromJson(&o));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  return Refuse(path, type, " is not supported");
}

arrow::Result<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const Json* j,
                                                                  const std::string& path) {
  if (j == nullptr || j->is_null()) return nullptr;
  ARROW_ASSIGN_OR_RAISE(JsonObject o, JsonObject::Of(*j, path));
  ARROW_ASSIGN_OR_RAISE(std::string type, TypeOf(&o));
  if (type == "BertPreTokenizer") {
    ARROW_RETURN_NOT_OK(o.Done());
    return std::make_unique<BertPreTokenizer>();
  }
  if (type == "ByteLevel") {
    ARROW_ASSIGN_OR_RAISE(auto b, ByteLevelPreTokenizer::FromJson(&o));
    return std::unique_ptr<PreTokenizer>(std::move(b));
  }
  if (type == "Split") {
    ARROW_ASSIGN_OR_RAISE(auto b, SplitPreTokenizer::FromJson(&o));
    return std::unique_ptr<PreTokenizer>(std::move(b));
  }
  if (type == "Sequence") {
    ARROW_ASSIGN_OR_RAISE(auto stages,
                          Stages<PreTokenizer>(&o, "pretokenizers", PreTokenizerFromJson));
    for (size_t k = 1; k < stages.size(); ++k) {
      if (auto at = stages[k]->AtStartPath()) {
        return Refuse(*at,
                      "prepend_scheme \"first\" after another pre-tokenizer is not "
                      "supported (only as the first stage)");
      }
    }
    ARROW_RETURN_NOT_OK(o.Done());
    return std::make_unique<PreTokenizerSequence>(std::move(stages));
  }
  if (type == "Whitespace" || type == "WhitespaceSplit") {
    ARROW_RETURN_NOT_OK(o.Done());
    if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
    return std::make_unique<WhitespaceSplitPreTokenizer>();
  }
  if (type == "Digits") {
    ARROW_ASSIGN_OR_RAISE(auto p, DigitsPreTokenizer::FromJson(&o));
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "Punctuation") {
    ARROW_ASSIGN_OR_RAISE(auto p, PunctuationPreTokenizer::FromJson(&o));
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "Metaspace") {
    ARROW_ASSIGN_OR_RAISE(auto p, MetaspacePreTokenizer::FromJson(&o));
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  return Refuse(path, type, " is not supported");
}

arrow::Result<std::unique_ptr<Model>> ModelFromJson(const Json& j, const std::string& path) {
  ARROW_ASSIGN_OR_RAISE(JsonObject o, JsonObject::Of(j, path));
  ARROW_ASSIGN_OR_RAISE(std::string type, TypeOf(&o));
  if (type == "WordPiece") {
    ARROW_ASSIGN_OR_RAISE(auto m, WordPiece::FromJson(&o));
    return std::unique_ptr<Model>(std::move(m));
  }
  if (type == "BPE") {
    ARROW_ASSIGN_OR_RAISE(auto m, Bpe::FromJson(&o));
    return std::unique_ptr<Model>(std::move(m));
  }
  if (type == "Unigram") {
    ARROW_ASSIGN_OR_RAISE(auto m, Unigram::FromJson(&o));
    return std::unique_ptr<Model>(std::move(m));
  }
  return Refuse(path, type, " is not supported");
}

}  // namespace icefloe::transform::hf
