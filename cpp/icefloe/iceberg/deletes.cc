#include "icefloe/iceberg/deletes.h"

#include <algorithm>
#include <map>
#include <utility>

#include <arrow/buffer.h>
#include <arrow/compute/api_scalar.h>
#include <arrow/compute/api_vector.h>
#include <arrow/util/bit_util.h>

#include "icefloe/iceberg/puffin.h"

namespace icefloe::iceberg {

namespace cp = arrow::compute;

namespace {

std::vector<NestedField> PositionDeleteFields() {
  return {
      {kDeleteFilePathFieldId, "file_path", true, MakePrimitive(TypeId::kString), "", ""},
      {kDeletePosFieldId, "pos", true, MakePrimitive(TypeId::kLong), "", ""},
  };
}

// The spec fixes the names of the position delete columns as well as their
// ids, so files written without ids still read.
const NameMapping& PositionDeleteMapping() {
  static const NameMapping mapping{
      {{kDeleteFilePathFieldId, {"file_path"}, {}}, {kDeletePosFieldId, {"pos"}, {}}}};
  return mapping;
}

// Appends the positions that `file` deletes from `data_path`.
arrow::Status ReadPositionDeletes(const DataFile& file, const std::string& data_path,
                                  const FileOpener& open, int64_t batch_rows,
                                  arrow::MemoryPool* pool, DeleteFilter* out) {
  ARROW_ASSIGN_OR_RAISE(auto parquet, OpenParquetFile(open, file.file_path, batch_rows, pool,
                                                      &PositionDeleteMapping()));
  ARROW_ASSIGN_OR_RAISE(auto columns, MatchColumns(*parquet, PositionDeleteFields()));
  for (const auto& column : columns) {
    if (column.file_root < 0) {
      return arrow::Status::Invalid("position delete file ", file.file_path, " has no '",
                                    column.field.name, "' column");
    }
  }
  auto schema = arrow::schema({columns[0].arrow_field, columns[1].arrow_field});
  auto path_scalar = std::make_shared<arrow::StringScalar>(data_path);
  ARROW_ASSIGN_OR_RAISE(
      auto bound, cp::equal(cp::field_ref("file_path"), cp::literal(path_scalar)).Bind(*schema));
  cp::ExecContext ctx(pool);
  const std::vector<int> leaves = LeavesOf(columns);
  const int row_groups = parquet->reader->num_row_groups();
  for (int rg = 0; rg < row_groups; ++rg) {
    // Delete files are sorted by file_path: most row groups name other files.
    ARROW_ASSIGN_OR_RAISE(bool may_match, RowGroupMayMatch(*parquet, rg, columns, bound));
    if (!may_match) continue;
    out->bytes_read += ColumnChunkBytes(*parquet, rg, leaves);
    ARROW_ASSIGN_OR_RAISE(auto reader, ReadRowGroup(*parquet, rg, leaves));
    while (true) {
      std::shared_ptr<arrow::RecordBatch> file_batch;
      ARROW_RETURN_NOT_OK(reader->ReadNext(&file_batch));
      if (file_batch == nullptr) break;
      ARROW_ASSIGN_OR_RAISE(auto batch, ConformBatch(*file_batch, columns, schema, &ctx));
      ARROW_ASSIGN_OR_RAISE(arrow::Datum mask,
                            cp::CallFunction("equal", {batch->column(0), path_scalar}, &ctx));
      ARROW_ASSIGN_OR_RAISE(
          arrow::Datum positions,
          cp::Filter(batch->column(1), mask, cp::FilterOptions::Defaults(), &ctx));
      std::shared_ptr<arrow::Array> kept = positions.make_array();
      const auto& array = static_cast<const arrow::Int64Array&>(*kept);
      for (int64_t i = 0; i < array.length(); ++i) {
        if (array.IsValid(i)) out->positions.push_back(array.Value(i));
      }
    }
  }
  return arrow::Status::OK();
}

// Appends the positions that deletion vector `dv` deletes from `data`: the
// blob at content_offset, content_size_in_bytes of its Puffin file.
arrow::Status ReadDeletionVector(const DataFile& dv, const DataFile& data, const FileOpener& open,
                                 DeleteFilter* out) {
  const std::string& location = dv.file_path;
  auto bad = [&](auto&&... why) {
    return arrow::Status::Invalid("deletion vector in Puffin file ", location, ": ", why...);
  };
  if (!dv.content_offset || !dv.content_size_in_bytes || *dv.content_offset < 0 ||
      *dv.content_size_in_bytes < 0) {
    return bad("the manifest gives no content_offset and content_size_in_bytes");
  }
  if (dv.referenced_data_file != data.file_path) {
    return bad("it applies to ", dv.referenced_data_file.value_or("(no referenced_data_file)"),
               ", not ", data.file_path);
  }
  if (!open) return arrow::Status::Invalid("no FileOpener to open ", location);
  auto input = open(location);
  if (!input.ok()) {
    return input.status().WithMessage("opening ", location, ": ", input.status().message());
  }
  auto blob = (*input)->ReadAt(*dv.content_offset, *dv.content_size_in_bytes);
  if (!blob.ok()) {
    return blob.status().WithMessage("reading Puffin file ", location, ": ",
                                     blob.status().message());
  }
  if ((*blob)->size() != *dv.content_size_in_bytes) {
    return bad("the file ends before the blob at offset ", *dv.content_offset, " of ",
               *dv.content_size_in_bytes, " bytes (truncated?)");
  }
  ARROW_ASSIGN_OR_RAISE(
      std::vector<int64_t> positions,
      DecodeDeletionVector(std::string_view(reinterpret_cast<const char*>((*blob)->data()),
                                            static_cast<size_t>((*blob)->size())),
                           data.record_count, location));
  // A deletion vector's record_count is its cardinality.
  if (static_cast<int64_t>(positions.size()) != dv.record_count) {
    return bad("it holds ", positions.size(), " positions, the manifest says ", dv.record_count);
  }
  out->bytes_read += (*blob)->size();
  out->positions.insert(out->positions.end(), positions.begin(), positions.end());
  return arrow::Status::OK();
}

arrow::Result<NestedField> EqualityField(const Schema& schema, int32_t id,
                                         const std::string& location) {
  for (const auto& field : schema.fields) {
    if (field.id != id) continue;
    if (!field.type->is_primitive()) {
      return arrow::Status::NotImplemented("equality delete file ", location,
                                           " compares nested column '", field.name, "'");
    }
    return field;
  }
  if (schema.FindById(id) != nullptr) {
    return arrow::Status::NotImplemented("equality delete file ", location,
                                         " compares nested field id ", id);
  }
  return arrow::Status::Invalid("equality delete file ", location, ": field id ", id,
                                " is not in schema ", schema.schema_id);
}

}  // namespace

arrow::Result<std::unique_ptr<EqualityDeleteSet>> EqualityDeleteSet::Make(
    std::vector<NestedField> fields, arrow::MemoryPool* pool) {
  std::unique_ptr<EqualityDeleteSet> set(new EqualityDeleteSet());
  arrow::FieldVector arrow_fields;
  std::vector<arrow::TypeHolder> key_types;
  for (const auto& field : fields) {
    ARROW_ASSIGN_OR_RAISE(auto arrow_field, ToArrowField(field));
    key_types.emplace_back(arrow_field->type());
    arrow_fields.push_back(std::move(arrow_field));
  }
  set->fields_ = std::move(fields);
  set->schema_ = arrow::schema(std::move(arrow_fields));
  set->ctx_ = std::make_unique<cp::ExecContext>(pool);
  ARROW_ASSIGN_OR_RAISE(set->grouper_, cp::Grouper::Make(key_types, set->ctx_.get()));
  return set;
}

arrow::Result<int64_t> EqualityDeleteSet::AddFile(const DataFile& file, const FileOpener& open,
                                                  int64_t batch_rows,
                                                  const NameMapping* name_mapping) {
  ARROW_ASSIGN_OR_RAISE(auto parquet, OpenParquetFile(open, file.file_path, batch_rows,
                                                      ctx_->memory_pool(), name_mapping));
  ARROW_ASSIGN_OR_RAISE(auto columns, MatchColumns(*parquet, fields_));
  for (const auto& column : columns) {
    if (column.file_root < 0) {
      return arrow::Status::Invalid("equality delete file ", file.file_path, " has no column '",
                                    column.field.name, "' (field id ", column.field.id, ")");
    }
  }
  const std::vector<int> leaves = LeavesOf(columns);
  int64_t bytes_read = 0;
  for (int rg = 0; rg < parquet->reader->num_row_groups(); ++rg) {
    bytes_read += ColumnChunkBytes(*parquet, rg, leaves);
    ARROW_ASSIGN_OR_RAISE(auto reader, ReadRowGroup(*parquet, rg, leaves));
    while (true) {
      std::shared_ptr<arrow::RecordBatch> file_batch;
      ARROW_RETURN_NOT_OK(reader->ReadNext(&file_batch));
      if (file_batch == nullptr) break;
      ARROW_ASSIGN_OR_RAISE(auto batch, ConformBatch(*file_batch, columns, schema_, ctx_.get()));
      cp::ExecBatch keys(*batch);
      ARROW_RETURN_NOT_OK(grouper_->Populate(cp::ExecSpan(keys)));
    }
  }
  return bytes_read;
}

arrow::Result<std::shared_ptr<arrow::Array>> EqualityDeleteSet::Keep(
    const arrow::ArrayVector& keys) {
  if (keys.size() != fields_.size() || keys.empty()) {
    return arrow::Status::Invalid("equality delete keys: expected ", fields_.size(),
                                  " columns, got ", keys.size());
  }
  std::vector<arrow::Datum> values(keys.begin(), keys.end());
  cp::ExecBatch batch(std::move(values), keys[0]->length());
  // Keys never seen while populating look up as null group ids.
  ARROW_ASSIGN_OR_RAISE(arrow::Datum groups, grouper_->Lookup(cp::ExecSpan(batch)));
  ARROW_ASSIGN_OR_RAISE(arrow::Datum keep, cp::IsNull(groups, cp::NullOptions(), ctx_.get()));
  return keep.make_array();
}

std::vector<int32_t> DeleteFilter::EqualityFieldIds() const {
  std::vector<int32_t> ids;
  for (const auto& set : equality) {
    for (const auto& field : set->fields()) {
      if (std::find(ids.begin(), ids.end(), field.id) == ids.end()) ids.push_back(field.id);
    }
  }
  return ids;
}

arrow::Result<DeleteFilter> LoadDeletes(const ScanTask& task, const Schema& schema,
                                        const FileOpener& open, int64_t batch_rows,
                                        arrow::MemoryPool* pool, const NameMapping* name_mapping) {
  DeleteFilter filter;
  std::map<std::vector<int32_t>, EqualityDeleteSet*> sets;
  for (const DataFile& file : task.deletes) {
    if (file.is_deletion_vector()) {
      ARROW_RETURN_NOT_OK(ReadDeletionVector(file, task.data_file, open, &filter));
      continue;
    }
    ARROW_RETURN_NOT_OK(CheckParquetFormat(file.file_format, file.file_path));
    switch (file.content) {
      case FileContent::kPositionDeletes:
        ARROW_RETURN_NOT_OK(
            ReadPositionDeletes(file, task.data_file.file_path, open, batch_rows, pool, &filter));
        break;
      case FileContent::kEqualityDeletes: {
        if (file.equality_ids.empty()) {
          return arrow::Status::Invalid("equality delete file ", file.file_path,
                                        " has no equality_ids");
        }
        std::vector<int32_t> ids = file.equality_ids;
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        auto it = sets.find(ids);
        if (it == sets.end()) {
          std::vector<NestedField> fields;
          for (int32_t id : ids) {
            ARROW_ASSIGN_OR_RAISE(auto field, EqualityField(schema, id, file.file_path));
            fields.push_back(std::move(field));
          }
          ARROW_ASSIGN_OR_RAISE(auto set, EqualityDeleteSet::Make(std::move(fields), pool));
          it = sets.emplace(ids, set.get()).first;
          filter.equality.push_back(std::move(set));
        }
        ARROW_ASSIGN_OR_RAISE(int64_t bytes,
                              it->second->AddFile(file, open, batch_rows, name_mapping));
        filter.bytes_read += bytes;
        break;
      }
      case FileContent::kData:
        return arrow::Status::Invalid("scan task of ", task.data_file.file_path,
                                      " lists data file ", file.file_path, " as a delete file");
    }
  }
  std::sort(filter.positions.begin(), filter.positions.end());
  filter.positions.erase(std::unique(filter.positions.begin(), filter.positions.end()),
                         filter.positions.end());
  return filter;
}

int64_t CountPositions(const std::vector<int64_t>& sorted_positions, int64_t first_row,
                       int64_t num_rows) {
  auto begin = std::lower_bound(sorted_positions.begin(), sorted_positions.end(), first_row);
  auto end = std::lower_bound(begin, sorted_positions.end(), first_row + num_rows);
  return end - begin;
}

arrow::Result<std::shared_ptr<arrow::BooleanArray>> KeepPositions(
    const std::vector<int64_t>& sorted_positions, int64_t first_row, int64_t num_rows,
    arrow::MemoryPool* pool) {
  auto begin = std::lower_bound(sorted_positions.begin(), sorted_positions.end(), first_row);
  auto end = std::lower_bound(begin, sorted_positions.end(), first_row + num_rows);
  if (begin == end) return nullptr;
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> bits,
                        arrow::AllocateEmptyBitmap(num_rows, pool));
  uint8_t* data = bits->mutable_data();
  arrow::bit_util::SetBitsTo(data, 0, num_rows, true);
  for (auto it = begin; it != end; ++it) arrow::bit_util::ClearBit(data, *it - first_row);
  return std::make_shared<arrow::BooleanArray>(num_rows, std::move(bits));
}

}  // namespace icefloe::iceberg
