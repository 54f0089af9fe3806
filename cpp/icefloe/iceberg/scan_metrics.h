// What planning a scan did (a plain struct, so the protocol's replies and
// the head's catalog record can carry it without the scan library).
#pragma once

#include <cstdint>

namespace icefloe::iceberg {

struct ScanMetrics {
  int64_t manifests_total = 0;
  int64_t manifests_pruned = 0;  ///< skipped by partition summaries
  int64_t manifests_cached = 0;  ///< of the others, parsed by an earlier plan (not read)
  int64_t data_files_total = 0;  ///< live data files in the snapshot
  int64_t data_files_pruned_by_partition = 0;
  int64_t data_files_pruned_by_bounds = 0;
  int64_t delete_files = 0;      ///< live delete files considered
  int64_t row_groups_total = 0;  ///< filled in by loads: row groups in the files read
  int64_t row_groups_read = 0;   ///< of those, decoded (the others pruned by statistics)
  /// Filled in by loads with a `pack` (transform/pack.h PackStats), over the
  /// tasks the load read: documents packed, their tokens, pad tokens, packed
  /// rows, documents longer than seq_len split or dropped, tail tokens dropped.
  int64_t pack_documents = 0;
  int64_t pack_tokens = 0;
  int64_t pack_pad_tokens = 0;
  int64_t pack_rows = 0;
  int64_t pack_overlong_split = 0;
  int64_t pack_overlong_dropped = 0;
  int64_t pack_tail_dropped_tokens = 0;
  /// filled in by loads: rows a transform dropped (a chat column's rows its
  /// template refuses or that keep no trained token)
  int64_t transform_rows_dropped = 0;
  double planning_ms = 0;
};

}  // namespace icefloe::iceberg
