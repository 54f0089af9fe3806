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
  // The interval the report covers ends when it arrived, or, where it would
  // overlap the previous report of its dataset, begins where that one ends.
  const auto elapsed =
      std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(report.elapsed_us));
  auto [last_end, first] = consumer->second.ends.try_emplace(source, now);
  const Clock::time_point end = first ? now : std::max(now, last_end->second + elapsed);
  last_end->second = end;
  const uint64_t covered_before = CoveredUs(samples);
  samples.push_back(
      {now, report.rows, report.wait_us, report.elapsed_us, source, end - elapsed, end});
  const uint64_t covered_us = CoveredUs(samples) - covered_before;  // what it adds
  if (samples.size() > kMaxReportsPerConsumer) samples.pop_front();
  consumer->second.last = now;
  job.last = now;
  for (const auto& n : report.nodes) AddBounded(&job.nodes, n);
  job.totals.rows_total += report.rows;
  job.totals.batches_total += report.batches;
  job.totals.wait_s_total += static_cast<double>(report.wait_us) / 1e6;
  job.totals.elapsed_s_total += static_cast<double>(covered_us) / 1e6;
  return true;
}

uint64_t JobTable::CoveredUs(const std::deque<Sample>& samples) {
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  spans.reserve(samples.size());
  for (const auto& x : samples) spans.emplace_back(x.begin, x.end);
  std::sort(spans.begin(), spans.end());
  Clock::duration covered{0};
  Clock::time_point reached = Clock::time_point::min();
  for (const auto& [begin, end] : spans) {
    const auto from = std::max(begin, reached);
    if (end > from) covered += end - from;
    reached = std::max(reached, end);
  }
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(covered).count());
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
      uint64_t rows = 0, c_wait = 0;
      // At least 1 us: the head refuses reports of no time.
      const uint64_t c_elapsed = std::max<uint64_t>(CoveredUs(samples), 1);
      std::map<const JobSource*, std::pair<uint64_t, uint64_t>> by_source;  // (rows, elapsed)
      for (const auto& x : samples) {
        rows += x.rows;
        c_wait += x.wait_us;
        if (x.source == nullptr) continue;
        by_source[x.source].first += x.rows;
        by_source[x.source].second += x.elapsed_us;
      }
      // The waits are disjoint and each lies in its report's interval, so
      // they fit in the union but for when the head stamps reports (on
      // arrival): no more than the time they fit in is counted.
      c_wait = std::min(c_wait, c_elapsed);
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
