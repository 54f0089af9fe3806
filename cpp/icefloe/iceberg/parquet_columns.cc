#include "icefloe/iceberg/parquet_columns.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include <arrow/array.h>
#include <arrow/array/util.h>
#include <arrow/compute/api_scalar.h>
#include <arrow/compute/cast.h>
#include <arrow/scalar.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>
#include <parquet/size_statistics.h>
#include <parquet/statistics.h>

#include "icefloe/iceberg/expr.h"

namespace icefloe::iceberg {

namespace cp = arrow::compute;

namespace {

std::optional<int32_t> FieldIdOf(const arrow::Field& field) {
  const auto& metadata = field.metadata();
  if (metadata == nullptr) return std::nullopt;
  int index = metadata->FindKey("PARQUET:field_id");
  if (index < 0) return std::nullopt;
  const std::string& text = metadata->value(index);
  int32_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return id;
}

// How a file's fields get their ids at one nesting level: from the file
// (`mapping` null), or for files without ids from the name mapping entries of
// that level. An empty level maps nothing, so such fields stay unmatched.
using MappingLevel = const std::vector<MappedField>*;

const std::vector<MappedField> kNoMapping;

bool Matches(const arrow::Field& file_field, const NestedField& field, MappingLevel mapping) {
  if (mapping == nullptr) return FieldIdOf(file_field) == field.id;
  const MappedField* mapped = NameMapping::Find(*mapping, file_field.name());
  return mapped != nullptr && mapped->field_id == field.id;
}

// The mapping level of `name`'s children (struct fields, a list's "element",
// a map's "key" and "value"), or null when matching by id.
MappingLevel ChildLevel(MappingLevel mapping, std::string_view name) {
  if (mapping == nullptr) return nullptr;
  const MappedField* mapped = NameMapping::Find(*mapping, name);
  return mapped == nullptr ? &kNoMapping : &mapped->fields;
}

// The value of rows that lack `field`: its initial-default, else null.
arrow::Result<std::shared_ptr<arrow::Scalar>> DefaultValue(
    const NestedField& field, const std::shared_ptr<arrow::DataType>& type) {
  if (field.initial_default.empty()) return arrow::MakeNullScalar(type);
  ARROW_ASSIGN_OR_RAISE(Literal value, LiteralFromJson(*field.type, field.initial_default,
                                                       "initial-default of '" + field.name + "'"));
  return ToArrowScalar(value, *field.type);
}

// The value of every row of `data_file` in top-level column `field`, which
// the file does not hold (spec "Column Projection"): the identity partition
// value, else the initial-default, else null.
arrow::Result<std::shared_ptr<arrow::Scalar>> AbsentValue(
    const NestedField& field, const std::shared_ptr<arrow::Field>& arrow_field,
    const DataFile* data_file) {
  if (data_file != nullptr) {
    for (const auto& partition : data_file->identity_values) {
      if (partition.source_id != field.id) continue;
      auto scalar = ToArrowScalar(partition.value, *field.type);
      if (!scalar.ok()) {
        return scalar.status().WithMessage("partition value of column '", field.name, "' for ",
                                           data_file->file_path, ": ", scalar.status().message());
      }
      return scalar;
    }
  }
  return DefaultValue(field, arrow_field->type());
}

void AllLeaves(const parquet::arrow::SchemaField& node, std::vector<int>* out) {
  if (node.is_leaf()) {
    out->push_back(node.column_index);
    return;
  }
  for (const auto& child : node.children) AllLeaves(child, out);
}

// The leaves to read for `node` as table type `type`: struct fields the table
// no longer has are skipped. A struct keeps at least one leaf so its own
// validity is still read.
void NeededLeaves(const parquet::arrow::SchemaField& node, const Type& type, MappingLevel mapping,
                  std::vector<int>* out) {
  if (node.is_leaf() || type.id != TypeId::kStruct ||
      node.field->type()->id() != arrow::Type::STRUCT) {
    AllLeaves(node, out);
    return;
  }
  const size_t before = out->size();
  for (const auto& child : node.children) {
    for (const auto& table_child : type.fields) {
      if (Matches(*child.field, table_child, mapping)) {
        NeededLeaves(child, *table_child.type, ChildLevel(mapping, child.field->name()), out);
        break;
      }
    }
  }
  if (out->size() == before) {
    std::vector<int> all;
    AllLeaves(node, &all);
    if (!all.empty()) out->push_back(all.front());
  }
}

// Whether values of Arrow type `file` may be read as table type `table`:
// Iceberg's promotions plus representation differences between writers.
bool CanRead(const arrow::DataType& file, const arrow::DataType& table) {
  using T = arrow::Type;
  const T::type f = file.id();
  switch (table.id()) {
    case T::INT32:
      return f == T::INT8 || f == T::INT16 || f == T::UINT8 || f == T::UINT16;
    case T::INT64:
      return f == T::INT8 || f == T::INT16 || f == T::INT32 || f == T::UINT8 || f == T::UINT16 ||
             f == T::UINT32;
    case T::DOUBLE:
      return f == T::FLOAT;
    case T::DECIMAL128: {
      if (!arrow::is_decimal(f)) return false;
      const auto& from = static_cast<const arrow::DecimalType&>(file);
      const auto& to = static_cast<const arrow::DecimalType&>(table);
      return from.scale() == to.scale() && from.precision() <= to.precision();
    }
    case T::STRING:
    case T::BINARY:
      return f == T::STRING || f == T::LARGE_STRING || f == T::STRING_VIEW || f == T::BINARY ||
             f == T::LARGE_BINARY || f == T::BINARY_VIEW;
    case T::TIMESTAMP:
      // Another unit is a representation choice; a time zone (or none) is not.
      return f == T::TIMESTAMP &&
             static_cast<const arrow::TimestampType&>(file).timezone().empty() ==
                 static_cast<const arrow::TimestampType&>(table).timezone().empty();
    case T::TIME64:
      return f == T::TIME32 || f == T::TIME64;
    default:
      return false;
  }
}

arrow::Status CannotRead(const std::string& path, const arrow::DataType& file, const Type& type,
                         const arrow::DataType& target) {
  return arrow::Status::Invalid("cannot read column '", path, "' of file type ", file.ToString(),
                                " as Iceberg type ", type.ToString(), " (", target.ToString(), ")");
}

arrow::Result<std::shared_ptr<arrow::ArrayData>> Conform(
    std::shared_ptr<arrow::ArrayData> data, const Type& type,
    const std::shared_ptr<arrow::DataType>& target, MappingLevel mapping, const std::string& path,
    cp::ExecContext* ctx);

arrow::Result<std::shared_ptr<arrow::ArrayData>> NullData(
    const std::shared_ptr<arrow::DataType>& type, int64_t length, cp::ExecContext* ctx) {
  ARROW_ASSIGN_OR_RAISE(auto array, arrow::MakeArrayOfNull(type, length, ctx->memory_pool()));
  return array->data();
}

// `length` copies of `value` (null when there is none).
arrow::Result<std::shared_ptr<arrow::ArrayData>> ConstantData(
    const std::shared_ptr<arrow::Scalar>& value, const std::shared_ptr<arrow::DataType>& type,
    int64_t length, cp::ExecContext* ctx) {
  if (value == nullptr || !value->is_valid) return NullData(type, length, ctx);
  ARROW_ASSIGN_OR_RAISE(auto array, arrow::MakeArrayFromScalar(*value, length, ctx->memory_pool()));
  return array->data();
}

arrow::Result<std::shared_ptr<arrow::ArrayData>> ConformStruct(
    const std::shared_ptr<arrow::ArrayData>& data, const Type& type,
    const std::shared_ptr<arrow::DataType>& target, MappingLevel mapping, const std::string& path,
    cp::ExecContext* ctx) {
  const arrow::DataType& file_type = *data->type;
  std::vector<std::shared_ptr<arrow::ArrayData>> children;
  for (size_t k = 0; k < type.fields.size(); ++k) {
    const NestedField& child = type.fields[k];
    const auto& child_target = target->field(static_cast<int>(k))->type();
    int found = -1;
    for (int j = 0; j < file_type.num_fields() && found < 0; ++j) {
      if (Matches(*file_type.field(j), child, mapping)) found = j;
    }
    std::shared_ptr<arrow::ArrayData> out;
    if (found < 0) {
      // Struct children are indexed with the parent's offset.
      ARROW_ASSIGN_OR_RAISE(auto value, DefaultValue(child, child_target));
      ARROW_ASSIGN_OR_RAISE(out,
                            ConstantData(value, child_target, data->offset + data->length, ctx));
    } else {
      ARROW_ASSIGN_OR_RAISE(out, Conform(data->child_data[found], *child.type, child_target,
                                         ChildLevel(mapping, file_type.field(found)->name()),
                                         path + "." + child.name, ctx));
    }
    children.push_back(std::move(out));
  }
  return arrow::ArrayData::Make(target, data->length, {data->buffers[0]}, std::move(children),
                                data->null_count, data->offset);
}

arrow::Result<std::shared_ptr<arrow::ArrayData>> ConformList(
    std::shared_ptr<arrow::ArrayData> data, const Type& type,
    const std::shared_ptr<arrow::DataType>& target, MappingLevel mapping, const std::string& path,
    cp::ExecContext* ctx) {
  if (data->type->id() == arrow::Type::LARGE_LIST) {
    auto as_list = arrow::list(data->type->field(0));
    ARROW_ASSIGN_OR_RAISE(auto cast,
                          cp::Cast(arrow::Datum(data), as_list, cp::CastOptions::Safe(), ctx));
    data = cast.array();
  }
  const auto& element_target = target->field(0)->type();
  ARROW_ASSIGN_OR_RAISE(auto values,
                        Conform(data->child_data[0], *type.fields[0].type, element_target,
                                ChildLevel(mapping, "element"), path + ".element", ctx));
  return arrow::ArrayData::Make(target, data->length, {data->buffers[0], data->buffers[1]},
                                {std::move(values)}, data->null_count, data->offset);
}

arrow::Result<std::shared_ptr<arrow::ArrayData>> ConformMap(
    const std::shared_ptr<arrow::ArrayData>& data, const Type& type,
    const std::shared_ptr<arrow::DataType>& target, MappingLevel mapping, const std::string& path,
    cp::ExecContext* ctx) {
  const auto& map_type = static_cast<const arrow::MapType&>(*target);
  const auto& entries = data->child_data[0];
  ARROW_ASSIGN_OR_RAISE(auto keys,
                        Conform(entries->child_data[0], *type.fields[0].type, map_type.key_type(),
                                ChildLevel(mapping, "key"), path + ".key", ctx));
  ARROW_ASSIGN_OR_RAISE(auto items,
                        Conform(entries->child_data[1], *type.fields[1].type, map_type.item_type(),
                                ChildLevel(mapping, "value"), path + ".value", ctx));
  auto new_entries = arrow::ArrayData::Make(
      map_type.value_type(), entries->length, {entries->buffers[0]},
      {std::move(keys), std::move(items)}, entries->null_count, entries->offset);
  return arrow::ArrayData::Make(target, data->length, {data->buffers[0], data->buffers[1]},
                                {std::move(new_entries)}, data->null_count, data->offset);
}

arrow::Result<std::shared_ptr<arrow::ArrayData>> Conform(
    std::shared_ptr<arrow::ArrayData> data, const Type& type,
    const std::shared_ptr<arrow::DataType>& target, MappingLevel mapping, const std::string& path,
    cp::ExecContext* ctx) {
  if (data->type->id() == arrow::Type::NA) return NullData(target, data->length, ctx);
  if (data->type->id() == arrow::Type::DICTIONARY) {
    const auto& value_type = static_cast<const arrow::DictionaryType&>(*data->type).value_type();
    ARROW_ASSIGN_OR_RAISE(auto decoded,
                          cp::Cast(arrow::Datum(data), value_type, cp::CastOptions::Safe(), ctx));
    data = decoded.array();
  }
  const arrow::Type::type file_id = data->type->id();
  switch (type.id) {
    case TypeId::kStruct:
      if (file_id != arrow::Type::STRUCT) return CannotRead(path, *data->type, type, *target);
      return ConformStruct(data, type, target, mapping, path, ctx);
    case TypeId::kList:
      if (file_id != arrow::Type::LIST && file_id != arrow::Type::LARGE_LIST) {
        return CannotRead(path, *data->type, type, *target);
      }
      return ConformList(std::move(data), type, target, mapping, path, ctx);
    case TypeId::kMap:
      if (file_id != arrow::Type::MAP) return CannotRead(path, *data->type, type, *target);
      return ConformMap(data, type, target, mapping, path, ctx);
    default:
      break;
  }
  if (data->type->Equals(*target)) return data;
  if (!CanRead(*data->type, *target)) return CannotRead(path, *data->type, type, *target);
  ARROW_ASSIGN_OR_RAISE(auto cast,
                        cp::Cast(arrow::Datum(data), target, cp::CastOptions::Safe(), ctx));
  return cast.array();
}

// Streams row counts without reading anything, for reads that need no column
// of the file (every requested column was added after the file was written).
class RowCountReader : public arrow::RecordBatchReader {
 public:
  RowCountReader(int64_t rows, int64_t batch_rows) : rows_(rows), batch_rows_(batch_rows) {}
  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }
  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* out) override {
    if (rows_ == 0) {
      *out = nullptr;
      return arrow::Status::OK();
    }
    const int64_t n = std::min(rows_, batch_rows_);
    rows_ -= n;
    *out = arrow::RecordBatch::Make(schema_, n, arrow::ArrayVector{});
    return arrow::Status::OK();
  }

