// AvroReader: header, blocks, codecs and the binary decoding of values.
#include "icefloe/iceberg/avro.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include <arrow/util/compression.h>

namespace icefloe::iceberg {
namespace {

using SchemaPtr = std::shared_ptr<const AvroSchema>;

constexpr char kMagic[4] = {'O', 'b', 'j', '\x01'};
constexpr int64_t kSyncBytes = 16;
// Decoded values may outnumber the bytes they come from (nulls and records take no bytes of
// their own), but not by much in real files: each file may decode kValueBudgetSlack values
// plus kValuesPerByte per decompressed byte. This bounds time and memory on hostile input.
constexpr int64_t kValueBudgetSlack = int64_t{1} << 20;
constexpr int64_t kValuesPerByte = 16;
// First output buffer for codecs that do not state the decompressed size.
constexpr int64_t kMinInflateBuffer = int64_t{64} << 10;

enum class Codec { kNull, kDeflate, kSnappy, kZstandard };

// CRC-32 (IEEE 802.3, as in zlib): the checksum after each snappy block.
uint32_t Crc32(const uint8_t* data, size_t size) {
  static const std::array<uint32_t, 256> kTable = [] {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return table;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = kTable[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// Bytes being decoded and where they came from, for error messages.
struct Region {
  const uint8_t* data = nullptr;
  int64_t size = 0;
  // File offset of data[0] for the file's own bytes; of the compressed block otherwise.
  int64_t file_offset = 0;
  // Empty for the file's own bytes, else the codec that produced them.
  std::string_view codec;
};

// Decodes Avro binary encoding from a Region, checking every length against what remains.
class Decoder {
 public:
  // `path` must outlive the decoder.
  Decoder(const std::string& path, Region region, int64_t* value_budget, int64_t pos = 0)
      : path_(path), region_(region), pos_(pos), value_budget_(value_budget) {}

  int64_t pos() const { return pos_; }
  int64_t remaining() const { return region_.size - pos_; }

  template <typename... Args>
  arrow::Status Corrupt(int64_t at, Args&&... args) const {
    std::string where = "at offset " + std::to_string(region_.file_offset + at);
    if (!region_.codec.empty()) {
      where = "at offset " + std::to_string(at) + " of the " + std::string(region_.codec) +
              " block at file offset " + std::to_string(region_.file_offset) + " (decompressed)";
    }
    return arrow::Status::Invalid("corrupt Avro file ", path_, ": ", std::forward<Args>(args)...,
                                  " ", where);
  }

  arrow::Result<std::string_view> Bytes(int64_t n, std::string_view what) {
    if (n < 0 || n > remaining()) {
      return Corrupt(pos_, what, " of ", n, " bytes overruns the ", remaining(), " bytes left");
    }
    std::string_view out(reinterpret_cast<const char*>(region_.data + pos_),
                         static_cast<size_t>(n));
    pos_ += n;
    return out;
  }

  // A zig-zag varint of at most 10 bytes.
  arrow::Result<int64_t> Long() {
    const int64_t start = pos_;
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos_ >= region_.size) return Corrupt(start, "truncated varint");
      const uint8_t b = region_.data[pos_++];
      // The tenth byte holds bit 63 only, and must end the varint.
      if (i == 9 && b > 1) return Corrupt(start, "varint longer than 10 bytes or over 64 bits");
      v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
      if ((b & 0x80) == 0) break;
    }
    return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  }

  arrow::Result<int32_t> Int() {
    const int64_t start = pos_;
    ARROW_ASSIGN_OR_RAISE(int64_t v, Long());
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      return Corrupt(start, "int ", v, " out of range");
    }
    return static_cast<int32_t>(v);
  }

  // A long length, then that many bytes (bytes and string).
  arrow::Result<std::string_view> LengthPrefixed(std::string_view what) {
    const int64_t start = pos_;
    ARROW_ASSIGN_OR_RAISE(int64_t n, Long());
    if (n < 0 || n > remaining()) {
      return Corrupt(start, what, " length ", n, " overruns the ", remaining(), " bytes left");
    }
    return Bytes(n, what);
  }

  // The item count of the next array or map block (0 at the end). A negative count is followed
  // by the block's size in bytes. Counts that cannot fit in the bytes left are errors.
  arrow::Result<int64_t> BlockCount(int64_t min_item_bytes, std::string_view what) {
    const int64_t start = pos_;
    ARROW_ASSIGN_OR_RAISE(int64_t count, Long());
    if (count < 0) {
      if (count == std::numeric_limits<int64_t>::min()) {
        return Corrupt(start, "invalid ", what, " block count");
      }
      count = -count;
      ARROW_ASSIGN_OR_RAISE(int64_t size, Long());
      if (size < 0 || size > remaining()) {
        return Corrupt(start, what, " block size ", size, " overruns the ", remaining(),
                       " bytes left");
      }
    }
    if (min_item_bytes > 0 && count > remaining() / min_item_bytes) {
      return Corrupt(start, what, " block count ", count, " exceeds the ", remaining(),
                     " bytes left");
    }
    return count;
  }

  arrow::Status Value(const SchemaPtr& schema, AvroValue* out, int32_t branch = -1);

 private:
  template <typename T>
  arrow::Result<T> LittleEndian(std::string_view what) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    ARROW_ASSIGN_OR_RAISE(std::string_view b, Bytes(sizeof(T), what));
    Bits bits = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      bits |= static_cast<Bits>(static_cast<uint8_t>(b[i])) << (8 * i);
    }
    return std::bit_cast<T>(bits);
  }

