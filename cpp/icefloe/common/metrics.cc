#include "icefloe/common/metrics.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>

#include <prometheus/text_serializer.h>

namespace icefloe {

namespace {

// prometheus-cpp throws on invalid or duplicate names; ours are constants,
// so that is a bug: say which and stop, rather than let it escape.
template <typename Build>
auto& RegisterOrDie(const std::string& name, Build build) {
  try {
    return build();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "icefloe: cannot register metric %s: %s\n", name.c_str(), e.what());
    std::abort();
  }
}

}  // namespace

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}

prometheus::Family<prometheus::Counter>& MetricsRegistry::Counter(const std::string& name,
                                                                  const std::string& help) {
  return RegisterOrDie(
      name, [&]() -> auto& {
        return prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
      });
}

prometheus::Family<prometheus::Gauge>& MetricsRegistry::Gauge(const std::string& name,
                                                              const std::string& help) {
  return RegisterOrDie(
      name, [&]() -> auto& {
        return prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
      });
}

prometheus::Family<prometheus::Histogram>& MetricsRegistry::Histogram(const std::string& name,
                                                                      const std::string& help) {
  return RegisterOrDie(
      name, [&]() -> auto& {
        return prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
      });
}

void MetricsRegistry::OnScrape(std::function<void()> hook) {
  MutexLock lock(&mu_);
  hooks_.push_back(std::move(hook));
}

std::string MetricsRegistry::Scrape() {
  MutexLock lock(&mu_);
  for (const auto& hook : hooks_) hook();
  try {
    return prometheus::TextSerializer().Serialize(registry_->Collect());
  } catch (const std::exception& e) {  // std::bad_alloc from the stream
    return std::string("# icefloe: cannot render metrics: ") + e.what() + "\n";
  }
}

std::string StatusCodeLabel(arrow::StatusCode code) {
  std::string label = arrow::Status::CodeAsString(code);
  for (char& c : label) {
    c = c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return label;
}

const std::vector<arrow::StatusCode>& CommonErrorCodes() {
  static const std::vector<arrow::StatusCode> kCodes = {
      arrow::StatusCode::Invalid,       arrow::StatusCode::KeyError,
      arrow::StatusCode::IndexError,    arrow::StatusCode::IOError,
      arrow::StatusCode::OutOfMemory,   arrow::StatusCode::Cancelled,
      arrow::StatusCode::AlreadyExists, arrow::StatusCode::UnknownError};
  return kCodes;
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100};
  return kBuckets;
}

void SetGaugesByLabel(prometheus::Family<prometheus::Gauge>* family, const std::string& label,
                      const std::vector<std::pair<std::string, double>>& values,
                      std::vector<std::pair<std::string, prometheus::Gauge*>>* children) {
  std::map<std::string, double> want(values.begin(), values.end());
  std::vector<std::pair<std::string, prometheus::Gauge*>> kept;
  for (auto& [value, gauge] : *children) {
    auto it = want.find(value);
    if (it == want.end()) {
      family->Remove(gauge);
      continue;
    }
    gauge->Set(it->second);
    want.erase(it);
    kept.emplace_back(value, gauge);
  }
  for (const auto& [value, v] : want) {
    auto& gauge = family->Add({{label, value}});
    gauge.Set(v);
    kept.emplace_back(value, &gauge);
  }
  *children = std::move(kept);
}

}  // namespace icefloe
