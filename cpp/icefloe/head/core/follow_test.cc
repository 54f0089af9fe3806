#include "icefloe/head/core/follow.h"

#include <chrono>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

namespace icefloe {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<const DatasetEntry> Entry(const LoadRequest& request,
                                          std::optional<int64_t> snapshot_id,
                                          CopyState state = CopyState::kReady) {
  auto e = std::make_shared<DatasetEntry>();
  e->name = request.name;
  e->request = request;
  e->snapshot_id = snapshot_id;
  e->state = state;
  return e;
}

LoadRequest Request(std::string name) {
  LoadRequest r;
  r.name = std::move(name);
  r.source = "/tables/" + r.name;
  return r;
}

// A real Catalog and Follower; the table (what the probe reads) and the head's
// loads are in-process fakes that tests drive.
class FollowTest : public ::testing::Test {
 protected:
  explicit FollowTest(double period_s = 0) : period_s_(period_s) {}

  Follower& follower() {
    if (!follower_) {
      FollowOptions options;
      options.period_s = period_s_;
      follower_ = std::make_unique<Follower>(
          options, &catalog_,
          [this](const LoadRequest&) -> arrow::Result<TableHead> {
            MutexLock lock(&mu_);
            ++probes_;
            if (!probe_error_.ok()) return probe_error_;
            return table_;
          },
          [this](const LoadRequest& r) -> arrow::Result<std::shared_ptr<LoadJob>> {
            MutexLock lock(&mu_);
            loads_.push_back(r);
            if (!load_error_.ok()) return load_error_;
            job_ = std::make_shared<LoadJob>(r);
            return job_;
          },
          [this](const std::string&) {
            MutexLock lock(&mu_);
            return loading_;
          });
    }
    return *follower_;
  }

  void Commit(int64_t snapshot_id, int64_t timestamp_ms) {
    MutexLock lock(&mu_);
    table_.snapshot_id = snapshot_id;
    table_.timestamp_ms = timestamp_ms;
    table_.metadata_location = "/tables/t/metadata/v" + std::to_string(snapshot_id) + ".json";
  }
  // The running refresh publishes the table's snapshot (or fails).
  void FinishLoad(arrow::Status status = arrow::Status::OK()) {
    std::shared_ptr<LoadJob> job;
    std::optional<int64_t> snapshot;
    {
      MutexLock lock(&mu_);
      job = job_;
      snapshot = table_.snapshot_id;
    }
    ASSERT_NE(job, nullptr);
    std::shared_ptr<const DatasetEntry> entry;
    if (status.ok()) {
      entry = Entry(job->request(), snapshot);
      catalog_.Put(entry);
    }
    job->Finish(status, entry);
  }
  int probes() {
    MutexLock lock(&mu_);
    return probes_;
  }
  size_t loads() {
    MutexLock lock(&mu_);
    return loads_.size();
  }
  FollowRecord Record(const std::string& name) {
    for (const auto& r : follower().Records()) {
      if (r.name == name) return r;
    }
    ADD_FAILURE() << "no record of " << name;
    return {};
  }

  const double period_s_;
  Catalog catalog_;
  Mutex mu_;
  TableHead table_ GUARDED_BY(mu_);
  arrow::Status probe_error_ GUARDED_BY(mu_);
  arrow::Status load_error_ GUARDED_BY(mu_);
  bool loading_ GUARDED_BY(mu_) = false;
  int probes_ GUARDED_BY(mu_) = 0;
  std::vector<LoadRequest> loads_ GUARDED_BY(mu_);
  std::shared_ptr<LoadJob> job_ GUARDED_BY(mu_);
  std::unique_ptr<Follower> follower_;
};

TEST_F(FollowTest, RefreshesOnceWhenTheTableMovesWithTheSameRequest) {
  const LoadRequest request = Request("t");
  catalog_.Put(Entry(request, 1));
  Commit(1, NowMs());
  follower().RunOnce();
  EXPECT_EQ(probes(), 1);
  EXPECT_EQ(loads(), 0u);  // same snapshot: nothing to do

  const int64_t committed_ms = NowMs() - 5000;  // committed 5 s ago
  Commit(2, committed_ms);
  follower().RunOnce();
  ASSERT_EQ(loads(), 1u);
  {
    MutexLock lock(&mu_);
    EXPECT_EQ(loads_[0], request);  // the same request: it plans the newest snapshot
  }
  EXPECT_EQ(Record("t").state, "refreshing");

  // While it runs, nothing more is read or loaded.
  follower().RunOnce();
  EXPECT_EQ(probes(), 2);
  EXPECT_EQ(loads(), 1u);

  FinishLoad();
  follower().RunOnce();
  FollowRecord r = Record("t");
  EXPECT_EQ(r.state, "following");
  EXPECT_EQ(r.refreshes, 1);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.refreshed_to, 2);
  EXPECT_EQ(r.cached_snapshot_id, 2);
  ASSERT_TRUE(r.lag_s.has_value());
  EXPECT_GE(*r.lag_s, 5.0);
  EXPECT_LT(*r.lag_s, 60.0);
  EXPECT_GT(r.last_refresh_unix_s, 0);

