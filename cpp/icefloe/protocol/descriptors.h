// CMD descriptors of GetFlightInfo / GetSchema on the head: JSON objects
// with a "kind" (range, epoch or rows), docs/protocol.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/protocol/fields.h"

namespace icefloe {

/// Most columns a descriptor may project (tickets carry their indices as u16).
inline constexpr uint64_t kMaxProjectedColumns = 65535;

/// {"kind": "range"}: global rows [start, stop) of a dataset.
struct RangeDescriptor {
  std::string dataset;
  uint64_t start = 0;
  std::optional<uint64_t> stop;  ///< empty: to the end
  /// Projection: column names in output order; empty: every column. On the
  /// wire an absent field; a present one holds 1..65535 names.
  std::vector<std::string> columns = {};
  /// A list<int32> column whose per-row lengths are read instead of the
  /// rows (lengths tickets, docs/protocol.md); empty: the rows. Not with
  /// `columns`.
  std::optional<std::string> lengths = {};
  /// The copy to read (a replaced one while the head keeps it: a
  /// token-budget epoch resumed on the copy it was planned from); empty:
  /// the current one.
  std::optional<uint64_t> generation = {};
  /// With `lengths`, the token-budget epoch the lengths plan (all three or
  /// none): the head binds it to a generation as an epoch descriptor's epoch
  /// (head/core/epoch_bindings.h) and answers that copy's lengths, so every
  /// rank plans from one copy. `generation`, where given, wins.
  std::optional<uint64_t> seed = {};
  std::optional<uint64_t> epoch = {};
  std::optional<uint64_t> world_size = {};  ///< 1..2^32-1

  nlohmann::json ToJson() const;
  static arrow::Result<RangeDescriptor> FromJson(const nlohmann::json& j);
  static MessageSpec Spec();
};

/// {"kind": "epoch"}: one consumer's batches of one epoch (docs/epochs.md).
/// Field by field the plan coordinates of plan/plan.h's PlanParams.
struct EpochDescriptor {
  std::string dataset;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint32_t order_version = 0;             ///< 0: this head's (plan.h kEpochOrderVersion)
  std::string shuffle = "window";         ///< window, none, block or sample
  std::optional<uint64_t> block_rows;     ///< empty: the mode's default (plan.h)
  std::optional<uint64_t> window_blocks;  ///< empty: the mode's default (plan.h)
  bool shuffle_within_block = false;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  uint32_t num_workers = 0;  ///< 0: no DataLoader workers (one reader)
  uint32_t worker = 0;
  uint64_t batch_size = 0;  ///< required
  bool drop_last = true;
  uint64_t start = 0;        ///< resume: positions of the epoch already read
  uint64_t first_batch = 0;  ///< resume a worker: skip its first batches
  /// Resume from a saved state: the plan turns (start, world_size, batch_size,
  /// steps) of the interrupted job into this plan's start (docs/epochs.md).
  std::optional<uint64_t> resume_steps;
  std::optional<uint64_t> resume_world_size;  ///< 1..2^32-1
  std::optional<uint64_t> resume_batch_size;
  std::vector<std::string> columns = {};  ///< as RangeDescriptor::columns
  /// The copy to read: a consumer failing over or resuming mid-epoch names
  /// the generation its epoch started on. Empty: the generation the epoch is
  /// bound to (head/core/epoch_bindings.h), the newest for an epoch not yet bound.
  std::optional<uint64_t> generation;

  nlohmann::json ToJson() const;
  static arrow::Result<EpochDescriptor> FromJson(const nlohmann::json& j);
  static MessageSpec Spec();
};

/// {"kind": "rows"}: rows by global id, any order, duplicates allowed.
struct RowsDescriptor {
  std::string dataset;
  std::vector<uint64_t> rows;
  std::vector<std::string> columns = {};  ///< as RangeDescriptor::columns

  nlohmann::json ToJson() const;
  static arrow::Result<RowsDescriptor> FromJson(const nlohmann::json& j);
  static MessageSpec Spec();
};

using Descriptor = std::variant<RangeDescriptor, EpochDescriptor, RowsDescriptor>;

/// Parses a CMD descriptor's bytes by its "kind" (default "range").
arrow::Result<Descriptor> ParseDescriptor(std::string_view cmd);
/// The dataset a descriptor names.
const std::string& DescriptorDataset(const Descriptor& d);
/// The columns a descriptor projects (empty: all).
const std::vector<std::string>& DescriptorColumns(const Descriptor& d);

}  // namespace icefloe
