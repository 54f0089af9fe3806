#include "icefloe/head/core/jobs.h"

#include <algorithm>

namespace icefloe {

using json = nlohmann::json;

namespace {

// Distinct datasets and nodes kept per job (a report names at most 64 nodes).
constexpr size_t kMaxNamesPerJob = 256;

double SecondsBetween(JobTable::Clock::time_point a, JobTable::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void AddBounded(std::set<std::string>* names, const std::string& name) {
  if (!name.empty() && names->size() < kMaxNamesPerJob) names->insert(name);
}

}  // namespace

bool JobTable::Report(const JobReport& report, Clock::time_point now) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(report.job);
  if (it == jobs_.end()) {
    if (jobs_.size() >= options_.max_jobs) return false;
    it = jobs_.emplace(report.job, Job{}).first;
    it->second.totals.job = report.job;
  }
  Job& job = it->second;
  const std::pair<uint32_t, uint32_t> key{report.rank, report.worker};
  auto consumer = job.consumers.find(key);
  if (consumer == job.consumers.end()) {
    if (job.consumers.size() >= options_.max_consumers_per_job) return false;
    consumer = job.consumers.emplace(key, Consumer{}).first;
  }
  AddBounded(&job.datasets, report.dataset);
  JobSource* source = nullptr;
  if (job.datasets.count(report.dataset) != 0) {  // the same bound as datasets
    source = &job.sources[report.dataset];
    source->dataset = report.dataset;
    source->rows_total += report.rows;
    source->batches_total += report.batches;
  }
  auto& samples = consumer->second.samples;
  samples.push_back({now, report.rows, report.wait_us, report.elapsed_us, source});
  if (samples.size() > kMaxReportsPerConsumer) samples.pop_front();
  consumer->second.last = now;
  job.last = now;
  for (const auto& n : report.nodes) AddBounded(&job.nodes, n);
  job.totals.rows_total += report.rows;
  job.totals.batches_total += report.batches;
  job.totals.wait_s_total += static_cast<double>(report.wait_us) / 1e6;
  job.totals.elapsed_s_total += static_cast<double>(report.elapsed_us) / 1e6;
  return true;
}

std::vector<JobStatus> JobTable::Summaries(Clock::time_point now) {
  MutexLock lock(&mu_);
  // The caller reads the clock before the lock, so a report taken in between
  // is stamped after `now`. The snapshot is as of the later of the two: such a
  // report is part of it, with age 0, and no age comes out negative.
  for (const auto& [name, job] : jobs_) now = std::max(now, job.last);
  std::vector<JobStatus> out;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    if (SecondsBetween(job.last, now) > options_.idle_expire_s) {
      it = jobs_.erase(it);
      continue;
    }
    JobStatus s = job.totals;
    s.datasets.assign(job.datasets.begin(), job.datasets.end());
    s.nodes.assign(job.nodes.begin(), job.nodes.end());
    s.last_report_age_s = SecondsBetween(job.last, now);
    uint64_t wait_us = 0, elapsed_us = 0;
    std::set<uint32_t> ranks;
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> by_rank;  // rank -> (wait, elapsed)
    std::map<const JobSource*, double> source_rates;            // rows per second
    for (auto& [key, consumer] : job.consumers) {
      auto& samples = consumer.samples;
      while (!samples.empty() && SecondsBetween(samples.front().at, now) > options_.window_s) {
        samples.pop_front();
      }
      if (samples.empty()) continue;
      uint64_t rows = 0, c_wait = 0, c_elapsed = 0;
      std::map<const JobSource*, std::pair<uint64_t, uint64_t>> by_source;  // (rows, elapsed)
      for (const auto& x : samples) {
        rows += x.rows;
        c_wait += x.wait_us;
        c_elapsed += x.elapsed_us;
        if (x.source == nullptr) continue;
        by_source[x.source].first += x.rows;
        by_source[x.source].second += x.elapsed_us;
      }
      // Each source's rows over the time its own reports cover, as the job's.
      for (const auto& [source, re] : by_source) {
        if (re.second == 0) continue;
        source_rates[source] +=
            static_cast<double>(re.first) / (static_cast<double>(re.second) / 1e6);
      }
      ++s.consumers;
      ranks.insert(key.first);
      wait_us += c_wait;
      elapsed_us += c_elapsed;
      by_rank[key.first].first += c_wait;
      by_rank[key.first].second += c_elapsed;
      s.rows_per_s += static_cast<double>(rows) / (static_cast<double>(c_elapsed) / 1e6);
    }
    s.ranks = static_cast<int64_t>(ranks.size());
    for (const auto& [dataset, totals] : job.sources) {
      s.sources.push_back(totals);
      s.sources.back().rows_per_s = source_rates[&totals];
    }
    if (elapsed_us > 0) {
      s.stall_ratio = static_cast<double>(wait_us) / static_cast<double>(elapsed_us);
    }
    for (const auto& [rank, we] : by_rank) {
      const double r = static_cast<double>(we.first) / static_cast<double>(we.second);
      if (r > s.worst_rank_stall_ratio) {
        s.worst_rank_stall_ratio = r;
        s.worst_rank = rank;
      }
    }
    out.push_back(std::move(s));
    ++it;
  }
  return out;
}

}  // namespace icefloe
