// Test-only: scan plans for coordinator tests that fake the data nodes.
#pragma once

#include <cstdint>
#include <string>

#include <arrow/type.h>

#include "icefloe/iceberg/scan.h"
#include "icefloe/protocol/actions.h"

namespace icefloe {

/// A plan of one int64 column `id` over `tasks` scan tasks, task i with
/// `rows_of(i)` rows and `file_bytes` bytes; it keeps `r`'s filter so that
/// loads with other filters plan other copies.
template <typename RowsOf>
iceberg::ScanPlan FakeScanPlan(const LoadRequest& r, int tasks, RowsOf rows_of,
                               int64_t file_bytes) {
  iceberg::ScanPlan plan;
  plan.metadata_location = r.source;
  plan.table_uuid = "uuid-" + r.source;
  plan.snapshot_id = 1;
  plan.schema.fields.push_back(
      {1, "id", true, iceberg::MakePrimitive(iceberg::TypeId::kLong), "", ""});
  plan.projection = {1};
  plan.filter = r.filter;
  plan.arrow_schema = arrow::schema({arrow::field("id", arrow::int64(), false)});
  for (int i = 0; i < tasks; ++i) {
    iceberg::ScanTask t;
    t.data_file.file_path = "file:///t/" + std::to_string(i) + ".parquet";
    t.data_file.record_count = rows_of(i);
    t.data_file.file_size_in_bytes = file_bytes;
    plan.tasks.push_back(t);
  }
  return plan;
}

}  // namespace icefloe
