#include "icefloe/iceberg/file_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <arrow/buffer.h>
#include <arrow/filesystem/s3fs.h>
#include <arrow/io/interfaces.h>
#include <gtest/gtest.h>

#include "icefloe/iceberg/metadata.h"

extern char** environ;

namespace icefloe::iceberg {

namespace {

namespace fs = std::filesystem;

void ExpectError(const arrow::Status& st, arrow::StatusCode code, const std::string& needle) {
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_NE(st.message().find(needle), std::string::npos) << "'" << needle << "' not in: " << st;
}

/// Finalizes Arrow's S3 support once every test is done (and every S3
/// filesystem is gone), as the process must before it exits.
class S3Finalizer : public ::testing::Environment {
 public:
  void TearDown() override {
    if (arrow::fs::IsS3Initialized() && !arrow::fs::IsS3Finalized()) {
      EXPECT_TRUE(arrow::fs::FinalizeS3().ok());
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kS3Finalizer =
    ::testing::AddGlobalTestEnvironment(new S3Finalizer);

/// A free TCP port on 127.0.0.1 (bound to port 0, then released).
int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool CanConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// moto's S3 server on a loopback port, in its own process group; stopped
/// (the whole group) by Stop() or the destructor.
class MotoServer {
 public:
  ~MotoServer() { Stop(); }

  /// Starts the server and waits (bounded) until it accepts connections.
  /// Returns an empty string on success, else why it could not start.
  std::string Start(const fs::path& log_path) {
    const std::string exe = std::string(ICEFLOE_PYTHON_BIN_DIR) + "/moto_server";
    if (::access(exe.c_str(), X_OK) != 0) return exe + " is not installed";
    port_ = FreeLoopbackPort();
    if (port_ <= 0) return "no free loopback port";
    const std::string port = std::to_string(port_);
    const std::string log = log_path.string();
    std::vector<std::string> args = {exe, "-H", "127.0.0.1", "-p", port};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      pid_ = -1;
      return "posix_spawn " + exe + ": " + std::strerror(rc);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (CanConnect(port_)) return "";
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "moto_server exited early: " + ReadText(log_path);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // poll interval
    }
    Stop();
    return "moto_server did not accept connections within 60 s: " + ReadText(log_path);
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
  }

  int port() const { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
};

fs::path MakeTempDir(const std::string& prefix) {
  std::random_device rd;
  fs::path dir = fs::temp_directory_path() / (prefix + std::to_string(rd()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

// ---- Local files -------------------------------------------------------------

class LocalFileIOTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("icefloe-file-io-test-");
    fs::create_directories(dir_ / "sub");
    std::ofstream(dir_ / "a.txt") << "hello";
    std::ofstream(dir_ / "b.txt") << "world!";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  FileIO io_;
};

TEST_F(LocalFileIOTest, ReadsPathsAndFileUris) {
  const std::string path = (dir_ / "a.txt").string();
  for (const std::string& location :
       {path, "file://" + path, "file:" + path, "file://localhost" + path}) {
    SCOPED_TRACE(location);
    auto text = io_.ReadAll(location);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "hello");
  }
  auto file = io_.OpenInput("file://" + (dir_ / "b.txt").string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetSize(), 6);
  EXPECT_EQ((*(*file)->ReadAt(2, 3))->ToString(), "rld");
}

TEST_F(LocalFileIOTest, ListsAndChecksExistence) {
  auto names = io_.ListDir("file://" + dir_.string() + "/");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"a.txt", "b.txt"}));  // no "sub"
  EXPECT_TRUE(*io_.Exists((dir_ / "a.txt").string()));
  EXPECT_FALSE(*io_.Exists((dir_ / "c.txt").string()));
  EXPECT_FALSE(*io_.Exists((dir_ / "sub").string()));
  ExpectError(io_.ListDir((dir_ / "nope").string()).status(), arrow::StatusCode::IOError,
              (dir_ / "nope").string());
}

TEST_F(LocalFileIOTest, ErrorsNameTheLocation) {
  const std::string missing = "file://" + (dir_ / "missing.json").string();
  ExpectError(io_.ReadAll(missing).status(), arrow::StatusCode::IOError, missing);
  ExpectError(io_.OpenInput(missing).status(), arrow::StatusCode::IOError, missing);
  ExpectError(io_.ReadAll("hdfs://namenode/warehouse/t").status(), arrow::StatusCode::Invalid,
              "hdfs://namenode/warehouse/t");
  ExpectError(io_.ReadAll("ftp://host/x").status(), arrow::StatusCode::Invalid, "'ftp'");
  ExpectError(io_.ReadAll("file://otherhost/x").status(), arrow::StatusCode::Invalid,
              "file://otherhost/x");
  ExpectError(io_.ReadAll("s3:///key").status(), arrow::StatusCode::Invalid, "s3:///key");
  ExpectError(io_.ReadAll("s3:bucket/key").status(), arrow::StatusCode::Invalid, "s3:bucket/key");
  EXPECT_TRUE(io_.ReadAll("").status().IsInvalid());

  FileIOOptions small;
  small.max_read_all_bytes = 4;
  FileIO limited(small);
  ExpectError(limited.ReadAll((dir_ / "a.txt").string()).status(), arrow::StatusCode::IOError,
              "a.txt");
}

TEST_F(LocalFileIOTest, CachesOneFilesystem) {
  auto a = io_.Resolve((dir_ / "a.txt").string());
  auto b = io_.Resolve("file://" + (dir_ / "b.txt").string());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->first, b->first);
  EXPECT_EQ(a->first->type_name(), "local");
  EXPECT_EQ(b->second, (dir_ / "b.txt").string());
}

TEST(FileIO, NormalizesHadoopS3Schemes) {
  EXPECT_EQ(NormalizeLocation("s3a://bucket/key"), "s3://bucket/key");
  EXPECT_EQ(NormalizeLocation("S3N://bucket/key"), "s3://bucket/key");
  EXPECT_EQ(NormalizeLocation("s3://bucket/key"), "s3://bucket/key");
  EXPECT_EQ(NormalizeLocation("/tmp/s3a://x"), "/tmp/s3a://x");
  EXPECT_EQ(NormalizeLocation("gs://b/k"), "gs://b/k");
}

TEST(FileIO, S3SettingsFromEnv) {
  ::setenv("AWS_ENDPOINT_URL", "http://fallback:1", 1);
  ::setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000", 1);
  ::unsetenv("AWS_REGION");
  ::setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
  ::setenv("ICEFLOE_S3_PATH_STYLE", "true", 1);
  ::setenv("ICEFLOE_S3_ANONYMOUS", "1", 1);
  S3Settings s = S3SettingsFromEnv();
  EXPECT_EQ(s.endpoint_override, "http://127.0.0.1:9000");
  EXPECT_EQ(s.region, "eu-west-3");
  EXPECT_EQ(s.path_style, true);
  EXPECT_TRUE(s.anonymous);
  ::unsetenv("AWS_ENDPOINT_URL_S3");
  ::setenv("AWS_REGION", "ap-south-1", 1);
  ::unsetenv("ICEFLOE_S3_PATH_STYLE");
  s = S3SettingsFromEnv();
  EXPECT_EQ(s.endpoint_override, "http://fallback:1");
  EXPECT_EQ(s.region, "ap-south-1");
  EXPECT_FALSE(s.path_style.has_value());
  for (const char* name :
       {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "ICEFLOE_S3_ANONYMOUS"}) {
    ::unsetenv(name);
  }
}

// ---- S3, against moto on loopback ---------------------------------------------

class S3FileIOTest : public ::testing::Test {
 protected:
  static constexpr const char* kBucket = "icefloe-test";

