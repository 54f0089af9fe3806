#include "icefloe/loader/task_loader.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <arrow/util/byte_size.h>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/name_mapping.h"
#include "icefloe/iceberg/reader.h"
#include "icefloe/iceberg/types.h"
#include "icefloe/transform/pack.h"
#include "icefloe/transform/transform.h"
#include "icefloe/transform/value_expr.h"

namespace icefloe {

namespace {

// A task's packing (the transform's PackStats) as the load's counters.
void CountPack(const transform::PackStats& pack, iceberg::LoadCounters* counted) {
  counted->pack_documents = pack.documents;
  counted->pack_tokens = pack.tokens;
  counted->pack_pad_tokens = pack.pad_tokens;
  counted->pack_rows = pack.rows;
  counted->pack_overlong_split = pack.overlong_split;
  counted->pack_overlong_dropped = pack.overlong_dropped;
  counted->pack_tail_dropped_tokens = pack.tail_dropped_tokens;
}

}  // namespace

arrow::Result<LoadedTasks> LoadTasks(const NodeLoadRequest& request, iceberg::FileIO& io,
                                     std::shared_ptr<TrackingPool> pool, int32_t threads,
                                     LoadProgress* progress, const LoadPlan& plan) {
  ARROW_RETURN_NOT_OK(transform::RegisterFunctions());
  ARROW_ASSIGN_OR_RAISE(iceberg::Schema schema, iceberg::ParseSchema(request.schema));
  std::optional<arrow::compute::Expression> filter;
  if (!request.filter.empty()) {
    ARROW_ASSIGN_OR_RAISE(auto parsed, iceberg::ParseFilter(request.filter));
    ARROW_ASSIGN_OR_RAISE(auto bound, iceberg::Bind(parsed, schema));
    ARROW_ASSIGN_OR_RAISE(filter, iceberg::ToArrowExpression(bound));
  }

  std::optional<iceberg::NameMapping> name_mapping;
  if (!request.name_mapping.empty()) {
    ARROW_ASSIGN_OR_RAISE(name_mapping, iceberg::ParseNameMapping(request.name_mapping));
  }

  LoadedTasks out;
  out.pool = pool;
  ARROW_ASSIGN_OR_RAISE(out.schema, iceberg::ToArrowSchema(schema, &request.projection));
  // The transform, bound to the loaded columns, with the models the head read.
  std::shared_ptr<const transform::Transform> transformer;
  if (request.transform) {
    auto read_model = [&io](const std::string& location) { return io.ReadAll(location); };
    ARROW_ASSIGN_OR_RAISE(transformer,
                          transform::Transform::Make(*request.transform, out.schema, read_model,
                                                     request.model_sha256));
    out.schema = transformer->output_schema();
  }
  const size_t n = request.tasks.size();
  out.batches.resize(n);
  out.rows.assign(n, 0);
  progress->tasks_total = static_cast<int64_t>(n);

  iceberg::ReadOptions options;
  options.open = [&io](const std::string& location) { return io.OpenInput(location); };
  options.schema = &schema;
  options.name_mapping = name_mapping ? &*name_mapping : nullptr;
  options.projection = request.projection;
  options.filter = filter;
  options.batch_rows = request.batch_rows;
  options.pool = pool.get();
  options.io = plan.io;

  const int32_t workers = std::max<int32_t>(1, std::min<int32_t>(threads, static_cast<int32_t>(n)));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  arrow::Status error;
  ReadRoom* room = plan.room != nullptr && plan.room->available ? plan.room : nullptr;
  // Reads in flight, by their estimates: a read starts when its estimate
  // fits the room left, or when no other read is in flight. A read that ends
  // notifies; memory freed otherwise (rows leaving for the disk tier, a
  // stream ending) is seen at the next periodic look.
  std::mutex room_mu;
  std::condition_variable room_cv;
  constexpr auto kRoomLook = std::chrono::milliseconds(50);
  auto admit = [&](int64_t bytes) -> bool {
    if (room == nullptr) return true;
    std::unique_lock<std::mutex> lock(room_mu);
    while (!failed.load() && !progress->cancelled.load()) {
      const int64_t held = room->reserved.load();
      if (held == 0 || held + bytes <= room->available()) {
        room->reserved += bytes;
        return true;
      }
      room_cv.wait_for(lock, kRoomLook);
    }
    return false;
  };
  auto release = [&](int64_t bytes) {
    if (room == nullptr) return;
    std::lock_guard<std::mutex> lock(room_mu);
    room->reserved -= bytes;
    room_cv.notify_all();
  };
  auto stopped = [&]() -> arrow::Status {
    if (progress->cancelled.load()) {
      return arrow::Status::Cancelled("load of '", request.dataset, "' cancelled");
    }
    return arrow::Status::Cancelled("load of '", request.dataset, "' stopped");
  };
  // Task i streamed from its file through the transform into its sink.
  auto read = [&](size_t i, iceberg::ReadStats* stats)
      -> arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> {
    const std::string& path = request.tasks[i].task.data_file.file_path;
    ARROW_ASSIGN_OR_RAISE(auto reader,
                          iceberg::ScanTaskReader::Open(request.tasks[i].task, options));
    // A transform's output (tokens, packed rows) is held beside its input.
    const int64_t bytes = reader->read_bytes() + (transformer ? reader->read_bytes() / 2 : 0);
    if (room != nullptr) {
      if (bytes > room->most) {
        return arrow::Status::OutOfMemory(
            "reading ", path, " needs about ", bytes, " bytes of memory at once (batches of ",
            request.batch_rows,
            " rows, as its footer estimates them); the node's memory budget is ", room->most,
            " bytes: lower batch_rows or raise --memory-limit");
      }
      int64_t largest = room->largest.load();
      while (bytes > largest && !room->largest.compare_exchange_weak(largest, bytes)) {
      }
    }
    std::unique_ptr<TaskSink> sink = plan.sink ? plan.sink() : nullptr;
    std::vector<std::shared_ptr<arrow::RecordBatch>> kept;  // without a sink
    auto put = [&](std::shared_ptr<arrow::RecordBatch> b) -> arrow::Status {
      if (b->num_rows() == 0) return arrow::Status::OK();
      if (sink) return sink->Add(std::move(b));
      if (room != nullptr) {
        ARROW_ASSIGN_OR_RAISE(const int64_t size, arrow::util::ReferencedBufferSize(*b));
        room->kept += size;
      }
      kept.push_back(std::move(b));
      return arrow::Status::OK();
    };
    auto stream = transformer ? transformer->Stream(request.batch_rows, pool.get()) : nullptr;
    auto named = [&](const arrow::Status& st) {
      return st.ok() ? st : st.WithMessage(path, ": ", st.message());
    };
    // The reader holds its row group's state (pages, buffers) between
    // batches: a read holds its room from its first batch to its last.
    if (!admit(bytes)) return stopped();
    auto streamed = [&]() -> arrow::Status {
      while (true) {
        if (progress->cancelled.load() || failed.load()) return stopped();
        std::shared_ptr<arrow::RecordBatch> batch;
        ARROW_RETURN_NOT_OK(reader->ReadNext(&batch));
        std::vector<std::shared_ptr<arrow::RecordBatch>> out;
        if (stream) {
          ARROW_RETURN_NOT_OK(named(batch ? stream->Add(*batch, &out) : stream->Finish(&out)));
        }
        if (batch == nullptr) {
          for (auto& b : out) ARROW_RETURN_NOT_OK(put(std::move(b)));
          return arrow::Status::OK();
        }
        if (!stream) out.push_back(std::move(batch));
        for (auto& b : out) ARROW_RETURN_NOT_OK(put(std::move(b)));
      }
    }();
    *stats = reader->stats();
    reader.reset();  // its buffers go before its room does
    release(bytes);
    ARROW_RETURN_NOT_OK(streamed);
    iceberg::LoadCounters counted;
    counted.row_groups_total = stats->row_groups_total;
    counted.row_groups_read = stats->row_groups_read;
    if (stream) {
      CountPack(stream->pack_stats(), &counted);
      counted.transform_rows_dropped = stream->rows_dropped();
    }
    {
      MutexLock lock(&progress->counters_mu);
      progress->counters += counted;
    }
    if (sink) return sink->Finish();
    return kept;
  };
  auto worker = [&] {
    while (!failed.load()) {
      if (progress->cancelled.load()) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (error.ok())
          error = arrow::Status::Cancelled("load of '", request.dataset, "' cancelled");
        failed = true;
        return;
      }
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      iceberg::ReadStats stats;
      auto batches = read(i, &stats);
      if (!batches.ok()) {
        {
          std::lock_guard<std::mutex> lock(error_mu);
          if (error.ok() || (error.IsCancelled() && !batches.status().IsCancelled())) {
            error = batches.status();
          }
          failed = true;
        }
        std::lock_guard<std::mutex> lock(room_mu);
        room_cv.notify_all();  // a read waiting for room stops
        return;
      }
      int64_t rows = 0;
      for (const auto& b : *batches) rows += b->num_rows();
      out.rows[i] = rows;
      out.batches[i] = std::move(*batches);
      progress->rows += rows;
      progress->bytes_read += stats.bytes_read + stats.delete_bytes_read;
      progress->tasks_done += 1;
    }
  };
  std::vector<std::thread> pool_threads;
  for (int32_t t = 0; t < workers; ++t) pool_threads.emplace_back(worker);
  for (auto& t : pool_threads) t.join();
  ARROW_RETURN_NOT_OK(error);
  return out;
}

}  // namespace icefloe