 private:
  std::shared_ptr<arrow::Schema> schema_ = arrow::schema(arrow::FieldVector{});
  int64_t rows_;
  int64_t batch_rows_;
};

// Adds the file's location to errors raised while decoding.
class LocatedReader : public arrow::RecordBatchReader {
 public:
  LocatedReader(std::unique_ptr<arrow::RecordBatchReader> inner, std::string location)
      : inner_(std::move(inner)), location_(std::move(location)) {}
  std::shared_ptr<arrow::Schema> schema() const override { return inner_->schema(); }
  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* out) override {
    arrow::Status st = inner_->ReadNext(out);
    if (!st.ok()) return st.WithMessage("reading Parquet file ", location_, ": ", st.message());
    return st;
  }

 private:
  std::unique_ptr<arrow::RecordBatchReader> inner_;
  std::string location_;
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

FileOpener FileSystemOpener(std::shared_ptr<arrow::fs::FileSystem> fs) {
  return [fs = std::move(fs)](const std::string& location)
             -> arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> {
    return fs->OpenInputFile(location);
  };
}

arrow::Status CheckParquetFormat(const std::string& file_format, const std::string& location) {
  if (EqualsIgnoreCase(file_format, "PARQUET")) return arrow::Status::OK();
  return arrow::Status::NotImplemented("cannot read ", file_format, " file ", location,
                                       ": only Parquet files are supported");
}

