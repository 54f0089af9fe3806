#include "icefloe/protocol/transform_spec.h"

#include <algorithm>
#include <set>
#include <span>

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr std::string_view kTails[] = {"drop", "pad"};
constexpr std::string_view kOverlong[] = {"split", "drop"};
constexpr std::string_view kStrategies[] = {"concat", "ffd"};
constexpr std::string_view kChatTemplates[] = {"chatml", "llama3", "mistral", "alpaca"};
constexpr std::string_view kTrainOn[] = {"assistant", "all"};

// Output and source column names: as the load's `columns`.
constexpr Bounds kColumnName = Values(1, 1024);

const Field<TransformSpec> kSpecFields[] = {
    {ListOf(FieldType::kStringList, "keep", kOptional, kColumnName, Values(0, 1024)),
     &TransformSpec::keep},
};
const FieldSpec kColumns = ObjectList("columns", kOptional, Values(0, kMaxTransformColumns));
const FieldSpec kPack = ObjectField("pack", kOptional);

const Field<TransformColumn> kColumnFields[] = {
    {Str("name", kRequired, kColumnName), &TransformColumn::name},
    {Str("expr", kOptional, Values(1, 65536)), &TransformColumn::expr},
};
const FieldSpec kTokenize = ObjectField("tokenize", kOptional);
const FieldSpec kChat = ObjectField("chat", kOptional);

const Field<TokenizeSpec> kTokenizeFields[] = {
    {Str("column", kRequired, kColumnName), &TokenizeSpec::column},
    {Str("model", kRequired, Values(1, 4096)), &TokenizeSpec::model},
    {Flag("bos"), &TokenizeSpec::bos},
    {Flag("eos"), &TokenizeSpec::eos},
    {Flag("special_tokens"), &TokenizeSpec::special_tokens},
    {Int("max_tokens", kOptional, Values(1, kMaxTokens)), &TokenizeSpec::max_tokens},
    {Int("pad_to", kOptional, Values(1, kMaxTokens)), &TokenizeSpec::pad_to},
    {Int("pad_id", kOptional, Values(0, std::numeric_limits<int32_t>::max())),
     &TokenizeSpec::pad_id},
    {Str("mask", kOptional, kColumnName), &TokenizeSpec::mask},
};

const Field<ChatSpec> kChatFields[] = {
    {Str("template", kRequired, Values(1, 16), kChatTemplates), &ChatSpec::template_name},
    {Str("messages", kOptional, kColumnName), &ChatSpec::messages},
    {Str("instruction", kOptional, kColumnName), &ChatSpec::instruction},
    {Str("input", kOptional, kColumnName), &ChatSpec::input},
    {Str("output", kOptional, kColumnName), &ChatSpec::output},
    {Str("model", kRequired, Values(1, 4096)), &ChatSpec::model},
    {Str("labels", kOptional, kColumnName), &ChatSpec::labels},
    {Str("train_on", kOptional, Values(1, 16), kTrainOn), &ChatSpec::train_on},
    {Int("max_tokens", kOptional, Values(1, kMaxTokens)), &ChatSpec::max_tokens},
    {Str("bos", kOptional, Values(1, 256)), &ChatSpec::bos},
    {Str("eos", kOptional, Values(1, 256)), &ChatSpec::eos},
};

const Field<PackSpec> kPackFields[] = {
    {Str("column", kOptional, kColumnName), &PackSpec::column},
    {ListOf(FieldType::kStringList, "columns", kOptional, kColumnName,
            Values(0, kMaxTransformColumns)),
     &PackSpec::columns},
    {Int("seq_len", kRequired, Values(1, kMaxSeqLen)), &PackSpec::seq_len},
    {Int("eos", kOptional, Values(0, std::numeric_limits<int32_t>::max())), &PackSpec::eos},
    {Str("tail", kOptional, Values(1, 8), kTails), &PackSpec::tail},
    {Int("pad", kOptional, Values(0, std::numeric_limits<int32_t>::max())), &PackSpec::pad},
    {Flag("position_ids"), &PackSpec::position_ids},
    {Str("labels", kOptional, kColumnName), &PackSpec::labels},
    {Str("overlong", kOptional, Values(1, 8), kOverlong), &PackSpec::overlong},
    {Str("strategy", kOptional, Values(1, 8), kStrategies), &PackSpec::strategy},
};

