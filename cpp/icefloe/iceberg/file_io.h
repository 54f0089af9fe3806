// FileIO: one way to open every location a table mentions.
//
// Iceberg metadata and data files are named by URI: local paths, file://,
// s3:// (and s3a://, read the same way), gs://, abfs[s]://. FileIO resolves a
// location to an arrow::fs filesystem plus a path inside it, creating each
// filesystem once (per scheme and bucket/account) and reusing it. S3 options
// come from the standard AWS environment (credentials chain, AWS_REGION,
// AWS_ENDPOINT_URL[_S3]) and may be overridden explicitly, so tests can point
// at a loopback S3 server.
//
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <arrow/filesystem/filesystem.h>
#include <arrow/io/interfaces.h>
#include <arrow/result.h>

namespace icefloe::iceberg {

struct S3Settings {
  std::string endpoint_override;   ///< host:port or URL; empty = AWS (or AWS_ENDPOINT_URL[_S3]).
  std::string region;              ///< empty = AWS_REGION / AWS_DEFAULT_REGION / us-east-1.
  std::string scheme;              ///< "http" or "https"; empty = from endpoint URL or https.
  std::optional<bool> path_style;  ///< default: path-style when an endpoint override is set.
  bool anonymous = false;          ///< no credentials (public buckets).
  std::string access_key;          ///< explicit credentials; empty = default chain.
  std::string secret_key;
  std::string session_token;
};

struct FileIOOptions {
  S3Settings s3;
  /// Largest file ReadAll() will read (metadata.json, manifests).
  int64_t max_read_all_bytes = 512LL << 20;
};

class FileIO {
 public:
  explicit FileIO(FileIOOptions options = {});

  /// Resolves `location` to its filesystem and the path inside it.
  /// Invalid for unsupported schemes, naming the location.
  arrow::Result<std::pair<std::shared_ptr<arrow::fs::FileSystem>, std::string>> Resolve(
      const std::string& location);

  /// Opens a file for random access. IOError naming the location when missing.
  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location);

  /// Reads a whole (small) file. IOError naming the location when missing or
  /// larger than options.max_read_all_bytes.
  arrow::Result<std::string> ReadAll(const std::string& location);

  /// Lists the file names (not paths) directly inside a directory location.
  arrow::Result<std::vector<std::string>> ListDir(const std::string& location);

  /// Whether a file exists at `location`.
  arrow::Result<bool> Exists(const std::string& location);

  const FileIOOptions& options() const { return options_; }

 private:
  FileIOOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<arrow::fs::FileSystem>> filesystems_;
};

/// Reads S3Settings from the environment: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL,
/// AWS_REGION / AWS_DEFAULT_REGION, ICEFLOE_S3_PATH_STYLE, ICEFLOE_S3_ANONYMOUS.
S3Settings S3SettingsFromEnv();

}  // namespace icefloe::iceberg
