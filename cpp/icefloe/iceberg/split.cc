// Splitting scan tasks at row-group boundaries (data_file.h).
#include <algorithm>
#include <limits>
#include <string>

#include "icefloe/iceberg/data_file.h"

namespace icefloe::iceberg {

namespace {

// A data file's row-group start offsets when they describe it: at least two,
// strictly ascending, within the file. Empty otherwise.
std::vector<int64_t> RowGroupOffsets(const DataFile& f) {
  const auto& o = f.split_offsets;
  if (o.size() < 2 || o.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()) ||
      o.front() < 0 || o.back() >= f.file_size_in_bytes) {
    return {};
  }
  for (size_t i = 1; i < o.size(); ++i) {
    if (o[i] <= o[i - 1]) return {};
  }
  return o;
}

// Where the last row group ends, estimated: its start plus the mean row-group
// size (the file's tail also holds the footer, which can dwarf small row
// groups), within the file.
int64_t DataEnd(const std::vector<int64_t>& offsets, int64_t file_size) {
  const auto n = static_cast<int64_t>(offsets.size());
  const int64_t mean = (offsets.back() - offsets.front()) / (n - 1);
  return std::min(file_size, offsets.back() + mean);
}

}  // namespace

std::string TaskIdentity(const ScanTask& task) {
  // Length-prefixed fields: no path can make two identities collide.
  std::string out;
  auto add = [&out](const std::string& s) {
    out += std::to_string(s.size());
    out += ':';
    out += s;
  };
  add(task.data_file.file_path);
  add(std::to_string(task.first_row_group) + "+" + std::to_string(task.row_groups));
  std::vector<std::string> deletes;
  for (const auto& d : task.deletes) {
    deletes.push_back(d.file_path + "@" +
                      (d.content_offset ? std::to_string(*d.content_offset) : std::string("-")));
  }
  std::sort(deletes.begin(), deletes.end());
  for (const auto& d : deletes) add(d);
  return out;
}

std::vector<ScanTask> SplitTasks(std::vector<ScanTask> tasks, int64_t target_bytes) {
  if (target_bytes <= 0) return tasks;
  std::vector<ScanTask> out;
  out.reserve(tasks.size());
  for (auto& task : tasks) {
    const std::vector<int64_t> offsets = RowGroupOffsets(task.data_file);
    const int64_t size = task.data_file.file_size_in_bytes;
    if (!task.whole_file() || offsets.empty() || size <= target_bytes) {
      out.push_back(std::move(task));
      continue;
    }
    // Parts of about equal bytes, each at least `part` bytes of row groups
    // (the last one may be less).
    const int64_t n = static_cast<int64_t>(offsets.size());
    const int64_t span = DataEnd(offsets, size) - offsets.front();
    const int64_t parts = std::max<int64_t>(1, (span + target_bytes - 1) / target_bytes);
    const int64_t part = std::max<int64_t>(1, span / parts);
    std::vector<int32_t> starts = {0};
    for (int64_t rg = 1; rg < n; ++rg) {
      if (offsets[rg] - offsets[starts.back()] >= part) starts.push_back(static_cast<int32_t>(rg));
    }
    for (size_t j = 0; j < starts.size(); ++j) {
      ScanTask part = task;  // same file, same deletes
      part.first_row_group = starts[j];
      part.row_groups = j + 1 < starts.size() ? starts[j + 1] - starts[j] : -1;
      out.push_back(std::move(part));
    }
  }
  return out;
}

double FileShare(const ScanTask& task) {
  if (task.whole_file()) return 1.0;
  const std::vector<int64_t> offsets = RowGroupOffsets(task.data_file);
  const auto n = static_cast<int64_t>(offsets.size());
  if (n == 0 || task.first_row_group >= n) return 0.0;
  const int64_t size = task.data_file.file_size_in_bytes;
  const int64_t begin = offsets[task.first_row_group];
  const int64_t last = task.row_groups < 0 ? n : int64_t{task.first_row_group} + task.row_groups;
  const int64_t data_end = DataEnd(offsets, size);
  const int64_t end = last >= n ? data_end : offsets[last];
  return static_cast<double>(end - begin) / static_cast<double>(data_end - offsets.front());
}

}  // namespace icefloe::iceberg
