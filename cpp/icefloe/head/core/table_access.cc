#include "icefloe/head/core/table_access.h"

#include <memory>
#include <string>

#include "icefloe/iceberg/metadata.h"
#include "icefloe/iceberg/scan.h"
#include "icefloe/transform/transform.h"

namespace icefloe {

namespace {

// Parsed manifests kept for later plans (a refresh reads only the new ones):
// at most this many manifest entries, about 1-2 KB each.
constexpr size_t kManifestCacheEntries = 100'000;

}  // namespace

ScanPlanner IcebergScanPlanner(iceberg::FileIO* io) {
  auto manifests = std::make_shared<iceberg::ManifestCache>(kManifestCacheEntries);
  return [io, manifests](const LoadRequest& r) -> arrow::Result<iceberg::ScanPlan> {
    iceberg::ScanOptions scan;
    scan.manifests = manifests.get();
    scan.snapshot_id = r.snapshot_id;
    scan.ref = r.ref;
    scan.as_of_ms = r.as_of_ms;
    scan.columns = r.columns;
    scan.filter = r.filter;
    if (!scan.columns.empty() || !r.transform) {
      return iceberg::PlanScan(*io, r.source, scan);
    }
    // A transform reads only the columns it names.
    const TransformSpec& spec = *r.transform;
    ARROW_ASSIGN_OR_RAISE(scan.columns, transform::InputColumns(spec));
    auto plan = iceberg::PlanScan(*io, r.source, scan);
    if (plan.ok()) return plan;
    // Say which of the transform's columns names no table column: bound to
    // every column of the table, the transform fails naming it (error path only).
    scan.columns.clear();
    auto all = iceberg::PlanScan(*io, r.source, scan);
    if (all.ok()) {
      auto read = [io](const std::string& location) { return io->ReadAll(location); };
      auto bound = transform::Transform::Make(spec, all->arrow_schema, read);
      if (!bound.ok()) return bound.status();
    }
    return plan.status();
  };
}

TransformBinder FileTransformBinder(iceberg::FileIO* io) {
  return [io](const LoadRequest& r,
              const std::shared_ptr<arrow::Schema>& input) -> arrow::Result<BoundTransform> {
    if (!r.transform) return arrow::Status::Invalid("load '", r.name, "': no transform to bind");
    auto read = [io](const std::string& location) { return io->ReadAll(location); };
    ARROW_ASSIGN_OR_RAISE(auto bound, transform::Transform::Make(*r.transform, input, read));
    return BoundTransform{bound->output_schema(), bound->model_sha256(), bound->model_kind()};
  };
}

TableProbe IcebergTableProbe(iceberg::FileIO* io) {
  return [io](const LoadRequest& r) -> arrow::Result<TableHead> {
    TableHead head;
    // A metadata file in its table's metadata/ directory follows the table
    // (Kubeflow's METADATA_LOC); one anywhere else never moves.
    std::string table = r.source;
    if (iceberg::IsMetadataFileLocation(r.source)) {
      auto dir = iceberg::TableOfMetadataFile(r.source);
      if (!dir) {
        head.fixed = true;
        head.why_fixed =
            "the source is a metadata.json file outside a table's metadata/ directory, "
            "which never moves (load the table directory to follow it)";
        head.metadata_location = r.source;
        return head;
      }
      table = *dir;
    }
    ARROW_ASSIGN_OR_RAISE(iceberg::TableMetadata metadata, iceberg::LoadTableMetadata(*io, table));
    head.metadata_location = metadata.metadata_location;
    auto selector = iceberg::SnapshotSelector::Current();
    if (r.ref) {
      auto ref = metadata.refs.find(*r.ref);
      if (ref != metadata.refs.end() && ref->second.kind == iceberg::SnapshotRef::Kind::kTag) {
        head.fixed = true;
        head.why_fixed = "the load reads tag '" + *r.ref + "'";
        return head;
      }
      selector = iceberg::SnapshotSelector::Ref(*r.ref);
    }
    ARROW_ASSIGN_OR_RAISE(const iceberg::Snapshot* snapshot,
                          iceberg::SelectSnapshot(metadata, selector));
    if (snapshot) {
      head.snapshot_id = snapshot->snapshot_id;
      head.timestamp_ms = snapshot->timestamp_ms;
    }
    return head;
  };
}

}  // namespace icefloe
