// Transform's `pack` (pack.h): binding the packed columns and the stream
// that packs a task.
#include "icefloe/transform/pack.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include <arrow/builder.h>

#include "icefloe/transform/labels.h"
#include "icefloe/transform/transform.h"

namespace icefloe::transform {

namespace {

bool IsTokenList(const arrow::DataType& type) {
  if (type.id() != arrow::Type::LIST && type.id() != arrow::Type::LARGE_LIST) return false;
  return type.field(0)->type()->id() == arrow::Type::INT32;
}

// One packed column of a batch: each row's token ids, list or large_list.
struct TokenColumn {
  std::shared_ptr<arrow::Array> array;
  const int32_t* values = nullptr;
  const int32_t* offsets32 = nullptr;  // list: offsets; else null
  const int64_t* offsets64 = nullptr;  // large_list

  explicit TokenColumn(std::shared_ptr<arrow::Array> a) : array(std::move(a)) {
    if (array->type_id() == arrow::Type::LIST) {
      const auto& list = static_cast<const arrow::ListArray&>(*array);
      offsets32 = list.raw_value_offsets();
      values = static_cast<const arrow::Int32Array&>(*list.values()).raw_values();
    } else {
      const auto& list = static_cast<const arrow::LargeListArray&>(*array);
      offsets64 = list.raw_value_offsets();
      values = static_cast<const arrow::Int32Array&>(*list.values()).raw_values();
    }
  }
  bool IsNull(int64_t i) const { return array->IsNull(i); }
  int64_t Start(int64_t i) const { return offsets32 ? offsets32[i] : offsets64[i]; }
  int64_t Length(int64_t i) const { return Start(i + 1) - Start(i); }
  const int32_t* Row(int64_t i) const { return values + Start(i); }
};

// A piece of a document: `length` tokens from `offset` of the document of
// row `row` in window batch `batch`.
struct Piece {
  int32_t batch = 0;
  int64_t row = 0;
  int64_t offset = 0;
  int64_t length = 0;
};

// First fit over bins of capacity seq_len: a max tree of the bins' free
// room finds the leftmost bin with room for n in O(log bins).
class FirstFit {
 public:
  explicit FirstFit(size_t most_bins) {
    while (leaves_ < most_bins) leaves_ *= 2;
    free_.assign(2 * leaves_, 0);
  }
  /// The leftmost open bin with at least `n` free, else none.
  std::optional<size_t> Find(int64_t n) const {
    if (free_[1] < n) return std::nullopt;
    size_t i = 1;
    while (i < leaves_) i = free_[2 * i] >= n ? 2 * i : 2 * i + 1;
    return i - leaves_;
  }
  void Set(size_t bin, int64_t free) {
    size_t i = bin + leaves_;
    free_[i] = free;
    for (i /= 2; i >= 1; i /= 2) free_[i] = std::max(free_[2 * i], free_[2 * i + 1]);
  }

 private:
  size_t leaves_ = 1;
  std::vector<int64_t> free_;
};

}  // namespace

arrow::Status Transform::BindPack() {
  const PackSpec& p = *spec_.pack;
  const auto s = static_cast<int32_t>(p.seq_len);  // <= kMaxSeqLen: checked by the spec
  arrow::FieldVector packed;
  for (const auto& name : p.Columns()) {
    auto field = columns_schema_->GetFieldByName(name);
    if (!IsTokenList(*field->type())) {
      return arrow::Status::Invalid("transform: 'pack': column '", name,
                                    "' must hold token ids (list<int32>); it is ",
                                    field->type()->ToString());
    }
    packed.push_back(arrow::field(name, arrow::fixed_size_list(arrow::int32(), s), false));
  }
  if (p.Pads()) {
    packed.push_back(
        arrow::field("attention_mask", arrow::fixed_size_list(arrow::int8(), s), false));
  }
  if (p.position_ids) {
    packed.push_back(
        arrow::field("position_ids", arrow::fixed_size_list(arrow::int32(), s), false));
  }
  std::set<std::string> names;
  for (const auto& f : packed) {
    if (!names.insert(f->name()).second) {
      return arrow::Status::Invalid("transform: 'pack': column '", f->name(),
                                    "' clashes with the packed column of that name; rename it");
    }
  }
  output_schema_ = arrow::schema(packed);
  return arrow::Status::OK();
}

// Rows go into builders (one per packed column, the mask, the positions)
// and out as a batch each time batch_rows rows are full.
class Transform::PackStream : public Transform::TaskStream {
 public:
  PackStream(const Transform* t, int64_t batch_rows, arrow::MemoryPool* pool)
      : t_(t),
        p_(*t->spec_.pack),
        s_(p_.seq_len),
        batch_rows_(batch_rows),
        batch_tokens_(batch_rows * p_.seq_len),
        ffd_(p_.strategy == "ffd"),
        pool_(pool),
        mask_(pool),
        positions_(pool) {
    const auto names = p_.Columns();
    const auto labels = p_.LabelsColumn();
    for (size_t c = 0; c < names.size(); ++c) {
      columns_.push_back(t->columns_schema_->GetFieldIndex(names[c]));
      builders_.emplace_back(pool);
      if (labels && names[c] == *labels) labels_ = static_cast<int>(c);
    }
  }

