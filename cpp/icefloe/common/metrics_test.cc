#include "icefloe/common/metrics.h"

#include <gtest/gtest.h>

namespace icefloe {
namespace {

TEST(MetricsTest, ScrapeRendersCountersGaugesAndHistograms) {
  MetricsRegistry metrics;
  auto& served = metrics.Counter("icefloe_test_served_bytes_total", "Bytes.").Add({});
  auto& latency =
      metrics.Histogram("icefloe_test_latency_seconds", "Latency.").Add({}, LatencyBuckets());
  served.Increment(1234);
  latency.Observe(0.002);
  const std::string text = metrics.Scrape();
  EXPECT_NE(text.find("# TYPE icefloe_test_served_bytes_total counter"), std::string::npos);
  EXPECT_NE(text.find("icefloe_test_served_bytes_total 1234"), std::string::npos) << text;
  EXPECT_NE(text.find("icefloe_test_latency_seconds_bucket{le=\"0.003\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("icefloe_test_latency_seconds_bucket{le=\"0.001\"} 0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("icefloe_test_latency_seconds_count 1"), std::string::npos) << text;
}

TEST(MetricsTest, ScrapeHooksSetGaugesAndLabelsComeAndGo) {
  MetricsRegistry metrics;
  auto& family = metrics.Gauge("icefloe_test_datasets", "By state.");
  std::vector<std::pair<std::string, prometheus::Gauge*>> children;
  std::vector<std::pair<std::string, double>> values = {{"ready", 2}, {"odd \"name\"\n", 1}};
  metrics.OnScrape([&] { SetGaugesByLabel(&family, "state", values, &children); });
  std::string text = metrics.Scrape();
  EXPECT_NE(text.find("icefloe_test_datasets{state=\"ready\"} 2"), std::string::npos) << text;
  // Label values are escaped by the serializer: quotes and newlines stay inside.
  EXPECT_NE(text.find("icefloe_test_datasets{state=\"odd \\\"name\\\"\\n\"} 1"), std::string::npos)
      << text;
  values = {{"ready", 3}, {"degraded", 1}};
  text = metrics.Scrape();
  EXPECT_NE(text.find("icefloe_test_datasets{state=\"ready\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("icefloe_test_datasets{state=\"degraded\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("odd"), std::string::npos) << text;
  EXPECT_EQ(children.size(), 2u);
}

TEST(MetricsTest, StatusCodeLabelsAreSnakeCase) {
  EXPECT_EQ(StatusCodeLabel(arrow::StatusCode::KeyError), "key_error");
  EXPECT_EQ(StatusCodeLabel(arrow::StatusCode::OutOfMemory), "out_of_memory");
  EXPECT_EQ(StatusCodeLabel(arrow::StatusCode::Invalid), "invalid");
}

TEST(MetricsTest, LatencyBucketsIncrease) {
  const auto& b = LatencyBuckets();
  ASSERT_GT(b.size(), 5u);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

}  // namespace
}  // namespace icefloe
