#include "icefloe/client/merge.h"

#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "icefloe/client/assemble.h"
#include "icefloe/protocol/piece.h"

namespace {

using icefloe::PieceView;

// A stream's message not yet handed out: its header's shape.
struct Head {
  bool whole = false;
  uint64_t batch = 0;
  uint32_t count = 1;
  uint32_t batch_size = 0;
  uint32_t last_size = 0;
  int64_t rows = 0;
  std::vector<int64_t> offsets{};  // a chunk's batches' rows in its message (runs pushed)
  // A piece's runs or positions (in the caller's header bytes, or `owned`)
  // and, left in a node's file, its source runs.
  const uint8_t* entries = nullptr;
  uint32_t num_entries = 0;
  bool positions = false;
  std::vector<uint32_t> owned{};
  const uint8_t* sources = nullptr;
  uint32_t num_sources = 0;

  uint32_t Entry(size_t i) const {
    uint32_t v;
    std::memcpy(&v, entries + 4 * i, 4);  // header bytes need not be aligned
    return v;
  }
  // Whether the piece's positions count its rows (runs: their lengths).
  bool CountsRows() const {
    if (positions) return num_entries == static_cast<uint64_t>(rows);
    uint64_t n = 0;
    for (uint32_t i = 0; i < num_entries; ++i) n += Entry(2 * i + 1);
    return n == static_cast<uint64_t>(rows);
  }
  // Whether its rows fill positions 0, 1, ... in order.
  bool InOrder() const {
    if (!positions) return num_entries == 1 && Entry(0) == 0;
    for (uint32_t i = 0; i < num_entries; ++i) {
      if (Entry(i) != i) return false;
    }
    return true;
  }

  uint64_t end() const { return batch + count; }  // checked at push not to wrap
  uint64_t span_rows() const { return uint64_t{batch_size} * (count - 1) + last_size; }
  bool same_shape(const Head& o) const {
    return count == o.count && batch_size == o.batch_size && last_size == o.last_size;
  }
};

std::string Format(const char* format, auto... args) {
  char text[256];
  std::snprintf(text, sizeof text, format, args...);
  return text;
}

constexpr const char* kChanged =
    "; the cluster changed under this epoch (was the dataset reloaded?)";

}  // namespace

struct IcefloeMerger {
  IcefloeMerger(int32_t streams, uint64_t first, uint64_t num_batches)
      : heads(static_cast<size_t>(streams)),
        present(static_cast<size_t>(streams), false),
        ended(static_cast<size_t>(streams), false),
        b(first),
        num_batches(num_batches) {}

  int32_t Push(int32_t stream, const uint8_t* bytes, int64_t size, int64_t rows, int32_t holds,
               const int64_t* starts, const int64_t* lengths, int64_t num_runs,
               IcefloePieceHeader* parsed);
  int32_t PushRows(int32_t stream, uint64_t batch, uint32_t batch_size, int64_t rows,
                   const uint32_t* positions);
  int32_t Assemble(const ArrowSchema* schema, ArrowArray* batches, ArrowArray* out,
                   int64_t* inverse, char* error, int64_t error_size);
  int32_t End(int32_t stream);
  bool Asked(int32_t stream) {
    if (!error.empty()) return false;
    if (stream < 0 || static_cast<size_t>(stream) >= heads.size() ||
        !Waiting(static_cast<size_t>(stream))) {
      Fail(Format("stream %d was not asked for a message", stream));
      return false;
    }
    return true;
  }
  int32_t Next(IcefloeMergeStep* out);

