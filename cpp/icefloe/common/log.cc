#include "icefloe/common/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "icefloe/common/mutex.h"

namespace icefloe {
namespace {

Mutex g_mu;
std::string g_component GUARDED_BY(g_mu) = "icefloe";
LogLevel g_min_level GUARDED_BY(g_mu) = LogLevel::kInfo;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void AppendValue(std::string* out, std::string_view v) {
  bool quote = v.empty() || v.find_first_of(" \"=\t\n") != std::string_view::npos;
  if (!quote) {
    out->append(v);
    return;
  }
  out->push_back('"');
  for (char c : v) {
    if (c == '"' || c == '\\') out->push_back('\\');
    if (c == '\n') {
      out->append("\\n");
      continue;
    }
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace

void InitLogging(std::string component, LogLevel min_level) {
  MutexLock lock(&g_mu);
  g_component = std::move(component);
  g_min_level = min_level;
}

void Log(LogLevel level, std::string_view msg, const LogFields& fields) {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[96];
  std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));

  MutexLock lock(&g_mu);
  if (level < g_min_level) return;
  std::string line = "ts=";
  line += ts;
  line += " level=";
  line += LevelName(level);
  line += " component=";
  line += g_component;
  line += " msg=";
  AppendValue(&line, msg);
  for (const auto& [k, v] : fields) {
    line.push_back(' ');
    line += k;
    line.push_back('=');
    AppendValue(&line, v);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace icefloe
