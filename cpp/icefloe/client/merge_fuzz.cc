// libFuzzer target for the merge (merge.h): what nodes send decides every
// header a merge sees, in any order, from any number of streams, with any
// row counts and chunk runs. Every input must end in DONE or a refusal within
// a bounded number of steps, every step must name only messages the caller
// pushed and not yet took, with bases inside the batch or span, and every
// batch handed out must assemble or be refused (ASan and UBSan watch the
// rest).
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

// A header: mostly well formed with small fields, sometimes raw bytes; *rows
// gets the rows it implies (a run's length, a chunk's batches' rows).
std::string Header(icefloe_testing::FuzzBytes& in, uint64_t first, int64_t* rows) {
  *rows = 0;
  if (in.Small(8) == 0) {
    std::string raw(in.Small(64), '\0');
    for (char& c : raw) c = static_cast<char>(in.U8());
    return raw;
  }
  icefloe::PieceInfo p;
  p.batch = in.Small(2) == 0 ? in.Small(6) : first + in.Small(3);
  p.batch_size = in.Small(5) + 1;
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
  return icefloe::EncodePiece(p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  icefloe_testing::FuzzBytes in(data, size);
  const int32_t streams = static_cast<int32_t>(in.Small(4)) + 1;
  const uint64_t first = in.Small(3);
  const uint64_t num_batches = in.Small(8);
  IcefloeMerger* m = icefloe_merger_new(streams, first, num_batches);
  Check(m != nullptr);
  // Each stream's messages pushed and not yet taken: their rows. The headers
  // live as long as the merge (it reads them until their batch is assembled).
  std::vector<std::deque<int64_t>> held(static_cast<size_t>(streams));
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
      int64_t rows = 0;
      const std::string& header = headers.emplace_back(Header(in, first, &rows));
      if (in.Small(4) == 0) rows = in.Small(12);
      std::vector<int64_t> starts, lengths;
      for (uint32_t i = in.Small(3) == 0 ? in.Small(4) : 0; i > 0; --i) {
        starts.push_back(in.Small(20));
        lengths.push_back(in.Small(6));
      }
      const int32_t stream = step.stream;
      kind = icefloe_merger_push(m, stream, reinterpret_cast<const uint8_t*>(header.data()),
                                 static_cast<int64_t>(header.size()), rows,
                                 static_cast<int32_t>(in.Small(3)), starts.data(), lengths.data(),
                                 static_cast<int64_t>(starts.size()), nullptr, &step);
      if (kind != ICEFLOE_MERGE_ERROR) held[static_cast<size_t>(stream)].push_back(rows);
      continue;
    }
    Check(step.count >= 1);
    const uint64_t span_rows = uint64_t{step.batch_size} * (step.count - 1) + step.last_size;
    if (kind == ICEFLOE_MERGE_CHUNK) {
      Check(step.stream >= 0 && step.stream < streams &&
            !held[static_cast<size_t>(step.stream)].empty());
      held[static_cast<size_t>(step.stream)].pop_front();
      kind = icefloe_merger_next(m, &step);
      continue;
    }
    Check(kind == ICEFLOE_MERGE_BATCH && step.num_pieces >= 1);
    std::vector<std::unique_ptr<icefloe_testing::Batch>> batches;
    std::vector<ArrowArray> arrays;
    for (int32_t k = 0; k < step.num_pieces; ++k) {
      const int32_t s = step.streams[k];
      Check(s >= 0 && s < streams && !held[static_cast<size_t>(s)].empty());
      std::vector<uint32_t> rows(static_cast<size_t>(held[static_cast<size_t>(s)].front()));
      held[static_cast<size_t>(s)].pop_front();
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