  int32_t Fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return ICEFLOE_MERGE_ERROR;
  }
  bool Waiting(size_t s) const { return !present[s] && !ended[s]; }
  int32_t Need(size_t s, IcefloeMergeStep* out) {
    out->stream = static_cast<int32_t>(s);
    return out->kind = ICEFLOE_MERGE_NEED;
  }
  int32_t Start(IcefloeMergeStep* out);
  int32_t Whole(IcefloeMergeStep* out);
  int32_t Collect(IcefloeMergeStep* out);
  int32_t Finish(IcefloeMergeStep* out);

  enum class Phase { kStart, kWhole, kCollect };

  std::vector<Head> heads;
  std::vector<bool> present;  // heads[s] holds stream s's front message
  std::vector<bool> ended;
  uint64_t b;  // the first batch not yet handed out
  uint64_t num_batches;
  Phase phase = Phase::kStart;
  // The batch (or span) being collected: batches b .. end - 1.
  uint64_t end = 0;
  bool span = false;
  Head shape{};       // the span's, or the chunk's being handed out
  size_t cursor = 0;  // the stream being collected from
  std::vector<int32_t> streams{};
  std::vector<Head> taken{};
  std::vector<int64_t> bases{};
  int32_t chunk_stream = -1;
  bool assemblable = false;  // the last step was a BATCH: `taken` are its pieces
  std::vector<IcefloeAssemblePiece> pieces{};
  std::vector<std::vector<uint32_t>> aligned{};
  std::string error{};
};

int32_t IcefloeMerger::Push(int32_t stream, const uint8_t* bytes, int64_t size, int64_t rows,
                            int32_t holds, const int64_t* starts, const int64_t* lengths,
                            int64_t num_runs, IcefloePieceHeader* parsed) {
  if (!Asked(stream)) return -1;
  if (size < 0 || (bytes == nullptr && size > 0) || rows < 0 || num_runs < 0 ||
      holds < ICEFLOE_ROWS_CARRIED || holds > ICEFLOE_ROWS_IN_FILE) {
    return Fail("a message was pushed with a negative size, no bytes or an unknown holding");
  }
  PieceView v;
  const icefloe::PieceError bad = icefloe::ParsePiece(bytes, static_cast<size_t>(size), &v);
  if (bad != icefloe::PieceError::kOk) {
    return Fail(std::string("a node sent malformed piece metadata: ") +
                icefloe::PieceErrorText(bad));
  }
  if (holds == ICEFLOE_ROWS_CARRIED && v.has(icefloe::kPieceByReference)) {
    return Fail("a node sent a piece by reference on a stream that carries its rows");
  }
  Head h;
  h.whole = v.has(icefloe::kPieceWhole);
  h.batch = v.batch;
  h.count = v.count;
  h.batch_size = v.batch_size;
  h.last_size = v.last_size;
  h.rows = rows;
  h.entries = v.entry_bytes;
  h.num_entries = v.entries;
  h.positions = v.has(icefloe::kPiecePositions);
  if (holds == ICEFLOE_ROWS_IN_FILE) {
    h.sources = v.source_bytes;
    h.num_sources = v.sources;
  }
  if (!h.whole && !h.CountsRows()) {
    return Fail("a node sent a piece whose positions do not match its rows");
  }
  uint64_t last = 0;
  if (__builtin_add_overflow(v.batch, uint64_t{v.count}, &last)) {
    return Fail("a node sent a piece past the last batch number");
  }
  if (num_runs > 0) {
    if (!h.whole) return Fail("a node sent runs of shared rows for a piece that is not a chunk");
    h.rows = 0;
    for (int64_t i = 0; i < num_runs; ++i) {
      if (starts[i] < 0 || lengths[i] < 0 || __builtin_add_overflow(h.rows, lengths[i], &h.rows)) {
        return Fail("a node sent runs of shared rows out of range");
      }
    }
  }
  if (h.whole && static_cast<uint64_t>(h.rows) != h.span_rows()) {
    return Fail(Format("a node sent a chunk of %lld rows for %u batches of %u rows (the last %u)",
                       static_cast<long long>(h.rows), h.count, h.batch_size, h.last_size));
  }
  if (num_runs > 0) {  // each batch's first row: nodes merge only whole batches into a run
    h.offsets.reserve(h.count);
    int64_t i = -1, at = 0, left = 0;
    for (uint32_t k = 0; k < h.count; ++k) {
      const int64_t n = k + 1 < h.count ? h.batch_size : h.last_size;
      while (left == 0 && i + 1 < num_runs) {
        ++i;
        at = starts[i];
        left = lengths[i];
      }
      if (n > left) {
        return Fail(
            Format("a node sent a chunk by reference whose batch %u runs across two runs "
                   "of shared rows",
                   k));
      }
      h.offsets.push_back(at);
      at += n;
      left -= n;
    }
  }
  heads[static_cast<size_t>(stream)] = std::move(h);
  present[static_cast<size_t>(stream)] = true;
  if (parsed != nullptr) {
    *parsed = {v.flags,
               v.batch,
               v.batch_size,
               v.count,
               v.last_size,
               v.entries,
               v.sources,
               v.entry_bytes - bytes,
               v.source_bytes - bytes};
  }
  return 0;
}