  // The next check sees the cached snapshot is the table's: no second refresh.
  follower().RunOnce();
  EXPECT_EQ(loads(), 1u);
  EXPECT_EQ(Record("t").refreshes, 1);
  EXPECT_EQ(Record("t").table_snapshot_id, 2);
}

TEST_F(FollowTest, PinnedLoadsAreNeverRead) {
  LoadRequest by_id = Request("by_id");
  by_id.snapshot_id = 1;
  LoadRequest as_of = Request("as_of");
  as_of.as_of_ms = 1000;
  catalog_.Put(Entry(by_id, 1));
  catalog_.Put(Entry(as_of, 1));
  Commit(2, NowMs());
  follower().RunOnce();
  follower().RunOnce();
  EXPECT_EQ(probes(), 0);
  EXPECT_EQ(loads(), 0u);
  EXPECT_FALSE(Record("by_id").followed);
  EXPECT_EQ(Record("by_id").state, "not followed");
  EXPECT_NE(Record("by_id").why_not.find("snapshot 1"), std::string::npos);
  EXPECT_NE(Record("as_of").why_not.find("as of"), std::string::npos);
}

TEST_F(FollowTest, AFixedMetadataFileIsReadOnceAndThenLeftAlone) {
  catalog_.Put(Entry(Request("t"), 1));
  {
    MutexLock lock(&mu_);
    table_.fixed = true;
    table_.why_fixed = "the source is a metadata.json file";
  }
  follower().RunOnce();
  follower().RunOnce();
  follower().RunOnce();
  EXPECT_EQ(probes(), 1);
  EXPECT_EQ(loads(), 0u);
  EXPECT_FALSE(Record("t").followed);
  EXPECT_EQ(Record("t").why_not, "the source is a metadata.json file");
}

TEST_F(FollowTest, SkipsDatasetsLoadingOrNotReady) {
  catalog_.Put(Entry(Request("t"), 1, CopyState::kLoading));
  catalog_.Put(Entry(Request("u"), 1, CopyState::kDegraded));
  Commit(2, NowMs());
  follower().RunOnce();
  EXPECT_EQ(probes(), 0);
  catalog_.Put(Entry(Request("t"), 1));
  {
    MutexLock lock(&mu_);
    loading_ = true;  // someone else's load of it runs
  }
  follower().RunOnce();
  EXPECT_EQ(probes(), 0);
  {
    MutexLock lock(&mu_);
    loading_ = false;
  }
  follower().RunOnce();
  EXPECT_EQ(probes(), 1);
  EXPECT_EQ(loads(), 1u);
}

