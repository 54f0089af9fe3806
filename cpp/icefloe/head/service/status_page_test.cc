#include "icefloe/head/service/status_page.h"

#include <gtest/gtest.h>

namespace icefloe {
namespace {

using json = nlohmann::json;

TEST(StatusPageTest, ShowsEverySectionAndEscapesNames) {
  json status = {
      {"ready", true},
      {"reason", "ready"},
      {"datasets",
       {{{"name", "clicks<script>"},
         {"state", "degraded"},
         {"rows", 1234567},
         {"bytes", 3 * 1024 * 1024},
         {"slices_per_node",
          {{{"node", "grpc://n1:1"}, {"slices", 2}}, {{"node", "grpc://n2:2"}, {"slices", 1}}}}}}},
      {"nodes",
       {{{"location", "grpc://n1:1"},
         {"state", "alive"},
         {"memory_used_bytes", 900},
         {"memory_limit_bytes", 1000},
         {"disk_used_bytes", 5 * 1024 * 1024},
         {"disk_limit_bytes", 20 * 1024 * 1024},
         {"tier_ram_bytes", 3 * 1024 * 1024},
         {"tier_disk_bytes", 1024 * 1024},
         {"prefetch_lead_batches", 12},
         {"last_seen_s", 0.4},
         {"datasets", json::array()}}}},
      {"jobs",
       {{{"job", "train-7"},
         {"datasets", {"clicks"}},
         {"nodes", {"grpc://n1:1"}},
         {"consumers", 4},
         {"rows_per_s", 25000},
         {"stall_ratio", 0.25},
         {"worst_rank", 3},
         {"worst_rank_stall_ratio", 0.5}}}},
      {"loads", {{{"name", "big"}, {"phase", "loading"}, {"tasks_done", 3}, {"tasks_total", 10}}}},
      {"recent_loads", {{{"name", "old"}, {"state", "failed"}, {"error", "IOError: gone"}}}}};
  const std::string page = RenderStatusPage(status, 7);
  EXPECT_NE(page.find("http-equiv=\"refresh\" content=\"7\""), std::string::npos);
  EXPECT_NE(page.find("clicks&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_NE(page.find("degraded"), std::string::npos);
  EXPECT_NE(page.find("1,234,567"), std::string::npos);
  EXPECT_NE(page.find("3.0 MiB"), std::string::npos);
  EXPECT_NE(page.find("grpc://n2:2: 1"), std::string::npos);
  EXPECT_NE(page.find("class=\"bar warn\"><span style=\"width:90.0%\""), std::string::npos);
  EXPECT_NE(page.find("train-7"), std::string::npos);
  EXPECT_NE(page.find("25,000"), std::string::npos);
  EXPECT_NE(page.find("25.0 %"), std::string::npos);
  EXPECT_NE(page.find("rank 3: 50.0 %"), std::string::npos);
  EXPECT_NE(page.find("3/10 files"), std::string::npos);
  EXPECT_NE(page.find("IOError: gone"), std::string::npos);
  EXPECT_NE(page.find("5.0 MiB of 20.0 MiB"), std::string::npos);  // the node's disk tier
  // ... and what its streams read of it: 3 of 4 MiB from RAM, 12 batches ahead.
  EXPECT_NE(page.find("read 75.0% from RAM, 1.0 MiB waited for; 12 batches ahead"),
            std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);  // no external assets
  EXPECT_EQ(page.find("https://"), std::string::npos);
}

TEST(StatusPageTest, EmptyClusterSaysSo) {
  const std::string page = RenderStatusPage({{"ready", false}, {"reason", "no data node"}});
  EXPECT_NE(page.find("not ready"), std::string::npos);
  EXPECT_NE(page.find("No datasets."), std::string::npos);
  EXPECT_NE(page.find("No data nodes."), std::string::npos);
  EXPECT_NE(page.find("No job has reported"), std::string::npos);
  EXPECT_EQ(page.find("Following tables"), std::string::npos);  // the follower is off
}

TEST(StatusPageTest, ShowsEachSourceOfAMixtureJob) {
  json status = {{"jobs",
                  {{{"job", "mix"},
                    {"datasets", {"code", "web<b>"}},
                    {"sources",
                     {{{"dataset", "code"}, {"rows_total", 1200}, {"rows_per_s", 300}},
                      {{"dataset", "web<b>"}, {"rows_total", 2800}, {"rows_per_s", 700}}}}}}}};
  const std::string page = RenderStatusPage(status, 5);
  EXPECT_NE(page.find("code: 1,200 rows, 300 rows/s"), std::string::npos) << page;
  EXPECT_NE(page.find("web&lt;b&gt;: 2,800 rows, 700 rows/s"), std::string::npos);
}

TEST(StatusPageTest, ShowsFollowedDatasets) {
  json status = {{"follow",
                  {{"period_s", 30},
                   {"datasets",
                    {{{"name", "clicks"},
                      {"followed", true},
                      {"state", "following"},
                      {"snapshot_id", 42},
                      {"table_snapshot_id", 42},
                      {"last_check_s_ago", 3.3},
                      {"last_refresh_s_ago", 61.0},
                      {"lag_s", 2.5},
                      {"errors", 1},
                      {"last_error", "reading the table's metadata: IOError: <gone>"},
                      {"last_error_s_ago", 90.0}},
                     {{"name", "pinned"},
                      {"followed", false},
                      {"state", "not followed"},
                      {"why_not", "the load pins snapshot 7"}}}}}}};
  const std::string page = RenderStatusPage(status, 5);
  EXPECT_NE(page.find("Following tables"), std::string::npos);
  EXPECT_NE(page.find("every 30 s"), std::string::npos);
  EXPECT_NE(page.find(">42<"), std::string::npos);
  EXPECT_NE(page.find("3.3 s ago"), std::string::npos);
  EXPECT_NE(page.find("61.0 s ago"), std::string::npos);
  EXPECT_NE(page.find("2.5 s"), std::string::npos);
  EXPECT_NE(page.find("IOError: &lt;gone&gt;"), std::string::npos);
  EXPECT_NE(page.find("the load pins snapshot 7"), std::string::npos);
}

}  // namespace
}  // namespace icefloe
