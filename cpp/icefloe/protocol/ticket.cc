#include "icefloe/protocol/ticket.h"

#include "icefloe/common/byte_io.h"
#include "icefloe/common/hmac.h"

namespace icefloe {
namespace {

constexpr uint8_t kMagic1 = 'I';
constexpr uint8_t kMagic2 = 'F';
constexpr uint8_t kFlagSigned = 0x01;
constexpr uint8_t kFlagProjected = 0x02;
constexpr uint8_t kFlagLengths = 0x04;
constexpr size_t kFixedHeaderSize = 6;  // magic (3), version, kind, flags

bool ValidKind(uint8_t kind) { return kind >= 1 && kind <= 4; }

arrow::Result<std::vector<uint16_t>> ReadColumns(ByteReader& r) {
  ARROW_ASSIGN_OR_RAISE(uint16_t n, r.U16());
  if (n == 0) return arrow::Status::Invalid("Invalid ticket format: projection of 0 columns");
  std::vector<uint16_t> columns(n);
  std::vector<bool> seen;
  for (uint16_t i = 0; i < n; ++i) {
    ARROW_ASSIGN_OR_RAISE(columns[i], r.U16());
    if (columns[i] >= seen.size()) seen.resize(size_t{columns[i]} + 1, false);
    if (seen[columns[i]]) {
      return arrow::Status::Invalid("Invalid ticket format: column index ", columns[i],
                                    " appears twice in the projection");
    }
    seen[columns[i]] = true;
  }
  return columns;
}

// A kGrantedRows ticket: signed header (the grant), then the rows body. The
// body is deliberately outside the signature: the grant already allows any
// rows of that copy, so the client may list them itself.
arrow::Result<NativeTicket> DecodeGrantedRows(std::string_view bytes, std::string_view secret) {
  const auto flags = static_cast<uint8_t>(bytes[5]);
  if ((flags & ~(kFlagSigned | kFlagProjected)) != 0) {
    return arrow::Status::Invalid("Invalid ticket format: granted rows ticket with flags ",
                                  static_cast<int>(flags), " this node does not know");
  }
  ByteReader r(bytes.substr(kFixedHeaderSize), "Invalid ticket format: granted rows");
  NativeTicket ticket;
  ticket.header.kind = TicketKind::kGrantedRows;
  ARROW_ASSIGN_OR_RAISE(auto name, r.String16());
  ticket.header.dataset = std::string(name);
  ARROW_ASSIGN_OR_RAISE(ticket.header.generation, r.U64());
  if ((flags & kFlagProjected) != 0) {
    ARROW_ASSIGN_OR_RAISE(ticket.header.columns, ReadColumns(r));
  }
  const size_t grant_size = kFixedHeaderSize + r.position();
  ticket.signed_ = (flags & kFlagSigned) != 0;
  std::string_view mac;
  if (ticket.signed_) {
    ARROW_ASSIGN_OR_RAISE(mac, r.Bytes(kHmacSize));
  }
  if (!secret.empty()) {
    if (!ticket.signed_)
      return arrow::Status::Invalid("ticket is not signed; this cluster requires signed tickets");
    HmacDigest expected = HmacSha256(secret, bytes.substr(0, grant_size));
    if (!ConstantTimeEquals(mac, std::string_view(reinterpret_cast<const char*>(expected.data()),
                                                  expected.size()))) {
      return arrow::Status::Invalid("ticket signature mismatch (forged or from another cluster)");
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto body, r.Bytes(r.remaining()));
  ticket.body = std::string(body);
  return ticket;
}

}  // namespace

bool IsNativeTicket(std::string_view bytes) {
  return bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == kTicketMagic0 &&
         bytes[1] == kMagic1 && bytes[2] == kMagic2;
}

std::string EncodeNativeTicket(const TicketHeader& header, std::string_view body,
                               std::string_view secret) {
  std::string out;
  ByteWriter w(&out);
  w.U8(kTicketMagic0);
  w.U8(kMagic1);
  w.U8(kMagic2);
  w.U8(kTicketVersion);
  w.U8(static_cast<uint8_t>(header.kind));
  uint8_t flags = secret.empty() ? 0 : kFlagSigned;
  if (!header.columns.empty()) flags |= kFlagProjected;
  if (header.lengths) flags |= kFlagLengths;
  w.U8(flags);
  w.String16(header.dataset);
  w.U64(header.generation);
  if (!header.columns.empty()) {
    w.U16(static_cast<uint16_t>(header.columns.size()));  // at most kMaxTicketColumns
    for (uint16_t c : header.columns) w.U16(c);
  }
  w.Bytes(body);
  if (!secret.empty()) {
    HmacDigest mac = HmacSha256(secret, out);
    out.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  }
  return out;
}

arrow::Result<NativeTicket> DecodeNativeTicket(std::string_view bytes, std::string_view secret) {
  if (!IsNativeTicket(bytes) || bytes.size() < kFixedHeaderSize) {
    return arrow::Status::Invalid("Invalid ticket format: not an icefloe ticket");
  }
  const auto version = static_cast<uint8_t>(bytes[3]);
  if (version != kTicketVersion) {
    return arrow::Status::Invalid("Invalid ticket format: unsupported ticket version ",
                                  static_cast<int>(version));
  }
  const auto kind = static_cast<uint8_t>(bytes[4]);
  if (!ValidKind(kind)) {
    return arrow::Status::Invalid("Invalid ticket format: unknown ticket kind ",
                                  static_cast<int>(kind));
  }
  if (kind == static_cast<uint8_t>(TicketKind::kGrantedRows)) {
    return DecodeGrantedRows(bytes, secret);
  }
  const auto flags = static_cast<uint8_t>(bytes[5]);
  const bool is_signed = (flags & kFlagSigned) != 0;
  std::string_view signed_part = bytes;
  if (is_signed) {
    if (bytes.size() < kFixedHeaderSize + kHmacSize) {
      return arrow::Status::Invalid("Invalid ticket format: truncated signature");
    }
    signed_part = bytes.substr(0, bytes.size() - kHmacSize);
  }
  if (!secret.empty()) {
    if (!is_signed)
      return arrow::Status::Invalid("ticket is not signed; this cluster requires signed tickets");
    HmacDigest expected = HmacSha256(secret, signed_part);
    std::string_view given = bytes.substr(signed_part.size());
    if (!ConstantTimeEquals(given, std::string_view(reinterpret_cast<const char*>(expected.data()),
                                                    expected.size()))) {
      return arrow::Status::Invalid("ticket signature mismatch (forged or from another cluster)");
    }
  }

  ByteReader r(signed_part.substr(kFixedHeaderSize), "Invalid ticket format");
  NativeTicket ticket;
  ticket.signed_ = is_signed;
  ticket.header.kind = static_cast<TicketKind>(kind);
  ARROW_ASSIGN_OR_RAISE(auto name, r.String16());
  ticket.header.dataset = std::string(name);
  ARROW_ASSIGN_OR_RAISE(ticket.header.generation, r.U64());
  if ((flags & kFlagProjected) != 0) {
    ARROW_ASSIGN_OR_RAISE(ticket.header.columns, ReadColumns(r));
  }
  ticket.header.lengths = (flags & kFlagLengths) != 0;
  if (ticket.header.lengths &&
      (ticket.header.kind != TicketKind::kRange || ticket.header.columns.size() != 1)) {
    return arrow::Status::Invalid(
        "Invalid ticket format: a lengths ticket is a range ticket of exactly one column");
  }
  ARROW_ASSIGN_OR_RAISE(auto body, r.Bytes(r.remaining()));
  ticket.body = std::string(body);
  return ticket;
}

std::string EncodeReadGrant(const TicketHeader& header, std::string_view secret) {
  TicketHeader grant = header;
  grant.kind = TicketKind::kGrantedRows;
  // The same bytes as a signed ticket with an empty body: the MAC ends the grant.
  return EncodeNativeTicket(grant, {}, secret);
}

std::string EncodeGrantedRowsTicket(std::string_view grant, std::string_view rows_body) {
  std::string out;
  out.reserve(grant.size() + rows_body.size());
  out.append(grant);
  out.append(rows_body);
  return out;
}

arrow::Status CheckTicketColumns(const std::vector<uint16_t>& columns, int num_fields) {
  for (uint16_t c : columns) {
    if (static_cast<int>(c) >= num_fields) {
      return arrow::Status::Invalid("ticket column index ", c, " is outside the dataset's ",
                                    num_fields, " columns");
    }
  }
  return arrow::Status::OK();
}

std::string EncodeRangeBody(RowRange range) {
  std::string out;
  ByteWriter w(&out);
  w.U64(range.start);
  w.U64(range.stop);
  return out;
}

arrow::Result<RowRange> DecodeRangeBody(std::string_view body) {
  ByteReader r(body, "Invalid ticket format: range");
  RowRange range;
  ARROW_ASSIGN_OR_RAISE(range.start, r.U64());
  ARROW_ASSIGN_OR_RAISE(range.stop, r.U64());
  if (r.remaining() != 0)
    return arrow::Status::Invalid("Invalid ticket format: range has trailing bytes");
  if (range.stop < range.start) {
    return arrow::Status::Invalid("Invalid ticket format: range stop ", range.stop,
                                  " before start ", range.start);
  }
  return range;
}

namespace {

void PutKubeflowVarint(ByteWriter& w, uint64_t v) {
  if (v <= 250) {
    w.U8(static_cast<uint8_t>(v));
  } else if (v <= 0xFFFF) {
    w.U8(0xFB);
    w.U16(static_cast<uint16_t>(v));
  } else if (v <= 0xFFFFFFFFull) {
    w.U8(0xFC);
    w.U32(static_cast<uint32_t>(v));
  } else {
    w.U8(0xFD);
    w.U64(v);
  }
}

arrow::Result<uint64_t> GetKubeflowVarint(ByteReader& r) {
  ARROW_ASSIGN_OR_RAISE(uint8_t tag, r.U8());
  if (tag <= 250) return tag;
  switch (tag) {
    case 0xFB: {
      ARROW_ASSIGN_OR_RAISE(uint16_t v, r.U16());
      return v;
    }
    case 0xFC: {
      ARROW_ASSIGN_OR_RAISE(uint32_t v, r.U32());
      return v;
    }
    case 0xFD:
      return r.U64();
    default:
      return arrow::Status::Invalid("Invalid ticket format");
  }
}

}  // namespace

std::string EncodeKubeflowTicket(KubeflowTicket ticket) {
  std::string out;
  ByteWriter w(&out);
  PutKubeflowVarint(w, ticket.start);
  PutKubeflowVarint(w, ticket.end);
  return out;
}

arrow::Result<KubeflowTicket> DecodeKubeflowTicket(std::string_view bytes) {
  ByteReader r(bytes, "Invalid ticket format");
  KubeflowTicket t;
  auto start = GetKubeflowVarint(r);
  auto end = start.ok() ? GetKubeflowVarint(r) : start;
  if (!start.ok() || !end.ok()) return arrow::Status::Invalid("Invalid ticket format");
  t.start = *start;
  t.end = *end;
  return t;
}

}  // namespace icefloe
