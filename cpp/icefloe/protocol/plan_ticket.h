// Bodies of plan tickets (kind kPlan) and row tickets (kind kRows).
//
// A plan ticket carries a consumer's PlanParams, a range of its batches and
// the global row ranges this endpoint answers for (the slices whose replicas
// it names), so a node serves it without state: for each batch it streams the
// rows of the batch that fall in those ranges, as pieces (protocol/piece.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>

#include "icefloe/plan/plan.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {

struct PlanTicket {
  PlanParams params;
  uint64_t batch_begin = 0;     ///< First of this worker's batches to serve.
  uint64_t batch_end = 0;       ///< One past the last.
  std::vector<RowRange> owned;  ///< Global rows this endpoint answers for, sorted, disjoint.
};
std::string EncodePlanBody(const PlanTicket& ticket);
/// Invalid("Invalid ticket format: ...") for malformed bodies, an unknown order
/// version, or parameters ValidatePlan rejects.
arrow::Result<PlanTicket> DecodePlanBody(std::string_view body);

/// Rows one random-access request may name, so a forged or corrupt body
/// cannot make a node allocate without limit (the client's take checks it
/// first: _fields.json "constants").
inline constexpr uint32_t kMaxTicketRows = 1 << 24;

/// A random-access request: rows[i] goes to position positions[i] of the answer.
struct RowsTicket {
  uint32_t total = 0;  ///< Rows in the whole answer (all endpoints).
  std::vector<uint32_t> positions;
  std::vector<uint64_t> rows;
};
std::string EncodeRowsBody(const RowsTicket& ticket);
arrow::Result<RowsTicket> DecodeRowsBody(std::string_view body);

}  // namespace icefloe
