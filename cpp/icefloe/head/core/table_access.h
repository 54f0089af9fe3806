// How the head reads a table, for the parts that decide what to load: scan
// planning (load_coordinator.h's ScanPlanner), a transform checked against
// the planned columns (TransformBinder) and the probe of a followed table's
// current snapshot (follow.h's TableProbe). Each reads through one FileIO,
// which outlives what is made here; tests substitute their own strategies
// (HeadOptions::planner, HeadOptions::table_probe).
#pragma once

#include "icefloe/head/core/follow.h"
#include "icefloe/head/core/load_coordinator.h"
#include "icefloe/iceberg/file_io.h"

namespace icefloe {

/// iceberg::PlanScan over `io`, keeping parsed manifests for later plans (a
/// refresh reads only the new ones). A load with a transform and no columns
/// reads only the columns the transform names; when one of them names no
/// table column, the error is the transform's, naming it.
ScanPlanner IcebergScanPlanner(iceberg::FileIO* io);

/// transform::Transform bound to the planned columns: every expression
/// checked, every tokenizer model read over `io`, hashed and parsed.
TransformBinder FileTransformBinder(iceberg::FileIO* io);

/// The table's current metadata.json (found as a scan finds it) and the
/// snapshot the request reads; never the manifests. A metadata file outside
/// its table's metadata/ directory, or a tag, is fixed: it never moves.
TableProbe IcebergTableProbe(iceberg::FileIO* io);

}  // namespace icefloe
