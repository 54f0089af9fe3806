#include "icefloe/node/tier/tier_manifest_format.h"

#include <limits>
#include <span>

#include <arrow/util/crc32.h>

#include "icefloe/protocol/fields.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr const char* kVersionKey = "v";
// The manifest's own checksum: CRC-32 of the rest of it.
constexpr const char* kChecksumKey = "manifest_crc32";
// A tier file's base name: one entry of its directory.
constexpr uint64_t kMaxFileName = 255;
// Lists are bounded by the text: a node reads no manifest over 256 MiB
// (tier_manifest.cc).
constexpr uint64_t kMaxItems = std::numeric_limits<uint64_t>::max();

const Field<TierManifest> kManifestFields[] = {
    {Str("dataset", kRequired, Values(1, 1024)), &TierManifest::dataset},
    {Uint("generation", kRequired, Values(0, std::numeric_limits<uint64_t>::max())),
     &TierManifest::generation},
};
const FieldSpec kRecord = ObjectField("record", kOptional);
const FieldSpec kFiles = ObjectList("files", kRequired, Values(0, kMaxItems), "tier file");

const Field<TierManifestFile> kFileFields[] = {
    {Str("file", kRequired, Values(1, kMaxFileName)), &TierManifestFile::file},
    {Int("bytes", kRequired, Values(0, std::numeric_limits<int64_t>::max())),
     &TierManifestFile::bytes},
    {Uint("crc32", kRequired, Values(0, std::numeric_limits<uint32_t>::max())),
     &TierManifestFile::crc32},
};
// Each item a global row id, or null for a batch the copy does not hold.
const FieldSpec kStarts =
    ListOf(FieldType::kUintList, "starts", kRequired, Values(0, kMaxRows), Values(0, kMaxItems));

uint32_t ContentCrc32(const json& manifest_without_checksum) {
  const std::string text = Dump(manifest_without_checksum);
  return arrow::internal::crc32(0, text.data(), text.size());
}

arrow::Result<TierManifestFile> DecodeFile(const json& item, std::string what) {
  JsonFields in(item, std::move(what));
  TierManifestFile f;
  ARROW_RETURN_NOT_OK(ReadFields<TierManifestFile>(in, kFileFields, &f));
  ARROW_ASSIGN_OR_RAISE(const json* starts, in.Find(kStarts));
  ARROW_ASSIGN_OR_RAISE(starts, in.List(*starts, kStarts));
  f.starts.reserve(starts->size());
  for (size_t i = 0; i < starts->size(); ++i) {
    const json& s = (*starts)[i];
    if (s.is_null()) {
      f.starts.push_back(std::nullopt);
    } else {
      ARROW_ASSIGN_OR_RAISE(uint64_t start, in.Uint(s, kStarts, i));
      f.starts.push_back(start);
    }
  }
  return f;
}

// Refuses a manifest another version wrote (it may mean other things by its
// fields), then one whose content does not match its checksum: the data files
// prove their bytes, this proves which rows they hold (a manifest edited into
// other valid JSON would serve rows at wrong ids).
arrow::Status CheckEnvelope(const json& m, const std::string& what) {
  const auto v = m.find(kVersionKey);
  if (v == m.end() || !v->is_number_unsigned() || v->get<uint64_t>() != TierManifest::kVersion) {
    return arrow::Status::Invalid(what, ": version ", v == m.end() ? "none" : Dump(*v),
                                  ", this node reads version ", TierManifest::kVersion);
  }
  const auto checksum = m.find(kChecksumKey);
  if (checksum == m.end() || !checksum->is_number_unsigned()) {
    return arrow::Status::Invalid(what, ": no ", kChecksumKey);
  }
  json content = m;
  content.erase(kChecksumKey);
  if (ContentCrc32(content) != checksum->get<uint64_t>()) {
    return arrow::Status::Invalid(what, ": its content does not match its checksum (", kChecksumKey,
                                  " ", checksum->get<uint64_t>(), "): edited or corrupt");
  }
  return arrow::Status::OK();
}

}  // namespace

std::string TierManifest::Encode() const {
  json m = {{kVersionKey, kVersion}};
  WriteFields<TierManifest>(kManifestFields, *this, &m);
  m[std::string(kRecord.name)] = record;
  json entries = json::array();
  for (const TierManifestFile& f : files) {
    json entry = json::object();
    WriteFields<TierManifestFile>(kFileFields, f, &entry);
    json starts = json::array();
    for (const auto& s : f.starts) starts.push_back(s ? json(*s) : json(nullptr));
    entry[std::string(kStarts.name)] = std::move(starts);
    entries.push_back(std::move(entry));
  }
  m[std::string(kFiles.name)] = std::move(entries);
  m[kChecksumKey] = ContentCrc32(m);
  return Dump(m);
}

arrow::Result<TierManifest> TierManifest::Decode(std::string_view text, const std::string& what) {
  const json m = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object()) return arrow::Status::Invalid(what, ": not a manifest");
  ARROW_RETURN_NOT_OK(CheckEnvelope(m, what));
  JsonFields in(m, what);
  TierManifest out;
  ARROW_RETURN_NOT_OK(ReadFields<TierManifest>(in, kManifestFields, &out));
  ARROW_ASSIGN_OR_RAISE(const json* record, in.Find(kRecord));
  if (record != nullptr && !record->is_null()) {
    if (!record->is_object()) return in.Bad(kRecord, "an object or null", *record);
    out.record = *record;
  }
  ARROW_ASSIGN_OR_RAISE(const json* files, in.Find(kFiles));
  ARROW_ASSIGN_OR_RAISE(files, in.List(*files, kFiles));
  out.files.reserve(files->size());
  for (size_t i = 0; i < files->size(); ++i) {
    const json& item = (*files)[i];
    if (!item.is_object()) return in.Bad(kFiles, "a list of objects", item, i);
    ARROW_ASSIGN_OR_RAISE(TierManifestFile f,
                          DecodeFile(item, what + " 'files'[" + std::to_string(i) + "]"));
    out.files.push_back(std::move(f));
  }
  return out;
}

}  // namespace icefloe
