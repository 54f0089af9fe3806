#include "icefloe/iceberg/file_io.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include <arrow/buffer.h>
#include <arrow/filesystem/azurefs.h>
#include <arrow/filesystem/gcsfs.h>
#include <arrow/filesystem/localfs.h>
#include <arrow/filesystem/s3fs.h>

namespace icefloe::iceberg {

namespace {

/// A location split into its scheme (lower case; empty for a plain path) and
/// what follows "scheme:".
struct SplitLocation {
  std::string scheme;
  std::string rest;
};

SplitLocation Split(const std::string& location) {
  // RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then ':'.
  // Single letters are left alone so that "C:/x" style paths stay paths.
  size_t i = 0;
  while (i < location.size() && (std::isalnum(static_cast<unsigned char>(location[i])) ||
                                 location[i] == '+' || location[i] == '-' || location[i] == '.')) {
    ++i;
  }
  if (i < 2 || i >= location.size() || location[i] != ':' ||
      !std::isalpha(static_cast<unsigned char>(location[0]))) {
    return {"", location};
  }
  std::string scheme = location.substr(0, i);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return {std::move(scheme), location.substr(i + 1)};
}

bool IsS3Scheme(const std::string& scheme) {
  return scheme == "s3" || scheme == "s3a" || scheme == "s3n";
}

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::optional<bool> ParseBool(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return std::nullopt;
}

arrow::Status Annotate(const arrow::Status& st, const std::string& location) {
  if (st.ok()) return st;
  return st.WithMessage(location, ": ", st.message());
}

/// S3 must be initialized once per process, and calls serialized.
arrow::Status EnsureS3() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return arrow::fs::EnsureS3Initialized();
}

arrow::Result<arrow::fs::S3Options> MakeS3Options(const S3Settings& explicit_settings,
                                                  const std::string& bucket) {
  S3Settings s = explicit_settings;
  const S3Settings env = S3SettingsFromEnv();
  if (s.endpoint_override.empty()) s.endpoint_override = env.endpoint_override;
  if (s.region.empty()) s.region = env.region;
  if (!s.path_style.has_value()) s.path_style = env.path_style;
  s.anonymous = s.anonymous || env.anonymous;

  arrow::fs::S3Options options = arrow::fs::S3Options::Defaults();
  std::string scheme = s.scheme;
  std::string endpoint = s.endpoint_override;
  if (auto sep = endpoint.find("://"); sep != std::string::npos) {
    if (scheme.empty()) scheme = endpoint.substr(0, sep);
    endpoint = endpoint.substr(sep + 3);
  }
  endpoint = endpoint.substr(0, endpoint.find('/'));  // a URL's path is not part of the host
  if (scheme.empty()) scheme = "https";
  if (scheme != "http" && scheme != "https") {
    return arrow::Status::Invalid("S3 scheme must be http or https, got '", scheme, "'");
  }
  options.scheme = scheme;
  options.endpoint_override = endpoint;
  if (!s.region.empty()) {
    options.region = s.region;
  } else if (!endpoint.empty()) {
    options.region = "us-east-1";
  } else {
    // Real AWS: ask where the bucket lives; otherwise leave it to the SDK.
    auto region = arrow::fs::ResolveS3BucketRegion(bucket);
    if (region.ok()) options.region = *region;
  }
  if (s.path_style.has_value() && !endpoint.empty()) {
    options.force_virtual_addressing = !*s.path_style;
  }
  if (s.anonymous) {
    options.ConfigureAnonymousCredentials();
  } else if (!s.access_key.empty() || !s.secret_key.empty()) {
    if (s.access_key.empty() || s.secret_key.empty()) {
      return arrow::Status::Invalid("S3 credentials need both an access key and a secret key");
    }
    options.ConfigureAccessKey(s.access_key, s.secret_key, s.session_token);
  }
  return options;
}

}  // namespace

S3Settings S3SettingsFromEnv() {
  S3Settings s;
  s.endpoint_override = GetEnv("AWS_ENDPOINT_URL_S3");
  if (s.endpoint_override.empty()) s.endpoint_override = GetEnv("AWS_ENDPOINT_URL");
  s.region = GetEnv("AWS_REGION");
  if (s.region.empty()) s.region = GetEnv("AWS_DEFAULT_REGION");
  s.path_style = ParseBool(GetEnv("ICEFLOE_S3_PATH_STYLE"));
  s.anonymous = ParseBool(GetEnv("ICEFLOE_S3_ANONYMOUS")).value_or(false);
  return s;
}

std::string NormalizeLocation(const std::string& location) {
  SplitLocation split = Split(location);
  if (split.scheme == "s3a" || split.scheme == "s3n") return "s3:" + split.rest;
  return location;
}

FileIO::FileIO(FileIOOptions options) : options_(std::move(options)) {}

