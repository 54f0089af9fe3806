#include "icefloe/head/core/projection.h"

#include <limits>
#include <unordered_set>

#include <arrow/type.h>

namespace icefloe {
namespace {

// The dataset's column names, for errors: the first few and a count.
std::string ColumnList(const arrow::Schema& schema) {
  constexpr int kShown = 16;
  std::string out = std::to_string(schema.num_fields()) + " columns: ";
  for (int i = 0; i < schema.num_fields() && i < kShown; ++i) {
    out += (i > 0 ? ", " : "") + schema.field(i)->name();
  }
  if (schema.num_fields() > kShown) out += ", ...";
  return out;
}

}  // namespace

arrow::Result<Projection> Project(const std::shared_ptr<arrow::Schema>& schema,
                                  const std::vector<std::string>& names, std::string_view what) {
  Projection out;
  out.schema = schema;
  if (names.empty()) return out;
  std::unordered_set<std::string_view> seen;
  std::vector<std::shared_ptr<arrow::Field>> fields;
  fields.reserve(names.size());
  out.columns.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (!seen.insert(name).second) {
      return arrow::Status::Invalid(what, ": 'columns'[", i, "]: column '", name,
                                    "' is asked for twice");
    }
    const auto matches = schema->GetAllFieldIndices(name);
    if (matches.empty()) {
      return arrow::Status::Invalid(what, ": 'columns'[", i, "]: no column '", name,
                                    "' in the dataset (", ColumnList(*schema), ")");
    }
    if (matches.size() > 1) {
      return arrow::Status::Invalid(what, ": 'columns'[", i, "]: column '", name,
                                    "' is ambiguous: the dataset has ", matches.size(),
                                    " columns of that name");
    }
    if (matches[0] > std::numeric_limits<uint16_t>::max()) {
      return arrow::Status::Invalid(what, ": 'columns'[", i, "]: column '", name, "' is column ",
                                    matches[0], "; projections reach the first 65536 columns only");
    }
    out.columns.push_back(static_cast<uint16_t>(matches[0]));
    fields.push_back(schema->field(matches[0]));
  }
  out.schema = arrow::schema(std::move(fields), schema->metadata());
  return out;
}

}  // namespace icefloe
