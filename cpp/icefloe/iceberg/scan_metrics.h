// What planning a scan did and what a load counted (plain structs, so the
// protocol's messages and the head's catalog record can carry them without
// the scan library).
#pragma once

#include <cstdint>
#include <iterator>
#include <string_view>

namespace icefloe::iceberg {

/// What a load counts on each node over the tasks it reads: a node reports
/// them (node.load_status reply), the head sums them over the nodes and
/// divides by the replication (describe's `scan`). One list: a counter is
/// a member here and a row of kLoadCounters below, under its wire name;
/// the messages' field tables, the docs' field lists and the head's sum all
/// come from that table.
struct LoadCounters {
  int64_t row_groups_total = 0;  ///< row groups in the files read
  int64_t row_groups_read = 0;   ///< of those, decoded (the others pruned by statistics)
  /// What a transform's `pack` did (transform/pack.h PackStats): documents
  /// packed, their tokens, pad tokens, packed rows, documents longer than
  /// seq_len split or dropped, tail tokens dropped.
  int64_t pack_documents = 0;
  int64_t pack_tokens = 0;
  int64_t pack_pad_tokens = 0;
  int64_t pack_rows = 0;
  int64_t pack_overlong_split = 0;
  int64_t pack_overlong_dropped = 0;
  int64_t pack_tail_dropped_tokens = 0;
  /// Rows a transform dropped (a chat column's rows its template refuses or
  /// that keep no trained token).
  int64_t transform_rows_dropped = 0;

  LoadCounters& operator+=(const LoadCounters& o);
  /// Each counter divided by `replication` (each task counted on that many
  /// nodes; sum the nodes' counters first, or the remainders are lost).
  LoadCounters DividedBy(int64_t replication) const;
  bool operator==(const LoadCounters&) const = default;
  /// The counters alone, of a message that derives from LoadCounters.
  LoadCounters& counters() { return *this; }
  const LoadCounters& counters() const { return *this; }
};

/// A counter's wire name and member.
struct LoadCounter {
  std::string_view name;
  int64_t LoadCounters::*member;
};

/// Every member of LoadCounters, in the messages' field order.
inline constexpr LoadCounter kLoadCounters[] = {
    {"row_groups_total", &LoadCounters::row_groups_total},
    {"row_groups_read", &LoadCounters::row_groups_read},
    {"pack_documents", &LoadCounters::pack_documents},
    {"pack_tokens", &LoadCounters::pack_tokens},
    {"pack_pad_tokens", &LoadCounters::pack_pad_tokens},
    {"pack_rows", &LoadCounters::pack_rows},
    {"pack_overlong_split", &LoadCounters::pack_overlong_split},
    {"pack_overlong_dropped", &LoadCounters::pack_overlong_dropped},
    {"pack_tail_dropped_tokens", &LoadCounters::pack_tail_dropped_tokens},
    {"transform_rows_dropped", &LoadCounters::transform_rows_dropped},
};
// A member without its row (or a row too many) does not compile.
static_assert(sizeof(LoadCounters) == sizeof(int64_t) * std::size(kLoadCounters),
              "every LoadCounters member has one row in kLoadCounters");

inline LoadCounters& LoadCounters::operator+=(const LoadCounters& o) {
  for (const LoadCounter& c : kLoadCounters) this->*c.member += o.*c.member;
  return *this;
}

inline LoadCounters LoadCounters::DividedBy(int64_t replication) const {
  LoadCounters out;
  for (const LoadCounter& c : kLoadCounters) out.*c.member = this->*c.member / replication;
  return out;
}

/// Planning's figures, and the load's counters (filled in by loads).
struct ScanMetrics : LoadCounters {
  int64_t manifests_total = 0;
  int64_t manifests_pruned = 0;  ///< skipped by partition summaries
  int64_t manifests_cached = 0;  ///< of the others, parsed by an earlier plan (not read)
  int64_t data_files_total = 0;  ///< live data files in the snapshot
  int64_t data_files_pruned_by_partition = 0;
  int64_t data_files_pruned_by_bounds = 0;
  int64_t delete_files = 0;  ///< live delete files considered
  double planning_ms = 0;
};

}  // namespace icefloe::iceberg