arrow::Result<std::pair<std::shared_ptr<arrow::fs::FileSystem>, std::string>> FileIO::Resolve(
    const std::string& location) {
  if (location.empty()) return arrow::Status::Invalid("empty file location");
  SplitLocation split = Split(location);
  std::string key;
  std::string path;
  std::function<arrow::Result<std::shared_ptr<arrow::fs::FileSystem>>()> make;

  if (split.scheme.empty() || split.scheme == "file") {
    path = split.rest;
    if (split.scheme == "file" && path.rfind("//", 0) == 0) {
      // file://host/path: only an empty host (file:///path) or localhost is local.
      size_t slash = path.find('/', 2);
      std::string host = path.substr(2, slash == std::string::npos ? slash : slash - 2);
      if (!host.empty() && host != "localhost") {
        return arrow::Status::Invalid("file location with a remote host: ", location);
      }
      path = slash == std::string::npos ? "/" : path.substr(slash);
    }
    if (path.empty()) return arrow::Status::Invalid("empty local path in location ", location);
    // file:/a/b (Hadoop's spelling) and plain paths; relative paths are made absolute.
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    if (ec) return arrow::Status::IOError(location, ": ", ec.message());
    path = absolute.lexically_normal().string();
    key = "file";
    make = []() -> arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> {
      return std::make_shared<arrow::fs::LocalFileSystem>();
    };
  } else if (IsS3Scheme(split.scheme)) {
    if (split.rest.rfind("//", 0) != 0) {
      return arrow::Status::Invalid("malformed S3 location (expected s3://bucket/key): ", location);
    }
    path = split.rest.substr(2);
    std::string bucket = path.substr(0, path.find('/'));
    if (bucket.empty()) return arrow::Status::Invalid("S3 location without a bucket: ", location);
    while (path.size() > bucket.size() + 1 && path.back() == '/') path.pop_back();
    key = "s3://" + bucket;
    make = [this, bucket]() -> arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> {
      ARROW_RETURN_NOT_OK(EnsureS3());
      ARROW_ASSIGN_OR_RAISE(auto options, MakeS3Options(options_.s3, bucket));
      ARROW_ASSIGN_OR_RAISE(auto fs, arrow::fs::S3FileSystem::Make(options));
      return fs;
    };
  } else if (split.scheme == "gs" || split.scheme == "gcs") {
    std::string uri = "gs:" + split.rest;
    auto options = arrow::fs::GcsOptions::FromUri(uri, &path);
    if (!options.ok()) return Annotate(options.status(), location);
    key = "gs://" + path.substr(0, path.find('/'));
    make = [options = *options]() -> arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> {
      ARROW_ASSIGN_OR_RAISE(auto fs, arrow::fs::GcsFileSystem::Make(options));
      return fs;
    };
  } else if (split.scheme == "abfs" || split.scheme == "abfss") {
    auto options = arrow::fs::AzureOptions::FromUri(location, &path);
    if (!options.ok()) return Annotate(options.status(), location);
    key = "abfs://" + options->account_name + "/" + options->blob_storage_authority;
    make = [options = *options]() -> arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> {
      ARROW_ASSIGN_OR_RAISE(auto fs, arrow::fs::AzureFileSystem::Make(options));
      return fs;
    };
  } else {
    return arrow::Status::Invalid("unsupported location scheme '", split.scheme, "' in ", location,
                                  " (supported: local paths, file, s3, s3a, gs, abfs)");
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = filesystems_.find(key);
    if (it != filesystems_.end()) return std::make_pair(it->second, path);
  }
  // Made outside the lock: S3 may ask AWS for the bucket's region.
  auto made = make();
  if (!made.ok()) return Annotate(made.status(), location);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = filesystems_.emplace(key, *made);
  return std::make_pair(it->second, path);
}

arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> FileIO::OpenInput(
    const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto resolved, Resolve(location));
  auto file = resolved.first->OpenInputFile(resolved.second);
  if (!file.ok()) return Annotate(file.status(), location);
  return file;
}

arrow::Result<std::string> FileIO::ReadAll(const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto file, OpenInput(location));
  auto size = file->GetSize();
  if (!size.ok()) return Annotate(size.status(), location);
  if (*size > options_.max_read_all_bytes) {
    return arrow::Status::IOError(location, ": file is ", *size, " bytes, more than the ",
                                  options_.max_read_all_bytes, " a whole read allows");
  }
  auto buffer = file->ReadAt(0, *size);
  if (!buffer.ok()) return Annotate(buffer.status(), location);
  if ((*buffer)->size() != *size) {
    return arrow::Status::IOError(location, ": short read, ", (*buffer)->size(), " of ", *size,
                                  " bytes");
  }
  return (*buffer)->ToString();
}

arrow::Result<std::vector<std::string>> FileIO::ListDir(const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto resolved, Resolve(location));
  arrow::fs::FileSelector selector;
  selector.base_dir = resolved.second;
  while (selector.base_dir.size() > 1 && selector.base_dir.back() == '/') {
    selector.base_dir.pop_back();
  }
  selector.recursive = false;
  auto infos = resolved.first->GetFileInfo(selector);
  if (!infos.ok()) return Annotate(infos.status(), location);
  std::vector<std::string> names;
  for (const auto& info : *infos) {
    if (info.IsFile()) names.push_back(info.base_name());
  }
  std::sort(names.begin(), names.end());
  return names;
}

arrow::Result<bool> FileIO::Exists(const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto resolved, Resolve(location));
  auto info = resolved.first->GetFileInfo(resolved.second);
  if (!info.ok()) return Annotate(info.status(), location);
  return info->IsFile();
}

}  // namespace icefloe::iceberg
