// Where a load's task streams its rows on a node with a disk tier.
//
// Each batch of the task stays in memory while the node's rule says there is
// room for it (KeepRule: the budget keeps its serving quarter, the
// read-ahead's working set and two reads at their peak free besides the
// reads in flight); from the first batch that does not fit, the rest of the
// task goes to one tier file, written batch by batch as it comes, so a task
// of any size passes through memory one batch at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "icefloe/loader/task_loader.h"
#include "icefloe/node/tier/tier_file.h"

namespace icefloe {

class TierSink : public TaskSink {
 public:
  /// Whether a batch of `bytes` (already allocated) may stay in memory.
  using KeepRule = std::function<bool(int64_t bytes)>;
  /// A new tier file for the task's rows, of `schema`.
  using OpenFile = std::function<arrow::Result<std::unique_ptr<TierFileWriter>>(
      const std::shared_ptr<arrow::Schema>& schema)>;
  /// Takes the task's finished tier file, to keep it alive with the load.
  using Hold = std::function<void(std::shared_ptr<TierFile> file)>;

  TierSink(KeepRule keep, OpenFile open, Hold hold)
      : keep_(std::move(keep)), open_(std::move(open)), hold_(std::move(hold)) {}

  arrow::Status Add(std::shared_ptr<arrow::RecordBatch> batch) override;
  /// The task's batches in row order: those kept in memory, then the tier
  /// file's (views of its mapping).
  arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Finish() override;

 private:
  KeepRule keep_;
  OpenFile open_;
  Hold hold_;
  std::vector<std::shared_ptr<arrow::RecordBatch>> in_memory_;
  std::unique_ptr<TierFileWriter> file_;  // once the task spills
};

}  // namespace icefloe
