#include "icefloe/protocol/piece.h"

#include <bit>
#include <cstring>

namespace icefloe {

namespace {

constexpr size_t kRunBytes = 8;
constexpr size_t kPositionBytes = 4;
constexpr size_t kSourceBytes = 12;

template <typename T>
void Put(std::string* out, T v) {
  char buf[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) buf[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  out->append(buf, sizeof(T));
}

template <typename T>
T Get(const uint8_t* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

// Calls fn(offset, length) for each run of the piece's positions: its runs
// as they are, or the maximal runs of `positions` when given.
template <typename Fn>
void ForEachRun(const PieceInfo& piece, Fn&& fn) {
  const std::vector<uint32_t>& given = piece.positions;
  if (given.empty()) {
    for (const auto& run : piece.runs) fn(run.offset, run.length);
    return;
  }
  for (size_t i = 0; i < given.size();) {
    size_t end = i + 1;
    while (end < given.size() && given[end] == given[end - 1] + 1) ++end;
    fn(given[i], static_cast<uint32_t>(end - i));
    i = end;
  }
}

}  // namespace

std::string EncodePiece(const PieceInfo& piece) {
  uint64_t rows = 0;
  uint64_t runs = 0;
  if (!piece.whole) {
    ForEachRun(piece, [&](uint32_t, uint32_t length) {
      rows += length;
      ++runs;
    });
  }
  // Runs take 8 bytes each, positions 4 bytes a row: the smaller one.
  const bool positions = rows < 2 * runs;
  uint8_t flags = 0;
  if (positions) flags |= kPiecePositions;
  if (piece.whole) flags |= kPieceWhole;
  if (piece.count > 1) flags |= kPieceSpan;
  if (piece.by_reference) flags |= kPieceByReference;
  const uint64_t entries = positions ? rows : runs;
  std::string out(kPieceMagic);
  out.reserve(kPieceHeaderBytes + entries * (positions ? kPositionBytes : kRunBytes) +
              piece.source.size() * kSourceBytes);
  Put<uint8_t>(&out, kPieceVersion);
  Put<uint8_t>(&out, flags);
  Put<uint16_t>(&out, 0);
  Put<uint64_t>(&out, piece.batch);
  Put<uint32_t>(&out, piece.batch_size);
  Put<uint32_t>(&out, piece.count);
  Put<uint32_t>(&out, piece.count > 1 ? piece.last_size : piece.batch_size);
  Put<uint32_t>(&out, static_cast<uint32_t>(entries));
  Put<uint32_t>(&out, piece.by_reference ? static_cast<uint32_t>(piece.source.size()) : 0);
  if (positions && !piece.positions.empty() && std::endian::native == std::endian::little) {
    out.append(reinterpret_cast<const char*>(piece.positions.data()),  // as they are
               kPositionBytes * piece.positions.size());
  } else if (positions) {
    ForEachRun(piece, [&](uint32_t offset, uint32_t length) {
      for (uint32_t k = 0; k < length; ++k) Put<uint32_t>(&out, offset + k);
    });
  } else if (!piece.whole) {
    ForEachRun(piece, [&](uint32_t offset, uint32_t length) {
      Put<uint32_t>(&out, offset);
      Put<uint32_t>(&out, length);
    });
  }
  if (piece.by_reference) {
    for (const auto& run : piece.source) {
      Put<uint64_t>(&out, run.start);
      Put<uint32_t>(&out, run.length);
    }
  }
  return out;
}

const char* PieceErrorText(PieceError error) noexcept {
  switch (error) {
    case PieceError::kOk:
      return "ok";
    case PieceError::kTruncated:
      return "shorter than its header";
    case PieceError::kBadMagic:
      return "bad magic";
    case PieceError::kBadVersion:
      return "a version this client does not read";
    case PieceError::kUnknownFlags:
      return "unknown flags";
    case PieceError::kReserved:
      return "reserved bytes are not zero";
    case PieceError::kBadCount:
      return "its batch count and span flag disagree";
    case PieceError::kBadLastSize:
      return "its last batch's rows are not in 1..batch_size";
    case PieceError::kTooManyRows:
      return "a span of more than 2^32 - 1 positions";
    case PieceError::kWholeEntries:
      return "whole batches with runs or positions";
    case PieceError::kStraySources:
      return "source runs without the by-reference flag";
    case PieceError::kLength:
      return "its length is not its header's";
  }
  return "unknown error";
}

PieceError ParsePiece(const uint8_t* data, size_t size, PieceView* out) noexcept {
  if (size >= kPieceMagic.size() && std::memcmp(data, kPieceMagic.data(), 4) != 0) {
    return PieceError::kBadMagic;
  }
  if (size < kPieceHeaderBytes) return PieceError::kTruncated;
  if (data[4] != kPieceVersion) return PieceError::kBadVersion;
  PieceView v;
  v.flags = data[5];
  if ((v.flags & ~kPieceKnownFlags) != 0) return PieceError::kUnknownFlags;
  if (Get<uint16_t>(data + 6) != 0) return PieceError::kReserved;
  v.batch = Get<uint64_t>(data + 8);
  v.batch_size = Get<uint32_t>(data + 16);
  v.count = Get<uint32_t>(data + 20);
  v.last_size = Get<uint32_t>(data + 24);
  v.entries = Get<uint32_t>(data + 28);
  v.sources = Get<uint32_t>(data + 32);
  if (v.count == 0 || v.has(kPieceSpan) != (v.count > 1)) return PieceError::kBadCount;
  if (v.last_size == 0 || v.last_size > v.batch_size ||
      (v.count == 1 && v.last_size != v.batch_size)) {
    return PieceError::kBadLastSize;
  }
  if (v.span_rows() > UINT32_MAX) return PieceError::kTooManyRows;
  if (v.has(kPieceWhole) && (v.entries != 0 || v.has(kPiecePositions))) {
    return PieceError::kWholeEntries;
  }
  if (!v.has(kPieceByReference) && v.sources != 0) return PieceError::kStraySources;
  const uint64_t entry_bytes =
      uint64_t{v.entries} * (v.has(kPiecePositions) ? kPositionBytes : kRunBytes);
  if (size - kPieceHeaderBytes != entry_bytes + uint64_t{v.sources} * kSourceBytes) {
    return PieceError::kLength;
  }
  v.entry_bytes = data + kPieceHeaderBytes;
  v.source_bytes = v.entry_bytes + entry_bytes;
  *out = v;
  return PieceError::kOk;
}

PieceError DecodePiece(std::string_view bytes, PieceInfo* out) {
  PieceView v;
  const PieceError error =
      ParsePiece(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &v);
  if (error != PieceError::kOk) return error;
  PieceInfo p;
  p.batch = v.batch;
  p.batch_size = v.batch_size;
  p.count = v.count;
  p.last_size = v.count > 1 ? v.last_size : 0;
  p.whole = v.has(kPieceWhole);
  p.by_reference = v.has(kPieceByReference);
  for (uint32_t i = 0; i < v.entries; ++i) {
    if (v.has(kPiecePositions)) {
      p.positions.push_back(Get<uint32_t>(v.entry_bytes + kPositionBytes * i));
    } else {
      const uint8_t* run = v.entry_bytes + kRunBytes * i;
      p.runs.push_back({Get<uint32_t>(run), Get<uint32_t>(run + 4)});
    }
  }
  for (uint32_t i = 0; i < v.sources; ++i) {
    const uint8_t* run = v.source_bytes + kSourceBytes * i;
    p.source.push_back({Get<uint64_t>(run), Get<uint32_t>(run + 8)});
  }
  *out = std::move(p);
  return PieceError::kOk;
}

}  // namespace icefloe