// pad_to is `tokenizer(text, padding="max_length", max_length=N,
// truncation=True)`: rows cut to max_tokens, never longer than pad_to. A
// pad_to without max_tokens would have to cut rows nobody asked to cut.
arrow::Status CheckPadding(const TokenizeSpec& t, const std::string& what) {
  if (!t.pad_to) {
    if (t.pad_id || t.mask) {
      return arrow::Status::Invalid(what, ": '", t.pad_id ? "pad_id" : "mask",
                                    "' is for 'pad_to'; give 'pad_to'");
    }
    return arrow::Status::OK();
  }
  const int64_t n = *t.pad_to;
  if (!t.max_tokens) {
    return arrow::Status::Invalid(what, ": 'pad_to' ", n, " needs 'max_tokens' (at most ", n,
                                  ") so that no row is longer; 'max_tokens': ", n,
                                  " is tokenizer(text, padding=\"max_length\", max_length=", n,
                                  ", truncation=True)");
  }
  if (*t.max_tokens > n) {
    return arrow::Status::Invalid(what, ": 'max_tokens' ", *t.max_tokens, " is more than 'pad_to' ",
                                  n, ": a row of more ids than pad_to cannot be padded to it");
  }
  return arrow::Status::OK();
}

// The source a template renders: a conversation for the chat templates,
// instruction columns for alpaca and llama3 (torchtune's layout); alpaca
// alone takes bos/eos (the chat templates name their own tokens).
arrow::Status CheckChat(const ChatSpec& c, const std::string& what) {
  const bool alpaca = c.template_name == "alpaca";
  const bool instruction_data = c.instruction || c.input || c.output;
  if (c.messages && instruction_data) {
    return arrow::Status::Invalid(what, ": a chat column renders either 'messages' or instruction ",
                                  "columns ('instruction', 'input', 'output'), not both");
  }
  if (alpaca && c.messages) {
    return arrow::Status::Invalid(what, ": 'messages' is for the chat templates; 'alpaca' ",
                                  "renders 'instruction', 'input' and 'output' columns");
  }
  if (instruction_data && !alpaca && c.template_name != "llama3") {
    return arrow::Status::Invalid(what, ": '", c.template_name,
                                  "' renders a 'messages' column; instruction columns are "
                                  "rendered by 'alpaca' and 'llama3'");
  }
  if (alpaca || instruction_data) {
    if (!c.instruction || !c.output) {
      return arrow::Status::Invalid(
          what, ": '", c.template_name, "' needs '", c.instruction ? "output" : "instruction",
          "' (the column of each example's ", c.instruction ? "response" : "instruction", ")");
    }
    if (alpaca && !c.eos) {
      return arrow::Status::Invalid(what, ": 'alpaca' needs 'eos': the model's end-of-text ",
                                    "token, appended to each response and trained with it ",
                                    "(Llama 3: \"<|end_of_text|>\")");
    }
  } else if (!c.messages) {
    return arrow::Status::Invalid(
        what, ": '", c.template_name,
        "' needs 'messages': a list<struct<role: string, content: ", "string>> column");
  }
  if (!alpaca && (c.bos || c.eos)) {
    return arrow::Status::Invalid(what, ": '", c.bos ? "bos" : "eos", "' is for 'alpaca'; '",
                                  c.template_name, "' names its own tokens");
  }
  return arrow::Status::OK();
}

