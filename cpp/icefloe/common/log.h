// Structured logs: one logfmt line per event on stderr.
//
//   ts=2026-11-21T10:00:00.123Z level=info component=node msg="loaded" rows=1000
//
// Thread-safe. Values are quoted when they contain spaces, quotes or '='.
// Never pass secrets: nothing here redacts.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace icefloe {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using LogFields = std::vector<std::pair<std::string, std::string>>;

/// Sets the process-wide component name and minimum level.
void InitLogging(std::string component, LogLevel min_level = LogLevel::kInfo);

void Log(LogLevel level, std::string_view msg, const LogFields& fields = {});
inline void LogInfo(std::string_view msg, const LogFields& fields = {}) {
  Log(LogLevel::kInfo, msg, fields);
}
inline void LogWarn(std::string_view msg, const LogFields& fields = {}) {
  Log(LogLevel::kWarn, msg, fields);
}
inline void LogError(std::string_view msg, const LogFields& fields = {}) {
  Log(LogLevel::kError, msg, fields);
}

}  // namespace icefloe