  arrow::Status Array(const AvroSchema& schema, AvroArray* items);
  arrow::Status Map(const AvroSchema& schema, AvroMap* entries);

  const std::string& path_;
  Region region_;
  int64_t pos_;
  int64_t* value_budget_;
};

arrow::Status Decoder::Value(const SchemaPtr& schema, AvroValue* out, int32_t branch) {
  if (--*value_budget_ < 0) {
    return Corrupt(pos_, "more values than the file's size allows (corrupt counts?)");
  }
  const AvroSchema& s = *schema;
  const int64_t start = pos_;
  switch (s.type) {
    case AvroType::kNull:
      *out = AvroValue(s.type, std::monostate{}, branch);
      return arrow::Status::OK();
    case AvroType::kBoolean: {
      ARROW_ASSIGN_OR_RAISE(std::string_view b, Bytes(1, "boolean"));
      const auto byte = static_cast<uint8_t>(b[0]);
      if (byte > 1) return Corrupt(start, "boolean byte ", static_cast<int>(byte));
      *out = AvroValue(s.type, byte == 1, branch);
      return arrow::Status::OK();
    }
    case AvroType::kInt: {
      ARROW_ASSIGN_OR_RAISE(int32_t v, Int());
      *out = AvroValue(s.type, int64_t{v}, branch);
      return arrow::Status::OK();
    }
    case AvroType::kLong: {
      ARROW_ASSIGN_OR_RAISE(int64_t v, Long());
      *out = AvroValue(s.type, v, branch);
      return arrow::Status::OK();
    }
    case AvroType::kFloat: {
      ARROW_ASSIGN_OR_RAISE(float v, LittleEndian<float>("float"));
      *out = AvroValue(s.type, v, branch);
      return arrow::Status::OK();
    }
    case AvroType::kDouble: {
      ARROW_ASSIGN_OR_RAISE(double v, LittleEndian<double>("double"));
      *out = AvroValue(s.type, v, branch);
      return arrow::Status::OK();
    }
    case AvroType::kBytes:
    case AvroType::kString: {
      ARROW_ASSIGN_OR_RAISE(std::string_view v, LengthPrefixed(AvroTypeName(s.type)));
      *out = AvroValue(s.type, std::string(v), branch);
      return arrow::Status::OK();
    }
    case AvroType::kFixed: {
      ARROW_ASSIGN_OR_RAISE(std::string_view v, Bytes(s.fixed_size, "fixed"));
      *out = AvroValue(s.type, std::string(v), branch);
      return arrow::Status::OK();
    }
    case AvroType::kEnum: {
      ARROW_ASSIGN_OR_RAISE(int32_t index, Int());
      if (index < 0 || static_cast<size_t>(index) >= s.symbols.size()) {
        return Corrupt(start, "enum index ", index, " out of range for ", s.symbols.size(),
                       " symbols of '", s.name, "'");
      }
      *out = AvroValue(s.type, AvroEnum{index, s.symbols[index]}, branch);
      return arrow::Status::OK();
    }
    case AvroType::kRecord: {
      AvroRecord record{schema, std::vector<AvroValue>(s.fields.size())};
      for (size_t i = 0; i < s.fields.size(); ++i) {
        ARROW_RETURN_NOT_OK(Value(s.fields[i].schema, &record.fields[i]));
      }
      *out = AvroValue(s.type, std::move(record), branch);
      return arrow::Status::OK();
    }
    case AvroType::kArray: {
      AvroArray items;
      ARROW_RETURN_NOT_OK(Array(s, &items));
      *out = AvroValue(s.type, std::move(items), branch);
      return arrow::Status::OK();
    }
    case AvroType::kMap: {
      AvroMap entries;
      ARROW_RETURN_NOT_OK(Map(s, &entries));
      *out = AvroValue(s.type, std::move(entries), branch);
      return arrow::Status::OK();
    }
    case AvroType::kUnion: {
      ARROW_ASSIGN_OR_RAISE(int64_t index, Long());
      if (index < 0 || static_cast<uint64_t>(index) >= s.branches.size()) {
        return Corrupt(start, "union branch ", index, " out of range for ", s.branches.size(),
                       " branches");
      }
      return Value(s.branches[index], out, static_cast<int32_t>(index));
    }
  }
  return Corrupt(start, "unknown schema type");
}