  static void SetUpTestSuite() {
    // Never let the AWS SDK look for an instance metadata service.
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    log_dir_ = new fs::path(MakeTempDir("icefloe-moto-"));
    server_ = new MotoServer;
    *start_error_ = server_->Start(*log_dir_ / "moto.log");
    if (!start_error_->empty()) return;
    // Create the bucket through Arrow's own S3 filesystem.
    auto st = arrow::fs::EnsureS3Initialized();
    if (!st.ok()) {
      *start_error_ = st.ToString();
      return;
    }
    arrow::fs::S3Options options = arrow::fs::S3Options::FromAccessKey("testing", "testing");
    options.endpoint_override = server_->endpoint();
    options.scheme = "http";
    options.region = "us-east-1";
    options.allow_bucket_creation = true;
    auto admin = arrow::fs::S3FileSystem::Make(options);
    if (!admin.ok()) {
      *start_error_ = admin.status().ToString();
      return;
    }
    st = (*admin)->CreateDir(kBucket);
    if (!st.ok()) *start_error_ = "creating the bucket: " + st.ToString();
  }

  static void TearDownTestSuite() {
    delete server_;  // stops moto
    server_ = nullptr;
    std::error_code ec;
    fs::remove_all(*log_dir_, ec);
    delete log_dir_;
    log_dir_ = nullptr;
  }

  void SetUp() override {
    if (!start_error_->empty()) GTEST_SKIP() << "no moto S3 server: " << *start_error_;
  }

  static FileIOOptions MotoOptions() {
    FileIOOptions options;
    options.s3.endpoint_override = server_->endpoint();
    options.s3.scheme = "http";
    options.s3.path_style = true;
    options.s3.region = "us-east-1";
    options.s3.access_key = "testing";
    options.s3.secret_key = "testing";
    return options;
  }

  /// Writes `contents` to an S3 location through FileIO's own filesystem.
  static void Put(FileIO& io, const std::string& location, const std::string& contents) {
    auto resolved = io.Resolve(location);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    auto out = resolved->first->OpenOutputStream(resolved->second);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE((*out)->Write(contents).ok());
    ASSERT_TRUE((*out)->Close().ok());
  }

