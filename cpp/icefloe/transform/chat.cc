#include "icefloe/transform/chat.h"

#include <algorithm>

#include <arrow/array.h>
#include <arrow/builder.h>

namespace icefloe::transform {

namespace {

// Each built-in, as its real template renders (chat.h names the models).
const ChatTemplate kChatml = {
    .name = "chatml",
    .system_prefix = "<|im_start|>system\n",
    .system_suffix = "<|im_end|>\n",
    .default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    .system_always = true,
    .later_system = true,
    .turn_prefix = "<|im_start|>{role}\n",
    .turn_suffix = "<|im_end|>\n",
    // TRL's Qwen2.5 training template trains "\n" + content + "<|im_end|>\n".
    .assistant_prefix = "<|im_start|>assistant",
    .content_prefix = "\n",
    .end_of_turn = "<|im_end|>\n",
    .special_tokens = {"<|im_start|>", "<|im_end|>"},
};

const ChatTemplate kLlama3 = {
    .name = "llama3",
    .bos = "<|begin_of_text|>",
    .system_prefix =
        "<|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n",
    .system_suffix = "<|eot_id|>",
    .system_always = true,
    .trim = true,
    .later_system = true,
    .turn_prefix = "<|start_header_id|>{role}<|end_header_id|>\n\n",
    .turn_suffix = "<|eot_id|>",
    .assistant_prefix = "<|start_header_id|>assistant<|end_header_id|>\n\n",
    .end_of_turn = "<|eot_id|>",
    .special_tokens = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                       "<|eot_id|>"},
};

const ChatTemplate kMistral = {
    .name = "mistral",
    .bos = "<s>",
    .system_in_last_user = true,
    .system_separator = "\n\n",
    .alternate = true,
    .turn_prefix = "[INST]",
    .turn_suffix = "[/INST]",
    .end_of_turn = "</s>",
    .special_tokens = {"<s>", "</s>", "[INST]", "[/INST]"},
};

// What torchtune's Llama3Tokenizer.tokenize_messages appends after the
// messages (its EOS; not trained).
constexpr std::string_view kLlama3EndOfText = "<|end_of_text|>";

// The Stanford Alpaca prompts (torchtune's AlpacaInstructTemplate).
constexpr std::string_view kAlpacaWithInput =
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n";
constexpr std::string_view kAlpacaNoInput =
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.\n\n"
    "### Instruction:\n";

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
  }
  return "";
}

// Python's str.isspace() for one code point: what Jinja's `trim` strips.
bool IsPythonSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// The code point starting at s[i] and its length in bytes (a malformed
// sequence: the byte alone, never a space).
std::pair<uint32_t, size_t> DecodeAt(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return {0xFFFFFFFF, 1};
  uint32_t c = n == 1 ? b : (b & (0x7F >> n));
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return {c, n};
}

std::string_view Strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    auto [c, n] = DecodeAt(s, begin);
    if (!IsPythonSpace(c)) break;
    begin += n;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;  // back to the code point's first byte
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    auto [c, n] = DecodeAt(s, start);
    if (start + n != end || !IsPythonSpace(c)) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

void AppendTurnPrefix(std::string_view prefix, Role role, std::string* out) {
  const size_t at = prefix.find("{role}");
  if (at == std::string_view::npos) {
    out->append(prefix);
    return;
  }
  out->append(prefix.substr(0, at));
  out->append(RoleName(role));
  out->append(prefix.substr(at + 6));
}

// Row order problems the template cannot render; empty when it can.
std::string OrderProblem(const ChatTemplate& t, const std::vector<Turn>& turns, size_t first,
                         bool train_on_all) {
  if (turns.size() == first) return "no user or assistant message";
  for (size_t i = first; i < turns.size(); ++i) {
    if (turns[i].role == Role::kSystem && !t.later_system) {
      return "a system message after the first message (" + std::string(t.name) +
             " renders one, first)";
    }
    if (t.alternate) {
      const Role expected = (i - first) % 2 == 0 ? Role::kUser : Role::kAssistant;
      if (turns[i].role != expected) {
        return "roles must alternate user/assistant after the optional system message";
      }
    }
  }
  if (t.system_in_last_user && first == 1 && turns.back().role != Role::kUser) {
    return "a system message in a conversation that does not end with the user: " +
           std::string(t.name) +
           " renders the system prompt only inside a last user message (Mistral-Nemo's "
           "template leaves it out otherwise)";
  }
  if (!train_on_all && turns.back().role != Role::kAssistant) {
    return "the last message is not the assistant's (train_on 'assistant')";
  }
  return "";
}

}  // namespace