int32_t IcefloeMerger::PushRows(int32_t stream, uint64_t batch, uint32_t batch_size, int64_t rows,
                                const uint32_t* positions) {
  if (!Asked(stream)) return -1;
  if (batch == ~uint64_t{0} || rows < 0 || rows > INT32_MAX || (positions == nullptr && rows > 0)) {
    return Fail("rows pushed past the last batch number, or without positions");
  }
  Head& h = heads[static_cast<size_t>(stream)];
  h = Head{};
  h.batch = batch;
  h.batch_size = h.last_size = batch_size;
  h.rows = rows;
  h.owned.assign(positions, positions + rows);
  h.entries = reinterpret_cast<const uint8_t*>(h.owned.data());
  h.num_entries = static_cast<uint32_t>(rows);
  h.positions = true;
  present[static_cast<size_t>(stream)] = true;
  return 0;
}

int32_t IcefloeMerger::End(int32_t stream) {
  if (!Asked(stream)) return -1;
  ended[static_cast<size_t>(stream)] = true;
  return 0;
}

int32_t IcefloeMerger::Next(IcefloeMergeStep* out) {
  *out = {};
  assemblable = false;
  if (!error.empty()) return out->kind = ICEFLOE_MERGE_ERROR;
  int32_t kind = ICEFLOE_MERGE_ERROR;
  switch (phase) {
    case Phase::kStart:
      kind = Start(out);
      break;
    case Phase::kWhole:
      kind = Whole(out);
      break;
    case Phase::kCollect:
      kind = Collect(out);
      break;
  }
  return out->kind = kind;
}

// Every stream's head known: batches b.. whole from one stream, or the batch
// (or span) b collected from all of them.
int32_t IcefloeMerger::Start(IcefloeMergeStep* out) {
  if (b >= num_batches) return ICEFLOE_MERGE_DONE;
  for (size_t s = 0; s < heads.size(); ++s) {
    if (Waiting(s)) return Need(s, out);
  }
  for (size_t s = 0; s < heads.size(); ++s) {
    if (present[s] && heads[s].whole && heads[s].batch == b) {
      shape = std::move(heads[s]);
      present[s] = false;
      chunk_stream = static_cast<int32_t>(s);
      phase = Phase::kWhole;
      return Whole(out);
    }
  }
  span = false;
  for (size_t s = 0; s < heads.size() && !span; ++s) {
    const Head& h = heads[s];
    if (present[s] && !h.whole && h.batch == b && h.count > 1) {
      span = true;
      shape = h;
      shape.offsets.clear();
    }
  }
  end = span ? shape.end() : b + 1;
  cursor = 0;
  streams.clear();
  taken.clear();
  phase = Phase::kCollect;
  return Collect(out);
}