arrow::Status Decoder::Array(const AvroSchema& s, AvroArray* items) {
  const int64_t min_bytes = s.items->min_encoded_bytes;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(int64_t count, BlockCount(min_bytes, "array"));
    if (count == 0) return arrow::Status::OK();
    // Counts of zero-byte items are bounded by the value budget only: grow as we go.
    if (min_bytes > 0) items->reserve(items->size() + static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      items->emplace_back();
      ARROW_RETURN_NOT_OK(Value(s.items, &items->back()));
    }
  }
}

arrow::Status Decoder::Map(const AvroSchema& s, AvroMap* entries) {
  // Each entry has at least a key length.
  const int64_t min_bytes = 1 + s.values->min_encoded_bytes;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(int64_t count, BlockCount(min_bytes, "map"));
    if (count == 0) return arrow::Status::OK();
    entries->reserve(entries->size() + static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      ARROW_ASSIGN_OR_RAISE(std::string_view key, LengthPrefixed("map key"));
      entries->emplace_back(std::string(key), AvroValue());
      ARROW_RETURN_NOT_OK(Value(s.values, &entries->back().second));
    }
  }
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return a > kMax - b ? kMax : a + b;
}

}  // namespace

class AvroReader::Impl {
 public:
  // `path` is the reader's, which outlives its Impl.
  Impl(const std::string& path, std::shared_ptr<arrow::Buffer> buffer,
       const AvroReaderOptions& options)
      : path_(path), buffer_(std::move(buffer)), options_(options) {}

  Region FileRegion() const { return Region{buffer_->data(), buffer_->size(), 0, {}}; }

  arrow::Status SetCodec(const std::string& name);
  arrow::Result<bool> Next(const SchemaPtr& schema, AvroValue* out);

  const std::string& path_;
  std::shared_ptr<arrow::Buffer> buffer_;
  AvroReaderOptions options_;
  std::string sync_;
  int64_t next_block_ = 0;  // file offset of the next block
  int64_t value_budget_ = kValueBudgetSlack;
  arrow::Status status_;  // sticky: the first error of Next

 private:
  arrow::Status LoadBlock(const SchemaPtr& schema);
  arrow::Status Decompress(const Decoder& at, int64_t block_offset, std::string_view data);
  arrow::Status Inflate(const Decoder& at, int64_t block_offset, std::string_view data);
  arrow::Status Unsnappy(const Decoder& at, int64_t block_offset, std::string_view data);
  arrow::Status TooLarge(int64_t block_offset) const {
    return arrow::Status::OutOfMemory("Avro file ", path_, ": block at file offset ", block_offset,
                                      " decompresses to more than ", options_.max_block_bytes,
                                      " bytes");
  }

  Codec codec_ = Codec::kNull;
  std::string_view codec_name_;
  std::unique_ptr<arrow::util::Codec> arrow_codec_;
  std::shared_ptr<arrow::util::Decompressor> decompressor_;
  std::vector<uint8_t> block_buffer_;  // decompressed block
  Region block_;
  std::optional<Decoder> block_decoder_;
  int64_t objects_left_ = 0;
};

