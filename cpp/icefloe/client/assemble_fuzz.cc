// libFuzzer target for icefloe_assemble: what a node sends decides a piece's
// positions, runs, base and source runs (protocol/piece.h decodes them
// unchecked against each other), so any of them may be wrong. The batches
// pass Arrow's basic validation (the caller checks), except that the fuzzer
// may corrupt one interior list or string offset, which that validation does
// not look at. A piece may name a file of segments instead of a batch (its
// source runs then cross them). Every input must be refused or assembled,
// never read or written out of bounds (ASan, UBSan), every piece's batch
// released once by the call and a file's segments never (icefloe_file_free
// does).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "icefloe/client/assemble.h"
#include "icefloe/client/assemble_testing.h"
#include "icefloe/client/fuzz_bytes.h"

namespace {

struct Piece {
  std::unique_ptr<icefloe_testing::Batch> batch;
  std::vector<uint32_t> entries;  // positions, or runs (offset, length pairs)
  std::vector<uint8_t> source;    // packed 12-byte source runs
  std::vector<std::unique_ptr<icefloe_testing::Batch>> segments;  // a file's
  IcefloeFile* file = nullptr;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  icefloe_testing::FuzzBytes in(data, size);
  const int64_t rows = in.Small(64);
  const int num_pieces = 1 + static_cast<int>(in.Small(4));
  std::vector<Piece> pieces(static_cast<size_t>(num_pieces));
  std::vector<IcefloeAssemblePiece> c(static_cast<size_t>(num_pieces));
  int batches = 0;  // pieces that hand the call a batch to release
  for (int p = 0; p < num_pieces; ++p) {
    Piece& piece = pieces[static_cast<size_t>(p)];
    const uint8_t flags = in.U8();
    const uint32_t batch_rows = in.Small(40);
    std::vector<uint32_t> table_rows(batch_rows);
    std::iota(table_rows.begin(), table_rows.end(), static_cast<uint32_t>(p) * 40);
    piece.batch = icefloe_testing::MakeBatch(table_rows);
    if ((flags & 8) && batch_rows > 1) {
      // Corrupt one interior offset: the caller has checked what Arrow's
      // basic validation does (buffer sizes, the first and last offsets).
      auto& offsets = (flags & 16) ? piece.batch->name.offsets : piece.batch->toks.offsets;
      offsets[1 + in.Small(batch_rows - 1)] = static_cast<int32_t>(in.U8()) - 8;
    }
    IcefloeAssemblePiece& out = c[static_cast<size_t>(p)];
    out.batch = &piece.batch->array;
    out.rows = in.Small(48);
    out.base = in.Small(72);
    // The ABI's contract: one position per row (the caller checks that the
    // header's count is the batch's); runs of any count.
    const uint32_t entries = (flags & 1) ? static_cast<uint32_t>(out.rows) : in.Small(48);
    for (uint32_t k = 0; k < entries * ((flags & 1) ? 1 : 2); ++k) {
      piece.entries.push_back(in.Small(80));
    }
    if (flags & 1) {
      out.positions = piece.entries.data();
    } else {
      out.runs = piece.entries.data();
      out.num_runs = entries;
    }
    if (flags & 2) {
      const uint32_t runs = in.Small(8);
      for (uint32_t k = 0; k < runs; ++k) {
        const uint64_t first = in.Small(48);
        const uint32_t length = in.Small(48);
        uint8_t record[12];
        std::memcpy(record, &first, 8);
        std::memcpy(record + 8, &length, 4);
        piece.source.insert(piece.source.end(), record, record + 12);
      }
      out.source_runs = piece.source.data();
      out.num_source_runs = runs;
    }
    if (flags & 32) {  // the piece's rows in a file of up to 4 segments (some empty)
      std::vector<ArrowArray> arrays;
      const uint32_t count = 1 + in.Small(4);
      uint32_t at = static_cast<uint32_t>(p) * 40;
      for (uint32_t k = 0; k < count; ++k) {
        const uint32_t n = in.Small(16);
        std::vector<uint32_t> segment_rows(n);
        std::iota(segment_rows.begin(), segment_rows.end(), at);
        at += n;
        piece.segments.push_back(icefloe_testing::MakeBatch(segment_rows));
        arrays.push_back(piece.segments.back()->array);
      }
      piece.file = icefloe_file_new(static_cast<int32_t>(count), arrays.data());
      if (piece.file == nullptr) std::abort();
      out.file = piece.file;
      if (!(flags & 64)) out.batch = nullptr;  // else: both, refused
    }
    batches += out.batch != nullptr;
  }
  static icefloe_testing::Schema schema;
  icefloe_testing::released = 0;
  ArrowArray out{};
  std::vector<int64_t> inverse(static_cast<size_t>(rows) + 1);
  char error[256];
  const int32_t code = icefloe_assemble(rows, &schema.batch, num_pieces, c.data(), &out,
                                        (size & 1) ? inverse.data() : nullptr, error, sizeof error);
  if (icefloe_testing::released != batches) std::abort();  // every piece's batch, once
  if (code == kIcefloeAssembleOk) {
    if (out.length != rows || out.release == nullptr) std::abort();
    out.release(&out);
  } else if (out.release != nullptr) {
    std::abort();  // nothing handed out on failure
  }
  icefloe_testing::released = 0;
  int segments = 0;
  for (Piece& piece : pieces) {
    segments += static_cast<int>(piece.segments.size());
    icefloe_file_free(piece.file);
  }
  if (icefloe_testing::released != segments) std::abort();  // the files', once
  return 0;
}