// The chunk, once its stream's next head is known: no stream may send
// anything else for its batches.
int32_t IcefloeMerger::Whole(IcefloeMergeStep* out) {
  const size_t from = static_cast<size_t>(chunk_stream);
  if (Waiting(from)) return Need(from, out);
  const uint64_t last = shape.end();
  bool clash = last > num_batches;
  for (size_t s = 0; s < heads.size(); ++s) clash = clash || (present[s] && heads[s].batch < last);
  if (clash) {
    return Fail(Format(
        "a node sent batches %llu..%llu whole while another sent rows of them (or "
        "the epoch has %llu batches)%s",
        static_cast<unsigned long long>(shape.batch), static_cast<unsigned long long>(last - 1),
        static_cast<unsigned long long>(num_batches), kChanged));
  }
  out->stream = chunk_stream;
  out->batch = shape.batch;
  out->count = shape.count;
  out->batch_size = shape.batch_size;
  out->last_size = shape.last_size;
  out->offsets = shape.offsets.empty() ? nullptr : shape.offsets.data();
  b = last;
  phase = Phase::kStart;
  return ICEFLOE_MERGE_CHUNK;
}

// Every stream's pieces of batches b .. end - 1, stream by stream.
int32_t IcefloeMerger::Collect(IcefloeMergeStep* out) {
  for (; cursor < heads.size(); ++cursor) {
    if (Waiting(cursor)) return Need(cursor, out);
    while (present[cursor] && heads[cursor].batch < end) {
      Head& h = heads[cursor];
      if (h.whole) {
        return Fail(Format("a node sent batches %llu.. whole inside batch %llu's span%s",
                           static_cast<unsigned long long>(h.batch),
                           static_cast<unsigned long long>(b), kChanged));
      }
      if (h.end() > end || h.batch < b) {
        return Fail(Format("a node sent rows of batches %llu..%llu across batch %llu's span%s",
                           static_cast<unsigned long long>(h.batch),
                           static_cast<unsigned long long>(h.end() - 1),
                           static_cast<unsigned long long>(b), kChanged));
      }
      streams.push_back(static_cast<int32_t>(cursor));
      taken.push_back(std::move(h));
      present[cursor] = false;
      if (Waiting(cursor)) return Need(cursor, out);
    }
  }
  return Finish(out);
}

// The collected pieces checked against the batch's (or span's) shape.
int32_t IcefloeMerger::Finish(IcefloeMergeStep* out) {
  uint64_t rows = 0;
  for (const Head& p : taken) {
    if (__builtin_add_overflow(rows, static_cast<uint64_t>(p.rows), &rows)) {
      return Fail(Format("nodes sent more rows than batch %llu holds%s",
                         static_cast<unsigned long long>(b), kChanged));
    }
  }
  bases.clear();
  if (span) {
    for (const Head& p : taken) {
      const uint64_t i = p.batch - shape.batch;
      const bool agrees =
          p.count > 1 ? p.same_shape(shape)
                      : p.batch_size == (i + 1 == shape.count ? shape.last_size : shape.batch_size);
      if (!agrees) {
        return Fail(Format("nodes disagree on the shape of batches %llu..%llu%s",
                           static_cast<unsigned long long>(shape.batch),
                           static_cast<unsigned long long>(shape.end() - 1), kChanged));
      }
      bases.push_back(static_cast<int64_t>(i * shape.batch_size));
    }
    if (rows != shape.span_rows()) {
      return Fail(Format("batches %llu..%llu are incomplete: %llu of %llu rows arrived%s",
                         static_cast<unsigned long long>(shape.batch),
                         static_cast<unsigned long long>(shape.end() - 1),
                         static_cast<unsigned long long>(rows),
                         static_cast<unsigned long long>(shape.span_rows()), kChanged));
    }
    out->batch_size = shape.batch_size;
    out->count = shape.count;
    out->last_size = shape.last_size;
    out->bases = bases.data();
  } else {
    const uint64_t need = taken.empty() ? 0 : taken.front().batch_size;
    if (taken.empty() || rows != need) {
      return Fail(Format("batch %llu is incomplete: %llu of %llu rows arrived%s",
                         static_cast<unsigned long long>(b), static_cast<unsigned long long>(rows),
                         static_cast<unsigned long long>(need), kChanged));
    }
    out->batch_size = out->last_size = static_cast<uint32_t>(need);
    out->count = 1;
  }
  out->batch = b;
  out->num_pieces = static_cast<int32_t>(streams.size());
  out->streams = streams.data();
  out->in_order = !span && taken.size() == 1 && taken.front().InOrder();
  assemblable = true;
  b = end;
  phase = Phase::kStart;
  return ICEFLOE_MERGE_BATCH;
}