arrow::Result<std::unique_ptr<ParquetFile>> OpenParquetFile(
    const FileOpener& open, const std::string& location, int64_t batch_rows,
    arrow::MemoryPool* pool, const NameMapping* name_mapping, const ParquetIo& io) {
  if (!open) return arrow::Status::Invalid("no FileOpener to open ", location);
  auto input = open(location);
  if (!input.ok()) {
    return input.status().WithMessage("opening ", location, ": ", input.status().message());
  }
  auto with_location = [&](const arrow::Status& st) {
    return st.WithMessage("reading Parquet file ", location, ": ", st.message());
  };
  parquet::ReaderProperties read_properties(pool);
  std::shared_ptr<parquet::FileMetaData> metadata;
  int64_t stream_buffer = 0;
  if (io.coalesce_limit_bytes >= 0) {
    // The footer first: whether the largest row group may be held whole.
    auto read = [&]() -> arrow::Status {
      PARQUET_CATCH_NOT_OK(metadata = parquet::ReadMetaData(*input));
      return arrow::Status::OK();
    }();
    if (!read.ok()) return with_location(read);
    int64_t largest = 0;
    for (int rg = 0; rg < metadata->num_row_groups(); ++rg) {
      largest = std::max(largest, metadata->RowGroup(rg)->total_compressed_size());
    }
    if (largest > io.coalesce_limit_bytes) {
      constexpr int64_t kSmallestBuffer = 16 << 10;
      stream_buffer = std::max(io.stream_buffer_bytes, kSmallestBuffer);
      if (io.stream_budget_bytes > 0 && metadata->num_columns() > 0) {
        stream_buffer =
            std::min(stream_buffer,
                     std::max(kSmallestBuffer, io.stream_budget_bytes / metadata->num_columns()));
      }
      read_properties.enable_buffered_stream();
      read_properties.set_buffer_size(stream_buffer);
    }
  }
  parquet::ArrowReaderProperties properties;
  properties.set_batch_size(batch_rows);
  properties.set_use_threads(false);
  // Reads each row group's column chunks in a few coalesced requests, unless
  // they are too large to hold whole (then they stream, above).
  properties.set_pre_buffer(stream_buffer == 0);
  // Iceberg timestamps are microseconds; INT96 appears in imported files.
  properties.set_coerce_int96_timestamp_unit(arrow::TimeUnit::MICRO);
  parquet::arrow::FileReaderBuilder builder;
  arrow::Status st = builder.Open(*input, read_properties, metadata);
  if (!st.ok()) return with_location(st);
  auto file = std::make_unique<ParquetFile>();
  file->location = location;
  file->name_mapping = name_mapping;
  file->stream_buffer_bytes = stream_buffer;
  auto reader = builder.memory_pool(pool)->properties(properties)->Build();
  if (!reader.ok()) return with_location(reader.status());
  file->reader = std::move(*reader);
  for (const auto& root : file->reader->manifest().schema_fields) {
    if (FieldIdOf(*root.field).has_value()) file->has_field_ids = true;
  }
  return file;
}

