#include "icefloe/loader/task_loader.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/name_mapping.h"
#include "icefloe/iceberg/reader.h"
#include "icefloe/iceberg/types.h"
#include "icefloe/transform/transform.h"
#include "icefloe/transform/value_expr.h"

namespace icefloe {

arrow::Result<LoadedTasks> LoadTasks(const NodeLoadRequest& request, iceberg::FileIO& io,
                                     std::shared_ptr<TrackingPool> pool, int32_t threads,
                                     LoadProgress* progress, const TaskHook& keep,
                                     const std::function<int32_t()>& max_reads) {
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
  if (!request.transform.is_null()) {
    ARROW_ASSIGN_OR_RAISE(TransformSpec spec, TransformSpec::FromJson(request.transform));
    auto read_model = [&io](const std::string& location) { return io.ReadAll(location); };
    ARROW_ASSIGN_OR_RAISE(transformer, transform::Transform::Make(spec, out.schema, read_model,
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

  const int32_t workers = std::max<int32_t>(1, std::min<int32_t>(threads, static_cast<int32_t>(n)));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  arrow::Status error;
  // Reads in flight, and reads finished: with `keep`, a read that ran out of
  // memory waits for another to finish (its rows may leave memory) and is
  // tried again, at most once per other reader; alone, it fails.
  std::mutex flight_mu;
  std::condition_variable flight_cv;
  int32_t in_flight = 0;
  uint64_t finished = 0;
  constexpr auto kRetryWait = std::chrono::seconds(30);
  // Task i read (and transformed), retried as above.
  auto read = [&](size_t i, iceberg::ReadStats* stats)
      -> arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> {
    std::unique_lock<std::mutex> lock(flight_mu);
    // Not past max_reads: while that many are in flight, one of them ends
    // (and notifies) before this one starts. The wait is bounded by theirs.
    if (max_reads) {
      flight_cv.wait(lock, [&] { return in_flight < std::max(1, max_reads()) || failed.load(); });
      // Another task failed meanwhile: its error ends the load, not this read.
      if (failed.load()) return arrow::Status::Cancelled("load of '", request.dataset, "' stopped");
    }
    ++in_flight;
    uint64_t seen = 0;  // reads finished when the last try ran out of memory
    for (int32_t attempt = 0;; ++attempt) {
      if (attempt > 0) {  // the last try's memory is back: wait for another read to end
        --in_flight;
        flight_cv.wait_for(lock, kRetryWait, [&] { return finished != seen || failed.load(); });
        ++in_flight;
      }
      lock.unlock();
      *stats = iceberg::ReadStats{};
      auto batches = iceberg::ReadScanTask(request.tasks[i].task, options, stats);
      if (batches.ok() && transformer) {
        batches = transformer->ApplyTask(*batches, request.batch_rows, pool.get());
        if (!batches.ok()) {
          batches = batches.status().WithMessage(request.tasks[i].task.data_file.file_path, ": ",
                                                 batches.status().message());
        }
      }
      lock.lock();
      const bool retry = !batches.ok() && batches.status().IsOutOfMemory() && keep != nullptr &&
                         attempt + 1 < workers && in_flight > 1 && !failed.load();
      if (!retry) {
        --in_flight;
        ++finished;
        flight_cv.notify_all();
        return batches;
      }
      seen = finished;
    }
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
      if (batches.ok() && keep) batches = keep(std::move(*batches));
      if (!batches.ok()) {
        {
          std::lock_guard<std::mutex> lock(error_mu);
          if (error.ok()) error = batches.status();
          failed = true;
        }
        std::lock_guard<std::mutex> lock(flight_mu);
        flight_cv.notify_all();  // a read waiting to retry stops
        return;
      }
      int64_t rows = 0;
      for (const auto& b : *batches) rows += b->num_rows();
      out.rows[i] = rows;
      out.batches[i] = std::move(*batches);
      progress->rows += rows;
      progress->bytes_read += stats.bytes_read + stats.delete_bytes_read;
      progress->row_groups_total += stats.row_groups_total;
      progress->row_groups_read += stats.row_groups_read;
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
