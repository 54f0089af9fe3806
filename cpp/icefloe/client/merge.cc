#include "icefloe/client/merge.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <utility>
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
  // A chunk by reference read as a slice of the node's file: rows
  // slice_start .. slice_start + slice_rows - 1, its batches starting at
  // `offsets` in them (none: one after another); slice_start -1: gathered.
  int64_t slice_start = -1;
  int64_t slice_rows = 0;
  std::vector<int64_t> offsets{};
  // A piece's runs or positions (in the caller's header bytes, or `owned`)
  // and, left in a node's file, its source runs.
  const uint8_t* entries = nullptr;
  uint32_t num_entries = 0;
  bool positions = false;
  std::vector<uint32_t> owned{};
  const uint8_t* sources = nullptr;
  uint32_t num_sources = 0;
  const IcefloeFile* file = nullptr;  // the source runs' rows, across its segments

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

  // Source run i: (first row in the file, rows).
  std::pair<uint64_t, uint32_t> Source(size_t i) const {
    uint64_t start;
    uint32_t length;
    std::memcpy(&start, sources + 12 * i, 8);  // little-endian, as the node sends it
    std::memcpy(&length, sources + 12 * i + 8, 4);
    return {start, length};
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

// Rows a source run of a chunk by reference averages from which the chunk is
// a slice of the file (a rank's batches in a span of it, the other ranks'
// rows between them) rather than gathered: short runs would make a slice
// mostly of rows the consumer never reads.
constexpr int64_t kLongRuns = 256;

}  // namespace

struct IcefloeMerger {
  IcefloeMerger(int32_t streams, uint64_t first, uint64_t num_batches, bool copy)
      : copy(copy),
        heads(static_cast<size_t>(streams)),
        present(static_cast<size_t>(streams), false),
        ended(static_cast<size_t>(streams), false),
        b(first),
        num_batches(num_batches) {}

  int32_t Push(int32_t stream, const uint8_t* bytes, int64_t size, int64_t rows, int32_t holds,
               int64_t file_rows, const IcefloeFile* file = nullptr);
  int32_t CheckSources(const Head& h, int64_t file_rows);
  int32_t SliceChunk(Head& h);
  int32_t PushRows(int32_t stream, uint64_t batch, uint32_t batch_size, int64_t rows,
                   const uint32_t* positions);
  int32_t Assemble(const ArrowSchema* schema, ArrowArray* batches, ArrowArray* out,
                   int64_t* inverse, char* error, int64_t error_size);
  int32_t End(int32_t stream);
  int32_t PieceRows(int32_t piece, int64_t* out) const;
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
  int32_t Gather(IcefloeMergeStep* out);
  int32_t Collect(IcefloeMergeStep* out);
  int32_t Finish(IcefloeMergeStep* out);

  enum class Phase { kStart, kWhole, kCollect };

  const bool copy;  // ICEFLOE_MERGE_COPY
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
                            int32_t holds, int64_t file_rows, const IcefloeFile* file) {
  if (!Asked(stream)) return -1;
  if (size < 0 || (bytes == nullptr && size > 0) || rows < 0 || file_rows < 0 ||
      holds < ICEFLOE_ROWS_CARRIED || holds > ICEFLOE_ROWS_IN_FILE) {
    return Fail("a message was pushed with a negative size, no bytes or an unknown holding");
  }
  PieceView v;
  const icefloe::PieceError bad = icefloe::ParsePiece(bytes, static_cast<size_t>(size), &v);
  if (bad != icefloe::PieceError::kOk) {
    return Fail(std::string("a node sent malformed piece metadata: ") +
                icefloe::PieceErrorText(bad));
  }
  const bool by_reference = v.has(icefloe::kPieceByReference);
  if (holds == ICEFLOE_ROWS_CARRIED && by_reference) {
    return Fail("a node sent a piece by reference on a stream that carries its rows");
  }
  if (holds == ICEFLOE_ROWS_IN_FILE && !by_reference) {
    return Fail("a node sent a piece that carries its rows on a stream by reference");
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
    h.file = file;
    if (CheckSources(h, file_rows) != 0) return -1;
  }
  if (h.file != nullptr && h.whole) {
    return Fail(
        "a node sent a chunk by reference whose rows lie in more than one segment of "
        "its shared file");
  }
  if (!h.whole && !h.CountsRows()) {
    return Fail("a node sent a piece whose positions do not match its rows");
  }
  uint64_t last = 0;
  if (__builtin_add_overflow(v.batch, uint64_t{v.count}, &last)) {
    return Fail("a node sent a piece past the last batch number");
  }
  if (h.whole && static_cast<uint64_t>(h.rows) != h.span_rows()) {
    return Fail(Format("a node sent a chunk of %lld rows for %u batches of %u rows (the last %u)",
                       static_cast<long long>(h.rows), h.count, h.batch_size, h.last_size));
  }
  if (h.whole && h.sources != nullptr && !copy && SliceChunk(h) != 0) return -1;
  heads[static_cast<size_t>(stream)] = std::move(h);
  present[static_cast<size_t>(stream)] = true;
  return 0;
}