arrow::Result<TransformColumn> ColumnFromJson(const json& j, std::string what) {
  JsonFields in(j, what);
  TransformColumn c;
  ARROW_RETURN_NOT_OK(ReadFields<TransformColumn>(in, kColumnFields, &c));
  ARROW_ASSIGN_OR_RAISE(const json* tokenize, in.Find(kTokenize));
  if (tokenize != nullptr) {
    ARROW_ASSIGN_OR_RAISE(tokenize, in.Object(*tokenize, kTokenize));
    TokenizeSpec t;
    ARROW_RETURN_NOT_OK(
        ReadFields<TokenizeSpec>(JsonFields(*tokenize, what + ".tokenize"), kTokenizeFields, &t));
    ARROW_RETURN_NOT_OK(CheckPadding(t, what + ".tokenize"));
    c.tokenize = std::move(t);
  }
  ARROW_ASSIGN_OR_RAISE(const json* chat, in.Find(kChat));
  if (chat != nullptr) {
    ARROW_ASSIGN_OR_RAISE(chat, in.Object(*chat, kChat));
    ChatSpec t;
    ARROW_RETURN_NOT_OK(ReadFields<ChatSpec>(JsonFields(*chat, what + ".chat"), kChatFields, &t));
    ARROW_RETURN_NOT_OK(CheckChat(t, what + ".chat"));
    c.chat = std::move(t);
  }
  if (int{c.expr.has_value()} + int{c.tokenize.has_value()} + int{c.chat.has_value()} != 1) {
    return arrow::Status::Invalid(what, " ('", c.name,
                                  "'): give exactly one of 'expr', 'tokenize' and 'chat'");
  }
  return c;
}

// The packed columns: named once, each an output column of token ids, and
// every output column packed (a packed row has no value of any other).
arrow::Status CheckPack(const PackSpec& p, const TransformSpec& spec,
                        const std::set<std::string>& outputs) {
  if (p.column.empty() == p.columns.empty()) {
    return arrow::Status::Invalid(
        "transform: 'pack': give exactly one of 'columns' (the aligned token columns packed "
        "together, e.g. [\"input_ids\", \"labels\"]) and 'column' (one token column)");
  }
  const std::vector<std::string> packed = p.Columns();
  std::set<std::string> names;
  for (const auto& name : packed) {
    if (!names.insert(name).second) {
      return arrow::Status::Invalid("transform: 'pack': column '", name, "' is packed twice");
    }
    if (!outputs.count(name)) {
      return arrow::Status::Invalid("transform: 'pack': column '", name,
                                    "' must name an output column; it is none");
    }
    for (const auto& c : spec.columns) {
      if (c.name == name && c.tokenize && c.tokenize->pad_to) {
        return arrow::Status::Invalid("transform: 'pack': column '", name,
                                      "' has 'pad_to': pack lays documents end to end, ",
                                      "padding each would put pad ids inside packed rows; ",
                                      "give one of 'pad_to' and 'pack'");
      }
    }
  }
  for (const auto& name : outputs) {
    if (!names.count(name)) {
      return arrow::Status::Invalid(
          "transform: 'pack' makes rows of ", p.seq_len, " tokens from several documents, so '",
          name,
          "' must be packed or left out (an unpacked column has no value per packed row); "
          "name it in 'pack': 'columns' or drop it from the output columns");
    }
  }
  if (p.labels && !names.count(*p.labels)) {
    return arrow::Status::Invalid("transform: 'pack': 'labels' '", *p.labels,
                                  "' must be one of the packed 'columns'");
  }
  if (p.eos && packed.size() > 1) {
    return arrow::Status::Invalid(
        "transform: 'pack': 'eos' appends a separator to one column; with several 'columns' "
        "each document carries its own end token (in input_ids and labels alike)");
  }
  return arrow::Status::OK();
}

