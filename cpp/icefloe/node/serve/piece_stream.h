// Streams for plan and row tickets: record batches tagged with where their
// rows go (protocol/plan_ticket.h's piece metadata).
//
// Pieces are produced lazily, one consumer batch at a time, so a stream over
// a whole epoch holds at most one batch's pieces in memory. Runs of rows held
// contiguously are sent as zero-copy slices of cached batches; scattered rows
// (sample shuffle, random access) are gathered into one batch (one copy).
// Consecutive whole batches back to back in one cached batch go as one chunk
// (a chunk: one slice, one message, at most 64Ki rows and 8 MiB).
#pragma once

#include <memory>
#include <vector>

#include <arrow/flight/server.h>
#include <arrow/result.h>

#include "icefloe/node/copy/dataset.h"
#include "icefloe/node/serve/node_metrics.h"
#include "icefloe/node/tier/readahead.h"
#include "icefloe/protocol/plan_ticket.h"

namespace icefloe {

/// The stream for a plan ticket: every batch in [batch_begin, batch_end) of
/// the consumer, restricted to the ticket's owned ranges. RowsNotHeld (see
/// CheckHeld) when the node does not hold every row of the owned ranges
/// (checked before the stream starts, and again as each batch is cut).
/// Gathered rows are allocated from `gather_pool` (the node's budget), which
/// the stream keeps alive. `meter` (may be null) hears of every batch sent.
/// `columns` (indices into the dataset's schema, checked by the caller;
/// empty: all) projects the stream: its schema and every batch hold only
/// those columns, in that order; slices select them, gathers copy only them.
/// `by_reference` (the dataset must have a shared export): the stream for a
/// same-host reader that maps the export; its schema is SharedSchema's and
/// its messages name their rows in the export (PieceInfo::source) instead
/// of holding them. `readahead` (may be null): the node's, told what the
/// stream will read of a copy on the disk tier and what it reads.
/// `reader_cuts` (by reference): the reader cuts a piece whose rows cross
/// segments of the export itself (header version 2), so each goes as one
/// message; otherwise the stream cuts it into one message per segment.
arrow::Result<std::unique_ptr<arrow::flight::FlightDataStream>> MakePlanStream(
    std::shared_ptr<const CachedDataset> dataset, PlanTicket ticket,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter = nullptr,
    std::vector<int> columns = {}, bool by_reference = false,
    std::shared_ptr<TierReadahead> readahead = nullptr, bool reader_cuts = false);

/// A by-reference stream's schema: no fields; metadata "icefloe.shared", a
/// SharedFileReply naming the export, the projection and what the file holds
/// (a reader may take rows of that generation from the file itself later).
arrow::Result<std::shared_ptr<arrow::Schema>> SharedSchema(const CachedDataset& dataset,
                                                           const std::vector<int>& columns);

/// The stream for a row ticket: the requested rows, gathered, in chunks;
/// `by_reference` as for MakePlanStream (the rows named, in request order).
arrow::Result<std::unique_ptr<arrow::flight::FlightDataStream>> MakeRowsStream(
    std::shared_ptr<const CachedDataset> dataset, RowsTicket ticket,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter = nullptr,
    std::vector<int> columns = {}, bool by_reference = false);

/// The stream for a range ticket to a same-host reader of the dataset's shared
/// export (by reference): `range` (held whole: CheckHeld first) named in the
/// export, in order, one message per segment it crosses (a memfd's rows, or a
/// tier unit), each a whole piece by reference whose first_batch is the rows
/// of the range before it and whose batch_size is its rows (docs/protocol.md,
/// "Range reads by reference"). The reader slices each segment: nothing is
/// copied. Its schema is SharedSchema's; `columns` go there, for the reader
/// to project what it maps.
arrow::Result<std::unique_ptr<arrow::flight::FlightDataStream>> MakeRangeStream(
    std::shared_ptr<const CachedDataset> dataset, RowRange range,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter = nullptr,
    const std::vector<int>& columns = {});

/// OK when `dataset` holds every row of `rows`. Otherwise the error a reader
/// fails over on: a Flight error, extra_info kErrorRowsNotHeld
/// (common/wire_status.h), naming the rows, the dataset and its generation
/// and how many of them the node holds. A node restarted with part of its
/// copy (the rows it adopted from its disk tier) answers it until the head
/// has seen what it holds; it never serves fewer rows than it is asked for.
arrow::Status CheckHeld(const CachedDataset& dataset, RowRange rows);

/// The dataset's schema projected onto `columns` (empty: the schema itself).
arrow::Result<std::shared_ptr<arrow::Schema>> ProjectedSchema(const CachedDataset& dataset,
                                                              const std::vector<int>& columns);

}  // namespace icefloe
