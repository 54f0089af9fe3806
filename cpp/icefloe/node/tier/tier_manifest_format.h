// The tier manifest's format (tier_manifest.h says what a manifest is for):
// one JSON object whose fields are declared as field tables
// (protocol/fields.h), like the wire's messages, so each is type- and
// range-checked and a bad one is refused naming it.
//
//   {"v": 2, "dataset": "...", "generation": 7, "record": {...} or null,
//    "files": [{"file": "<base name>.arrow", "bytes": 123, "crc32": 456,
//               "starts": [<global row id> or null, ...]}, ...],
//    "manifest_crc32": 789}
//
// "manifest_crc32" is the CRC-32 of the rest of the object as it dumps
// compactly (keys sorted), so key order and spacing do not count. Version 2's
// text is unchanged by the field tables: a manifest an earlier node wrote
// reads as one written now.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

namespace icefloe {

/// One tier file a manifest names.
struct TierManifestFile {
  std::string file;  ///< base name, in the manifest's directory
  int64_t bytes = 0;
  uint32_t crc32 = 0;  ///< of every byte of the file
  /// Per record batch of the file, the global row id of its first row, or
  /// nullopt when the copy does not hold that batch (a refresh dropped it).
  std::vector<std::optional<uint64_t>> starts;
};

/// Which tier files hold which rows of one copy.
struct TierManifest {
  /// The format version ("v"), the only one a node reads: version 1 had no
  /// manifest_crc32.
  static constexpr uint64_t kVersion = 2;

  std::string dataset;
  uint64_t generation = 0;
  nlohmann::json record;  ///< the head's catalog record of the copy; null: none yet
  std::vector<TierManifestFile> files;

  /// The manifest's text: versioned, with its checksum.
  std::string Encode() const;

  /// Parses a manifest's text. Invalid, its message starting with `what`,
  /// when the text is no JSON object ("not a manifest"), is of another
  /// version, lacks or fails its checksum, or has a field missing or of
  /// another type or range (naming the field and, in a file entry, the entry).
  static arrow::Result<TierManifest> Decode(std::string_view text, const std::string& what);
};

}  // namespace icefloe