// A piece by reference names rows inside the node's file, as many as it holds.
int32_t IcefloeMerger::CheckSources(const Head& h, int64_t file_rows) {
  const auto in_file = static_cast<uint64_t>(file_rows);
  uint64_t named = 0;
  for (uint32_t i = 0; i < h.num_sources; ++i) {
    const auto [start, length] = h.Source(i);
    if (start > in_file || length > in_file - start) {
      return Fail(Format("a node named rows outside its shared file of %lld rows",
                         static_cast<long long>(file_rows)));
    }
    named += length;  // at most 2^32 runs of 2^32 rows: no wrap
  }
  if (named != static_cast<uint64_t>(h.rows)) {
    return Fail(Format("a node named %llu shared rows for a piece of %lld",
                       static_cast<unsigned long long>(named), static_cast<long long>(h.rows)));
  }
  return 0;
}

// Whether a chunk by reference is read as one slice of the node's file: one
// run, or long runs none overlapping another, each batch inside one run
// (nodes merge only whole batches into a run). Otherwise it is gathered.
int32_t IcefloeMerger::SliceChunk(Head& h) {
  const size_t n = h.num_sources;
  if (n <= 1) {
    h.slice_start = n == 0 ? 0 : static_cast<int64_t>(h.Source(0).first);
    h.slice_rows = h.rows;
    return 0;
  }
  if (h.rows < kLongRuns * static_cast<int64_t>(n)) return 0;
  std::vector<std::pair<uint64_t, uint64_t>> runs(n);  // (first row, past the last), sorted
  for (size_t i = 0; i < n; ++i) {
    const auto [start, length] = h.Source(i);
    runs[i] = {start, start + length};  // inside the file: no wrap
  }
  std::sort(runs.begin(), runs.end());
  uint64_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && runs[i].first < runs[i - 1].second) return 0;  // each batch its own rows
    last = std::max(last, runs[i].second);
  }
  const uint64_t first = runs.front().first;
  h.offsets.reserve(h.count);
  int64_t i = -1, at = 0, left = 0;
  for (uint32_t k = 0; k < h.count; ++k) {
    const int64_t rows = k + 1 < h.count ? h.batch_size : h.last_size;
    while (left == 0 && i + 1 < static_cast<int64_t>(n)) {
      const auto [start, length] = h.Source(static_cast<size_t>(++i));
      at = static_cast<int64_t>(start - first);
      left = length;
    }
    if (rows > left) {
      return Fail(Format(
          "a node sent a chunk by reference whose batch %u runs across two runs of shared rows",
          k));
    }
    h.offsets.push_back(at);
    at += rows;
    left -= rows;
  }
  h.slice_start = static_cast<int64_t>(first);
  h.slice_rows = static_cast<int64_t>(last - first);
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
  out->batch = shape.batch;
  out->count = shape.count;
  out->batch_size = shape.batch_size;
  out->last_size = shape.last_size;
  if (shape.sources != nullptr && shape.slice_start < 0) return Gather(out);
  out->stream = chunk_stream;
  out->offsets = shape.offsets.empty() ? nullptr : shape.offsets.data();
  if (shape.sources != nullptr) {
    out->in_file = 1;
    out->start = shape.slice_start;
    out->rows = shape.slice_rows;
  }
  b = last;
  phase = Phase::kStart;
  return ICEFLOE_MERGE_CHUNK;
}

// A chunk by reference that is no slice of the file: a BATCH of its batches
// (whose shape Whole set), one piece whose rows fill them in order,
// assembled from the file.
int32_t IcefloeMerger::Gather(IcefloeMergeStep* out) {
  if (shape.rows > UINT32_MAX) {
    return Fail(Format("a node sent a chunk by reference of %lld rows, more than a batch holds",
                       static_cast<long long>(shape.rows)));
  }
  shape.owned = {0, static_cast<uint32_t>(shape.rows)};
  shape.entries = reinterpret_cast<const uint8_t*>(shape.owned.data());
  shape.num_entries = 1;
  shape.positions = false;
  b = shape.end();
  span = false;
  streams.assign(1, chunk_stream);
  bases.assign(1, 0);
  taken.clear();
  taken.push_back(std::move(shape));
  out->num_pieces = 1;
  out->streams = streams.data();
  out->bases = bases.data();
  assemblable = true;
  phase = Phase::kStart;
  return ICEFLOE_MERGE_BATCH;
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
  const Head& front = taken.front();
  out->in_order = !span && taken.size() == 1 && front.InOrder();
  if (out->in_order && front.sources != nullptr) {  // in the file: one slice of it, or assembled
    out->in_order = !copy && front.num_sources <= 1 && front.file == nullptr;
    out->in_file = out->in_order;
    out->start = front.num_sources == 0 ? 0 : static_cast<int64_t>(front.Source(0).first);
    out->rows = front.rows;
  }
  assemblable = true;
  b = end;
  phase = Phase::kStart;
  return ICEFLOE_MERGE_BATCH;
}