  arrow::Status Add(const arrow::RecordBatch& batch,
                    std::vector<std::shared_ptr<arrow::RecordBatch>>* out) override {
    ARROW_ASSIGN_OR_RAISE(auto applied, t_->Apply(batch, pool_, &rows_dropped_));
    std::vector<TokenColumn> cols;
    for (int c : columns_) cols.emplace_back(applied->column(c));
    const int64_t first_row = rows_seen_;
    rows_seen_ += applied->num_rows();
    if (ffd_) {
      window_.push_back(cols);
      batch_held_ = false;
    }
    for (int64_t i = 0; i < applied->num_rows(); ++i) {
      ARROW_ASSIGN_OR_RAISE(const int64_t n, Aligned(cols, i, first_row + i));
      if (n < 0) continue;  // null: no document
      const int64_t length = n + (p_.eos ? 1 : 0);
      if (length == 0) continue;  // empty, without a separator
      if (length > s_ && p_.overlong == "drop") {
        ++stats_.overlong_dropped;
        continue;
      }
      if (length > std::numeric_limits<int32_t>::max() && p_.position_ids) {
        return arrow::Status::Invalid("transform: 'pack': row ", first_row + i,
                                      " of the task: ", length,
                                      " tokens have positions beyond int32");
      }
      ++stats_.documents;
      if (length > s_) ++stats_.overlong_split;
      if (!ffd_) {
        ARROW_RETURN_NOT_OK(Write(cols, i, n, 0, length, out));
        continue;
      }
      ARROW_RETURN_NOT_OK(Hold(i, length, out));
    }
    // A batch none of whose documents wait in the window is not held.
    if (ffd_ && !batch_held_) window_.pop_back();
    return arrow::Status::OK();
  }

  arrow::Status Finish(std::vector<std::shared_ptr<arrow::RecordBatch>>* out) override {
    if (ffd_) {
      ARROW_RETURN_NOT_OK(PackWindow(out));
      return Flush(held_ / s_, out);  // every row is whole
    }
    const int64_t partial = held_ % s_;
    if (partial != 0 && p_.tail == "pad") {
      ARROW_RETURN_NOT_OK(Pad(s_ - partial));
    } else {
      stats_.tail_dropped_tokens += partial;
      stats_.tokens -= partial;
    }
    return Flush(held_ / s_, out);  // tail "drop": a partial row is not flushed
  }

  PackStats pack_stats() const override { return stats_; }

 private:
  // Row `i`'s length in every packed column, the same or refused; -1: null.
  arrow::Result<int64_t> Aligned(const std::vector<TokenColumn>& cols, int64_t i,
                                 int64_t task_row) const {
    const bool null = cols[0].IsNull(i);
    const int64_t n = null ? 0 : cols[0].Length(i);
    for (size_t c = 1; c < cols.size(); ++c) {
      const bool other_null = cols[c].IsNull(i);
      if (other_null == null && (null || cols[c].Length(i) == n)) continue;
      const auto names = p_.Columns();
      auto tokens = [](bool is_null, int64_t k, bool first) {
        if (is_null) return std::string("is null");
        return (first ? "has " : "") + std::to_string(k) + (first ? " tokens" : "");
      };
      return arrow::Status::Invalid("transform: 'pack': row ", task_row, " of the task: '",
                                    names[0], "' ", tokens(null, n, true), ", '", names[c], "' ",
                                    tokens(other_null, other_null ? 0 : cols[c].Length(i), false),
                                    "; packed columns must be aligned (equal lengths per row)");
    }
    return null ? -1 : n;
  }