arrow::Status AvroReader::Impl::SetCodec(const std::string& name) {
  if (name == "null") {
    codec_ = Codec::kNull;
    return arrow::Status::OK();
  }
  if (name == "deflate") {
    // Avro's deflate is raw RFC 1951 (no zlib header): Arrow's GZip codec in DEFLATE format.
    arrow::util::GZipCodecOptions options;
    options.gzip_format = arrow::util::GZipFormat::DEFLATE;
    ARROW_ASSIGN_OR_RAISE(arrow_codec_,
                          arrow::util::Codec::Create(arrow::Compression::GZIP, options));
    codec_ = Codec::kDeflate;
    codec_name_ = "deflate";
  } else if (name == "snappy") {
    ARROW_ASSIGN_OR_RAISE(arrow_codec_, arrow::util::Codec::Create(arrow::Compression::SNAPPY));
    codec_ = Codec::kSnappy;
    codec_name_ = "snappy";
    return arrow::Status::OK();  // one-shot: each block states its decompressed size
  } else if (name == "zstandard") {
    ARROW_ASSIGN_OR_RAISE(arrow_codec_, arrow::util::Codec::Create(arrow::Compression::ZSTD));
    codec_ = Codec::kZstandard;
    codec_name_ = "zstandard";
  } else {
    return arrow::Status::NotImplemented("Avro file ", path_, ": codec '", name,
                                         "' is not supported");
  }
  // Neither deflate nor zstandard blocks need state the decompressed size: stream them.
  ARROW_ASSIGN_OR_RAISE(decompressor_, arrow_codec_->MakeDecompressor());
  return arrow::Status::OK();
}

arrow::Result<bool> AvroReader::Impl::Next(const SchemaPtr& schema, AvroValue* out) {
  while (objects_left_ == 0) {
    if (block_decoder_ && block_decoder_->remaining() > 0) {
      return block_decoder_->Corrupt(block_decoder_->pos(), block_decoder_->remaining(),
                                     " bytes after the last object of the block");
    }
    block_decoder_.reset();
    if (next_block_ == buffer_->size()) return false;
    ARROW_RETURN_NOT_OK(LoadBlock(schema));
  }
  ARROW_RETURN_NOT_OK(block_decoder_->Value(schema, out));
  --objects_left_;
  return true;
}

arrow::Status AvroReader::Impl::LoadBlock(const SchemaPtr& schema) {
  Decoder file(path_, FileRegion(), &value_budget_, next_block_);
  const int64_t block_offset = next_block_;
  ARROW_ASSIGN_OR_RAISE(int64_t count, file.Long());
  if (count < 0) return file.Corrupt(block_offset, "negative object count ", count);
  const int64_t size_offset = file.pos();
  ARROW_ASSIGN_OR_RAISE(int64_t size, file.Long());
  if (size < 0 || size > file.remaining()) {
    return file.Corrupt(size_offset, "block size ", size, " overruns the ", file.remaining(),
                        " bytes left");
  }
  const int64_t data_offset = file.pos();
  ARROW_ASSIGN_OR_RAISE(std::string_view data, file.Bytes(size, "block"));
  const int64_t sync_offset = file.pos();
  ARROW_ASSIGN_OR_RAISE(std::string_view sync, file.Bytes(kSyncBytes, "sync marker"));
  if (sync != sync_) {
    return file.Corrupt(sync_offset, "sync marker does not match the header's");
  }
  next_block_ = file.pos();

  ARROW_RETURN_NOT_OK(Decompress(file, data_offset, data));
  const int64_t min_bytes = schema->min_encoded_bytes;
  if (min_bytes > 0 && count > block_.size / min_bytes) {
    return file.Corrupt(block_offset, "block of ", count, " objects has only ", block_.size,
                        " bytes");
  }
  // block_.size is at most max_file_bytes or max_block_bytes: no overflow.
  value_budget_ = SaturatingAdd(value_budget_, block_.size * kValuesPerByte);
  block_decoder_.emplace(path_, block_, &value_budget_);
  objects_left_ = count;
  return arrow::Status::OK();
}

arrow::Status AvroReader::Impl::Decompress(const Decoder& at, int64_t block_offset,
                                           std::string_view data) {
  switch (codec_) {
    case Codec::kNull:
      block_ = Region{.data = reinterpret_cast<const uint8_t*>(data.data()),
                      .size = static_cast<int64_t>(data.size()),
                      .file_offset = block_offset,
                      .codec = {}};
      return arrow::Status::OK();
    case Codec::kSnappy:
      ARROW_RETURN_NOT_OK(Unsnappy(at, block_offset, data));
      break;
    case Codec::kDeflate:
    case Codec::kZstandard:
      ARROW_RETURN_NOT_OK(Inflate(at, block_offset, data));
      break;
  }
  block_.data = block_buffer_.data();
  block_.file_offset = block_offset;
  block_.codec = codec_name_;
  return arrow::Status::OK();
}

