// The JSON layer under every icefloe message: bounded parsing, typed and
// range-checked field access, and field tables that parse, serialize and
// describe a message from one list.
//
// Every JSON body on the wire (actions, CMD descriptors, node requests and
// replies) is read through here, so the rules hold everywhere:
//   - a body is at most kMaxBodyBytes and nested at most kMaxJsonDepth deep;
//   - an integer field takes only a JSON integer within its range: negative,
//     fractional, overflowing or non-numeric values are Invalid naming the
//     field (never rounded, clamped or wrapped);
//   - a string has a length range, a list an item count range;
//   - null is not a value of any field (leave a field out for its default);
//   - unknown fields are ignored (old clients keep working).
// Nothing here throws: nlohmann::json is only used through accessors that
// check the type first, parsed without exceptions, and dumped with invalid
// UTF-8 replaced.
//
// A message is a struct plus a table of Field<M>, one per scalar or list
// member (name, member pointer, presence, range). ReadFields/WriteFields
// parse and serialize those members; SpecOf describes them (docs, the Python
// client's field list, tests). A member that is a typed message of its own
// (std::optional<TransformSpec>) is a field too (MessageOf): decoding the
// outer message parses it once. Other members that are objects are read by
// hand next to the table.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <nlohmann/json.hpp>

namespace icefloe {

inline constexpr int kProtocolVersion = 1;
/// Largest JSON body a server parses (node.load of a big table is the largest).
inline constexpr size_t kMaxBodyBytes = size_t{64} << 20;
/// Deepest nesting of arrays and objects a body may have.
inline constexpr int kMaxJsonDepth = 64;
/// Largest row count, row id or position in any message (plan/plan.h).
inline constexpr uint64_t kMaxRows = uint64_t{1} << 62;
inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

/// Parses `body` as one JSON object, checking size, depth and the optional
/// version field "v". Invalid naming `what` otherwise.
arrow::Result<nlohmann::json> ParseJsonObject(std::string_view body, std::string_view what);

/// JSON text of `j`; never throws (invalid UTF-8 is replaced).
std::string Dump(const nlohmann::json& j);

enum class FieldType : uint8_t {
  kString,
  kInt,  ///< JSON integer, signed range
  kUint,
  kBool,
  kNumber,  ///< any JSON number (replies' durations), range in whole units
  kStringList,
  kIntList,
  kUintList,
  kObject,  ///< read by hand (a nested message)
  kList,    ///< a list of objects, read by hand
};
std::string_view FieldTypeName(FieldType type);

/// An inclusive range: of values (integers), of characters (strings) or of
/// items (lists).
struct Bounds {
  int64_t min = 0;
  uint64_t max = std::numeric_limits<uint64_t>::max();
};

/// What one field may hold.
struct FieldSpec {
  std::string_view name;
  FieldType type = FieldType::kString;
  bool required = false;
  /// Integers: the value range. Strings: the length range. Lists: the range
  /// of each item's value (integers) or length (strings).
  Bounds value;
  /// Lists: how many items.
  Bounds count{0, 0};
  /// Strings (and string list items): the only accepted values, when not empty.
  std::span<const std::string_view> choices;
  /// Objects and lists of objects: the message each object is, when it has
  /// a spec of its own (empty: checked only to be an object).
  std::string_view message;
};

/// A message's name and fields, for documentation and the Python client.
struct MessageSpec {
  std::string_view name;
  std::vector<FieldSpec> fields;
};
nlohmann::json SpecToJson(const MessageSpec& spec);

/// Typed, checked reads of one JSON object's fields; `what` names the
/// message in errors ("load: 'batch_rows' must be ...").
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string what)
      : object_(object), what_(std::move(what)) {}

  /// The field's JSON value, or nullptr when absent; Invalid when the spec
  /// requires it. A null value is returned as is: it fails every type check
  /// (leave a field out to take its default).
  arrow::Result<const nlohmann::json*> Find(const FieldSpec& spec) const;

  // Checked conversions of a field's value (`index`: of a list item).
  arrow::Result<std::string> String(const nlohmann::json& v, const FieldSpec& spec,
                                    std::optional<size_t> index = std::nullopt) const;
  arrow::Result<int64_t> Int(const nlohmann::json& v, const FieldSpec& spec,
                             std::optional<size_t> index = std::nullopt) const;
  arrow::Result<uint64_t> Uint(const nlohmann::json& v, const FieldSpec& spec,
                               std::optional<size_t> index = std::nullopt) const;
  arrow::Result<bool> Bool(const nlohmann::json& v, const FieldSpec& spec) const;
  arrow::Result<double> Number(const nlohmann::json& v, const FieldSpec& spec) const;
  /// A list's JSON array, checked for its item count.
  arrow::Result<const nlohmann::json*> List(const nlohmann::json& v, const FieldSpec& spec) const;
  /// An object, checked for being one.
  arrow::Result<const nlohmann::json*> Object(const nlohmann::json& v, const FieldSpec& spec) const;

  /// Invalid("<what>: '<field>' must be <rule>; got <value>").
  arrow::Status Bad(const FieldSpec& spec, std::string_view rule, const nlohmann::json& got,
                    std::optional<size_t> index = std::nullopt) const;
  const std::string& what() const { return what_; }

 private:
  arrow::Status CheckString(const std::string& s, const FieldSpec& spec, const nlohmann::json& v,
                            std::optional<size_t> index) const;
  const nlohmann::json& object_;
  std::string what_;
};

