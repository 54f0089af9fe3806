#include "icefloe/protocol/job_report.h"

#include <cctype>

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
// A report covers seconds; anything near 2^40 us (12 days) is a broken clock.
constexpr uint64_t kMaxMicros = uint64_t{1} << 40;

// One line per field (docs/protocol.md lists the same).
const Field<JobReport> kJobReportFields[] = {
    {Str("job", kRequired, Values(1, 128)), &JobReport::job},
    {Str("dataset", kOptional, Values(0, 200)), &JobReport::dataset},
    {Uint("rank", kOptional, Values(0, kU32Max - 1)), &JobReport::rank},
    {Uint("worker", kOptional, Values(0, kU32Max - 1)), &JobReport::worker},
    {Uint("world_size", kOptional, Values(1, kU32Max)), &JobReport::world_size},
    {Uint("batches", kOptional, Values(0, kMaxRows)), &JobReport::batches},
    {Uint("rows", kOptional, Values(0, kMaxRows)), &JobReport::rows},
    {Uint("wait_us", kOptional, Values(0, kMaxMicros)), &JobReport::wait_us},
    {Uint("elapsed_us", kRequired, Values(1, kMaxMicros)), &JobReport::elapsed_us},
    {ListOf(FieldType::kStringList, "nodes", kOptional, Values(1, 512), Values(0, kMaxReportNodes)),
     &JobReport::nodes},
};

}  // namespace

json JobReport::ToJson() const {
  json j = {{"v", kProtocolVersion}};
  WriteFields<JobReport>(kJobReportFields, *this, &j);
  return j;
}

arrow::Result<JobReport> JobReport::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "job.report"));
  JsonFields in(j, "job.report");
  JobReport r;
  ARROW_RETURN_NOT_OK(ReadFields<JobReport>(in, kJobReportFields, &r));
  for (char c : r.job) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '/' || c == ':')) {
      return arrow::Status::Invalid(
          "job.report: 'job' may only hold letters, digits and - _ . / :; got '", r.job, "'");
    }
  }
  if (r.wait_us > r.elapsed_us) {
    return arrow::Status::Invalid("job.report: 'wait_us' (", r.wait_us,
                                  ") must not exceed 'elapsed_us' (", r.elapsed_us, ")");
  }
  if (r.rank >= r.world_size) {
    return arrow::Status::Invalid("job.report: 'rank' (", r.rank, ") must be below 'world_size' (",
                                  r.world_size, ")");
  }
  return r;
}

MessageSpec JobReport::Spec() { return SpecOf<JobReport>("job.report", kJobReportFields); }

}  // namespace icefloe
