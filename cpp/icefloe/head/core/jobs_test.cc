#include "icefloe/head/core/jobs.h"

#include <gtest/gtest.h>

namespace icefloe {
namespace {

using Clock = JobTable::Clock;

JobReport Report(std::string job, uint32_t rank, uint64_t rows, uint64_t wait_us,
                 uint64_t elapsed_us) {
  JobReport r;
  r.job = std::move(job);
  r.rank = rank;
  r.world_size = 8;
  r.batches = rows / 10;
  r.rows = rows;
  r.wait_us = wait_us;
  r.elapsed_us = elapsed_us;
  r.dataset = "d";
  r.nodes = {"grpc://n1:1"};
  return r;
}

TEST(JobTableTest, SumsStallAndRowsPerSecondPerJob) {
  JobTable table;
  const auto t0 = Clock::now();
  // Rank 0 waits 0.5 of 2 s, rank 1 waits 1.5 of 2 s: the job waits 2 of 4 s.
  ASSERT_TRUE(table.Report(Report("train", 0, 1000, 500'000, 2'000'000), t0));
  ASSERT_TRUE(table.Report(Report("train", 1, 3000, 1'500'000, 2'000'000), t0));
  ASSERT_TRUE(table.Report(Report("eval", 0, 10, 0, 1'000'000), t0));
  auto jobs = table.Summaries(t0 + std::chrono::seconds(1));
  ASSERT_EQ(jobs.size(), 2u);
  const JobStatus& eval = jobs[0];
  const JobStatus& train = jobs[1];
  EXPECT_EQ(train.job, "train");
  EXPECT_EQ(train.consumers, 2);
  EXPECT_EQ(train.ranks, 2);
  EXPECT_DOUBLE_EQ(train.stall_ratio, 0.5);
  EXPECT_DOUBLE_EQ(train.rows_per_s, 500.0 + 1500.0);  // each over its own 2 s
  EXPECT_EQ(train.worst_rank, 1);
  EXPECT_DOUBLE_EQ(train.worst_rank_stall_ratio, 0.75);
  EXPECT_EQ(train.rows_total, 4000u);
  EXPECT_EQ(train.nodes, std::vector<std::string>{"grpc://n1:1"});
  EXPECT_DOUBLE_EQ(eval.stall_ratio, 0.0);
  EXPECT_DOUBLE_EQ(eval.rows_per_s, 10.0);
}

TEST(JobTableTest, SourcesSplitAMixtureConsumerByDataset) {
  JobTable table;
  const auto t0 = Clock::now();
  // One consumer reads two sources of a mixture, 3 rows of "web" to 1 of
  // "code", each over the same 2 s.
  JobReport web = Report("mix", 0, 300, 0, 2'000'000);
  web.dataset = "web";
  JobReport code = Report("mix", 0, 100, 0, 2'000'000);
  code.dataset = "code";
  ASSERT_TRUE(table.Report(web, t0));
  ASSERT_TRUE(table.Report(code, t0));
  auto jobs = table.Summaries(t0);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].consumers, 1);
  EXPECT_EQ(jobs[0].rows_total, 400u);
  ASSERT_EQ(jobs[0].sources.size(), 2u);
  EXPECT_EQ(jobs[0].sources[0], (JobSource{"code", 100, 10, 50.0}));
  EXPECT_EQ(jobs[0].sources[1], (JobSource{"web", 300, 30, 150.0}));
}

// A mixture's consumer reads its sources side by side: each source's meter
// covers the whole of every step, so their reports overlap in time. The job's
// time is the union of its consumer's reports, not their sum (issue 46: the
// sum showed a mixture of N sources at 1/N of its rows per second and stall).
TEST(JobTableTest, AMixtureConsumersSourcesShareItsTime) {
  JobTable table;
  const auto t0 = Clock::now();
  const auto s = [](int n) { return std::chrono::seconds(n); };
  for (int i = 1; i <= 2; ++i) {  // two intervals of 2 s, both sources each
    JobReport web = Report("mix", 0, 300, 400'000, 2'000'000);
    web.dataset = "web";
    JobReport code = Report("mix", 0, 100, 600'000, 2'000'000);
    code.dataset = "code";
    ASSERT_TRUE(table.Report(web, t0 + s(2 * i)));
    ASSERT_TRUE(table.Report(code, t0 + s(2 * i) + std::chrono::milliseconds(1)));
  }
  auto jobs = table.Summaries(t0 + s(5));
  ASSERT_EQ(jobs.size(), 1u);
  const JobStatus& mix = jobs[0];
  // 800 rows in 4 s (and 1 ms), 2 s waited: the sum said 100 rows/s, 0.25.
  EXPECT_NEAR(mix.rows_per_s, 200.0, 0.1);
  EXPECT_NEAR(mix.stall_ratio, 0.5, 1e-3);
  EXPECT_NEAR(mix.worst_rank_stall_ratio, 0.5, 1e-3);
  EXPECT_NEAR(mix.elapsed_s_total, 4.0, 1e-2);  // the counters as well
  EXPECT_DOUBLE_EQ(mix.wait_s_total, 2.0);
  ASSERT_EQ(mix.sources.size(), 2u);  // each source over its own time, as before
  EXPECT_DOUBLE_EQ(mix.sources[0].rows_per_s, 50.0);
  EXPECT_DOUBLE_EQ(mix.sources[1].rows_per_s, 150.0);
}

// One consumer reading datasets one after the other (a job's train, then its
// eval), or its reports reaching the head in a burst: the times add up.
TEST(JobTableTest, OneConsumersReportsInTurnAddUp) {
  JobTable table;
  const auto t0 = Clock::now();
  JobReport train = Report("seq", 0, 400, 0, 2'000'000);
  train.dataset = "train";
  JobReport eval = Report("seq", 0, 200, 0, 1'000'000);
  eval.dataset = "eval";
  ASSERT_TRUE(table.Report(train, t0 + std::chrono::seconds(2)));
  ASSERT_TRUE(table.Report(eval, t0 + std::chrono::seconds(3)));
  // Three reports of 1 s each, queued by the client and stamped together.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        table.Report(Report("burst", 0, 100, 500'000, 1'000'000), t0 + std::chrono::seconds(3)));
  }
  auto jobs = table.Summaries(t0 + std::chrono::seconds(3));
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_DOUBLE_EQ(jobs[0].rows_per_s, 100.0);  // burst: 300 rows in 3 s
  EXPECT_DOUBLE_EQ(jobs[0].stall_ratio, 0.5);
  EXPECT_DOUBLE_EQ(jobs[0].elapsed_s_total, 3.0);
  EXPECT_DOUBLE_EQ(jobs[1].rows_per_s, 200.0);  // seq: 600 rows in 3 s
  EXPECT_DOUBLE_EQ(jobs[1].elapsed_s_total, 3.0);
}

TEST(JobTableTest, WindowForgetsOldReportsButTotalsStay) {
  JobOptions options;
  options.window_s = 10;
  options.idle_expire_s = 60;
  JobTable table(options);
  const auto t0 = Clock::now();
  ASSERT_TRUE(table.Report(Report("j", 0, 100, 1'000'000, 1'000'000), t0));
  ASSERT_TRUE(table.Report(Report("j", 0, 100, 0, 1'000'000), t0 + std::chrono::seconds(20)));
  auto jobs = table.Summaries(t0 + std::chrono::seconds(21));
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(jobs[0].stall_ratio, 0.0);  // the fully stalled report left the window
  EXPECT_EQ(jobs[0].rows_total, 200u);
  EXPECT_DOUBLE_EQ(jobs[0].wait_s_total, 1.0);
  // Idle past idle_expire_s: forgotten.
  EXPECT_TRUE(table.Summaries(t0 + std::chrono::seconds(81)).empty());
}

// The head reads the clock before taking the table's lock, so a report can be
// stamped after the snapshot's `now` (CI saw -7e-08 s, which the status reply's
// own check refused). Such a report belongs to the snapshot with age 0.
TEST(JobTableTest, AReportStampedAfterTheSnapshotHasAgeZero) {
  JobTable table;
  const auto t0 = Clock::now();
  ASSERT_TRUE(table.Report(Report("j", 0, 100, 0, 1'000'000), t0 + std::chrono::microseconds(1)));
  auto jobs = table.Summaries(t0);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].last_report_age_s, 0.0);
  EXPECT_EQ(jobs[0].consumers, 1);  // its sample counts in the window
}

TEST(JobTableTest, BoundsJobsAndConsumers) {
  JobOptions options;
  options.max_jobs = 2;
  options.max_consumers_per_job = 3;
  JobTable table(options);
  const auto t0 = Clock::now();
  EXPECT_TRUE(table.Report(Report("a", 0, 1, 0, 1), t0));
  EXPECT_TRUE(table.Report(Report("b", 0, 1, 0, 1), t0));
  EXPECT_FALSE(table.Report(Report("c", 0, 1, 0, 1), t0));  // a third job
  for (uint32_t r = 1; r < 3; ++r) EXPECT_TRUE(table.Report(Report("a", r, 1, 0, 1), t0));
  EXPECT_FALSE(table.Report(Report("a", 5, 1, 0, 1), t0));  // a fourth consumer
  EXPECT_TRUE(table.Report(Report("a", 0, 1, 0, 1), t0));   // a known one still counts
  for (int i = 0; i < 200; ++i) table.Report(Report("b", 0, 1, 0, 1), t0);
  auto jobs = table.Summaries(t0);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].rows_total, 201u);  // totals count every report; the window keeps 64
}

TEST(JobReportTest, ParseChecksFields) {
  auto ok = JobReport::Parse(
      R"({"job":"kf/train-1","rank":1,"world_size":2,"rows":5,"wait_us":1,"elapsed_us":2})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->job, "kf/train-1");
  auto bad_job = JobReport::Parse(R"({"job":"a b","elapsed_us":2})");
  EXPECT_TRUE(bad_job.status().IsInvalid());
  EXPECT_NE(bad_job.status().message().find("'job'"), std::string::npos);
  auto wait = JobReport::Parse(R"({"job":"a","wait_us":3,"elapsed_us":2})");
  EXPECT_NE(wait.status().message().find("'wait_us'"), std::string::npos);
  auto rank = JobReport::Parse(R"({"job":"a","rank":2,"world_size":2,"elapsed_us":2})");
  EXPECT_NE(rank.status().message().find("'rank'"), std::string::npos);
  auto zero = JobReport::Parse(R"({"job":"a","elapsed_us":0})");
  EXPECT_NE(zero.status().message().find("'elapsed_us'"), std::string::npos);
}

}  // namespace
}  // namespace icefloe