/// A member of M that is a typed message of its own, read from an object
/// field and written back as one (made by MessageOf).
template <typename M>
struct MessageMember {
  arrow::Status (*read)(const JsonFields& in, const nlohmann::json& v, const FieldSpec& spec,
                        M* out);
  void (*write)(const M& m, std::string_view name, nlohmann::json* out);
};

/// A member of message M bound to a field.
template <typename M>
using Member =
    std::variant<std::string M::*, std::optional<std::string> M::*, int64_t M::*,
                 std::optional<int64_t> M::*, uint64_t M::*, std::optional<uint64_t> M::*,
                 int32_t M::*, uint32_t M::*, bool M::*, double M::*, std::optional<double> M::*,
                 std::vector<std::string> M::*, std::vector<int64_t> M::*,
                 std::vector<uint64_t> M::*, std::vector<int32_t> M::*, MessageMember<M>>;

template <typename M>
struct Field {
  FieldSpec spec;
  Member<M> member;
};

namespace fields_internal {

template <typename T>
arrow::Result<T> Narrow(const JsonFields& in, const nlohmann::json& v, const FieldSpec& spec,
                        std::optional<size_t> index = std::nullopt) {
  if constexpr (std::is_same_v<T, std::string>) {
    return in.String(v, spec, index);
  } else if constexpr (std::is_same_v<T, bool>) {
    return in.Bool(v, spec);
  } else if constexpr (std::is_floating_point_v<T>) {
    return in.Number(v, spec);
  } else if constexpr (std::is_signed_v<T>) {
    ARROW_ASSIGN_OR_RAISE(int64_t x, in.Int(v, spec, index));
    return static_cast<T>(x);  // the spec's range fits T (checked by protocol_test)
  } else {
    ARROW_ASSIGN_OR_RAISE(uint64_t x, in.Uint(v, spec, index));
    return static_cast<T>(x);
  }
}

template <typename T>
arrow::Status ReadInto(const JsonFields& in, const nlohmann::json& v, const FieldSpec& spec,
                       T* out) {
  ARROW_ASSIGN_OR_RAISE(*out, Narrow<T>(in, v, spec));
  return arrow::Status::OK();
}
template <typename T>
arrow::Status ReadInto(const JsonFields& in, const nlohmann::json& v, const FieldSpec& spec,
                       std::optional<T>* out) {
  ARROW_ASSIGN_OR_RAISE(T x, Narrow<T>(in, v, spec));
  *out = std::move(x);
  return arrow::Status::OK();
}
template <typename T>
arrow::Status ReadInto(const JsonFields& in, const nlohmann::json& v, const FieldSpec& spec,
                       std::vector<T>* out) {
  ARROW_ASSIGN_OR_RAISE(const nlohmann::json* list, in.List(v, spec));
  std::vector<T> items;
  items.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    ARROW_ASSIGN_OR_RAISE(T x, Narrow<T>(in, (*list)[i], spec, i));
    items.push_back(std::move(x));
  }
  *out = std::move(items);
  return arrow::Status::OK();
}

template <typename T>
void WriteValue(nlohmann::json* out, std::string_view name, const T& v) {
  (*out)[std::string(name)] = v;
}
template <typename T>
void WriteValue(nlohmann::json* out, std::string_view name, const std::optional<T>& v) {
  if (v) (*out)[std::string(name)] = *v;
}

template <typename P>
struct OptionalMember;
template <typename M, typename T>
struct OptionalMember<std::optional<T> M::*> {
  using Message = M;
  using Value = T;
};

}  // namespace fields_internal

/// Whether MessageOf prefixes the member's errors with the outer message and
/// field ("dataset description 'transform': transform: ...").
enum class MessageErrors : uint8_t { kAsIs, kNamed };

