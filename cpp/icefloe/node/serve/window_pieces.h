// Window-mode plan streams (docs/epochs.md section 1.1): a consumer's batches
// served a plan-fixed span at a time, one gather per span.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include <arrow/result.h>

#include "icefloe/node/copy/dataset.h"
#include "icefloe/node/serve/piece.h"
#include "icefloe/plan/plan.h"
#include "icefloe/protocol/plan_ticket.h"

namespace icefloe {

/// Positions of a window-mode span: a consumer's batches go in spans of
/// max(1, kWindowSpanRows / batch_size) of them, cut by the plan alone (from
/// batch 0), so every endpoint of a consumer cuts the same ones. A wire
/// contract: every node of one cluster must use the same value. 64Ki, as a
/// chunk's rows: at 16Ki the consumer's fixed cost per span (merge, tensor
/// conversion, a message per node) cost 10 % of a window epoch's rate.
constexpr uint64_t kWindowSpanRows = 64 * 1024;

/// Window mode: the stream's span from `batch` (the rest of the span holding
/// it, see kWindowSpanRows), its owned rows gathered in one go. Held whole here, the span goes
/// as one chunk (whole batches) in batch order; shared with other endpoints, as one
/// span piece of rows in storage order, which the consumer puts
/// in place together with the other endpoints' rows in one take. A span of
/// one batch, or one whose gather would be too large, goes as one piece per
/// batch. Returns the batches taken (at least 1).
arrow::Result<uint64_t> WindowSpanPieces(const CachedDataset& dataset, const PlanTicket& ticket,
                                         uint64_t batch, PlanCache* cache, PieceTarget target,
                                         const std::vector<int>& columns, std::deque<Piece>* out);

}  // namespace icefloe
