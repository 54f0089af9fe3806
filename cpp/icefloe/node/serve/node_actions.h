// The node's DoAction: node actions from the head (node.status, node.load,
// node.load_status, node.commit, node.evict, node.record), each a typed
// message (protocol/messages.h), accepted only with the head's signature
// (HMAC with the cluster secret), or, without a secret, only from the
// trusted head host's addresses. Loads run in the LoadManager; the copies
// published, their records and the tier manifests stay the server's, reached
// through the callbacks in Parts.
//
// Thread-safe (each part is); every pointer in Parts outlives it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/flight/server.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/log_once.h"
#include "icefloe/common/memory.h"
#include "icefloe/node/copy/dataset.h"
#include "icefloe/node/copy/load_manager.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

class SharedExport;  // shared_export.h

/// `copy` laid out for same-host readers in sealed segments (ExportShared,
/// its batches on the disk tier named in their tier files), reusing the
/// segments of `reusable` its batches still view, new segments cut at `cuts`
/// (global rows, ascending). Logs `shared` (segments, bytes written and
/// reused) or `not shared` with why, and returns the copy to publish: the
/// shared one, or on failure the rows to serve privately. An error only when
/// not even those remain (ExportShared's null dataset). The caller hands the
/// copy over so that its heap rows can go as their segments are written.
arrow::Result<std::shared_ptr<const CachedDataset>> ShareCopy(
    std::shared_ptr<const CachedDataset> copy, const std::shared_ptr<MemoryBudget>& budget,
    std::vector<std::shared_ptr<const SharedExport>> reusable, const std::vector<uint64_t>& cuts);

class NodeActions {
 public:
  /// What the actions read and change.
  struct Parts {
    std::string ticket_key;                ///< checks the head's signature; empty: no secret
    std::string trusted_head_host;         ///< without a secret: the only caller accepted
    bool share_memory = false;             ///< a committed copy is laid out in a sealed memfd
    std::shared_ptr<MemoryBudget> budget;  ///< charged by a shared copy's file
    LoadManager* loads = nullptr;
    /// node.status's answer (NodeServer::Status).
    std::function<NodeStatus()> status;
    /// The copy published as a name; null when none.
    std::function<std::shared_ptr<const CachedDataset>(const std::string&)> find;
    /// The memory files of the copies published now that have one.
    std::function<std::vector<std::shared_ptr<const SharedExport>>()> shared_exports;
    /// Publishes (or replaces) a copy (NodeServer::Put).
    std::function<void(std::shared_ptr<const CachedDataset>)> put;
    /// Puts the second copy in the place of the first if that is still
    /// published under its name; false when it is not.
    std::function<bool(const std::shared_ptr<const CachedDataset>&,
                       std::shared_ptr<const CachedDataset>)>
        replace;
    /// Unpublishes the copy of a name (of a generation; 0: any) with its
    /// record; the copy dropped, null when none was.
    std::function<std::shared_ptr<const CachedDataset>(const std::string&, uint64_t)> drop;
    /// Keeps the head's record of the copy of a name and generation; false
    /// when that copy is not published.
    std::function<bool(const std::string&, uint64_t, nlohmann::json)> keep_record;
    /// Writes (or removes) the tier manifest of a name
    /// (NodeServer::SyncTierManifest).
    std::function<void(const std::string&)> sync_tier_manifest;
  };

  explicit NodeActions(Parts parts) : parts_(std::move(parts)) {}

  /// ListActions' answer: every action.
  static std::vector<arrow::flight::ActionType> Types();
  /// Runs `action`; NotImplemented for an unknown one. Errors are not yet
  /// wire statuses (DoAction makes them so).
  arrow::Status Run(const arrow::flight::ServerCallContext& context,
                    const arrow::flight::Action& action,
                    std::unique_ptr<arrow::flight::ResultStream>* result) const;

 private:
  arrow::Status Authorize(const arrow::flight::ServerCallContext& context, const std::string& type,
                          const std::string& body) const;
  arrow::Result<std::string> Load(const std::string& body) const;
  arrow::Result<std::string> LoadStatus(const std::string& body) const;
  arrow::Result<std::string> Commit(const std::string& body) const;
  arrow::Result<std::string> Evict(const std::string& body) const;
  arrow::Result<std::string> Record(const std::string& body) const;

  const Parts parts_;
  mutable LogOnce refusals_;  // refused node actions already logged, per caller
};

}  // namespace icefloe