  // Tokens [from, to) of the document in row `i` (n ids, then the eos when
  // given), appended to the rows being built.
  arrow::Status Write(const std::vector<TokenColumn>& cols, int64_t i, int64_t n, int64_t from,
                      int64_t to, std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
    int64_t k = from;
    while (k < to) {
      // Up to the end of the batch being built, then it goes out.
      const int64_t m = std::min(to - k, batch_tokens_ - held_);
      ARROW_RETURN_NOT_OK(Reserve(m));
      const int64_t real = std::max<int64_t>(0, std::min(k + m, n) - k);  // ids, not the eos
      for (size_t c = 0; c < cols.size(); ++c) {
        auto& b = builders_[c];
        if (real > 0) ARROW_RETURN_NOT_OK(b.AppendValues(cols[c].Row(i) + k, real));
        if (real < m) b.UnsafeAppend(static_cast<int32_t>(*p_.eos));  // one column: spec-checked
      }
      if (labels_ >= 0 && k == 0) {
        // The document's first label: nothing before it in the row is its context.
        auto* data = builders_[labels_].GetMutableValue(builders_[labels_].length() - m);
        *data = kIgnoreLabel;
      }
      if (p_.Pads()) {
        for (int64_t j = 0; j < m; ++j) mask_.UnsafeAppend(1);
      }
      if (p_.position_ids) {
        for (int64_t j = 0; j < m; ++j) positions_.UnsafeAppend(static_cast<int32_t>(k + j));
      }
      held_ += m;
      stats_.tokens += m;
      k += m;
      if (held_ == batch_tokens_) ARROW_RETURN_NOT_OK(Flush(batch_rows_, out));
    }
    return arrow::Status::OK();
  }

  // `m` pad tokens (never past a row's end: callers pad rows to their end).
  arrow::Status Pad(int64_t m) {
    ARROW_RETURN_NOT_OK(Reserve(m));
    for (size_t c = 0; c < builders_.size(); ++c) {
      const auto value =
          static_cast<int32_t>(static_cast<int>(c) == labels_ ? kIgnoreLabel : p_.pad);
      for (int64_t j = 0; j < m; ++j) builders_[c].UnsafeAppend(value);
    }
    for (int64_t j = 0; j < m; ++j) mask_.UnsafeAppend(0);
    if (p_.position_ids) {
      for (int64_t j = 0; j < m; ++j) positions_.UnsafeAppend(0);
    }
    held_ += m;
    stats_.pad_tokens += m;
    return arrow::Status::OK();
  }

  // Room for `m` more tokens in every builder: they grow together, doubling,
  // up to one batch of packed rows.
  arrow::Status Reserve(int64_t m) {
    auto& ids = builders_[0];
    if (ids.length() + m <= ids.capacity()) return arrow::Status::OK();
    const int64_t more = std::min(batch_tokens_ - held_, std::max<int64_t>({held_, 4096, m}));
    for (auto& b : builders_) ARROW_RETURN_NOT_OK(b.Reserve(more));
    if (p_.Pads()) ARROW_RETURN_NOT_OK(mask_.Reserve(more));
    if (p_.position_ids) ARROW_RETURN_NOT_OK(positions_.Reserve(more));
    return arrow::Status::OK();
  }

  // The first `rows` rows held go out as one batch; the builders start over.
  arrow::Status Flush(int64_t rows, std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
    arrow::ArrayVector columns;
    const auto& schema = t_->output_schema_;
    auto fixed = [&](arrow::ArrayBuilder* b) -> arrow::Status {
      ARROW_ASSIGN_OR_RAISE(auto values, b->Finish());
      const auto& type = schema->field(static_cast<int>(columns.size()))->type();
      ARROW_ASSIGN_OR_RAISE(
          auto list, arrow::FixedSizeListArray::FromArrays(values->Slice(0, rows * s_), type));
      columns.push_back(std::move(list));
      return arrow::Status::OK();
    };
    // In output_schema_'s order: the packed columns, the mask, the positions.
    for (auto& b : builders_) ARROW_RETURN_NOT_OK(fixed(&b));
    if (p_.Pads()) ARROW_RETURN_NOT_OK(fixed(&mask_));
    if (p_.position_ids) ARROW_RETURN_NOT_OK(fixed(&positions_));
    held_ = 0;
    stats_.rows += rows;
    if (rows > 0) out->push_back(arrow::RecordBatch::Make(schema, rows, std::move(columns)));
    return arrow::Status::OK();
  }

