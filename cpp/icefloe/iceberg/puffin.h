// Puffin files and the deletion vectors (Iceberg v3) stored in them.
//
// A Puffin file is `Magic | Blob ... | Footer`, the footer
// `Magic | FooterPayload | FooterPayloadSize | Flags | Magic`, with Magic
// "PFA1", FooterPayloadSize a 4-byte little-endian length, Flags 4 bytes (bit
// 0 of the first: the payload is LZ4-compressed) and the payload UTF-8 JSON
// {"blobs": [{"type", "fields", "snapshot-id", "sequence-number", "offset",
// "length", "compression-codec"?, "properties"?}], "properties"?}.
//
// A deletion vector is a `deletion-vector-v1` blob: a 4-byte big-endian
// length of what follows up to the checksum, the magic D1 D3 39 64, the
// deleted row positions as a 64-bit Roaring bitmap (roaring.h), and a 4-byte
// big-endian CRC-32 of the magic and the bitmap. The manifest entry of a
// deletion vector names its Puffin file, the blob's `content_offset` and
// `content_size_in_bytes`, the data file it applies to
// (`referenced_data_file`) and, as `record_count`, how many rows it deletes.
// Several vectors may share one Puffin file.
//
// Every error names the Puffin file and says what is wrong; nothing here
// trusts a length or count before checking it against the bytes present.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>

namespace icefloe::iceberg {

/// The blob type of a deletion vector.
inline constexpr std::string_view kDeletionVectorBlobType = "deletion-vector-v1";
/// The largest footer payload read, compressed or not.
inline constexpr int64_t kMaxPuffinFooterBytes = 16 << 20;

/// One blob as the footer describes it.
struct PuffinBlobMetadata {
  std::string type;
  std::vector<int32_t> fields;
  int64_t snapshot_id = -1;
  int64_t sequence_number = -1;
  int64_t offset = 0;
  int64_t length = 0;
  std::optional<std::string> compression_codec;
  std::map<std::string, std::string> properties;
};

/// A parsed Puffin footer.
struct PuffinFooter {
  std::vector<PuffinBlobMetadata> blobs;
  std::map<std::string, std::string> properties;
};

/// Parses the footer of a Puffin file of `file_size` bytes from `tail`, the
/// file's last tail.size() bytes (the whole file is fine). Checks the magics,
/// the payload size, that every blob lies between the leading magic and the
/// footer. IOError naming `location` when `tail` is too short to hold the
/// footer its size field announces (see ReadPuffinFooter), Invalid otherwise.
arrow::Result<PuffinFooter> ParsePuffinFooter(std::string_view tail, int64_t file_size,
                                              const std::string& location);

/// Reads and parses the footer of an open Puffin file (two reads at most).
arrow::Result<PuffinFooter> ReadPuffinFooter(arrow::io::RandomAccessFile* file,
                                             const std::string& location);

/// Decodes a `deletion-vector-v1` blob into the deleted row positions,
/// ascending. Each must be below `row_limit` (the data file's row count).
/// Invalid naming `location` for a wrong length, magic or checksum, or a
/// malformed bitmap.
arrow::Result<std::vector<int64_t>> DecodeDeletionVector(std::string_view blob, int64_t row_limit,
                                                         const std::string& location);

/// Encodes ascending, distinct positions as a `deletion-vector-v1` blob
/// (tests and fixtures).
arrow::Result<std::string> EncodeDeletionVector(const std::vector<int64_t>& positions);

/// A blob to write with WritePuffinFile.
struct PuffinBlobToWrite {
  std::string type;
  std::string bytes;
  std::map<std::string, std::string> properties;
};

/// The bytes of a Puffin file holding `blobs` in order, with an uncompressed
/// footer (tests and fixtures). `offsets` (optional) receives each blob's offset.
std::string WritePuffinFile(const std::vector<PuffinBlobToWrite>& blobs,
                            std::vector<int64_t>* offsets = nullptr);

}  // namespace icefloe::iceberg
