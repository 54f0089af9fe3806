// flight_read_bench: reads Arrow Flight DoGet streams as fast as a C++ client can.
//
//   flight_read_bench --location grpc://127.0.0.1:PORT --ticket HEX [--ticket HEX ...]
//                     [--streams N] [--repeat R] [--shared-connection]
//
// Opens N clients (by default each on its own TCP connection; with
// --shared-connection they share gRPC's subchannel, one HTTP/2 connection),
// then, R times, starts N threads that each DoGet ticket (i mod #tickets) and
// read every record batch (counted, then dropped), and prints one JSON line per
// repeat: {"streams", "bytes", "rows", "batches", "seconds", "gbps", "cpu_seconds"}
// (cpu_seconds: user + system time of this process during the repeat). Bytes
// are the Arrow buffer sizes of the received batches (arrow::util::TotalBufferSize).

#include <arrow/flight/client.h>
#include <arrow/record_batch.h>
#include <arrow/status.h>
#include <arrow/util/byte_size.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace flight = arrow::flight;

struct Args {
  std::string location;
  std::vector<std::string> tickets;
  int streams = 1;
  int repeat = 1;
  bool shared_connection = false;
};

arrow::Result<std::string> FromHex(const std::string& hex) {
  if (hex.size() % 2 != 0) return arrow::Status::Invalid("odd-length hex ticket");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    char* end = nullptr;
    std::string byte = hex.substr(2 * i, 2);
    long v = std::strtol(byte.c_str(), &end, 16);
    if (end != byte.c_str() + 2) return arrow::Status::Invalid("bad hex in ticket: ", byte);
    out[i] = static_cast<char>(v);
  }
  return out;
}

arrow::Result<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> arrow::Result<std::string> {
      if (i + 1 >= argc) return arrow::Status::Invalid(a, " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--location") {
      ARROW_ASSIGN_OR_RAISE(args.location, value());
    } else if (a == "--ticket") {
      ARROW_ASSIGN_OR_RAISE(auto hex, value());
      ARROW_ASSIGN_OR_RAISE(auto ticket, FromHex(hex));
      args.tickets.push_back(std::move(ticket));
    } else if (a == "--streams") {
      ARROW_ASSIGN_OR_RAISE(auto v, value());
      args.streams = std::atoi(v.c_str());
    } else if (a == "--repeat") {
      ARROW_ASSIGN_OR_RAISE(auto v, value());
      args.repeat = std::atoi(v.c_str());
    } else if (a == "--shared-connection") {
      args.shared_connection = true;
    } else {
      return arrow::Status::Invalid("unknown argument ", a);
    }
  }
  if (args.location.empty() || args.tickets.empty()) {
    return arrow::Status::Invalid(
        "usage: flight_read_bench --location URI --ticket HEX "
        "[--ticket HEX ...] [--streams N] [--repeat R] "
        "[--shared-connection]");
  }
  if (args.streams < 1 || args.repeat < 1) {
    return arrow::Status::Invalid("--streams and --repeat must be positive");
  }
  return args;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct StreamResult {
  arrow::Status status;
  int64_t bytes = 0;
  int64_t rows = 0;
  int64_t batches = 0;
};

StreamResult ReadStream(flight::FlightClient* client, const std::string& ticket) {
  StreamResult r;
  auto reader = client->DoGet(flight::Ticket{ticket});
  if (!reader.ok()) {
    r.status = reader.status();
    return r;
  }
  while (true) {
    auto chunk = (*reader)->Next();
    if (!chunk.ok()) {
      r.status = chunk.status();
      return r;
    }
    if (!chunk->data) break;
    r.bytes += arrow::util::TotalBufferSize(*chunk->data);
    r.rows += chunk->data->num_rows();
    r.batches += 1;
  }
  return r;
}

arrow::Status Run(const Args& args) {
  ARROW_ASSIGN_OR_RAISE(auto location, flight::Location::Parse(args.location));
  std::vector<std::unique_ptr<flight::FlightClient>> clients;
  for (int i = 0; i < args.streams; ++i) {
    auto options = flight::FlightClientOptions::Defaults();
    if (!args.shared_connection) {
      // A private subchannel pool: this client gets its own TCP connection.
      options.generic_options.emplace_back("grpc.use_local_subchannel_pool", 1);
    }
    ARROW_ASSIGN_OR_RAISE(auto client, flight::FlightClient::Connect(location, options));
    clients.push_back(std::move(client));
  }
  for (int rep = 0; rep < args.repeat; ++rep) {
    std::vector<StreamResult> results(args.streams);
    std::vector<std::thread> threads;
    double cpu0 = CpuSeconds();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < args.streams; ++i) {
      const std::string& ticket = args.tickets[i % args.tickets.size()];
      threads.emplace_back([&, i, ticket]() { results[i] = ReadStream(clients[i].get(), ticket); });
    }
    for (auto& t : threads) t.join();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu = CpuSeconds() - cpu0;
    StreamResult total;
    for (const auto& r : results) {
      ARROW_RETURN_NOT_OK(r.status);
      total.bytes += r.bytes;
      total.rows += r.rows;
      total.batches += r.batches;
    }
    std::printf(
        "{\"streams\": %d, \"bytes\": %lld, \"rows\": %lld, \"batches\": %lld, "
        "\"seconds\": %.6f, \"gbps\": %.4f, \"cpu_seconds\": %.4f}\n",
        args.streams, static_cast<long long>(total.bytes), static_cast<long long>(total.rows),
        static_cast<long long>(total.batches), seconds,
        static_cast<double>(total.bytes) / seconds / 1e9, cpu);
    std::fflush(stdout);
  }
  for (auto& c : clients) ARROW_RETURN_NOT_OK(c->Close());
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n", args.status().ToString().c_str());
    return 2;
  }
  auto st = Run(*args);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