// Streams a deflate or zstandard block into block_buffer_, growing it in doubling steps up to
// max_block_bytes. Sets block_.size.
arrow::Status AvroReader::Impl::Inflate(const Decoder& at, int64_t block_offset,
                                        std::string_view data) {
  const auto* in = reinterpret_cast<const uint8_t*>(data.data());
  const auto in_size = static_cast<int64_t>(data.size());
  const int64_t cap = std::max<int64_t>(1, options_.max_block_bytes);
  ARROW_RETURN_NOT_OK(decompressor_->Reset());
  block_buffer_.resize(static_cast<size_t>(
      std::min(cap, std::max(kMinInflateBuffer, std::min(in_size, cap / 4) * 4))));
  int64_t in_pos = 0;
  int64_t out_size = 0;
  while (true) {
    if (decompressor_->IsFinished()) {
      // Deflate ends with its final block; bytes after it are ignored, as Java's Avro does.
      if (in_pos == in_size || codec_ == Codec::kDeflate) break;
      ARROW_RETURN_NOT_OK(decompressor_->Reset());  // zstandard: another frame follows
    }
    const auto capacity = static_cast<int64_t>(block_buffer_.size());
    if (out_size == capacity) {
      if (capacity >= cap) return TooLarge(block_offset);
      block_buffer_.resize(static_cast<size_t>(std::min(cap, capacity * 2)));
      continue;
    }
    auto result = decompressor_->Decompress(in_size - in_pos, in + in_pos, capacity - out_size,
                                            block_buffer_.data() + out_size);
    if (!result.ok()) {
      return at.Corrupt(block_offset, codec_name_, " data: ", result.status().message());
    }
    in_pos += result->bytes_read;
    out_size += result->bytes_written;
    if (result->bytes_read == 0 && result->bytes_written == 0 && out_size < capacity) {
      return at.Corrupt(block_offset, "truncated ", codec_name_, " data");
    }
  }
  block_.size = out_size;
  return arrow::Status::OK();
}

// A snappy block: the raw snappy data, then a big-endian CRC32 of the decompressed bytes.
arrow::Status AvroReader::Impl::Unsnappy(const Decoder& at, int64_t block_offset,
                                         std::string_view data) {
  if (data.size() < 4) return at.Corrupt(block_offset, "snappy block shorter than its CRC");
  const auto* in = reinterpret_cast<const uint8_t*>(data.data());
  const auto in_size = static_cast<int64_t>(data.size()) - 4;
  // Snappy data opens with the decompressed length as a varint32.
  uint64_t length = 0;
  int64_t i = 0;
  for (;; ++i) {
    if (i >= in_size || i >= 5) return at.Corrupt(block_offset, "bad snappy length preamble");
    length |= static_cast<uint64_t>(in[i] & 0x7F) << (7 * i);
    if ((in[i] & 0x80) == 0) break;
  }
  if (length > static_cast<uint64_t>(options_.max_block_bytes)) {
    return TooLarge(block_offset);
  }
  block_buffer_.resize(static_cast<size_t>(length));
  auto written =
      arrow_codec_->Decompress(in_size, in, static_cast<int64_t>(length), block_buffer_.data());
  if (!written.ok()) {
    return at.Corrupt(block_offset, "snappy data: ", written.status().message());
  }
  if (*written != static_cast<int64_t>(length)) {
    return at.Corrupt(block_offset, "snappy data decompressed to ", *written, " bytes, not ",
                      length);
  }
  const uint8_t* crc = in + in_size;
  const uint32_t expected = (uint32_t{crc[0]} << 24) | (uint32_t{crc[1]} << 16) |
                            (uint32_t{crc[2]} << 8) | uint32_t{crc[3]};
  const uint32_t actual = Crc32(block_buffer_.data(), block_buffer_.size());
  if (expected != actual) {
    return at.Corrupt(block_offset, "snappy block CRC32 mismatch");
  }
  block_.size = static_cast<int64_t>(length);
  return arrow::Status::OK();
}

AvroReader::AvroReader(std::string path, std::shared_ptr<arrow::Buffer> buffer,
                       const AvroReaderOptions& options)
    : path_(std::move(path)), impl_(std::make_unique<Impl>(path_, std::move(buffer), options)) {}

