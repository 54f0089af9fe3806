// Planning the head's answers to FlightInfo requests: which copy of a dataset
// a descriptor reads, which nodes serve which of its rows, and the signed
// tickets that ask them (docs/protocol.md, "Descriptors"). The Flight adapter
// (head_server.h) decodes the descriptor, calls one method here and encodes
// the PlannedInfo; the "slice_map" action's reply is planned here too.
//
// Reads the catalog (the ready copy, or the generation an epoch is bound to:
// epoch_bindings.h) and the registry (live replicas first). Errors are the
// wire's: KeyError for an unknown dataset, Invalid for one that cannot be
// read now or a descriptor that does not fit it, IndexError for a range
// outside it. Thread-safe; the catalog and registry outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/result.h>

#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/epoch_bindings.h"
#include "icefloe/head/core/planned_info.h"
#include "icefloe/head/core/registry.h"
#include "icefloe/protocol/descriptors.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {

class FlightInfoPlanner {
 public:
  /// Whether a load of the name is queued or running (LoadCoordinator::Loading).
  using LoadingFn = std::function<bool(const std::string& name)>;

  /// `ticket_key` signs the tickets (empty: unsigned); `default_dataset` is
  /// the dataset Kubeflow PATH descriptors [index, total] shard (empty: none).
  FlightInfoPlanner(const Catalog* catalog, const NodeRegistry* registry, LoadingFn loading,
                    std::string ticket_key, std::string default_dataset);

  /// The readable copy of `name` (a replaced one when `generation` names
  /// it), its slices' live replicas first. KeyError for an unknown name;
  /// Invalid while it loads, for a generation no longer kept, or for a copy
  /// that failed.
  arrow::Result<std::shared_ptr<const DatasetEntry>> Lookup(
      const std::string& name, std::optional<uint64_t> generation = std::nullopt) const;

  /// Whether a PATH descriptor names a cataloged dataset ([name]); any other
  /// path is a Kubeflow shard [index, total] of the default dataset.
  bool NamesDataset(const std::vector<std::string>& path) const;
  /// Every row of `name`: one endpoint per slice, in row order.
  arrow::Result<PlannedInfo> Whole(const std::string& name) const;
  /// Kubeflow's shard `path` ([index, total]) of the default dataset.
  arrow::Result<PlannedInfo> Kubeflow(const std::vector<std::string>& path) const;
  /// Rows [start, stop) of a dataset: one endpoint per slice it touches.
  /// A lengths request naming its epoch (seed, epoch, world_size) reads the
  /// generation that epoch is bound to, as Epoch does.
  arrow::Result<PlannedInfo> Range(const RangeDescriptor& d) const;
  /// One consumer's part of one epoch: one plan ticket per replica set, and
  /// the epoch's shape (EpochShapeReply) as app_metadata.
  arrow::Result<PlannedInfo> Epoch(const EpochDescriptor& d) const;
  /// Rows by global id: one rows ticket per replica set holding some.
  arrow::Result<PlannedInfo> Rows(const RowsDescriptor& d) const;
  /// Every ready dataset, whole (ListFlights), by name.
  arrow::Result<std::vector<std::pair<std::string, PlannedInfo>>> List() const;
  /// The "slice_map" action's reply: where every row lives, and a read grant,
  /// of the copy at `generation` (a replaced one while kept, as Lookup).
  arrow::Result<SliceMapReply> SliceMap(const std::string& name,
                                        const std::vector<std::string>& columns,
                                        std::optional<uint64_t> generation = std::nullopt) const;

 private:
  // `columns`: the descriptor's projection (empty: every column).
  arrow::Result<PlannedInfo> RangeOf(const DatasetEntry& entry, uint64_t start, uint64_t stop,
                                     const std::vector<std::string>& columns = {},
                                     bool lengths = false) const;
  // The generation bound to one epoch of a job (binding the current copy
  // when unbound or freed); empty for a dataset the catalog lacks.
  std::optional<uint64_t> BoundGeneration(const std::string& dataset, uint64_t seed, uint64_t epoch,
                                          uint32_t world_size) const;

  const Catalog* const catalog_;
  const NodeRegistry* const registry_;
  const LoadingFn loading_;
  const std::string ticket_key_;
  const std::string default_dataset_;
  mutable EpochBindings epochs_;  // which generation each job's epoch reads
};

}  // namespace icefloe