const ChatTemplate* FindChatTemplate(std::string_view name) {
  for (const ChatTemplate* t : {&kChatml, &kLlama3, &kMistral}) {
    if (t->name == name) return t;
  }
  return nullptr;
}

std::variant<Rendered, RenderRefusal> Render(const ChatTemplate& t, const std::vector<Turn>& turns,
                                             bool train_on_all) {
  if (turns.empty()) return RenderRefusal{"an empty conversation"};
  const bool has_system = turns[0].role == Role::kSystem;
  const size_t first = has_system ? 1 : 0;
  if (std::string problem = OrderProblem(t, turns, first, train_on_all); !problem.empty()) {
    return RenderRefusal{std::move(problem)};
  }
  auto content = [&](std::string_view c) { return t.trim ? Strip(c) : c; };
  Rendered r;
  std::string& s = r.text;
  s.append(t.bos);
  if (!t.system_in_last_user && (has_system || t.system_always)) {
    s.append(t.system_prefix);
    s.append(has_system ? content(turns[0].content) : t.default_system);
    s.append(t.system_suffix);
  }
  for (size_t i = first; i < turns.size(); ++i) {
    const Turn& turn = turns[i];
    if (turn.role == Role::kAssistant) {
      s.append(t.assistant_prefix);
      const size_t begin = s.size();
      s.append(t.content_prefix);
      s.append(content(turn.content));
      s.append(t.end_of_turn);
      r.trained.emplace_back(begin, s.size());
      s.append(t.after_turn);
      continue;
    }
    AppendTurnPrefix(t.turn_prefix, turn.role, &s);
    if (t.system_in_last_user && has_system && i + 1 == turns.size()) {
      s.append(turns[0].content);
      s.append(t.system_separator);
    }
    s.append(content(turn.content));
    s.append(t.turn_suffix);
  }
  if (train_on_all) r.trained.assign(1, {0, s.size()});
  return r;
}

namespace {

// The Stanford Alpaca prompt (torchtune's AlpacaToMessages), with the input
// part when `input` is not empty; shared by alpaca and llama3's instruction
// layout.
void AppendAlpacaPrompt(std::string_view instruction, std::string_view input, std::string* s) {
  s->append(input.empty() ? kAlpacaNoInput : kAlpacaWithInput);
  s->append(instruction);
  if (!input.empty()) {
    s->append("\n\n### Input:\n");
    s->append(input);
  }
  s->append("\n\n### Response:\n");
}

}  // namespace

Rendered RenderAlpaca(std::string_view bos, std::string_view eos, std::string_view instruction,
                      std::string_view input, std::string_view output, bool train_on_all) {
  Rendered r;
  std::string& s = r.text;
  s.append(bos);
  AppendAlpacaPrompt(instruction, input, &s);
  const size_t begin = train_on_all ? 0 : s.size();
  s.append(output);
  s.append(eos);
  r.trained.emplace_back(begin, s.size());
  return r;
}

Rendered RenderLlama3Instruction(std::string_view instruction, std::string_view input,
                                 std::string_view output, bool train_on_all) {
  const ChatTemplate& t = kLlama3;
  std::string prompt;
  AppendAlpacaPrompt(instruction, input, &prompt);
  Rendered r;
  std::string& s = r.text;
  s.append(t.bos);
  const size_t user = s.size();
  AppendTurnPrefix(t.turn_prefix, Role::kUser, &s);
  s.append(Strip(prompt));
  s.append(t.turn_suffix);
  const size_t assistant = s.size();
  s.append(t.assistant_prefix);
  s.append(Strip(output));
  s.append(t.end_of_turn);
  r.trained.emplace_back(train_on_all ? user : assistant, s.size());
  s.append(kLlama3EndOfText);
  return r;
}

namespace {

bool IsString(const arrow::DataType& t) {
  return t.id() == arrow::Type::STRING || t.id() == arrow::Type::LARGE_STRING;
}

// A string of a utf8 or large_utf8 array (checked at bind).
std::string_view StringAt(const arrow::Array& a, int64_t i) {
  if (a.type_id() == arrow::Type::LARGE_STRING) {
    return static_cast<const arrow::LargeStringArray&>(a).GetView(i);
  }
  return static_cast<const arrow::StringArray&>(a).GetView(i);
}

arrow::Result<int> StringColumn(const arrow::Schema& input, const std::string& name,
                                const char* field, const std::string& what) {
  const int i = input.GetFieldIndex(name);
  if (i < 0) {
    return arrow::Status::Invalid(what, ": '", field, "': unknown column '", name, "'");
  }
  if (!IsString(*input.field(i)->type())) {
    return arrow::Status::Invalid(what, ": '", field, "': column '", name,
                                  "' must be a string column; it is ",
                                  input.field(i)->type()->ToString());
  }
  return i;
}

}  // namespace