int32_t IcefloeMerger::Assemble(const ArrowSchema* schema, ArrowArray* batches, ArrowArray* out,
                                int64_t* inverse, char* error_out, int64_t error_size) {
  if (!assemblable) return kIcefloeAssembleMalformed;
  pieces.resize(taken.size());
  aligned.resize(taken.size());
  int64_t rows = 0;
  for (size_t k = 0; k < taken.size(); ++k) {
    const Head& h = taken[k];
    const uint32_t* entries = reinterpret_cast<const uint32_t*>(h.entries);
    if (reinterpret_cast<uintptr_t>(h.entries) % alignof(uint32_t) != 0) {
      const size_t words = h.positions ? h.num_entries : 2 * size_t{h.num_entries};
      aligned[k].resize(words);
      std::memcpy(aligned[k].data(), h.entries, 4 * words);
      entries = aligned[k].data();
    }
    IcefloeAssemblePiece& p = pieces[k];
    p = {};
    p.batch = &batches[k];
    if (h.positions) {
      p.positions = entries;
    } else {
      p.runs = entries;
      p.num_runs = h.num_entries;
    }
    p.rows = h.rows;
    p.base = span ? bases[k] : 0;
    p.source_runs = h.sources;
    p.num_source_runs = h.sources != nullptr ? h.num_sources : 0;
    rows += h.rows;  // the batch's or span's rows: Finish checked they add up
  }
  return icefloe_assemble(rows, schema, static_cast<int32_t>(pieces.size()), pieces.data(), out,
                          inverse, error_out, error_size);
}

extern "C" IcefloeMerger* icefloe_merger_new(int32_t streams, uint64_t first,
                                             uint64_t num_batches) noexcept {
  if (streams < 0) return nullptr;
  return new (std::nothrow) IcefloeMerger(streams, first, num_batches);
}

extern "C" void icefloe_merger_free(IcefloeMerger* merger) noexcept { delete merger; }

extern "C" int32_t icefloe_merger_push(IcefloeMerger* merger, int32_t stream, const uint8_t* header,
                                       int64_t size, int64_t rows, int32_t holds,
                                       const int64_t* run_starts, const int64_t* run_lengths,
                                       int64_t num_runs, IcefloePieceHeader* parsed,
                                       IcefloeMergeStep* next) noexcept {
  merger->Push(stream, header, size, rows, holds, run_starts, run_lengths, num_runs, parsed);
  return merger->Next(next);
}

extern "C" int32_t icefloe_merger_push_rows(IcefloeMerger* merger, int32_t stream, uint64_t batch,
                                            uint32_t batch_size, int64_t rows,
                                            const uint32_t* positions,
                                            IcefloeMergeStep* next) noexcept {
  merger->PushRows(stream, batch, batch_size, rows, positions);
  return merger->Next(next);
}

extern "C" int32_t icefloe_merger_end(IcefloeMerger* merger, int32_t stream,
                                      IcefloeMergeStep* next) noexcept {
  merger->End(stream);
  return merger->Next(next);
}

extern "C" int32_t icefloe_merger_next(IcefloeMerger* merger, IcefloeMergeStep* out) noexcept {
  return merger->Next(out);
}

extern "C" int32_t icefloe_merger_assemble(IcefloeMerger* merger, const ArrowSchema* schema,
                                           ArrowArray* batches, ArrowArray* out, int64_t* inverse,
                                           char* error, int64_t error_size) noexcept {
  return merger->Assemble(schema, batches, out, inverse, error, error_size);
}

extern "C" const char* icefloe_merger_error(const IcefloeMerger* merger) noexcept {
  return merger->error.c_str();
}
