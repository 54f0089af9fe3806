// libFuzzer target for the merge (merge.h): what nodes send decides every
// header a merge sees, in any order, from any number of streams, with any
// row counts, carried or by reference (source runs of a file). Every input
// must end in DONE or a refusal within a bounded number of steps, every step
// must name only messages the caller pushed and not yet took, with bases
// inside the batch or span and slices inside the file, and every batch handed
// out must assemble or be refused (ASan and UBSan watch the rest).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "icefloe/client/assemble.h"
#include "icefloe/client/assemble_testing.h"
#include "icefloe/client/fuzz_bytes.h"
#include "icefloe/client/merge.h"
#include "icefloe/protocol/piece.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

// A message pushed and not yet taken: its rows, and the rows of its file
// when it holds them by reference (-1: carried).
struct Held {
  int64_t rows;
  int64_t file_rows;
};

// A header: mostly well formed with small fields, sometimes raw bytes; *rows
// gets the rows it implies (a run's length, a chunk's batches' rows); by
// reference (sometimes), source runs of a file of *file_rows rows that
// count them, else *file_rows is -1.
std::string Header(icefloe_testing::FuzzBytes& in, uint64_t first, int64_t* rows,
                   int64_t* file_rows) {
  *rows = 0;
  *file_rows = -1;
  if (in.Small(8) == 0) {
    std::string raw(in.Small(64), '\0');
    for (char& c : raw) c = static_cast<char>(in.U8());
    return raw;
  }
  icefloe::PieceInfo p;
  p.batch = in.Small(2) == 0 ? in.Small(6) : first + in.Small(3);
  // Now and then batches long enough for a chunk to be a slice of a file.
  p.batch_size = in.Small(4) == 0 ? 256 + in.Small(300) : in.Small(5) + 1;
  p.count = in.Small(4) + 1;
  p.last_size = p.count > 1 ? in.Small(p.batch_size) + 1 : 0;
  p.whole = in.Small(3) == 0;
  if (p.whole) {
    *rows = static_cast<int64_t>(p.span_rows());
  } else {
    // Runs inside the batch, often the whole of it, so that batches fill.
    const uint32_t positions = static_cast<uint32_t>(p.span_rows());
    const uint32_t offset = in.Small(2) == 0 ? 0 : in.Small(positions + 1);
    const uint32_t length =
        in.Small(2) == 0 ? positions - offset : in.Small(positions - offset + 2);
    p.runs.push_back({offset, length});
    *rows = p.runs.back().length;
  }
  if (in.Small(2) == 0) {  // by reference: runs of the file, in any order, often apart
    p.by_reference = true;
    *file_rows = 2 * *rows + in.Small(200);
    uint64_t past = 0;  // the end of the runs so far
    for (int64_t left = *rows; left > 0 || (p.source.empty() && in.Small(2) == 0);) {
      const auto length = static_cast<uint32_t>(
          in.Small(3) == 0 ? left
                           : in.Small(static_cast<uint32_t>(std::min<int64_t>(left, 255)) + 1));
      const uint64_t room = static_cast<uint64_t>(*file_rows) - length;
      uint64_t start = in.Small(static_cast<uint32_t>(std::min<uint64_t>(room, 255)) + 1);
      if (in.Small(2) == 0 && past + 8 <= room) start = past + in.Small(8);
      p.source.push_back({start, length});
      past = std::max(past, start + length);
      left -= length;
      if (in.empty()) break;
    }
  }
  return icefloe::EncodePiece(p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  icefloe_testing::FuzzBytes in(data, size);
  const int32_t streams = static_cast<int32_t>(in.Small(4)) + 1;
  const uint64_t first = in.Small(3);
  const uint64_t num_batches = in.Small(8);
  IcefloeMerger* m =
      icefloe_merger_new(streams, first, num_batches, in.Small(4) == 0 ? ICEFLOE_MERGE_COPY : 0);
  Check(m != nullptr);
  // Each stream's messages pushed and not yet taken: their rows. The headers
  // live as long as the merge (it reads them until their batch is assembled).
  std::vector<std::deque<Held>> held(static_cast<size_t>(streams));
  std::deque<std::string> headers;
  IcefloeMergeStep step;
  int32_t kind = icefloe_merger_next(m, &step);
  for (int step_count = 0; step_count < 256; ++step_count) {
    if (kind == ICEFLOE_MERGE_DONE || kind == ICEFLOE_MERGE_ERROR) break;
    if (kind == ICEFLOE_MERGE_NEED) {
      Check(step.stream >= 0 && step.stream < streams);
      if (in.empty() || in.Small(4) == 0) {
        kind = icefloe_merger_end(m, step.stream, &step);
        continue;
      }
      int64_t rows = 0, file_rows = -1;
      const std::string& header = headers.emplace_back(Header(in, first, &rows, &file_rows));
      if (in.Small(4) == 0) rows = in.Small(12);
      if (in.Small(8) == 0)
        file_rows = file_rows < 0 ? int64_t{in.Small(20)} : -1;  // the wrong holding
      const int32_t stream = step.stream;
      kind = icefloe_merger_push(m, stream, reinterpret_cast<const uint8_t*>(header.data()),
                                 static_cast<int64_t>(header.size()), rows,
                                 file_rows < 0 ? ICEFLOE_ROWS_CARRIED : ICEFLOE_ROWS_IN_FILE,
                                 file_rows < 0 ? 0 : file_rows, &step);
      if (kind != ICEFLOE_MERGE_ERROR)
        held[static_cast<size_t>(stream)].push_back({rows, file_rows});
      continue;
    }
    Check(step.count >= 1);
    const uint64_t span_rows = uint64_t{step.batch_size} * (step.count - 1) + step.last_size;
    if (kind == ICEFLOE_MERGE_CHUNK) {
      Check(step.stream >= 0 && step.stream < streams &&
            !held[static_cast<size_t>(step.stream)].empty());
      const Held h = held[static_cast<size_t>(step.stream)].front();
      held[static_cast<size_t>(step.stream)].pop_front();
      // Rows carried are the chunk as they are; a slice of a file lies in it,
      // and every batch in the slice.
      Check(step.in_file == (h.file_rows >= 0));
      const int64_t rows = step.in_file ? step.rows : h.rows;
      Check(!step.in_file ||
            (step.start >= 0 && step.rows >= 0 && step.start + step.rows <= h.file_rows));
      for (uint32_t i = 0; i < step.count; ++i) {
        const int64_t at = step.offsets == nullptr ? int64_t{step.batch_size} * i : step.offsets[i];
        const int64_t n = i + 1 < step.count ? step.batch_size : step.last_size;
        Check(at >= 0 && at + n <= rows);
      }
      kind = icefloe_merger_next(m, &step);
      continue;
    }
    Check(kind == ICEFLOE_MERGE_BATCH && step.num_pieces >= 1);
    std::vector<std::unique_ptr<icefloe_testing::Batch>> batches;
    std::vector<ArrowArray> arrays;
    for (int32_t k = 0; k < step.num_pieces; ++k) {
      const int32_t s = step.streams[k];
      Check(s >= 0 && s < streams && !held[static_cast<size_t>(s)].empty());
      const Held h = held[static_cast<size_t>(s)].front();
      held[static_cast<size_t>(s)].pop_front();
      Check(!step.in_file || (step.num_pieces == 1 && h.file_rows >= 0 && step.start >= 0 &&
                              step.start + step.rows <= h.file_rows &&
                              step.rows == static_cast<int64_t>(span_rows)));
      // What the caller exports: the message's rows, or the node's file.
      std::vector<uint32_t> rows(static_cast<size_t>(h.file_rows >= 0 ? h.file_rows : h.rows));
      std::iota(rows.begin(), rows.end(), 0u);
      arrays.push_back(batches.emplace_back(icefloe_testing::MakeBatch(rows))->array);
      Check(step.bases == nullptr ||
            (step.bases[k] >= 0 && static_cast<uint64_t>(step.bases[k]) < span_rows));
    }
    icefloe_testing::Schema schema;
    ArrowArray out{};
    if (icefloe_merger_assemble(m, &schema.batch, arrays.data(), &out, nullptr, nullptr, 0) ==
        kIcefloeAssembleOk) {
      Check(out.length == static_cast<int64_t>(span_rows));
      out.release(&out);
    }
    kind = icefloe_merger_next(m, &step);
  }
  icefloe_merger_free(m);
  return 0;
}