arrow::Result<std::shared_ptr<const ChatColumn>> ChatColumn::Make(
    const ChatSpec& spec, const arrow::Schema& input, std::shared_ptr<const Tokenizer> tokenizer,
    const std::string& what) {
  auto c = std::shared_ptr<ChatColumn>(new ChatColumn());
  c->train_on_all_ = spec.train_on == "all";
  c->max_tokens_ = spec.max_tokens.value_or(0);
  std::vector<std::string_view> specials;
  if (spec.instruction) {  // alpaca, or llama3 in torchtune's layout (checked at parse)
    ARROW_ASSIGN_OR_RAISE(c->instruction_,
                          StringColumn(input, *spec.instruction, "instruction", what));
    ARROW_ASSIGN_OR_RAISE(c->output_, StringColumn(input, *spec.output, "output", what));
    if (spec.input) {
      ARROW_ASSIGN_OR_RAISE(c->input_, StringColumn(input, *spec.input, "input", what));
    }
  }
  if (spec.template_name == "alpaca") {
    c->bos_ = spec.bos.value_or("");
    c->eos_ = spec.eos.value_or("");
    if (!c->bos_.empty()) specials.push_back(c->bos_);
    specials.push_back(c->eos_);
  } else if (spec.instruction) {
    c->template_ = FindChatTemplate(spec.template_name);
    if (c->template_ == nullptr || c->template_->name != "llama3") {
      return arrow::Status::Invalid(what, ": template '", spec.template_name,
                                    "' does not render instruction columns");
    }
    c->llama3_instruction_ = true;
    specials = c->template_->special_tokens;
    specials.push_back(kLlama3EndOfText);
  } else {
    c->template_ = FindChatTemplate(spec.template_name);
    if (c->template_ == nullptr) {
      return arrow::Status::Invalid(what, ": unknown template '", spec.template_name, "'");
    }
    specials = c->template_->special_tokens;
    const int i = input.GetFieldIndex(*spec.messages);
    if (i < 0) {
      return arrow::Status::Invalid(what, ": 'messages': unknown column '", *spec.messages, "'");
    }
    const auto& type = *input.field(i)->type();
    const bool list = type.id() == arrow::Type::LIST || type.id() == arrow::Type::LARGE_LIST;
    const arrow::DataType* item = list ? type.field(0)->type().get() : nullptr;
    auto field_ok = [&](const char* name) {
      if (item == nullptr || item->id() != arrow::Type::STRUCT) return false;
      auto f = static_cast<const arrow::StructType&>(*item).GetFieldByName(name);
      return f != nullptr && IsString(*f->type());
    };
    if (!field_ok("role") || !field_ok("content")) {
      return arrow::Status::Invalid(what, ": 'messages': column '", *spec.messages,
                                    "' must be list<struct<role: string, content: string>>; it is ",
                                    type.ToString());
    }
    c->messages_ = i;
    c->messages_name_ = *spec.messages;
  }
  if (tokenizer->kind() == "sentencepiece") {
    return arrow::Status::Invalid(what, ": '", spec.model,
                                  "' is a SentencePiece model; chat templates need a "
                                  "tokenizer.json (their turn markers are added tokens)");
  }
  for (std::string_view special : specials) {
    std::vector<int32_t> ids;
    ARROW_RETURN_NOT_OK(tokenizer->EncodeUnframed(special, &ids));
    if (ids.size() != 1) {
      return arrow::Status::Invalid(what, ": template '", spec.template_name, "' needs '", special,
                                    "' to be one token of '", spec.model, "'; it is ", ids.size(),
                                    " tokens (a tokenizer of another model family?)");
    }
  }
  if (c->llama3_instruction_) {
    std::vector<int32_t> ids;
    ARROW_RETURN_NOT_OK(tokenizer->EncodeUnframed(kLlama3EndOfText, &ids));
    c->end_of_text_id_ = ids[0];  // one token: checked above
  }
  c->specials_.assign(specials.begin(), specials.end());
  c->tokenizer_ = std::move(tokenizer);
  return std::shared_ptr<const ChatColumn>(std::move(c));
}

