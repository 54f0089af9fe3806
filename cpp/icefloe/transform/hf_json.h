// Reading a tokenizer.json's components: each object's fields typed and
// known, every refusal naming its JSON path ("pre_tokenizer.pretokenizers[1]").
#pragma once

#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <arrow/result.h>
#include <arrow/status.h>
#include <nlohmann/json.hpp>

namespace icefloe::transform::hf {

using Json = nlohmann::json;

/// Invalid "<path>: <message>".
template <typename... Args>
arrow::Status Refuse(const std::string& path, Args&&... message) {
  return arrow::Status::Invalid(path, ": ", std::forward<Args>(message)...);
}

/// One component object. Each getter types its field; Done() refuses the
/// fields no getter asked for (an option this project does not implement).
class JsonObject {
 public:
  /// Invalid unless `j` is an object.
  static arrow::Result<JsonObject> Of(const Json& j, std::string path);

  const std::string& path() const { return path_; }
  std::string PathOf(const std::string& field) const { return path_ + "." + field; }
  /// The field, or nullptr when absent or null.
  const Json* Find(const std::string& field);
  arrow::Result<std::string> String(const std::string& field);
  arrow::Result<bool> Bool(const std::string& field, bool absent);
  arrow::Result<std::optional<bool>> OptionalBool(const std::string& field);
  arrow::Result<int64_t> Int(const std::string& field, int64_t min, int64_t max,
                             std::optional<int64_t> absent = std::nullopt);
  /// Invalid naming the first of `fields` absent or null: those the
  /// tokenizers library needs written out (it has no default for them).
  arrow::Status Require(std::initializer_list<const char*> fields) const;
  /// Marks `field` read without reading it (a section encoding ignores).
  void Ignore(const std::string& field) { seen_.insert(field); }
  arrow::Status Done() const;

 private:
  JsonObject(const Json& j, std::string path) : j_(&j), path_(std::move(path)) {}
  const Json* j_;
  std::string path_;
  std::set<std::string> seen_;
};

/// The component's "type", read from `o`.
arrow::Result<std::string> TypeOf(JsonObject* o);

/// The deepest nesting of objects and lists the tokenizers library reads
/// (serde_json's recursion limit: it refuses a 128th level).
inline constexpr int kMaxJsonDepth = 127;

/// Where JSON `text` opens an object or list more than `max_depth` levels
/// deep (its byte offset), or nullopt: a file refused before it is parsed,
/// so nothing recurses on it (brackets inside strings do not count).
std::optional<size_t> NestedDeeperThan(std::string_view text, int max_depth);

}  // namespace icefloe::transform::hf