// Invalid naming the first member of `object` that `known` does not list.
arrow::Status CheckKnown(const json& object, const std::vector<std::string_view>& known,
                         const std::string& what) {
  if (!object.is_object()) return arrow::Status::OK();  // FromJson checked the types
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    std::string names;
    for (std::string_view name : known) names += (names.empty() ? "" : ", ") + std::string(name);
    return arrow::Status::Invalid(what, ": unknown field '", it.key(), "' (fields: ", names, ")");
  }
  return arrow::Status::OK();
}

// The names of `table`'s fields, then of `objects` (fields read by hand).
template <typename M>
std::vector<std::string_view> NamesOf(std::span<const Field<M>> table,
                                      std::initializer_list<FieldSpec> objects = {}) {
  std::vector<std::string_view> names;
  for (const Field<M>& f : table) names.push_back(f.spec.name);
  for (const FieldSpec& o : objects) names.push_back(o.name);
  return names;
}

// The fields of `table` in `m` that are required or differ from their
// default (a default-constructed M's).
template <typename M>
json NonDefaultFields(std::span<const Field<M>> table, const M& m) {
  json j = json::object();
  json defaults = json::object();
  WriteFields<M>(table, m, &j);
  WriteFields<M>(table, M{}, &defaults);
  for (const Field<M>& f : table) {
    const std::string name(f.spec.name);
    if (!f.spec.required && j.contains(name) && defaults.contains(name) &&
        j[name] == defaults[name]) {
      j.erase(name);
    }
  }
  return j;
}

}  // namespace

bool TransformSpec::operator==(const TransformSpec& other) const {
  return ToJson() == other.ToJson();
}

json TransformSpec::Canonical() const {
  json j = NonDefaultFields<TransformSpec>(kSpecFields, *this);
  if (!columns.empty()) {
    json list = json::array();
    for (const TransformColumn& c : columns) {
      json column = NonDefaultFields<TransformColumn>(kColumnFields, c);
      if (c.tokenize)
        column["tokenize"] = NonDefaultFields<TokenizeSpec>(kTokenizeFields, *c.tokenize);
      if (c.chat) column["chat"] = NonDefaultFields<ChatSpec>(kChatFields, *c.chat);
      list.push_back(std::move(column));
    }
    j["columns"] = std::move(list);
  }
  if (pack) j["pack"] = NonDefaultFields<PackSpec>(kPackFields, *pack);
  return j;
}

json TransformSpec::ToJson() const {
  json canonical = Canonical();
  if (!given_.is_null() && canonical == read_as_) return given_;
  return canonical;
}

std::vector<std::string> TransformSpec::OutputNames() const {
  std::vector<std::string> names = keep;
  for (const auto& c : columns) {
    names.push_back(c.name);
    if (c.tokenize && c.tokenize->pad_to) names.push_back(c.tokenize->MaskName());
    if (c.chat) names.push_back(c.chat->labels);
  }
  return names;
}

std::vector<std::string> TransformSpec::ModelLocations() const {
  std::vector<std::string> out;
  for (const auto& c : columns) {
    if (c.tokenize) out.push_back(c.tokenize->model);
    if (c.chat) out.push_back(c.chat->model);
  }
  return out;
}

arrow::Status TransformSpec::CheckKnownFields() const {
  ARROW_RETURN_NOT_OK(
      CheckKnown(given_, NamesOf<TransformSpec>(kSpecFields, {kColumns, kPack}), "transform"));
  if (const auto columns = given_.find("columns"); columns != given_.end() && columns->is_array()) {
    for (size_t i = 0; i < columns->size(); ++i) {
      const json& column = (*columns)[i];
      const std::string what = "transform: 'columns'[" + std::to_string(i) + "]";
      ARROW_RETURN_NOT_OK(
          CheckKnown(column, NamesOf<TransformColumn>(kColumnFields, {kTokenize, kChat}), what));
      if (!column.is_object()) continue;
      if (const auto t = column.find("tokenize"); t != column.end()) {
        ARROW_RETURN_NOT_OK(
            CheckKnown(*t, NamesOf<TokenizeSpec>(kTokenizeFields), what + ".tokenize"));
      }
      if (const auto c = column.find("chat"); c != column.end()) {
        ARROW_RETURN_NOT_OK(CheckKnown(*c, NamesOf<ChatSpec>(kChatFields), what + ".chat"));
      }
    }
  }
  if (const auto pack = given_.find("pack"); pack != given_.end()) {
    ARROW_RETURN_NOT_OK(CheckKnown(*pack, NamesOf<PackSpec>(kPackFields), "transform: 'pack'"));
  }
  return arrow::Status::OK();
}

