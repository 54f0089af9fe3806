// Per-job data stall, from the consumers' job.report actions.
//
// Each consumer (job, rank, worker) reports every few seconds how long its
// training loop waited for batches and how long the interval was. The table
// keeps each consumer's reports of the last `window_s` seconds and sums them
// per job: the stall share (time waited / time elapsed, over all consumers)
// and rows per second (each consumer's rows over its own elapsed time, summed:
// consumers read in parallel). It also keeps running totals for counters.
//
// Bounded: at most `max_jobs` jobs and `max_consumers_per_job` consumers per
// job (reports beyond are dropped and counted), `kMaxReportsPerConsumer`
// reports per consumer; a job not heard from for `idle_expire_s` is forgotten
// (its labels leave /metrics).
//
// Thread-safe. Time is passed in, so tests drive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "icefloe/common/mutex.h"
#include "icefloe/protocol/job_report.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {

struct JobOptions {
  size_t max_jobs = 64;
  size_t max_consumers_per_job = 4096;
  double window_s = 30;
  double idle_expire_s = 120;
};

/// One job as the head sees it now.
struct JobSummary {
  std::string job;
  std::set<std::string> datasets;
  std::set<std::string> nodes;
  size_t consumers = 0;    ///< consumers that reported within the window
  size_t ranks = 0;        ///< distinct ranks among them
  double stall_ratio = 0;  ///< waited / elapsed over the window, 0..1
  double rows_per_s = 0;
  double worst_rank_stall_ratio = 0;
  uint32_t worst_rank = 0;
  double last_report_age_s = 0;
  // Running totals since the job was first seen (for counters).
  uint64_t rows_total = 0;
  uint64_t batches_total = 0;
  double wait_s_total = 0;
  double elapsed_s_total = 0;

  JobStatus Status() const;
};

class JobTable {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxReportsPerConsumer = 64;

  explicit JobTable(JobOptions options = {}) : options_(options) {}

  /// Records a report; false (dropped) when it would exceed a bound.
  bool Report(const JobReport& report, Clock::time_point now) EXCLUDES(mu_);
  /// Every job heard from within idle_expire_s, by name; forgets the others.
  std::vector<JobSummary> Summaries(Clock::time_point now) EXCLUDES(mu_);

 private:
  struct Sample {
    Clock::time_point at;
    uint64_t rows;
    uint64_t wait_us;
    uint64_t elapsed_us;
  };
  struct Consumer {
    std::deque<Sample> samples;
    Clock::time_point last{};
  };
  struct Job {
    std::map<std::pair<uint32_t, uint32_t>, Consumer> consumers;  // (rank, worker)
    std::set<std::string> datasets;
    std::set<std::string> nodes;
    Clock::time_point last{};
    JobSummary totals;
  };

  const JobOptions options_;
  Mutex mu_;
  std::map<std::string, Job> jobs_ GUARDED_BY(mu_);
};

}  // namespace icefloe
