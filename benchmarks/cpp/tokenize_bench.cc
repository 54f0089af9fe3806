// tokenize_bench: the nodes' tokenizer (icefloe::transform::Tokenizer, the
// code a load's tokenize transform runs) over a string column, one thread.
//
//   tokenize_bench --model PATH --text PATH.arrow [--column text] [--repeat R]
//                  [--batch-rows N] [--no-special-tokens] [--ids-out PATH.arrow]
//
// Reads every record batch of an Arrow IPC file, then R times encodes the
// column `N` rows at a time (Tokenizer::Encode, as a load encodes a batch)
// and prints one JSON line per repeat: {"rows", "bytes", "tokens", "seconds",
// "cpu_seconds"} (bytes: the text's UTF-8 bytes; cpu_seconds: this thread's
// CPU time over the encoding alone). --ids-out writes the first repeat's ids
// as an IPC file of one list<int32> column "ids", a row per text, for a
// comparison with other tokenizers.

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "icefloe/transform/tokenizer.h"

namespace {

using icefloe::transform::TokenizeOptions;
using icefloe::transform::Tokenizer;

struct Args {
  std::string model;
  std::string text;
  std::string column = "text";
  std::string ids_out;
  int repeat = 1;
  int64_t batch_rows = 4096;
  bool special_tokens = true;
};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

arrow::Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return arrow::Status::IOError("cannot open '", path, "'");
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

arrow::Result<std::vector<std::shared_ptr<arrow::Array>>> ReadColumn(const Args& args) {
  ARROW_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(args.text));
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  std::vector<std::shared_ptr<arrow::Array>> chunks;
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ARROW_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
    auto column = batch->GetColumnByName(args.column);
    if (column == nullptr) {
      return arrow::Status::Invalid("'", args.text, "' has no column '", args.column, "'");
    }
    for (int64_t off = 0; off < column->length(); off += args.batch_rows) {
      chunks.push_back(column->Slice(off, args.batch_rows));
    }
  }
  return chunks;
}

int64_t TextBytes(const arrow::Array& a) {
  if (a.type_id() == arrow::Type::LARGE_STRING) {
    const auto& s = static_cast<const arrow::LargeStringArray&>(a);
    return s.value_offset(s.length()) - s.value_offset(0);
  }
  const auto& s = static_cast<const arrow::StringArray&>(a);
  return s.value_offset(s.length()) - s.value_offset(0);
}

arrow::Status WriteIds(const std::string& path, const arrow::ArrayVector& ids) {
  auto schema = arrow::schema({arrow::field("ids", arrow::list(arrow::int32()))});
  ARROW_ASSIGN_OR_RAISE(auto out, arrow::io::FileOutputStream::Open(path));
  ARROW_ASSIGN_OR_RAISE(auto writer, arrow::ipc::MakeFileWriter(out, schema));
  for (const auto& a : ids) {
    ARROW_RETURN_NOT_OK(
        writer->WriteRecordBatch(*arrow::RecordBatch::Make(schema, a->length(), {a})));
  }
  ARROW_RETURN_NOT_OK(writer->Close());
  return out->Close();
}

arrow::Status Run(const Args& args) {
  ARROW_ASSIGN_OR_RAISE(std::string model, ReadFile(args.model));
  ARROW_ASSIGN_OR_RAISE(auto tokenizer, Tokenizer::Load(model, args.model));
  TokenizeOptions options;
  options.special_tokens = args.special_tokens;
  ARROW_RETURN_NOT_OK(tokenizer->Check(options));
  ARROW_ASSIGN_OR_RAISE(auto chunks, ReadColumn(args));
  int64_t rows = 0, bytes = 0;
  for (const auto& c : chunks) {
    rows += c->length();
    bytes += TextBytes(*c);
  }
  for (int r = 0; r < args.repeat; ++r) {
    arrow::ArrayVector ids;
    int64_t tokens = 0;
    const double cpu0 = ThreadCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& c : chunks) {
      ARROW_ASSIGN_OR_RAISE(auto encoded,
                            tokenizer->Encode(*c, options, arrow::default_memory_pool()));
      tokens += static_cast<const arrow::ListArray&>(*encoded).values()->length();
      if (r == 0 && !args.ids_out.empty()) ids.push_back(std::move(encoded));
    }
    const double cpu = ThreadCpuSeconds() - cpu0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "{\"rows\": %lld, \"bytes\": %lld, \"tokens\": %lld, \"seconds\": %.6f, "
        "\"cpu_seconds\": %.6f}\n",
        static_cast<long long>(rows), static_cast<long long>(bytes), static_cast<long long>(tokens),
        wall, cpu);
    std::fflush(stdout);
    if (r == 0 && !args.ids_out.empty()) ARROW_RETURN_NOT_OK(WriteIds(args.ids_out, ids));
  }
  return arrow::Status::OK();
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "tokenize_bench: %s\nusage: tokenize_bench --model PATH --text PATH.arrow "
               "[--column text] [--repeat R] [--batch-rows N] [--no-special-tokens] "
               "[--ids-out PATH.arrow]\n",
               why);
  std::exit(2);
}

int64_t PositiveInt(const char* flag, const char* value) {
  char* end = nullptr;
  const long long v = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || v <= 0) {
    std::fprintf(stderr, "tokenize_bench: %s must be a positive integer, got '%s'\n", flag, value);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-special-tokens") {
      args.special_tokens = false;
      continue;
    }
    if (i + 1 >= argc) Usage(("missing the value of " + flag).c_str());
    const char* value = argv[++i];
    if (flag == "--model") {
      args.model = value;
    } else if (flag == "--text") {
      args.text = value;
    } else if (flag == "--column") {
      args.column = value;
    } else if (flag == "--ids-out") {
      args.ids_out = value;
    } else if (flag == "--repeat") {
      args.repeat = static_cast<int>(PositiveInt("--repeat", value));
    } else if (flag == "--batch-rows") {
      args.batch_rows = PositiveInt("--batch-rows", value);
    } else {
      Usage(("unknown flag " + flag).c_str());
    }
  }
  if (args.model.empty() || args.text.empty()) Usage("--model and --text are required");
  const arrow::Status st = Run(args);
  if (!st.ok()) {
    std::fprintf(stderr, "tokenize_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