arrow::Result<TransformSpec> TransformSpec::FromJson(const json& j) {
  if (!j.is_object()) {
    return arrow::Status::Invalid(
        "transform: must be an object with 'keep', 'columns' and "
        "optionally 'pack'; got ",
        std::string(j.type_name()));
  }
  JsonFields in(j, "transform");
  TransformSpec spec;
  ARROW_RETURN_NOT_OK(ReadFields<TransformSpec>(in, kSpecFields, &spec));
  ARROW_ASSIGN_OR_RAISE(const json* columns, in.Find(kColumns));
  if (columns != nullptr) {
    ARROW_ASSIGN_OR_RAISE(columns, in.List(*columns, kColumns));
    for (size_t i = 0; i < columns->size(); ++i) {
      const json& item = (*columns)[i];
      if (!item.is_object()) return in.Bad(kColumns, "a list of objects", item, i);
      ARROW_ASSIGN_OR_RAISE(
          auto c, ColumnFromJson(item, "transform: 'columns'[" + std::to_string(i) + "]"));
      spec.columns.push_back(std::move(c));
    }
  }
  ARROW_ASSIGN_OR_RAISE(const json* pack, in.Find(kPack));
  if (pack != nullptr) {
    ARROW_ASSIGN_OR_RAISE(pack, in.Object(*pack, kPack));
    PackSpec p;
    ARROW_RETURN_NOT_OK(
        ReadFields<PackSpec>(JsonFields(*pack, "transform: 'pack'"), kPackFields, &p));
    spec.pack = std::move(p);
  }

  const auto names = spec.OutputNames();
  if (names.empty()) {
    return arrow::Status::Invalid(
        "transform: no output column; name source columns in 'keep' "
        "or computed ones in 'columns'");
  }
  if (names.size() > kMaxTransformColumns) {
    return arrow::Status::Invalid("transform: ", names.size(), " output columns, more than ",
                                  kMaxTransformColumns);
  }
  std::set<std::string> seen;
  for (const auto& n : names) {
    if (!seen.insert(n).second) {
      const bool padded = std::any_of(spec.columns.begin(), spec.columns.end(), [](const auto& c) {
        return c.tokenize && c.tokenize->pad_to;
      });
      const bool chat = std::any_of(spec.columns.begin(), spec.columns.end(),
                                    [](const auto& c) { return c.chat.has_value(); });
      return arrow::Status::Invalid("transform: output column '", n, "' is named twice",
                                    padded ? " (a tokenize with 'pad_to' adds its 'mask' column, "
                                             "default 'attention_mask')"
                                    : chat ? " (a chat column adds its 'labels' column, default "
                                             "'labels')"
                                           : "");
    }
  }
  if (spec.pack) ARROW_RETURN_NOT_OK(CheckPack(*spec.pack, spec, seen));
  spec.given_ = j;
  spec.read_as_ = spec.Canonical();
  return spec;
}

std::optional<std::string> PackSpec::LabelsColumn() const {
  if (labels) return labels;
  for (const auto& c : Columns()) {
    if (c == "labels") return c;
  }
  return std::nullopt;
}

MessageSpec TransformSpec::Spec() {
  return SpecOf<TransformSpec>("transform", kSpecFields, {kColumns, kPack});
}

}  // namespace icefloe