  static inline MotoServer* server_ = nullptr;
  static inline fs::path* log_dir_ = nullptr;
  static inline std::string* start_error_ = new std::string;
};

TEST_F(S3FileIOTest, WritesAndReadsThroughS3AndS3a) {
  FileIO io(MotoOptions());
  const std::string key = std::string(kBucket) + "/warehouse/t/metadata/v1.metadata.json";
  ASSERT_NO_FATAL_FAILURE(Put(io, "s3://" + key, "{\"x\": 1}"));
  for (const std::string& location : {"s3://" + key, "s3a://" + key}) {
    SCOPED_TRACE(location);
    auto text = io.ReadAll(location);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "{\"x\": 1}");
    auto file = io.OpenInput(location);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(*(*file)->GetSize(), 8);
    EXPECT_EQ((*(*file)->ReadAt(1, 3))->ToString(), "\"x\"");
    EXPECT_TRUE(*io.Exists(location));
  }
  // s3:// and s3a:// share one filesystem per bucket.
  auto a = io.Resolve("s3://" + key);
  auto b = io.Resolve("s3a://" + key);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->first, b->first);
  EXPECT_EQ(a->first->type_name(), "s3");
  EXPECT_EQ(b->second, key);
}

TEST_F(S3FileIOTest, ListsADirectory) {
  FileIO io(MotoOptions());
  const std::string table = std::string("s3://") + kBucket + "/warehouse/listed";
  ASSERT_NO_FATAL_FAILURE(Put(io, table + "/metadata/v1.metadata.json", "{}"));
  ASSERT_NO_FATAL_FAILURE(Put(io, table + "/metadata/version-hint.text", "1"));
  ASSERT_NO_FATAL_FAILURE(Put(io, table + "/metadata/deeper/x.avro", "x"));
  ASSERT_NO_FATAL_FAILURE(Put(io, table + "/data/part-0.parquet", "p"));
  auto names = io.ListDir(std::string("s3a://") + kBucket + "/warehouse/listed/metadata/");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"v1.metadata.json", "version-hint.text"}));
  EXPECT_FALSE(*io.Exists(table + "/metadata"));  // a prefix, not a file
  EXPECT_FALSE(*io.Exists(table + "/metadata/v2.metadata.json"));
  const std::string missing_dir = table + "/nothing-here";
  ExpectError(io.ListDir(missing_dir).status(), arrow::StatusCode::IOError, missing_dir);
}

TEST_F(S3FileIOTest, MissingKeyIsAnIOErrorNamingTheLocation) {
  FileIO io(MotoOptions());
  const std::string missing = std::string("s3a://") + kBucket + "/warehouse/nope.metadata.json";
  ExpectError(io.ReadAll(missing).status(), arrow::StatusCode::IOError, missing);
  ExpectError(io.OpenInput(missing).status(), arrow::StatusCode::IOError, missing);
  const std::string no_bucket = "s3://icefloe-no-such-bucket/x.json";
  ExpectError(io.ReadAll(no_bucket).status(), arrow::StatusCode::IOError, no_bucket);
}

TEST_F(S3FileIOTest, LoadsTableMetadataFromS3) {
  FileIO io(MotoOptions());
  const std::string table = std::string("s3a://") + kBucket + "/warehouse/db/events";
  const std::string metadata = R"J({
    "format-version": 2, "table-uuid": "5d6f3a70-1111-4e0e-9d0f-0a1b2c3d4e5f",
    "location": "s3://icefloe-test/warehouse/db/events", "last-sequence-number": 0,
    "last-updated-ms": 1700000000000, "last-column-id": 1, "current-schema-id": 0,
    "schemas": [{"type": "struct", "schema-id": 0,
                 "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]}],
    "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}],
    "last-partition-id": 999, "current-snapshot-id": -1, "snapshots": []})J";
  ASSERT_NO_FATAL_FAILURE(Put(
      io, table + "/metadata/00000-8a1e2f1c-aaaa-4bbb-8ccc-123456789abc.metadata.json", metadata));
  auto m = LoadTableMetadata(io, table);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->table_uuid, "5d6f3a70-1111-4e0e-9d0f-0a1b2c3d4e5f");
  EXPECT_EQ(m->CurrentSnapshot(), nullptr);
  EXPECT_EQ(m->metadata_location,
            table + "/metadata/00000-8a1e2f1c-aaaa-4bbb-8ccc-123456789abc.metadata.json");
  ExpectError(LoadTableMetadata(io, table + "-missing").status(), arrow::StatusCode::IOError,
              table + "-missing");
}

TEST_F(S3FileIOTest, TakesTheEndpointFromTheEnvironment) {
  ::setenv("AWS_ENDPOINT_URL_S3", ("http://" + server_->endpoint()).c_str(), 1);
  ::setenv("AWS_REGION", "us-east-1", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "testing", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "testing", 1);
  {
    FileIO io;  // S3 settings all empty: endpoint, scheme and keys from the environment
    FileIO writer(MotoOptions());
    const std::string location = std::string("s3://") + kBucket + "/env/x.txt";
    ASSERT_NO_FATAL_FAILURE(Put(writer, location, "from env"));
    auto text = io.ReadAll(location);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "from env");
  }
  for (const char* name :
       {"AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) {
    ::unsetenv(name);
  }
}

}  // namespace icefloe::iceberg