/// The member `P`, a std::optional<T> of M, as a field: an object read by
/// `T::FromJson(const json&) -> Result<T>` (its errors as they are, or named
/// after the outer message and field), written by `T::ToJson()`, left out
/// when empty. The table's FieldSpec is an ObjectField.
template <auto P, MessageErrors kErrors = MessageErrors::kAsIs>
MessageMember<typename fields_internal::OptionalMember<decltype(P)>::Message> MessageOf() {
  using M = typename fields_internal::OptionalMember<decltype(P)>::Message;
  using T = typename fields_internal::OptionalMember<decltype(P)>::Value;
  return {[](const JsonFields& in, const nlohmann::json& v, const FieldSpec& spec,
             M* out) -> arrow::Status {
            ARROW_ASSIGN_OR_RAISE(const nlohmann::json* object, in.Object(v, spec));
            auto value = T::FromJson(*object);
            if (!value.ok()) {
              if constexpr (kErrors == MessageErrors::kAsIs) return value.status();
              return arrow::Status::Invalid(in.what(), " '", spec.name,
                                            "': ", value.status().message());
            }
            out->*P = std::move(*value);
            return arrow::Status::OK();
          },
          [](const M& m, std::string_view name, nlohmann::json* out) {
            if (m.*P) (*out)[std::string(name)] = (m.*P)->ToJson();
          }};
}

/// Reads every field of `table` from `in` into `out`; absent optional fields
/// keep the member's current (default) value.
template <typename M>
arrow::Status ReadFields(const JsonFields& in, std::span<const Field<M>> table, M* out) {
  for (const Field<M>& f : table) {
    ARROW_ASSIGN_OR_RAISE(const nlohmann::json* v, in.Find(f.spec));
    if (v == nullptr) continue;
    ARROW_RETURN_NOT_OK(std::visit(
        [&](auto member) -> arrow::Status {
          if constexpr (std::is_same_v<decltype(member), MessageMember<M>>) {
            return member.read(in, *v, f.spec, out);
          } else {
            return fields_internal::ReadInto(in, *v, f.spec, &(out->*member));
          }
        },
        f.member));
  }
  return arrow::Status::OK();
}

/// Writes every field of `table` from `m` into the object `out` (empty
/// optionals are left out).
template <typename M>
void WriteFields(std::span<const Field<M>> table, const M& m, nlohmann::json* out) {
  for (const Field<M>& f : table) {
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), MessageMember<M>>) {
            member.write(m, f.spec.name, out);
          } else {
            fields_internal::WriteValue(out, f.spec.name, m.*member);
          }
        },
        f.member);
  }
}

/// One table from parts: a message's own fields and those it shares with
/// other messages (replies.h LoadCounterFields), in order.
template <typename M>
std::vector<Field<M>> JoinFields(std::initializer_list<std::vector<Field<M>>> parts) {
  std::vector<Field<M>> table;
  for (const auto& part : parts) table.insert(table.end(), part.begin(), part.end());
  return table;
}

template <typename M>
MessageSpec SpecOf(std::string_view name, std::span<const Field<M>> table,
                   std::vector<FieldSpec> extra = {}) {
  MessageSpec spec{name, {}};
  for (const Field<M>& f : table) spec.fields.push_back(f.spec);
  for (auto& f : extra) spec.fields.push_back(f);
  return spec;
}

// Spec builders, so tables read as one line per field.
constexpr Bounds Values(int64_t min, uint64_t max) { return {min, max}; }
constexpr FieldSpec Str(std::string_view name, bool required, Bounds length,
                        std::span<const std::string_view> choices = {}) {
  return {name, FieldType::kString, required, length, {0, 0}, choices, {}};
}
constexpr FieldSpec Int(std::string_view name, bool required, Bounds values) {
  return {name, FieldType::kInt, required, values, {0, 0}, {}, {}};
}
constexpr FieldSpec Uint(std::string_view name, bool required, Bounds values) {
  return {name, FieldType::kUint, required, values, {0, 0}, {}, {}};
}
constexpr FieldSpec Flag(std::string_view name, bool required = false) {
  return {name, FieldType::kBool, required, {0, 1}, {0, 0}, {}, {}};
}
/// A number (integer or not) in `values`.
constexpr FieldSpec Num(std::string_view name, bool required, Bounds values) {
  return {name, FieldType::kNumber, required, values, {0, 0}, {}, {}};
}
constexpr FieldSpec ListOf(FieldType type, std::string_view name, bool required, Bounds items,
                           Bounds count) {
  return {name, type, required, items, count, {}, {}};
}
constexpr FieldSpec ObjectField(std::string_view name, bool required,
                                std::string_view message = {}) {
  return {name, FieldType::kObject, required, {0, 0}, {0, 0}, {}, message};
}
constexpr FieldSpec ObjectList(std::string_view name, bool required, Bounds count,
                               std::string_view message = {}) {
  return {name, FieldType::kList, required, {0, 0}, count, {}, message};
}
inline constexpr bool kRequired = true;
inline constexpr bool kOptional = false;

}  // namespace icefloe
