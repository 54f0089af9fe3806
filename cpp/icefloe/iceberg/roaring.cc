#include "icefloe/iceberg/roaring.h"

#include <bit>
#include <cstring>
#include <string>

#include <arrow/util/endian.h>

namespace icefloe::iceberg {

namespace {

constexpr uint32_t kCookieNoRuns = 12346;
constexpr uint32_t kCookieRuns = 12347;
constexpr uint32_t kNoOffsetThreshold = 4;
constexpr uint32_t kMaxArrayCardinality = 4096;
constexpr size_t kBitsetBytes = 8192;

// Reads little-endian integers from a byte range, failing instead of overrunning.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  arrow::Result<T> Read(const char* what) {
    if (bytes_.size() - pos_ < sizeof(T)) {
      return arrow::Status::Invalid("Roaring bitmap truncated in ", what, " at byte ", pos_);
    }
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return arrow::bit_util::FromLittleEndian(v);
  }

  arrow::Result<std::string_view> Take(size_t n, const char* what) {
    if (bytes_.size() - pos_ < n) {
      return arrow::Status::Invalid("Roaring bitmap truncated in ", what, " at byte ", pos_);
    }
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

struct Container {
  uint16_t key = 0;
  uint32_t cardinality = 0;
  bool run = false;
};

// Appends (high | v) for each value v of one container, checking order and bounds.
class Sink {
 public:
  Sink(uint64_t high, int64_t limit, std::vector<int64_t>* out)
      : high_(high), limit_(limit), out_(out) {}

  arrow::Status Add(uint32_t low) {
    const uint64_t value = high_ | low;
    if (value >= static_cast<uint64_t>(limit_)) {
      return arrow::Status::Invalid("Roaring bitmap holds ", value, ", not below the limit ",
                                    limit_);
    }
    if (!out_->empty() && static_cast<uint64_t>(out_->back()) >= value) {
      return arrow::Status::Invalid("Roaring bitmap values are not ascending at ", value);
    }
    out_->push_back(static_cast<int64_t>(value));
    return arrow::Status::OK();
  }

 private:
  uint64_t high_;
  int64_t limit_;
  std::vector<int64_t>* out_;
};

arrow::Status DecodeContainer(Cursor* in, const Container& c, Sink* sink) {
  const uint32_t base = static_cast<uint32_t>(c.key) << 16;
  uint32_t seen = 0;
  if (c.run) {
    ARROW_ASSIGN_OR_RAISE(uint16_t runs, in->Read<uint16_t>("run count"));
    for (uint16_t r = 0; r < runs; ++r) {
      ARROW_ASSIGN_OR_RAISE(uint16_t start, in->Read<uint16_t>("run start"));
      ARROW_ASSIGN_OR_RAISE(uint16_t length_minus_one, in->Read<uint16_t>("run length"));
      const uint32_t end = uint32_t{start} + length_minus_one;  // inclusive
      if (end > 0xFFFF) return arrow::Status::Invalid("Roaring run passes the container's end");
      for (uint32_t v = start; v <= end; ++v) ARROW_RETURN_NOT_OK(sink->Add(base | v));
      seen += end - start + 1;
    }
  } else if (c.cardinality <= kMaxArrayCardinality) {
    for (uint32_t i = 0; i < c.cardinality; ++i) {
      ARROW_ASSIGN_OR_RAISE(uint16_t v, in->Read<uint16_t>("array container"));
      ARROW_RETURN_NOT_OK(sink->Add(base | v));
    }
    seen = c.cardinality;
  } else {
    ARROW_ASSIGN_OR_RAISE(std::string_view bits, in->Take(kBitsetBytes, "bitset container"));
    for (size_t word = 0; word < kBitsetBytes / 8; ++word) {
      uint64_t w;
      std::memcpy(&w, bits.data() + word * 8, 8);
      w = arrow::bit_util::FromLittleEndian(w);
      while (w != 0) {
        const int bit = std::countr_zero(w);
        ARROW_RETURN_NOT_OK(sink->Add(base | static_cast<uint32_t>(word * 64 + bit)));
        w &= w - 1;
        ++seen;
      }
    }
  }
  if (seen != c.cardinality) {
    return arrow::Status::Invalid("Roaring container ", c.key, " holds ", seen,
                                  " values, its header says ", c.cardinality);
  }
  return arrow::Status::OK();
}

// One 32-bit bitmap in the portable format.
arrow::Status DecodeBitmap32(Cursor* in, uint32_t high_key, int64_t limit,
                             std::vector<int64_t>* out) {
  ARROW_ASSIGN_OR_RAISE(uint32_t cookie, in->Read<uint32_t>("cookie"));
  uint32_t containers = 0;
  std::string_view run_flags;
  const bool has_runs = (cookie & 0xFFFF) == kCookieRuns;
  if (has_runs) {
    containers = (cookie >> 16) + 1;
    ARROW_ASSIGN_OR_RAISE(run_flags, in->Take((containers + 7) / 8, "run flags"));
  } else if (cookie == kCookieNoRuns) {
    ARROW_ASSIGN_OR_RAISE(containers, in->Read<uint32_t>("container count"));
  } else {
    return arrow::Status::Invalid("Roaring bitmap has an unknown cookie ", cookie);
  }
  // Each container needs at least its 4-byte header and 2 bytes of content.
  if (containers > 65536 || containers > in->remaining() / 6) {
    return arrow::Status::Invalid("Roaring bitmap claims ", containers, " containers in ",
                                  in->remaining(), " bytes");
  }
  std::vector<Container> headers(containers);
  for (uint32_t i = 0; i < containers; ++i) {
    ARROW_ASSIGN_OR_RAISE(headers[i].key, in->Read<uint16_t>("container key"));
    ARROW_ASSIGN_OR_RAISE(uint16_t card_minus_one, in->Read<uint16_t>("container cardinality"));
    headers[i].cardinality = uint32_t{card_minus_one} + 1;
    headers[i].run = has_runs && (static_cast<uint8_t>(run_flags[i / 8]) >> (i % 8)) & 1;
    if (i > 0 && headers[i].key <= headers[i - 1].key) {
      return arrow::Status::Invalid("Roaring container keys are not ascending");
    }
  }
  // The offsets only allow random access; containers are read in order.
  if (!has_runs || containers >= kNoOffsetThreshold) {
    ARROW_RETURN_NOT_OK(in->Take(size_t{containers} * 4, "offsets").status());
  }
  const uint64_t high = uint64_t{high_key} << 32;
  for (const Container& c : headers) {
    Sink sink(high, limit, out);
    ARROW_RETURN_NOT_OK(DecodeContainer(in, c, &sink));
  }
  return arrow::Status::OK();
}

template <typename T>
void Put(std::string* out, T v) {
  v = arrow::bit_util::ToLittleEndian(v);
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// The runs [start, end] of ascending 16-bit values.
std::vector<std::pair<uint16_t, uint16_t>> Runs(const std::vector<uint16_t>& values) {
  std::vector<std::pair<uint16_t, uint16_t>> runs;
  for (uint16_t v : values) {
    if (!runs.empty() && runs.back().second + 1 == v) {
      runs.back().second = v;
    } else {
      runs.push_back({v, v});
    }
  }
  return runs;
}

std::string EncodeBitmap32(const std::vector<std::pair<uint16_t, std::vector<uint16_t>>>& groups,
                           bool use_runs) {
  std::string out;
  const uint32_t n = static_cast<uint32_t>(groups.size());
  std::vector<bool> run(n, false);
  if (use_runs) {
    for (uint32_t i = 0; i < n; ++i) {
      run[i] = Runs(groups[i].second).size() * 4 + 2 < groups[i].second.size() * 2;
    }
  }
  if (use_runs && n > 0) {
    Put<uint32_t>(&out, kCookieRuns | ((n - 1) << 16));
    std::string flags((n + 7) / 8, '\0');
    for (uint32_t i = 0; i < n; ++i) {
      if (run[i]) flags[i / 8] = static_cast<char>(flags[i / 8] | (1 << (i % 8)));
    }
    out += flags;
  } else {
    Put<uint32_t>(&out, kCookieNoRuns);
    Put<uint32_t>(&out, n);
  }
  for (const auto& [key, values] : groups) {
    Put<uint16_t>(&out, key);
    Put<uint16_t>(&out, static_cast<uint16_t>(values.size() - 1));
  }
  std::vector<std::string> bodies;
  for (uint32_t i = 0; i < n; ++i) {
    const auto& values = groups[i].second;
    std::string body;
    if (run[i]) {
      auto runs = Runs(values);
      Put<uint16_t>(&body, static_cast<uint16_t>(runs.size()));
      for (auto [start, end] : runs) {
        Put<uint16_t>(&body, start);
        Put<uint16_t>(&body, static_cast<uint16_t>(end - start));
      }
    } else if (values.size() <= kMaxArrayCardinality) {
      for (uint16_t v : values) Put<uint16_t>(&body, v);
    } else {
      std::string bits(kBitsetBytes, '\0');
      for (uint16_t v : values) bits[v / 8] = static_cast<char>(bits[v / 8] | (1 << (v % 8)));
      body = std::move(bits);
    }
    bodies.push_back(std::move(body));
  }
  if (!(use_runs && n > 0) || n >= kNoOffsetThreshold) {
    uint32_t offset = static_cast<uint32_t>(out.size() + n * 4);
    for (const auto& body : bodies) {
      Put<uint32_t>(&out, offset);
      offset += static_cast<uint32_t>(body.size());
    }
  }
  for (const auto& body : bodies) out += body;
  return out;
}

}  // namespace

arrow::Result<std::vector<int64_t>> DecodeRoaring64(std::string_view bytes, int64_t limit,
                                                    size_t* consumed) {
  Cursor in(bytes);
  ARROW_ASSIGN_OR_RAISE(uint64_t count, in.Read<uint64_t>("bitmap count"));
  // Each 32-bit bitmap takes at least a key and a cookie.
  if (count > in.remaining() / 8) {
    return arrow::Status::Invalid("Roaring bitmap claims ", count, " 32-bit bitmaps in ",
                                  in.remaining(), " bytes");
  }
  std::vector<int64_t> values;
  int64_t previous_key = -1;
  for (uint64_t i = 0; i < count; ++i) {
    ARROW_ASSIGN_OR_RAISE(uint32_t key, in.Read<uint32_t>("bitmap key"));
    if (static_cast<int64_t>(key) <= previous_key) {
      return arrow::Status::Invalid("Roaring 64-bit keys are not ascending");
    }
    previous_key = key;
    ARROW_RETURN_NOT_OK(DecodeBitmap32(&in, key, limit, &values));
  }
  if (consumed != nullptr) *consumed = in.pos();
  return values;
}

arrow::Result<std::string> EncodeRoaring64(const std::vector<int64_t>& values, bool use_runs) {
  // high key -> (low 16-bit key -> values)
  std::vector<std::pair<uint32_t, std::vector<std::pair<uint16_t, std::vector<uint16_t>>>>> tree;
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t v = values[i];
    if (v < 0 || (i > 0 && v <= values[i - 1])) {
      return arrow::Status::Invalid("values must be non-negative, ascending and distinct");
    }
    const auto high = static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32);
    const auto key = static_cast<uint16_t>((v >> 16) & 0xFFFF);
    if (tree.empty() || tree.back().first != high) tree.push_back({high, {}});
    auto& groups = tree.back().second;
    if (groups.empty() || groups.back().first != key) groups.push_back({key, {}});
    groups.back().second.push_back(static_cast<uint16_t>(v & 0xFFFF));
  }
  std::string out;
  Put<uint64_t>(&out, tree.size());
  for (const auto& [high, groups] : tree) {
    Put<uint32_t>(&out, high);
    out += EncodeBitmap32(groups, use_runs);
  }
  return out;
}

}  // namespace icefloe::iceberg
