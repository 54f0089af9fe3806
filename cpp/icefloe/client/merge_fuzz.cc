// libFuzzer target for the merge (merge.h): what nodes send decides every
// header a merge sees, in any order, from any number of streams, with any
// row counts and chunk runs. Every input must end in DONE or a refusal within
// a bounded number of steps, and every step must name only messages the
// caller pushed and not yet took, with bases inside the batch or span (ASan
// and UBSan watch the rest).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "icefloe/client/merge.h"
#include "icefloe/protocol/piece.h"

namespace {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t U8() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t Small(uint32_t below) { return below == 0 ? 0 : U8() % below; }
  bool empty() const { return at_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

void Check(bool ok) {
  if (!ok) std::abort();
}

// A header: mostly well formed with small fields, sometimes raw bytes.
std::string Header(Bytes& in) {
  if (in.Small(8) == 0) {
    std::string raw(in.Small(64), '\0');
    for (char& c : raw) c = static_cast<char>(in.U8());
    return raw;
  }
  icefloe::PieceInfo p;
  p.batch = in.Small(6);
  p.batch_size = in.Small(5) + 1;
  p.count = in.Small(4) + 1;
  p.last_size = p.count > 1 ? in.Small(p.batch_size) + 1 : 0;
  p.whole = in.Small(3) == 0;
  if (!p.whole) p.runs.push_back({in.Small(8), in.Small(8)});
  return icefloe::EncodePiece(p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const int32_t streams = static_cast<int32_t>(in.Small(4)) + 1;
  const uint64_t first = in.Small(3);
  const uint64_t num_batches = in.Small(8);
  IcefloeMerger* m = icefloe_merger_new(streams, first, num_batches);
  Check(m != nullptr);
  std::vector<int> held(static_cast<size_t>(streams), 0);  // pushed, not yet taken
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
      const std::string header = Header(in);
      const int64_t rows = in.Small(12);
      std::vector<int64_t> starts, lengths;
      for (uint32_t i = in.Small(3) == 0 ? in.Small(4) : 0; i > 0; --i) {
        starts.push_back(in.Small(20));
        lengths.push_back(in.Small(6));
      }
      const int32_t pushed =
          icefloe_merger_push(m, step.stream, reinterpret_cast<const uint8_t*>(header.data()),
                              static_cast<int64_t>(header.size()), rows, in.Small(2), starts.data(),
                              lengths.data(), static_cast<int64_t>(starts.size()), nullptr);
      if (pushed != 0) break;
      ++held[static_cast<size_t>(step.stream)];
      continue;
    }
    Check(step.count >= 1);
    const uint64_t span_rows = uint64_t{step.batch_size} * (step.count - 1) + step.last_size;
    if (kind == ICEFLOE_MERGE_CHUNK) {
      Check(step.stream >= 0 && step.stream < streams &&
            held[static_cast<size_t>(step.stream)] > 0);
      --held[static_cast<size_t>(step.stream)];
      kind = icefloe_merger_next(m, &step);
      continue;
    }
    Check(kind == ICEFLOE_MERGE_BATCH && step.num_pieces >= 1);
    for (int32_t k = 0; k < step.num_pieces; ++k) {
      const int32_t s = step.streams[k];
      Check(s >= 0 && s < streams && held[static_cast<size_t>(s)] > 0);
      --held[static_cast<size_t>(s)];
      Check(step.bases == nullptr ||
            (step.bases[k] >= 0 && static_cast<uint64_t>(step.bases[k]) < span_rows));
    }
    kind = icefloe_merger_next(m, &step);
  }
  icefloe_merger_free(m);
  return 0;
}
