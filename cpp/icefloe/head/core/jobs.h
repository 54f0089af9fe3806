// Per-job data stall, from the consumers' job.report actions.
//
// Each consumer (job, rank, worker) reports every few seconds how long its
// training loop waited for batches and how long the interval was. The table
// keeps each consumer's reports of the last `window_s` seconds and sums them
// per job: the stall share (time waited / time elapsed, over all consumers)
// and rows per second (each consumer's rows over its own elapsed time, summed:
// consumers read in parallel). It also keeps running totals for counters.
// The same sums per dataset the reports name make the job's `sources` (a
// mixture's consumer reports each of its sources under the job).
//
// A consumer's elapsed time is the union of its reports' intervals, not their
// sum: a mixture's consumer reads its sources side by side, and each source's
// report covers the whole of the steps it spans, so N sources' intervals
// overlap N-fold. A report covers the `elapsed_us` before the head received
// it, laid after the previous report of the same dataset where the two would
// overlap (one dataset's reports are consecutive, however late they arrive);
// datasets read one after the other (train, then eval) so still add up. The
// waits add up: a consumer waits on one source at a time.
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

class JobTable {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxReportsPerConsumer = 64;

  explicit JobTable(JobOptions options = {}) : options_(options) {}

  /// Records a report; false (dropped) when it would exceed a bound.
  bool Report(const JobReport& report, Clock::time_point now) EXCLUDES(mu_);
  /// Every job heard from within idle_expire_s, by name, as the head sees
  /// it now (status's `jobs`; its totals, since the job was first seen, feed
  /// the counters); forgets the others.
  std::vector<JobStatus> Summaries(Clock::time_point now) EXCLUDES(mu_);

 private:
  struct Sample {
    Clock::time_point at;
    uint64_t rows;
    uint64_t wait_us;
    uint64_t elapsed_us;
    const JobSource* source;       // in its job's `sources`; null: not kept
    Clock::time_point begin, end;  // the interval it covers (see above)
  };
  struct Consumer {
    std::deque<Sample> samples;
    Clock::time_point last{};
    std::map<const JobSource*, Clock::time_point> ends;  // each source's last interval's end
  };
  /// The time the union of `samples`' intervals covers, in microseconds.
  static uint64_t CoveredUs(const std::deque<Sample>& samples);
  struct Job {
    std::map<std::pair<uint32_t, uint32_t>, Consumer> consumers;  // (rank, worker)
    std::set<std::string> datasets;
    std::map<std::string, JobSource> sources;  // the datasets' totals
    std::set<std::string> nodes;
    Clock::time_point last{};
    JobStatus totals;  // the name and running totals
  };

  const JobOptions options_;
  Mutex mu_;
  std::map<std::string, Job> jobs_ GUARDED_BY(mu_);
};

}  // namespace icefloe