arrow::Result<std::vector<ColumnMatch>> MatchColumns(const ParquetFile& file,
                                                     const std::vector<NestedField>& fields,
                                                     const DataFile* data_file) {
  const auto& roots = file.reader->manifest().schema_fields;
  MappingLevel mapping = nullptr;
  if (!file.has_field_ids) {
    if (file.name_mapping == nullptr) {
      return arrow::Status::Invalid("Parquet file ", file.location,
                                    " has no field ids and the table has no ", kNameMappingProperty,
                                    " to match its columns by name");
    }
    mapping = &file.name_mapping->fields;
  }
  std::vector<ColumnMatch> columns;
  std::set<int> used_roots;
  for (const NestedField& field : fields) {
    ColumnMatch column;
    column.field = field;
    ARROW_ASSIGN_OR_RAISE(column.arrow_field, ToArrowField(field));
    for (size_t i = 0; i < roots.size(); ++i) {
      if (Matches(*roots[i].field, field, mapping)) {
        column.file_root = static_cast<int>(i);
        break;
      }
    }
    if (column.file_root >= 0) {
      if (!used_roots.insert(column.file_root).second) {
        return arrow::Status::Invalid("Parquet file ", file.location, ": column ",
                                      roots[column.file_root].field->name(),
                                      " matches two table columns");
      }
      column.mapping = ChildLevel(mapping, roots[column.file_root].field->name());
      NeededLeaves(roots[column.file_root], *field.type, column.mapping, &column.leaves);
    } else {
      ARROW_ASSIGN_OR_RAISE(column.constant, AbsentValue(field, column.arrow_field, data_file));
    }
    columns.push_back(std::move(column));
  }
  // parquet::arrow returns the roots of the leaves read in file order.
  for (auto& column : columns) {
    if (column.file_root >= 0) {
      column.batch_index =
          static_cast<int>(std::distance(used_roots.begin(), used_roots.find(column.file_root)));
    }
  }
  return columns;
}

