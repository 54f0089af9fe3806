#include "icefloe/iceberg/puffin.h"

#include <cstring>

#include <arrow/buffer.h>
#include <arrow/util/compression.h>
#include <arrow/util/crc32.h>
#include <arrow/util/endian.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/roaring.h"

namespace icefloe::iceberg {

namespace {

using json = nlohmann::json;

constexpr std::string_view kMagic = "PFA1";
constexpr char kDvMagic[4] = {'\xD1', '\xD3', '\x39', '\x64'};
// FooterPayloadSize, Flags and the closing magic.
constexpr int64_t kFooterTrailerBytes = 12;
constexpr uint8_t kFlagCompressed = 1;

uint32_t BigEndian32(const char* p) {
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

void PutBigEndian32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

arrow::Status Corrupt(const std::string& location, std::string_view why) {
  return arrow::Status::Invalid("Puffin file ", location, " is corrupt: ", why);
}

// An LZ4-frame payload, inflated to at most kMaxPuffinFooterBytes.
arrow::Result<std::string> Inflate(std::string_view payload, const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto codec, arrow::util::Codec::Create(arrow::Compression::LZ4_FRAME));
  ARROW_ASSIGN_OR_RAISE(auto decompressor, codec->MakeDecompressor());
  std::string out(payload.size() * 4 + 1024, '\0');
  size_t in_pos = 0, out_pos = 0;
  while (!decompressor->IsFinished()) {
    if (out_pos == out.size()) {
      if (static_cast<int64_t>(out.size()) >= kMaxPuffinFooterBytes) {
        return Corrupt(location, "footer inflates past 16 MiB");
      }
      out.resize(std::min<size_t>(out.size() * 2, kMaxPuffinFooterBytes));
    }
    ARROW_ASSIGN_OR_RAISE(
        auto r, decompressor->Decompress(static_cast<int64_t>(payload.size() - in_pos),
                                         reinterpret_cast<const uint8_t*>(payload.data() + in_pos),
                                         static_cast<int64_t>(out.size() - out_pos),
                                         reinterpret_cast<uint8_t*>(out.data() + out_pos)));
    in_pos += static_cast<size_t>(r.bytes_read);
    out_pos += static_cast<size_t>(r.bytes_written);
    if (r.bytes_read == 0 && r.bytes_written == 0 && !r.need_more_output) {
      return Corrupt(location, "compressed footer ends early");
    }
  }
  out.resize(out_pos);
  return out;
}

template <typename T>
arrow::Result<T> Member(const json& obj, const char* key, const std::string& location) {
  auto it = obj.find(key);
  if (it == obj.end()) return Corrupt(location, std::string("blob without '") + key + "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return Corrupt(location, std::string("blob '") + key + "' has the wrong type");
  }
}

arrow::Result<std::map<std::string, std::string>> Properties(const json& obj,
                                                             const std::string& location) {
  std::map<std::string, std::string> out;
  auto it = obj.find("properties");
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_object()) return Corrupt(location, "'properties' is not an object");
  for (const auto& [key, value] : it->items()) {
    if (!value.is_string()) return Corrupt(location, "property '" + key + "' is not a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

arrow::Result<PuffinBlobMetadata> ParseBlob(const json& j, int64_t blobs_end,
                                            const std::string& location) {
  if (!j.is_object()) return Corrupt(location, "a blob is not a JSON object");
  PuffinBlobMetadata blob;
  ARROW_ASSIGN_OR_RAISE(blob.type, Member<std::string>(j, "type", location));
  ARROW_ASSIGN_OR_RAISE(blob.fields, Member<std::vector<int32_t>>(j, "fields", location));
  ARROW_ASSIGN_OR_RAISE(blob.snapshot_id, Member<int64_t>(j, "snapshot-id", location));
  ARROW_ASSIGN_OR_RAISE(blob.sequence_number, Member<int64_t>(j, "sequence-number", location));
  ARROW_ASSIGN_OR_RAISE(blob.offset, Member<int64_t>(j, "offset", location));
  ARROW_ASSIGN_OR_RAISE(blob.length, Member<int64_t>(j, "length", location));
  if (auto it = j.find("compression-codec"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Corrupt(location, "'compression-codec' is not a string");
    blob.compression_codec = it->get<std::string>();
  }
  ARROW_ASSIGN_OR_RAISE(blob.properties, Properties(j, location));
  if (blob.offset < static_cast<int64_t>(kMagic.size()) || blob.length < 0 ||
      blob.length > blobs_end - blob.offset) {
    return Corrupt(location, "blob at offset " + std::to_string(blob.offset) + " of " +
                                 std::to_string(blob.length) + " bytes lies outside the blobs");
  }
  return blob;
}

}  // namespace

arrow::Result<PuffinFooter> ParsePuffinFooter(std::string_view tail, int64_t file_size,
                                              const std::string& location) {
  const auto min_size = static_cast<int64_t>(2 * kMagic.size()) + kFooterTrailerBytes;
  if (file_size < min_size || static_cast<int64_t>(tail.size()) > file_size) {
    return Corrupt(location,
                   "too short for a Puffin file (" + std::to_string(file_size) + " bytes)");
  }
  if (tail.size() < static_cast<size_t>(kFooterTrailerBytes)) {
    return arrow::Status::IOError("Puffin file ", location, ": footer not read");
  }
  const char* trailer = tail.data() + tail.size() - kFooterTrailerBytes;
  if (std::string_view(trailer + 8, 4) != kMagic) return Corrupt(location, "no closing magic");
  int32_t payload_size;
  std::memcpy(&payload_size, trailer, 4);
  payload_size = arrow::bit_util::FromLittleEndian(payload_size);
  const auto flags = static_cast<uint8_t>(trailer[4]);
  // Leading magic, footer magic, payload, trailer.
  if (payload_size < 0 || payload_size > kMaxPuffinFooterBytes ||
      payload_size > file_size - min_size) {
    return Corrupt(
        location, "footer payload size " + std::to_string(payload_size) + " does not fit the file");
  }
  const int64_t footer_bytes = payload_size + kFooterTrailerBytes + 4;
  if (static_cast<int64_t>(tail.size()) < footer_bytes) {
    return arrow::Status::IOError("Puffin file ", location, ": footer of ", footer_bytes,
                                  " bytes not read");
  }
  const char* footer = tail.data() + tail.size() - footer_bytes;
  if (std::string_view(footer, 4) != kMagic) return Corrupt(location, "no footer magic");
  std::string_view payload(footer + 4, static_cast<size_t>(payload_size));
  std::string inflated;
  if (flags & kFlagCompressed) {
    ARROW_ASSIGN_OR_RAISE(inflated, Inflate(payload, location));
    payload = inflated;
  }
  const json j = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corrupt(location, "footer is not a JSON object");
  auto blobs = j.find("blobs");
  if (blobs == j.end() || !blobs->is_array()) return Corrupt(location, "footer has no 'blobs'");
  PuffinFooter out;
  const int64_t blobs_end = file_size - footer_bytes;
  for (const json& b : *blobs) {
    ARROW_ASSIGN_OR_RAISE(auto blob, ParseBlob(b, blobs_end, location));
    out.blobs.push_back(std::move(blob));
  }
  ARROW_ASSIGN_OR_RAISE(out.properties, Properties(j, location));
  return out;
}

arrow::Result<PuffinFooter> ReadPuffinFooter(arrow::io::RandomAccessFile* file,
                                             const std::string& location) {
  auto with_location = [&](const arrow::Status& st) {
    return st.WithMessage("reading Puffin file ", location, ": ", st.message());
  };
  auto size = file->GetSize();
  if (!size.ok()) return with_location(size.status());
  // One read usually holds the whole footer; a second one when it does not.
  int64_t want = std::min<int64_t>(*size, 64 << 10);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto tail = file->ReadAt(*size - want, want);
    if (!tail.ok()) return with_location(tail.status());
    if ((*tail)->size() != want) return Corrupt(location, "file shorter than its size");
    auto footer = ParsePuffinFooter((*tail)->ToString(), *size, location);
    if (footer.ok() || !footer.status().IsIOError() || want == *size) return footer;
    want = std::min<int64_t>(*size, kMaxPuffinFooterBytes + 64);
  }
  return Corrupt(location, "footer not found");
}

arrow::Result<std::vector<int64_t>> DecodeDeletionVector(std::string_view blob, int64_t row_limit,
                                                         const std::string& location) {
  auto bad = [&](std::string_view why) {
    return arrow::Status::Invalid("deletion vector in Puffin file ", location, ": ", why);
  };
  if (blob.size() < 12) return bad("blob of " + std::to_string(blob.size()) + " bytes");
  const uint32_t length = BigEndian32(blob.data());
  if (length != blob.size() - 8) {
    return bad("length field says " + std::to_string(length) + " bytes, the blob holds " +
               std::to_string(blob.size() - 8));
  }
  if (std::memcmp(blob.data() + 4, kDvMagic, 4) != 0) return bad("wrong magic");
  const std::string_view covered = blob.substr(4, length);
  const uint32_t crc = arrow::internal::crc32(0, covered.data(), covered.size());
  if (crc != BigEndian32(blob.data() + 4 + length)) return bad("CRC-32 mismatch");
  size_t consumed = 0;
  auto positions = DecodeRoaring64(covered.substr(4), row_limit, &consumed);
  if (!positions.ok()) return bad(positions.status().message());
  if (consumed != covered.size() - 4) return bad("bytes left after the bitmap");
  return positions;
}

arrow::Result<std::string> EncodeDeletionVector(const std::vector<int64_t>& positions) {
  ARROW_ASSIGN_OR_RAISE(std::string bitmap, EncodeRoaring64(positions, /*use_runs=*/true));
  std::string covered(kDvMagic, 4);
  covered += bitmap;
  std::string out;
  PutBigEndian32(&out, static_cast<uint32_t>(covered.size()));
  out += covered;
  PutBigEndian32(&out, arrow::internal::crc32(0, covered.data(), covered.size()));
  return out;
}

std::string WritePuffinFile(const std::vector<PuffinBlobToWrite>& blobs,
                            std::vector<int64_t>* offsets) {
  std::string out(kMagic);
  json meta = json::array();
  for (const auto& blob : blobs) {
    const auto offset = static_cast<int64_t>(out.size());
    if (offsets != nullptr) offsets->push_back(offset);
    out += blob.bytes;
    meta.push_back({{"type", blob.type},
                    {"fields", json::array()},
                    {"snapshot-id", -1},
                    {"sequence-number", -1},
                    {"offset", offset},
                    {"length", blob.bytes.size()},
                    {"properties", blob.properties}});
  }
  const std::string payload = json{{"blobs", meta}}.dump();
  out += kMagic;
  out += payload;
  const auto size = arrow::bit_util::ToLittleEndian(static_cast<int32_t>(payload.size()));
  out.append(reinterpret_cast<const char*>(&size), 4);
  out.append(4, '\0');
  out += kMagic;
  return out;
}

}  // namespace icefloe::iceberg