  // FFD: the document joins the window; a full window is packed first, so
  // windows never depend on where the input's batches are cut.
  arrow::Status Hold(int64_t i, int64_t length,
                     std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
    if (window_tokens_ > 0 && window_tokens_ + std::min(length, s_) > batch_tokens_) {
      std::vector<TokenColumn> current = window_.back();  // this batch's rest goes on
      ARROW_RETURN_NOT_OK(PackWindow(out));
      window_.push_back(std::move(current));
    }
    const auto batch = static_cast<int32_t>(window_.size() - 1);
    batch_held_ = true;
    if (length <= s_) {
      whole_.push_back({batch, i, 0, length});
      window_tokens_ += length;
      return arrow::Status::OK();
    }
    // Split: full rows now, in order; the last piece opens a row of the window.
    int64_t from = 0;
    for (; length - from > s_; from += s_) {
      ARROW_RETURN_NOT_OK(WritePiece({batch, i, from, s_}, out));
    }
    opening_.push_back({batch, i, from, length - from});
    window_tokens_ += length - from;
    return arrow::Status::OK();
  }

  // The window's pieces into rows: the last pieces of split documents each
  // open a row, in order, then the whole documents go longest first into
  // the first row with room (ties in arrival order).
  arrow::Status PackWindow(std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
    const size_t pieces = opening_.size() + whole_.size();
    if (pieces > 0) {
      std::vector<std::vector<const Piece*>> bins;
      FirstFit fit(pieces);
      for (const Piece& piece : opening_) {
        fit.Set(bins.size(), s_ - piece.length);
        bins.push_back({&piece});
      }
      std::vector<size_t> order(whole_.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return whole_[a].length > whole_[b].length; });
      std::vector<int64_t> used(bins.size());
      for (size_t b = 0; b < bins.size(); ++b) used[b] = bins[b][0]->length;
      for (size_t k : order) {
        const Piece& piece = whole_[k];
        std::optional<size_t> bin = fit.Find(piece.length);
        if (!bin) {
          bin = bins.size();
          bins.emplace_back();
          used.push_back(0);
        }
        bins[*bin].push_back(&piece);
        used[*bin] += piece.length;
        fit.Set(*bin, s_ - used[*bin]);
      }
      for (size_t b = 0; b < bins.size(); ++b) {
        for (const Piece* piece : bins[b]) ARROW_RETURN_NOT_OK(WritePiece(*piece, out));
        if (used[b] < s_) ARROW_RETURN_NOT_OK(Pad(s_ - used[b]));
        if (held_ == batch_tokens_) ARROW_RETURN_NOT_OK(Flush(batch_rows_, out));
      }
    }
    opening_.clear();
    whole_.clear();
    window_.clear();
    window_tokens_ = 0;
    return arrow::Status::OK();
  }

  arrow::Status WritePiece(const Piece& piece,
                           std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
    const auto& cols = window_[piece.batch];
    const int64_t n = cols[0].Length(piece.row);
    return Write(cols, piece.row, n, piece.offset, piece.offset + piece.length, out);
  }

  const Transform* t_;
  const PackSpec& p_;
  const int64_t s_;
  const int64_t batch_rows_;
  const int64_t batch_tokens_;
  const bool ffd_;
  arrow::MemoryPool* pool_;
  std::vector<int> columns_;  // the packed columns' indices in columns_schema_
  int labels_ = -1;           // the labels column among them
  std::vector<arrow::Int32Builder> builders_;
  arrow::Int8Builder mask_;
  arrow::Int32Builder positions_;
  int64_t held_ = 0;       // tokens in the builders
  int64_t rows_seen_ = 0;  // the task's input rows so far (for errors)
  PackStats stats_;
  // FFD's window: the input batches its documents are in, and their pieces.
  std::vector<std::vector<TokenColumn>> window_;
  std::vector<Piece> opening_;  // last pieces of split documents: each opens a row
  std::vector<Piece> whole_;    // documents of at most seq_len tokens
  int64_t window_tokens_ = 0;
  bool batch_held_ = false;  // a piece in the window is in the last input batch
};

std::unique_ptr<Transform::TaskStream> Transform::MakePackStream(int64_t batch_rows,
                                                                 arrow::MemoryPool* pool) const {
  return std::make_unique<PackStream>(this, batch_rows, pool);
}

}  // namespace icefloe::transform
