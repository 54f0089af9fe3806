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
// Every error names the location it concerns. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/filesystem/filesystem.h>
#include <arrow/io/interfaces.h>
#include <arrow/result.h>

namespace icefloe::iceberg {

/// How to reach S3. Empty fields fall back to S3SettingsFromEnv(), then to
/// the defaults named below.
struct S3Settings {
  /// host:port or URL; empty = AWS itself.
  std::string endpoint_override;
  /// Empty = the bucket's own region (asked of AWS once per bucket; the SDK's
  /// default when that fails), or us-east-1 with an endpoint override.
  std::string region;
  /// "http" or "https"; empty = from the endpoint URL, else https.
  std::string scheme;
  /// Default: path-style when an endpoint override is set, else virtual-host.
  std::optional<bool> path_style;
  /// No credentials (public buckets).
  bool anonymous = false;
  /// Explicit credentials (both keys, optional token); empty = the AWS default
  /// credential chain (environment, profile, web identity, instance metadata).
  std::string access_key;
  std::string secret_key;
  std::string session_token;
};

/// Options of a FileIO.
struct FileIOOptions {
  S3Settings s3;
  /// Largest file ReadAll() will read (metadata.json, manifests).
  int64_t max_read_all_bytes = 512LL << 20;
};

/// Opens table locations; see the header comment.
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

  /// Lists the names (not paths) of the files directly inside a directory
  /// location, sorted. IOError naming the location when it does not exist.
  arrow::Result<std::vector<std::string>> ListDir(const std::string& location);

  /// Whether a file (not a directory) exists at `location`.
  arrow::Result<bool> Exists(const std::string& location);

  /// The options this FileIO was made with.
  const FileIOOptions& options() const { return options_; }

 private:
  FileIOOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<arrow::fs::FileSystem>> filesystems_;
};

/// Reads S3Settings from the environment: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL,
/// AWS_REGION / AWS_DEFAULT_REGION, ICEFLOE_S3_PATH_STYLE, ICEFLOE_S3_ANONYMOUS.
S3Settings S3SettingsFromEnv();

/// Rewrites the Hadoop spellings s3a:// and s3n:// to s3://; other locations
/// are returned unchanged.
std::string NormalizeLocation(const std::string& location);

}  // namespace icefloe::iceberg
