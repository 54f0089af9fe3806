#include "icefloe/common/kubeflow.h"

#include <cstdlib>
#include <set>

#include <gtest/gtest.h>

namespace icefloe {

TEST(KubeflowShardOf, CoversEveryRowOnceWithContractRanges) {
  for (uint64_t rows : {1ULL, 7ULL, 100ULL, 1001ULL}) {
    for (uint64_t total = 1; total <= 12; ++total) {
      uint64_t per = (rows + total - 1) / total;
      std::set<uint64_t> seen;
      for (uint64_t i = 0; i < total; ++i) {
        auto shard = KubeflowShardOf({std::to_string(i), std::to_string(total)}, rows);
        if (i * per >= rows) {
          ASSERT_TRUE(shard.status().IsIndexError());
          EXPECT_EQ(shard.status().message(), "Invalid partition range");
          continue;
        }
        ASSERT_TRUE(shard.ok()) << shard.status();
        EXPECT_EQ(shard->first, i * per);
        EXPECT_EQ(shard->last, std::min((i + 1) * per, rows) - 1);
        for (uint64_t r = shard->first; r <= shard->last; ++r) EXPECT_TRUE(seen.insert(r).second);
      }
      EXPECT_EQ(seen.size(), rows);
    }
  }
}

TEST(KubeflowShardOf, ErrorsAsTheContractWordsThem) {
  EXPECT_EQ(KubeflowShardOf({}, 10).status().message(), "Missing local_rank in path");
  EXPECT_EQ(KubeflowShardOf({"0"}, 10).status().message(), "Missing total in path");
  EXPECT_EQ(KubeflowShardOf({"x", "2"}, 10).status().message(), "Invalid local_rank value");
  EXPECT_EQ(KubeflowShardOf({"0", "-2"}, 10).status().message(), "Invalid total value");
  EXPECT_TRUE(KubeflowShardOf({"0", "0"}, 10).status().IsIndexError());
  EXPECT_TRUE(KubeflowShardOf({"3", "3"}, 10).status().IsIndexError());
  EXPECT_TRUE(KubeflowShardOf({"0", "1"}, 0).status().IsIndexError());
}

TEST(KubeflowEnv, WorkerLocationsFollowTheLwsNamingRule) {
  KubeflowEnv env;
  env.leader_address = "job-cache-0.job-cache.ns";
  env.group_size = 3;
  auto locs = *env.WorkerLocations(50051);
  EXPECT_EQ(locs, (std::vector<std::string>{"grpc://job-cache-0-1.job-cache.ns:50051",
                                            "grpc://job-cache-0-2.job-cache.ns:50051"}));
  EXPECT_EQ((*env.WorkerLocations(50051, /*tls=*/true))[1],
            "grpc+tls://job-cache-0-2.job-cache.ns:50051");
  env.schema_name = "db";
  env.table_name = "t";
  EXPECT_EQ(env.DatasetName(), "db.t");
}

TEST(KubeflowEnv, NamesTheMissingVariable) {
  ::unsetenv("METADATA_LOC");
  auto r = KubeflowEnv::FromEnvironment(true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("METADATA_LOC"), std::string::npos);
  EXPECT_TRUE(InvokedAs("/usr/local/bin/head", "head"));
  EXPECT_FALSE(InvokedAs("/usr/bin/icefloe-head", "head"));
}

TEST(KubeflowEnv, LocalModeUsesTheTwoLocalWorkers) {
  ::setenv("METADATA_LOC", "/tmp/t/metadata/v1.metadata.json", 1);
  ::unsetenv("LWS_LEADER_ADDRESS");
  ::unsetenv("LWS_GROUP_SIZE");
  ::unsetenv("RUNTIME_ENV");
  auto outside = KubeflowEnv::FromEnvironment(/*for_head=*/true);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("LWS_LEADER_ADDRESS"), std::string::npos);

  ::setenv("RUNTIME_ENV", "local", 1);
  auto env = KubeflowEnv::FromEnvironment(/*for_head=*/true);
  ::unsetenv("RUNTIME_ENV");
  ::unsetenv("METADATA_LOC");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->local);
  EXPECT_EQ(*env->WorkerLocations(50051),
            (std::vector<std::string>{"grpc://localhost:50052", "grpc://localhost:50053"}));
  EXPECT_EQ((*env->WorkerLocations(50051, /*tls=*/true))[0], "grpc+tls://localhost:50052");
}

}  // namespace icefloe
