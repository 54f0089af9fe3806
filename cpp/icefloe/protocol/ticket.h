// Tickets: what a consumer presents to a data node in DoGet.
//
// Two formats share the wire. icefloe's native tickets are versioned binary,
// self-describing and optionally signed (HMAC-SHA256 with the cluster secret);
// they start with 0xFF, a byte no Kubeflow ticket can start with. Kubeflow's
// tickets are two varint-encoded inclusive row bounds (see docs/protocol.md).
// Tickets are data, not state: a node needs nothing but the ticket to serve it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/row_range.h"

namespace icefloe {

inline constexpr uint8_t kTicketMagic0 = 0xFF;
inline constexpr uint8_t kTicketVersion = 1;

enum class TicketKind : uint8_t {
  kRange = 1,  ///< Contiguous global rows [start, stop).
  kPlan = 2,   ///< An epoch plan's coordinates (see plan/).
  kRows = 3,   ///< An explicit list of global row ids (random access).
  /// kRows' body under a head-signed read grant: the client lists the rows
  /// itself (the signature covers the header only, see EncodeReadGrant).
  kGrantedRows = 4,
};

/// Most columns a projected ticket names (its count is a u16, never 0).
inline constexpr size_t kMaxTicketColumns = 65535;

/// The part every native ticket has.
struct TicketHeader {
  TicketKind kind = TicketKind::kRange;
  std::string dataset;      ///< Dataset name.
  uint64_t generation = 0;  ///< Which loaded copy; reloads and evictions make tickets stale.
  /// Projection: indices into the cached dataset's schema, in output order,
  /// distinct; empty = every column. On the wire: flags bit 0x02 and, after
  /// the generation, u16 n (1..65535) then n u16 indices (signed with the rest).
  std::vector<uint16_t> columns = {};
  /// Row lengths instead of rows (kRange only, projected onto exactly one
  /// list<int32> column; flags bit 0x04, signed with the rest): the node
  /// answers each row's list length, uint16 when every length of the range
  /// fits, else uint32, computed from the list offsets.
  bool lengths = false;
};

/// A decoded native ticket: header plus the kind-specific body bytes.
struct NativeTicket {
  TicketHeader header;
  std::string body;
  bool signed_ = false;
};

/// Encodes a native ticket. When `secret` is non-empty the ticket is signed.
/// `header.columns` must hold at most kMaxTicketColumns distinct indices (the
/// head builds it from checked names; see CheckTicketColumns).
std::string EncodeNativeTicket(const TicketHeader& header, std::string_view body,
                               std::string_view secret);

/// Decodes a native ticket. With a non-empty `secret`, an unsigned ticket is
/// Invalid and a ticket whose signature does not match is Invalid("ticket
/// signature mismatch"); comparisons are constant-time. A kGrantedRows
/// ticket decodes with the grant's header and the (unsigned) rows body.
arrow::Result<NativeTicket> DecodeNativeTicket(std::string_view bytes, std::string_view secret);

/// A read grant: the signed prefix of a kGrantedRows ticket,
/// `FF 49 46 | 01 | 04 | flags | name | generation | HMAC-SHA256 of all
/// preceding bytes` (no HMAC and flags bit 0 clear without a secret). It
/// authorises reading any rows of `header.dataset` (a storage name) at
/// `header.generation`, as a head-signed range ticket over the whole dataset
/// would; `header.kind` is ignored. Appending a kRows body
/// (EncodeRowsBody) makes a ticket: EncodeGrantedRowsTicket.
std::string EncodeReadGrant(const TicketHeader& header, std::string_view secret);
/// `grant` (EncodeReadGrant) followed by a kRows body.
std::string EncodeGrantedRowsTicket(std::string_view grant, std::string_view rows_body);
/// OK when every index of `columns` names one of the dataset's `num_fields`
/// columns; Invalid naming the first index that does not (a ticket made for
/// another copy of the dataset).
arrow::Status CheckTicketColumns(const std::vector<uint16_t>& columns, int num_fields);

/// True when the bytes are a native ticket (by magic), false for Kubeflow's.
bool IsNativeTicket(std::string_view bytes);

/// Body of a kRange ticket: global rows [start, stop).
std::string EncodeRangeBody(RowRange range);
arrow::Result<RowRange> DecodeRangeBody(std::string_view body);

/// Kubeflow's ticket: inclusive bounds [start, end], each in Kubeflow's
/// variable-length little-endian integer encoding; trailing bytes ignored.
struct KubeflowTicket {
  uint64_t start = 0;
  uint64_t end = 0;  ///< Inclusive.
  bool operator==(const KubeflowTicket&) const = default;
};
std::string EncodeKubeflowTicket(KubeflowTicket ticket);
/// Invalid("Invalid ticket format") when the bytes do not decode.
arrow::Result<KubeflowTicket> DecodeKubeflowTicket(std::string_view bytes);

}  // namespace icefloe