arrow::Status ChatColumn::Encode(const Rendered& r, std::vector<int32_t>* ids,
                                 std::vector<int32_t>* labels) const {
  ids->clear();
  ARROW_RETURN_NOT_OK(tokenizer_->EncodeUnframed(r.text, ids));
  labels->assign(ids->size(), kIgnoreLabel);
  if (train_on_all_ && !llama3_instruction_) {
    *labels = *ids;
  } else if (!LabelBySegments(r, *ids, labels)) {
    ARROW_RETURN_NOT_OK(LabelByPrefixes(r, *ids, labels));
  }
  if (max_tokens_ > 0 && static_cast<int64_t>(ids->size()) > max_tokens_) {
    ids->resize(static_cast<size_t>(max_tokens_));
    labels->resize(static_cast<size_t>(max_tokens_));
    if (llama3_instruction_) {  // torchtune's truncate: the last token becomes EOS, untrained
      ids->back() = end_of_text_id_;
      labels->back() = kIgnoreLabel;
    }
  }
  return arrow::Status::OK();
}

bool ChatColumn::LabelBySegments(const Rendered& r, const std::vector<int32_t>& ids,
                                 std::vector<int32_t>* labels) const {
  const std::string_view text = r.text;
  std::vector<int32_t> pieces, head;
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t at = 0;
  auto encode = [&](size_t from, size_t to, std::vector<int32_t>* out) {
    return from >= to || tokenizer_->EncodeUnframed(text.substr(from, to - from), out).ok();
  };
  for (const auto& [begin, end] : r.trained) {
    // The end of the last template token before the content: the added
    // tokens cut the text there, so the tokens before it are the whole
    // text's (checked below, all pieces against the whole).
    size_t anchor = 0;
    for (std::string_view special : specials_) {
      const size_t found = text.substr(0, begin).rfind(special);
      if (found != std::string_view::npos) anchor = std::max(anchor, found + special.size());
    }
    if (anchor < at) return false;
    head.clear();
    if (!encode(at, anchor, &pieces) || !encode(anchor, begin, &head)) return false;
    const size_t first = pieces.size() + head.size();
    if (!encode(anchor, end, &pieces)) return false;
    ranges.emplace_back(first, pieces.size());
    at = end;
  }
  if (!encode(at, text.size(), &pieces) || pieces != ids) return false;
  for (const auto& [first, last] : ranges) {
    for (size_t k = first; k < last; ++k) (*labels)[k] = ids[k];
  }
  return true;
}

arrow::Status ChatColumn::LabelByPrefixes(const Rendered& r, const std::vector<int32_t>& ids,
                                          std::vector<int32_t>* labels) const {
  std::vector<int32_t> prefix;
  // The tokens of the text before `at`: those of the whole text up to where
  // they part (a trained part ends before a template token or at the text's
  // end, so its end is a token boundary; checked below).
  auto tokens_before = [&](size_t at) -> arrow::Result<size_t> {
    if (at == r.text.size()) return ids.size();
    if (at == 0) return size_t{0};
    prefix.clear();
    ARROW_RETURN_NOT_OK(
        tokenizer_->EncodeUnframed(std::string_view(r.text).substr(0, at), &prefix));
    return prefix.size();
  };
  for (const auto& [begin, end] : r.trained) {
    ARROW_ASSIGN_OR_RAISE(const size_t first, tokens_before(begin));
    ARROW_ASSIGN_OR_RAISE(const size_t last, tokens_before(end));
    if (end < r.text.size() &&
        (last > ids.size() || !std::equal(prefix.begin(), prefix.end(), ids.begin()))) {
      return arrow::Status::Invalid("the tokens of the text through a trained part are not a ",
                                    "prefix of the whole text's tokens");
    }
    for (size_t k = first; k < last && k < ids.size(); ++k) (*labels)[k] = ids[k];
  }
  return arrow::Status::OK();
}

