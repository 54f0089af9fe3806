// Avro object container files (OCF): the format of Iceberg manifest lists and manifests.
//
// AvroReader holds a whole file in memory (capped by AvroReaderOptions), parses its header
// (metadata map, writer schema, codec, sync marker) and decodes one object at a time, by the
// writer's schema, into a generic AvroValue tree. AvroValue's record helpers look fields up by
// Iceberg field id (the `field-id` attribute of the writer schema) or by name and return typed
// values, with errors that name the field.
//
// Nothing read from the file is trusted: every length and count is checked against the bytes
// that remain, varints are at most 10 bytes, schemas nest at most kMaxAvroSchemaDepth deep,
// decompressed blocks are capped and the number of decoded values is budgeted per byte. A
// corrupt or truncated file gives Invalid naming the file and the byte offset, never a crash,
// an unbounded allocation or an endless loop.
//
// Codecs: `null`; `deflate` (raw RFC 1951, through Arrow's GZip codec in its DEFLATE format);
// `snappy` (Arrow's Snappy codec; the CRC32 that follows each block is checked); `zstandard`
// (Arrow's ZSTD codec). Deflate and zstandard blocks do not state their decompressed size:
// they are streamed into a buffer that starts at 4x the compressed size and doubles up to
// AvroReaderOptions::max_block_bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/status.h>

namespace icefloe::iceberg {

/// Deepest nesting of schema nodes that ParseAvroSchema accepts, counting the outermost
/// and the leaves ("int" is 1 deep, an array of int 2); it bounds the recursion of parsing and
/// decoding.
inline constexpr int kMaxAvroSchemaDepth = 64;

/// The Avro types. A union value decodes to the value of its branch (see
/// AvroValue::union_branch), so values never have type kUnion.
enum class AvroType : uint8_t {
  kNull,
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kBytes,
  kString,
  kFixed,
  kEnum,
  kArray,
  kMap,
  kRecord,
  kUnion,
};

/// The Avro spelling of a type: "null", "long", "record", ...
std::string_view AvroTypeName(AvroType type);

struct AvroSchema;

/// A field of an Avro record schema.
struct AvroField {
  std::string name;
  std::shared_ptr<const AvroSchema> schema;
  /// Iceberg's `field-id` attribute, when the writer set one.
  std::optional<int32_t> field_id;
};

/// A node of a parsed Avro schema. Named types (record, enum, fixed) referenced again by name
/// share one node. Recursive types are rejected (Iceberg never writes them).
struct AvroSchema {
  AvroType type = AvroType::kNull;
  /// Full name ("namespace.name") of a record, enum or fixed; empty otherwise.
  std::string name;
  /// The `logicalType` attribute ("map" on Iceberg's int-keyed maps written as arrays of
  /// key/value records, "decimal", "timestamp-micros", ...), empty when absent.
  std::string logical_type;
  /// Other attributes of the schema object (e.g. "precision", "adjust-to-utc"): strings as
  /// they are, other JSON values as JSON text.
  std::map<std::string, std::string> attributes;

  std::vector<AvroField> fields;                            ///< record
  std::vector<std::string> symbols;                         ///< enum
  std::shared_ptr<const AvroSchema> items;                  ///< array
  std::shared_ptr<const AvroSchema> values;                 ///< map (keys are strings)
  std::vector<std::shared_ptr<const AvroSchema>> branches;  ///< union
  int32_t fixed_size = 0;                                   ///< fixed
  /// Iceberg's `element-id` (arrays) and `key-id` / `value-id` (maps), when present.
  std::optional<int32_t> element_id, key_id, value_id;

  /// The fewest bytes a value of this schema encodes to; bounds counts read from files.
  int64_t min_encoded_bytes = 0;

  /// Index in `fields` of the field with this Iceberg field id (or name), or -1.
  int FieldIndex(int32_t field_id) const;
  int FieldIndex(std::string_view name) const;
  /// For a two-branch union with one `null` branch, the index of the other branch; else -1.
  int NullableBranch() const;
};

/// Parses an Avro schema from its JSON text (the `avro.schema` metadata of a file).
/// Invalid for malformed JSON, unknown or duplicate type names, recursive types, unions that
/// directly contain unions, or nesting deeper than kMaxAvroSchemaDepth.
arrow::Result<std::shared_ptr<const AvroSchema>> ParseAvroSchema(std::string_view json);

class AvroValue;
/// The items of an Avro array, in order.
using AvroArray = std::vector<AvroValue>;
/// The entries of an Avro map, in the order they were written.
using AvroMap = std::vector<std::pair<std::string, AvroValue>>;

/// A decoded record: its schema (kept alive by the value) and its field values in schema order.
struct AvroRecord {
  std::shared_ptr<const AvroSchema> schema;
  std::vector<AvroValue> fields;
};

/// A decoded enum: the symbol's index in the schema and its name.
struct AvroEnum {
  int32_t index = 0;
  std::string symbol;
};

/// One decoded Avro datum. Values own their children and may outlive the reader.
///
/// Storage by type: null -> monostate, boolean -> bool, int and long -> int64_t, float, double,
/// string, bytes and fixed -> std::string, record -> AvroRecord, array -> AvroArray,
/// map -> AvroMap, enum -> AvroEnum.
///
/// Typed access (`As<T>`, `Get<T>`, `GetOptional<T>`) supports these T: bool; int32_t (int);
/// int64_t (int or long); float (float); double (float or double); std::string_view (string,
/// bytes or fixed; a view into this value); const AvroValue* (any non-null value);
/// const AvroRecord*, const AvroArray*, const AvroMap* (pointers into this value).
class AvroValue {
 public:
  using Storage = std::variant<std::monostate, bool, int64_t, float, double, std::string,
                               AvroRecord, AvroArray, AvroMap, AvroEnum>;