// What the client raises for an assembly's result (`detail` names a column,
// where there is one).
std::string AssemblyWords(int32_t code, const char* detail, int64_t rows) {
  switch (code) {
    case kIcefloeAssembleOk:
      return "";
    case kIcefloeAssembleUnsupported:
      return detail;
    case kIcefloeAssembleNoMemory:
      return Format("no memory to assemble a batch of %lld rows", static_cast<long long>(rows));
    case kIcefloeAssembleBadOffsets:
      return std::string("a node sent a piece with bad offsets: ") + detail;
    case kIcefloeAssembleOutside:
      return "a node sent piece positions outside their batch";
    case kIcefloeAssembleTwice:
      return "a node sent two pieces for one position";
    case kIcefloeAssembleOutsideSource:
      return "a node named rows outside its shared file";
    case kIcefloeAssembleMalformed:
      if (*detail != '\0') return std::string("a node sent a malformed piece: ") + detail;
      [[fallthrough]];
    default:
      return "a node sent a piece whose positions do not match its rows";
  }
}

int32_t IcefloeMerger::Assemble(const ArrowSchema* schema, ArrowArray* batches, ArrowArray* out,
                                int64_t* inverse, char* error_out, int64_t error_size) {
  if (!assemblable) {
    if (error_out != nullptr && error_size > 0) {
      std::snprintf(error_out, static_cast<size_t>(error_size), "no batch to assemble");
    }
    return kIcefloeAssembleMalformed;
  }
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
    p.batch = h.file != nullptr ? nullptr : &batches[k];
    p.file = h.file;
    if (h.positions) {
      p.positions = entries;
    } else {
      p.runs = entries;
      p.num_runs = h.num_entries;
    }
    p.rows = h.rows;
    p.base = bases.empty() ? 0 : bases[k];
    p.source_runs = h.sources;
    p.num_source_runs = h.sources != nullptr ? h.num_sources : 0;
    rows += h.rows;  // the batch's or span's rows: Finish checked they add up
  }
  char detail[256] = "";
  const int32_t code = icefloe_assemble(rows, schema, static_cast<int32_t>(pieces.size()),
                                        pieces.data(), out, inverse, detail, sizeof detail);
  if (error_out != nullptr && error_size > 0) {
    std::snprintf(error_out, static_cast<size_t>(error_size), "%s",
                  AssemblyWords(code, detail, rows).c_str());
  }
  return code;
}

int32_t IcefloeMerger::PieceRows(int32_t piece, int64_t* out) const {
  if (!assemblable || piece < 0 || static_cast<size_t>(piece) >= taken.size()) return -1;
  const Head& h = taken[static_cast<size_t>(piece)];
  if (h.sources == nullptr) {
    for (int64_t r = 0; r < h.rows; ++r) out[r] = r;
    return 0;
  }
  for (uint32_t i = 0; i < h.num_sources; ++i) {
    const auto [start, length] = h.Source(i);
    for (uint32_t r = 0; r < length; ++r) *out++ = static_cast<int64_t>(start + r);
  }
  return 0;
}

extern "C" IcefloeMerger* icefloe_merger_new(int32_t streams, uint64_t first, uint64_t num_batches,
                                             int32_t flags) noexcept {
  if (streams < 0 || (flags & ~ICEFLOE_MERGE_COPY) != 0) return nullptr;
  return new (std::nothrow)
      IcefloeMerger(streams, first, num_batches, (flags & ICEFLOE_MERGE_COPY) != 0);
}

extern "C" void icefloe_merger_free(IcefloeMerger* merger) noexcept { delete merger; }

extern "C" int32_t icefloe_merger_push(IcefloeMerger* merger, int32_t stream, const uint8_t* header,
                                       int64_t size, int64_t rows, int32_t holds, int64_t file_rows,
                                       IcefloeMergeStep* next) noexcept {
  merger->Push(stream, header, size, rows, holds, file_rows);
  return merger->Next(next);
}

extern "C" int32_t icefloe_merger_push_file(IcefloeMerger* merger, int32_t stream,
                                            const uint8_t* header, int64_t size, int64_t rows,
                                            const IcefloeFile* file,
                                            IcefloeMergeStep* next) noexcept {
  if (file == nullptr) {
    merger->Fail("a message was pushed with no file");
  } else {
    merger->Push(stream, header, size, rows, ICEFLOE_ROWS_IN_FILE, icefloe_file_rows(file), file);
  }
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

extern "C" int32_t icefloe_merger_piece_rows(const IcefloeMerger* merger, int32_t piece,
                                             int64_t* out) noexcept {
  return merger->PieceRows(piece, out);
}

extern "C" const char* icefloe_merger_error(const IcefloeMerger* merger) noexcept {
  return merger->error.c_str();
}