std::vector<int> LeavesOf(const std::vector<ColumnMatch>& columns) {
  std::vector<int> leaves;
  for (const auto& column : columns) {
    leaves.insert(leaves.end(), column.leaves.begin(), column.leaves.end());
  }
  std::sort(leaves.begin(), leaves.end());
  leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
  return leaves;
}

arrow::Result<std::unique_ptr<arrow::RecordBatchReader>> ReadRowGroup(
    ParquetFile& file, int row_group, const std::vector<int>& leaves) {
  if (leaves.empty()) {
    const int64_t rows = file.reader->parquet_reader()->metadata()->RowGroup(row_group)->num_rows();
    return std::make_unique<RowCountReader>(rows, file.reader->properties().batch_size());
  }
  auto reader = file.reader->GetRecordBatchReader({row_group}, leaves);
  if (!reader.ok()) {
    return reader.status().WithMessage("reading Parquet file ", file.location, ": ",
                                       reader.status().message());
  }
  return std::make_unique<LocatedReader>(std::move(*reader), file.location);
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> ConformBatch(
    const arrow::RecordBatch& file_batch, const std::vector<ColumnMatch>& columns,
    const std::shared_ptr<arrow::Schema>& schema, cp::ExecContext* ctx) {
  const int64_t rows = file_batch.num_rows();
  arrow::ArrayVector arrays;
  arrays.reserve(columns.size());
  for (const auto& column : columns) {
    const auto& target = column.arrow_field->type();
    std::shared_ptr<arrow::ArrayData> data;
    if (column.batch_index < 0) {
      ARROW_ASSIGN_OR_RAISE(data, ConstantData(column.constant, target, rows, ctx));
    } else {
      ARROW_ASSIGN_OR_RAISE(
          data, Conform(file_batch.column_data(column.batch_index), *column.field.type, target,
                        column.mapping, column.field.name, ctx));
    }
    arrays.push_back(arrow::MakeArray(std::move(data)));
  }
  return arrow::RecordBatch::Make(schema, rows, std::move(arrays));
}

int64_t DecodedBytes(const ParquetFile& file, int row_group, const std::vector<int>& leaves) {
  auto metadata = file.reader->parquet_reader()->metadata()->RowGroup(row_group);
  const int64_t rows = metadata->num_rows();
  int64_t bytes = 0;
  for (int leaf : leaves) {
    auto chunk = metadata->ColumnChunk(leaf);
    const int64_t values = chunk->num_values();
    // Validity bitmaps, and offsets of each nesting level at most once per value.
    int64_t leaf_bytes = (values + rows) / 8 + 2;
    switch (chunk->type()) {
      case parquet::Type::BOOLEAN:
        leaf_bytes += values / 8 + 1;
        break;
      case parquet::Type::INT32:
      case parquet::Type::FLOAT:
        leaf_bytes += 4 * values;
        break;
      case parquet::Type::INT64:
      case parquet::Type::DOUBLE:
      case parquet::Type::INT96:  // read as 8-byte timestamps
        leaf_bytes += 8 * values;
        break;
      case parquet::Type::FIXED_LEN_BYTE_ARRAY:
        leaf_bytes +=
            int64_t{
                file.reader->parquet_reader()->metadata()->schema()->Column(leaf)->type_length()} *
            values;
        break;
      default: {  // BYTE_ARRAY: offsets and the values' bytes
        int64_t data = chunk->total_uncompressed_size();
        auto sizes = chunk->size_statistics();
        if (sizes && sizes->unencoded_byte_array_data_bytes) {
          data = std::max(data, *sizes->unencoded_byte_array_data_bytes);
        }
        leaf_bytes += 8 * values + data;
      }
    }
    if (chunk->num_values() != rows) leaf_bytes += 8 * rows;  // list offsets
    bytes += leaf_bytes;
  }
  return bytes;
}

int64_t PageBytes(const ParquetFile& file, int row_group, const std::vector<int>& leaves) {
  constexpr int64_t kPageBytes = int64_t{1} << 20;  // Arrow's and parquet-java's default
  auto metadata = file.reader->parquet_reader()->metadata()->RowGroup(row_group);
  int64_t bytes = 0;
  for (int leaf : leaves) {
    auto chunk = metadata->ColumnChunk(leaf);
    const int64_t whole = chunk->total_uncompressed_size();
    bytes += std::min(whole, kPageBytes);
    if (chunk->has_dictionary_page() &&
        chunk->data_page_offset() > chunk->dictionary_page_offset()) {
      // Its compressed size is known: scaled by the chunk's compression.
      const double ratio = static_cast<double>(whole) / static_cast<double>(std::max<int64_t>(
                                                            1, chunk->total_compressed_size()));
      const double dictionary =
          static_cast<double>(chunk->data_page_offset() - chunk->dictionary_page_offset()) *
          std::max(1.0, ratio);
      bytes += std::min(whole, static_cast<int64_t>(std::min(dictionary, 1e15)));
    }
  }
  return bytes;
}

int64_t ColumnChunkBytes(const ParquetFile& file, int row_group, const std::vector<int>& leaves) {
  auto metadata = file.reader->parquet_reader()->metadata()->RowGroup(row_group);
  int64_t bytes = 0;
  for (int leaf : leaves) bytes += metadata->ColumnChunk(leaf)->total_compressed_size();
  return bytes;
}

}  // namespace icefloe::iceberg