  /// A null value.
  AvroValue() = default;
  /// A value of `type` (never kUnion) held in `storage` as listed above; `union_branch` is the
  /// index of the union branch it was written as, or -1.
  AvroValue(AvroType type, Storage storage, int32_t union_branch = -1)
      : storage_(std::move(storage)), type_(type), union_branch_(union_branch) {}

  /// The writer's type of this value (of the chosen branch, for a union).
  AvroType type() const { return type_; }
  /// The index of the union branch this value was written as; -1 when not in a union.
  int32_t union_branch() const { return union_branch_; }
  bool is_null() const { return type_ == AvroType::kNull; }
  const Storage& storage() const { return storage_; }

  /// Unwraps a [null, T] union: nullptr when this value is null, else this value.
  const AvroValue* NotNull() const { return is_null() ? nullptr : this; }

  /// The record, array or map held, or nullptr when this value is something else.
  const AvroRecord* record() const { return std::get_if<AvroRecord>(&storage_); }
  const AvroArray* array() const { return std::get_if<AvroArray>(&storage_); }
  const AvroMap* map() const { return std::get_if<AvroMap>(&storage_); }

  /// This value as T (see the class comment); Invalid naming `what` when it is null or of
  /// another type.
  template <typename T>
  arrow::Result<T> As(std::string_view what = "Avro value") const;

  /// The value of this record's field with Iceberg field id `field_id` (or named `name`);
  /// nullptr when this is not a record or the writer schema has no such field.
  const AvroValue* FindField(int32_t field_id) const;
  const AvroValue* FindField(std::string_view name) const;

  /// The field's value as T. Invalid, naming the record and the field, when this is not a
  /// record, the field is missing or null, or has another type.
  template <typename T>
  arrow::Result<T> Get(int32_t field_id) const;
  template <typename T>
  arrow::Result<T> Get(std::string_view name) const;

  /// Like Get, but std::nullopt when the field is missing from the writer schema or null
  /// (an unset [null, T] field, or a field an older writer did not know).
  template <typename T>
  arrow::Result<std::optional<T>> GetOptional(int32_t field_id) const;
  template <typename T>
  arrow::Result<std::optional<T>> GetOptional(std::string_view name) const;

 private:
  Storage storage_;
  AvroType type_ = AvroType::kNull;
  int32_t union_branch_ = -1;
};

/// Limits on what AvroReader reads into memory.
struct AvroReaderOptions {
  /// Largest file Open reads; larger files give OutOfMemory.
  int64_t max_file_bytes = int64_t{256} << 20;
  /// Largest decompressed block; larger blocks give OutOfMemory.
  int64_t max_block_bytes = int64_t{1} << 30;
};

/// Reads the objects of an Avro object container file in order.
///
/// Not thread-safe. Errors: Invalid (message "corrupt Avro file <path>: <what> at offset <n>")
/// for malformed input, NotImplemented for codecs other than null, deflate, snappy and
/// zstandard, OutOfMemory past AvroReaderOptions' limits, IOError from the file. After an
/// error, Next keeps returning it.
class AvroReader {
 public:
  /// Reads the whole file (at most options.max_file_bytes) and parses its header.
  /// `path` is used in error messages only.
  static arrow::Result<std::unique_ptr<AvroReader>> Open(
      std::shared_ptr<arrow::io::RandomAccessFile> file, std::string path,
      const AvroReaderOptions& options = {});
  /// Parses the header of a file already in memory; the reader keeps `buffer` alive.
  static arrow::Result<std::unique_ptr<AvroReader>> OpenBuffer(
      std::shared_ptr<arrow::Buffer> buffer, std::string path,
      const AvroReaderOptions& options = {});

  ~AvroReader();

  /// The path given to Open, as errors name it.
  const std::string& path() const { return path_; }
  /// The writer schema (the `avro.schema` metadata).
  const std::shared_ptr<const AvroSchema>& schema() const { return schema_; }
  /// The whole file metadata map: `avro.schema`, `avro.codec` and, in Iceberg files,
  /// `schema`, `partition-spec`, `partition-spec-id`, `format-version`, `content`, ...
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The metadata value for `key`, or nullptr.
  const std::string* FindMetadata(std::string_view key) const;
  /// The codec name ("null" when the file names none).
  const std::string& codec() const { return codec_name_; }

  /// Decodes the next object into `*out`; false at the end of the file.
  arrow::Result<bool> Next(AvroValue* out);
  /// Decodes all remaining objects.
  arrow::Result<std::vector<AvroValue>> ReadAll();

 private:
  class Impl;
  AvroReader(std::string path, std::shared_ptr<arrow::Buffer> buffer,
             const AvroReaderOptions& options);
  arrow::Status ParseHeader();

  std::string path_;  // before impl_, which refers to it
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const AvroSchema> schema_;
  std::map<std::string, std::string> metadata_;
  std::string codec_name_;
};

}  // namespace icefloe::iceberg