TEST_F(FollowTest, ErrorsAreCountedAndShownAndTheNextCheckGoesOn) {
  catalog_.Put(Entry(Request("t"), 1));
  {
    MutexLock lock(&mu_);
    probe_error_ = arrow::Status::IOError("no Iceberg table at /tables/t");
  }
  follower().RunOnce();
  follower().RunOnce();
  FollowRecord r = Record("t");
  EXPECT_EQ(r.errors, 2);  // one per check
  EXPECT_EQ(r.checks, 0);
  EXPECT_NE(r.last_error.find("no Iceberg table"), std::string::npos);
  EXPECT_EQ(r.state, "following");
  EXPECT_EQ(r.cached_snapshot_id, 1);

  // The table is back with a new snapshot, but the load is refused at once.
  {
    MutexLock lock(&mu_);
    probe_error_ = arrow::Status::OK();
    load_error_ = arrow::Status::CapacityError("load queue full");
  }
  Commit(2, NowMs());
  follower().RunOnce();
  r = Record("t");
  EXPECT_EQ(r.errors, 3);
  EXPECT_NE(r.last_error.find("load queue full"), std::string::npos);
  EXPECT_EQ(r.state, "following");

  // The load starts but fails: counted when it ends; tried again next check.
  {
    MutexLock lock(&mu_);
    load_error_ = arrow::Status::OK();
  }
  follower().RunOnce();
  EXPECT_EQ(loads(), 2u);
  FinishLoad(arrow::Status::IOError("node gone"));
  follower().RunOnce();
  r = Record("t");
  EXPECT_EQ(r.errors, 4);
  EXPECT_EQ(r.refreshes, 0);
  EXPECT_NE(r.last_error.find("node gone"), std::string::npos);
  follower().RunOnce();
  EXPECT_EQ(loads(), 3u);
  FinishLoad();
  follower().RunOnce();
  EXPECT_EQ(Record("t").refreshes, 1);
}

TEST_F(FollowTest, EvictedDatasetsLeaveAndReloadsWithOtherArgumentsStartOver) {
  catalog_.Put(Entry(Request("t"), 1));
  Commit(1, NowMs());
  follower().RunOnce();
  EXPECT_EQ(Record("t").checks, 1);
  catalog_.Remove("t");
  follower().RunOnce();
  EXPECT_TRUE(follower().Records().empty());

  LoadRequest pinned = Request("t");
  pinned.snapshot_id = 1;
  catalog_.Put(Entry(Request("t"), 1));
  follower().RunOnce();
  EXPECT_TRUE(Record("t").followed);
  catalog_.Put(Entry(pinned, 1));
  follower().RunOnce();
  EXPECT_FALSE(Record("t").followed);
  EXPECT_EQ(Record("t").checks, 0);
}

class FollowPeriodTest : public FollowTest {
 protected:
  FollowPeriodTest() : FollowTest(3600) {}
};

TEST_F(FollowPeriodTest, OneCheckPerDatasetPerPeriod) {
  catalog_.Put(Entry(Request("t"), 1));
  {
    MutexLock lock(&mu_);
    probe_error_ = arrow::Status::IOError("unreadable");
  }
  for (int i = 0; i < 5; ++i) follower().RunOnce();
  EXPECT_EQ(probes(), 1);
  EXPECT_EQ(Record("t").errors, 1);
}

class FollowThreadTest : public FollowTest {
 protected:
  FollowThreadTest() : FollowTest(0.01) {}
};

TEST_F(FollowThreadTest, TheThreadChecksEveryPeriodAndStops) {
  catalog_.Put(Entry(Request("t"), 1));
  Commit(1, NowMs());
  follower().Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (probes() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  follower().Stop();
  const int seen = probes();
  EXPECT_GE(seen, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(probes(), seen);  // stopped
  auto status = follower().Status();
  EXPECT_EQ(status.period_s, 0.01);
  ASSERT_EQ(status.datasets.size(), 1u);
  EXPECT_EQ(status.datasets[0].snapshot_id, 1);
}

TEST_F(FollowThreadTest, TheThreadRefreshesAndSeesTheRefreshEnd) {
  catalog_.Put(Entry(Request("t"), 1));
  Commit(2, NowMs() - 1000);
  follower().Start();
  auto wait = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  };
  ASSERT_TRUE(wait([this] { return loads() == 1; }));
  FinishLoad();  // publishes snapshot 2 while the thread runs
  ASSERT_TRUE(wait([this] { return Record("t").refreshes == 1; }));
  const int probes_then = probes();
  ASSERT_TRUE(wait([&] { return probes() >= probes_then + 2; }));
  follower().Stop();
  EXPECT_EQ(loads(), 1u);  // the checks after it found the table's snapshot cached
  EXPECT_EQ(Record("t").cached_snapshot_id, 2);
  EXPECT_GE(*Record("t").lag_s, 1.0);
}

}  // namespace
}  // namespace icefloe