AvroReader::~AvroReader() = default;

arrow::Result<std::unique_ptr<AvroReader>> AvroReader::Open(
    std::shared_ptr<arrow::io::RandomAccessFile> file, std::string path,
    const AvroReaderOptions& options) {
  auto wrap = [&path](const arrow::Status& st) {
    return st.WithMessage("reading Avro file ", path, ": ", st.message());
  };
  auto size = file->GetSize();
  if (!size.ok()) return wrap(size.status());
  if (*size > options.max_file_bytes) {
    return arrow::Status::OutOfMemory("Avro file ", path, " has ", *size,
                                      " bytes, more than the limit of ", options.max_file_bytes);
  }
  auto buffer = file->ReadAt(0, *size);
  if (!buffer.ok()) return wrap(buffer.status());
  if ((*buffer)->size() != *size) {
    return arrow::Status::IOError("reading Avro file ", path, ": read ", (*buffer)->size(), " of ",
                                  *size, " bytes");
  }
  return OpenBuffer(std::move(*buffer), std::move(path), options);
}

arrow::Result<std::unique_ptr<AvroReader>> AvroReader::OpenBuffer(
    std::shared_ptr<arrow::Buffer> buffer, std::string path, const AvroReaderOptions& options) {
  if (buffer->size() > options.max_file_bytes) {
    return arrow::Status::OutOfMemory("Avro file ", path, " has ", buffer->size(),
                                      " bytes, more than the limit of ", options.max_file_bytes);
  }
  std::unique_ptr<AvroReader> reader(new AvroReader(std::move(path), std::move(buffer), options));
  ARROW_RETURN_NOT_OK(reader->ParseHeader());
  return reader;
}

arrow::Status AvroReader::ParseHeader() {
  Decoder d(path_, impl_->FileRegion(), &impl_->value_budget_);
  auto magic = d.Bytes(sizeof(kMagic), "magic");
  if (!magic.ok() || std::memcmp(magic->data(), kMagic, sizeof(kMagic)) != 0) {
    return d.Corrupt(0, "not an Avro object container file (no 'Obj\\x01' magic)");
  }
  while (true) {
    // Each entry has at least two length bytes.
    ARROW_ASSIGN_OR_RAISE(int64_t count, d.BlockCount(2, "metadata map"));
    if (count == 0) break;
    for (int64_t i = 0; i < count; ++i) {
      ARROW_ASSIGN_OR_RAISE(std::string_view key, d.LengthPrefixed("metadata key"));
      ARROW_ASSIGN_OR_RAISE(std::string_view value, d.LengthPrefixed("metadata value"));
      metadata_[std::string(key)] = std::string(value);
    }
  }
  ARROW_ASSIGN_OR_RAISE(std::string_view sync, d.Bytes(kSyncBytes, "header sync marker"));
  impl_->sync_ = std::string(sync);
  impl_->next_block_ = d.pos();

  const std::string* schema_json = FindMetadata("avro.schema");
  if (schema_json == nullptr) {
    return arrow::Status::Invalid("corrupt Avro file ", path_, ": no avro.schema in its header");
  }
  auto schema = ParseAvroSchema(*schema_json);
  if (!schema.ok()) {
    return arrow::Status::Invalid("corrupt Avro file ", path_, ": ", schema.status().message());
  }
  schema_ = std::move(*schema);
  const std::string* codec = FindMetadata("avro.codec");
  codec_name_ = codec == nullptr || codec->empty() ? "null" : *codec;
  return impl_->SetCodec(codec_name_);
}

const std::string* AvroReader::FindMetadata(std::string_view key) const {
  auto it = metadata_.find(std::string(key));
  return it == metadata_.end() ? nullptr : &it->second;
}

arrow::Result<bool> AvroReader::Next(AvroValue* out) {
  if (!impl_->status_.ok()) return impl_->status_;
  auto result = impl_->Next(schema_, out);
  if (!result.ok()) impl_->status_ = result.status();
  return result;
}

arrow::Result<std::vector<AvroValue>> AvroReader::ReadAll() {
  std::vector<AvroValue> out;
  while (true) {
    AvroValue value;
    ARROW_ASSIGN_OR_RAISE(bool more, Next(&value));
    if (!more) return out;
    out.push_back(std::move(value));
  }
}

}  // namespace icefloe::iceberg
