// The Iceberg type system: schemas, types, literal values, and their mapping
// to Arrow.
//
// Schemas are parsed from metadata.json. Columns are identified by field id,
// never by name (renames keep the id). `Literal` is the value form used by
// column bounds, partition values and filter constants: integers of every
// width (and date/time/timestamp) are int64, floats are double, strings and
// byte types are std::string, decimals are arrow::Decimal128 unscaled values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <arrow/result.h>
#include <arrow/type_fwd.h>
#include <arrow/util/decimal.h>
#include <nlohmann/json_fwd.hpp>

namespace icefloe::iceberg {

enum class TypeId {
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kDecimal,
  kDate,
  kTime,
  kTimestamp,
  kTimestampTz,
  kTimestampNs,
  kTimestampTzNs,
  kString,
  kUuid,
  kFixed,
  kBinary,
  kStruct,
  kList,
  kMap,
};

struct Type;
using TypePtr = std::shared_ptr<const Type>;

struct NestedField {
  int32_t id = 0;
  std::string name;
  bool required = false;
  TypePtr type;
  std::string doc;
  /// v3 `initial-default` as JSON text (the spec's JSON single-value form):
  /// the value of rows in files written before the field was added. Empty
  /// when there is none (null). Kept as text so schemas round-trip exactly;
  /// LiteralFromJson (expr.h) reads it.
  std::string initial_default;
};

/// An Iceberg type. Primitive types use only `id` (plus precision/scale for
/// decimal, length for fixed). Struct types hold `fields`; a list holds its
/// element as fields[0]; a map holds key and value as fields[0] and fields[1].
struct Type {
  TypeId id = TypeId::kBoolean;
  int32_t precision = 0;  ///< decimal
  int32_t scale = 0;      ///< decimal
  int32_t length = 0;     ///< fixed
  std::vector<NestedField> fields;

  bool is_primitive() const { return id < TypeId::kStruct; }
  bool is_nested() const { return !is_primitive(); }
  /// Iceberg's spelling: "long", "decimal(9,2)", "fixed[16]", "struct<...>".
  std::string ToString() const;
};

TypePtr MakePrimitive(TypeId id);
TypePtr MakeDecimal(int32_t precision, int32_t scale);
TypePtr MakeFixed(int32_t length);

/// A schema: the top-level struct fields plus the schema id.
struct Schema {
  int32_t schema_id = 0;
  std::vector<NestedField> fields;
  std::vector<int32_t> identifier_field_ids;

  /// Finds a field by id anywhere in the schema (nested included).
  const NestedField* FindById(int32_t id) const;
  /// Finds a top-level field by name, or a nested one by dotted path
  /// ("a.b"). Exact match first, then case-insensitive.
  const NestedField* FindByName(std::string_view name) const;
  /// Every field id in the schema, nested included.
  std::vector<int32_t> AllFieldIds() const;
};

/// Parses a type from metadata.json ("long", "decimal(9,2)", {"type": "struct", ...}).
arrow::Result<TypePtr> ParseType(const nlohmann::json& json);
/// Parses a schema object ({"type": "struct", "schema-id": .., "fields": [..]}).
arrow::Result<Schema> ParseSchema(const nlohmann::json& json);

/// Serializes a type / schema back to metadata.json form (round-trips ParseType/ParseSchema).
nlohmann::json TypeToJson(const Type& type);
nlohmann::json SchemaToJson(const Schema& schema);

/// The Arrow type that holds an Iceberg type: int->int32, long->int64,
/// decimal->decimal128, date->date32, time->time64[us], timestamp->timestamp[us],
/// timestamptz->timestamp[us, UTC], *_ns->[ns], string->utf8, uuid->
/// fixed_size_binary(16), fixed[L]->fixed_size_binary(L), binary->binary,
/// struct/list/map->the Arrow nested types.
arrow::Result<std::shared_ptr<arrow::DataType>> ToArrowType(const Type& type);
/// An Arrow field carrying the Iceberg field id as "PARQUET:field_id" metadata.
arrow::Result<std::shared_ptr<arrow::Field>> ToArrowField(const NestedField& field);
/// The Arrow schema of a schema's top-level fields (all of them, or those in
/// `field_ids` in that order).
arrow::Result<std::shared_ptr<arrow::Schema>> ToArrowSchema(
    const Schema& schema, const std::vector<int32_t>* field_ids = nullptr);

/// A constant of a primitive Iceberg type (see the header comment for forms).
struct Literal {
  using Value = std::variant<std::monostate, bool, int64_t, double, std::string, arrow::Decimal128>;
  TypeId type = TypeId::kBoolean;
  Value value;
  int32_t scale = 0;  ///< for decimals

  bool is_null() const { return std::holds_alternative<std::monostate>(value); }
  std::string ToString() const;
};

/// Three-way comparison of two non-null literals of comparable types
/// (integers with integers, floats with floats or integers, strings/bytes
/// bytewise unsigned, decimals by value). Invalid when not comparable.
arrow::Result<int> CompareLiterals(const Literal& a, const Literal& b);

/// Decodes Iceberg's single-value binary serialization (spec appendix D), as
/// used by column lower/upper bounds and manifest-list partition summaries.
arrow::Result<Literal> DecodeSingleValue(const Type& type, std::string_view bytes);
/// The single-value binary serialization of a non-null literal of `type`
/// (DecodeSingleValue reads it back). Invalid for a null or mistyped literal.
arrow::Result<std::string> EncodeSingleValue(const Literal& literal, const Type& type);

/// The Arrow scalar for a literal of `type` (a null scalar for a null literal).
arrow::Result<std::shared_ptr<arrow::Scalar>> ToArrowScalar(const Literal& literal,
                                                            const Type& type);

}  // namespace icefloe::iceberg