arrow::Result<ChatColumn::Output> ChatColumn::Apply(const arrow::RecordBatch& batch,
                                                    arrow::MemoryPool* pool) const {
  const int64_t n = batch.num_rows();
  Output out;
  out.keep.assign(static_cast<size_t>(n), false);
  arrow::ListBuilder ids_builder(pool, std::make_shared<arrow::Int32Builder>(pool));
  arrow::ListBuilder labels_builder(pool, std::make_shared<arrow::Int32Builder>(pool));
  auto& id_values = static_cast<arrow::Int32Builder&>(*ids_builder.value_builder());
  auto& label_values = static_cast<arrow::Int32Builder&>(*labels_builder.value_builder());

  // The messages column's parts.
  std::shared_ptr<arrow::Array> roles, contents;
  const arrow::Array* messages = nullptr;
  if (messages_ >= 0) {
    messages = batch.column(messages_).get();
    const auto& values = messages->type_id() == arrow::Type::LIST
                             ? static_cast<const arrow::ListArray*>(messages)->values()
                             : static_cast<const arrow::LargeListArray*>(messages)->values();
    const auto& turns = static_cast<const arrow::StructArray&>(*values);
    roles = turns.GetFieldByName("role");
    contents = turns.GetFieldByName("content");
  }
  auto turns_of = [&](int64_t row, std::vector<Turn>* turns) -> arrow::Result<std::string> {
    int64_t begin, length;
    if (messages->type_id() == arrow::Type::LIST) {
      const auto& l = static_cast<const arrow::ListArray&>(*messages);
      begin = l.value_offset(row);
      length = l.value_length(row);
    } else {
      const auto& l = static_cast<const arrow::LargeListArray&>(*messages);
      begin = l.value_offset(row);
      length = l.value_length(row);
    }
    const auto& values = messages->type_id() == arrow::Type::LIST
                             ? *static_cast<const arrow::ListArray*>(messages)->values()
                             : *static_cast<const arrow::LargeListArray*>(messages)->values();
    for (int64_t k = begin; k < begin + length; ++k) {
      if (values.IsNull(k) || roles->IsNull(k) || contents->IsNull(k)) {
        return std::string("message ") + std::to_string(k - begin) + " is null or has a null " +
               (values.IsNull(k) || roles->IsNull(k) ? "role" : "content");
      }
      const std::string_view role = StringAt(*roles, k);
      Role r;
      if (role == "system") {
        r = Role::kSystem;
      } else if (role == "user") {
        r = Role::kUser;
      } else if (role == "assistant") {
        r = Role::kAssistant;
      } else {
        return arrow::Status::Invalid("'messages' column '", messages_name_, "' row ", row,
                                      ": message ", k - begin, " has role '", role,
                                      "'; the roles are system, user and assistant");
      }
      turns->push_back(Turn{r, StringAt(*contents, k)});
    }
    return std::string();
  };

  std::vector<Turn> turns;
  std::vector<int32_t> ids, labels;
  for (int64_t row = 0; row < n; ++row) {
    Rendered rendered;
    bool refused = false;
    if (messages != nullptr) {
      turns.clear();
      if (messages->IsNull(row)) {
        refused = true;
      } else {
        ARROW_ASSIGN_OR_RAISE(std::string problem, turns_of(row, &turns));
        if (!problem.empty()) {
          refused = true;
        } else {
          auto r = Render(*template_, turns, train_on_all_);
          if (std::holds_alternative<RenderRefusal>(r)) {
            refused = true;
          } else {
            rendered = std::move(std::get<Rendered>(r));
          }
        }
      }
    } else {
      const arrow::Array& instruction = *batch.column(instruction_);
      const arrow::Array& output = *batch.column(output_);
      if (instruction.IsNull(row) || output.IsNull(row)) {
        refused = true;
      } else {
        std::string_view in;
        if (input_ >= 0 && !batch.column(input_)->IsNull(row)) {
          in = StringAt(*batch.column(input_), row);
        }
        rendered = llama3_instruction_
                       ? RenderLlama3Instruction(StringAt(instruction, row), in,
                                                 StringAt(output, row), train_on_all_)
                       : RenderAlpaca(bos_, eos_, StringAt(instruction, row), in,
                                      StringAt(output, row), train_on_all_);
      }
    }
    if (refused) {
      ++out.dropped;
      ARROW_RETURN_NOT_OK(ids_builder.AppendNull());
      ARROW_RETURN_NOT_OK(labels_builder.AppendNull());
      continue;
    }
    auto st = Encode(rendered, &ids, &labels);
    if (!st.ok()) {
      return arrow::Status::Invalid("row ", row, " with '", tokenizer_->location(),
                                    "': ", st.message());
    }
    if (std::all_of(labels.begin(), labels.end(), [](int32_t l) { return l == kIgnoreLabel; })) {
      ++out.dropped;  // no trained token (left after max_tokens)
      ARROW_RETURN_NOT_OK(ids_builder.AppendNull());
      ARROW_RETURN_NOT_OK(labels_builder.AppendNull());
      continue;
    }
    out.keep[static_cast<size_t>(row)] = true;
    ARROW_RETURN_NOT_OK(ids_builder.Append());
    ARROW_RETURN_NOT_OK(labels_builder.Append());
    ARROW_RETURN_NOT_OK(id_values.AppendValues(ids));
    ARROW_RETURN_NOT_OK(label_values.AppendValues(labels));
  }
  ARROW_RETURN_NOT_OK(ids_builder.Finish(&out.ids));
  ARROW_RETURN_NOT_OK(labels_builder.Finish(&out.labels));
  return out;
}

}  // namespace icefloe::transform
