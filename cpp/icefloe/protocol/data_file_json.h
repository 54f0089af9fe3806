// The JSON form of an Iceberg data or delete file inside node.load (and the
// `icefloe-head plan --json` output). One field table in data_file_json.cc
// lists every field: add new DataFile members there.
#pragma once

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/data_file.h"
#include "icefloe/protocol/fields.h"

namespace icefloe {

nlohmann::json DataFileToJson(const iceberg::DataFile& file);
/// Invalid naming `what` and the field for anything out of type or range.
arrow::Result<iceberg::DataFile> DataFileFromJson(const nlohmann::json& j,
                                                  std::string what = "data file");
MessageSpec DataFileSpec();

}  // namespace icefloe
