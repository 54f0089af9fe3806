// Action "job.report": one consumer's reading over the last few seconds, sent
// by the Python client in the background (docs/protocol.md, docs/metrics).
//
// A consumer measures how long its training loop waited for each batch
// (`wait_us`) against the time the interval covered (`elapsed_us`, waiting
// plus the loop's own work); the head sums these per job into the stall
// share and rows per second it exports (head/core/jobs.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/protocol/fields.h"

namespace icefloe {

/// Most node locations one report names.
inline constexpr size_t kMaxReportNodes = 64;

struct JobReport {
  std::string job;      ///< letters, digits and - _ . / :; 1..128 bytes
  std::string dataset;  ///< what it reads (may be empty)
  uint32_t rank = 0;
  uint32_t worker = 0;
  uint32_t world_size = 1;
  uint64_t batches = 0;            ///< batches the loop received in the interval
  uint64_t rows = 0;               ///< their rows
  uint64_t wait_us = 0;            ///< time the loop waited for them
  uint64_t elapsed_us = 0;         ///< time the interval covers (>= wait_us)
  std::vector<std::string> nodes;  ///< the node locations it reads from

  nlohmann::json ToJson() const;
  static arrow::Result<JobReport> Parse(std::string_view body);
  static MessageSpec Spec();
};

}  // namespace icefloe
